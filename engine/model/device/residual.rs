//! The residual stream between parts (today `Residual::Single`: one vector per token in s.x).
//! A part reads it through an RMS norm (`read`) and its output is added back (`boundary`, which
//! also runs the part's pending last product and the next part's read). Plain order:
//!   o = W in;  x += o  (or x += rms_norm(o) * post);  h = rms_norm(x) * next_norm.
//! The plan's rewrites of that sequence: the norm rounding for the next products (`NormQ8`), the
//! add in the norm's launch (`Norm::add_rms_norm`), the product and add in one launch
//! (`mmvq_residual`), and all of it in the product's launch (plan/fold.rs).

use super::scratch::Scratch;
use super::{Input, LayerCtx, Pending, Read, Slot, Src};
use crate::kernels::WeightView;
use crate::model::plan::fold;
use crate::model::EngineError;
use crate::sycl::DeviceBuffer;

/// A part's normed input from the residual: rms_norm(x) * r.norm. Fused (`Plan::fused_round`
/// for r's products), the norm writes their rounded input (and its stage) into s.xq; plain, s.h.
pub fn read(l: &LayerCtx, s: &Scratch, r: &Read) -> Result<Input, EngineError> {
    let (k, q, c, t) = (l.k, l.q, l.cfg, l.t);
    let ws: Vec<&WeightView> = r.consumers.iter().collect();
    if let Some(m) = k.plan.fused_round(&ws) {
        let st = k.stage(&s.xst, m, &ws, t, c.n_embd);
        k.norm_q8.rms_norm(
            q,
            &s.x,
            r.norm,
            &s.xq,
            t,
            c.n_embd,
            c.rms_eps,
            m.block(),
            st,
        )?;
        return Ok(Input::Rounded(m));
    }
    k.norm
        .rms_norm(q, &s.x, r.norm, &s.h, t, c.n_embd, c.rms_eps)?;
    Ok(Input::Plain)
}

/// Ends a part: its pending product `p`, the residual write (x += o, or with `post` x +=
/// rms_norm(o) * post), then `next`'s read (None: the card's last part; its write alone).
/// Returns where the next part's input is.
pub fn boundary(
    l: &LayerCtx,
    s: &mut Scratch,
    p: Pending,
    post: Option<&DeviceBuffer<f32>>, // (n_embd) the sublayer's post norm
    next: Option<&Read>,
) -> Result<Option<Input>, EngineError> {
    let (k, q, c, t) = (l.k, l.q, l.cfg, l.t);
    let (n, eps, w) = (c.n_embd, c.rms_eps, &p.w);
    // the product's input: rounded by the part's fused kernel, or rounded now (the plain
    // product's own first step)
    let (input, st) = match p.src {
        Src::Rounded(m) => (&s.xq, k.stage(&s.xst, m, &[w], t, w.n_in)),
        Src::Raw(slot) => {
            let x = match slot {
                Slot::Att => &s.att,
                Slot::Gate => &s.gate,
            };
            k.round_input(q, w, x, &s.xq, Some(&s.xst), t)?
        }
    };
    let Some(r) = next else {
        match post {
            None => k.mul_rounded_residual(q, w, input, st, &mut s.o, &mut s.x, t)?,
            Some(pw) => {
                k.mat.mul_staged(q, w, input, st, &mut s.o, t)?;
                k.norm.rms_norm_add(q, &s.o, pw, &s.x, t, n, eps)?;
            }
        }
        return Ok(None);
    };
    let tail = fold::Tail {
        arrivals: &s.arrivals,
        xq: &s.xq,
        xst: &s.xst,
    };
    if let Some(i) = fold::try_fold(l, w, input, st, post, r, tail, &mut s.o, &mut s.x)? {
        return Ok(Some(i));
    }
    k.mat.mul_staged(q, w, input, st, &mut s.o, t)?;
    let ws: Vec<&WeightView> = r.consumers.iter().collect();
    if let Some(m) = k.plan.fused_round(&ws) {
        let (b, st) = (m.block(), k.stage(&s.xst, m, &ws, t, n));
        match post {
            None => k
                .norm_q8
                .add_rms_norm(q, &s.x, &s.o, r.norm, &s.xq, t, n, eps, b, st)?,
            Some(pw) => k
                .norm_q8
                .norm_add_norm(q, &s.o, pw, &s.x, r.norm, &s.xq, t, n, eps, b, st)?,
        }
        return Ok(Some(Input::Rounded(m)));
    }
    match post {
        None if k.plan.fused => k
            .norm
            .add_rms_norm(q, &s.x, &s.o, r.norm, &s.h, t, n, eps)?,
        None => {
            k.act.add(q, &s.x, &s.o, &s.x, t * n)?;
            k.norm.rms_norm(q, &s.x, r.norm, &s.h, t, n, eps)?;
        }
        Some(pw) => {
            k.norm.rms_norm_add(q, &s.o, pw, &s.x, t, n, eps)?;
            k.norm.rms_norm(q, &s.x, r.norm, &s.h, t, n, eps)?;
        }
    }
    Ok(Some(Input::Plain))
}
