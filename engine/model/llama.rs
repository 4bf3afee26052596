//! The llama (SmolLM2) layer on the device, pre-norm:
//!   h = norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h; rope(q, k) (pairs (2i, 2i+1));
//!   store k, v (f16); att = attention(q); x += Wo att;
//!   h = norm(x) * ffn_norm; x += Wdown (silu(Wgate h) * Wup h).

use super::engine::{LayerCtx, Scratch};
use super::EngineError;
use crate::kernels::actq::ActRound;
use crate::kernels::glu_q8::Glu;

/// Returns true when the layer also wrote the next layer's input norm (`LayerCtx::next`): the
/// residual add and that norm folded into the down projection's launch; the caller then runs
/// the next layer with `pre_normed`.
pub fn layer(l: &LayerCtx, s: &mut Scratch) -> Result<bool, EngineError> {
    let (k, q, c, w, t) = (l.k, l.q, l.cfg, l.w, l.t);
    l.qkv(s)?;
    // x += o; h = norm(x) * ffn_norm
    let (wg, wu) = (w.gate.view(), w.up.view());
    let m = k.fused_round(&[&wg, &wu]);
    if m == Some(ActRound::Q8Block32) {
        // the add and the norm folded into Wo's launch where it can (the same bits)
        l.attend_project_add_norm(s, None, &w.wo.view(), None, &w.ffn_norm, &[&wg, &wu])?;
        let st = k.stage(&s.xst, ActRound::Q8Block32, &[&wg, &wu], t, c.n_embd);
        k.mul_rounded(q, &s.xq, st, &mut [(&wg, &mut s.gate), (&wu, &mut s.up)], t)?;
    } else {
        l.attend_project(s, None, &w.wo.view())?;
        let outs = &mut [(&wg, &mut s.gate), (&wu, &mut s.up)];
        if let Some(m) = m {
            let (b, st) = (m.block(), k.stage(&s.xst, m, &[&wg, &wu], t, c.n_embd));
            k.norm_q8.add_rms_norm(
                q,
                &s.x,
                &s.o,
                &w.ffn_norm,
                &s.xq,
                t,
                c.n_embd,
                c.rms_eps,
                b,
                st,
            )?;
            k.mul_rounded(q, &s.xq, st, outs, t)?;
        } else {
            k.norm
                .add_rms_norm(q, &s.x, &s.o, &w.ffn_norm, &s.h, t, c.n_embd, c.rms_eps)?;
            k.mul_same_x(q, &s.h, &s.xq, outs, t)?;
        }
    }
    // x += Wdown act: one launch at t <= 8 on tiled weights (bitwise the product then the add)
    let wd = w.down.view();
    if let Some(m) = k.fused_glu_round(&wd, t) {
        let (n, st) = (t * c.n_ff, k.stage(&s.xst, m, &[&wd], t, c.n_ff));
        k.glu_q8
            .run(q, Glu::Silu, &s.gate, &s.up, &s.xq, n, m.block(), st)?;
        if let Some(nw) = l.next_prenorm() {
            // x += Wdown act and the next layer's input norm, in one launch where it takes Wdown
            // (the same bits)
            let tail = l.next_norm_tail(&s.arrivals, &s.xq, &s.xst, nw);
            if k.mat
                .mmvq_residual_norm(q, &wd, &s.xq, st, &mut s.x, &tail, t)?
            {
                return Ok(true);
            }
        }
        k.mul_rounded_residual(q, &wd, &s.xq, st, &mut s.o, &mut s.x, t)?;
    } else {
        // (with STRATA_VNNI=1 the rounding also stages the integer-dot products' records)
        k.act.silu_mul(q, &s.gate, &s.up, &s.gate, t * c.n_ff)?;
        k.mul_residual(q, &wd, &s.gate, &s.xq, Some(&s.xst), &mut s.o, &mut s.x, t)?;
    }
    Ok(false)
}
