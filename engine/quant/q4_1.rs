//! Q4_1 (ggml type 3): 32 weights per 20-byte block, 5 bits per weight.

use super::{read_block, type_id, write_block, BlockQ8_1, Pod, QuantDot, QuantFormat, Q8_1};
use half::f16;

pub const QK4_1: usize = 32;

/// `w[j] = d * (qs[j] & 0xF) + m`, `w[j + 16] = d * (qs[j] >> 4) + m` for j in 0..16.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_1 {
    /// Block scale.
    pub d: f16,
    /// Block minimum (offset).
    pub m: f16,
    /// Nibbles: low nibble = first half of the block, high nibble = second half.
    pub qs: [u8; QK4_1 / 2],
}
const _: () = assert!(std::mem::size_of::<BlockQ4_1>() == 20);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ4_1 {}

pub struct Q4_1;

impl QuantFormat for Q4_1 {
    const NAME: &'static str = "Q4_1";
    const TYPE_ID: u32 = type_id::Q4_1;
    const BLOCK_ELEMS: usize = QK4_1;
    const BLOCK_BYTES: usize = 20;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ4_1 = read_block(block);
        let (d, m) = (b.d.to_f32(), b.m.to_f32());
        let (lo, hi) = out.split_at_mut(16);
        for j in 0..16 {
            lo[j] = (b.qs[j] & 0xF) as f32 * d + m;
            hi[j] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }

    /// ggml's `quantize_row_q4_1_ref`: `d = (max - min)/15`, `q = min(15, trunc((x-min)/d + 0.5))`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let min = x.iter().copied().fold(f32::INFINITY, f32::min);
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q = |v: f32| (((v - min) * id + 0.5) as i8).clamp(0, 15) as u8;
        let mut qs = [0u8; 16];
        for j in 0..16 {
            qs[j] = q(x[j]) | (q(x[j + 16]) << 4);
        }
        write_block(
            &BlockQ4_1 {
                d: f16::from_f32(d),
                m: f16::from_f32(min),
                qs,
            },
            out,
        );
    }
}

impl QuantDot for Q4_1 {
    type Act = Q8_1;

    /// ggml `vec_dot_q4_1_q8_1`: `d_w * d_a * sum(q * qa) + m_w * s_a`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ4_1 = read_block(w);
        let a: BlockQ8_1 = read_block(a);
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += (w.qs[j] & 0xF) as i32 * a.qs[j] as i32;
            sumi += (w.qs[j] >> 4) as i32 * a.qs[j + 16] as i32;
        }
        sumi as f64 * w.d.to_f32() as f64 * a.d.to_f32() as f64
            + w.m.to_f32() as f64 * a.s.to_f32() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut bytes = vec![0u8; 20];
        bytes[..2].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
        bytes[2..4].copy_from_slice(&f16::from_f32(-1.0).to_le_bytes());
        for j in 0..16u8 {
            bytes[4 + j as usize] = j | ((15 - j) << 4);
        }
        let mut out = [0f32; 32];
        Q4_1::dequantize(&bytes, &mut out).unwrap();
        for j in 0..16 {
            assert_eq!(out[j], j as f32 * 0.25 - 1.0);
            assert_eq!(out[j + 16], (15 - j) as f32 * 0.25 - 1.0);
        }
        testutil::check_dot_ref::<Q4_1>(&bytes, &[0.5; 32]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(41);
        let x = testutil::weights(&mut r, 32 * 64);
        let q = Q4_1::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q4_1::dequantize(&q, &mut y).unwrap();
        // step (max-min)/15 <= 2*amax/15; half a step plus f16 rounding of d and m
        let e = testutil::max_rel_block_err(&x, &y, 32);
        assert!(e <= 1.0 / 15.0 + 2e-3, "err {e}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q4_1>(&q, &a);
        // The integer dot uses the f16-rounded s = d*sum(qs) of Q8_1, so it differs from the
        // dequantized dot by at most |m| * (f16 rounding of s) per block.
        let qa = Q8_1::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8_1::dequantize(&qa, &mut ad).unwrap();
        let want = Q4_1::dot_ref(&q, &ad).unwrap();
        let got = Q4_1::dot_quantized(&q, &qa).unwrap();
        let tol: f64 = q
            .chunks_exact(20)
            .zip(qa.chunks_exact(36))
            .map(|(w, a)| {
                let w: BlockQ4_1 = read_block(w);
                let a: BlockQ8_1 = read_block(a);
                let sum_q: i32 = a.qs.iter().map(|&v| v as i32).sum();
                let m = (w.m.to_f32() as f64).abs();
                let s_true = (sum_q as f64 * a.d.to_f32() as f64).abs();
                m * (a.s.to_f32() as f64).abs() * 2f64.powi(-10) + m * s_true * 2f64.powi(-10)
            })
            .sum();
        assert!(
            (got - want).abs() <= tol + 1e-9,
            "{got} vs {want} (tol {tol})"
        );
    }
}
