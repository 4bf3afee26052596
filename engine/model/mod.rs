//! Models: the per-file configuration (`config`), the weights on the device (`weights`), the
//! per-architecture layers (`llama`, `gemma3`) and the one engine loop they run in (`engine`).

pub mod config;
pub mod engine;
mod gemma3;
mod llama;
pub mod weights;

pub use config::{ConfigError, LayerConfig, ModelConfig};
pub use engine::{Engine, EngineOptions, LOGIT_ROWS};
pub use weights::DeviceMemory;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Quant(#[from] crate::quant::QuantError),
    #[error(transparent)]
    Sycl(#[from] crate::sycl::SyclError),
    #[error(transparent)]
    Matrix(#[from] crate::kernels::MatrixError),
    #[error("tensor {name}: {why}")]
    Tensor { name: String, why: String },
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("{n_tokens} tokens from position {start_pos} need a context of {}, but the context is {n_ctx} tokens", start_pos + n_tokens)]
    ContextFull {
        start_pos: usize,
        n_tokens: usize,
        n_ctx: usize,
    },
    #[error("a context of {ctx} tokens is larger than the model's training context {train}")]
    CtxPastTraining { ctx: usize, train: usize },
    #[error("start position {start_pos} is past the {pos} positions in the cache")]
    Gap { start_pos: usize, pos: usize },
    #[error("logit row {row} asked for a forward of {n_tokens} tokens")]
    Rows { row: usize, n_tokens: usize },
    #[error("token {token} (input index {index}) is outside the vocabulary of {n_vocab}")]
    Token {
        index: usize,
        token: u32,
        n_vocab: usize,
    },
    #[error("the logits at position {pos} hold a non-finite value {value} at token index {index}")]
    NonFinite {
        pos: usize,
        index: usize,
        value: f32,
    },
}
