//! IQ2_XS (ggml type 17): 256 weights per 74-byte super-block, 2.3125 bits per weight.
//! Thirty-two groups of 8 weights, each a 9-bit index into the 512-entry `iq2xs_grid`
//! (8 magnitudes from {8, 25, 43}) and 7 sign bits (8th by parity: `ksigns_iq2xs`); a 4-bit
//! scale per 16 weights. Read-only: no quantizer (needs an importance matrix).

use super::grids::{grid8, sign_f32, sign_i32, IQ2XS_GRID, KSIGNS_IQ2XS};
use super::{read_block, type_id, BlockQ8K, Pod, QuantDot, QuantError, QuantFormat, Q8K, QK_K};
use half::f16;

/// Group g (0..32) of 8 weights: `grid = iq2xs_grid[qs[g] & 511]`, `signs = ksigns[qs[g] >> 9]`;
/// its scale nibble is `scales[g/4] >> 4((g/2)%2) & 15` (low nibble for groups 4s, 4s+1).
/// For j in 0..8: `w[8g + j] = (d * (0.5 + nibble) * 0.25) * grid[j] * sign_j`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq2Xs {
    /// Super-block scale.
    pub d: f16,
    /// Per group: 9-bit grid index | 7 sign bits << 9.
    pub qs: [u16; QK_K / 8],
    /// Two 4-bit scales per sub-block of 32 (low nibble: first 16 weights).
    pub scales: [u8; QK_K / 32],
}
const _: () = assert!(std::mem::size_of::<BlockIq2Xs>() == 74);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockIq2Xs {}

/// The 4-bit scale of group `g` (0..32).
#[inline]
pub fn group_scale(b: &BlockIq2Xs, g: usize) -> u8 {
    (b.scales[g / 4] >> (4 * ((g / 2) % 2))) & 0xF
}

pub struct Iq2Xs;

impl QuantFormat for Iq2Xs {
    const NAME: &'static str = "IQ2_XS";
    const TYPE_ID: u32 = type_id::IQ2_XS;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 74;

    /// ggml `dequantize_row_iq2_xs`, same f32 operations in the same order.
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq2Xs = read_block(block);
        let d = b.d.to_f32();
        for g in 0..32 {
            let db = d * (0.5 + group_scale(&b, g) as f32) * 0.25;
            let grid = IQ2XS_GRID[(b.qs[g] & 511) as usize];
            let signs = KSIGNS_IQ2XS[(b.qs[g] >> 9) as usize];
            for (j, v) in out[8 * g..8 * g + 8].iter_mut().enumerate() {
                *v = db * grid8(grid, j) as f32 * sign_f32(signs, j);
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

impl QuantDot for Iq2Xs {
    type Act = Q8K;

    /// ggml `vec_dot_iq2_xs_q8_K`: `0.125 * d_w * d_a * sum_g (2 ls_g + 1) * sum(grid * sign * qa)`
    /// (integer sums per 16 weights).
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq2Xs = read_block(w);
        let a: BlockQ8K = read_block(a);
        let mut bsum = 0i64;
        for h in 0..16 {
            // 16 weights: groups 2h, 2h+1 share a scale
            let ls = 2 * group_scale(&w, 2 * h) as i64 + 1;
            let mut sumi = 0i32;
            for g in 2 * h..2 * h + 2 {
                let grid = IQ2XS_GRID[(w.qs[g] & 511) as usize];
                let signs = KSIGNS_IQ2XS[(w.qs[g] >> 9) as usize];
                for j in 0..8 {
                    sumi += grid8(grid, j) as i32 * a.qs[8 * g + j] as i32 * sign_i32(signs, j);
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
        // group g: index 511 - g (9 bits), sign index g % 128 (here g < 32), scale nibbles
        // (s, 15 - s) for sub-block s
        let mut b = BlockIq2Xs {
            d: f16::from_f32(0.5),
            qs: [0; 32],
            scales: [0; 8],
        };
        for g in 0..32 {
            b.qs[g] = (511 - g as u16) | (g as u16) << 9;
        }
        for s in 0..8 {
            b.scales[s] = s as u8 | (15 - s as u8) << 4;
        }
        let mut bytes = [0u8; 74];
        write_block(&b, &mut bytes);
        // group 1: 510 | 1 << 9 = 0x03FE; scales at byte 66
        assert_eq!(&bytes[4..6], &[0xFE, 0x03]);
        assert_eq!(bytes[66 + 3], 0xC3);
        let mut out = [0f32; 256];
        Iq2Xs::dequantize(&bytes, &mut out).unwrap();
        for g in 0..32 {
            let s = g / 4;
            let nib = if g % 4 < 2 { s } else { 15 - s };
            let db = 0.5 * (0.5 + nib as f32) * 0.25;
            let grid = IQ2XS_GRID[511 - g];
            let signs = KSIGNS_IQ2XS[g];
            for j in 0..8 {
                // ksigns[g]: bits of g, bit 7 set when g has an odd number of ones
                let neg = (g >> j) & 1 == 1 || (j == 7 && g.count_ones() % 2 == 1);
                assert_eq!(signs & (1 << j) != 0, neg);
                let want = db * grid8(grid, j) as f32 * if neg { -1.0 } else { 1.0 };
                assert_eq!(out[8 * g + j], want, "g {g} j {j}");
            }
        }
        testutil::check_dot_ref::<Iq2Xs>(&bytes, &[0.25; 256]);
    }

    #[test]
    fn refuses_to_quantize() {
        let e = Iq2Xs::quantize(&[0.0; 256]).unwrap_err();
        assert_eq!(e, QuantError::NoQuantizer { format: "IQ2_XS" });
    }

    #[test]
    fn random_blocks_dots() {
        let mut r = testutil::rng(1701);
        let q = random_blocks(&mut r, 16, 74, 0);
        let a = testutil::weights(&mut r, 16 * 256);
        testutil::check_dot_ref::<Iq2Xs>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq2Xs::dot_ref(&q, &ad).unwrap();
        let got = Iq2Xs::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq2Xs>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
