//! The head, written once for the in-step path (the decode step and the verify window, rows
//! 0..n) and the host-selected rows of a prompt: the residual's output read (`norm_rows`;
//! Single: rms_norm(x) * output_norm; Hyper: the head's mixer) and the product by the head
//! (`logits`).

use super::kernels::Kernels;
use super::scratch::Scratch;
use crate::model::config::ModelConfig;
use crate::model::parts::Residual;
use crate::model::weights::{ReadWeights, Weights};
use crate::model::EngineError;
use crate::sycl::{DeviceBuffer, Queue};

/// s.h = the head's input for the t residual rows of s.x (Hyper: the head's mixer over the S
/// streams, every pending write already applied).
pub fn norm_rows(
    k: &Kernels,
    q: &Queue,
    c: &ModelConfig,
    w: &Weights,
    s: &Scratch,
    t: usize,
) -> Result<(), EngineError> {
    match (&w.output_read, c.residual) {
        (ReadWeights::Norm(norm), Residual::Single) => k
            .norm
            .rms_norm(q, &s.x, norm, &s.h, t, c.n_embd, c.rms_eps)?,
        (ReadWeights::Hyper(hw), Residual::Hyper(h)) => {
            super::hyper::read(k, q, c, h, s, hw, false, t)?
        }
        _ => {
            return Err(EngineError::Unsupported(
                "the head's read does not match the residual".into(),
            ))
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
