//! Models: the per-file configuration (`config`), the per-architecture forward passes
//! (`llama`, `gemma3`) and the device engine loop they run on (`engine`).

pub mod config;

pub use config::{ConfigError, LayerConfig, ModelConfig};
