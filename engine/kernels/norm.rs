//! RMSNorm (`sycl/kernels/norm.cpp`): y = x / sqrt(mean(x^2) + eps) * w over rows.
//!
//! - `rms_norm`: plain; in place when `x` and `y` are the same buffer. The per-head variant
//!   (Gemma's attn_q_norm / attn_k_norm) is `rms_norm` over rows = T * n_head, n = head_dim.
//! - `add_rms_norm`: res += a, then y = norm(res) (llama's residual add before the next pre-norm).
//! - `rms_norm_add`: res += norm(a) (Gemma's post_attention_norm / post_ffw_norm).
//!
//! One 16-lane sub-group per row; the row's sum of squares has a fixed order that depends only on
//! n, so a multi-row call is bitwise the one-row calls.

use super::float_args::{holds, int, prod};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "rms_norm";

/// The RMSNorm kernels, built once per context.
pub struct Norm {
    rms: Kernel,
    add_rms: Kernel,
    rms_add: Kernel,
}

impl Norm {
    pub fn new(ctx: &Context) -> Result<Norm> {
        let m = ctx.module(&kernels::NORM, &[])?;
        Ok(Norm {
            rms: m.kernel("rms_norm")?,
            add_rms: m.kernel("add_rms_norm")?,
            rms_add: m.kernel("rms_norm_add")?,
        })
    }

    fn check(
        rows: usize,
        n: usize,
        bufs: &[(&str, &DeviceBuffer<f32>)],
        w: &DeviceBuffer<f32>,
    ) -> Result<i32> {
        let total = prod(OP, &[rows, n])?;
        for (what, b) in bufs {
            holds(OP, what, b, total)?;
        }
        holds(OP, "weight", w, n)?;
        int(OP, "rows", rows)?;
        int(OP, "n", n)
    }

    /// y = rms_norm(x) * w; `y` may be `x`.
    #[allow(clippy::too_many_arguments)]
    pub fn rms_norm(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>, // (rows, n)
        w: &DeviceBuffer<f32>, // (n)
        y: &DeviceBuffer<f32>, // (rows, n)
        rows: usize,
        n: usize,
        eps: f32,
    ) -> Result<()> {
        let ni = Self::check(rows, n, &[("x", x), ("y", y)], w)?;
        if rows == 0 {
            return Ok(());
        }
        q.launch(
            &self.rms,
            NdRange::groups(rows, 16),
            &[
                Arg::addr(x),
                Arg::addr(w),
                Arg::addr(y),
                Arg::i32(ni),
                Arg::f32(eps),
            ],
        )
    }

    /// res = res + a; y = rms_norm(res) * w.
    #[allow(clippy::too_many_arguments)]
    pub fn add_rms_norm(
        &self,
        q: &Queue,
        res: &DeviceBuffer<f32>, // (rows, n), updated in place
        a: &DeviceBuffer<f32>,   // (rows, n)
        w: &DeviceBuffer<f32>,   // (n)
        y: &DeviceBuffer<f32>,   // (rows, n)
        rows: usize,
        n: usize,
        eps: f32,
    ) -> Result<()> {
        let ni = Self::check(rows, n, &[("res", res), ("a", a), ("y", y)], w)?;
        if rows == 0 {
            return Ok(());
        }
        q.launch(
            &self.add_rms,
            NdRange::groups(rows, 16),
            &[
                Arg::addr(res),
                Arg::addr(a),
                Arg::addr(w),
                Arg::addr(y),
                Arg::i32(ni),
                Arg::f32(eps),
            ],
        )
    }

    /// res = res + rms_norm(a) * w.
    #[allow(clippy::too_many_arguments)]
    pub fn rms_norm_add(
        &self,
        q: &Queue,
        a: &DeviceBuffer<f32>,   // (rows, n)
        w: &DeviceBuffer<f32>,   // (n)
        res: &DeviceBuffer<f32>, // (rows, n), updated in place
        rows: usize,
        n: usize,
        eps: f32,
    ) -> Result<()> {
        let ni = Self::check(rows, n, &[("a", a), ("res", res)], w)?;
        if rows == 0 {
            return Ok(());
        }
        q.launch(
            &self.rms_add,
            NdRange::groups(rows, 16),
            &[
                Arg::addr(a),
                Arg::addr(w),
                Arg::addr(res),
                Arg::i32(ni),
                Arg::f32(eps),
            ],
        )
    }
}

/// Reference for `rms_norm`: f64 over rows (rows, n) with weight (n).
pub fn reference(x: &[f32], w: &[f32], n: usize, eps: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let ss: f64 = row.iter().map(|&v| v as f64 * v as f64).sum();
        let inv = 1.0 / (ss / n as f64 + eps as f64).sqrt();
        out.extend(
            row.iter()
                .zip(w)
                .map(|(&v, &wi)| v as f64 * inv * wi as f64),
        );
    }
    out
}

/// Reference for `add_rms_norm`: returns (res + a, rms_norm(res + a) * w), both in f64. The sum
/// is what the kernel stores in f32 and then normalises, so the norm is taken of the f32 sum.
pub fn reference_add_norm(
    res: &[f32],
    a: &[f32],
    w: &[f32],
    n: usize,
    eps: f32,
) -> (Vec<f64>, Vec<f64>) {
    let sum: Vec<f32> = res.iter().zip(a).map(|(&r, &x)| r + x).collect();
    let y = reference(&sum, w, n, eps);
    (sum.iter().map(|&v| v as f64).collect(), y)
}

/// Reference for `rms_norm_add`: res + rms_norm(a) * w in f64.
pub fn reference_norm_add(a: &[f32], w: &[f32], res: &[f32], n: usize, eps: f32) -> Vec<f64> {
    let y = reference(a, w, n, eps);
    res.iter().zip(y).map(|(&r, v)| r as f64 + v).collect()
}
