//! BF16 (ggml type 30): the top 16 bits of an IEEE binary32, 16 bits per weight.
//! value = f32::from_bits(bits << 16), exact and bitwise-defined.

use super::{type_id, QuantFormat};

pub struct Bf16;

impl QuantFormat for Bf16 {
    const NAME: &'static str = "BF16";
    const TYPE_ID: u32 = type_id::BF16;
    const BLOCK_ELEMS: usize = 1;
    const BLOCK_BYTES: usize = 2;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f32::from_bits((u16::from_le_bytes([block[0], block[1]]) as u32) << 16);
    }

    /// ggml's `ggml_compute_fp32_to_bf16`: NaNs become quiet NaNs, others round to nearest even.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let u = x[0].to_bits();
        let h = if u & 0x7fff_ffff > 0x7f80_0000 {
            (u >> 16) | 64
        } else {
            (u + (0x7fff + ((u >> 16) & 1))) >> 16
        };
        out.copy_from_slice(&(h as u16).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        // 0x3FC0 = 1.5, 0xC120 = -10.0
        let bytes = [0xC0, 0x3F, 0x20, 0xC1];
        let mut out = [0f32; 2];
        Bf16::dequantize(&bytes, &mut out).unwrap();
        assert_eq!(out, [1.5, -10.0]);
        assert_eq!(Bf16::quantize(&out).unwrap(), bytes);
        testutil::check_dot_ref::<Bf16>(&bytes, &[4.0, 0.5]);
    }

    #[test]
    fn rounds_to_nearest_even() {
        // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
        let q = Bf16::quantize(&[1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8)]).unwrap();
        assert_eq!(q, [0x80, 0x3F, 0x82, 0x3F]);
    }

    #[test]
    fn round_trip_error() {
        let mut r = testutil::rng(2);
        let x = testutil::weights(&mut r, 4096);
        let q = Bf16::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        Bf16::dequantize(&q, &mut y).unwrap();
        for (a, b) in x.iter().zip(&y) {
            // 8 significant bits
            assert!((a - b).abs() <= a.abs() * 2f32.powi(-8));
        }
    }
}
