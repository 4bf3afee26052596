//! Errors from loading a tokenizer (GGUF metadata, vocabulary checks) and from chat templates.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The GGUF header/metadata is malformed (bad magic, truncated, absurd length).
    #[error("{path}: bad GGUF metadata: {msg}")]
    Gguf { path: PathBuf, msg: String },
    /// A required `tokenizer.*` key is absent.
    #[error("tokenizer metadata: missing key `{key}`")]
    MissingKey { key: String },
    /// A key is present but its type or value is wrong.
    #[error("tokenizer metadata: key `{key}`: {msg}")]
    BadValue { key: String, msg: String },
    #[error("unsupported tokenizer model `{0}` (supported: gpt2, llama)")]
    UnknownModel(String),
    #[error("unsupported pre-tokenizer `{0}` for a gpt2 tokenizer (supported: default, gpt2, smollm, starcoder, refact, command-r, codeshell, exaone, minerva)")]
    UnknownPre(String),
}
