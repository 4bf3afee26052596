//! The attention mixer, in the order device/attention.rs runs it plain: q, k, v = W h; [per-head
//! rms_norm of q and k]; RoPE; k, v into the cache (rounded through f16, as the device stores
//! them); attention over the layer's window; Wo att.

use super::ops::{attention, f16_round, rms_norm, rope};
use super::weights::RefAttn;
use crate::model::config::ModelConfig;
use crate::model::parts::Attention;

/// One token's attention output at `pos`, its k and v appended to the layer's cache.
pub fn run(
    c: &ModelConfig,
    w: &RefAttn,
    spec: &Attention,
    h: &[f32],
    pos: usize,
    keys: &mut Vec<Vec<f32>>,
    values: &mut Vec<Vec<f32>>,
) -> Vec<f32> {
    let hd = c.head_dim;
    let head_norm = |v: Vec<f32>, g: &[f32]| -> Vec<f32> {
        v.chunks_exact(hd)
            .flat_map(|head| rms_norm(head, g, c.rms_eps))
            .collect()
    };
    let (mut qr, mut kr) = (w.wq.mul(h), w.wk.mul(h));
    let v = w.wv.mul(h);
    if let Some((qn, kn)) = &w.qk_norm {
        qr = head_norm(qr, qn);
        kr = head_norm(kr, kn);
    }
    let p = pos as f64 * c.rope_scale as f64;
    rope(&mut qr, hd, c.n_rot, p, spec.rope_base, c.rope_neox);
    rope(&mut kr, hd, c.n_rot, p, spec.rope_base, c.rope_neox);
    keys.push(f16_round(&kr));
    values.push(f16_round(&v));
    let lo = if spec.window > 0 {
        (pos + 1).saturating_sub(spec.window)
    } else {
        0
    };
    let a = attention(
        &qr,
        keys,
        values,
        lo,
        pos,
        c.n_head,
        c.n_kv_head,
        hd,
        c.attn_scale,
    );
    w.wo.mul(&a)
}
