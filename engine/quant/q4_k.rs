//! Q4_K (ggml type 12): 256 weights per 144-byte super-block, 4.5 bits per weight.
//! Eight sub-blocks of 32, each with a 6-bit scale and a 6-bit min.

use super::{
    nearest_int, read_block, type_id, write_block, BlockQ8K, Pod, QuantDot, QuantFormat, Q8K, QK_K,
};
use half::f16;

/// For sub-block s (0..8) and element l (0..32) of it, with `(sc, m) = scale_min(s, scales)`:
/// `w[32s + l] = (d * sc) * q - (dmin * m)`, where q is the low nibble of `qs[32(s/2) + l]`
/// for even s and the high nibble for odd s.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins packed in 12 bytes (see `scale_min`).
    pub scales: [u8; 12],
    /// 4-bit quants: each 32 bytes hold two sub-blocks (low nibbles, then high nibbles).
    pub qs: [u8; QK_K / 2],
}
const _: () = assert!(std::mem::size_of::<BlockQ4K>() == 144);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ4K {}

/// Unpacks sub-block `j`'s 6-bit (scale, min) from the 12-byte K-quant packing (ggml's
/// `get_scale_min_k4`): bytes 0..4 hold scales 0..4 in their low 6 bits, bytes 4..8 mins 0..4;
/// scales/mins 4..8 keep their low 4 bits in the nibbles of bytes 8..12 and their top 2 bits in
/// the top 2 bits of bytes 0..4 (scales) and 4..8 (mins).
#[inline]
pub fn scale_min(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Inverse of `scale_min` for all eight sub-blocks (values must be < 64).
pub fn pack_scale_min(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..4 {
        q[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        q[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        q[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4);
    }
    q
}

/// A simple K-quant quantizer for one super-block with `levels` = 15 (Q4_K) or 31 (Q5_K),
/// not ggml's iterative search: per sub-block of 32, `min = min(0, min x)` and
/// `scale = (max x - min) / levels`; `d = max scale / 63` and `dmin = max(-min) / 63` are
/// stored as f16; sub-block scales are rounded *up* (so the range still covers the block) and
/// mins to nearest; quants round to nearest. Returns `(d, dmin, sc, m, q)`.
pub(crate) fn quantize_kx(x: &[f32], levels: u8) -> (f16, f16, [u8; 8], [u8; 8], [u8; QK_K]) {
    let mut scale = [0f32; 8];
    let mut minv = [0f32; 8];
    for (s, sub) in x.chunks_exact(32).enumerate() {
        let mn = sub.iter().copied().fold(0f32, f32::min);
        let mx = sub.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        scale[s] = (mx - mn) / levels as f32;
        minv[s] = -mn;
    }
    let d = f16::from_f32(scale.iter().copied().fold(0f32, f32::max) / 63.0);
    let dmin = f16::from_f32(minv.iter().copied().fold(0f32, f32::max) / 63.0);
    let (df, dminf) = (d.to_f32(), dmin.to_f32());
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    let mut q = [0u8; QK_K];
    for s in 0..8 {
        sc[s] = if df > 0.0 {
            (scale[s] / df).ceil().clamp(0.0, 63.0) as u8
        } else {
            0
        };
        m[s] = if dminf > 0.0 {
            nearest_int(minv[s] / dminf).clamp(0, 63) as u8
        } else {
            0
        };
        let ds = df * sc[s] as f32;
        let dm = dminf * m[s] as f32;
        for l in 0..32 {
            let i = 32 * s + l;
            q[i] = if ds > 0.0 {
                nearest_int((x[i] + dm) / ds).clamp(0, levels as i32) as u8
            } else {
                0
            };
        }
    }
    (d, dmin, sc, m, q)
}

/// ggml `vec_dot_q4_K_q8_K` / `q5_K_q8_K` after unpacking: per sub-block integer sums of
/// `q * qa` scaled by `sc`, minus the mins applied to the activation group sums `bsums`.
pub(crate) fn dot_kx_q8k(
    d: f16,
    dmin: f16,
    scales: &[u8; 12],
    q: &[u8; QK_K],
    a: &BlockQ8K,
) -> f64 {
    let mut sum_sc = 0i64;
    let mut sum_m = 0i64;
    for s in 0..8 {
        let (sc, m) = scale_min(s, scales);
        let sumi: i32 = (0..32)
            .map(|l| q[32 * s + l] as i32 * a.qs[32 * s + l] as i32)
            .sum();
        sum_sc += sc as i64 * sumi as i64;
        sum_m += m as i64 * (a.bsums[2 * s] as i64 + a.bsums[2 * s + 1] as i64);
    }
    let d8 = a.d as f64;
    d.to_f32() as f64 * d8 * sum_sc as f64 - dmin.to_f32() as f64 * d8 * sum_m as f64
}

/// The 256 4-bit quants of a block in element order.
#[inline]
fn unpack4(qs: &[u8; QK_K / 2]) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for c in 0..4 {
        for l in 0..32 {
            let b = qs[32 * c + l];
            q[64 * c + l] = b & 0xF;
            q[64 * c + 32 + l] = b >> 4;
        }
    }
    q
}

pub struct Q4K;

impl QuantFormat for Q4K {
    const NAME: &'static str = "Q4_K";
    const TYPE_ID: u32 = type_id::Q4_K;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 144;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ4K = read_block(block);
        let (d, dmin) = (b.d.to_f32(), b.dmin.to_f32());
        for c in 0..4 {
            let (sc1, m1) = scale_min(2 * c, &b.scales);
            let (sc2, m2) = scale_min(2 * c + 1, &b.scales);
            let (d1, min1) = (d * sc1 as f32, dmin * m1 as f32);
            let (d2, min2) = (d * sc2 as f32, dmin * m2 as f32);
            let qs = &b.qs[32 * c..32 * c + 32];
            let y = &mut out[64 * c..64 * c + 64];
            for l in 0..32 {
                y[l] = d1 * (qs[l] & 0xF) as f32 - min1;
                y[32 + l] = d2 * (qs[l] >> 4) as f32 - min2;
            }
        }
    }

    /// See `quantize_kx` (simple round-to-nearest, documented bound in docs/quant.md).
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let (d, dmin, sc, m, q) = quantize_kx(x, 15);
        let mut qs = [0u8; QK_K / 2];
        for c in 0..4 {
            for l in 0..32 {
                qs[32 * c + l] = q[64 * c + l] | (q[64 * c + 32 + l] << 4);
            }
        }
        write_block(
            &BlockQ4K {
                d,
                dmin,
                scales: pack_scale_min(&sc, &m),
                qs,
            },
            out,
        );
    }
}

impl QuantDot for Q4K {
    type Act = Q8K;

    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ4K = read_block(w);
        let a: BlockQ8K = read_block(a);
        dot_kx_q8k(w.d, w.dmin, &w.scales, &unpack4(&w.qs), &a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn scale_min_packing() {
        let sc = [1, 2, 3, 63, 17, 33, 48, 62];
        let m = [0, 63, 5, 9, 60, 31, 32, 16];
        let p = pack_scale_min(&sc, &m);
        for j in 0..8 {
            assert_eq!(scale_min(j, &p), (sc[j], m[j]), "sub-block {j}");
        }
        // hand-packed: scale 4 = 0b11_0001 (49): low nibble 1 in byte 8, top bits 11 in byte 0
        let mut q = [0u8; 12];
        q[0] = 0b1100_0101; // scale 0 = 5, top bits of scale 4 = 3
        q[4] = 0b0100_0010; // min 0 = 2, top bits of min 4 = 1
        q[8] = 0b0111_0001; // scale 4 low = 1, min 4 low = 7
        assert_eq!(scale_min(0, &q), (5, 2));
        assert_eq!(scale_min(4, &q), (49, 23));
    }

    #[test]
    fn hand_built_bytes() {
        let mut b = BlockQ4K {
            d: f16::from_f32(0.5),
            dmin: f16::from_f32(0.25),
            scales: pack_scale_min(&[1, 2, 3, 4, 5, 6, 7, 8], &[8, 7, 6, 5, 4, 3, 2, 1]),
            qs: [0; 128],
        };
        for c in 0..4 {
            for l in 0..32 {
                b.qs[32 * c + l] = (l % 16) as u8 | (((l + c) % 16) as u8) << 4;
            }
        }
        let mut bytes = [0u8; 144];
        write_block(&b, &mut bytes);
        let mut out = [0f32; 256];
        Q4K::dequantize(&bytes, &mut out).unwrap();
        for s in 0..8 {
            let (sc, m) = ((s + 1) as f32, (8 - s) as f32);
            for l in 0..32 {
                let c = s / 2;
                let q = if s % 2 == 0 { l % 16 } else { (l + c) % 16 } as f32;
                assert_eq!(out[32 * s + l], 0.5 * sc * q - 0.25 * m, "s {s} l {l}");
            }
        }
        testutil::check_dot_ref::<Q4K>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(412);
        let x = testutil::weights(&mut r, 256 * 16);
        let q = Q4K::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q4K::dequantize(&q, &mut y).unwrap();
        // sub-block step <= (2 amax/15) rounded up by <= d = 2 amax/(15*63); half a step plus
        // half a min step (amax/63/2); relative to the super-block amax:
        let bound = 0.5 * (2.0 / 15.0 + 2.0 / (15.0 * 63.0)) + 0.5 / 63.0 + 1e-3;
        let e = testutil::max_rel_block_err(&x, &y, 256);
        assert!(e <= bound, "err {e} > {bound}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q4K>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Q4K::dot_ref(&q, &ad).unwrap();
        let got = Q4K::dot_quantized(&q, &qa).unwrap();
        // dequantized values are f32-rounded (d*sc)*q - dmin*m; the integer path is exact in f64
        let tol = 1e-6 * testutil::dot_abs::<Q4K>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
