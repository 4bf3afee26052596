//! F32 (ggml type 0): plain little-endian IEEE binary32, 32 bits per weight.
//! A "block" is one value; dequantization is a bitwise copy.

use super::{type_id, QuantFormat};

pub struct F32;

impl QuantFormat for F32 {
    const NAME: &'static str = "F32";
    const TYPE_ID: u32 = type_id::F32;
    const BLOCK_ELEMS: usize = 1;
    const BLOCK_BYTES: usize = 4;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
    }

    fn quantize_block(x: &[f32], out: &mut [u8]) {
        out.copy_from_slice(&x[0].to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        // 1.5 = 0x3FC00000, -2.0 = 0xC0000000
        let bytes = [0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x00, 0xC0];
        let mut out = [0f32; 2];
        F32::dequantize(&bytes, &mut out).unwrap();
        assert_eq!(out, [1.5, -2.0]);
        assert_eq!(F32::quantize(&out).unwrap(), bytes);
        testutil::check_dot_ref::<F32>(&bytes, &[2.0, 0.25]);
        assert_eq!(F32::dot_ref(&bytes, &[2.0, 0.25]).unwrap(), 2.5);
    }

    #[test]
    fn bad_lengths_are_errors() {
        let mut out = [0f32; 1];
        assert!(F32::dequantize(&[0u8; 5], &mut out).is_err());
        assert!(F32::dequantize(&[0u8; 8], &mut out).is_err());
    }
}
