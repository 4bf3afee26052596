//! The MoE FFN on the device (`qwen4exp`). Plain order, as reference/moe.rs:
//!   router logits = Wr h; per token softmax → top-k → renormalised weights (`MoeKernels::route`);
//!   the selected ids read back to the host, the window's (token, slot) pairs grouped by expert;
//!   the rows gathered in expert order; per expert with tokens: gate, up = its rows' products,
//!   silu(gate) * up, down, into its block of the expert outputs;
//!   the shared expert on every token, scaled by sigmoid(Wsg h);
//!   y = Σ_slot w · expert output (slot order) + shared, into s.o (`MoeKernels::combine`).
//! Decode runs one token (its k experts, one row each); the verify window and the prompt run
//! each selected expert once on all of its tokens. The read-back makes this a host-synchronous
//! part: the step graphs are off for MoE models (engine/model/load.rs).

use super::scratch::Scratch;
use super::{Input, LayerCtx};
use crate::kernels::moe::{group_by_expert, SharedExpert};
use crate::model::config::ModelConfig;
use crate::model::parts::{Ffn, Moe};
use crate::model::weights::MoeWeights;
use crate::model::EngineError;
use crate::sycl::{DeviceBuffer, Queue};

/// The MoE FFN's buffers for up to `rows` tokens.
pub struct MoeScratch {
    pub logits: DeviceBuffer<f32>, // (rows, n_expert) router logits
    pub ids: DeviceBuffer<i32>,    // (rows, k) selected experts, by descending probability
    pub wts: DeviceBuffer<f32>,    // (rows, k) their renormalised weights
    pub map: DeviceBuffer<i32>,    // (rows, k) the row of (token, slot)'s output in `eo`
    pub gidx: DeviceBuffer<i32>,   // (rows * k) the token of each grouped row
    pub xg: DeviceBuffer<f32>,     // (rows * k, n_embd) the tokens' inputs, grouped by expert
    pub xe: DeviceBuffer<f32>,     // (rows, n_embd) one expert's input rows
    pub ye: DeviceBuffer<f32>,     // (rows, n_embd) one expert's output rows
    pub eo: DeviceBuffer<f32>,     // (rows * k, n_embd) every selected expert's outputs, grouped
    pub sh: DeviceBuffer<f32>,     // (rows, n_embd) the shared expert's output
    pub sg: DeviceBuffer<f32>,     // (rows) the shared expert's gate logit
    pub bytes: usize,
}

impl MoeScratch {
    /// None when no layer is MoE.
    pub fn new(q: &Queue, c: &ModelConfig, rows: usize) -> Result<Option<MoeScratch>, EngineError> {
        let moes = c.layers.iter().filter_map(|l| match &l.ffn.part {
            Ffn::Moe(m) => Some(m),
            Ffn::Dense(_) => None,
        });
        let (mut x, mut k) = (0, 0);
        for m in moes {
            x = x.max(m.n_expert);
            k = k.max(m.n_used);
        }
        if x == 0 {
            return Ok(None);
        }
        let n = c.n_embd;
        let floats = rows * (x + k + 2 * k * n + 3 * n + 1);
        Ok(Some(MoeScratch {
            logits: q.alloc(rows * x)?,
            ids: q.alloc(rows * k)?,
            wts: q.alloc(rows * k)?,
            map: q.alloc(rows * k)?,
            gidx: q.alloc(rows * k)?,
            xg: q.alloc(rows * k * n)?,
            xe: q.alloc(rows * n)?,
            ye: q.alloc(rows * n)?,
            eo: q.alloc(rows * k * n)?,
            sh: q.alloc(rows * n)?,
            sg: q.alloc(rows)?,
            bytes: floats * 4 + rows * k * 12,
        }))
    }
}

pub fn run(
    l: &LayerCtx,
    s: &mut Scratch,
    w: &MoeWeights,
    spec: &Moe,
    input: Input,
) -> Result<(), EngineError> {
    let (k, q, c, t) = (l.k, l.q, l.cfg, l.t);
    if input != Input::Plain {
        return Err(EngineError::Unsupported(format!(
            "layer {}: a MoE FFN reads its input plain",
            l.il
        )));
    }
    let n = c.n_embd;
    let ms = s
        .moe
        .as_mut()
        .ok_or_else(|| EngineError::Unsupported("a MoE FFN without its scratch".into()))?;
    let kk = spec.n_used;
    // the router and the top-k, then the choice on the host
    let km = k.moe()?;
    k.mul(q, &w.router.view(), &s.h, &s.xq, None, &mut ms.logits, t)?;
    // (no weight scale: llama.cpp's qwen4exp reads no expert_weights_scale)
    km.route(
        q,
        &ms.logits,
        &ms.logits,
        &ms.ids,
        &ms.wts,
        t,
        spec.n_expert,
        kk,
        1.0,
    )?;
    let ids = q.to_vec_prefix(&ms.ids, t * kk)?;
    let g = group_by_expert(&ids, t, kk, spec.n_expert)?;
    q.upload_prefix(&ms.gidx, &g.rows)?;
    q.upload_prefix(&ms.map, &g.map)?;
    km.gather_rows(q, &s.h, &ms.gidx, &ms.xg, g.rows.len(), n, t)?;
    for e in 0..spec.n_expert {
        let (row0, m) = (g.offsets[e], g.offsets[e + 1] - g.offsets[e]);
        if m == 0 {
            continue;
        }
        let [wg, wu, wd] = w.expert(e)?;
        q.copy_range(&ms.xg, row0 * n, &ms.xe, 0, m * n)?;
        k.mul_same_x(
            q,
            &ms.xe,
            &s.xq,
            &mut [(&wg, &mut s.gate), (&wu, &mut s.up)],
            m,
        )?;
        k.act.silu_mul(q, &s.gate, &s.up, &s.gate, m * spec.n_ff)?;
        k.mul(q, &wd, &s.gate, &s.xq, None, &mut ms.ye, m)?;
        q.copy_range(&ms.ye, 0, &ms.eo, row0 * n, m * n)?;
    }
    let shared = match (&w.shared, spec.shared_ff) {
        (Some(d), Some(f)) => {
            let (wg, wu, wd) = (d.gate.view(), d.up.view(), d.down.view());
            k.mul_same_x(
                q,
                &s.h,
                &s.xq,
                &mut [(&wg, &mut s.gate), (&wu, &mut s.up)],
                t,
            )?;
            k.act.silu_mul(q, &s.gate, &s.up, &s.gate, t * f)?;
            k.mul(q, &wd, &s.gate, &s.xq, None, &mut ms.sh, t)?;
            let sg = w.shared_gate.as_ref().ok_or_else(|| EngineError::Tensor {
                name: format!("blk.{}.ffn_gate_inp_shexp.weight", l.il),
                why: "the shared expert's gate is not loaded".into(),
            })?;
            k.mul(q, &sg.view(), &s.h, &s.xq, None, &mut ms.sg, t)?;
            Some(SharedExpert {
                out: &ms.sh,
                gate: &ms.sg,
            })
        }
        _ => None,
    };
    km.combine(
        q,
        &ms.eo,
        &ms.map,
        &ms.wts,
        shared,
        &s.o,
        t,
        kk,
        n,
        g.rows.len(),
    )?;
    Ok(())
}
