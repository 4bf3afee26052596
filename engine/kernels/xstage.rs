//! The staged activation (`sycl/kernels/xstage.hpp`): a rounded matmul input's per-block sums
//! and its 4-bit scaled copy, written by the kernel that rounds it (`ActQ::run_staged`,
//! `NormQ8`, `GluQ8`, the attention's rounded combine) and read by the tiled decode products
//! (`MatrixKernels::mmvq_group` / `mmvq_residual`, `mmvq_tiled.cpp -DCFG_XS_PRE`) in place of
//! staging x again in each of their work-groups. The products' outputs are bitwise those of the
//! unstaged kernel (`tests/kernels_mmvq.rs::staged_x_is_bitwise_unstaged`, `tests/model_fused.rs`).
//!
//! Layout for an activation of `n` elements (a multiple of 32; rows of the product's n_in, flat):
//! `n` floats x[i] * 2^-(bit offset of element i % 32 in the 4-bit formats' words), then `n / 32`
//! block sums, then `n / 32` integer records of 36 bytes (9 floats): the block's 32 q as int8 and
//! its f32 scale d, x = q * d exactly, read by the opt-in integer-dot products (vnni.rs).

use super::float_args::ensure;
use crate::sycl::{Arg, DeviceBuffer, Result};

const OP: &str = "xstage";
/// One block's integer record: q[32] int8, then the f32 scale.
pub const RECORD_FLOATS: usize = 9;

/// Where a rounding kernel stages its output of `n` elements, and where a product finds it.
#[derive(Clone, Copy)]
pub struct XStage<'a> {
    buf: &'a DeviceBuffer<f32>, // (n + n / 32 + 9 n / 32)
    n: usize,
}

impl<'a> XStage<'a> {
    /// Floats a stage of `n` activation elements takes.
    pub fn floats(n: usize) -> usize {
        n + n / 32 + RECORD_FLOATS * (n / 32)
    }

    /// The stage of an `n`-element activation in `buf`: n a multiple of 32, buf large enough.
    pub fn new(buf: &'a DeviceBuffer<f32>, n: usize) -> Result<XStage<'a>> {
        ensure(OP, n % 32 == 0, || {
            format!("{n} elements is not a whole number of blocks of 32")
        })?;
        ensure(OP, buf.len() >= Self::floats(n), || {
            format!(
                "the stage buffer holds {} floats, {n} elements need {}",
                buf.len(),
                Self::floats(n)
            )
        })?;
        Ok(XStage { buf, n })
    }

    /// Checks that the stage was written for an activation of exactly `n` elements.
    pub fn check(&self, op: &'static str, n: usize) -> Result<()> {
        ensure(op, self.n == n, || {
            format!(
                "the staged activation has {} elements, the launch reads {n}",
                self.n
            )
        })
    }

    /// The rounding kernel's argument: the stage's address, or 0 for none.
    pub(crate) fn arg(st: Option<XStage<'a>>) -> Arg<'a> {
        st.map_or(Arg::u64(0), |s| Arg::addr(s.buf))
    }

    /// Appends the stage argument of a rounding kernel that has one: the blocks-of-32 variants
    /// (`*_q8_32`) take it, the blocks-of-256 ones do not.
    pub(crate) fn push_arg(args: &mut Vec<Arg<'a>>, block: usize, st: Option<XStage<'a>>) {
        if block == 32 {
            args.push(Self::arg(st));
        }
    }

    /// The product's two arguments for rows `row0..` of width `n_in`: the scaled copy and the
    /// block sums.
    pub(crate) fn args_at(&self, row0: usize, n_in: usize) -> (Arg<'a>, Arg<'a>) {
        (
            Arg::addr_at(self.buf, row0 * n_in),
            Arg::addr_at(self.buf, self.n + row0 * (n_in / 32)),
        )
    }

    /// The integer-dot product's two arguments for rows `row0..` of width `n_in`: the integer
    /// records and the block sums.
    pub(crate) fn int_args_at(&self, row0: usize, n_in: usize) -> (Arg<'a>, Arg<'a>) {
        let nb0 = row0 * (n_in / 32);
        (
            Arg::addr_at(self.buf, self.n + self.n / 32 + RECORD_FLOATS * nb0),
            Arg::addr_at(self.buf, self.n + nb0),
        )
    }
}

/// A rounding launcher's check of its optional stage: blocks of 32 only, covering exactly the
/// `n` elements it writes.
pub fn stage_check(op: &'static str, st: Option<XStage>, block: usize, n: usize) -> Result<()> {
    let Some(s) = st else {
        return Ok(());
    };
    ensure(op, block == 32, || {
        format!("a staged output needs rounding blocks of 32, not {block}")
    })?;
    s.check(op, n)
}

/// f64 reference of a stage: the scaled copy (exact in f32: powers of two) and the block sums.
pub fn reference(x: &[f32]) -> (Vec<f32>, Vec<f64>) {
    let scaled = x
        .iter()
        .enumerate()
        .map(|(i, &v)| v * scale(i % 32))
        .collect();
    let sums = x
        .chunks(32)
        .map(|b| b.iter().map(|&v| v as f64).sum())
        .collect();
    (scaled, sums)
}

/// The integer records of a stage read back from the stage buffer's floats, for an activation of
/// `n` elements: per block its 32 q and its scale d.
pub fn records(stage: &[f32], n: usize) -> Vec<([i8; 32], f32)> {
    let base = n + n / 32;
    (0..n / 32)
        .map(|b| {
            let r = &stage[base + RECORD_FLOATS * b..][..RECORD_FLOATS];
            let mut q = [0i8; 32];
            for (w, f) in r[..8].iter().enumerate() {
                for (k, byte) in f.to_le_bytes().into_iter().enumerate() {
                    q[4 * w + k] = byte as i8;
                }
            }
            (q, r[8])
        })
        .collect()
}

/// What a block's integer record must hold for its rounded values `y` (x = q * d exactly, the
/// largest |q| 127): d = max |y| / 127 (exact: max |y| is 127 d) and q = y / d.
pub fn record_reference(y: &[f32]) -> ([i8; 32], f32) {
    let d = y.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
    let mut q = [0i8; 32];
    for (o, &v) in q.iter_mut().zip(y) {
        *o = if d != 0.0 { (v / d).round() as i8 } else { 0 };
    }
    (q, d)
}

/// xs_scale of xstage.hpp: element 4j+b of a block sits at bit 8b of its word, 16+4j+b at 8b+4.
pub fn scale(e: usize) -> f32 {
    let sh = 8 * (e & 3) + if e >= 16 { 4 } else { 0 };
    (-(sh as f32)).exp2()
}
