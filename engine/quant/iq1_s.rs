//! IQ1_S (ggml type 19): 256 weights per 50-byte super-block, 1.5625 bits per weight.
//! Eight sub-blocks of 32 with a 3-bit scale and a sign for a shared shift (±IQ1S_DELTA); every
//! group of 8 weights is one entry of the 2048-entry `iq1s_grid` (values -1, 0, 1; 11-bit
//! index). llama-quantize writes it for IQ1_S files; its encoder searches the grid under an
//! importance matrix: strata reads IQ1_S but does not write it.

use super::grids::{IQ1S_DELTA, IQ1S_GRID};
use super::{read_block, type_id, BlockQ8K, Pod, QuantDot, QuantError, QuantFormat};
use super::{Q8K, QK_K};
use half::f16;

/// For sub-block s (0..8), group l (0..4) of 8 weights in it, and j (0..8):
/// `idx = qs[4s + l] | ((qh[s] >> 3l) & 7) << 8` (11 bits),
/// `dl = d * (2 * ((qh[s] >> 12) & 7) + 1)`, `delta = qh[s] & 0x8000 ? -0.125 : 0.125`,
/// `w[32s + 8l + j] = dl * (sbyte_j(iq1s_grid[idx]) + delta)` (signed grid bytes -1, 0, 1).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq1S {
    /// Super-block scale.
    pub d: f16,
    /// Low 8 bits of the 32 grid indices, four per sub-block.
    pub qs: [u8; QK_K / 8],
    /// Per sub-block: bits 0..12 the high 3 bits of its four indices, 12..15 the scale, 15 the
    /// sign of the shift.
    pub qh: [u16; QK_K / 32],
}
const _: () = assert!(std::mem::size_of::<BlockIq1S>() == 50);
// SAFETY: repr(C), no padding (size assert: f16 then u8s then u16s at an even offset), all
// fields accept any bits.
unsafe impl Pod for BlockIq1S {}

/// Grid index (0..2048) of group `l` (0..4) of sub-block `s` (0..8).
#[inline]
pub fn grid_index(b: &BlockIq1S, s: usize, l: usize) -> usize {
    b.qs[4 * s + l] as usize | (((b.qh[s] as usize) >> (3 * l)) & 7) << 8
}

/// Signed byte `j` (0..8) of an `iq1s_grid` entry: -1, 0 or 1.
#[inline]
pub fn grid_value(entry: u64, j: usize) -> i8 {
    (entry >> (8 * j)) as u8 as i8
}

pub struct Iq1S;

impl QuantFormat for Iq1S {
    const NAME: &'static str = "IQ1_S";
    const TYPE_ID: u32 = type_id::IQ1_S;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 50;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq1S = read_block(block);
        let d = b.d.to_f32();
        for s in 0..8 {
            let qh = b.qh[s];
            // ggml: d * (int) (2*scale + 1); delta is added to the grid value first
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = if qh & 0x8000 != 0 {
                -IQ1S_DELTA
            } else {
                IQ1S_DELTA
            };
            for l in 0..4 {
                let g = IQ1S_GRID[grid_index(&b, s, l)];
                let y = &mut out[32 * s + 8 * l..32 * s + 8 * l + 8];
                for (j, v) in y.iter_mut().enumerate() {
                    *v = dl * (grid_value(g, j) as f32 + delta);
                }
            }
        }
    }

    /// Never called by `quantize` (which refuses IQ1_S); writes the block with d = 0, which
    /// decodes to 256 zeros.
    fn quantize_block(_x: &[f32], out: &mut [u8]) {
        out.fill(0);
    }

    /// IQ1_S needs llama.cpp's importance-matrix grid search: always `NoQuantizer`.
    fn quantize(_x: &[f32]) -> Result<Vec<u8>, QuantError> {
        Err(QuantError::NoQuantizer { format: Self::NAME })
    }
}

impl QuantDot for Iq1S {
    type Act = Q8K;

    /// ggml `vec_dot_iq1_s_q8_K`: per sub-block `ls = 2 * scale + 1`,
    /// `d_w * d_a * (sum_s ls * sum(grid * qa) + 0.125 * sum_s ls * sign_s * bsum_s)` where the
    /// shift term uses Q8_K's stored sums of 16 quants (`bsums[2s] + bsums[2s + 1]`).
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq1S = read_block(w);
        let a: BlockQ8K = read_block(a);
        let (mut sumi, mut sumi1) = (0i64, 0i64);
        for s in 0..8 {
            let qh = w.qh[s];
            let ls = (2 * ((qh >> 12) & 7) + 1) as i64;
            let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
            let mut lsum = 0i64;
            for l in 0..4 {
                let g = IQ1S_GRID[grid_index(&w, s, l)];
                for j in 0..8 {
                    lsum += grid_value(g, j) as i64 * a.qs[32 * s + 8 * l + j] as i64;
                }
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (a.bsums[2 * s] as i64 + a.bsums[2 * s + 1] as i64);
        }
        w.d.to_f32() as f64 * a.d as f64 * (sumi as f64 + IQ1S_DELTA as f64 * sumi1 as f64)
    }
}

/// Random IQ1_S blocks for tests: random bytes with a finite, moderate f16 `d`.
#[cfg(test)]
pub(crate) fn random_blocks(r: &mut rand::rngs::StdRng, n: usize) -> Vec<u8> {
    use rand::Rng;
    let mut v: Vec<u8> = (0..n * 50).map(|_| r.gen()).collect();
    for b in v.chunks_exact_mut(50) {
        let d = f16::from_f32(r.gen_range(-0.05f32..0.05));
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
        let mut b = BlockIq1S {
            d: f16::from_f32(0.5),
            qs: [0; 32],
            qh: [0; 8],
        };
        // sub-block 0: scale 2 (dl = 0.5 * 5), delta +; groups: entries 0, 1, 0x7ff, 0x300
        b.qs[..4].copy_from_slice(&[0, 1, 0xff, 0x00]);
        b.qh[0] = (2 << 12) | (7 << 6) | (3 << 9);
        // sub-block 1: scale 7 (dl = 0.5 * 15), delta -, entry 2047 everywhere
        b.qs[4..8].copy_from_slice(&[0xff; 4]);
        b.qh[1] = 0x8000 | (7 << 12) | 0o7777;
        assert_eq!(grid_index(&b, 0, 2), 0x7ff);
        assert_eq!(grid_index(&b, 0, 3), 0x300);
        let mut bytes = [0u8; 50];
        write_block(&b, &mut bytes);
        // qh[0] little-endian right after d and qs
        assert_eq!(
            u16::from_le_bytes([bytes[34], bytes[35]]),
            0x2000 | 0x1c0 | 0x600
        );
        let mut out = [0f32; 256];
        Iq1S::dequantize(&bytes, &mut out).unwrap();
        let dl = 2.5f32;
        // ggml-common.h: iq1s_grid[0] = all -1, [1] = 0xffffffffffffff01, [2047] = all +1
        assert!(out[..8].iter().all(|&v| v == dl * (-1.0 + 0.125)));
        assert_eq!(out[8], dl * 1.125);
        assert!(out[9..16].iter().all(|&v| v == dl * -0.875));
        assert!(out[16..24].iter().all(|&v| v == dl * 1.125));
        for j in 0..8 {
            let want = dl * (grid_value(IQ1S_GRID[0x300], j) as f32 + 0.125);
            assert_eq!(out[24 + j], want);
        }
        assert!(out[32..64].iter().all(|&v| v == 7.5 * (1.0 - 0.125)));
        // sub-blocks 2..8: qh = 0: scale 1, entry 0, delta +
        assert!(out[64..].iter().all(|&v| v == 0.5 * -0.875));
        testutil::check_dot_ref::<Iq1S>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn quantize_refuses_with_the_format_name() {
        let e = Iq1S::quantize(&[0.0; 256]).unwrap_err();
        assert_eq!(e, QuantError::NoQuantizer { format: "IQ1_S" });
        assert!(e.to_string().contains("IQ1_S"));
    }

    #[test]
    fn quantized_dot_matches_dequantized() {
        let mut r = testutil::rng(119);
        let w = random_blocks(&mut r, 16);
        let a = testutil::weights(&mut r, 256 * 16);
        testutil::check_dot_ref::<Iq1S>(&w, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq1S::dot_ref(&w, &ad).unwrap();
        let got = Iq1S::dot_quantized(&w, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq1S>(&w, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
