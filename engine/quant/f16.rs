//! F16 (ggml type 1): IEEE binary16, 16 bits per weight. A "block" is one value;
//! widening to f32 is exact, so dequantization is bitwise-defined.

use super::{type_id, QuantFormat};

pub struct F16;

impl QuantFormat for F16 {
    const NAME: &'static str = "F16";
    const TYPE_ID: u32 = type_id::F16;
    const BLOCK_ELEMS: usize = 1;
    const BLOCK_BYTES: usize = 2;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
    }

    /// Round to nearest even (IEEE), like ggml's `GGML_FP32_TO_FP16`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        out.copy_from_slice(&half::f16::from_f32(x[0]).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        // 0x3C00 = 1.0, 0xC500 = -5.0, 0x0001 = 2^-24 (smallest subnormal), 0x7C00 = +inf
        let bytes = [0x00, 0x3C, 0x00, 0xC5, 0x01, 0x00, 0x00, 0x7C];
        let mut out = [0f32; 4];
        F16::dequantize(&bytes, &mut out).unwrap();
        assert_eq!(out, [1.0, -5.0, 2f32.powi(-24), f32::INFINITY]);
        assert_eq!(F16::quantize(&out).unwrap(), bytes);
        testutil::check_dot_ref::<F16>(&bytes[..6], &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn round_trip_error() {
        let mut r = testutil::rng(1);
        let x = testutil::weights(&mut r, 4096);
        let q = F16::quantize(&x).unwrap();
        let mut y = vec![0f32; x.len()];
        F16::dequantize(&q, &mut y).unwrap();
        for (a, b) in x.iter().zip(&y) {
            // 11 significant bits: relative error <= 2^-11 for normal values
            assert!((a - b).abs() <= a.abs() * 2f32.powi(-11) + 2f32.powi(-25));
        }
    }
}
