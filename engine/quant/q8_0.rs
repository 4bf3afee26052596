//! Q8_0 (ggml type 8): 32 weights per 34-byte block, 8.5 bits per weight.
//! Also the activation format ggml pairs with Q4_0, Q5_0 and Q8_0 weights.

use super::{read_block, type_id, write_block, Pod, QuantDot, QuantFormat};
use half::f16;

pub const QK8_0: usize = 32;

/// `w[i] = d * qs[i]`, `qs` signed 8-bit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ8_0 {
    /// Block scale.
    pub d: f16,
    /// Quants, one per weight.
    pub qs: [i8; QK8_0],
}
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == 34);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ8_0 {}

pub struct Q8_0;

/// ggml's `quantize_row_q8_0_ref` for one block: `d = amax/127`, `q = roundf(x/d)`
/// (half away from zero) with the f32 inverse scale; `d` stored as f16. Returns the block and
/// the sum of its quants (Q8_1 stores that too).
pub(crate) fn quantize_q8_32(x: &[f32]) -> (f32, [i8; 32], i32) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0i8; 32];
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
        sum += *q as i32;
    }
    (d, qs, sum)
}

impl QuantFormat for Q8_0 {
    const NAME: &'static str = "Q8_0";
    const TYPE_ID: u32 = type_id::Q8_0;
    const BLOCK_ELEMS: usize = QK8_0;
    const BLOCK_BYTES: usize = 34;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ8_0 = read_block(block);
        let d = b.d.to_f32();
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }

    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let (d, qs, _) = quantize_q8_32(x);
        write_block(
            &BlockQ8_0 {
                d: f16::from_f32(d),
                qs,
            },
            out,
        );
    }
}

impl QuantDot for Q8_0 {
    type Act = Q8_0;

    /// `d_w * d_a * sum(qw * qa)`.
    fn dot_block_quantized(w: &[u8], a: &[u8]) -> f64 {
        let w: BlockQ8_0 = read_block(w);
        let a: BlockQ8_0 = read_block(a);
        let sumi: i32 =
            w.qs.iter()
                .zip(&a.qs)
                .map(|(&p, &q)| p as i32 * q as i32)
                .sum();
        sumi as f64 * w.d.to_f32() as f64 * a.d.to_f32() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut bytes = vec![0u8; 34];
        bytes[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        for i in 0..32 {
            bytes[2 + i] = (i as i8 - 16) as u8;
        }
        let mut out = [0f32; 32];
        Q8_0::dequantize(&bytes, &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, (i as f32 - 16.0) * 0.5);
        }
        testutil::check_dot_ref::<Q8_0>(&bytes, &[0.25; 32]);
        // quantizing the decoded values gives back the same bytes (they sit on the grid)
        // with amax = 127 * 0.5 the scale is exactly 0.5 and multiples of it sit on the grid
        let mut x: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) * 0.5).collect();
        x[31] = 63.5;
        let q = Q8_0::quantize(&x).unwrap();
        let mut y = [0f32; 32];
        Q8_0::dequantize(&q, &mut y).unwrap();
        assert_eq!(&y[..], &x[..]);
    }

    #[test]
    fn round_trip_and_dots() {
        let mut r = testutil::rng(8);
        let x = testutil::weights(&mut r, 32 * 64);
        let q = Q8_0::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Q8_0::dequantize(&q, &mut y).unwrap();
        // half a step of amax/127, plus f16 rounding of d (2^-11 relative, times 127 steps)
        let e = testutil::max_rel_block_err(&x, &y, 32);
        assert!(e <= 0.5 / 127.0 + 128.0 * 2f32.powi(-11) / 127.0, "err {e}");
        let a = testutil::weights(&mut r, x.len());
        testutil::check_dot_ref::<Q8_0>(&q, &a);
        let qa = Q8_0::quantize(&a).unwrap();
        let mut ad = vec![0f32; a.len()];
        Q8_0::dequantize(&qa, &mut ad).unwrap();
        let want = Q8_0::dot_ref(&q, &ad).unwrap();
        let got = Q8_0::dot_quantized(&q, &qa).unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }

    #[test]
    fn bad_lengths_are_errors() {
        let mut out = [0f32; 32];
        assert!(Q8_0::dequantize(&[0u8; 33], &mut out).is_err());
        assert!(Q8_0::dequantize(&[0u8; 68], &mut out).is_err());
        assert!(Q8_0::quantize(&[0f32; 31]).is_err());
        assert!(Q8_0::dot_quantized(&[0u8; 34], &[0u8; 68]).is_err());
    }
}
