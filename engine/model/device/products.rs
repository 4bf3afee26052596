//! The matrix products of a part, plain or as the plan groups them: y = W x with x rounded for
//! W first (`round_input`, llama.cpp's 8-bit activations), several products of one input, and
//! the product added into the residual. Every path gives the bits of separate plain `mul`s.

use super::kernels::Kernels;
use crate::kernels::actq::ActRound;
use crate::kernels::qmatrix::MMVQ_MAX_T;
use crate::kernels::{WeightView, XStage};
use crate::model::EngineError;
use crate::sycl::{DeviceBuffer, Queue};

impl Kernels {
    /// x rounded for `w` into `xq` per `Plan::round_for` (else x itself), and its stage in `xst`
    /// when the integer-dot products read one (`Kernels::unfused_stage`; `xst` None: never staged).
    pub(crate) fn round_input<'a>(
        &self,
        q: &Queue,
        w: &WeightView,
        x: &'a DeviceBuffer<f32>,           // (t, n_in)
        xq: &'a DeviceBuffer<f32>,          // (>= t * n_in) rounding scratch
        xst: Option<&'a DeviceBuffer<f32>>, // Scratch::xst
        t: usize,
    ) -> Result<(&'a DeviceBuffer<f32>, Option<XStage<'a>>), EngineError> {
        let mode = self.plan.round_for(w);
        if mode == ActRound::None {
            return Ok((x, None));
        }
        let n = t * w.n_in;
        let st = xst.and_then(|b| self.unfused_stage(b, w, t, w.n_in));
        match st {
            Some(st) => self.actq.run_staged(q, x, xq, n, st)?,
            None => self.actq.run(q, mode, x, xq, n)?,
        }
        Ok((xq, st))
    }

    /// y = W x for `t` rows, x first rounded into `xq` (and staged into `xst` for the
    /// integer-dot products, STRATA_VNNI=1) as `round_input` says: the plain product.
    #[allow(clippy::too_many_arguments)]
    pub fn mul(
        &self,
        q: &Queue,
        w: &WeightView,
        x: &DeviceBuffer<f32>,           // (t, n_in)
        xq: &DeviceBuffer<f32>,          // (>= t * n_in) rounding scratch
        xst: Option<&DeviceBuffer<f32>>, // Scratch::xst, or None: never staged
        y: &mut DeviceBuffer<f32>,       // (t, n_out)
        t: usize,
    ) -> Result<(), EngineError> {
        let (input, st) = self.round_input(q, w, x, xq, xst, t)?;
        self.mat.mul_staged(q, w, input, st, y, t)?;
        Ok(())
    }

    /// Several products of the same f32 input (q/k/v, gate/up). Plain: one `mul` each. With
    /// `Plan::group` the input is rounded once when every weight wants the same rounding, and
    /// the matrices with a tiled layout of one format share one `mmvq_group` launch at t <= 8.
    pub fn mul_same_x(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,                              // (t, n_in)
        xq: &DeviceBuffer<f32>,                             // (>= t * n_in) rounding scratch
        outs: &mut [(&WeightView, &mut DeviceBuffer<f32>)], // (n_out, n_in), (t, n_out)
        t: usize,
    ) -> Result<(), EngineError> {
        let Some(first) = outs.first() else {
            return Ok(());
        };
        let m0 = self.plan.round_for(first.0);
        let n_in = first.0.n_in;
        let alike = outs
            .iter()
            .all(|(w, _)| self.plan.round_for(w) == m0 && w.n_in == n_in);
        if !self.plan.group || !alike {
            for (w, y) in outs.iter_mut() {
                self.mul(q, w, x, xq, None, y, t)?;
            }
            return Ok(());
        }
        let input = if m0 == ActRound::None {
            x
        } else {
            self.actq.run(q, m0, x, xq, t * n_in)?;
            xq
        };
        self.mul_rounded(q, input, None, outs, t)
    }

    /// y = W xq for each output, `xq` already rounded for these weights (see
    /// `Plan::fused_round`), or f32 when rounding is off; `st`: xq's stage, when the kernel that
    /// rounded it wrote one (`Kernels::stage`). With `Plan::group`, matrices with a tiled layout of
    /// one format share one `mmvq_group` launch at t <= 8 (up to 3); else one by one.
    pub fn mul_rounded(
        &self,
        q: &Queue,
        xq: &DeviceBuffer<f32>, // (t, n_in) rounded
        st: Option<XStage>,     // xq staged, (t * n_in) elements
        outs: &mut [(&WeightView, &mut DeviceBuffer<f32>)], // (n_out, n_in), (t, n_out)
        t: usize,
    ) -> Result<(), EngineError> {
        // matrices of one tiled format together (order of launches is free: outputs disjoint)
        let mut groups: Vec<Vec<(&WeightView, &mut DeviceBuffer<f32>)>> = Vec::new();
        for (w, y) in outs.iter_mut() {
            let w: &WeightView = w;
            let same = |g: &Vec<(&WeightView, &mut DeviceBuffer<f32>)>| {
                self.plan.group
                    && g.len() < 3
                    && w.tiled.is_some()
                    && g[0].0.tiled.is_some()
                    && g[0].0.type_id == w.type_id
            };
            match groups.iter_mut().find(|g| same(g)) {
                Some(g) => g.push((w, &mut **y)),
                None => groups.push(vec![(w, &mut **y)]),
            }
        }
        for g in groups.iter_mut() {
            if g.len() > 1 && t <= MMVQ_MAX_T && self.mat.mmvq_group(q, xq, st, g, t)? {
                continue;
            }
            for (w, y) in g.iter_mut() {
                self.mat.mul_staged(q, w, xq, st, y, t)?;
            }
        }
        Ok(())
    }

    /// y += W xq (the residual add after a projection) for `t` rows, `xq` already rounded for W
    /// (or f32 with rounding off); `st` as in `mul_rounded`. Fused (`Plan::fused`): one launch
    /// at t <= 8 when W has a tiled layout (`mmvq_residual`); plain: the product into `tmp` and
    /// the add. Bitwise the same either way.
    #[allow(clippy::too_many_arguments)]
    pub fn mul_rounded_residual(
        &self,
        q: &Queue,
        w: &WeightView,
        xq: &DeviceBuffer<f32>,      // (t, n_in)
        st: Option<XStage>,          // xq staged, (t * n_in) elements
        tmp: &mut DeviceBuffer<f32>, // (>= t * n_out) product scratch of the plain path
        y: &mut DeviceBuffer<f32>,   // (t, n_out) residual in, residual + W x out
        t: usize,
    ) -> Result<(), EngineError> {
        if self.plan.fused && t <= MMVQ_MAX_T && self.mat.mmvq_residual(q, w, xq, st, y, t)? {
            return Ok(());
        }
        // (a stage at t > 8 is the integer-dot products', which read it for the prompt's rows)
        self.mat.mul_staged(q, w, xq, st, tmp, t)?;
        self.act.add(q, y, tmp, y, t * w.n_out)?;
        Ok(())
    }
}
