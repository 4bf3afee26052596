//! `xstage`: the rounding kernels also write their output staged for the decode products
//! (engine/kernels/xstage.rs): the same bits, fewer instructions per weight block. (Methods of
//! `Kernels`: the decision reads the plan and whether the integer-dot products are on.)

use crate::kernels::actq::ActRound;
use crate::kernels::qmatrix::MMVQ_MAX_T;
use crate::kernels::{tiled, vnni, WeightView, XStage};
use crate::model::device::kernels::Kernels;
use crate::sycl::DeviceBuffer;

impl Kernels {
    /// The stage a fused rounding kernel writes for `t` rows of `n` elements and the products
    /// by `ws` after it read: blocks of 32, decode-sized t (the products are mmvq's), staging
    /// on, and one of `ws` a tiled format that reads it (`tiled::reads_stage`; a Q8_0-only
    /// consumer would leave the stage unread). With the integer-dot products on (vnni.rs), also
    /// blocks of 256 when a K-quant product reads the records.
    pub fn stage<'a>(
        &self,
        buf: &'a DeviceBuffer<f32>, // Scratch::xst
        m: ActRound,
        ws: &[&WeightView],
        t: usize,
        n: usize,
    ) -> Option<XStage<'a>> {
        // the prompt's rows (t > 8) only for the integer-dot products, which take any t
        let mat = &self.mat;
        if !self.plan.xstage || (t > MMVQ_MAX_T && !mat.int_dot()) {
            return None;
        }
        // XStage::new fails only if `buf` is short, and Scratch::xst is sized for 8 rows of the
        // widest input; with None the products stage x themselves: the same bits either way
        match m {
            ActRound::Q8Block32 => {
                // (Q8_0 reads no stage in the float kernels, only in the integer-dot ones)
                let int_dot = mat.int_dot();
                let read = ws.iter().any(|w| {
                    w.tiled.is_some()
                        && (tiled::reads_stage(w.type_id)
                            || (int_dot && vnni::stage_block(w.type_id) == Some(32)))
                });
                // the integer records only for the integer-dot products (the default path
                // neither writes nor reads them)
                let make = if int_dot {
                    XStage::with_records
                } else {
                    XStage::new
                };
                read.then(|| make(buf, t * n).ok()).flatten()
            }
            ActRound::Q8Block256 => {
                // only the integer-dot products read records of 256 (Scratch::xst holds them:
                // floats_k(n) <= floats(n))
                let read = mat.int_dot()
                    && ws
                        .iter()
                        .any(|w| w.tiled.is_some() && vnni::stage_block(w.type_id) == Some(256));
                read.then(|| XStage::new_k(buf, t * n).ok()).flatten()
            }
            ActRound::None => None,
        }
    }

    /// The stage an unfused rounding (`ActQ::run_staged`) of `t` rows of `n` writes for the
    /// product by `w`: only with the integer-dot products on (STRATA_VNNI=1), where the fused
    /// kernels do not serve: blocks of 256 (`fused_glu_round` takes only 32), the prompt's rows
    /// (t > 8), the attention output when the prompt's attention does not round it, the head.
    pub fn unfused_stage<'a>(
        &self,
        buf: &'a DeviceBuffer<f32>, // Scratch::xst
        w: &WeightView,
        t: usize,
        n: usize,
    ) -> Option<XStage<'a>> {
        let m = ActRound::for_type(w.type_id);
        let on = self.plan.act_round && self.mat.int_dot() && m != ActRound::None;
        on.then(|| self.stage(buf, m, &[w], t, n)).flatten()
    }
}
