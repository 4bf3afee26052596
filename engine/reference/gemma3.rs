//! One Gemma 3 layer: like llama but with per-head RMSNorm on q and k (before RoPE, NEOX
//! rotation), a norm on the attention output and on the FFN output before each residual add,
//! GELU-tanh gating, and sliding-window attention on local layers. The GGUF norm weights already
//! include Gemma's "+1" (llama.cpp's converter adds it), so they multiply directly.

use super::ops::{attention, f16_round, gelu_tanh, rms_norm, rope};
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
    let hd = c.head_dim;
    // Present for every gemma3 layer: RefModel::load reads them when arch == Gemma3.
    let (qn, kn) = (
        w.q_norm.as_deref().unwrap_or(&[]),
        w.k_norm.as_deref().unwrap_or(&[]),
    );
    let head_norm = |v: Vec<f32>, g: &[f32]| -> Vec<f32> {
        v.chunks_exact(hd)
            .flat_map(|head| rms_norm(head, g, c.rms_eps))
            .collect()
    };
    let h = rms_norm(x, &w.attn_norm, c.rms_eps);
    let mut q = head_norm(w.wq.mul(&h), qn);
    let mut k = head_norm(w.wk.mul(&h), kn);
    let v = w.wv.mul(&h);
    let p = pos as f64 * c.rope_scale as f64;
    rope(&mut q, hd, c.n_rot, p, lc.rope_base, c.rope_neox);
    rope(&mut k, hd, c.n_rot, p, lc.rope_base, c.rope_neox);
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
        hd,
        c.attn_scale,
    );
    let o = w.wo.mul(&a);
    let o = match &w.post_attn_norm {
        Some(g) => rms_norm(&o, g, c.rms_eps),
        None => o,
    };
    for (xv, o) in x.iter_mut().zip(o) {
        *xv += o;
    }
    let h = rms_norm(x, &w.ffn_norm, c.rms_eps);
    let g = w.gate.mul(&h);
    let u = w.up.mul(&h);
    let act: Vec<f32> = g.iter().zip(&u).map(|(&g, &u)| gelu_tanh(g) * u).collect();
    let f = w.down.mul(&act);
    let f = match &w.post_ffw_norm {
        Some(g) => rms_norm(&f, g, c.rms_eps),
        None => f,
    };
    for (xv, f) in x.iter_mut().zip(f) {
        *xv += f;
    }
}
