//! Q5_0 (ggml type 6): 32 weights per 22-byte block, 5.5 bits per weight.

use super::{
    read_block, signed_absmax, type_id, write_block, BlockQ8_0, Pod, QuantDot, QuantFormat, Q8_0,
};
use half::f16;

pub const QK5_0: usize = 32;

/// With `h = u32::from_le_bytes(qh)` and j in 0..16:
/// `w[j]      = d * (((qs[j] & 0xF) | (bit j of h) << 4) - 16)`,
/// `w[j + 16] = d * (((qs[j] >> 4)  | (bit j+16 of h) << 4) - 16)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5_0 {
    /// Block scale.
    pub d: f16,
    /// Fifth bits, bit i for element i (little-endian u32).
    pub qh: [u8; 4],
    /// Low 4 bits: low nibble = first half of the block, high nibble = second half.
    pub qs: [u8; QK5_0 / 2],
}
const _: () = assert!(std::mem::size_of::<BlockQ5_0>() == 22);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ5_0 {}

/// The 32 five-bit quants (0..=31) of a Q5_0/Q5_1 block, in element order.
#[inline]
pub(crate) fn unpack5(qh: [u8; 4], qs: &[u8; 16]) -> [u8; 32] {
    let h = u32::from_le_bytes(qh);
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0xF) | ((((h >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((h >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

/// Packs 32 five-bit quants into `(qh, qs)`.
#[inline]
pub(crate) fn pack5(q: &[u8; 32]) -> ([u8; 4], [u8; 16]) {
    let mut h = 0u32;
    let mut qs = [0u8; 16];
    for j in 0..16 {
        qs[j] = (q[j] & 0xF) | ((q[j + 16] & 0xF) << 4);
        h |= ((q[j] as u32 >> 4) & 1) << j;
        h |= ((q[j + 16] as u32 >> 4) & 1) << (j + 16);
    }
    (h.to_le_bytes(), qs)
}

pub struct Q5_0;

impl QuantFormat for Q5_0 {
    const NAME: &'static str = "Q5_0";
    const TYPE_ID: u32 = type_id::Q5_0;
    const BLOCK_ELEMS: usize = QK5_0;
    const BLOCK_BYTES: usize = 22;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ5_0 = read_block(block);
        let d = b.d.to_f32();
        for (o, q) in out.iter_mut().zip(unpack5(b.qh, &b.qs)) {
            *o = (q as i32 - 16) as f32 * d;
        }
    }

    /// ggml's `quantize_row_q5_0_ref`: `d = max / -16` (max = signed value of largest
    /// magnitude), `q = min(31, trunc(x/d + 16.5))`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let d = signed_absmax(x) / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut q = [0u8; 32];
        for (qi, &v) in q.iter_mut().zip(x) {
            *qi = ((v * id + 16.5) as i8).clamp(0, 31) as u8;
        }
        let (qh, qs) = pack5(&q);
        write_block(
            &BlockQ5_0 {
                d: f16::from_f32(d),
                qh,
                qs,
            },
            out,
        );
    }
}

impl QuantDot for Q5_0 {
    type Act = Q8_0;

    /// ggml `vec_dot_q5_0_q8_0`: `d_w * d_a * sum((q - 16) * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ5_0 = read_block(w);
        let a: BlockQ8_0 = read_block(a);
        let sumi: i32 = unpack5(w.qh, &w.qs)
            .iter()
            .zip(&a.qs)
            .map(|(&q, &p)| (q as i32 - 16) * p as i32)
            .sum();
        sumi as f64 * w.d.to_f32() as f64 * a.d.to_f32() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut bytes = vec![0u8; 22];
        bytes[..2].copy_from_slice(&f16::from_f32(2.0).to_le_bytes());
        // fifth bit set for elements 0, 17 and 31
        let h: u32 = (1 << 0) | (1 << 17) | (1 << 31);
        bytes[2..6].copy_from_slice(&h.to_le_bytes());
        for j in 0..16u8 {
            bytes[6 + j as usize] = j | ((15 - j) << 4);
        }
        let mut out = [0f32; 32];
        Q5_0::dequantize(&bytes, &mut out).unwrap();
        for j in 0..16 {
            let lo = j as i32 + if j == 0 { 16 } else { 0 };
            let hi = 15 - j as i32 + if j == 1 || j == 15 { 16 } else { 0 };
            assert_eq!(out[j], (lo - 16) as f32 * 2.0, "elem {j}");
            assert_eq!(out[j + 16], (hi - 16) as f32 * 2.0, "elem {}", j + 16);
        }
        testutil::check_dot_ref::<Q5_0>(&bytes, &[0.5; 32]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(50);
        let x = testutil::weights(&mut r, 32 * 64);
        let q = Q5_0::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q5_0::dequantize(&q, &mut y).unwrap();
        let e = testutil::max_rel_block_err(&x, &y, 32);
        // as Q4_0: half a step, or one full step at the clamped end (quant 32 -> 31)
        assert!(e <= 1.0 / 16.0 + 1e-3, "err {e}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q5_0>(&q, &a);
        let qa = Q8_0::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8_0::dequantize(&qa, &mut ad).unwrap();
        let want = Q5_0::dot_ref(&q, &ad).unwrap();
        let got = Q5_0::dot_quantized(&q, &qa).unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }

    #[test]
    fn pack_unpack_inverse() {
        let q: [u8; 32] = std::array::from_fn(|i| (i * 7 % 32) as u8);
        let (qh, qs) = pack5(&q);
        assert_eq!(unpack5(qh, &qs), q);
    }
}
