//! The planner: which optional rewrites of the plain part sequence (engine/model/device/) run.
//! Each rewrite is bitwise the plain sequence (tests/model_fused.rs proves each one against
//! `Plan::plain`), has its own switch in the flag registry (engine/flags/), and is decided here
//! or in this folder's files:
//! - `fused`: the small fused kernels: the read's norm rounding its output for the products
//!   (`NormQ8`), the gated activation rounding for the down product (`GluQ8`), the attention
//!   rounding its output for Wo, RoPE + KV store in one launch (`RopeKv`), the product + residual
//!   add (`mmvq_residual`), the residual add + norm (`Norm::add_rms_norm`);
//! - `group`: products of one input rounded once and launched together (`mmvq_group`);
//! - `fold_norms`: the residual write and the next read folded into the last product's launch
//!   (fold.rs);
//! - `xstage`: the rounding kernels stage their output for the decode products (stage.rs);
//! - the integer-dot products (`STRATA_VNNI`, not bitwise: `MatrixKernels::set_int_dot`) and
//!   the recorded step graphs (graphs.rs) are the planner's too, switched where they are read.
//!
//! A new part starts with its plain path alone; a fusion joins here with its switch and a test.

pub mod fold;
pub mod graphs;
mod stage;

use crate::flags::table;
use crate::kernels::actq::ActRound;
use crate::kernels::WeightView;

/// The rewrites on for one engine (`Engine::set_fused` etc. change them after load).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Round matmul inputs through 8-bit blocks as llama.cpp does (`EngineOptions::act_round`):
    /// the arithmetic itself, not a rewrite, but every rounding decision below depends on it.
    pub act_round: bool,
    /// `STRATA_FUSED`
    pub fused: bool,
    /// `STRATA_GROUP_PRODUCTS`
    pub group: bool,
    /// `STRATA_FOLD_NORMS`
    pub fold_norms: bool,
    /// `STRATA_XSTAGE`
    pub xstage: bool,
}

impl Plan {
    /// Every rewrite as the registry's switches say (all on by default).
    pub fn from_env(act_round: bool) -> Plan {
        Plan {
            act_round,
            fused: crate::flags::on(table::FUSED),
            group: crate::flags::on(table::GROUP_PRODUCTS),
            fold_norms: crate::flags::on(table::FOLD_NORMS),
            xstage: crate::flags::on(table::XSTAGE),
        }
    }

    /// No rewrite: each part's plain sequence.
    pub fn plain(act_round: bool) -> Plan {
        Plan {
            act_round,
            fused: false,
            group: false,
            fold_norms: false,
            xstage: false,
        }
    }

    /// How the input of a product by `w` is rounded (None with rounding off).
    pub fn round_for(&self, w: &WeightView) -> ActRound {
        if self.act_round {
            ActRound::for_type(w.type_id)
        } else {
            ActRound::None
        }
    }

    /// The rounding a fused kernel can write for products of one input by `ws` (q/k/v,
    /// gate/up, down): fusion on, rounding on, every weight the same mode (not `None`) and the
    /// same n_in, a multiple of the block. None = the plain path.
    pub fn fused_round(&self, ws: &[&WeightView]) -> Option<ActRound> {
        let first = ws.first()?;
        if !self.fused || !self.act_round {
            return None;
        }
        let m = ActRound::for_type(first.type_id);
        let same = ws
            .iter()
            .all(|w| ActRound::for_type(w.type_id) == m && w.n_in == first.n_in);
        (m != ActRound::None && same && first.n_in % m.block() == 0).then_some(m)
    }

    /// `fused_round` for the gated activation feeding the down product `w`, where `glu_q8` is
    /// measured faster than the unfused pair (`cargo bench --bench float_kernels -- fused`):
    /// blocks of 32 up to 8 rows (1.4x at t = 1..8, but 1.7x slower at 256). Not blocks of 256
    /// (Gemma's K-quant down): that variant's loads compile to gathers, a tie at t = 1 with
    /// launches and 1.8-2.6x slower at t >= 8 (docs/kernels.md). Either path gives the same bits.
    pub fn fused_glu_round(&self, w: &WeightView, t: usize) -> Option<ActRound> {
        self.fused_round(&[w])
            .filter(|&m| m == ActRound::Q8Block32 && t <= 8)
    }
}
