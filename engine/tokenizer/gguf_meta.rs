//! `TokenizerSpec` from a model file's `tokenizer.*` metadata, read through the engine's validating
//! GGUF reader (`crate::gguf`), so the tokenizer never parses GGUF bytes itself.

use std::path::Path;

use super::error::TokenizerError;
use super::spec::TokenizerSpec;
use crate::gguf::{Gguf, GgufError};

/// A GGUF reader error in the tokenizer's terms, keeping the reader's message (it names the key).
fn in_file(g: &Gguf, e: GgufError) -> TokenizerError {
    TokenizerError::Gguf {
        path: g.path().map(Path::to_path_buf).unwrap_or_default(),
        msg: e.to_string(),
    }
}

/// A token id key; llama.cpp writes -1 (as i32, or u32::MAX) for "no such token".
fn opt_id(g: &Gguf, key: &str) -> Result<Option<u32>, TokenizerError> {
    match g.opt_as::<i64>(key).map_err(|e| in_file(g, e))? {
        None => Ok(None),
        Some(i) if i < 0 || i == u32::MAX as i64 => Ok(None),
        Some(i) => u32::try_from(i)
            .map(Some)
            .map_err(|_| TokenizerError::BadValue {
                key: key.into(),
                msg: format!("token id {i} out of range"),
            }),
    }
}

impl TokenizerSpec {
    /// Reads the tokenizer metadata of a GGUF model file.
    pub fn from_gguf_path(path: impl AsRef<Path>) -> Result<TokenizerSpec, TokenizerError> {
        let path = path.as_ref();
        let g = Gguf::open(path).map_err(|e| TokenizerError::Gguf {
            path: path.into(),
            msg: e.to_string(),
        })?;
        TokenizerSpec::from_gguf(&g)
    }

    /// Reads the tokenizer metadata of an opened GGUF file.
    pub fn from_gguf(g: &Gguf) -> Result<TokenizerSpec, TokenizerError> {
        let err = |e| in_file(g, e);
        let model = g.get_str("tokenizer.ggml.model").map_err(err)?.to_string();
        let strings = |key: &str| -> Result<Option<Vec<String>>, TokenizerError> {
            Ok(g.opt_as::<&[String]>(key)
                .map_err(err)?
                .map(<[String]>::to_vec))
        };
        let tokens = g
            .get_str_array("tokenizer.ggml.tokens")
            .map_err(err)?
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        let flag = |key: &str| g.opt_bool(key).map_err(err);
        let (def_bos, def_space) = TokenizerSpec::default_flags(&model);
        let spec = TokenizerSpec {
            pre: g
                .opt_str("tokenizer.ggml.pre")
                .map_err(err)?
                .map(str::to_string),
            tokens,
            scores: g
                .opt_as::<&[f32]>("tokenizer.ggml.scores")
                .map_err(err)?
                .map(<[f32]>::to_vec),
            token_types: g
                .opt_as::<&[i32]>("tokenizer.ggml.token_type")
                .map_err(err)?
                .map(<[i32]>::to_vec),
            merges: strings("tokenizer.ggml.merges")?,
            bos_id: opt_id(g, "tokenizer.ggml.bos_token_id")?,
            eos_id: opt_id(g, "tokenizer.ggml.eos_token_id")?,
            eot_id: opt_id(g, "tokenizer.ggml.eot_token_id")?,
            unk_id: opt_id(g, "tokenizer.ggml.unknown_token_id")?,
            pad_id: opt_id(g, "tokenizer.ggml.padding_token_id")?,
            add_bos: flag("tokenizer.ggml.add_bos_token")?.unwrap_or(def_bos),
            add_eos: flag("tokenizer.ggml.add_eos_token")?.unwrap_or(false),
            add_space_prefix: flag("tokenizer.ggml.add_space_prefix")?.unwrap_or(def_space),
            chat_template: g
                .opt_str("tokenizer.chat_template")
                .map_err(err)?
                .map(str::to_string),
            name: g.opt_str("general.name").map_err(err)?.map(str::to_string),
            model,
        };
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufWriter;

    fn spec_of(w: &GgufWriter) -> Result<TokenizerSpec, TokenizerError> {
        let g = Gguf::from_bytes(w.to_bytes().expect("writer output")).map_err(|e| {
            TokenizerError::Gguf {
                path: "<memory>".into(),
                msg: e.to_string(),
            }
        })?;
        TokenizerSpec::from_gguf(&g)
    }

    #[test]
    fn reads_written_metadata() {
        let mut w = GgufWriter::new();
        w.set("tokenizer.ggml.model", "gpt2").expect("valid key");
        w.set(
            "tokenizer.ggml.tokens",
            vec!["a".to_string(), "bc".to_string()],
        )
        .expect("valid key");
        w.set("tokenizer.ggml.bos_token_id", -1i32)
            .expect("valid key");
        let spec = spec_of(&w).expect("valid metadata");
        assert_eq!(spec.model, "gpt2");
        assert_eq!(spec.tokens, vec![b"a".to_vec(), b"bc".to_vec()]);
        assert_eq!(spec.bos_id, None, "-1 means no such token");
        assert!(!spec.add_bos);
    }

    #[test]
    fn missing_and_mistyped_keys_are_named() {
        let mut w = GgufWriter::new();
        w.set("general.name", "x").expect("valid key");
        let e = spec_of(&w).unwrap_err().to_string();
        assert!(e.contains("tokenizer.ggml.model"), "{e}");
        w.set("tokenizer.ggml.model", 7u32).expect("valid key");
        let e = spec_of(&w).unwrap_err().to_string();
        assert!(
            e.contains("tokenizer.ggml.model") && e.contains("u32"),
            "{e}"
        );
    }
}
