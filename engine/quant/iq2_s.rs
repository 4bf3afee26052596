//! IQ2_S (ggml type 22): 256 weights per 82-byte super-block, 2.5625 bits per weight.
//! Eight sub-blocks of 32, each two halves of 16 with a 4-bit scale; every group of 8 weights is
//! one entry of the 1024-entry `iq2s_grid` (10-bit index) with 8 explicit sign bits.
//! llama-quantize writes it for the ffn_down tensors of its IQ2_M files. The encoder searches
//! the grid under an importance matrix: strata reads IQ2_S but does not write it.

use super::grids::{grid8, IQ2S_GRID, KMASK_IQ2XS};
use super::{read_block, type_id, BlockQ8K, Pod, QuantDot, QuantError, QuantFormat};
use super::{Q8K, QK_K};
use half::f16;

/// For sub-block s (0..8), group l (0..4) of 8 weights in it, and j (0..8):
/// `idx = qs[4s + l] | ((qh[s] >> 2l) & 3) << 8` (10 bits),
/// `db = d * (0.5 + (scales[s] >> 4(l/2)) & 0xF) * 0.25` (low nibble: first 16 weights),
/// `w[32s + 8l + j] = db * byte_j(iq2s_grid[idx]) * (signs[4s + l] bit j ? -1 : 1)`,
/// with grid bytes 0x08, 0x19, 0x2b (8, 25, 43).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq2S {
    /// Super-block scale.
    pub d: f16,
    /// Low 8 bits of the 32 grid indices, four per sub-block.
    pub qs: [u8; QK_K / 8],
    /// Sign bits, one byte per group of 8 (ggml keeps them as `qs[32..64]`).
    pub signs: [u8; QK_K / 8],
    /// High 2 bits of the grid indices: bits 2l..2l+2 of `qh[s]` for group l of sub-block s.
    pub qh: [u8; QK_K / 32],
    /// Two 4-bit scales per sub-block (low nibble: weights 0..16, high: 16..32).
    pub scales: [u8; QK_K / 32],
}
const _: () = assert!(std::mem::size_of::<BlockIq2S>() == 82);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockIq2S {}

/// Grid index (0..1024) of group `l` (0..4) of sub-block `s` (0..8).
#[inline]
pub fn grid_index(b: &BlockIq2S, s: usize, l: usize) -> usize {
    b.qs[4 * s + l] as usize | (((b.qh[s] as usize) >> (2 * l)) & 3) << 8
}

pub struct Iq2S;

impl QuantFormat for Iq2S {
    const NAME: &'static str = "IQ2_S";
    const TYPE_ID: u32 = type_id::IQ2_S;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 82;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq2S = read_block(block);
        let d = b.d.to_f32();
        for s in 0..8 {
            // ggml: d * (0.5f + nibble) * 0.25f, left to right
            let db = [
                d * (0.5 + (b.scales[s] & 0xF) as f32) * 0.25,
                d * (0.5 + (b.scales[s] >> 4) as f32) * 0.25,
            ];
            for l in 0..4 {
                let dl = db[l / 2];
                let g = IQ2S_GRID[grid_index(&b, s, l)];
                let sg = b.signs[4 * s + l];
                let y = &mut out[32 * s + 8 * l..32 * s + 8 * l + 8];
                for (j, v) in y.iter_mut().enumerate() {
                    let sign = if sg & KMASK_IQ2XS[j] != 0 { -1.0 } else { 1.0 };
                    *v = dl * grid8(g, j) as f32 * sign;
                }
            }
        }
    }

    /// Never called by `quantize` (which refuses IQ2_S); writes the all-zero block (d = 0), the
    /// exact encoding of 256 zeros only.
    fn quantize_block(_x: &[f32], out: &mut [u8]) {
        out.fill(0);
    }

    /// IQ2_S needs llama.cpp's importance-matrix grid search: always `NoQuantizer`.
    fn quantize(_x: &[f32]) -> Result<Vec<u8>, QuantError> {
        Err(QuantError::NoQuantizer { format: Self::NAME })
    }
}

impl QuantDot for Iq2S {
    type Act = Q8K;

    /// ggml `vec_dot_iq2_s_q8_K`: per sub-block `ls = 1 + 2 * nibble` for each half,
    /// `d_w * d_a * 0.125 * sum_s (ls1 * sum1 + ls2 * sum2)` with sums of signed grid bytes times
    /// the activation quants ((0.5 + n) * 0.25 = (1 + 2n) / 8).
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq2S = read_block(w);
        let a: BlockQ8K = read_block(a);
        let mut bsum = 0i64;
        for s in 0..8 {
            let mut sumi = [0i32; 2];
            for l in 0..4 {
                let g = IQ2S_GRID[grid_index(&w, s, l)];
                let sg = w.signs[4 * s + l];
                for (j, &mask) in KMASK_IQ2XS.iter().enumerate() {
                    let v = grid8(g, j) as i32 * a.qs[32 * s + 8 * l + j] as i32;
                    sumi[l / 2] += if sg & mask != 0 { -v } else { v };
                }
            }
            let ls1 = 1 + 2 * (w.scales[s] & 0xF) as i64;
            let ls2 = 1 + 2 * (w.scales[s] >> 4) as i64;
            bsum += ls1 * sumi[0] as i64 + ls2 * sumi[1] as i64;
        }
        w.d.to_f32() as f64 * a.d as f64 * bsum as f64 * 0.125
    }
}

/// Random IQ2_S blocks for tests: random bytes with a finite, moderate f16 `d`.
#[cfg(test)]
pub(crate) fn random_blocks(r: &mut rand::rngs::StdRng, n: usize) -> Vec<u8> {
    use rand::Rng;
    let mut v: Vec<u8> = (0..n * 82).map(|_| r.gen()).collect();
    for b in v.chunks_exact_mut(82) {
        let d = f16::from_f32(r.gen_range(-0.01f32..0.01));
        b[..2].copy_from_slice(&d.to_le_bytes());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{testutil, write_block};

    #[test]
    fn hand_built_bytes() {
        let mut b = BlockIq2S {
            d: f16::from_f32(2.0),
            qs: [0; 32],
            signs: [0; 32],
            qh: [0; 8],
            scales: [0; 8],
        };
        // sub-block 0: scales 3 (first half) and 5 (second); groups use grid entries
        // 0 (all 0x08), 1, 0x2ff (qh bits 2..4 = 0b10, qs = 0xff), 0x3ff
        b.scales[0] = 0x53;
        b.qs[..4].copy_from_slice(&[0, 1, 0xff, 0xff]);
        b.qh[0] = 0b1110_0000; // group 1: 0, group 2: 0b10, group 3: 0b11
        b.signs[0] = 0b0000_0101; // group 0: elements 0 and 2 negative
        b.signs[3] = 0x80; // group 3: element 7 negative
        assert_eq!(grid_index(&b, 0, 1), 1);
        assert_eq!(grid_index(&b, 0, 2), 0x2ff);
        assert_eq!(grid_index(&b, 0, 3), 0x3ff);
        let mut bytes = [0u8; 82];
        write_block(&b, &mut bytes);
        // the layout ggml reads: d, qs[0..32], signs = qs[32..64], qh, scales
        assert_eq!(bytes[2 + 32], 0b101);
        assert_eq!(bytes[2 + 64], 0b1110_0000);
        assert_eq!(bytes[2 + 72], 0x53);
        let mut out = [0f32; 256];
        Iq2S::dequantize(&bytes, &mut out).unwrap();
        let (d1, d2) = (2.0 * 3.5 * 0.25, 2.0 * 5.5 * 0.25);
        assert_eq!(
            &out[..8],
            &[
                -8.0 * d1,
                8.0 * d1,
                -8.0 * d1,
                8.0 * d1,
                8.0 * d1,
                8.0 * d1,
                8.0 * d1,
                8.0 * d1
            ]
        );
        for j in 0..8 {
            assert_eq!(out[8 + j], d1 * grid8(IQ2S_GRID[1], j) as f32);
            assert_eq!(out[16 + j], d2 * grid8(IQ2S_GRID[0x2ff], j) as f32);
            let s = if j == 7 { -1.0 } else { 1.0 };
            assert_eq!(out[24 + j], d2 * grid8(IQ2S_GRID[0x3ff], j) as f32 * s);
        }
        // ggml-common.h: iq2s_grid[1] = 0x080808080808082b, [1023] = 0x2b2b2b2b2b2b2b2b
        assert_eq!(out[8], d1 * 43.0);
        assert_eq!(out[9], d1 * 8.0);
        assert_eq!(out[24], d2 * 43.0);
        // sub-blocks 1..8: scale 0, grid 0, no signs: 0.5 * 0.25 * 2 * 8
        assert!(out[32..].iter().all(|&v| v == 2.0));
        testutil::check_dot_ref::<Iq2S>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn quantize_refuses_with_the_format_name() {
        let e = Iq2S::quantize(&[0.0; 256]).unwrap_err();
        assert_eq!(e, QuantError::NoQuantizer { format: "IQ2_S" });
        assert!(e.to_string().contains("IQ2_S"));
        // a ragged byte count is still an error of its own
        assert!(Iq2S::dequantize(&[0u8; 81], &mut [0f32; 256]).is_err());
    }

    #[test]
    fn quantized_dot_matches_dequantized() {
        let mut r = testutil::rng(222);
        let w = random_blocks(&mut r, 16);
        let a = testutil::weights(&mut r, 256 * 16);
        testutil::check_dot_ref::<Iq2S>(&w, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq2S::dot_ref(&w, &ad).unwrap();
        let got = Iq2S::dot_quantized(&w, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq2S>(&w, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
