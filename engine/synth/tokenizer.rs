//! The synthetic files' vocabulary: a SentencePiece-style `tokenizer.ggml.model = "llama"` one,
//! which llama.cpp (`LLAMA_VOCAB_TYPE_SPM`) and the engine's `llama` tokenizer both accept.
//!
//! Ids 0..=2 are `<unk>` (type 2, UNKNOWN), `<s>` and `</s>` (type 3, CONTROL: BOS and EOS);
//! ids 3..=258 the 256 byte tokens `<0x00>`..`<0xFF>` (type 6, BYTE; llama.cpp's SPM needs
//! `<0x0A>` for its newline token, and every character that is not a piece falls back to them);
//! then word pieces (type 1, NORMAL) with descending scores. SPM merges adjacent symbols whose
//! concatenation is a piece, so a word is only reachable through pieces for its prefixes: each
//! word of the list below comes with all its prefixes (`▁t`, `▁th`, `▁the`). After the words:
//! every lowercase letter pair, then `▁` + pair, as filler up to the requested size. Why SPM
//! rather than byte-level BPE: no merges list to keep consistent, and the byte fallback makes
//! any text encodable.

use crate::gguf::{GgufWriter, Result};

/// `<unk>`, `<s>`, `</s>` and the 256 byte tokens.
pub const N_FIXED: u32 = 259;
/// The fixed tokens plus `▁` and the 52 letters: below this, ordinary text is mostly bytes.
pub const MIN_VOCAB: u32 = N_FIXED + 1 + 52;

pub const UNK_ID: u32 = 0;
pub const BOS_ID: u32 = 1;
pub const EOS_ID: u32 = 2;

const TYPE_NORMAL: i32 = 1;
const TYPE_UNKNOWN: i32 = 2;
const TYPE_CONTROL: i32 = 3;
const TYPE_BYTE: i32 = 6;

/// Common English words, most frequent first (their prefixes become pieces too).
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "it", "that", "was", "for", "on", "are", "with", "as",
    "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "hot", "word",
    "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up",
    "use", "your", "how", "said", "an", "each", "she", "which", "do", "their", "time", "if",
    "will", "way", "about", "many", "then", "them", "write", "would", "like", "so", "these", "her",
    "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go",
    "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water",
    "than", "call", "first", "who", "may", "down", "side", "been", "now", "find", "model", "token",
    "layer", "stream", "quick", "brown", "fox", "jumps", "lazy", "dog",
];

/// Every piece after the fixed tokens, in id order (no duplicates).
fn pieces() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut push = |s: String, out: &mut Vec<String>| {
        if seen.insert(s.clone()) {
            out.push(s);
        }
    };
    push("▁".into(), &mut out);
    for c in ('a'..='z').chain('A'..='Z') {
        push(c.to_string(), &mut out);
    }
    for w in WORDS {
        let word: Vec<char> = format!("▁{w}").chars().collect();
        for end in 2..=word.len() {
            push(word[..end].iter().collect(), &mut out);
        }
    }
    for a in 'a'..='z' {
        for b in 'a'..='z' {
            push(format!("{a}{b}"), &mut out);
        }
    }
    for a in 'a'..='z' {
        for b in 'a'..='z' {
            push(format!("▁{a}{b}"), &mut out);
        }
    }
    out
}

/// The largest vocabulary `write` can fill.
pub fn max_vocab() -> u32 {
    N_FIXED + pieces().len() as u32
}

/// The first `n_vocab` tokens with their scores and types. Precondition (checked by
/// `SynthGeometry::validate`): MIN_VOCAB <= n_vocab <= max_vocab().
pub fn vocab(n_vocab: u32) -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens = vec!["<unk>".to_string(), "<s>".to_string(), "</s>".to_string()];
    let mut types = vec![TYPE_UNKNOWN, TYPE_CONTROL, TYPE_CONTROL];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(TYPE_BYTE);
    }
    let mut scores = vec![0.0f32; tokens.len()];
    for (i, p) in pieces()
        .into_iter()
        .take((n_vocab - N_FIXED) as usize)
        .enumerate()
    {
        tokens.push(p);
        types.push(TYPE_NORMAL);
        // earlier pieces merge first when two candidate pairs compete
        scores.push(-(i as f32) - 1.0);
    }
    (tokens, scores, types)
}

/// Writes the `tokenizer.ggml.*` keys for `n_vocab` tokens.
pub fn write(w: &mut GgufWriter, n_vocab: u32) -> Result<()> {
    let (tokens, scores, types) = vocab(n_vocab);
    w.set("tokenizer.ggml.model", "llama")?;
    w.set("tokenizer.ggml.tokens", tokens)?;
    w.set("tokenizer.ggml.scores", scores)?;
    w.set("tokenizer.ggml.token_type", types)?;
    w.set("tokenizer.ggml.bos_token_id", BOS_ID)?;
    w.set("tokenizer.ggml.eos_token_id", EOS_ID)?;
    w.set("tokenizer.ggml.unknown_token_id", UNK_ID)?;
    w.set("tokenizer.ggml.add_bos_token", true)?;
    w.set("tokenizer.ggml.add_eos_token", false)?;
    w.set("tokenizer.ggml.add_space_prefix", true)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::{Tokenizer, TokenizerSpec};

    fn tokenizer(n_vocab: u32) -> Tokenizer {
        let mut w = GgufWriter::new();
        write(&mut w, n_vocab).expect("valid keys");
        let g = crate::gguf::Gguf::from_bytes(w.to_bytes().expect("writer output"))
            .expect("the writer's file reads back");
        let spec = TokenizerSpec::from_gguf(&g).expect("the engine accepts the vocabulary");
        Tokenizer::from_spec(&spec).expect("a valid tokenizer")
    }

    #[test]
    fn unique_pieces_and_bounds() {
        let p = pieces();
        let set: std::collections::HashSet<_> = p.iter().collect();
        assert_eq!(set.len(), p.len(), "pieces are unique");
        assert!(max_vocab() > 1500, "{}", max_vocab());
        let (t, s, ty) = vocab(MIN_VOCAB);
        assert_eq!(
            (t.len(), s.len(), ty.len()),
            (MIN_VOCAB as usize, MIN_VOCAB as usize, MIN_VOCAB as usize)
        );
        assert_eq!(t[3 + 0x0A], "<0x0A>");
        assert_eq!(ty[3 + 0x41], TYPE_BYTE);
    }

    #[test]
    fn engine_tokenizer_round_trips_and_uses_pieces() {
        let tok = tokenizer(320);
        let text = "The quick brown fox jumps over the lazy dog.\nIt was 42°C!";
        let ids = tok.encode(text, true, false);
        assert_eq!(ids[0], BOS_ID, "add_bos");
        // the prefix space add_space_prefix put in front goes again when decoding from the first
        // text token; after a BOS llama.cpp keeps it (llama_vocab::impl::detokenize), as here
        assert_eq!(tok.decode(&ids[1..], false), text, "{ids:?}");
        assert_eq!(tok.decode(&ids, false), format!(" {text}"));
        // whole words are single pieces, the digits, '.', '°' and '!' fall back to bytes
        let the = tok.token_id("▁the").expect("▁the is a piece");
        assert!(ids.contains(&the), "{ids:?}");
        let byte_4 = 3 + b'4' as u32;
        assert!(ids.contains(&byte_4), "{ids:?}");
        assert!(
            ids.len() > 12 && ids.len() < text.len(),
            "{} ids",
            ids.len()
        );
    }
}
