//! Q6_K (ggml type 14): 256 weights per 210-byte super-block, 6.5625 bits per weight.
//! Sixteen sub-blocks of 16 with signed 8-bit scales; no mins.

use super::{
    nearest_int, read_block, signed_absmax, type_id, write_block, BlockQ8K, Pod, QuantDot,
    QuantFormat, Q8K, QK_K,
};
use half::f16;

/// The block is two halves of 128 weights; half h uses `ql[64h..64h+64]`, `qh[32h..32h+32]`,
/// `scales[8h..8h+8]`. Within a half, for l in 0..32 and k in 0..4, element `128h + 32k + l`
/// has the 6-bit quant `q = lo | hi << 4` with
/// `lo` = low nibble of `ql[64h + l + 32(k%2)]` for k < 2, high nibble for k >= 2, and
/// `hi = (qh[32h + l] >> 2k) & 3`; its weight is `(d * scales[8h + l/16 + 2k]) * (q - 32)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ6K {
    /// Low 4 bits of the quants.
    pub ql: [u8; QK_K / 2],
    /// High 2 bits of the quants.
    pub qh: [u8; QK_K / 4],
    /// Signed 8-bit sub-block scales, one per 16 weights.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: f16,
}
const _: () = assert!(std::mem::size_of::<BlockQ6K>() == 210);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ6K {}

/// The 256 signed quants (q - 32, in -32..=31) of a block in element order.
#[inline]
fn unpack6(b: &BlockQ6K) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for h in 0..2 {
        let ql = &b.ql[64 * h..64 * h + 64];
        let qh = &b.qh[32 * h..32 * h + 32];
        for l in 0..32 {
            for k in 0..4 {
                let byte = ql[l + 32 * (k % 2)];
                let lo = if k < 2 { byte & 0xF } else { byte >> 4 };
                let hi = (qh[l] >> (2 * k)) & 3;
                q[128 * h + 32 * k + l] = (lo | (hi << 4)) as i8 - 32;
            }
        }
    }
    q
}

/// Scale index (0..16) of element i: sub-blocks of 16 in element order.
#[inline]
fn scale_index(i: usize) -> usize {
    i / 16
}

pub struct Q6K;

impl QuantFormat for Q6K {
    const NAME: &'static str = "Q6_K";
    const TYPE_ID: u32 = type_id::Q6_K;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 210;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ6K = read_block(block);
        let d = b.d.to_f32();
        let q = unpack6(&b);
        for (i, o) in out.iter_mut().enumerate() {
            // (d * sc) * q, the association ggml and gguf-py use
            *o = d * b.scales[scale_index(i)] as f32 * q[i] as f32;
        }
    }

    /// Simple round-to-nearest (not ggml's iterative search): per sub-block of 16,
    /// `scale = max / -32` (max = signed value of largest magnitude, which maps to q - 32 = -32);
    /// `d = max|scale| / 127` stored as f16, sub-block scales `round(scale / d)`, quants
    /// `clamp(round(x / (d * sc)), -32, 31)`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let mut scale = [0f32; 16];
        for (s, sub) in scale.iter_mut().zip(x.chunks_exact(16)) {
            *s = signed_absmax(sub) / -32.0;
        }
        let amax = scale.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = f16::from_f32(amax / 127.0);
        let df = d.to_f32();
        let mut b = BlockQ6K {
            ql: [0; 128],
            qh: [0; 64],
            scales: [0; 16],
            d,
        };
        let mut q = [32u8; QK_K];
        for (s, &scale_s) in scale.iter().enumerate() {
            let sc = if df > 0.0 {
                nearest_int(scale_s / df).clamp(-127, 127)
            } else {
                0
            };
            b.scales[s] = sc as i8;
            let ds = df * sc as f32;
            if ds != 0.0 {
                for i in 16 * s..16 * s + 16 {
                    q[i] = (nearest_int(x[i] / ds).clamp(-32, 31) + 32) as u8;
                }
            }
        }
        for h in 0..2 {
            for l in 0..32 {
                for k in 0..4 {
                    let v = q[128 * h + 32 * k + l];
                    let shift = if k < 2 { 0 } else { 4 };
                    b.ql[64 * h + l + 32 * (k % 2)] |= (v & 0xF) << shift;
                    b.qh[32 * h + l] |= (v >> 4) << (2 * k);
                }
            }
        }
        write_block(&b, out);
    }
}

impl QuantDot for Q6K {
    type Act = Q8K;

    /// ggml `vec_dot_q6_K_q8_K`: `d_w * d_a * sum_s sc_s * sum((q - 32) * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ6K = read_block(w);
        let a: BlockQ8K = read_block(a);
        let q = unpack6(&w);
        let mut sum = 0i64;
        for s in 0..16 {
            let sumi: i32 = (16 * s..16 * s + 16)
                .map(|i| q[i] as i32 * a.qs[i] as i32)
                .sum();
            sum += w.scales[s] as i64 * sumi as i64;
        }
        w.d.to_f32() as f64 * a.d as f64 * sum as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        // Element i gets quant (i % 64); build ql/qh by the layout rule in the struct doc.
        let mut b = BlockQ6K {
            ql: [0; 128],
            qh: [0; 64],
            scales: std::array::from_fn(|s| s as i8 - 8),
            d: f16::from_f32(0.125),
        };
        for h in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    let q = ((128 * h + 32 * k + l) % 64) as u8;
                    let idx = 64 * h + l + 32 * (k % 2);
                    b.ql[idx] |= if k < 2 { q & 0xF } else { (q & 0xF) << 4 };
                    b.qh[32 * h + l] |= (q >> 4) << (2 * k);
                }
            }
        }
        let mut bytes = [0u8; 210];
        write_block(&b, &mut bytes);
        // spot-check raw bytes against the layout: element 0 -> q 0, element 47 -> q 47 =
        // 0b10_1111 (k = 1, l = 15: low nibble in ql[47], high bits 2 at qh[15] bits 2..4)
        assert_eq!(bytes[47] & 0xF, 0xF);
        assert_eq!((bytes[128 + 15] >> 2) & 3, 2);
        let mut out = [0f32; 256];
        Q6K::dequantize(&bytes, &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            let sc = (i / 16) as f32 - 8.0;
            let q = (i % 64) as f32 - 32.0;
            assert_eq!(*v, 0.125 * sc * q, "elem {i}");
        }
        testutil::check_dot_ref::<Q6K>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(614);
        let x = testutil::weights(&mut r, 256 * 16);
        let q = Q6K::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q6K::dequantize(&q, &mut y).unwrap();
        // step = |scale| <= amax/32 (+ rounding of sc: <= d/2 = amax/(32*254)) ; values of the
        // opposite sign to the sub-block max clamp at +31 steps: at most one step of error.
        let bound = 1.0 / 32.0 * (1.0 + 1.0 / 254.0) + 1e-3;
        let e = testutil::max_rel_block_err(&x, &y, 256);
        assert!(e <= bound, "err {e} > {bound}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q6K>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Q6K::dot_ref(&q, &ad).unwrap();
        let got = Q6K::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Q6K>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
