//! IQ3_S (ggml type 21): 256 weights per 110-byte super-block, 3.4375 bits per weight.
//! Each 4 weights are one entry of the 512-entry `iq3s_grid` (4 magnitudes from {1, 3, ..., 15})
//! by a 9-bit index (8 bits in `qs`, the 9th in `qh`); one explicit sign bit per weight; a 4-bit
//! scale per sub-block of 32. Read-only: no quantizer (needs an importance matrix).

use super::grids::{grid4, sign_f32, sign_i32, IQ3S_GRID};
use super::{read_block, type_id, BlockQ8K, Pod, QuantDot, QuantError, QuantFormat, Q8K, QK_K};
use half::f16;

/// For 4-group k (0..64): `idx = qs[k] | ((qh[k/8] >> (k%8)) & 1) << 8`; sub-block s = k/8 has
/// `db = d * (1 + 2 * ((scales[s/2] >> 4(s%2)) & 15))`; weight e = 4k + j (j in 0..4):
/// `w[e] = db * grid[idx][j] * (signs[e/8] bit e%8 ? -1 : 1)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq3S {
    /// Super-block scale.
    pub d: f16,
    /// Low 8 bits of the 64 grid indices.
    pub qs: [u8; QK_K / 4],
    /// 9th bit of the grid indices: bit i of `qh[b]` for index 8b + i.
    pub qh: [u8; QK_K / 32],
    /// One sign bit per weight: bit i of `signs[b]` for weight 8b + i.
    pub signs: [u8; QK_K / 8],
    /// 4-bit sub-block scales, two per byte (low nibble = even sub-block).
    pub scales: [u8; QK_K / 64],
}
const _: () = assert!(std::mem::size_of::<BlockIq3S>() == 110);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockIq3S {}

/// The 9-bit grid index of 4-group `k` (0..64).
#[inline]
pub fn grid_index(b: &BlockIq3S, k: usize) -> usize {
    b.qs[k] as usize | (((b.qh[k / 8] >> (k % 8)) & 1) as usize) << 8
}

/// Sub-block `s`'s odd multiplier `1 + 2 * scale` (1..=31).
#[inline]
pub fn sub_mult(b: &BlockIq3S, s: usize) -> i32 {
    1 + 2 * ((b.scales[s / 2] >> (4 * (s % 2))) & 0xF) as i32
}

pub struct Iq3S;

impl QuantFormat for Iq3S {
    const NAME: &'static str = "IQ3_S";
    const TYPE_ID: u32 = type_id::IQ3_S;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 110;

    /// ggml `dequantize_row_iq3_s`, same f32 operations in the same order.
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockIq3S = read_block(block);
        let d = b.d.to_f32();
        for s in 0..8 {
            let db = d * sub_mult(&b, s) as f32;
            for l in 0..4 {
                // 8 weights: 4-groups 8s + 2l, 8s + 2l + 1, sign byte 4s + l
                let g1 = IQ3S_GRID[grid_index(&b, 8 * s + 2 * l)];
                let g2 = IQ3S_GRID[grid_index(&b, 8 * s + 2 * l + 1)];
                let signs = b.signs[4 * s + l];
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

impl QuantDot for Iq3S {
    type Act = Q8K;

    /// ggml `vec_dot_iq3_s_q8_K`: `d_w * d_a * sum_s (1 + 2 ls_s) * sum(grid * sign * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockIq3S = read_block(w);
        let a: BlockQ8K = read_block(a);
        let mut bsum = 0i64;
        for s in 0..8 {
            let mut sumi = 0i32;
            for l in 0..4 {
                let g1 = IQ3S_GRID[grid_index(&w, 8 * s + 2 * l)];
                let g2 = IQ3S_GRID[grid_index(&w, 8 * s + 2 * l + 1)];
                let signs = w.signs[4 * s + l];
                let q8 = &a.qs[32 * s + 8 * l..32 * s + 8 * l + 8];
                for j in 0..4 {
                    sumi += grid4(g1, j) as i32 * q8[j] as i32 * sign_i32(signs, j);
                    sumi += grid4(g2, j) as i32 * q8[j + 4] as i32 * sign_i32(signs, j + 4);
                }
            }
            bsum += sumi as i64 * sub_mult(&w, s) as i64;
        }
        w.d.to_f32() as f64 * a.d as f64 * bsum as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{grids::random_blocks, testutil, write_block};

    #[test]
    fn hand_built_bytes() {
        // 4-group k: index 8-bit k * 3, 9th bit set for odd k; sign byte b = b * 5;
        // sub-block scales s
        let mut b = BlockIq3S {
            d: f16::from_f32(0.125),
            qs: [0; 64],
            qh: [0xAA; 8],
            signs: [0; 32],
            scales: [0; 4],
        };
        for k in 0..64 {
            b.qs[k] = (3 * k) as u8;
        }
        for i in 0..32 {
            b.signs[i] = (5 * i) as u8;
        }
        for s in 0..8 {
            b.scales[s / 2] |= (s as u8) << (4 * (s % 2));
        }
        let mut bytes = [0u8; 110];
        write_block(&b, &mut bytes);
        // field offsets: qh at 66, signs at 74, scales at 106
        assert_eq!(bytes[66], 0xAA);
        assert_eq!(bytes[74 + 3], 15);
        assert_eq!(&bytes[106..110], &[0x10, 0x32, 0x54, 0x76]);
        let mut out = [0f32; 256];
        Iq3S::dequantize(&bytes, &mut out).unwrap();
        for e in 0..256 {
            let k = e / 4;
            let idx = (3 * k) % 256 + if k % 2 == 1 { 256 } else { 0 };
            let db = 0.125 * (1 + 2 * (e / 32)) as f32;
            let neg = ((5 * (e / 8)) as u8 >> (e % 8)) & 1 == 1;
            let want = db * grid4(IQ3S_GRID[idx], e % 4) as f32 * if neg { -1.0 } else { 1.0 };
            assert_eq!(out[e], want, "e {e}");
        }
        testutil::check_dot_ref::<Iq3S>(&bytes, &[0.5; 256]);
    }

    #[test]
    fn refuses_to_quantize() {
        let e = Iq3S::quantize(&[0.0; 256]).unwrap_err();
        assert_eq!(e, QuantError::NoQuantizer { format: "IQ3_S" });
    }

    #[test]
    fn random_blocks_dots() {
        let mut r = testutil::rng(2101);
        let q = random_blocks(&mut r, 16, 110, 0);
        let a = testutil::weights(&mut r, 16 * 256);
        testutil::check_dot_ref::<Iq3S>(&q, &a);
        let qa = Q8K::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8K::dequantize(&qa, &mut ad).unwrap();
        let want = Iq3S::dot_ref(&q, &ad).unwrap();
        let got = Iq3S::dot_quantized(&q, &qa).unwrap();
        let tol = 1e-6 * testutil::dot_abs::<Iq3S>(&q, &ad);
        assert!((got - want).abs() <= tol, "{got} vs {want} (tol {tol})");
    }
}
