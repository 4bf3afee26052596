//! `TokenizerSpec`: everything a tokenizer needs, as read from a model's `tokenizer.*` metadata.
//! Kept as a plain struct so any GGUF reader (or a test) can fill it in.

use super::error::TokenizerError;

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    Undefined,
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    /// Maps the GGUF integer; values outside 0..=6 are treated as `Undefined` (decoded as nothing).
    pub fn from_gguf(v: i32) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

/// The tokenizer half of a model file. Field names follow the GGUF keys (`tokenizer.ggml.*`).
#[derive(Clone, Debug, Default)]
pub struct TokenizerSpec {
    /// `tokenizer.ggml.model`: "gpt2" (byte-level BPE) or "llama" (SentencePiece-style BPE).
    pub model: String,
    /// `tokenizer.ggml.pre`: selects the pre-tokenizer split rules of a gpt2 tokenizer.
    pub pre: Option<String>,
    /// Token texts, indexed by id. Raw bytes: GGUF strings are not guaranteed UTF-8.
    pub tokens: Vec<Vec<u8>>,
    /// `tokenizer.ggml.scores` (llama model: merge priority, higher merges first).
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type` (GGUF integers, see [`TokenType::from_gguf`]).
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.merges` ("left right", rank = index) for gpt2 tokenizers.
    pub merges: Option<Vec<String>>,
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`; when absent the tokenizer looks for a well-known end-of-turn token.
    pub eot_id: Option<u32>,
    pub unk_id: Option<u32>,
    pub pad_id: Option<u32>,
    /// Add BOS when `encode(.., add_special = true)`.
    pub add_bos: bool,
    /// Add EOS when `encode(.., add_special = true)`.
    pub add_eos: bool,
    /// llama model: prepend a space to text that starts the input or follows a special token.
    pub add_space_prefix: bool,
    /// `tokenizer.chat_template` (Jinja source).
    pub chat_template: Option<String>,
    /// `general.name`, for messages only.
    pub name: Option<String>,
}

impl TokenizerSpec {
    /// Defaults llama.cpp applies when a model file omits `add_bos_token` / `add_space_prefix`.
    pub fn default_flags(model: &str) -> (bool, bool) {
        // (add_bos, add_space_prefix)
        match model {
            "llama" => (true, true),
            _ => (false, false),
        }
    }

    /// Checks sizes and ids so the tokenizer can index without further checks.
    pub fn validate(&self) -> Result<(), TokenizerError> {
        let n = self.tokens.len();
        if n == 0 {
            return Err(TokenizerError::BadValue {
                key: "tokenizer.ggml.tokens".into(),
                msg: "empty vocabulary".into(),
            });
        }
        if n > u32::MAX as usize {
            return Err(TokenizerError::BadValue {
                key: "tokenizer.ggml.tokens".into(),
                msg: format!("{n} tokens do not fit a u32 id"),
            });
        }
        if let Some(s) = &self.scores {
            if s.len() != n {
                return Err(TokenizerError::BadValue {
                    key: "tokenizer.ggml.scores".into(),
                    msg: format!("{} scores for {n} tokens", s.len()),
                });
            }
        }
        if let Some(t) = &self.token_types {
            if t.len() != n {
                return Err(TokenizerError::BadValue {
                    key: "tokenizer.ggml.token_type".into(),
                    msg: format!("{} types for {n} tokens", t.len()),
                });
            }
        }
        let ids = [
            ("tokenizer.ggml.bos_token_id", self.bos_id),
            ("tokenizer.ggml.eos_token_id", self.eos_id),
            ("tokenizer.ggml.eot_token_id", self.eot_id),
            ("tokenizer.ggml.unknown_token_id", self.unk_id),
            ("tokenizer.ggml.padding_token_id", self.pad_id),
        ];
        for (key, id) in ids {
            if let Some(id) = id {
                if id as usize >= n {
                    return Err(TokenizerError::BadValue {
                        key: key.into(),
                        msg: format!("id {id} out of range (vocabulary has {n} tokens)"),
                    });
                }
            }
        }
        if self.add_bos && self.bos_id.is_none() {
            return Err(TokenizerError::MissingKey {
                key: "tokenizer.ggml.bos_token_id (add_bos_token is true)".into(),
            });
        }
        if self.add_eos && self.eos_id.is_none() {
            return Err(TokenizerError::MissingKey {
                key: "tokenizer.ggml.eos_token_id (add_eos_token is true)".into(),
            });
        }
        Ok(())
    }
}
