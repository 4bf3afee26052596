//! Consistency checks on the tokenizer metadata, run when a file is opened so the tokenizer can
//! index its tables without re-checking: the per-token tables have one entry per token, and every
//! special-token id (`tokenizer.ggml.*_token_id`) names an existing token.

use std::collections::HashMap;

use super::accessors::convert;
use super::error::{GgufError, Result};
use super::value::Value;

pub const TOKENS_KEY: &str = "tokenizer.ggml.tokens";
pub const SCORES_KEY: &str = "tokenizer.ggml.scores";
pub const TOKEN_TYPE_KEY: &str = "tokenizer.ggml.token_type";
pub const MERGES_KEY: &str = "tokenizer.ggml.merges";

pub(crate) fn check_vocab(
    metadata: &[(String, Value)],
    index: &HashMap<String, usize>,
) -> Result<()> {
    let typed = |key: &str| index.get(key).map(|&i| (key.to_string(), &metadata[i].1));
    if let Some((k, v)) = typed(MERGES_KEY) {
        convert::<&[String]>(&k, v)?;
    }
    let Some((k, v)) = typed(TOKENS_KEY) else {
        return check_special_ids(metadata, None);
    };
    let n_vocab = convert::<&[String]>(&k, v)?.len() as u64;
    if let Some((k, v)) = typed(SCORES_KEY) {
        let len = convert::<&[f32]>(&k, v)?.len() as u64;
        if len != n_vocab {
            return Err(GgufError::VocabLength {
                key: k,
                len,
                n_vocab,
            });
        }
    }
    if let Some((k, v)) = typed(TOKEN_TYPE_KEY) {
        let len = convert::<&[i32]>(&k, v)?.len() as u64;
        if len != n_vocab {
            return Err(GgufError::VocabLength {
                key: k,
                len,
                n_vocab,
            });
        }
    }
    check_special_ids(metadata, Some(n_vocab))
}

/// Every `tokenizer.ggml.*_token_id` (bos, eos, unknown, padding, sep, ...) must be an integer
/// and, when the vocabulary is present, name one of its tokens (or be -1: none).
fn check_special_ids(metadata: &[(String, Value)], n_vocab: Option<u64>) -> Result<()> {
    for (key, v) in metadata {
        let key = key.as_str();
        if !(key.starts_with("tokenizer.ggml.") && key.ends_with("_token_id")) {
            continue;
        }
        let Some(id) = v.as_integer() else {
            return Err(GgufError::WrongType {
                key: key.into(),
                expected: "u32".into(),
                actual: v.type_name(),
            });
        };
        // llama.cpp writes -1 (as i32, or as u32::MAX) for "this model has no such token".
        let absent = id == -1 || id == i128::from(u32::MAX);
        if let (Some(n_vocab), false) = (n_vocab, absent) {
            if id < 0 || id >= i128::from(n_vocab) {
                // Negative ids are reported as their two's-complement u64, which is out of range too.
                return Err(GgufError::TokenIdOutOfRange {
                    key: key.into(),
                    id: id as u64,
                    n_vocab,
                });
            }
        }
    }
    Ok(())
}
