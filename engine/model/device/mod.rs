//! The parts on the device, each in its plain order of operations next to the Rust reference's
//! (engine/reference/, the same file names): the residual stream's read and write
//! (`residual`), the token mixer (`attention`), the FFN (`ffn`), the head (`head`), and the loop
//! that runs one card's layers as a sequence of parts (`step`). Where the plan
//! (engine/model/plan/) says so, a part takes a fused kernel instead of a plain run of them;
//! the results are the same bits.
//!
//! The hand-off between parts: a part starts from an `Input` (its normed input, plain in s.h or
//! rounded for its first products in s.xq) and ends with a `Pending` product (Wo, Wdown), which
//! `residual::boundary` runs together with the residual write and the next part's read, so a
//! fusion across the boundary (plan/fold.rs) needs no protocol between layers.

pub mod attention;
pub mod ffn;
pub mod head;
pub mod hyper;
pub mod kernels;
pub mod moe;
pub mod products;
pub mod residual;
pub mod scratch;
pub mod stage;
pub mod step;

use crate::kernels::actq::ActRound;
use crate::kernels::rope::RopeTable;
use crate::kernels::WeightView;
use crate::model::config::ModelConfig;
use crate::model::EngineError;
use crate::sycl::{DeviceBuffer, Queue};
use half::f16;
use kernels::Kernels;

/// What a part needs besides its weights and the scratch: the kernels and plan, the queue, the
/// config, its layer's index, RoPE table and cache, the step's rows.
pub struct LayerCtx<'a> {
    pub k: &'a Kernels,
    pub q: &'a Queue,
    pub cfg: &'a ModelConfig,
    pub il: usize,
    pub rope: &'a RopeTable,
    pub kc: &'a DeviceBuffer<f16>, // (n_kv_head, n_ctx, head_dim)
    pub vc: &'a DeviceBuffer<f16>, // (n_kv_head, n_ctx, head_dim)
    pub n_ctx: usize,
    pub t: usize,
}

/// Where a part's normed input is, as its first products read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// f32 rows in s.h: each product rounds them for itself.
    Plain,
    /// s.xq, rounded with this mode for the products (and staged as `Kernels::stage` says).
    Rounded(ActRound),
}

/// The scratch buffer holding a pending product's f32 input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Att,
    Gate,
}

/// Where a pending product's input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// s.xq, rounded for the product by a fused kernel (staged as `Kernels::stage` says).
    Rounded(ActRound),
    /// f32 rows; the product rounds them itself.
    Raw(Slot),
}

/// A part's last product (its output projection), left to `residual::boundary`.
pub struct Pending<'w> {
    pub w: WeightView<'w>,
    pub src: Src,
}

/// What a part leaves: its last product pending (`residual::boundary` or the hyper-connection
/// write runs it), or its output already in s.o (the MoE FFN: many products, combined).
pub enum Out<'w> {
    Product(Pending<'w>),
    Ready,
}

/// The next part's read: its norm and the products of the normed rows.
pub struct Read<'w> {
    pub norm: &'w DeviceBuffer<f32>, // (n_embd)
    pub consumers: Vec<WeightView<'w>>,
}

/// The products of a part's input into `outs` (q/k/v, gate/up): from s.xq as the read rounded
/// it, or from s.h rounded here (`Kernels::mul_same_x`).
pub fn products(
    l: &LayerCtx,
    h: &DeviceBuffer<f32>,   // Scratch::h
    xq: &DeviceBuffer<f32>,  // Scratch::xq
    xst: &DeviceBuffer<f32>, // Scratch::xst
    input: Input,
    outs: &mut [(&WeightView, &mut DeviceBuffer<f32>)], // (n_out, n_in), (t, n_out)
) -> Result<(), EngineError> {
    let (k, q, t) = (l.k, l.q, l.t);
    match input {
        Input::Rounded(m) => {
            let ws: Vec<&WeightView> = outs.iter().map(|(w, _)| *w).collect();
            let n_in = ws.first().map_or(0, |w| w.n_in);
            let st = k.stage(xst, m, &ws, t, n_in);
            k.mul_rounded(q, xq, st, outs, t)
        }
        Input::Plain => k.mul_same_x(q, h, xq, outs, t),
    }
}
