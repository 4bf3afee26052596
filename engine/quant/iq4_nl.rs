//! IQ4_NL (ggml type 20): 32 weights per 18-byte block, 4.5 bits per weight. 4-bit indices
//! into the non-linear codebook `KVALUES_IQ4NL` (IQ4_XS's), one f16 scale per 32. llama-quantize
//! stores it for rows whose width is not a multiple of 256 (SmolLM2's 576, Gemma 3's 640) when
//! the asked type is a K-quant or i-quant.

use super::iq4_xs::nearest_level;
use super::{
    read_block, signed_absmax, type_id, write_block, BlockQ8_0, Pod, QuantDot, QuantFormat,
    KVALUES_IQ4NL, Q8_0,
};
use half::f16;

pub const QK4_NL: usize = 32;

/// For j in 0..16: `w[j] = d * KVALUES_IQ4NL[qs[j] & 0xF]`,
/// `w[j + 16] = d * KVALUES_IQ4NL[qs[j] >> 4]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq4Nl {
    /// Block scale.
    pub d: f16,
    /// Codebook indices: low nibble = first half of the block, high nibble = second half.
    pub qs: [u8; QK4_NL / 2],
}
const _: () = assert!(std::mem::size_of::<BlockIq4Nl>() == 18);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockIq4Nl {}

pub struct Iq4Nl;

impl QuantFormat for Iq4Nl {
    const NAME: &'static str = "IQ4_NL";
    const TYPE_ID: u32 = type_id::IQ4_NL;
    const BLOCK_ELEMS: usize = QK4_NL;
    const BLOCK_BYTES: usize = 18;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq4Nl = read_block(block);
        let d = b.d.to_f32();
        let (lo, hi) = out.split_at_mut(16);
        for j in 0..16 {
            lo[j] = d * KVALUES_IQ4NL[(b.qs[j] & 0xF) as usize] as f32;
            hi[j] = d * KVALUES_IQ4NL[(b.qs[j] >> 4) as usize] as f32;
        }
    }

    /// Simple quantizer (not ggml's weighted scale search): `d = max / -127` (max = signed
    /// value of largest magnitude, mapped to the level -127) as f16; each weight takes the
    /// nearest level of `x / d`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let d = f16::from_f32(signed_absmax(x) / -127.0);
        let df = d.to_f32();
        let idx = |v: f32| {
            if df != 0.0 {
                nearest_level(v / df)
            } else {
                8 // level 1: the closest to zero
            }
        };
        let mut qs = [0u8; 16];
        for j in 0..16 {
            qs[j] = idx(x[j]) | (idx(x[j + 16]) << 4);
        }
        write_block(&BlockIq4Nl { d, qs }, out);
    }
}

impl QuantDot for Iq4Nl {
    type Act = Q8_0;

    /// ggml `vec_dot_iq4_nl_q8_0`: `d_w * d_a * sum(kvalue * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq4Nl = read_block(w);
        let a: BlockQ8_0 = read_block(a);
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += KVALUES_IQ4NL[(w.qs[j] & 0xF) as usize] as i32 * a.qs[j] as i32;
            sumi += KVALUES_IQ4NL[(w.qs[j] >> 4) as usize] as i32 * a.qs[j + 16] as i32;
        }
        w.d.to_f32() as f64 * a.d.to_f32() as f64 * sumi as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut bytes = [0u8; 18];
        bytes[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        // byte j: low nibble j (elem j), high nibble 15 - j (elem j + 16)
        for j in 0..16u8 {
            bytes[2 + j as usize] = j | ((15 - j) << 4);
        }
        let mut out = [0f32; 32];
        Iq4Nl::dequantize(&bytes, &mut out).unwrap();
        for j in 0..16 {
            assert_eq!(out[j], 0.5 * KVALUES_IQ4NL[j] as f32);
            assert_eq!(out[j + 16], 0.5 * KVALUES_IQ4NL[15 - j] as f32);
        }
        assert_eq!(out[0], -63.5);
        assert_eq!(out[16], 56.5);
        testutil::check_dot_ref::<Iq4Nl>(&bytes, &[1.0; 32]);
        // the decoded values sit on the grid: quantizing them gives back the same bytes
        assert_eq!(Iq4Nl::quantize(&out).unwrap(), bytes.to_vec());
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(420);
        let x = testutil::weights(&mut r, 32 * 64);
        let q = Iq4Nl::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Iq4Nl::dequantize(&q, &mut y).unwrap();
        // largest codebook gap is 24 units of |d| = amax/127 (+ f16 rounding of d); values of
        // the opposite sign reach at most 113: 14 units short. The larger of 12 and 14 units.
        let bound = 14.0 / 127.0 * (1.0 + 1.0 / 1024.0) + 1e-3;
        let e = testutil::max_rel_block_err(&x, &y, 32);
        assert!(e <= bound, "err {e} > {bound}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Iq4Nl>(&q, &a);
        let qa = Q8_0::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8_0::dequantize(&qa, &mut ad).unwrap();
        let want = Iq4Nl::dot_ref(&q, &ad).unwrap();
        let got = Iq4Nl::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq4Nl>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
