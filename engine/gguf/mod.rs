//! GGUF files: a validating reader over a memory map (`Gguf`), typed metadata accessors, ggml
//! tensor types (`GgmlType`), per-architecture hyper-parameters (`HParams`) and a writer
//! (`GgufWriter`). See docs/gguf.md for the checks and the decisions behind them.

mod accessors;
mod cursor;
mod error;
mod ggml_type;
mod hparams;
mod hparams_hcllama;
mod hparams_qwen4exp;
mod reader;
mod value;
mod vocab;
mod writer;

pub use accessors::FromValue;
pub use error::{GgufError, Result};
pub use ggml_type::GgmlType;
pub use hparams::{Arch, ArchParams, Gemma3Params, HParams};
pub use hparams_hcllama::{HcLlamaParams, ARCH as HC_LLAMA_ARCH};
pub use hparams_qwen4exp::Qwen4expParams;
pub use reader::{Gguf, TensorInfo, DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS};
pub use value::{Array, Value, ValueType};
pub use vocab::{MERGES_KEY, SCORES_KEY, TOKENS_KEY, TOKEN_TYPE_KEY};
pub use writer::GgufWriter;
