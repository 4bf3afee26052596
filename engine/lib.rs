//! Strata's inference engine: GGUF, quant formats, tokenizer, models, scheduler, speculative
//! decoding, metrics, and the Rust side of the SYCL shim. The app (`app/`) reaches inference only
//! through the engine process protocol (`protocol`).

pub mod convert;
pub mod flags;
pub mod generate;
pub mod gguf;
pub mod kernels;
pub mod model;
pub mod paths;
pub mod protocol;
pub mod quant;
pub mod reference;
pub mod sampling;
pub mod server;
pub mod spec;
pub mod sycl;
pub mod synth;
pub mod tokenizer;
