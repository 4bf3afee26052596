//! The FFN's declaration: `Dense` (gate/up/down) or `Moe` (a router over experts, an optional
//! shared expert with its own per-token sigmoid gate; `qwen4exp`).

use crate::kernels::glu_q8::Glu;

#[derive(Clone, Debug, PartialEq)]
pub enum Ffn {
    Dense(Dense),
    Moe(Moe),
}

/// down(act(gate h) * up h).
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    /// Hidden width (this layer's).
    pub n_ff: usize,
    pub act: Glu,
}

/// A router picks `n_used` of `n_expert` experts per token (each a `Dense` of `n_ff` wide); the
/// optional shared expert runs for every token.
#[derive(Clone, Debug, PartialEq)]
pub struct Moe {
    pub n_expert: usize,
    pub n_used: usize,
    pub n_ff: usize,
    pub act: Glu,
    /// The shared expert's hidden width, when there is one.
    pub shared_ff: Option<usize>,
    /// The shared expert's output is scaled per token by sigmoid(ffn_gate_inp_shexp · h).
    pub shared_gate: bool,
    /// The experts' gate and up matrices are one tensor `ffn_gate_up_exps` (n_embd, 2 n_ff,
    /// n_expert): rows 0..n_ff gate, n_ff..2 n_ff up.
    pub fused_gate_up: bool,
}

/// The router's gating, as llama.cpp's `qwen4exp` hard-codes it (the file's gating keys are
/// ignored there and here): p = softmax(router logits); the top `n_used` by p, ties to the
/// lower id; their p renormalised by their sum (clamped below at 6.103515625e-5, the smallest
/// f16 normal).
pub const MOE_WEIGHT_SUM_MIN: f32 = 6.103515625e-5;

impl Ffn {
    /// The widest hidden activation the part writes per token.
    pub fn width(&self) -> usize {
        match self {
            Ffn::Dense(d) => d.n_ff,
            Ffn::Moe(m) => m.n_ff.max(m.shared_ff.unwrap_or(0)),
        }
    }
}
