//! ggml quantization formats: bit-exact block layouts, dequantizers, simple quantizers and
//! f64 reference dot products. One file per format; this file holds the shared trait, the
//! errors, and the runtime dispatch by ggml type id used by the GGUF reader and kernel tests.
//!
//! Every dequantizer computes in f32 in the same operation order as ggml's
//! `dequantize_row_*` so its output is bitwise equal to ggml's (and to gguf-py's numpy decoder,
//! checked by `tests/quant_models.rs`). See docs/quant.md.

use thiserror::Error;

pub mod bf16;
pub mod f16;
pub mod f32;
pub mod grids;
pub mod iq1_m;
pub mod iq1_s;
pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;

pub use bf16::Bf16;
pub use f16::F16;
pub use f32::F32;
pub use iq1_m::{BlockIq1M, Iq1M};
pub use iq1_s::{BlockIq1S, Iq1S};
pub use iq2_s::{BlockIq2S, Iq2S};
pub use iq2_xs::{BlockIq2Xs, Iq2Xs};
pub use iq2_xxs::{BlockIq2Xxs, Iq2Xxs};
pub use iq3_s::{BlockIq3S, Iq3S};
pub use iq3_xxs::{BlockIq3Xxs, Iq3Xxs};
pub use iq4_nl::{BlockIq4Nl, Iq4Nl};
pub use iq4_xs::{BlockIq4Xs, Iq4Xs, KVALUES_IQ4NL};
pub use q2_k::{BlockQ2K, Q2K};
pub use q3_k::{BlockQ3K, Q3K};
pub use q4_0::{BlockQ4_0, Q4_0};
pub use q4_1::{BlockQ4_1, Q4_1};
pub use q4_k::{BlockQ4K, Q4K};
pub use q5_0::{BlockQ5_0, Q5_0};
pub use q5_1::{BlockQ5_1, Q5_1};
pub use q5_k::{BlockQ5K, Q5K};
pub use q6_k::{BlockQ6K, Q6K};
pub use q8_0::{BlockQ8_0, Q8_0};
pub use q8_1::{BlockQ8_1, Q8_1};
pub use q8_k::{BlockQ8K, Q8K};

// The block structs are read straight from little-endian file bytes.
#[cfg(target_endian = "big")]
compile_error!("strata's quant formats assume a little-endian host (GGUF is little-endian)");

/// Elements in a K-quant super-block (ggml's `QK_K`).
pub const QK_K: usize = 256;
/// Largest `BLOCK_ELEMS` of any format here; sizes the stack buffers of the generic helpers.
pub const MAX_BLOCK_ELEMS: usize = QK_K;

/// ggml type ids (`enum ggml_type`), as stored in GGUF tensor infos.
pub mod type_id {
    pub const F32: u32 = 0;
    pub const F16: u32 = 1;
    pub const Q4_0: u32 = 2;
    pub const Q4_1: u32 = 3;
    pub const Q5_0: u32 = 6;
    pub const Q5_1: u32 = 7;
    pub const Q8_0: u32 = 8;
    pub const Q8_1: u32 = 9;
    pub const Q2_K: u32 = 10;
    pub const Q3_K: u32 = 11;
    pub const Q4_K: u32 = 12;
    pub const Q5_K: u32 = 13;
    pub const Q6_K: u32 = 14;
    pub const Q8_K: u32 = 15;
    pub const IQ2_XXS: u32 = 16;
    pub const IQ2_XS: u32 = 17;
    pub const IQ3_XXS: u32 = 18;
    pub const IQ1_S: u32 = 19;
    pub const IQ4_NL: u32 = 20;
    pub const IQ3_S: u32 = 21;
    pub const IQ2_S: u32 = 22;
    pub const IQ4_XS: u32 = 23;
    pub const IQ1_M: u32 = 29;
    pub const BF16: u32 = 30;
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QuantError {
    #[error("{format}: {bytes} bytes is not a whole number of {block_bytes}-byte blocks")]
    RaggedBytes {
        format: &'static str,
        bytes: usize,
        block_bytes: usize,
    },
    #[error("{format}: {n} values is not a whole number of {block_elems}-value blocks")]
    RaggedValues {
        format: &'static str,
        n: usize,
        block_elems: usize,
    },
    #[error("{format}: {blocks} blocks hold {expected} values but the other operand has {got}")]
    LengthMismatch {
        format: &'static str,
        blocks: usize,
        expected: usize,
        got: usize,
    },
    #[error("ggml type id {0} is not supported by strata (known: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS)")]
    UnsupportedType(u32),
    /// The i-quants' encoders search grids under an importance matrix (llama.cpp's
    /// `llama-quantize --imatrix`); strata reads these formats but does not write them.
    #[error("{format}: strata does not quantize into this i-quant (its encoder needs an importance matrix); make the file with llama.cpp's llama-quantize --imatrix")]
    NoQuantizer { format: &'static str },
}

/// Marker for block structs that may be read from / written to raw bytes.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, contain no padding (checked by each file's size assert),
/// and accept every bit pattern (integers, byte arrays, `half::f16`, `f32`).
pub unsafe trait Pod: Copy + 'static {}

/// Copies one block out of raw (possibly unaligned) bytes.
/// Precondition: `bytes.len() == size_of::<B>()` (callers slice with `chunks_exact`).
#[inline]
pub fn read_block<B: Pod>(bytes: &[u8]) -> B {
    assert_eq!(
        bytes.len(),
        std::mem::size_of::<B>(),
        "read_block: wrong block length"
    );
    // SAFETY: length checked above; B is Pod (every bit pattern valid, no padding), and
    // read_unaligned has no alignment requirement.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<B>()) }
}

/// Writes one block into raw bytes. Precondition: `out.len() == size_of::<B>()`.
#[inline]
pub fn write_block<B: Pod>(block: &B, out: &mut [u8]) {
    // SAFETY: B is Pod without padding, so all size_of::<B>() bytes are initialized.
    let src = unsafe {
        std::slice::from_raw_parts((block as *const B).cast::<u8>(), std::mem::size_of::<B>())
    };
    out.copy_from_slice(src);
}

/// A ggml block format. `dequantize`, `quantize` and `dot_ref` check lengths and return errors;
/// the `*_block` functions are the per-block kernels they are built from.
pub trait QuantFormat {
    const NAME: &'static str;
    const TYPE_ID: u32;
    /// Weights per block.
    const BLOCK_ELEMS: usize;
    /// Bytes per block (== size_of the block struct).
    const BLOCK_BYTES: usize;

    /// Decodes one block. Precondition: `block.len() == BLOCK_BYTES`, `out.len() == BLOCK_ELEMS`.
    fn dequantize_block(block: &[u8], out: &mut [f32]);

    /// Encodes one block. Precondition: `x.len() == BLOCK_ELEMS`, `out.len() == BLOCK_BYTES`.
    fn quantize_block(x: &[f32], out: &mut [u8]);

    /// Bits per weight.
    fn bits_per_weight() -> f64 {
        (Self::BLOCK_BYTES * 8) as f64 / Self::BLOCK_ELEMS as f64
    }

    /// Decodes whole blocks: `bytes` (n_blocks * BLOCK_BYTES) -> `out` (n_blocks * BLOCK_ELEMS).
    fn dequantize(bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
        check_pair(
            Self::NAME,
            Self::BLOCK_BYTES,
            Self::BLOCK_ELEMS,
            bytes.len(),
            out.len(),
        )?;
        for (b, o) in bytes
            .chunks_exact(Self::BLOCK_BYTES)
            .zip(out.chunks_exact_mut(Self::BLOCK_ELEMS))
        {
            Self::dequantize_block(b, o);
        }
        Ok(())
    }

    /// Encodes `x` (a multiple of BLOCK_ELEMS values) into blocks.
    fn quantize(x: &[f32]) -> Result<Vec<u8>, QuantError> {
        if x.len() % Self::BLOCK_ELEMS != 0 {
            return Err(QuantError::RaggedValues {
                format: Self::NAME,
                n: x.len(),
                block_elems: Self::BLOCK_ELEMS,
            });
        }
        let mut out = vec![0u8; x.len() / Self::BLOCK_ELEMS * Self::BLOCK_BYTES];
        for (xc, oc) in x
            .chunks_exact(Self::BLOCK_ELEMS)
            .zip(out.chunks_exact_mut(Self::BLOCK_BYTES))
        {
            Self::quantize_block(xc, oc);
        }
        Ok(out)
    }

    /// Reference dot product of dequantized weights `w` (n_blocks * BLOCK_BYTES) with f32
    /// activations `x` (n_blocks * BLOCK_ELEMS), accumulated in f64.
    fn dot_ref(w: &[u8], x: &[f32]) -> Result<f64, QuantError> {
        check_pair(
            Self::NAME,
            Self::BLOCK_BYTES,
            Self::BLOCK_ELEMS,
            w.len(),
            x.len(),
        )?;
        let mut buf = [0f32; MAX_BLOCK_ELEMS];
        let buf = &mut buf[..Self::BLOCK_ELEMS];
        let mut acc = 0f64;
        for (b, xc) in w
            .chunks_exact(Self::BLOCK_BYTES)
            .zip(x.chunks_exact(Self::BLOCK_ELEMS))
        {
            Self::dequantize_block(b, buf);
            acc += buf
                .iter()
                .zip(xc)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>();
        }
        Ok(acc)
    }
}

/// A weight format whose ggml CPU matmul runs against quantized activations (`vec_dot_type`).
pub trait QuantDot: QuantFormat {
    /// The activation format ggml pairs with this weight format (Q8_0, Q8_1 or Q8_K).
    type Act: QuantFormat;

    /// The integer-style dot product of weight blocks `w` with activation blocks `a`, the way
    /// ggml's generic CPU `ggml_vec_dot_*` computes it (integer sums of quant products, then
    /// block scales), evaluated in f64. Both operands cover the same number of values.
    fn dot_quantized(w: &[u8], a: &[u8]) -> Result<f64, QuantError> {
        let nw = check_whole(Self::NAME, w.len(), Self::BLOCK_BYTES)?;
        let na = check_whole(<Self::Act>::NAME, a.len(), <Self::Act>::BLOCK_BYTES)?;
        if nw * Self::BLOCK_ELEMS != na * <Self::Act>::BLOCK_ELEMS {
            return Err(QuantError::LengthMismatch {
                format: Self::NAME,
                blocks: nw,
                expected: nw * Self::BLOCK_ELEMS,
                got: na * <Self::Act>::BLOCK_ELEMS,
            });
        }
        let per = Self::BLOCK_ELEMS / <Self::Act>::BLOCK_ELEMS;
        let ab = per * <Self::Act>::BLOCK_BYTES;
        Ok(w.chunks_exact(Self::BLOCK_BYTES)
            .zip(a.chunks_exact(ab))
            .map(|(wb, ab)| Self::dot_block_quantized(wb, ab))
            .sum())
    }

    /// One weight block against the activation bytes covering the same values.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64;
}

/// `(block_elems, block_bytes)` of a ggml type id.
pub fn block_info(type_id: u32) -> Result<(usize, usize), QuantError> {
    macro_rules! info {
        ($t:ty) => {
            Ok((<$t>::BLOCK_ELEMS, <$t>::BLOCK_BYTES))
        };
    }
    dispatch!(type_id, info)
}

/// Name of a ggml type id as ggml spells it (`Q4_K`), or an error for unsupported ids.
pub fn type_name(type_id: u32) -> Result<&'static str, QuantError> {
    macro_rules! name {
        ($t:ty) => {
            Ok(<$t>::NAME)
        };
    }
    dispatch!(type_id, name)
}

/// Dequantizes `bytes` of ggml type `type_id` into `out` (exactly the values those bytes hold).
pub fn dequantize_by_type(type_id: u32, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    macro_rules! deq {
        ($t:ty) => {
            <$t>::dequantize(bytes, out)
        };
    }
    dispatch!(type_id, deq)
}

/// Quantizes `x` to ggml type `type_id`.
pub fn quantize_by_type(type_id: u32, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    macro_rules! q {
        ($t:ty) => {
            <$t>::quantize(x)
        };
    }
    dispatch!(type_id, q)
}

/// Reference f64 dot of weights of type `type_id` with f32 activations.
pub fn dot_ref_by_type(type_id: u32, w: &[u8], x: &[f32]) -> Result<f64, QuantError> {
    macro_rules! dot {
        ($t:ty) => {
            <$t>::dot_ref(w, x)
        };
    }
    dispatch!(type_id, dot)
}

/// Number of values `n_bytes` of type `type_id` decode to (errors on partial blocks).
pub fn values_in(type_id: u32, n_bytes: usize) -> Result<usize, QuantError> {
    let (elems, bytes) = block_info(type_id)?;
    Ok(check_whole(type_name(type_id)?, n_bytes, bytes)? * elems)
}

/// Bytes needed to hold `n_values` values of type `type_id` (errors on partial blocks).
pub fn bytes_for(type_id: u32, n_values: usize) -> Result<usize, QuantError> {
    let (elems, bytes) = block_info(type_id)?;
    if n_values % elems != 0 {
        return Err(QuantError::RaggedValues {
            format: type_name(type_id)?,
            n: n_values,
            block_elems: elems,
        });
    }
    Ok(n_values / elems * bytes)
}

macro_rules! dispatch {
    ($id:expr, $m:ident) => {
        match $id {
            type_id::F32 => $m!(F32),
            type_id::F16 => $m!(F16),
            type_id::BF16 => $m!(Bf16),
            type_id::Q4_0 => $m!(Q4_0),
            type_id::Q4_1 => $m!(Q4_1),
            type_id::Q5_0 => $m!(Q5_0),
            type_id::Q5_1 => $m!(Q5_1),
            type_id::Q8_0 => $m!(Q8_0),
            type_id::Q8_1 => $m!(Q8_1),
            type_id::Q2_K => $m!(Q2K),
            type_id::Q3_K => $m!(Q3K),
            type_id::Q4_K => $m!(Q4K),
            type_id::Q5_K => $m!(Q5K),
            type_id::Q6_K => $m!(Q6K),
            type_id::Q8_K => $m!(Q8K),
            type_id::IQ4_NL => $m!(Iq4Nl),
            type_id::IQ1_S => $m!(Iq1S),
            type_id::IQ1_M => $m!(Iq1M),
            type_id::IQ2_S => $m!(Iq2S),
            type_id::IQ2_XXS => $m!(Iq2Xxs),
            type_id::IQ2_XS => $m!(Iq2Xs),
            type_id::IQ3_XXS => $m!(Iq3Xxs),
            type_id::IQ3_S => $m!(Iq3S),
            type_id::IQ4_XS => $m!(Iq4Xs),
            other => Err(QuantError::UnsupportedType(other)),
        }
    };
}
use dispatch;

/// Number of whole blocks in `n_bytes`, or a RaggedBytes error.
pub(crate) fn check_whole(
    format: &'static str,
    n_bytes: usize,
    block_bytes: usize,
) -> Result<usize, QuantError> {
    if n_bytes % block_bytes != 0 {
        return Err(QuantError::RaggedBytes {
            format,
            bytes: n_bytes,
            block_bytes,
        });
    }
    Ok(n_bytes / block_bytes)
}

/// Checks that `n_bytes` is whole blocks whose values match `n_values`.
pub(crate) fn check_pair(
    format: &'static str,
    block_bytes: usize,
    block_elems: usize,
    n_bytes: usize,
    n_values: usize,
) -> Result<usize, QuantError> {
    let blocks = check_whole(format, n_bytes, block_bytes)?;
    if blocks * block_elems != n_values {
        return Err(QuantError::LengthMismatch {
            format,
            blocks,
            expected: blocks * block_elems,
            got: n_values,
        });
    }
    Ok(blocks)
}

/// ggml's `nearest_int`: round half to even (valid for |x| < 2^22, which quantizers ensure).
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    x.round_ties_even() as i32
}

/// The largest-magnitude value with its sign (the first one on ties, as ggml and numpy pick).
#[inline]
pub(crate) fn signed_absmax(x: &[f32]) -> f32 {
    let mut amax = 0f32;
    let mut max = 0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    max
}

#[cfg(test)]
pub(crate) mod testutil {
    use rand::{rngs::StdRng, Rng, SeedableRng};

    pub fn rng(seed: u64) -> StdRng {
        StdRng::seed_from_u64(seed)
    }

    /// `n` values roughly like trained weights: normal-ish with a few outliers.
    pub fn weights(rng: &mut StdRng, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let u: f32 = (0..4).map(|_| rng.gen::<f32>()).sum::<f32>() - 2.0;
                if i % 97 == 13 {
                    u * 4.0
                } else {
                    u
                }
            })
            .collect()
    }

    /// Max |a-b| over blocks of `block`, divided by that block's max |a|.
    pub fn max_rel_block_err(a: &[f32], b: &[f32], block: usize) -> f32 {
        a.chunks(block)
            .zip(b.chunks(block))
            .map(|(x, y)| {
                let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
                let e = x.iter().zip(y).fold(0f32, |m, (p, q)| m.max((p - q).abs()));
                if amax == 0.0 {
                    e
                } else {
                    e / amax
                }
            })
            .fold(0f32, f32::max)
    }

    /// Sum of |w_i * x_i| over dequantized weights: the scale for dot-product tolerances.
    pub fn dot_abs<T: super::QuantFormat>(bytes: &[u8], x: &[f32]) -> f64 {
        let mut deq = vec![0f32; x.len()];
        T::dequantize(bytes, &mut deq).unwrap();
        deq.iter()
            .zip(x)
            .map(|(&a, &b)| (a as f64 * b as f64).abs())
            .sum()
    }

    /// Checks dot_ref equals the f64 sum over dequantized values.
    pub fn check_dot_ref<T: super::QuantFormat>(bytes: &[u8], x: &[f32]) {
        let mut deq = vec![0f32; x.len()];
        T::dequantize(bytes, &mut deq).unwrap();
        let want: f64 = deq.iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum();
        let got = T::dot_ref(bytes, x).unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{}: dot_ref {got} vs {want}",
            T::NAME
        );
    }
}
