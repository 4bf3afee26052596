//! The head, written once for the in-step path (the decode step and the verify window, rows
//! 0..n) and the host-selected rows of a prompt: the residual's output read (`norm_rows`;
//! Single: rms_norm(x) * output_norm) and the product by the head (`logits`).

use super::kernels::Kernels;
use super::scratch::Scratch;
use crate::model::config::ModelConfig;
use crate::model::parts::Residual;
use crate::model::weights::Weights;
use crate::model::EngineError;
use crate::sycl::{DeviceBuffer, Queue};

/// s.h = the head's input for the t residual rows of s.x.
pub fn norm_rows(
    k: &Kernels,
    q: &Queue,
    c: &ModelConfig,
    w: &Weights,
    s: &Scratch,
    t: usize,
) -> Result<(), EngineError> {
    match c.residual {
        Residual::Single => {
            k.norm
                .rms_norm(q, &s.x, &w.output_norm, &s.h, t, c.n_embd, c.rms_eps)?
        }
    }
    Ok(())
}

/// out = head rows for n rows, the rows rounded for the head first (`Kernels::mul`).
#[allow(clippy::too_many_arguments)]
pub fn logits(
    k: &Kernels,
    q: &Queue,
    c: &ModelConfig,
    w: &Weights,
    rows: &DeviceBuffer<f32>,    // (n, n_embd)
    xq: &DeviceBuffer<f32>,      // Scratch::xq
    xst: &DeviceBuffer<f32>,     // Scratch::xst
    out: &mut DeviceBuffer<f32>, // (n, n_vocab)
    n: usize,
) -> Result<(), EngineError> {
    k.mul(q, &w.head(c), rows, xq, Some(xst), out, n)
}
