//! Models. Where a new architecture plugs in, and what runs it:
//! - `arch/`: one module per architecture (llama, gemma3), each declaring its layers as parts
//!   from the file's hyper-parameters; the registry is `arch::shape`'s exhaustive match.
//! - `parts/`: the part types (residual stream, token mixer, FFN `Dense | Moe`, per-layer
//!   settings) and the tensors they read with their shapes (`parts/tensors.rs`, checked at load).
//! - `config.rs`: `ModelConfig`, one per file.
//! - `weights/`: the weights on the device, typed by part; the loader.
//! - `device/`: each part's plain device path (`residual`, `attention`, `ffn`, `head`), the
//!   products, the scratch, one card's `Stage`, and the step loop over the parts.
//! - `plan/`: the fusions, each optional, switched and bitwise the plain path; the step graphs.
//! - `engine.rs` (forward, rollback, the head's rows) and `load.rs` (building an `Engine`).
//!
//! The Rust reference (engine/reference/) runs the same parts in f64. docs/adding-a-model.md
//! walks a new architecture through these files.

pub mod arch;
pub mod config;
pub mod device;
pub mod engine;
mod load;
pub mod parts;
pub mod plan;
pub mod weights;

pub use config::{ConfigError, LayerConfig, ModelConfig};
pub use device::stage::layer_ranges;
pub use engine::{Engine, EngineOptions, LOGIT_ROWS};
pub use plan::Plan;
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
