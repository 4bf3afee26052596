//! The attention mixer on the device. Plain order, as reference/attention.rs:
//!   q, k, v = Wq h, Wk h, Wv h; [q, k = per-head rms_norm(q) * q_norm, ... * k_norm];
//!   rope(q), rope(k) at s.pos; k, v into this layer's f16 cache; att = attention(q) over the
//!   cache (the layer's window); Wo att left pending (`residual::boundary` runs it).
//! The plan's rewrites: the norms, RoPE and the cache store in one `rope_kv` launch, and the
//! attention writing its output already rounded (and staged) for Wo.

use super::scratch::Scratch;
use super::{products, Input, LayerCtx, Pending, Slot, Src};
use crate::kernels::actq::ActRound;
use crate::kernels::attn::AttnCall;
use crate::kernels::rope::RopeMode;
use crate::kernels::rope_kv::{QkNorm, RopeKvShape};
use crate::kernels::XStage;
use crate::model::config::ModelConfig;
use crate::model::parts::Attention;
use crate::model::weights::AttnWeights;
use crate::model::EngineError;
use crate::sycl::DeviceBuffer;

/// The RoPE kernel's mode for this model.
pub fn rope_mode(cfg: &ModelConfig) -> RopeMode {
    if cfg.rope_neox {
        RopeMode::Neox
    } else {
        RopeMode::Norm
    }
}

pub fn run<'w>(
    l: &LayerCtx,
    s: &mut Scratch,
    a: &'w AttnWeights,
    spec: &Attention,
    input: Input,
) -> Result<Pending<'w>, EngineError> {
    let (k, t) = (l.k, l.t);
    let (wq, wk, wv, wo) = (a.wq.view(), a.wk.view(), a.wv.view(), a.wo.view());
    if spec.gated {
        return gated(l, s, a, spec, input);
    }
    let outs = &mut [(&wq, &mut s.q), (&wk, &mut s.k), (&wv, &mut s.v)];
    products(l, &s.h, &s.xq, &s.xst, input, outs)?;
    // fused: the attention rounds its output for Wo (and stages it)
    let m = k.plan.fused_round(&[&wo]);
    let st = m.and_then(|m| k.stage(&s.xst, m, &[&wo], t, wo.n_in));
    let qk_norm = a.qk_norm.as_ref().map(|(qn, kn)| (qn, kn));
    let src = match rope_store_attend(l, s, spec, qk_norm, m, st)? {
        Some(m) => Src::Rounded(m),
        None => Src::Raw(Slot::Att),
    };
    Ok(Pending { w: wo, src })
}

/// Gated attention (`qwen4exp`): Wq gives [q | gate] per head; q, k, v as plain attention; the
/// output times sigmoid(gate) before Wo (so the attention never rounds its output for Wo).
fn gated<'w>(
    l: &LayerCtx,
    s: &mut Scratch,
    a: &'w AttnWeights,
    spec: &Attention,
    input: Input,
) -> Result<Pending<'w>, EngineError> {
    let (k, q, c, t) = (l.k, l.q, l.cfg, l.t);
    let hs = s
        .hyper
        .as_mut()
        .ok_or_else(|| EngineError::Unsupported("gated attention without its scratch".into()))?;
    let (wq, wk, wv, wo) = (a.wq.view(), a.wk.view(), a.wv.view(), a.wo.view());
    let outs = &mut [(&wq, &mut hs.qg), (&wk, &mut s.k), (&wv, &mut s.v)];
    products(l, &s.h, &s.xq, &s.xst, input, outs)?;
    k.gated()?
        .split_q_gate(q, &hs.qg, &s.q, &hs.agate, t, c.n_head, c.head_dim)?;
    let qk_norm = a.qk_norm.as_ref().map(|(qn, kn)| (qn, kn));
    rope_store_attend(l, s, spec, qk_norm, None, None)?;
    let hs = s
        .hyper
        .as_ref()
        .ok_or_else(|| EngineError::Unsupported("gated attention without its scratch".into()))?;
    k.gated()?
        .sigmoid_mul(q, &s.att, &hs.agate, t * c.q_dim())?;
    Ok(Pending {
        w: wo,
        src: Src::Raw(Slot::Att),
    })
}

/// [Per-head RMS norms of q and k (`qk_norm` = (q_norm, k_norm), each (head_dim)),] RoPE on q
/// and k (s.q, s.k: (t, heads * head_dim)), k and v stored into the layer's f16 cache at s.pos,
/// then causal attention (the layer's window) into s.att (t, n_head * head_dim). Fused: one
/// `rope_kv` launch before the attention (s.k then stays unrotated: only the cache reads it).
/// With `round` and a call the one-launch attention takes, the output goes to s.xq rounded
/// for the output projection instead (staged into `st` too, when given): Some(round).
fn rope_store_attend(
    l: &LayerCtx,
    s: &Scratch,
    spec: &Attention,
    qk_norm: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>,
    round: Option<ActRound>,
    st: Option<XStage>, // (t * n_head * head_dim) elements
) -> Result<Option<ActRound>, EngineError> {
    let (k, q, c, t) = (l.k, l.q, l.cfg, l.t);
    let mode = rope_mode(c);
    let (kc, vc, n_ctx) = (l.kc, l.vc, l.n_ctx);
    if k.plan.fused {
        let nq = qk_norm.map(|(q_w, k_w)| QkNorm {
            q_w,
            k_w,
            eps: c.rms_eps,
        });
        let shape = RopeKvShape {
            t,
            n_head: c.n_head,
            n_kv_head: c.n_kv_head,
            head_dim: c.head_dim,
            n_ctx,
        };
        k.rope_kv.run(
            q,
            mode,
            nq.as_ref(),
            &s.q,
            &s.k,
            &s.v,
            kc,
            vc,
            &s.pos,
            l.rope,
            shape,
        )?;
    } else {
        let (hd, eps) = (c.head_dim, c.rms_eps);
        if let Some((q_w, k_w)) = qk_norm {
            k.norm.rms_norm(q, &s.q, q_w, &s.q, t * c.n_head, hd, eps)?;
            k.norm
                .rms_norm(q, &s.k, k_w, &s.k, t * c.n_kv_head, hd, eps)?;
        }
        k.rope.run(q, mode, &s.q, &s.pos, l.rope, t, c.n_head, hd)?;
        k.rope
            .run(q, mode, &s.k, &s.pos, l.rope, t, c.n_kv_head, hd)?;
        k.kv.run(q, &s.k, &s.v, kc, vc, &s.pos, t, c.n_kv_head, hd, n_ctx)?;
    }
    let mut call = AttnCall {
        qrows: &s.q,
        kc,
        vc,
        pos: &s.pos,
        out: &s.att,
        t,
        n_head: c.n_head,
        n_kv_head: c.n_kv_head,
        n_ctx,
        window: spec.window,
        scale: c.attn_scale,
    };
    if let Some(m) = round.filter(|m| k.attn.can_round(t, c.n_head, m.block())) {
        call.out = &s.xq;
        k.attn.decode.run_rounded(q, &call, m.block(), st)?;
        return Ok(Some(m));
    }
    k.attn.run(q, &call)?;
    Ok(None)
}
