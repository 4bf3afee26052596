//! Q2_K (ggml type 10): 256 weights per 84-byte super-block, 2.625 bits per weight.
//! Sixteen sub-blocks of 16, each with a 4-bit scale and a 4-bit min.

use super::{
    nearest_int, read_block, type_id, write_block, BlockQ8K, Pod, QuantDot, QuantFormat, Q8K, QK_K,
};
use half::f16;

/// The block is two halves of 128 weights. Element `e = 128h + 32k + l` (h in 0..2, k in 0..4,
/// l in 0..32) has the 2-bit quant `q = (qs[32h + l] >> 2k) & 3` and sub-block `s = e / 16`,
/// whose byte `scales[s]` holds the scale (low nibble) and the min (high nibble):
/// `w[e] = (d * (scales[s] & 15)) * q - (dmin * (scales[s] >> 4))`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ2K {
    /// Per sub-block of 16: 4-bit scale (low nibble) and 4-bit min (high nibble).
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants, four per byte (see the struct doc for which element is where).
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
}
const _: () = assert!(std::mem::size_of::<BlockQ2K>() == 84);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ2K {}

/// The 256 2-bit quants of a block in element order.
#[inline]
fn unpack2(qs: &[u8; QK_K / 4]) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for h in 0..2 {
        for k in 0..4 {
            for l in 0..32 {
                q[128 * h + 32 * k + l] = (qs[32 * h + l] >> (2 * k)) & 3;
            }
        }
    }
    q
}

/// Inverse of `unpack2` (quants must be < 4).
#[inline]
fn pack2(q: &[u8; QK_K]) -> [u8; QK_K / 4] {
    let mut qs = [0u8; QK_K / 4];
    for h in 0..2 {
        for k in 0..4 {
            for l in 0..32 {
                qs[32 * h + l] |= (q[128 * h + 32 * k + l] & 3) << (2 * k);
            }
        }
    }
    qs
}

pub struct Q2K;

impl QuantFormat for Q2K {
    const NAME: &'static str = "Q2_K";
    const TYPE_ID: u32 = type_id::Q2_K;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 84;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ2K = read_block(block);
        let (d, dmin) = (b.d.to_f32(), b.dmin.to_f32());
        let q = unpack2(&b.qs);
        for s in 0..16 {
            let sc = b.scales[s];
            // ggml's order: dl = d * sc, ml = dmin * m, then dl * q - ml (no FMA)
            let dl = d * (sc & 0xF) as f32;
            let ml = dmin * (sc >> 4) as f32;
            for i in 16 * s..16 * s + 16 {
                out[i] = dl * q[i] as f32 - ml;
            }
        }
    }

    /// Simple round-to-nearest (not ggml's iterative `make_qkx2_quants` search): per sub-block
    /// of 16, `min = min(0, min x)` and `scale = (max x - min) / 3`; `d = max scale / 15` and
    /// `dmin = max(-min) / 15` as f16; sub-block scales rounded *up* (the range still covers the
    /// sub-block), mins and quants to nearest.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let mut scale = [0f32; 16];
        let mut minv = [0f32; 16];
        for (s, sub) in x.chunks_exact(16).enumerate() {
            let mn = sub.iter().copied().fold(0f32, f32::min);
            let mx = sub.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            scale[s] = (mx - mn) / 3.0;
            minv[s] = -mn;
        }
        let d = f16::from_f32(scale.iter().copied().fold(0f32, f32::max) / 15.0);
        let dmin = f16::from_f32(minv.iter().copied().fold(0f32, f32::max) / 15.0);
        let (df, dminf) = (d.to_f32(), dmin.to_f32());
        let mut scales = [0u8; 16];
        let mut q = [0u8; QK_K];
        for s in 0..16 {
            let sc = if df > 0.0 {
                (scale[s] / df).ceil().clamp(0.0, 15.0) as u8
            } else {
                0
            };
            let m = if dminf > 0.0 {
                nearest_int(minv[s] / dminf).clamp(0, 15) as u8
            } else {
                0
            };
            scales[s] = sc | (m << 4);
            let ds = df * sc as f32;
            let dm = dminf * m as f32;
            for i in 16 * s..16 * s + 16 {
                q[i] = if ds > 0.0 {
                    nearest_int((x[i] + dm) / ds).clamp(0, 3) as u8
                } else {
                    0
                };
            }
        }
        write_block(
            &BlockQ2K {
                scales,
                qs: pack2(&q),
                d,
                dmin,
            },
            out,
        );
    }
}

impl QuantDot for Q2K {
    type Act = Q8K;

    /// ggml `vec_dot_q2_K_q8_K`: `d_a * (d * sum_s sc_s * sum(q * qa) - dmin * sum_s m_s *
    /// bsum_s)`, the mins applied to Q8_K's group sums of 16.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ2K = read_block(w);
        let a: BlockQ8K = read_block(a);
        let q = unpack2(&w.qs);
        let mut sum_sc = 0i64;
        let mut sum_m = 0i64;
        for s in 0..16 {
            let sumi: i32 = (16 * s..16 * s + 16)
                .map(|i| q[i] as i32 * a.qs[i] as i32)
                .sum();
            sum_sc += (w.scales[s] & 0xF) as i64 * sumi as i64;
            sum_m += (w.scales[s] >> 4) as i64 * a.bsums[s] as i64;
        }
        let d8 = a.d as f64;
        w.d.to_f32() as f64 * d8 * sum_sc as f64 - w.dmin.to_f32() as f64 * d8 * sum_m as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        // element e gets quant (e / 3) % 4; sub-block s scale s % 16 and min 15 - s
        let mut b = BlockQ2K {
            scales: std::array::from_fn(|s| s as u8 | ((15 - s as u8) << 4)),
            qs: [0; 64],
            d: f16::from_f32(0.5),
            dmin: f16::from_f32(0.25),
        };
        for h in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    let q = (((128 * h + 32 * k + l) / 3) % 4) as u8;
                    b.qs[32 * h + l] |= q << (2 * k);
                }
            }
        }
        let mut bytes = [0u8; 84];
        write_block(&b, &mut bytes);
        // raw layout: element 160 (h 1, k 1, l 0) -> q (160/3)%4 = 1 at bits 2..4 of qs[32]
        assert_eq!((bytes[16 + 32] >> 2) & 3, 1);
        assert_eq!(&bytes[80..82], &f16::from_f32(0.5).to_le_bytes());
        let mut out = [0f32; 256];
        Q2K::dequantize(&bytes, &mut out).unwrap();
        for (e, v) in out.iter().enumerate() {
            let s = e / 16;
            let q = ((e / 3) % 4) as f32;
            assert_eq!(*v, 0.5 * s as f32 * q - 0.25 * (15 - s) as f32, "elem {e}");
        }
        testutil::check_dot_ref::<Q2K>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(210);
        let x = testutil::weights(&mut r, 256 * 16);
        let q = Q2K::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q2K::dequantize(&q, &mut y).unwrap();
        // sub-block step <= 2 amax/3 rounded up by <= d = 2 amax/(3*15); half a step plus half
        // a min step (amax/15/2), relative to the super-block amax:
        let bound = 0.5 * (2.0 / 3.0 + 2.0 / 45.0) + 0.5 / 15.0 + 1e-3;
        let e = testutil::max_rel_block_err(&x, &y, 256);
        assert!(e <= bound, "err {e} > {bound}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q2K>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Q2K::dot_ref(&q, &ad).unwrap();
        let got = Q2K::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Q2K>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
