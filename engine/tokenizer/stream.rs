//! Incremental detokenization for streaming output: a UTF-8 char split across tokens (byte
//! fallback, byte-level BPE) is emitted once, when complete; invalid sequences become U+FFFD.

use super::Tokenizer;

/// Holds the undecodable tail between pushes. It does not borrow the tokenizer, so it can live in
/// a per-request state next to an `Arc<Tokenizer>`.
#[derive(Debug, Default, Clone)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    render_special: bool,
}

impl StreamDecoder {
    /// `render_special`: emit the text of control tokens (e.g. `<|im_end|>`) instead of nothing.
    pub fn new(render_special: bool) -> StreamDecoder {
        StreamDecoder {
            pending: Vec::new(),
            render_special,
        }
    }

    /// Adds one token; returns the text that became complete (often empty mid-char).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> String {
        let piece = tok.piece(id, self.render_special);
        self.push_bytes(piece)
    }

    /// Adds raw bytes; returns the text that became complete.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // valid_up_to marks a prefix that is valid UTF-8 by definition.
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        // An invalid sequence: replace it and go on after it.
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &bad[n..];
                        }
                        // A truncated char at the end: keep it for the next push.
                        None => {
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drop = self.pending.len() - keep;
        self.pending.drain(..drop);
        out
    }

    /// Ends the stream: a still-incomplete char becomes U+FFFD.
    pub fn flush(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }

    /// Bytes held back waiting for the rest of a char.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_char_emitted_once_when_complete() {
        let mut d = StreamDecoder::new(false);
        let e = "é😀".as_bytes(); // c3 a9 f0 9f 98 80
        assert_eq!(d.push_bytes(&e[..1]), "");
        assert_eq!(d.push_bytes(&e[1..3]), "é");
        assert_eq!(d.push_bytes(&e[3..5]), "");
        assert_eq!(d.push_bytes(&e[5..]), "😀");
        assert_eq!(d.flush(), "");
    }

    #[test]
    fn invalid_bytes_become_replacement() {
        let mut d = StreamDecoder::new(false);
        assert_eq!(d.push_bytes(b"a\xffb\xc3"), "a\u{FFFD}b");
        assert_eq!(d.pending_len(), 1);
        assert_eq!(d.push_bytes(b"("), "\u{FFFD}(");
        assert_eq!(d.push_bytes(b"\xe2\x82"), "");
        assert_eq!(d.flush(), "\u{FFFD}");
    }
}
