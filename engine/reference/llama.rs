//! One llama (SmolLM2) layer, pre-norm: x += Wo·attn(rope(Wq h), rope(Wk h), Wv h) with
//! h = norm(x); then x += Wdown·(silu(Wgate h) * Wup h) with h = norm(x).

use super::ops::{attention, f16_round, rms_norm, rope, silu};
use super::RefLayer;
use crate::model::config::ModelConfig;

pub fn layer(
    c: &ModelConfig,
    il: usize,
    w: &RefLayer,
    x: &mut [f32],
    pos: usize,
    keys: &mut Vec<Vec<f32>>,
    values: &mut Vec<Vec<f32>>,
) {
    let lc = &c.layers[il];
    let h = rms_norm(x, &w.attn_norm, c.rms_eps);
    let mut q = w.wq.mul(&h);
    let mut k = w.wk.mul(&h);
    let v = w.wv.mul(&h);
    let p = pos as f64 * c.rope_scale as f64;
    rope(&mut q, c.head_dim, c.n_rot, p, lc.rope_base, c.rope_neox);
    rope(&mut k, c.head_dim, c.n_rot, p, lc.rope_base, c.rope_neox);
    keys.push(f16_round(&k));
    values.push(f16_round(&v));
    let lo = if lc.window > 0 {
        (pos + 1).saturating_sub(lc.window)
    } else {
        0
    };
    let a = attention(
        &q,
        keys,
        values,
        lo,
        pos,
        c.n_head,
        c.n_kv_head,
        c.head_dim,
        c.attn_scale,
    );
    for (xv, o) in x.iter_mut().zip(w.wo.mul(&a)) {
        *xv += o;
    }
    let h = rms_norm(x, &w.ffn_norm, c.rms_eps);
    let g = w.gate.mul(&h);
    let u = w.up.mul(&h);
    let act: Vec<f32> = g.iter().zip(&u).map(|(&g, &u)| silu(g) * u).collect();
    for (xv, d) in x.iter_mut().zip(w.down.mul(&act)) {
        *xv += d;
    }
}
