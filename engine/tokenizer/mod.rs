//! Tokenizers read from GGUF metadata: `gpt2` byte-level BPE (SmolLM2) and `llama`
//! SentencePiece-style BPE with byte fallback (Gemma 3); streaming-safe detokenization; chat
//! templates (`template`). Semantics follow llama.cpp (see docs/tokenizer.md).
//!
//! ```no_run
//! use strata::tokenizer::{Tokenizer, TokenizerSpec};
//! let spec = TokenizerSpec::from_gguf_path("model.gguf")?;
//! let tok = Tokenizer::from_spec(&spec)?;
//! let ids = tok.encode("Hello", true, false);
//! assert_eq!(tok.decode(&ids, false), "Hello");
//! # Ok::<(), strata::tokenizer::TokenizerError>(())
//! ```

mod bpe;
mod content;
mod error;
mod gguf_meta;
mod pretok;
mod spec;
mod special;
mod spm;
mod stream;
pub mod template;
mod unicode;

use std::collections::HashMap;

pub use error::TokenizerError;
pub use pretok::PreTokenizer;
pub use spec::{TokenType, TokenizerSpec};
pub use stream::StreamDecoder;
pub use template::{ChatMessage, ChatTemplate, RenderedChat, TemplateError};

use bpe::BpeModel;
use special::{Fragment, SpecialMatcher};
use spm::SpmModel;

/// Which of the two GGUF tokenizer families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// `gpt2`: byte-level BPE with merges and a pre-tokenizer.
    Gpt2,
    /// `llama`: SentencePiece-style, score-driven BPE with `<0xXX>` byte fallback.
    Llama,
}

enum Model {
    Bpe {
        bpe: Box<BpeModel>,
        pre: PreTokenizer,
    },
    Spm {
        byte_token: Box<[Option<u32>; 256]>,
    },
}

/// End-of-turn tokens llama.cpp recognises by text when `tokenizer.ggml.eot_token_id` is absent,
/// in the order we prefer them (llama.cpp's own pick among several is hash-order dependent).
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<end_of_utterance>",
];

/// Tokens that end generation besides EOS/EOT (llama.cpp's end-of-generation list).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

pub struct Tokenizer {
    kind: TokenizerKind,
    model: Model,
    tokens: Vec<Vec<u8>>,
    types: Vec<TokenType>,
    scores: Vec<f32>,
    token_to_id: HashMap<Vec<u8>, u32>,
    specials: SpecialMatcher,
    /// Bytes each token decodes to (control/unknown tokens: their text, shown only on request).
    pieces: Vec<Vec<u8>>,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
    eog: Vec<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    chat_template: Option<String>,
    name: Option<String>,
}

impl Tokenizer {
    /// Loads straight from a GGUF model file.
    pub fn from_gguf_path(path: impl AsRef<std::path::Path>) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::from_spec(&TokenizerSpec::from_gguf_path(path)?)
    }

    pub fn from_spec(spec: &TokenizerSpec) -> Result<Tokenizer, TokenizerError> {
        spec.validate()?;
        let n = spec.tokens.len();
        let kind = match spec.model.as_str() {
            "gpt2" => TokenizerKind::Gpt2,
            "llama" => TokenizerKind::Llama,
            other => return Err(TokenizerError::UnknownModel(other.to_string())),
        };
        let mut types: Vec<TokenType> = match &spec.token_types {
            Some(t) => t.iter().map(|&v| TokenType::from_gguf(v)).collect(),
            None => vec![TokenType::Normal; n],
        };
        // Later duplicates win, as in llama.cpp's token_to_id map.
        let mut token_to_id = HashMap::with_capacity(n);
        for (i, t) in spec.tokens.iter().enumerate() {
            token_to_id.insert(t.clone(), i as u32);
        }
        let find = |s: &str| token_to_id.get(s.as_bytes()).copied();
        let eot = spec
            .eot_id
            .or_else(|| EOT_TEXTS.iter().find_map(|t| find(t)));
        let mut eog: Vec<u32> = EOG_TEXTS.iter().filter_map(|t| find(t)).collect();
        eog.extend(spec.eos_id);
        eog.extend(eot);
        eog.sort_unstable();
        eog.dedup();
        // End-of-generation tokens must be control tokens (llama.cpp overrides their type too),
        // otherwise their text would be emitted and matched as ordinary text.
        for &id in &eog {
            if types[id as usize] == TokenType::Normal || types[id as usize] == TokenType::Undefined
            {
                types[id as usize] = TokenType::Control;
            }
        }
        let scores = spec.scores.clone().unwrap_or_else(|| vec![0.0; n]);
        let model = match kind {
            TokenizerKind::Gpt2 => {
                let merges = spec
                    .merges
                    .as_deref()
                    .ok_or_else(|| TokenizerError::MissingKey {
                        key: "tokenizer.ggml.merges (required by a gpt2 tokenizer)".into(),
                    })?;
                Model::Bpe {
                    bpe: Box::new(BpeModel::new(merges, &token_to_id)?),
                    pre: PreTokenizer::from_name(spec.pre.as_deref())?,
                }
            }
            TokenizerKind::Llama => {
                let mut byte_token = Box::new([None; 256]);
                for (b, slot) in byte_token.iter_mut().enumerate() {
                    *slot = find(&format!("<0x{b:02X}>"))
                        .or_else(|| token_to_id.get(&[b as u8][..]).copied());
                }
                Model::Spm { byte_token }
            }
        };
        let pieces = spec
            .tokens
            .iter()
            .zip(&types)
            .map(|(t, ty)| piece_bytes(kind, t, *ty))
            .collect();
        let specials = SpecialMatcher::new(&spec.tokens, &types);
        Ok(Tokenizer {
            kind,
            model,
            tokens: spec.tokens.clone(),
            types,
            scores,
            token_to_id,
            specials,
            pieces,
            bos: spec.bos_id,
            eos: spec.eos_id,
            eot,
            unk: spec.unk_id,
            pad: spec.pad_id,
            eog,
            add_bos: spec.add_bos,
            add_eos: spec.add_eos,
            add_space_prefix: spec.add_space_prefix,
            chat_template: spec.chat_template.clone(),
            name: spec.name.clone(),
        })
    }

    /// Text to token ids. `add_special`: add BOS/EOS as the model asks (`add_bos_token`,
    /// `add_eos_token`). `parse_special`: recognise control-token text such as `<|im_start|>` in
    /// `text`; otherwise it is tokenized as plain text (user-defined tokens always match).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.encode_blocked(text, add_special, parse_special, &[])
    }

    /// `encode` with control tokens recognised only outside the `blocked` byte ranges.
    fn encode_blocked(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
        blocked: &[std::ops::Range<usize>],
    ) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        let fragments = self.specials.split(text, parse_special, blocked);
        match &self.model {
            Model::Bpe { bpe, pre } => {
                let mut words = Vec::new();
                let mut cache: HashMap<&[u8], (usize, usize)> = HashMap::new();
                for f in fragments {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(r) => {
                            let frag = &text[r];
                            words.clear();
                            pre.split(frag, &mut words);
                            for w in &words {
                                let word = &frag.as_bytes()[w.clone()];
                                // Repeated words are common in long texts: reuse their ids.
                                if word.len() >= 4 {
                                    if let Some(&(s, l)) = cache.get(word) {
                                        out.extend_from_within(s..s + l);
                                        continue;
                                    }
                                }
                                let s = out.len();
                                bpe.encode_word(word, self.unk, &mut out);
                                if word.len() >= 4 {
                                    cache.insert(word, (s, out.len() - s));
                                }
                            }
                        }
                    }
                }
            }
            Model::Spm { byte_token } => {
                let spm = SpmModel {
                    token_to_id: &self.token_to_id,
                    scores: &self.scores,
                    byte_token,
                    unk: self.unk,
                };
                let mut prev_special = true;
                let mut buf = String::new();
                for f in fragments {
                    match f {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(r) => {
                            buf.clear();
                            if self.add_space_prefix && prev_special {
                                buf.push('\u{2581}');
                            }
                            for c in text[r].chars() {
                                buf.push(if c == ' ' { '\u{2581}' } else { c });
                            }
                            spm.encode(&buf, &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        out
    }

    /// Encodes a rendered chat prompt: only the chat template's own text can become control
    /// tokens; message content (`chat.content`) is text, so a message holding `<|im_end|>` cannot
    /// end its turn or open another. `parse_special` (an explicit opt-in) parses control-token
    /// text in the content too. BOS as in `encode_prompt`.
    pub fn encode_chat(&self, chat: &RenderedChat, parse_special: bool) -> Vec<u32> {
        let blocked: &[std::ops::Range<usize>] = if parse_special { &[] } else { &chat.content };
        self.with_bos(self.encode_blocked(&chat.prompt, false, true, blocked))
    }

    /// Encodes trusted prompt text with every control-token text in it parsed (a rendered chat
    /// whose content is trusted; use `encode_chat` for conversations), and BOS added when the
    /// model wants one unless the text already starts with it.
    pub fn encode_prompt(&self, prompt: &str) -> Vec<u32> {
        self.with_bos(self.encode(prompt, false, true))
    }

    fn with_bos(&self, ids: Vec<u32>) -> Vec<u32> {
        match self.bos {
            Some(b) if self.add_bos && ids.first() != Some(&b) => {
                let mut v = Vec::with_capacity(ids.len() + 1);
                v.push(b);
                v.extend(ids);
                v
            }
            _ => ids,
        }
    }

    /// Bytes of ids joined (control tokens only with `render_special`); the leading space that
    /// `add_space_prefix` inserted is removed from the first token, as llama.cpp does.
    pub fn decode_bytes(&self, ids: &[u32], render_special: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let p = self.piece(id, render_special);
            if i == 0 && self.add_space_prefix && p.first() == Some(&b' ') {
                out.extend_from_slice(&p[1..]);
            } else {
                out.extend_from_slice(p);
            }
        }
        out
    }

    /// Ids to text; invalid UTF-8 becomes U+FFFD.
    pub fn decode(&self, ids: &[u32], render_special: bool) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids, render_special)).into_owned()
    }

    /// The bytes one token contributes to the text (empty for control tokens unless
    /// `render_special`; U+FFFD for an id outside the vocabulary).
    pub fn piece(&self, id: u32, render_special: bool) -> &[u8] {
        match self.types.get(id as usize) {
            None => "\u{FFFD}".as_bytes(),
            Some(TokenType::Control | TokenType::Unknown) if !render_special => &[],
            Some(_) => &self.pieces[id as usize],
        }
    }

    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }
    /// The raw vocabulary entry (GGUF text, e.g. "Ġthe" or "▁the").
    pub fn token_text(&self, id: u32) -> Option<&[u8]> {
        self.tokens.get(id as usize).map(|v| v.as_slice())
    }
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(text.as_bytes()).copied()
    }
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }
    /// End-of-turn token (`<|im_end|>`, `<end_of_turn>`...), when the model has one.
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }
    pub fn unk(&self) -> Option<u32> {
        self.unk
    }
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }
    /// Every token that should stop generation (EOS, EOT and llama.cpp's known end tokens).
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }
    pub fn model_name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// Number of special (control, user-defined, unknown) tokens matched in text.
    pub fn special_count(&self) -> usize {
        self.specials.count
    }
    /// Merges ignored at load because a part or the result is not in the vocabulary.
    pub fn skipped_merges(&self) -> usize {
        match &self.model {
            Model::Bpe { bpe, .. } => bpe.skipped_merges,
            Model::Spm { .. } => 0,
        }
    }
}

/// What a token decodes to, by family and type (llama.cpp's token_to_piece with special=true).
fn piece_bytes(kind: TokenizerKind, text: &[u8], ty: TokenType) -> Vec<u8> {
    match ty {
        TokenType::Control | TokenType::Unknown | TokenType::UserDefined => text.to_vec(),
        TokenType::Unused | TokenType::Undefined => Vec::new(),
        TokenType::Byte => parse_byte_token(text).map(|b| vec![b]).unwrap_or_default(),
        TokenType::Normal => match kind {
            TokenizerKind::Llama => {
                let s = String::from_utf8_lossy(text);
                s.replace('\u{2581}', " ").into_bytes()
            }
            TokenizerKind::Gpt2 => {
                let s = String::from_utf8_lossy(text);
                let mut out = Vec::with_capacity(s.len());
                for c in s.chars() {
                    match unicode::char_to_byte(c) {
                        Some(b) => out.push(b),
                        // Not a byte stand-in: keep the char itself.
                        None => out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
                    }
                }
                out
            }
        },
    }
}

/// `<0xAB>` -> 0xAB.
fn parse_byte_token(text: &[u8]) -> Option<u8> {
    let s = std::str::from_utf8(text).ok()?;
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

// The engine shares one tokenizer between threads (behind an Arc).
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Tokenizer>();
    shareable::<template::ChatTemplate>();
};
