//! IQ4_XS (ggml type 23): 256 weights per 136-byte super-block, 4.25 bits per weight.
//! Eight sub-blocks of 32 with 6-bit scales; 4-bit indices into a non-linear codebook.

use super::{
    nearest_int, read_block, signed_absmax, type_id, write_block, BlockQ8K, Pod, QuantDot,
    QuantFormat, Q8K, QK_K,
};
use half::f16;

/// ggml's `kvalues_iq4nl`: the 16 non-uniform levels shared by IQ4_NL and IQ4_XS.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// For sub-block s (0..8): `ls = ((scales_l[s/2] >> 4(s%2)) & 0xF) | ((scales_h >> 2s) & 3) << 4`,
/// and for j in 0..16: `w[32s + j] = (d * (ls - 32)) * KVALUES_IQ4NL[qs[16s + j] & 0xF]`,
/// `w[32s + 16 + j] = (d * (ls - 32)) * KVALUES_IQ4NL[qs[16s + j] >> 4]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq4Xs {
    /// Super-block scale.
    pub d: f16,
    /// High 2 bits of the eight 6-bit sub-block scales (bits 2s..2s+2 for sub-block s).
    pub scales_h: u16,
    /// Low 4 bits of the sub-block scales, two per byte (low nibble = even sub-block).
    pub scales_l: [u8; QK_K / 64],
    /// Codebook indices; 16 bytes per sub-block (low nibbles first half, high nibbles second).
    pub qs: [u8; QK_K / 2],
}
const _: () = assert!(std::mem::size_of::<BlockIq4Xs>() == 136);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockIq4Xs {}

/// Sub-block `s`'s 6-bit scale (0..64; the weight multiplier is `ls - 32`).
#[inline]
pub fn sub_scale(b: &BlockIq4Xs, s: usize) -> i32 {
    let lo = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF;
    let hi = ((b.scales_h >> (2 * s)) & 3) as u8;
    (lo | (hi << 4)) as i32
}

/// Index of the codebook level nearest to `v` (lower index on ties).
#[inline]
pub(crate) fn nearest_level(v: f32) -> u8 {
    let mut best = 0u8;
    let mut err = f32::INFINITY;
    for (i, &k) in KVALUES_IQ4NL.iter().enumerate() {
        let e = (v - k as f32).abs();
        if e < err {
            err = e;
            best = i as u8;
        }
    }
    best
}

pub struct Iq4Xs;

impl QuantFormat for Iq4Xs {
    const NAME: &'static str = "IQ4_XS";
    const TYPE_ID: u32 = type_id::IQ4_XS;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 136;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq4Xs = read_block(block);
        let d = b.d.to_f32();
        for s in 0..8 {
            let dl = d * (sub_scale(&b, s) - 32) as f32;
            let qs = &b.qs[16 * s..16 * s + 16];
            let y = &mut out[32 * s..32 * s + 32];
            for j in 0..16 {
                y[j] = dl * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as f32;
                y[16 + j] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }

    /// Simple quantizer (not ggml's weighted search): per sub-block `scale = max / -127`
    /// (max = signed value of largest magnitude, mapped to the level -127); `d = max|scale|/31`
    /// as f16; `ls - 32 = clamp(round(scale/d), -32, 31)`; each weight takes the nearest level.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let mut scale = [0f32; 8];
        for (s, sub) in scale.iter_mut().zip(x.chunks_exact(32)) {
            *s = signed_absmax(sub) / -127.0;
        }
        let amax = scale.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = f16::from_f32(amax / 31.0);
        let df = d.to_f32();
        let mut b = BlockIq4Xs {
            d,
            scales_h: 0,
            scales_l: [0; 4],
            qs: [0; 128],
        };
        for s in 0..8 {
            let l = if df > 0.0 {
                nearest_int(scale[s] / df).clamp(-32, 31)
            } else {
                0
            };
            let ls = (l + 32) as u8;
            b.scales_l[s / 2] |= (ls & 0xF) << (4 * (s % 2));
            b.scales_h |= ((ls >> 4) as u16) << (2 * s);
            let dl = df * l as f32;
            for j in 0..16 {
                let (v0, v1) = (x[32 * s + j], x[32 * s + 16 + j]);
                let (i0, i1) = if dl != 0.0 {
                    (nearest_level(v0 / dl), nearest_level(v1 / dl))
                } else {
                    (8, 8) // level 1: the closest to zero
                };
                b.qs[16 * s + j] = i0 | (i1 << 4);
            }
        }
        write_block(&b, out);
    }
}

impl QuantDot for Iq4Xs {
    type Act = Q8K;

    /// ggml `vec_dot_iq4_xs_q8_K`: `d_w * d_a * sum_s (ls_s - 32) * sum(kvalue * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq4Xs = read_block(w);
        let a: BlockQ8K = read_block(a);
        let mut sum = 0i64;
        for s in 0..8 {
            let mut sumi = 0i32;
            for j in 0..16 {
                let qb = w.qs[16 * s + j];
                sumi += KVALUES_IQ4NL[(qb & 0xF) as usize] as i32 * a.qs[32 * s + j] as i32;
                sumi += KVALUES_IQ4NL[(qb >> 4) as usize] as i32 * a.qs[32 * s + 16 + j] as i32;
            }
            sum += (sub_scale(&w, s) - 32) as i64 * sumi as i64;
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
        // ls for sub-block s = 40 + s (6 bits: 0b10_1000 + s), so ls - 32 = 8 + s
        let mut b = BlockIq4Xs {
            d: f16::from_f32(0.5),
            scales_h: 0,
            scales_l: [0; 4],
            qs: [0; 128],
        };
        for s in 0..8 {
            let ls = 40 + s as u8;
            b.scales_l[s / 2] |= (ls & 0xF) << (4 * (s % 2));
            b.scales_h |= ((ls >> 4) as u16) << (2 * s);
            for j in 0..16 {
                b.qs[16 * s + j] = j as u8 | ((15 - j as u8) << 4);
            }
        }
        // the packing above, written out for s = 0, 1: scales_l[0] = 0x98, scales_h low bits 0b1010
        assert_eq!(b.scales_l[0], 0x98);
        assert_eq!(b.scales_h & 0xF, 0b1010);
        let mut bytes = [0u8; 136];
        write_block(&b, &mut bytes);
        let mut out = [0f32; 256];
        Iq4Xs::dequantize(&bytes, &mut out).unwrap();
        for s in 0..8 {
            let dl = 0.5 * (8 + s) as f32;
            for j in 0..16 {
                assert_eq!(out[32 * s + j], dl * KVALUES_IQ4NL[j] as f32);
                assert_eq!(out[32 * s + 16 + j], dl * KVALUES_IQ4NL[15 - j] as f32);
            }
        }
        testutil::check_dot_ref::<Iq4Xs>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(423);
        let x = testutil::weights(&mut r, 256 * 16);
        let q = Iq4Xs::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Iq4Xs::dequantize(&q, &mut y).unwrap();
        // largest codebook gap is 24 (89 -> 113; -127 -> -104 is 23) in units of |scale| <=
        // amax/127 (+ scale rounding d/2 = amax/(127*62)); values of the opposite sign reach
        // at most 113: 14 units short. Half a gap (12 units) or 14, whichever is larger.
        let bound = 14.0 / 127.0 * (1.0 + 1.0 / 62.0) + 1e-3;
        let e = testutil::max_rel_block_err(&x, &y, 256);
        assert!(e <= bound, "err {e} > {bound}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Iq4Xs>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq4Xs::dot_ref(&q, &ad).unwrap();
        let got = Iq4Xs::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq4Xs>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
