//! Q8_1 (ggml type 9): 32 values per 36-byte block, 9 bits per value. An activation format
//! (ggml pairs it with Q4_1/Q5_1 weights); never stored in model files. Note gguf-py 0.19's
//! `GGML_QUANT_SIZES` still lists the old 40-byte f32 layout; ggml's current struct is 36 bytes.

use super::q8_0::quantize_q8_32;
use super::{read_block, type_id, write_block, Pod, QuantFormat};
use half::f16;

pub const QK8_1: usize = 32;

/// `a[i] = d * qs[i]`; `s = d * sum(qs)` lets the min term of Q4_1/Q5_1 dots skip the quants.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ8_1 {
    /// Block scale.
    pub d: f16,
    /// `d * sum(qs)`, rounded to f16.
    pub s: f16,
    /// Quants.
    pub qs: [i8; QK8_1],
}
const _: () = assert!(std::mem::size_of::<BlockQ8_1>() == 36);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ8_1 {}

pub struct Q8_1;

impl QuantFormat for Q8_1 {
    const NAME: &'static str = "Q8_1";
    const TYPE_ID: u32 = type_id::Q8_1;
    const BLOCK_ELEMS: usize = QK8_1;
    const BLOCK_BYTES: usize = 36;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ8_1 = read_block(block);
        let d = b.d.to_f32();
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }

    /// ggml's `quantize_row_q8_1_ref`: as Q8_0, plus `s = f16(sum(qs) * d)`.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let (d, qs, sum) = quantize_q8_32(x);
        write_block(
            &BlockQ8_1 {
                d: f16::from_f32(d),
                s: f16::from_f32(sum as f32 * d),
                qs,
            },
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut bytes = vec![0u8; 36];
        bytes[..2].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
        bytes[2..4].copy_from_slice(&f16::from_f32(123.0).to_le_bytes()); // s: not used to decode
        for i in 0..32 {
            bytes[4 + i] = (3 * i as i32 - 40) as i8 as u8;
        }
        let mut out = [0f32; 32];
        Q8_1::dequantize(&bytes, &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, (3.0 * i as f32 - 40.0) * 0.25);
        }
        testutil::check_dot_ref::<Q8_1>(&bytes, &[-1.5; 32]);
    }

    #[test]
    fn quantize_fills_s_and_round_trips() {
        let mut r = testutil::rng(9);
        let x = testutil::weights(&mut r, 32 * 32);
        let q = Q8_1::quantize(&x).unwrap();
        for blk in q.chunks_exact(36) {
            let b: BlockQ8_1 = read_block(blk);
            let sum: i32 = b.qs.iter().map(|&v| v as i32).sum();
            // s was rounded from f32 (sum * d_f32); compare against f16 d within f16 rounding
            let want = sum as f32 * b.d.to_f32();
            assert!((b.s.to_f32() - want).abs() <= want.abs() * 2f32.powi(-10) + 1e-6);
        }
        let mut y = vec![0f32; x.len()];
        Q8_1::dequantize(&q, &mut y).unwrap();
        let e = testutil::max_rel_block_err(&x, &y, 32);
        assert!(e <= 0.5 / 127.0 + 128.0 * 2f32.powi(-11) / 127.0, "err {e}");
        // same d/qs as Q8_0
        let q0 = crate::quant::Q8_0::quantize(&x).unwrap();
        for (a, b) in q.chunks_exact(36).zip(q0.chunks_exact(34)) {
            assert_eq!(&a[..2], &b[..2]);
            assert_eq!(&a[4..], &b[2..]);
        }
    }
}
