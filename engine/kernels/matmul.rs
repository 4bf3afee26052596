//! Launcher of `sycl/kernels/matmul.cpp`: quantized weight x many activation rows (the prompt
//! path, chunks up to 512 rows), and `mul`, which picks mmvq for t <= 8. Rows agree with mmvq's
//! to f32 rounding (another summation order), not bitwise. Reference: `qmatrix::matrix_ref`.

use super::qmatrix::{
    check_act, Family, MatrixError, MatrixKernels, Result, WeightView, MMVQ_MAX_T, SG,
};
use super::xstage::XStage;
use crate::sycl::{Arg, DeviceBuffer, NdRange, Queue};

impl MatrixKernels {
    /// y[t, o] = sum_i W[o, i] * x[t, i] for any t >= 1 (a work-group per `MatmulTile::rows`
    /// weight rows, all t).
    pub fn matmul(
        &self,
        q: &Queue,
        w: &WeightView,            // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>,     // (t, n_in)
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        self.matmul_at(q, w, x, 0, y, 0, t)
    }

    /// `matmul` on rows `x_row0..x_row0+t` of x, writing rows `y_row0..y_row0+t` of y (e.g. the
    /// output head on the last row of a prompt chunk).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_at(
        &self,
        q: &Queue,
        w: &WeightView,        // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
        x_row0: usize,
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
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
        check_act(what, "x", x, x_row0 + t, w.n_in)?;
        check_act(what, "y", y, y_row0 + t, w.n_out)?;
        // the GGUF bytes when they are on the device to be read, else the tiled copy: the same
        // bits
        let (family, wa) = match w.tiled {
            Some(t) if w.buf.is_none() || !w.matmul_reads_gguf => {
                (Family::MatmulTiled, Arg::buf(t))
            }
            _ => (Family::Matmul, Arg::buf_at(w.gguf(what)?, w.offset)),
        };
        let k = self.kernel(w.type_id, family, what)?;
        let groups = w.n_out.div_ceil(self.matmul_tile().rows());
        q.launch(
            &k,
            NdRange::groups(groups, SG),
            &[
                wa,
                Arg::buf_at(x, x_row0 * w.n_in),
                Arg::buf_at(y, y_row0 * w.n_out),
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
        w: &WeightView,            // (n_out, n_in)
        x: &DeviceBuffer<f32>,     // (t, n_in)
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        self.mul_at(q, w, x, 0, y, 0, t)
    }

    /// `mul` on rows `x_row0..x_row0+t` of x into rows `y_row0..y_row0+t` of y.
    #[allow(clippy::too_many_arguments)]
    pub fn mul_at(
        &self,
        q: &Queue,
        w: &WeightView,        // (n_out, n_in)
        x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
        x_row0: usize,
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
        t: usize,
    ) -> Result<()> {
        self.mul_at_st(q, w, x, x_row0, None, y, y_row0, t)
    }

    /// `mul` with x's stage (xstage.rs), written by the kernel that rounded x: the mmvq side
    /// reads it (`mmvq_staged`), matmul has no use for it. The same outputs either way; with
    /// the integer-dot kernels on (vnni.rs) they read it at any t, prompt rows included.
    pub fn mul_staged(
        &self,
        q: &Queue,
        w: &WeightView,            // (n_out, n_in)
        x: &DeviceBuffer<f32>,     // (t, n_in)
        st: Option<XStage>,        // x staged, (t * n_in) elements
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        self.mul_at_st(q, w, x, 0, st, y, 0, t)
    }

    #[allow(clippy::too_many_arguments)]
    fn mul_at_st(
        &self,
        q: &Queue,
        w: &WeightView,        // (n_out, n_in)
        x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
        x_row0: usize,
        st: Option<XStage>,        // x staged, (x_row0 + t) * n_in elements
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
        t: usize,
    ) -> Result<()> {
        // STRATA_VNNI=1 with x staged for all t rows: the integer-dot kernel at any t (vnni.rs)
        if t <= MMVQ_MAX_T || (w.tiled.is_some() && self.int_dot_reads(w.type_id, st)) {
            self.mmvq_at_st(q, w, x, x_row0, st, y, y_row0, t)
        } else {
            self.matmul_at(q, w, x, x_row0, y, y_row0, t)
        }
    }
}
