//! `fold_norms`: a part's last product, the residual write after it and the next part's read
//! (its norm rounded in blocks of 32 for its products, and staged) in one launch, the work-group
//! that finishes last doing the norms: `mmvq_residual_norm` (x += W in; xq =
//! round_32(rms_norm(x) * norm)) or, after a post-normed part, `mmvq_post_norm` (x +=
//! rms_norm(W in) * post; xq = ...). Bitwise the product followed by `NormQ8::add_rms_norm` /
//! `norm_add_norm` (tests/model_fused.rs counts the launches it saves).

use crate::kernels::actq::ActRound;
use crate::kernels::{NormTail, WeightView, XStage};
use crate::model::device::{Input, LayerCtx, Read};
use crate::model::EngineError;
use crate::sycl::DeviceBuffer;

/// The scratch fields the folded norm writes (fields, not the Scratch: the product writes
/// others of it).
pub struct Tail<'a> {
    pub arrivals: &'a DeviceBuffer<u32>, // Scratch::arrivals
    pub xq: &'a DeviceBuffer<f32>,       // Scratch::xq
    pub xst: &'a DeviceBuffer<f32>,      // Scratch::xst
}

/// Runs the fold when the plan and the kernels take it and returns the next part's input
/// (s.xq rounded in blocks of 32); None, launching nothing, otherwise.
#[allow(clippy::too_many_arguments)]
pub fn try_fold(
    l: &LayerCtx,
    w: &WeightView,                   // (n_embd, n_in) the pending product
    input: &DeviceBuffer<f32>,        // (t, n_in) its input, rounded for it
    st: Option<XStage>,               // its stage
    post: Option<&DeviceBuffer<f32>>, // (n_embd)
    next: &Read,
    tail: Tail,
    o: &mut DeviceBuffer<f32>, // (t, n_embd) Scratch::o
    x: &mut DeviceBuffer<f32>, // (t, n_embd) Scratch::x
) -> Result<Option<Input>, EngineError> {
    let (k, q, c, t) = (l.k, l.q, l.cfg, l.t);
    let ws: Vec<&WeightView> = next.consumers.iter().collect();
    // the folded norm writes blocks of 32, which the next products must want
    if !k.plan.fold_norms || k.plan.fused_round(&ws) != Some(ActRound::Q8Block32) {
        return Ok(None);
    }
    let nt = NormTail {
        counter: tail.arrivals,
        w: next.norm,
        yq: tail.xq,
        st: k.stage(tail.xst, ActRound::Q8Block32, &ws, t, c.n_embd),
        eps: c.rms_eps,
    };
    let took = match post {
        None => k.mat.mmvq_residual_norm(q, w, input, st, x, &nt, t)?,
        Some(pw) => k.mat.mmvq_post_norm(q, w, input, o, pw, x, &nt, t)?,
    };
    Ok(took.then_some(Input::Rounded(ActRound::Q8Block32)))
}
