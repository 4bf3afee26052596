//! The seam where architectures plug in: one module per architecture, each turning the file's
//! checked hyper-parameters (gguf/hparams.rs) into its layers as parts (engine/model/parts/);
//! the tensors those parts read follow from them (parts/tensors.rs) and are checked at load.
//! Everything after that (the device engine, the fusions, the Rust reference) runs the parts
//! and never asks which architecture it is.
//!
//! The registry is `gguf::Arch` (its names, refused with the list of supported ones when a file
//! names another) and the exhaustive match in `shape`: a new `Arch` variant does not compile
//! until its module is named here. docs/adding-a-model.md walks through adding one.

mod gemma3;
mod hc_llama;
mod llama;
mod qwen4exp;

use super::config::ArchShape;
use crate::gguf::{Arch, HParams};

/// The architecture's layers for a file of `n_layer` blocks (`has`: whether the file holds a
/// tensor, for the layouts a converter may choose); Err says what does not fit.
pub fn shape(
    hp: &HParams,
    n_layer: usize,
    has: &dyn Fn(&str) -> bool,
) -> Result<ArchShape, String> {
    match hp.arch {
        Arch::Llama => llama::shape(hp, n_layer, has),
        Arch::Gemma3 => gemma3::shape(hp, n_layer, has),
        Arch::Qwen4exp => qwen4exp::shape(hp, n_layer, has),
        Arch::HcLlama => hc_llama::shape(hp, n_layer, has),
    }
}

/// The `general.architecture` names the engine runs.
pub fn supported() -> Vec<&'static str> {
    Arch::ALL.iter().map(|a| a.name()).collect()
}
