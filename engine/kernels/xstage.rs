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
//! its f32 scale d, x = q * d exactly, read by the opt-in integer-dot products (vnni.rs). The
//! records are written only into a stage made by `XStage::with_records` (the engine makes those
//! with STRATA_VNNI=1 only): a stage from `XStage::new` leaves their floats untouched, so the
//! default path does no work for them.
//!
//! A rounding through blocks of 256 (the K-quants' Q8_K, `XStage::new_k`) stages only integer
//! records, for the integer-dot products of the K-quants: `n / 256` records of 292 bytes (73
//! floats): q[256] int8, the f32 scale d (x = q * d rounded to f32), and 16 int16 sums of q over
//! elements 16g .. 16g + 15.

use super::float_args::ensure;
use crate::sycl::{Arg, DeviceBuffer, Result};

const OP: &str = "xstage";
/// One block's integer record: q[32] int8, then the f32 scale.
pub const RECORD_FLOATS: usize = 9;
/// One block of 256's integer record: q[256] int8, the f32 scale, 16 int16 sums.
pub const RECORD_K_FLOATS: usize = 73;

/// Where a rounding kernel stages its output of `n` elements, and where a product finds it.
#[derive(Clone, Copy)]
pub struct XStage<'a> {
    buf: &'a DeviceBuffer<f32>, // (floats(n)) blocks of 32, (floats_k(n)) blocks of 256
    n: usize,
    block: usize,  // 32 or 256
    records: bool, // the integer records written (blocks of 256: always)
}

impl<'a> XStage<'a> {
    /// Floats a stage of `n` activation elements takes.
    pub fn floats(n: usize) -> usize {
        n + n / 32 + RECORD_FLOATS * (n / 32)
    }

    /// Floats a stage of `n` activation elements rounded in blocks of 256 takes (never more
    /// than `floats(n)`).
    pub fn floats_k(n: usize) -> usize {
        RECORD_K_FLOATS * (n / 256)
    }

    /// The stage of an `n`-element activation in `buf`: n a multiple of 32, buf large enough;
    /// the scaled copy and the block sums, no integer records.
    pub fn new(buf: &'a DeviceBuffer<f32>, n: usize) -> Result<XStage<'a>> {
        Self::with_block(buf, n, 32, false)
    }

    /// As `new`, with the integer records too (the integer-dot products' input).
    pub fn with_records(buf: &'a DeviceBuffer<f32>, n: usize) -> Result<XStage<'a>> {
        Self::with_block(buf, n, 32, true)
    }

    /// The integer records of an `n`-element activation rounded in blocks of 256 in `buf`.
    pub fn new_k(buf: &'a DeviceBuffer<f32>, n: usize) -> Result<XStage<'a>> {
        Self::with_block(buf, n, 256, true)
    }

    fn with_block(
        buf: &'a DeviceBuffer<f32>,
        n: usize,
        block: usize,
        records: bool,
    ) -> Result<XStage<'a>> {
        ensure(OP, n % block == 0, || {
            format!("{n} elements is not a whole number of blocks of {block}")
        })?;
        let need = if block == 32 {
            Self::floats(n)
        } else {
            Self::floats_k(n)
        };
        ensure(OP, buf.len() >= need, || {
            format!(
                "the stage buffer holds {} floats, {n} elements need {need}",
                buf.len()
            )
        })?;
        Ok(XStage {
            buf,
            n,
            block,
            records,
        })
    }

    /// The rounding block the stage was made for: 32 or 256.
    pub fn block(&self) -> usize {
        self.block
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

    /// A blocks-of-32 rounding kernel's two arguments (the attention's combine takes them for
    /// every rounding): the stage's address and its records' (0 for none: not written).
    pub(crate) fn args(st: Option<XStage<'a>>) -> [Arg<'a>; 2] {
        match st {
            None => [Arg::u64(0), Arg::u64(0)],
            Some(s) if s.block == 256 => [Arg::addr(s.buf), Arg::u64(0)],
            Some(s) if s.records => [Arg::addr(s.buf), Arg::addr_at(s.buf, s.n + s.n / 32)],
            Some(s) => [Arg::addr(s.buf), Arg::u64(0)],
        }
    }

    /// Appends the stage arguments of a rounding kernel: the blocks-of-32 variants (`*_q8_32`)
    /// take the stage and its records (`args`), the blocks-of-256 ones (`*_q8_256`) the stage,
    /// which is records only; other modes none.
    pub(crate) fn push_arg(args: &mut Vec<Arg<'a>>, block: usize, st: Option<XStage<'a>>) {
        match block {
            32 => args.extend(Self::args(st)),
            256 => args.push(st.map_or(Arg::u64(0), |s| Arg::addr(s.buf))),
            _ => {}
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
    /// records and the block sums. An error for a stage made without records.
    pub(crate) fn int_args_at(&self, row0: usize, n_in: usize) -> Result<(Arg<'a>, Arg<'a>)> {
        ensure("mmvq_vnni", self.records, || {
            "the staged activation has no integer records (XStage::new; the integer-dot \
             products need XStage::with_records)"
                .to_string()
        })?;
        if self.block == 256 {
            // records only: the sums are inside them
            let at = RECORD_K_FLOATS * row0 * (n_in / 256);
            return Ok((Arg::addr_at(self.buf, at), Arg::u64(0)));
        }
        let nb0 = row0 * (n_in / 32);
        Ok((
            Arg::addr_at(self.buf, self.n + self.n / 32 + RECORD_FLOATS * nb0),
            Arg::addr_at(self.buf, self.n + nb0),
        ))
    }
}

/// A rounding launcher's check of its optional stage: blocks of 32 only, covering exactly the
/// `n` elements it writes.
pub fn stage_check(op: &'static str, st: Option<XStage>, block: usize, n: usize) -> Result<()> {
    let Some(s) = st else {
        return Ok(());
    };
    ensure(op, block == s.block, || {
        format!(
            "a stage for rounding blocks of {} given to a rounding in blocks of {block}",
            s.block
        )
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

/// The integer records of a stage of blocks of 256 read back from the stage buffer's floats, for
/// an activation of `n` elements: per block its 256 q, its scale d and its 16 sums of 16 q.
pub fn records_k(stage: &[f32], n: usize) -> Vec<(Vec<i8>, f32, [i16; 16])> {
    (0..n / 256)
        .map(|b| {
            let r = &stage[RECORD_K_FLOATS * b..][..RECORD_K_FLOATS];
            let bytes: Vec<u8> = r.iter().flat_map(|f| f.to_le_bytes()).collect();
            let q = bytes[..256].iter().map(|&v| v as i8).collect();
            let d = f32::from_le_bytes([bytes[256], bytes[257], bytes[258], bytes[259]]);
            let mut sums = [0i16; 16];
            for (g, s) in sums.iter_mut().enumerate() {
                *s = i16::from_le_bytes([bytes[260 + 2 * g], bytes[261 + 2 * g]]);
            }
            (q, d, sums)
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
