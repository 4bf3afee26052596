//! Launcher of `sycl/kernels/matmul.cpp`: quantized weight x many activation rows (the prompt
//! path, chunks up to 512 rows), and `mul`, which picks mmvq for t <= 8. Rows agree with mmvq's
//! to f32 rounding (another summation order), not bitwise. Reference: `qmatrix::matrix_ref`.

use super::qmatrix::{
    check_act, Family, MatrixError, MatrixKernels, Result, WeightView, MATMUL_ROWS, MMVQ_MAX_T, SG,
};
use crate::sycl::{Arg, DeviceBuffer, NdRange, Queue};

impl MatrixKernels {
    /// y[t, o] = sum_i W[o, i] * x[t, i] for any t >= 1 (tiles of 16 rows x 16 tokens).
    pub fn matmul(
        &self,
        q: &Queue,
        w: &WeightView,           // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>,    // (t, n_in)
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        let what = "matmul";
        w.check(what)?;
        if t == 0 || t > i32::MAX as usize {
            return Err(MatrixError::Shape {
                what: what.into(),
                message: format!("t = {t} rows"),
            });
        }
        check_act(what, "x", x, t, w.n_in)?;
        check_act(what, "y", y, t, w.n_out)?;
        let k = self.kernel(w.type_id, Family::Matmul, what)?;
        let groups = w.n_out.div_ceil(MATMUL_ROWS) * t.div_ceil(SG);
        q.launch(
            &k,
            NdRange::groups(groups, SG),
            &[
                Arg::buf_at(w.buf, w.offset),
                Arg::buf(x),
                Arg::buf(y),
                Arg::i32(w.n_in as i32),
                Arg::i32(w.n_out as i32),
                Arg::i32(t as i32),
            ],
        )?;
        Ok(())
    }

    /// The model's entry point: mmvq for t <= 8 (bitwise per row across t = 1..8), else matmul.
    pub fn mul(
        &self,
        q: &Queue,
        w: &WeightView,           // (n_out, n_in)
        x: &DeviceBuffer<f32>,    // (t, n_in)
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        if t <= MMVQ_MAX_T {
            self.mmvq(q, w, x, y, t)
        } else {
            self.matmul(q, w, x, y, t)
        }
    }
}
