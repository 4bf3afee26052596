//! The FFN's declaration: `Dense` (gate/up/down) or `Moe` (a router over experts, an optional
//! shared expert). No shipped architecture declares `Moe` yet (issue 25's does); the type is
//! here so its tensors, weights and the places that must handle it are named already.

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
}

impl Ffn {
    /// The widest hidden activation the part writes per token.
    pub fn width(&self) -> usize {
        match self {
            Ffn::Dense(d) => d.n_ff,
            Ffn::Moe(m) => m.n_ff.max(m.shared_ff.unwrap_or(0)),
        }
    }
}
