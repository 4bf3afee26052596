//! IQ1_M (ggml type 29): 256 weights per 56-byte super-block, 1.75 bits per weight.
//! Sixteen halves of 16 with a 3-bit scale each; every group of 8 weights is one entry of the
//! 2048-entry `iq1s_grid` (values -1, 0, 1) with its own shift sign (±IQ1M_DELTA). There is no
//! `d` field: the f16 super-block scale is spread over the top nibbles of the four scale words.
//! llama-quantize writes it for IQ1_M files; its encoder searches the grid under an importance
//! matrix: strata reads IQ1_M but does not write it.

use super::grids::{IQ1M_DELTA, IQ1S_GRID};
use super::iq1_s::grid_value;
use super::{read_block, type_id, BlockQ8K, Pod, QuantDot, QuantError, QuantFormat};
use super::{Q8K, QK_K};
use half::f16;

/// With `sc[k] = u16 LE of scales[2k..2k+2]` (k 0..4):
/// `d = f16 bits (sc[0] >> 12) | (sc[1] >> 8) & 0xF0 | (sc[2] >> 4) & 0xF00 | sc[3] & 0xF000`.
/// For sub-block s (0..8), group l (0..4) of 8 in it, and j (0..8), with `h = qh[2s + l/2]`
/// shifted right by `4 (l%2)`:
/// `idx = qs[4s + l] | (h & 7) << 8`, `delta = h & 8 ? -0.125 : 0.125`,
/// `dl = d * (2 * ((sc[s/2] >> (6 (s%2) + 3 (l/2))) & 7) + 1)`,
/// `w[32s + 8l + j] = dl * (sbyte_j(iq1s_grid[idx]) + delta)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq1M {
    /// Low 8 bits of the 32 grid indices, four per sub-block.
    pub qs: [u8; QK_K / 8],
    /// One nibble per group (low nibble: even group): high 3 bits of its index, then its shift
    /// sign.
    pub qh: [u8; QK_K / 16],
    /// Four u16 (LE): 12 bits of 3-bit half-block scales each (two sub-blocks), and in the top
    /// nibbles the four nibbles of the f16 super-block scale.
    pub scales: [u8; QK_K / 32],
}
const _: () = assert!(std::mem::size_of::<BlockIq1M>() == 56);
// SAFETY: repr(C), byte arrays only (no padding, size assert), any bits valid.
unsafe impl Pod for BlockIq1M {}

impl BlockIq1M {
    /// The four scale words (ggml reads `scales` through a `const uint16_t *`).
    #[inline]
    pub fn sc(&self) -> [u16; 4] {
        std::array::from_fn(|k| u16::from_le_bytes([self.scales[2 * k], self.scales[2 * k + 1]]))
    }

    /// The super-block scale reassembled from the scale words' top nibbles.
    #[inline]
    pub fn d(&self) -> f16 {
        let sc = self.sc();
        f16::from_bits(
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000),
        )
    }

    /// 3-bit scale (0..8) of half `h` (0..2) of sub-block `s` (0..8); the multiplier is 2x+1.
    #[inline]
    pub fn half_scale(&self, s: usize, h: usize) -> u16 {
        (self.sc()[s / 2] >> (6 * (s % 2) + 3 * h)) & 7
    }

    /// (grid index 0..2048, shift negative?) of group `l` (0..4) of sub-block `s` (0..8).
    #[inline]
    pub fn group(&self, s: usize, l: usize) -> (usize, bool) {
        let h = self.qh[2 * s + l / 2] >> (4 * (l % 2));
        (
            self.qs[4 * s + l] as usize | ((h & 7) as usize) << 8,
            h & 8 != 0,
        )
    }
}

pub struct Iq1M;

impl QuantFormat for Iq1M {
    const NAME: &'static str = "IQ1_M";
    const TYPE_ID: u32 = type_id::IQ1_M;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 56;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq1M = read_block(block);
        let d = b.d().to_f32();
        for s in 0..8 {
            let dl = [
                d * (2 * b.half_scale(s, 0) + 1) as f32,
                d * (2 * b.half_scale(s, 1) + 1) as f32,
            ];
            for l in 0..4 {
                let (idx, neg) = b.group(s, l);
                let delta = if neg { -IQ1M_DELTA } else { IQ1M_DELTA };
                let g = IQ1S_GRID[idx];
                let y = &mut out[32 * s + 8 * l..32 * s + 8 * l + 8];
                for (j, v) in y.iter_mut().enumerate() {
                    *v = dl[l / 2] * (grid_value(g, j) as f32 + delta);
                }
            }
        }
    }

    /// Never called by `quantize` (which refuses IQ1_M); writes the block with d = 0, which
    /// decodes to 256 zeros.
    fn quantize_block(_x: &[f32], out: &mut [u8]) {
        out.fill(0);
    }

    /// IQ1_M needs llama.cpp's importance-matrix grid search: always `NoQuantizer`.
    fn quantize(_x: &[f32]) -> Result<Vec<u8>, QuantError> {
        Err(QuantError::NoQuantizer { format: Self::NAME })
    }
}

impl QuantDot for Iq1M {
    type Act = Q8K;

    /// ggml `vec_dot_iq1_m_q8_K`: per half `ls = 2 * scale + 1`,
    /// `d_w * d_a * (sum ls * sum(grid * qa) + 0.125 * sum ls * sum_groups sign * sum(qa))`
    /// (the shift term sums the activation quants of each group of 8 itself, not `bsums`).
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq1M = read_block(w);
        let a: BlockQ8K = read_block(a);
        let (mut sumi1, mut sumi2) = (0i64, 0i64);
        for s in 0..8 {
            for l in 0..4 {
                let (idx, neg) = w.group(s, l);
                let g = IQ1S_GRID[idx];
                let q = &a.qs[32 * s + 8 * l..32 * s + 8 * l + 8];
                let lsum1: i64 = (0..8).map(|j| grid_value(g, j) as i64 * q[j] as i64).sum();
                let lsum2: i64 = q.iter().map(|&v| v as i64).sum();
                let ls = (2 * w.half_scale(s, l / 2) + 1) as i64;
                sumi1 += ls * lsum1;
                sumi2 += ls * if neg { -lsum2 } else { lsum2 };
            }
        }
        w.d().to_f32() as f64 * a.d as f64 * (sumi1 as f64 + IQ1M_DELTA as f64 * sumi2 as f64)
    }
}

/// Random IQ1_M blocks for tests: random bytes, the scale words' top nibbles set to a finite,
/// moderate f16 `d`.
#[cfg(test)]
pub(crate) fn random_blocks(r: &mut rand::rngs::StdRng, n: usize) -> Vec<u8> {
    use rand::Rng;
    let mut v: Vec<u8> = (0..n * 56).map(|_| r.gen()).collect();
    for b in v.chunks_exact_mut(56) {
        let d = f16::from_f32(r.gen_range(-0.05f32..0.05)).to_bits();
        set_d(&mut b[48..56], d);
    }
    v
}

/// Writes f16 bits `d` into the top nibbles of the four scale words in `scales` (8 bytes).
#[cfg(test)]
fn set_d(scales: &mut [u8], d: u16) {
    for k in 0..4 {
        let w = u16::from_le_bytes([scales[2 * k], scales[2 * k + 1]]);
        let w = (w & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12);
        scales[2 * k..2 * k + 2].copy_from_slice(&w.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{testutil, write_block};

    #[test]
    fn hand_built_bytes() {
        let mut b = BlockIq1M {
            qs: [0; 32],
            qh: [0; 16],
            scales: [0; 8],
        };
        // d = 0.25 (f16 0x3400): nibbles 0, 0, 4, 3 into words 0..4
        set_d(&mut b.scales, f16::from_f32(0.25).to_bits());
        assert_eq!(b.scales, [0, 0, 0, 0, 0, 0x40, 0, 0x30]);
        assert_eq!(b.d().to_f32(), 0.25);
        // sub-block 0: half scales 1 (x3) and 6 (x13); sub-block 1: 7 (x15) and 2 (x5)
        let w0 = 1 | (6 << 3) | (7 << 6) | (2 << 9);
        b.scales[..2].copy_from_slice(&(w0 as u16).to_le_bytes());
        assert_eq!(
            [
                b.half_scale(0, 0),
                b.half_scale(0, 1),
                b.half_scale(1, 0),
                b.half_scale(1, 1)
            ],
            [1, 6, 7, 2]
        );
        assert_eq!(b.d().to_f32(), 0.25, "d nibbles untouched");
        // sub-block 0 groups: (entry 1, +), (entry 0x7ff, -), (entry 0x2ff, +), (entry 0, -)
        b.qs[..4].copy_from_slice(&[1, 0xff, 0xff, 0]);
        b.qh[0] = 0x0 | (0xF << 4); // group 0: hi 0, +; group 1: hi 7, -
        b.qh[1] = 0x2 | (0x8 << 4); // group 2: hi 2, +; group 3: hi 0, -
        assert_eq!(b.group(0, 1), (0x7ff, true));
        assert_eq!(b.group(0, 2), (0x2ff, false));
        let mut bytes = [0u8; 56];
        write_block(&b, &mut bytes);
        let mut out = [0f32; 256];
        Iq1M::dequantize(&bytes, &mut out).unwrap();
        let (d1, d2) = (0.25f32 * 3.0, 0.25f32 * 13.0);
        // iq1s_grid[1] = 0xffffffffffffff01, [2047] = all +1
        assert_eq!(out[0], d1 * 1.125);
        assert!(out[1..8].iter().all(|&v| v == d1 * -0.875));
        assert!(out[8..16].iter().all(|&v| v == d1 * 0.875));
        for j in 0..8 {
            let g = grid_value(IQ1S_GRID[0x2ff], j) as f32;
            assert_eq!(out[16 + j], d2 * (g + 0.125));
        }
        assert!(out[24..32].iter().all(|&v| v == d2 * -1.125));
        // sub-block 1: qs/qh zero (entry 0, +), scales 15 then 5
        assert!(out[32..48].iter().all(|&v| v == 0.25 * 15.0 * -0.875));
        assert!(out[48..64].iter().all(|&v| v == 0.25 * 5.0 * -0.875));
        testutil::check_dot_ref::<Iq1M>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn quantize_refuses_with_the_format_name() {
        let e = Iq1M::quantize(&[0.0; 256]).unwrap_err();
        assert_eq!(e, QuantError::NoQuantizer { format: "IQ1_M" });
        assert!(e.to_string().contains("IQ1_M"));
    }

    #[test]
    fn quantized_dot_matches_dequantized() {
        let mut r = testutil::rng(129);
        let w = random_blocks(&mut r, 16);
        let a = testutil::weights(&mut r, 256 * 16);
        testutil::check_dot_ref::<Iq1M>(&w, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq1M::dot_ref(&w, &ad).unwrap();
        let got = Iq1M::dot_quantized(&w, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq1M>(&w, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
