//! Request lines as bytes: a line that is not UTF-8 is that line's error, not the end of the input
//! (`BufRead::lines` fails on it, and the server used to take that for a dead stdin and exit).

use std::io::BufRead;

/// One line of input, without its `\n` (or `\r\n`).
pub enum Line {
    Text(String),
    /// Not UTF-8: the first bad byte's offset in the line and the line's length, in bytes.
    NotUtf8 {
        number: u64,
        bad_at: usize,
        len: usize,
    },
}

impl Line {
    /// The error a bad line gets (`fatal: false`: the engine reads on).
    pub fn describe_bad(number: u64, bad_at: usize, len: usize) -> String {
        format!(
            "bad request line {number} (not UTF-8: invalid byte at offset {bad_at} of its {len} \
             bytes); skipped"
        )
    }
}

/// The lines of `input`; an I/O error ends them (after being returned once).
pub struct Lines<R> {
    input: R,
    buf: Vec<u8>,
    number: u64,
    done: bool,
}

impl<R: BufRead> Lines<R> {
    pub fn new(input: R) -> Lines<R> {
        Lines {
            input,
            buf: Vec::new(),
            number: 0,
            done: false,
        }
    }
}

impl<R: BufRead> Iterator for Lines<R> {
    type Item = std::io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        self.buf.clear();
        let n = loop {
            match self.input.read_until(b'\n', &mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        };
        if n == 0 {
            self.done = true;
            return None;
        }
        self.number += 1;
        let mut line = &self.buf[..];
        line = line.strip_suffix(b"\n").unwrap_or(line);
        line = line.strip_suffix(b"\r").unwrap_or(line);
        Some(Ok(match std::str::from_utf8(line) {
            Ok(s) => Line::Text(s.to_string()),
            Err(e) => Line::NotUtf8 {
                number: self.number,
                bad_at: e.valid_up_to(),
                len: line.len(),
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_line_is_reported_and_reading_goes_on() {
        let input: &[u8] = b"{\"a\":1}\r\nab\xffcd\n\n{\"b\":2}";
        let lines: Vec<Line> = Lines::new(input).map(|l| l.unwrap()).collect();
        assert_eq!(lines.len(), 4);
        assert!(matches!(&lines[0], Line::Text(t) if t == "{\"a\":1}"));
        assert!(matches!(
            lines[1],
            Line::NotUtf8 {
                number: 2,
                bad_at: 2,
                len: 5
            }
        ));
        assert!(matches!(&lines[2], Line::Text(t) if t.is_empty()));
        assert!(matches!(&lines[3], Line::Text(t) if t == "{\"b\":2}"));
    }
}
