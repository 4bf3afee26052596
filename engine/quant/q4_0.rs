//! Q4_0 (ggml type 2): 32 weights per 18-byte block, 4.5 bits per weight.

use super::{read_block, signed_absmax, type_id, write_block, Pod, QuantDot, QuantFormat, Q8_0};
use half::f16;

pub const QK4_0: usize = 32;

/// `w[j] = d * ((qs[j] & 0xF) - 8)`, `w[j + 16] = d * ((qs[j] >> 4) - 8)` for j in 0..16.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_0 {
    /// Block scale.
    pub d: f16,
    /// Nibbles: low nibble = first half of the block, high nibble = second half.
    pub qs: [u8; QK4_0 / 2],
}
const _: () = assert!(std::mem::size_of::<BlockQ4_0>() == 18);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ4_0 {}

pub struct Q4_0;

impl QuantFormat for Q4_0 {
    const NAME: &'static str = "Q4_0";
    const TYPE_ID: u32 = type_id::Q4_0;
    const BLOCK_ELEMS: usize = QK4_0;
    const BLOCK_BYTES: usize = 18;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ4_0 = read_block(block);
        let d = b.d.to_f32();
        let (lo, hi) = out.split_at_mut(16);
        for j in 0..16 {
            lo[j] = ((b.qs[j] & 0xF) as i32 - 8) as f32 * d;
            hi[j] = ((b.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }

    /// ggml's `quantize_row_q4_0_ref`: `d = max / -8` where max is the signed value of largest
    /// magnitude (so it maps to quant 0 exactly), `q = min(15, trunc(x/d + 8.5))`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let d = signed_absmax(x) / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q = |v: f32| ((v * id + 8.5) as i8).clamp(0, 15) as u8;
        let mut qs = [0u8; 16];
        for j in 0..16 {
            qs[j] = q(x[j]) | (q(x[j + 16]) << 4);
        }
        write_block(
            &BlockQ4_0 {
                d: f16::from_f32(d),
                qs,
            },
            out,
        );
    }
}

impl QuantDot for Q4_0 {
    type Act = Q8_0;

    /// ggml `vec_dot_q4_0_q8_0`: `d_w * d_a * sum((q - 8) * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ4_0 = read_block(w);
        let a: super::BlockQ8_0 = read_block(a);
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += ((w.qs[j] & 0xF) as i32 - 8) * a.qs[j] as i32;
            sumi += ((w.qs[j] >> 4) as i32 - 8) * a.qs[j + 16] as i32;
        }
        sumi as f64 * w.d.to_f32() as f64 * a.d.to_f32() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut bytes = vec![0u8; 18];
        bytes[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        // byte j: low nibble j (elem j), high nibble 15 - j (elem j + 16)
        for j in 0..16u8 {
            bytes[2 + j as usize] = j | ((15 - j) << 4);
        }
        let mut out = [0f32; 32];
        Q4_0::dequantize(&bytes, &mut out).unwrap();
        for j in 0..16 {
            assert_eq!(out[j], (j as f32 - 8.0) * 0.5);
            assert_eq!(out[j + 16], (7.0 - j as f32) * 0.5);
        }
        testutil::check_dot_ref::<Q4_0>(&bytes, &[1.0; 32]);
        // sum over elements: 0.5 * (sum(j-8) + sum(7-j)) = 0.5 * (-8 + -8) = -8
        assert_eq!(Q4_0::dot_ref(&bytes, &[1.0; 32]).unwrap(), -8.0);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(40);
        let x = testutil::weights(&mut r, 32 * 64);
        let q = Q4_0::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q4_0::dequantize(&q, &mut y).unwrap();
        // step amax/8, round-to-nearest: half a step, except that values of the opposite sign
        // to the block's max reach quant 16, clamped to 15: one full step (+ f16 rounding of d)
        let e = testutil::max_rel_block_err(&x, &y, 32);
        assert!(e <= 1.0 / 8.0 + 1e-3, "err {e}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q4_0>(&q, &a);
        let qa = Q8_0::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8_0::dequantize(&qa, &mut ad).unwrap();
        let want = Q4_0::dot_ref(&q, &ad).unwrap();
        let got = Q4_0::dot_quantized(&q, &qa).unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }
}
