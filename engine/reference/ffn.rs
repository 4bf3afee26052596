//! The FFN, in the order device/ffn.rs runs it plain: gate, up = W h; act(gate) * up; Wdown.

use super::ops::{gelu_tanh, silu};
use super::weights::RefDense;
use crate::kernels::glu_q8::Glu;
use crate::model::parts::Dense;

pub fn dense(w: &RefDense, spec: &Dense, h: &[f32]) -> Vec<f32> {
    let (g, u) = (w.gate.mul(h), w.up.mul(h));
    let act = |g: f32| match spec.act {
        Glu::Silu => silu(g),
        Glu::GeluTanh => gelu_tanh(g),
    };
    let a: Vec<f32> = g.iter().zip(&u).map(|(&g, &u)| act(g) * u).collect();
    w.down.mul(&a)
}
