//! Q3_K (ggml type 11): 256 weights per 110-byte super-block, 3.4375 bits per weight.
//! Sixteen sub-blocks of 16 with signed 6-bit scales; no mins.

use super::{
    nearest_int, read_block, signed_absmax, type_id, write_block, BlockQ8K, Pod, QuantDot,
    QuantFormat, Q8K, QK_K,
};
use half::f16;

/// The block is two halves of 128 weights. Element `e = 128h + 32k + l` (h in 0..2, k in 0..4,
/// l in 0..32) has the signed 3-bit quant
/// `q = ((qs[32h + l] >> 2k) & 3) - (hmask[l] bit (4h + k) ? 0 : 4)` (in -4..=3) and sub-block
/// `s = e / 16` with the 6-bit scale `ls = scale6(s, scales)`:
/// `w[e] = (d * (ls - 32)) * q`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ3K {
    /// High bit of each quant, *set* for the upper half (bit 4h + k of `hmask[l]`).
    pub hmask: [u8; QK_K / 8],
    /// Low 2 bits of the quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Sixteen 6-bit scales packed in 12 bytes (see `scale6`).
    pub scales: [u8; 12],
    /// Super-block scale.
    pub d: f16,
}
const _: () = assert!(std::mem::size_of::<BlockQ3K>() == 110);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ3K {}

/// Sub-block `s`'s 6-bit scale (0..64; the multiplier is `ls - 32`): the low 4 bits are the low
/// nibble of `scales[s]` for s < 8 and the high nibble of `scales[s - 8]` for s >= 8; the top 2
/// bits are bits `2(s/4)..2(s/4)+2` of `scales[8 + s%4]` (ggml's kmask1/kmask2 unpacking).
#[inline]
pub fn scale6(s: usize, scales: &[u8; 12]) -> i32 {
    let lo = if s < 8 {
        scales[s] & 0xF
    } else {
        scales[s - 8] >> 4
    };
    let hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    (lo | (hi << 4)) as i32
}

/// Inverse of `scale6` for all sixteen sub-blocks (values must be < 64).
pub fn pack_scale6(ls: &[u8; 16]) -> [u8; 12] {
    let mut p = [0u8; 12];
    for (s, &v) in ls.iter().enumerate() {
        if s < 8 {
            p[s] |= v & 0xF;
        } else {
            p[s - 8] |= (v & 0xF) << 4;
        }
        p[8 + s % 4] |= ((v >> 4) & 3) << (2 * (s / 4));
    }
    p
}

/// The 256 signed quants (-4..=3) of a block in element order.
#[inline]
fn unpack3(b: &BlockQ3K) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for h in 0..2 {
        for k in 0..4 {
            let bit = 1u8 << (4 * h + k);
            for l in 0..32 {
                let lo = ((b.qs[32 * h + l] >> (2 * k)) & 3) as i8;
                q[128 * h + 32 * k + l] = lo - if b.hmask[l] & bit != 0 { 0 } else { 4 };
            }
        }
    }
    q
}

pub struct Q3K;

impl QuantFormat for Q3K {
    const NAME: &'static str = "Q3_K";
    const TYPE_ID: u32 = type_id::Q3_K;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 110;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ3K = read_block(block);
        let d = b.d.to_f32();
        let q = unpack3(&b);
        for s in 0..16 {
            // ggml's order: dl = d * (ls - 32), then dl * q
            let dl = d * (scale6(s, &b.scales) - 32) as f32;
            for i in 16 * s..16 * s + 16 {
                out[i] = dl * q[i] as f32;
            }
        }
    }

    /// Simple round-to-nearest (not ggml's `make_q3_quants` search): per sub-block of 16,
    /// `scale = max / -4` (max = signed value of largest magnitude, which maps to q = -4);
    /// `d = max|scale| / 31` as f16, `ls - 32 = clamp(round(scale / d), -32, 31)`, quants
    /// `clamp(round(x / (d * (ls - 32))), -4, 3)`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let mut scale = [0f32; 16];
        for (s, sub) in scale.iter_mut().zip(x.chunks_exact(16)) {
            *s = signed_absmax(sub) / -4.0;
        }
        let amax = scale.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = f16::from_f32(amax / 31.0);
        let df = d.to_f32();
        let mut ls = [32u8; 16];
        let mut u = [4u8; QK_K]; // q + 4 in 0..8; 4 is q = 0
        for s in 0..16 {
            let l = if df > 0.0 {
                nearest_int(scale[s] / df).clamp(-32, 31)
            } else {
                0
            };
            ls[s] = (l + 32) as u8;
            let dl = df * l as f32;
            if dl != 0.0 {
                for i in 16 * s..16 * s + 16 {
                    u[i] = (nearest_int(x[i] / dl).clamp(-4, 3) + 4) as u8;
                }
            }
        }
        let mut b = BlockQ3K {
            hmask: [0; 32],
            qs: [0; 64],
            scales: pack_scale6(&ls),
            d,
        };
        for h in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    let v = u[128 * h + 32 * k + l];
                    b.qs[32 * h + l] |= (v & 3) << (2 * k);
                    b.hmask[l] |= (v >> 2) << (4 * h + k);
                }
            }
        }
        write_block(&b, out);
    }
}

impl QuantDot for Q3K {
    type Act = Q8K;

    /// ggml `vec_dot_q3_K_q8_K`: `d_w * d_a * sum_s (ls_s - 32) * sum(q * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ3K = read_block(w);
        let a: BlockQ8K = read_block(a);
        let q = unpack3(&w);
        let mut sum = 0i64;
        for s in 0..16 {
            let sumi: i32 = (16 * s..16 * s + 16)
                .map(|i| q[i] as i32 * a.qs[i] as i32)
                .sum();
            sum += (scale6(s, &w.scales) - 32) as i64 * sumi as i64;
        }
        w.d.to_f32() as f64 * a.d as f64 * sum as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn scale_packing() {
        let ls: [u8; 16] = std::array::from_fn(|s| (s as u8 * 7 + 3) % 64);
        let p = pack_scale6(&ls);
        for s in 0..16 {
            assert_eq!(scale6(s, &p), ls[s] as i32, "sub-block {s}");
        }
        // hand-packed: scale 9 = 0b10_0110 (38): low nibble 6 in the high nibble of byte 1,
        // top bits 10 at bits 4..6 of byte 8 + 9 % 4 = 9
        let mut q = [0u8; 12];
        q[1] = 0x60;
        q[9] = 0b10 << 4;
        assert_eq!(scale6(9, &q), 38);
        assert_eq!(scale6(1, &q), 0);
    }

    #[test]
    fn hand_built_bytes() {
        // element e gets q = (e % 8) - 4; sub-block s gets ls = 33 + s (multiplier 1 + s)
        let mut b = BlockQ3K {
            hmask: [0; 32],
            qs: [0; 64],
            scales: pack_scale6(&std::array::from_fn(|s| 33 + s as u8)),
            d: f16::from_f32(0.25),
        };
        for h in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    let u = ((128 * h + 32 * k + l) % 8) as u8; // q + 4
                    b.qs[32 * h + l] |= (u & 3) << (2 * k);
                    b.hmask[l] |= (u >> 2) << (4 * h + k);
                }
            }
        }
        let mut bytes = [0u8; 110];
        write_block(&b, &mut bytes);
        // element 135 (h 1, k 0, l 7): u = 7 -> low bits 3 in qs[39], high bit 4 of hmask[7]
        assert_eq!(bytes[32 + 39] & 3, 3);
        assert_eq!((bytes[7] >> 4) & 1, 1);
        let mut out = [0f32; 256];
        Q3K::dequantize(&bytes, &mut out).unwrap();
        for (e, v) in out.iter().enumerate() {
            let dl = 0.25 * (1 + e / 16) as f32;
            assert_eq!(*v, dl * ((e % 8) as f32 - 4.0), "elem {e}");
        }
        testutil::check_dot_ref::<Q3K>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(311);
        let x = testutil::weights(&mut r, 256 * 16);
        let q = Q3K::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q3K::dequantize(&q, &mut y).unwrap();
        // step = |scale| <= amax/4 (+ rounding of ls: <= d/2 = amax/(4*62)); values of the
        // opposite sign to the sub-block max clamp at +3 steps: at most one step of error.
        let bound = 1.0 / 4.0 * (1.0 + 1.0 / 62.0) + 1e-3;
        let e = testutil::max_rel_block_err(&x, &y, 256);
        assert!(e <= bound, "err {e} > {bound}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q3K>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Q3K::dot_ref(&q, &ad).unwrap();
        let got = Q3K::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Q3K>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
