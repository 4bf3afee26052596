//! RMSNorm fused with the 8-bit block rounding of its output (`sycl/kernels/norm_q8.cpp`): for
//! norms whose output feeds only quantized matrix products, one launch writes the rounded matmul
//! input (llama.cpp's Q8_0-style blocks of 32 or Q8_K blocks of 256, see `kernels::actq`) instead
//! of `Norm` + `ActQ`. Bitwise the unfused pair: the same f32 operations in the same order (the
//! kernels share norm.hpp / actq.hpp with norm.cpp / actq.cpp). One sub-group per row, so
//! multi-row calls are bitwise the one-row calls.
//!
//! - `rms_norm`: yq = round(rms_norm(x) * w)
//! - `add_rms_norm`: res += a; yq = round(rms_norm(res) * w) (llama's residual add + pre-norm)
//! - `norm_add_norm`: res += rms_norm(a) * w1; yq = round(rms_norm(res) * w2) (Gemma's
//!   post_attention_norm into the residual, then ffn_norm)

use super::float_args::{ensure, holds, int, prod};
use super::xstage::{stage_check, XStage};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "rms_norm_q8";

/// The fused norm + rounding kernels, built once per context; `[0]` rounds in blocks of 32,
/// `[1]` in blocks of 256.
pub struct NormQ8 {
    rms: [Kernel; 2],
    add_rms: [Kernel; 2],
    norm_add_norm: [Kernel; 2],
}

/// Index of a rounding block size (32 or 256) into the kernel pairs.
pub(crate) fn block_index(op: &'static str, block: usize, n: usize) -> Result<usize> {
    ensure(op, block == 32 || block == 256, || {
        format!("rounding block {block} (32 or 256)")
    })?;
    ensure(op, n % block == 0, || {
        format!("row length {n} is not a multiple of the rounding block {block}")
    })?;
    Ok(usize::from(block == 256))
}

impl NormQ8 {
    pub fn new(ctx: &Context) -> Result<NormQ8> {
        let m = ctx.module(&kernels::NORM_Q8, &[])?;
        let pair = |name: &str| -> Result<[Kernel; 2]> {
            Ok([
                m.kernel(&format!("{name}_32"))?,
                m.kernel(&format!("{name}_256"))?,
            ])
        };
        Ok(NormQ8 {
            rms: pair("rms_norm_q8")?,
            add_rms: pair("add_rms_norm_q8")?,
            norm_add_norm: pair("norm_add_norm_q8")?,
        })
    }

    fn check(
        rows: usize,
        n: usize,
        block: usize,
        bufs: &[(&str, &DeviceBuffer<f32>)],
        ws: &[&DeviceBuffer<f32>],
    ) -> Result<(usize, i32)> {
        let bi = block_index(OP, block, n)?;
        let total = prod(OP, &[rows, n])?;
        for (what, b) in bufs {
            holds(OP, what, b, total)?;
        }
        for w in ws {
            holds(OP, "weight", w, n)?;
        }
        int(OP, "rows", rows)?;
        Ok((bi, int(OP, "n", n)?))
    }

    /// yq = round_block(rms_norm(x) * w). `st`: yq also staged for the products that read it
    /// (xstage.rs; blocks of 32 only).
    #[allow(clippy::too_many_arguments)]
    pub fn rms_norm(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,  // (rows, n)
        w: &DeviceBuffer<f32>,  // (n)
        yq: &DeviceBuffer<f32>, // (rows, n) rounded
        rows: usize,
        n: usize,
        eps: f32,
        block: usize,
        st: Option<XStage>, // (rows * n) elements staged
    ) -> Result<()> {
        let (bi, ni) = Self::check(rows, n, block, &[("x", x), ("yq", yq)], &[w])?;
        stage_check(OP, st, block, rows * n)?;
        if rows == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::addr(x), Arg::addr(w), Arg::addr(yq)];
        Self::finish(&mut args, block, st, ni, eps);
        q.launch(&self.rms[bi], NdRange::groups(rows, 16), &args)
    }

    /// The arguments every kernel ends with: the stage (the blocks-of-32 kernels), n, eps.
    fn finish<'a>(args: &mut Vec<Arg<'a>>, block: usize, st: Option<XStage<'a>>, n: i32, eps: f32) {
        XStage::push_arg(args, block, st);
        args.push(Arg::i32(n));
        args.push(Arg::f32(eps));
    }

    /// res = res + a; yq = round_block(rms_norm(res) * w).
    #[allow(clippy::too_many_arguments)]
    pub fn add_rms_norm(
        &self,
        q: &Queue,
        res: &DeviceBuffer<f32>, // (rows, n), updated in place
        a: &DeviceBuffer<f32>,   // (rows, n)
        w: &DeviceBuffer<f32>,   // (n)
        yq: &DeviceBuffer<f32>,  // (rows, n) rounded
        rows: usize,
        n: usize,
        eps: f32,
        block: usize,
        st: Option<XStage>, // as in `rms_norm`
    ) -> Result<()> {
        let (bi, ni) = Self::check(rows, n, block, &[("res", res), ("a", a), ("yq", yq)], &[w])?;
        stage_check(OP, st, block, rows * n)?;
        if rows == 0 {
            return Ok(());
        }
        let mut args = vec![Arg::addr(res), Arg::addr(a), Arg::addr(w), Arg::addr(yq)];
        Self::finish(&mut args, block, st, ni, eps);
        q.launch(&self.add_rms[bi], NdRange::groups(rows, 16), &args)
    }

    /// res = res + rms_norm(a) * w1; yq = round_block(rms_norm(res) * w2).
    #[allow(clippy::too_many_arguments)]
    pub fn norm_add_norm(
        &self,
        q: &Queue,
        a: &DeviceBuffer<f32>,   // (rows, n)
        w1: &DeviceBuffer<f32>,  // (n)
        res: &DeviceBuffer<f32>, // (rows, n), updated in place
        w2: &DeviceBuffer<f32>,  // (n)
        yq: &DeviceBuffer<f32>,  // (rows, n) rounded
        rows: usize,
        n: usize,
        eps: f32,
        block: usize,
        st: Option<XStage>, // as in `rms_norm`
    ) -> Result<()> {
        let (bi, ni) = Self::check(
            rows,
            n,
            block,
            &[("a", a), ("res", res), ("yq", yq)],
            &[w1, w2],
        )?;
        stage_check(OP, st, block, rows * n)?;
        if rows == 0 {
            return Ok(());
        }
        let mut args = vec![
            Arg::addr(a),
            Arg::addr(w1),
            Arg::addr(res),
            Arg::addr(w2),
            Arg::addr(yq),
        ];
        Self::finish(&mut args, block, st, ni, eps);
        q.launch(&self.norm_add_norm[bi], NdRange::groups(rows, 16), &args)
    }
}

/// The 8-bit block rounding in f64 (the definition `kernels::actq` rounds f32 values by):
/// blocks of 32: d = amax / 127, its f16 value dh, y = round_ties_even(x / d) * dh;
/// blocks of 256: m = the first element of largest |x|, y = min(127, round(-127 x / m)) * -m / 127.
pub fn reference_round(block: usize, x: &[f64]) -> Vec<f64> {
    x.chunks(block)
        .flat_map(|b| {
            let amax = b.iter().fold(0f64, |m, v| m.max(v.abs()));
            if amax == 0.0 {
                return vec![0f64; b.len()];
            }
            if block == 32 {
                let d = amax / 127.0;
                let dh = half::f16::from_f32(d as f32).to_f32() as f64;
                b.iter().map(|&v| (v / d).round_ties_even() * dh).collect()
            } else {
                // the first element with |x| == amax, as llama.cpp's scan
                let m = *b.iter().find(|v| v.abs() == amax).unwrap_or(&amax);
                let iscale = -127.0 / m;
                b.iter()
                    .map(|&v| (iscale * v).round_ties_even().min(127.0) / iscale)
                    .collect()
            }
        })
        .collect()
}
