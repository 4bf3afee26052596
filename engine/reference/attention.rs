//! The attention mixer, in the order device/attention.rs runs it plain: q, k, v = W h; [per-head
//! rms_norm of q and k]; RoPE; k, v into the cache (rounded through f16, as the device stores
//! them); attention over the layer's window; Wo att.
//! Gated (`qwen4exp`, llama.cpp's `build_layer_attn`): `attn_q` gives [q | gate] per head (head
//! h's q at [2h hd, 2h hd + hd), its gate the next hd), q and k get their per-head norms, RoPE is
//! IMRoPE on the text positions (p, p, p, 0) when the model has sections, and the attention
//! output is multiplied by sigmoid(gate) before Wo.

use super::ops::{attention, f16_round, rms_norm, rope, rope_sections, sigmoid};
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
    let (mut qr, gate) = match spec.gated {
        false => (w.wq.mul(h), None),
        true => {
            let (q, g) = split_q_gate(&w.wq.mul(h), hd);
            (q, Some(g))
        }
    };
    let mut kr = w.wk.mul(h);
    let v = w.wv.mul(h);
    if let Some((qn, kn)) = &w.qk_norm {
        qr = head_norm(qr, qn);
        kr = head_norm(kr, kn);
    }
    let p = pos as f64 * c.rope_scale as f64;
    match c.rope_sections {
        None => {
            rope(&mut qr, hd, c.n_rot, p, spec.rope_base, c.rope_neox);
            rope(&mut kr, hd, c.n_rot, p, spec.rope_base, c.rope_neox);
        }
        Some(sections) => {
            // a text token's IMRoPE positions (llama.cpp's batch expands p so)
            let tp = [p, p, p, 0.0];
            rope_sections(&mut qr, hd, c.n_rot, tp, sections, spec.rope_base);
            rope_sections(&mut kr, hd, c.n_rot, tp, sections, spec.rope_base);
        }
    }
    keys.push(f16_round(&kr));
    values.push(f16_round(&v));
    let lo = if spec.window > 0 {
        (pos + 1).saturating_sub(spec.window)
    } else {
        0
    };
    let mut a = attention(
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
    if let Some(g) = gate {
        for (v, g) in a.iter_mut().zip(g) {
            *v *= sigmoid(g);
        }
    }
    w.wo.mul(&a)
}

/// Splits gated `attn_q`'s output (n_head, 2 hd), [q | gate] per head, into q and gate, each
/// (n_head, hd).
pub fn split_q_gate(qg: &[f32], hd: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut q, mut g) = (
        Vec::with_capacity(qg.len() / 2),
        Vec::with_capacity(qg.len() / 2),
    );
    for head in qg.chunks_exact(2 * hd) {
        q.extend_from_slice(&head[..hd]);
        g.extend_from_slice(&head[hd..]);
    }
    (q, g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_q_splits_per_head() {
        // 2 heads of 3: [q0 | g0 | q1 | g1]
        let qg: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let (q, g) = split_q_gate(&qg, 3);
        assert_eq!(q, vec![0.0, 1.0, 2.0, 6.0, 7.0, 8.0]);
        assert_eq!(g, vec![3.0, 4.0, 5.0, 9.0, 10.0, 11.0]);
    }
}
