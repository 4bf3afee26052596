//! The hyper-connection residual (`Residual::Hyper`, `qwen4exp`) on the device: S streams of
//! n_embd per token in s.x, (t, S, n). Plain order, as reference/hyper.rs:
//!   embed: every stream = the token's embedding row;
//!   per part: the read site (`read`: the pending write x_s += a_s * y of the part before, the
//!   per-stream RMS norm with gamma, the rank-r gate, the gated stream mean into s.h and this
//!   site's injection a into HyperScratch::inj), the part from s.h, its last product into s.o;
//!   the card's last part: its write applied (`write`), so what crosses to the next card (and
//!   what the head reads) is the S streams with nothing pending;
//!   the head: the head's mixer (no injection) into s.h, then the head product.
//! The read is the default four-launch read (kernels/hc.rs); docs/hyper-connections.md.

use super::scratch::Scratch;
use super::stage::Stage;
use super::step::{parts, Part, StageStep};
use super::{head, Input, LayerCtx, Out, Slot, Src};
use crate::kernels::hc::{HcCall, HcMat, HcScratch};
use crate::kernels::hc_fast::{HcFastCall, HcFastScratch, HcQ8, Variant};
use crate::model::config::ModelConfig;
use crate::model::parts::{Hyper, Mixer};
use crate::model::weights::{HcMatrix, HcWeights, ReadWeights};
use crate::model::EngineError;
use crate::sycl::{DeviceBuffer, Queue};

use super::kernels::Kernels;

/// The buffers of the hyper-connection reads, and of the gated attention's q/gate split.
pub struct HyperScratch {
    pub inj: DeviceBuffer<f32>, // (rows, S) the last read site's injection: the pending write's a
    pub rs: DeviceBuffer<f32>,  // (rows, S) per-stream 1 / rms
    pub lo: DeviceBuffer<f32>,  // (rows, r) the read gate's low-rank activation
    pub hc: HcScratch,          // the down projection's column-slice partials
    /// The two-launch read's partials and arrival counter (STRATA_HC_Q8 / STRATA_GR_FUSED)
    pub fast: Option<HcFastScratch>,
    pub qg: DeviceBuffer<f32>, // (rows, 2 * n_head * head_dim) gated attention: [q | gate] per head
    pub agate: DeviceBuffer<f32>, // (rows, n_head * head_dim) the attention output's gate
    pub bytes: usize,
}

impl HyperScratch {
    /// None for a single-stream model.
    pub fn new(
        q: &Queue,
        c: &ModelConfig,
        rows: usize,
    ) -> Result<Option<HyperScratch>, EngineError> {
        let Some(h) = c.residual.hyper() else {
            return Ok(None);
        };
        let gated = c.layers.iter().any(|l| match &l.mixer.part {
            Mixer::Attention(a) => a.gated,
        });
        let qg = if gated { rows * 2 * c.q_dim() } else { 1 };
        let ag = if gated { rows * c.q_dim() } else { 1 };
        let hc = HcScratch::new(q, rows, c.n_embd, h.streams, h.rank)?;
        let fast = match super::kernels::hc_variant(c) {
            Some(_) => Some(HcFastScratch::new(q, c.n_embd, h.streams, h.rank)?),
            None => None,
        };
        let floats = rows * (2 * h.streams + h.rank) + qg + ag;
        Ok(Some(HyperScratch {
            inj: q.alloc(rows * h.streams)?,
            rs: q.alloc(rows * h.streams)?,
            lo: q.alloc(rows * h.rank)?,
            qg: q.alloc(qg)?,
            agate: q.alloc(ag)?,
            bytes: floats * 4 + hc.bytes() + fast.as_ref().map_or(0, |f| f.bytes()),
            hc,
            fast,
        }))
    }
}

fn scratch(s: &Scratch) -> Result<&HyperScratch, EngineError> {
    s.hyper.as_ref().ok_or_else(|| {
        EngineError::Unsupported("a hyper-connection step without its scratch".into())
    })
}

fn mat(m: &HcMatrix) -> HcMat<'_> {
    HcMat {
        bytes: &m.bytes,
        type_id: m.type_id,
    }
}

/// One read site over s.x's t rows: `pending` applies the part before's write first (s.o times
/// HyperScratch::inj); the gated mean goes to s.h, and (when the site has injection rows) its
/// injection to HyperScratch::inj.
#[allow(clippy::too_many_arguments)]
pub fn read(
    k: &Kernels,
    q: &Queue,
    c: &ModelConfig,
    h: Hyper,
    s: &Scratch,
    w: &HcWeights,
    pending: bool,
    t: usize,
) -> Result<(), EngineError> {
    let hs = scratch(s)?;
    let call = HcCall {
        n: c.n_embd,
        streams: h.streams,
        rank: h.rank,
        t,
        eps: c.rms_eps,
        gamma: &w.gamma,
        down: mat(&w.down),
        up: mat(&w.up),
        inject: w.inject.as_ref().map(mat),
    };
    let pend = pending.then_some((&s.o, &hs.inj));
    let a_out = w.inject.as_ref().map(|_| &hs.inj);
    // the flags' two-launch read in the decode and verify windows (the prompt path's rows stay
    // on the default read, as the seeds'); where it does not take the call, the default read
    // with one line saying why
    if let (Some((fast, v)), Some(fsc)) = (&k.hc_fast, &hs.fast) {
        if t <= crate::kernels::hc_fast::TMAX {
            let q8 = match (v, &w.q8) {
                (Variant::Q8, Some((down, up))) => Some(HcQ8 { down, up }),
                _ => None,
            };
            // (Q8 without copies: they could not be made at load, which said so)
            if *v == Variant::Fused || q8.is_some() {
                let fc = HcFastCall { read: call, q8 };
                let dflt = k.hc()?;
                fast.run_or_default(
                    dflt, q, &fc, &s.x, pend, &hs.rs, &hs.lo, a_out, &s.h, fsc, &hs.hc,
                )?;
                return Ok(());
            }
        }
    }
    k.hc()?
        .run(q, &call, &s.x, pend, &hs.rs, &hs.lo, a_out, &s.h, &hs.hc)?;
    Ok(())
}

/// The pending write alone (x_s += a_s * s.o), by the read's own first launch, so the bits are
/// those a following read would have written.
fn write(
    k: &Kernels,
    q: &Queue,
    c: &ModelConfig,
    h: Hyper,
    s: &Scratch,
    t: usize,
) -> Result<(), EngineError> {
    let hs = scratch(s)?;
    k.hc()?.write(
        q, &s.x, &s.o, &hs.inj, &hs.rs, t, c.n_embd, h.streams, c.rms_eps,
    )?;
    Ok(())
}

pub fn run(step: &StageStep, q: &Queue, st: &mut Stage, h: Hyper) -> Result<(), EngineError> {
    let (c, k, t) = (step.cfg, step.k, step.t);
    let s = &mut st.scratch;
    if step.embed {
        let (embd, embd_type) = step.weights.embedding()?;
        k.embed.run(
            q,
            embd,
            embd_type,
            c.n_vocab,
            c.n_embd,
            &s.ids,
            t,
            &s.h,
            c.embd_scale,
        )?;
        // every stream starts as the embedding row
        k.act.repeat_rows(q, &s.h, &s.x, t, c.n_embd, h.streams)?;
    }
    let seq: Vec<(usize, Part)> = st
        .layers
        .clone()
        .flat_map(|il| parts(&step.weights.layers[il]).map(|p| (il, p)))
        .collect();
    let mut pending = false;
    for &(il, part) in &seq {
        let j = il - st.layers.start;
        let l = LayerCtx {
            k,
            q,
            cfg: c,
            il,
            rope: &st.rope_tables[st.layer_rope[j]],
            kc: &st.state[j].k,
            vc: &st.state[j].v,
            n_ctx: step.n_ctx,
            t,
        };
        let ReadWeights::Hyper(w) = part.read_weights() else {
            return Err(EngineError::Unsupported(format!(
                "layer {il}: a norm read on the hyper-connection path"
            )));
        };
        read(k, q, c, h, s, w, pending, t)?;
        match part.run(&l, s, Input::Plain)? {
            Out::Product(p) => {
                // the product's input: rounded by the part's fused kernel, or rounded now
                let (input, stg) = match p.src {
                    Src::Rounded(m) => (&s.xq, k.stage(&s.xst, m, &[&p.w], t, p.w.n_in)),
                    Src::Raw(slot) => {
                        let x = match slot {
                            Slot::Att => &s.att,
                            Slot::Gate => &s.gate,
                        };
                        k.round_input(q, &p.w, x, &s.xq, Some(&s.xst), t)?
                    }
                };
                k.mat.mul_staged(q, &p.w, input, stg, &mut s.o, t)?;
            }
            Out::Ready => {}
        }
        pending = true;
    }
    if pending {
        write(k, q, c, h, s, t)?;
    }
    let n = step.head_rows;
    if n > 0 {
        head::norm_rows(k, q, c, step.weights, s, t)?;
        let logits = if n == 1 {
            &mut s.logits1
        } else {
            &mut s.logits
        };
        head::logits(k, q, c, step.weights, &s.h, &s.xq, &s.xst, logits, n)?;
    }
    Ok(())
}
