//! F16 (ggml type 1): IEEE binary16, 16 bits per weight. A "block" is one value;
//! widening to f32 is exact, so dequantization is bitwise-defined (NaN payloads included).

use super::{type_id, QuantFormat};

pub struct F16;

/// Exact binary16 -> binary32 widening that keeps NaN payloads bit for bit (numpy does; the
/// `half` crate and x86 F16C set the quiet bit of signaling NaNs), so F16 tensors decode
/// bitwise like gguf-py for every bit pattern.
#[inline]
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x03FF) as u32;
    match exp {
        // zero and subnormals: man * 2^-24 is exact in f32
        0 => f32::from_bits(sign | (man as f32 * 2f32.powi(-24)).to_bits()),
        // infinities and NaNs, payload shifted into place unchanged
        31 => f32::from_bits(sign | 0x7F80_0000 | (man << 13)),
        // normal: rebias the exponent from 15 to 127
        _ => f32::from_bits(sign | ((exp + 112) << 23) | (man << 13)),
    }
}

impl QuantFormat for F16 {
    const NAME: &'static str = "F16";
    const TYPE_ID: u32 = type_id::F16;
    const BLOCK_ELEMS: usize = 1;
    const BLOCK_BYTES: usize = 2;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f16_bits_to_f32(u16::from_le_bytes([block[0], block[1]]));
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
    fn nan_payloads_are_kept() {
        // signaling NaN 0x7C01 keeps its quiet bit clear; quiet NaN 0xFE01 keeps sign and payload
        assert_eq!(f16_bits_to_f32(0x7C01).to_bits(), 0x7F80_2000);
        assert_eq!(f16_bits_to_f32(0xFE01).to_bits(), 0xFFC0_2000);
        for h in 0..=u16::MAX {
            let f = f16_bits_to_f32(h);
            if !f.is_nan() {
                assert_eq!(f, half::f16::from_bits(h).to_f32());
            }
        }
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
