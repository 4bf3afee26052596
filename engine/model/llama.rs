//! The llama (SmolLM2) layer on the device, pre-norm:
//!   h = norm(x) * attn_norm; q, k, v = Wq h, Wk h, Wv h; rope(q, k) (pairs (2i, 2i+1));
//!   store k, v (f16); att = attention(q); x += Wo att;
//!   h = norm(x) * ffn_norm; x += Wdown (silu(Wgate h) * Wup h).

use super::engine::{LayerCtx, Scratch};
use super::EngineError;

pub fn layer(l: &LayerCtx, s: &mut Scratch) -> Result<(), EngineError> {
    let (k, q, c, w, t) = (l.k, l.q, l.cfg, l.w, l.t);
    k.norm
        .rms_norm(q, &s.x, &w.attn_norm, &s.h, t, c.n_embd, c.rms_eps)?;
    let (wq, wk, wv) = (w.wq.view(), w.wk.view(), w.wv.view());
    let outs = &mut [(&wq, &mut s.q), (&wk, &mut s.k), (&wv, &mut s.v)];
    k.mul_same_x(q, &s.h, &s.xq, outs, t)?;
    l.rope_store_attend(s)?;
    k.mul(q, &w.wo.view(), &s.att, &s.xq, &mut s.o, t)?;
    // x += o; h = norm(x) * ffn_norm
    k.norm
        .add_rms_norm(q, &s.x, &s.o, &w.ffn_norm, &s.h, t, c.n_embd, c.rms_eps)?;
    let (wg, wu) = (w.gate.view(), w.up.view());
    k.mul_same_x(
        q,
        &s.h,
        &s.xq,
        &mut [(&wg, &mut s.gate), (&wu, &mut s.up)],
        t,
    )?;
    k.act.silu_mul(q, &s.gate, &s.up, &s.gate, t * c.n_ff)?;
    // x += Wdown gate: one launch at t <= 8 (bitwise the product then the add)
    k.mul_residual(q, &w.down.view(), &s.gate, &s.xq, &mut s.o, &mut s.x, t)?;
    Ok(())
}
