//! Row softmax (`sycl/kernels/softmax.cpp`): y = softmax(x * scale) over rows (rows, n), max
//! subtracted first; scale = 1 / temperature for sampling. A 256-item work-group per row with a
//! fixed reduction order, so multi-row calls are bitwise the one-row calls.

use super::float_args::{holds, int, prod};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "softmax";

/// The softmax kernel, built once per context.
pub struct Softmax {
    k: Kernel,
}

impl Softmax {
    pub fn new(ctx: &Context) -> Result<Softmax> {
        let m = ctx.module(&kernels::SOFTMAX, &[])?;
        Ok(Softmax {
            k: m.kernel("softmax_rows")?,
        })
    }

    /// y = softmax(x * scale) per row; `y` may be `x`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>, // (rows, n)
        y: &DeviceBuffer<f32>, // (rows, n)
        rows: usize,
        n: usize,
        scale: f32,
    ) -> Result<()> {
        let total = prod(OP, &[rows, n])?;
        holds(OP, "x", x, total)?;
        holds(OP, "y", y, total)?;
        if total == 0 {
            return Ok(());
        }
        q.launch(
            &self.k,
            NdRange::groups(rows, 256),
            &[
                Arg::buf(x),
                Arg::buf(y),
                Arg::i32(int(OP, "n", n)?),
                Arg::f32(scale),
            ],
        )
    }
}

/// Reference in f64 (the scaled logits are formed in f32 first, as the kernel does).
pub fn reference(x: &[f32], n: usize, scale: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let z: Vec<f64> = row.iter().map(|&v| (v * scale) as f64).collect();
        let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = z.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}
