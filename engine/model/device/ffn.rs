//! The FFN on the device. Dense, plain order as reference/ffn.rs:
//!   gate, up = Wgate h, Wup h; a = act(gate) * up (SiLU or GELU-tanh); Wdown a left pending
//!   (`residual::boundary` runs it).
//! The plan's rewrite: the activation rounding its output for Wdown in the same launch
//! (`GluQ8`, `Plan::fused_glu_round`). MoE: device/moe.rs.

use super::scratch::Scratch;
use super::{moe, products, Input, LayerCtx, Out, Pending, Slot, Src};
use crate::kernels::glu_q8::Glu;
use crate::model::parts::{Dense, Ffn};
use crate::model::weights::{DenseWeights, FfnWeights};
use crate::model::EngineError;

pub fn run<'w>(
    l: &LayerCtx,
    s: &mut Scratch,
    f: &'w FfnWeights,
    spec: &Ffn,
    input: Input,
) -> Result<Out<'w>, EngineError> {
    match (f, spec) {
        (FfnWeights::Dense(d), Ffn::Dense(ds)) => dense(l, s, d, ds, input).map(Out::Product),
        (FfnWeights::Moe(m), Ffn::Moe(ms)) => moe::run(l, s, m, ms, input).map(|()| Out::Ready),
        _ => Err(EngineError::Unsupported(format!(
            "layer {}: the FFN's weights do not match its declaration",
            l.il
        ))),
    }
}

fn dense<'w>(
    l: &LayerCtx,
    s: &mut Scratch,
    d: &'w DenseWeights,
    spec: &Dense,
    input: Input,
) -> Result<Pending<'w>, EngineError> {
    let (k, q, t) = (l.k, l.q, l.t);
    let (wg, wu, wd) = (d.gate.view(), d.up.view(), d.down.view());
    let outs = &mut [(&wg, &mut s.gate), (&wu, &mut s.up)];
    products(l, &s.h, &s.xq, &s.xst, input, outs)?;
    let n = t * spec.n_ff;
    if let Some(m) = k.plan.fused_glu_round(&wd, t) {
        let st = k.stage(&s.xst, m, &[&wd], t, spec.n_ff);
        k.glu_q8
            .run(q, spec.act, &s.gate, &s.up, &s.xq, n, m.block(), st)?;
        return Ok(Pending {
            w: wd,
            src: Src::Rounded(m),
        });
    }
    // (with STRATA_VNNI=1 the down product's own rounding also stages its records)
    match spec.act {
        Glu::Silu => k.act.silu_mul(q, &s.gate, &s.up, &s.gate, n)?,
        Glu::GeluTanh => k.act.gelu_mul(q, &s.gate, &s.up, &s.gate, n)?,
    }
    Ok(Pending {
        w: wd,
        src: Src::Raw(Slot::Gate),
    })
}
