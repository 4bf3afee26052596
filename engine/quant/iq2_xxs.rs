//! IQ2_XXS (ggml type 16): 256 weights per 66-byte super-block, 2.0625 bits per weight.
//! Eight sub-blocks of 32; each group of 8 weights is one entry of the 256-entry `iq2xxs_grid`
//! (8 magnitudes from {8, 25, 43}) with 7 stored sign bits (the 8th from `ksigns_iq2xs`'s
//! even-parity rule) and a 4-bit scale per sub-block. Read-only: no quantizer (needs an imatrix).

use super::grids::{grid8, sign_f32, sign_i32, IQ2XXS_GRID, KSIGNS_IQ2XS};
use super::{read_block, type_id, BlockQ8K, Pod, QuantDot, QuantError, QuantFormat, Q8K, QK_K};
use half::f16;

/// Sub-block s (0..8) is `qs[4s..4s+4]` read as two little-endian u32: `a = qs[4s] | qs[4s+1] << 16`
/// holds the 4 grid indices (byte l = group l), `b = qs[4s+2] | qs[4s+3] << 16` holds 4 x 7 sign
/// bits (bits 7l..7l+7 index `ksigns_iq2xs`) and the scale in its top 4 bits. Then for group l
/// and j in 0..8: `w[32s + 8l + j] = (d * (0.5 + (b >> 28)) * 0.25) * grid[a_l][j] * sign_j`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq2Xxs {
    /// Super-block scale.
    pub d: f16,
    /// Per sub-block: two u16 of grid indices, two u16 of signs + scale (see above).
    pub qs: [u16; QK_K / 8],
}
const _: () = assert!(std::mem::size_of::<BlockIq2Xxs>() == 66);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockIq2Xxs {}

/// Sub-block `s`'s (grid-index word, sign-and-scale word).
#[inline]
pub fn sub_words(b: &BlockIq2Xxs, s: usize) -> (u32, u32) {
    let q = &b.qs[4 * s..4 * s + 4];
    (
        q[0] as u32 | (q[1] as u32) << 16,
        q[2] as u32 | (q[3] as u32) << 16,
    )
}

pub struct Iq2Xxs;

impl QuantFormat for Iq2Xxs {
    const NAME: &'static str = "IQ2_XXS";
    const TYPE_ID: u32 = type_id::IQ2_XXS;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 66;

    /// ggml `dequantize_row_iq2_xxs`, same f32 operations in the same order.
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq2Xxs = read_block(block);
        let d = b.d.to_f32();
        for s in 0..8 {
            let (idx, sg) = sub_words(&b, s);
            let db = d * (0.5 + (sg >> 28) as f32) * 0.25;
            for l in 0..4 {
                let grid = IQ2XXS_GRID[(idx >> (8 * l)) as usize & 0xFF];
                let signs = KSIGNS_IQ2XS[(sg >> (7 * l)) as usize & 127];
                let y = &mut out[32 * s + 8 * l..32 * s + 8 * l + 8];
                for (j, v) in y.iter_mut().enumerate() {
                    *v = db * grid8(grid, j) as f32 * sign_f32(signs, j);
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

impl QuantDot for Iq2Xxs {
    type Act = Q8K;

    /// ggml `vec_dot_iq2_xxs_q8_K`: `0.125 * d_w * d_a * sum_s (2 ls_s + 1) * sum(grid * sign * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq2Xxs = read_block(w);
        let a: BlockQ8K = read_block(a);
        let mut bsum = 0i64;
        for s in 0..8 {
            let (idx, sg) = sub_words(&w, s);
            let ls = 2 * (sg >> 28) as i64 + 1;
            let mut sumi = 0i32;
            for l in 0..4 {
                let grid = IQ2XXS_GRID[(idx >> (8 * l)) as usize & 0xFF];
                let signs = KSIGNS_IQ2XS[(sg >> (7 * l)) as usize & 127];
                for j in 0..8 {
                    let q = a.qs[32 * s + 8 * l + j] as i32;
                    sumi += grid8(grid, j) as i32 * q * sign_i32(signs, j);
                }
            }
            bsum += sumi as i64 * ls;
        }
        0.125 * w.d.to_f32() as f64 * a.d as f64 * bsum as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{grids::random_blocks, testutil, write_block};

    #[test]
    fn hand_built_bytes() {
        // sub-block s: grid indices (s, 1, 0, 255), sign indices (1, 0, 127, 0), scale s + 3
        let mut b = BlockIq2Xxs {
            d: f16::from_f32(2.0),
            qs: [0; 32],
        };
        for s in 0..8u32 {
            let idx = s | 1 << 8 | 255 << 24;
            let sg = 1 | 127 << 14 | (s + 3) << 28;
            b.qs[4 * s as usize..4 * s as usize + 4].copy_from_slice(&[
                idx as u16,
                (idx >> 16) as u16,
                sg as u16,
                (sg >> 16) as u16,
            ]);
        }
        let mut bytes = [0u8; 66];
        write_block(&b, &mut bytes);
        // byte layout: d, then sub-block 0's indices (0, 1, 0, 255) and signs word
        assert_eq!(&bytes[..8], &[0x00, 0x40, 0, 1, 0, 255, 0x01, 0xC0]);
        let mut out = [0f32; 256];
        Iq2Xxs::dequantize(&bytes, &mut out).unwrap();
        for s in 0..8 {
            // d * (0.5 + (s + 3)) * 0.25 = (2s + 7) / 4
            let db = (2 * s + 7) as f32 / 4.0;
            let y = &out[32 * s..32 * s + 32];
            // group 0: grid[s]; ksigns[1] = 0b1000_0001: elements 0 and 7 negative
            for j in 0..8 {
                let m = grid8(IQ2XXS_GRID[s], j) as f32;
                let sign = if j == 0 || j == 7 { -1.0 } else { 1.0 };
                assert_eq!(y[j], db * m * sign, "s {s} j {j}");
            }
            // group 1: grid[1] = 0x080808080808082b (43, then 8s); signs 0
            assert_eq!(y[8], db * 43.0);
            assert!(y[9..16].iter().all(|&v| v == db * 8.0));
            // group 2: grid[0] = all 8; ksigns[127] = 0xFF: all negative
            assert!(y[16..24].iter().all(|&v| v == -db * 8.0));
            // group 3: grid[255], positive
            for j in 0..8 {
                assert_eq!(y[24 + j], db * grid8(IQ2XXS_GRID[255], j) as f32);
            }
        }
        testutil::check_dot_ref::<Iq2Xxs>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn refuses_to_quantize() {
        let e = Iq2Xxs::quantize(&[0.0; 256]).unwrap_err();
        assert_eq!(e, QuantError::NoQuantizer { format: "IQ2_XXS" });
        assert!(e.to_string().contains("IQ2_XXS") && e.to_string().contains("imatrix"));
    }

    #[test]
    fn random_blocks_dots() {
        let mut r = testutil::rng(1601);
        let q = random_blocks(&mut r, 16, 66, 0);
        let a = testutil::weights(&mut r, 16 * 256);
        testutil::check_dot_ref::<Iq2Xxs>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq2Xxs::dot_ref(&q, &ad).unwrap();
        let got = Iq2Xxs::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq2Xxs>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
