//! Launcher of `sycl/kernels/mmvq.cpp`: quantized weight x 1..8 activation rows (decode and the
//! speculative verify window). Row t of a T-row call is bitwise the one-row call on row t.
//! Reference: `qmatrix::matrix_ref` (f64).

use super::qmatrix::{
    check_act, Family, MatrixError, MatrixKernels, Result, WeightView, MMVQ_MAX_T,
    MMVQ_ROWS_PER_GROUP, SG,
};
use super::tiled;
use crate::sycl::{Arg, DeviceBuffer, NdRange, Queue};

impl MatrixKernels {
    /// y[t, o] = sum_i W[o, i] * x[t, i] for t < `t` (1..=8), o < n_out. Asynchronous on `q`.
    pub fn mmvq(
        &self,
        q: &Queue,
        w: &WeightView,            // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>,     // (t, n_in)
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        self.mmvq_at(q, w, x, 0, y, 0, t)
    }

    /// `mmvq` on rows `x_row0..x_row0+t` of x, writing rows `y_row0..y_row0+t` of y (e.g. the
    /// output head on the last row of a prompt chunk).
    #[allow(clippy::too_many_arguments)]
    pub fn mmvq_at(
        &self,
        q: &Queue,
        w: &WeightView,        // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
        x_row0: usize,
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
        t: usize,
    ) -> Result<()> {
        let what = "mmvq";
        w.check(what)?;
        if t == 0 || t > MMVQ_MAX_T {
            return Err(MatrixError::Shape {
                what: what.into(),
                message: format!("t = {t} rows; mmvq takes 1..={MMVQ_MAX_T} (use matmul)"),
            });
        }
        check_act(what, "x", x, x_row0 + t, w.n_in)?;
        check_act(what, "y", y, y_row0 + t, w.n_out)?;
        if super::mmvq_kreg::try_kreg(q, w, x, x_row0, y, y_row0, t)? {
            return Ok(()); // STRATA_MMVQ_KREG=1 and KREG took the matrix (docs/flags.md)
        }
        // Repacked one lane per row at load: tiled.rs (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0) or ktiled.rs
        // (Q4_K/Q5_K/Q6_K; with STRATA_MMVQ_KREG=1 KREG took those above and never gets here).
        if let Some(tiled) = w.tiled {
            if super::ktiled::supported(w.type_id) {
                return self.mmvq_ktiled(q, w, tiled, x, x_row0, y, y_row0, t);
            }
            return self.mmvq_tiled(q, w, tiled, x, x_row0, y, y_row0, t);
        }
        let k = self.kernel(w.type_id, Family::Mmvq, what)?;
        let groups = w.n_out.div_ceil(MMVQ_ROWS_PER_GROUP);
        q.launch(
            &k,
            NdRange::groups(groups, MMVQ_ROWS_PER_GROUP * SG),
            &[
                Arg::buf_at(w.buf, w.offset),
                Arg::buf_at(x, x_row0 * w.n_in),
                Arg::buf_at(y, y_row0 * w.n_out),
                Arg::i32(w.n_in as i32),
                Arg::i32(w.n_out as i32),
                Arg::i32(t as i32),
            ],
        )?;
        Ok(())
    }

    /// The tiled kernel (`mmvq_tiled.cpp`): one 16-lane work-group per tile of 16 rows.
    #[allow(clippy::too_many_arguments)]
    fn mmvq_tiled(
        &self,
        q: &Queue,
        w: &WeightView,
        tiled: &DeviceBuffer<u8>, // tiles of w, tiled.rs layout
        x: &DeviceBuffer<f32>,    // (>= x_row0 + t, n_in)
        x_row0: usize,
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
        t: usize,
    ) -> Result<()> {
        let what = "mmvq";
        let want = tiled::tiled_bytes(w.type_id, w.n_out, w.n_in);
        if want != Some(tiled.len()) {
            return Err(MatrixError::Shape {
                what: what.into(),
                message: format!(
                    "tiled copy of ({}, {}) holds {} bytes, expected {want:?}",
                    w.n_out,
                    w.n_in,
                    tiled.len()
                ),
            });
        }
        let k = self.kernel(w.type_id, Family::MmvqTiled(t as u8), what)?;
        q.launch(
            &k,
            NdRange::groups(w.n_out.div_ceil(tiled::TILE), tiled::TILE),
            &[
                Arg::buf(tiled),
                Arg::buf_at(x, x_row0 * w.n_in),
                Arg::buf_at(y, y_row0 * w.n_out),
                Arg::i32(w.n_in as i32),
                Arg::i32(w.n_out as i32),
            ],
        )?;
        Ok(())
    }
}
