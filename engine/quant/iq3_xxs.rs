//! IQ3_XXS (ggml type 18): 256 weights per 98-byte super-block, 3.0625 bits per weight.
//! Each 4 weights are one entry of the 256-entry `iq3xxs_grid` (4 magnitudes from
//! {4, 12, ..., 52, 62}); per sub-block of 32 one u32 holds 4 x 7 sign bits (8th by parity:
//! `ksigns_iq2xs`) and a 4-bit scale. Read-only: no quantizer (needs an importance matrix).

use super::grids::{grid4, sign_f32, sign_i32, IQ3XXS_GRID, KSIGNS_IQ2XS};
use super::{read_block, type_id, BlockQ8K, Pod, QuantDot, QuantError, QuantFormat, Q8K, QK_K};
use half::f16;

/// `qs[0..64]`: one grid index per 4 weights. `qs[64 + 4s..64 + 4s + 4]` (LE u32 `a`): sub-block
/// s's signs (bits 7l..7l+7 index `ksigns_iq2xs` for its 8-weight group l) and scale `a >> 28`.
/// For group l of sub-block s, j in 0..4:
/// `w[32s + 8l + j] = (d * (0.5 + (a >> 28)) * 0.5) * grid[qs[8s + 2l]][j] * sign_j`,
/// `w[32s + 8l + 4 + j] = ... * grid[qs[8s + 2l + 1]][j] * sign_{j+4}`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq3Xxs {
    /// Super-block scale.
    pub d: f16,
    /// 64 grid indices, then 8 little-endian u32 of signs + scale.
    pub qs: [u8; 3 * QK_K / 8],
}
const _: () = assert!(std::mem::size_of::<BlockIq3Xxs>() == 98);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockIq3Xxs {}

/// Sub-block `s`'s signs-and-scale word.
#[inline]
pub fn sub_word(b: &BlockIq3Xxs, s: usize) -> u32 {
    let o = QK_K / 4 + 4 * s;
    u32::from_le_bytes([b.qs[o], b.qs[o + 1], b.qs[o + 2], b.qs[o + 3]])
}

pub struct Iq3Xxs;

impl QuantFormat for Iq3Xxs {
    const NAME: &'static str = "IQ3_XXS";
    const TYPE_ID: u32 = type_id::IQ3_XXS;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 98;

    /// ggml `dequantize_row_iq3_xxs`, same f32 operations in the same order.
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq3Xxs = read_block(block);
        let d = b.d.to_f32();
        for s in 0..8 {
            let aux = sub_word(&b, s);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for l in 0..4 {
                let signs = KSIGNS_IQ2XS[(aux >> (7 * l)) as usize & 127];
                let g1 = IQ3XXS_GRID[b.qs[8 * s + 2 * l] as usize];
                let g2 = IQ3XXS_GRID[b.qs[8 * s + 2 * l + 1] as usize];
                let y = &mut out[32 * s + 8 * l..32 * s + 8 * l + 8];
                for j in 0..4 {
                    y[j] = db * grid4(g1, j) as f32 * sign_f32(signs, j);
                    y[j + 4] = db * grid4(g2, j) as f32 * sign_f32(signs, j + 4);
                }
            }
        }
    }

    /// Never reached: `quantize` refuses (see `QuantError::NoQuantizer`); writes a zero block.
    fn quantize_block(_x: &[f32], out: &mut [u8]) {
        out.fill(0);
    }

    fn quantize(_x: &[f32]) -> Result<Vec<u8>, QuantError> {
        Err(QuantError::NoQuantizer { format: Self::NAME })
    }
}

impl QuantDot for Iq3Xxs {
    type Act = Q8K;

    /// ggml `vec_dot_iq3_xxs_q8_K`: `0.25 * d_w * d_a * sum_s (2 ls_s + 1) * sum(grid * sign * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq3Xxs = read_block(w);
        let a: BlockQ8K = read_block(a);
        let mut bsum = 0i64;
        for s in 0..8 {
            let aux = sub_word(&w, s);
            let ls = 2 * (aux >> 28) as i64 + 1;
            let mut sumi = 0i32;
            for l in 0..4 {
                let signs = KSIGNS_IQ2XS[(aux >> (7 * l)) as usize & 127];
                let g1 = IQ3XXS_GRID[w.qs[8 * s + 2 * l] as usize];
                let g2 = IQ3XXS_GRID[w.qs[8 * s + 2 * l + 1] as usize];
                let q8 = &a.qs[32 * s + 8 * l..32 * s + 8 * l + 8];
                for j in 0..4 {
                    sumi += grid4(g1, j) as i32 * q8[j] as i32 * sign_i32(signs, j);
                    sumi += grid4(g2, j) as i32 * q8[j + 4] as i32 * sign_i32(signs, j + 4);
                }
            }
            bsum += sumi as i64 * ls;
        }
        0.25 * w.d.to_f32() as f64 * a.d as f64 * bsum as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{grids::random_blocks, testutil, write_block};

    #[test]
    fn hand_built_bytes() {
        // grid index of 4-group k = k (0..64); sub-block s: sign indices (s, 0, 127, 3),
        // scale 15 - s
        let mut b = BlockIq3Xxs {
            d: f16::from_f32(0.25),
            qs: [0; 96],
        };
        for k in 0..64 {
            b.qs[k] = k as u8;
        }
        for s in 0..8u32 {
            let a = s | 127 << 14 | 3 << 21 | (15 - s) << 28;
            b.qs[64 + 4 * s as usize..68 + 4 * s as usize].copy_from_slice(&a.to_le_bytes());
        }
        let mut bytes = [0u8; 98];
        write_block(&b, &mut bytes);
        // sub-block 1's word at byte 2 + 64 + 4: 1 | 127 << 14 | 3 << 21 | 14 << 28
        assert_eq!(&bytes[70..74], &[0x01, 0xC0, 0x7F, 0xE0]);
        let mut out = [0f32; 256];
        Iq3Xxs::dequantize(&bytes, &mut out).unwrap();
        let sign_idx = |s: usize, l: usize| [s, 0, 127, 3][l];
        for s in 0..8 {
            // 0.25 * (0.5 + (15 - s)) * 0.5
            let db = 0.25 * (15.5 - s as f32) * 0.5;
            for l in 0..4 {
                let si = sign_idx(s, l);
                for j in 0..8 {
                    let e = 32 * s + 8 * l + j;
                    let k = e / 4; // the 4-group of element e
                    let m = grid4(IQ3XXS_GRID[k], j % 4) as f32;
                    let neg = (si >> j) & 1 == 1 || (j == 7 && si.count_ones() % 2 == 1);
                    let want = db * m * if neg { -1.0 } else { 1.0 };
                    assert_eq!(out[e], want, "s {s} l {l} j {j}");
                }
            }
        }
        // grid entry 0 = 0x04040404: element 0 is +-db * 4
        assert_eq!(out[0].abs(), 0.25 * 15.5 * 0.5 * 4.0);
        testutil::check_dot_ref::<Iq3Xxs>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn refuses_to_quantize() {
        let e = Iq3Xxs::quantize(&[0.0; 256]).unwrap_err();
        assert_eq!(e, QuantError::NoQuantizer { format: "IQ3_XXS" });
    }

    #[test]
    fn random_blocks_dots() {
        let mut r = testutil::rng(1801);
        let q = random_blocks(&mut r, 16, 98, 0);
        let a = testutil::weights(&mut r, 16 * 256);
        testutil::check_dot_ref::<Iq3Xxs>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq3Xxs::dot_ref(&q, &ad).unwrap();
        let got = Iq3Xxs::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq3Xxs>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
