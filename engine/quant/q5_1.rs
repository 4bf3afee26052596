//! Q5_1 (ggml type 7): 32 weights per 24-byte block, 6 bits per weight.

use super::q5_0::{pack5, unpack5};
use super::{read_block, type_id, write_block, BlockQ8_1, Pod, QuantDot, QuantFormat, Q8_1};
use half::f16;

pub const QK5_1: usize = 32;

/// With `h = u32::from_le_bytes(qh)` and j in 0..16:
/// `w[j]      = d * ((qs[j] & 0xF) | (bit j of h) << 4) + m`,
/// `w[j + 16] = d * ((qs[j] >> 4)  | (bit j+16 of h) << 4) + m`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5_1 {
    /// Block scale.
    pub d: f16,
    /// Block minimum (offset).
    pub m: f16,
    /// Fifth bits, bit i for element i (little-endian u32).
    pub qh: [u8; 4],
    /// Low 4 bits: low nibble = first half of the block, high nibble = second half.
    pub qs: [u8; QK5_1 / 2],
}
const _: () = assert!(std::mem::size_of::<BlockQ5_1>() == 24);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ5_1 {}

pub struct Q5_1;

impl QuantFormat for Q5_1 {
    const NAME: &'static str = "Q5_1";
    const TYPE_ID: u32 = type_id::Q5_1;
    const BLOCK_ELEMS: usize = QK5_1;
    const BLOCK_BYTES: usize = 24;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ5_1 = read_block(block);
        let (d, m) = (b.d.to_f32(), b.m.to_f32());
        for (o, q) in out.iter_mut().zip(unpack5(b.qh, &b.qs)) {
            *o = q as f32 * d + m;
        }
    }

    /// ggml's `quantize_row_q5_1_ref`: `d = (max - min)/31`, `q = min(31, trunc((x-min)/d + 0.5))`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let min = x.iter().copied().fold(f32::INFINITY, f32::min);
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut q = [0u8; 32];
        for (qi, &v) in q.iter_mut().zip(x) {
            *qi = (((v - min) * id + 0.5) as i8).clamp(0, 31) as u8;
        }
        let (qh, qs) = pack5(&q);
        write_block(
            &BlockQ5_1 {
                d: f16::from_f32(d),
                m: f16::from_f32(min),
                qh,
                qs,
            },
            out,
        );
    }
}

impl QuantDot for Q5_1 {
    type Act = Q8_1;

    /// ggml `vec_dot_q5_1_q8_1`: `d_w * d_a * sum(q * qa) + m_w * s_a`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ5_1 = read_block(w);
        let a: BlockQ8_1 = read_block(a);
        let sumi: i32 = unpack5(w.qh, &w.qs)
            .iter()
            .zip(&a.qs)
            .map(|(&q, &p)| q as i32 * p as i32)
            .sum();
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
        let mut bytes = vec![0u8; 24];
        bytes[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        bytes[2..4].copy_from_slice(&f16::from_f32(-3.0).to_le_bytes());
        let h: u32 = 0xFFFF_0000; // fifth bit set on the whole second half
        bytes[4..8].copy_from_slice(&h.to_le_bytes());
        for j in 0..16u8 {
            bytes[8 + j as usize] = j | (j << 4);
        }
        let mut out = [0f32; 32];
        Q5_1::dequantize(&bytes, &mut out).unwrap();
        for j in 0..16 {
            assert_eq!(out[j], j as f32 * 0.5 - 3.0);
            assert_eq!(out[j + 16], (j + 16) as f32 * 0.5 - 3.0);
        }
        testutil::check_dot_ref::<Q5_1>(&bytes, &[2.0; 32]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(51);
        let x = testutil::weights(&mut r, 32 * 64);
        let q = Q5_1::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q5_1::dequantize(&q, &mut y).unwrap();
        let e = testutil::max_rel_block_err(&x, &y, 32);
        assert!(e <= 1.0 / 31.0 + 2e-3, "err {e}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q5_1>(&q, &a);
        let qa = Q8_1::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8_1::dequantize(&qa, &mut ad).unwrap();
        let want = Q5_1::dot_ref(&q, &ad).unwrap();
        let got = Q5_1::dot_quantized(&q, &qa).unwrap();
        // s = f16(d * sum(qs)) differs from f16(d) * sum(qs) by f16 rounding (see q4_1.rs)
        let tol: f64 = q
            .chunks_exact(24)
            .zip(qa.chunks_exact(36))
            .map(|(w, a)| {
                let w: BlockQ5_1 = read_block(w);
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
