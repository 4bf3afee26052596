//! The Gemma 3 layer on the device:
//!   h = norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h; per-head norm(q) * q_norm,
//!   norm(k) * k_norm; rope NEOX (pairs (i, i + d/2)) with the layer's base (1e6 global, 1e4
//!   local); store k, v; att = attention(q) over the window (512 on local layers);
//!   x += norm(Wo att) * post_attention_norm;
//!   h = norm(x) * ffn_norm; x += norm(Wdown (gelu_tanh(Wgate h) * Wup h)) * post_ffw_norm.
//! GGUF norm weights already hold Gemma's (1 + w).

use super::engine::{LayerCtx, Scratch};
use super::EngineError;
use crate::kernels::actq::ActRound;
use crate::kernels::glu_q8::Glu;

fn need<'a, T>(v: &'a Option<T>, il: usize, what: &str) -> Result<&'a T, EngineError> {
    v.as_ref().ok_or_else(|| EngineError::Tensor {
        name: format!("blk.{il}.{what}.weight"),
        why: "missing".into(),
    })
}

/// Returns true when the layer also wrote the next layer's input norm (`LayerCtx::next`): the
/// post_ffw_norm, the residual add and that norm folded into the down projection's launch; the
/// caller then runs the next layer with `pre_normed`.
pub fn layer(l: &LayerCtx, s: &mut Scratch) -> Result<bool, EngineError> {
    let (k, q, c, w, t, il) = (l.k, l.q, l.cfg, l.w, l.t, l.il);
    l.qkv(s)?;
    let qk_norm = (
        need(&w.q_norm, il, "attn_q_norm")?,
        need(&w.k_norm, il, "attn_k_norm")?,
    );
    // x += norm(o) * post_attention_norm; h = norm(x) * ffn_norm
    let post_attn = need(&w.post_attn_norm, il, "post_attention_norm")?;
    let (wg, wu) = (w.gate.view(), w.up.view());
    let m = k.fused_round(&[&wg, &wu]);
    if m == Some(ActRound::Q8Block32) {
        // the post-norm, the add and the norm folded into Wo's launch where it can (same bits)
        let (wo, next) = (w.wo.view(), [&wg, &wu]);
        l.attend_project_add_norm(s, Some(qk_norm), &wo, Some(post_attn), &w.ffn_norm, &next)?;
        let st = k.stage(&s.xst, ActRound::Q8Block32, &[&wg, &wu], t, c.n_embd);
        k.mul_rounded(q, &s.xq, st, &mut [(&wg, &mut s.gate), (&wu, &mut s.up)], t)?;
    } else {
        l.attend_project(s, Some(qk_norm), &w.wo.view())?;
        let outs = &mut [(&wg, &mut s.gate), (&wu, &mut s.up)];
        if let Some(m) = m {
            let st = k.stage(&s.xst, m, &[&wg, &wu], t, c.n_embd);
            k.norm_q8.norm_add_norm(
                q,
                &s.o,
                post_attn,
                &s.x,
                &w.ffn_norm,
                &s.xq,
                t,
                c.n_embd,
                c.rms_eps,
                m.block(),
                st,
            )?;
            k.mul_rounded(q, &s.xq, st, outs, t)?;
        } else {
            k.norm
                .rms_norm_add(q, &s.o, post_attn, &s.x, t, c.n_embd, c.rms_eps)?;
            k.norm
                .rms_norm(q, &s.x, &w.ffn_norm, &s.h, t, c.n_embd, c.rms_eps)?;
            k.mul_same_x(q, &s.h, &s.xq, outs, t)?;
        }
    }
    let wd = w.down.view();
    let post_ffw = need(&w.post_ffw_norm, il, "post_ffw_norm")?;
    if let Some(m) = k.fused_glu_round(&wd, t) {
        let (n, st) = (t * c.n_ff, k.stage(&s.xst, m, &[&wd], t, c.n_ff));
        k.glu_q8
            .run(q, Glu::GeluTanh, &s.gate, &s.up, &s.xq, n, m.block(), st)?;
        k.mul_rounded(q, &s.xq, st, &mut [(&wd, &mut s.o)], t)?;
    } else {
        // (with STRATA_VNNI=1 the rounding also stages the integer-dot products' records)
        k.act.gelu_mul(q, &s.gate, &s.up, &s.gate, t * c.n_ff)?;
        // (Kernels::mul's two steps: the down input rounded, the product)
        let (input, st) = k.round_input(q, &wd, &s.gate, &s.xq, Some(&s.xst), t)?;
        if let Some(nw) = l.next_prenorm() {
            // x += norm(Wdown act) * post_ffw_norm and the next layer's input norm, in one
            // launch where it takes Wdown (bitwise the product, rms_norm_add and rms_norm_q8_32)
            let tail = l.next_norm_tail(&s.arrivals, &s.xq, &s.xst, nw);
            if k.mat
                .mmvq_post_norm(q, &wd, input, &mut s.o, post_ffw, &mut s.x, &tail, t)?
            {
                return Ok(true);
            }
        }
        k.mat.mul_staged(q, &wd, input, st, &mut s.o, t)?;
    }
    k.norm
        .rms_norm_add(q, &s.o, post_ffw, &s.x, t, c.n_embd, c.rms_eps)?;
    Ok(false)
}
