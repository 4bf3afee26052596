//! Q5_K (ggml type 13): 256 weights per 176-byte super-block, 5.5 bits per weight.
//! Like Q4_K plus a fifth bit per weight in `qh`.

use super::q4_k::{dot_kx_q8k, pack_scale_min, quantize_kx, scale_min};
use super::{read_block, type_id, write_block, BlockQ8K, Pod, QuantDot, QuantFormat, Q8K, QK_K};
use half::f16;

/// For sub-block s (0..8) and element l (0..32), with `(sc, m) = scale_min(s, scales)`:
/// `q = nibble | (bit s of qh[l]) << 4` (nibble = low nibble of `qs[32(s/2) + l]` for even s,
/// high nibble for odd s) and `w[32s + l] = (d * sc) * q - (dmin * m)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and mins, packed as in Q4_K.
    pub scales: [u8; 12],
    /// Fifth bits: bit s of byte l belongs to element 32s + l.
    pub qh: [u8; QK_K / 8],
    /// Low 4 bits, laid out as Q4_K's `qs`.
    pub qs: [u8; QK_K / 2],
}
const _: () = assert!(std::mem::size_of::<BlockQ5K>() == 176);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ5K {}

/// The 256 5-bit quants of a block in element order.
#[inline]
fn unpack5k(qh: &[u8; 32], qs: &[u8; 128]) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for s in 0..8 {
        let c = s / 2;
        let shift = 4 * (s % 2);
        for l in 0..32 {
            q[32 * s + l] = ((qs[32 * c + l] >> shift) & 0xF) | (((qh[l] >> s) & 1) << 4);
        }
    }
    q
}

pub struct Q5K;

impl QuantFormat for Q5K {
    const NAME: &'static str = "Q5_K";
    const TYPE_ID: u32 = type_id::Q5_K;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 176;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ5K = read_block(block);
        let (d, dmin) = (b.d.to_f32(), b.dmin.to_f32());
        for s in 0..8 {
            let (sc, m) = scale_min(s, &b.scales);
            let (ds, dm) = (d * sc as f32, dmin * m as f32);
            let c = s / 2;
            let shift = 4 * (s % 2);
            for l in 0..32 {
                let q = ((b.qs[32 * c + l] >> shift) & 0xF) | (((b.qh[l] >> s) & 1) << 4);
                out[32 * s + l] = ds * q as f32 - dm;
            }
        }
    }

    /// See `q4_k::quantize_kx` with 31 levels.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let (d, dmin, sc, m, q) = quantize_kx(x, 31);
        let mut qs = [0u8; QK_K / 2];
        let mut qh = [0u8; QK_K / 8];
        for s in 0..8 {
            let c = s / 2;
            let shift = 4 * (s % 2);
            for l in 0..32 {
                let v = q[32 * s + l];
                qs[32 * c + l] |= (v & 0xF) << shift;
                qh[l] |= (v >> 4) << s;
            }
        }
        write_block(
            &BlockQ5K {
                d,
                dmin,
                scales: pack_scale_min(&sc, &m),
                qh,
                qs,
            },
            out,
        );
    }
}

impl QuantDot for Q5K {
    type Act = Q8K;

    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ5K = read_block(w);
        let a: BlockQ8K = read_block(a);
        dot_kx_q8k(w.d, w.dmin, &w.scales, &unpack5k(&w.qh, &w.qs), &a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut b = BlockQ5K {
            d: f16::from_f32(0.25),
            dmin: f16::from_f32(1.0),
            scales: pack_scale_min(&[2, 4, 6, 8, 10, 12, 14, 63], &[1, 0, 3, 0, 5, 0, 7, 63]),
            qh: [0; 32],
            qs: [0; 128],
        };
        for l in 0..32 {
            // element 32s + l has fifth bit set iff s == l % 8
            b.qh[l] = 1 << (l % 8);
            for c in 0..4 {
                b.qs[32 * c + l] = (l % 16) as u8 | ((15 - l % 16) as u8) << 4;
            }
        }
        let mut bytes = [0u8; 176];
        write_block(&b, &mut bytes);
        let mut out = [0f32; 256];
        Q5K::dequantize(&bytes, &mut out).unwrap();
        let scs = [2, 4, 6, 8, 10, 12, 14, 63];
        let ms = [1, 0, 3, 0, 5, 0, 7, 63];
        for s in 0..8 {
            for l in 0..32 {
                let nib = if s % 2 == 0 { l % 16 } else { 15 - l % 16 };
                let q = nib + if s == l % 8 { 16 } else { 0 };
                let want = 0.25 * scs[s] as f32 * q as f32 - ms[s] as f32;
                assert_eq!(out[32 * s + l], want, "s {s} l {l}");
            }
        }
        testutil::check_dot_ref::<Q5K>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(513);
        let x = testutil::weights(&mut r, 256 * 16);
        let q = Q5K::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q5K::dequantize(&q, &mut y).unwrap();
        // as Q4_K with 31 levels
        let bound = 0.5 * (2.0 / 31.0 + 2.0 / (31.0 * 63.0)) + 0.5 / 63.0 + 1e-3;
        let e = testutil::max_rel_block_err(&x, &y, 256);
        assert!(e <= bound, "err {e} > {bound}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q5K>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Q5K::dot_ref(&q, &ad).unwrap();
        let got = Q5K::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Q5K>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
