//! Q8_K (ggml type 15): 256 values per 292-byte block, 9.125 bits per value. The activation
//! format ggml pairs with the K-quants and IQ4_XS; never stored in model files (gguf-py has no
//! decoder for it).

use super::{nearest_int, read_block, signed_absmax, type_id, write_block, Pod, QuantFormat, QK_K};

/// `a[i] = d * qs[i]`; `bsums[g] = sum(qs[16g .. 16g+16])` lets dots apply the K-quants' mins
/// per 16 values without touching the quants.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ8K {
    /// Block scale (f32, unlike the other formats).
    pub d: f32,
    /// Quants.
    pub qs: [i8; QK_K],
    /// Sums of quants in groups of 16.
    pub bsums: [i16; QK_K / 16],
}
const _: () = assert!(std::mem::size_of::<BlockQ8K>() == 292);
// SAFETY: repr(C), no padding (size assert), all fields accept any bits.
unsafe impl Pod for BlockQ8K {}

pub struct Q8K;

impl QuantFormat for Q8K {
    const NAME: &'static str = "Q8_K";
    const TYPE_ID: u32 = type_id::Q8_K;
    const BLOCK_ELEMS: usize = QK_K;
    const BLOCK_BYTES: usize = 292;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: BlockQ8K = read_block(block);
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = b.d * q as f32;
        }
    }

    /// ggml's `quantize_row_q8_K_ref`: `iscale = -127/max` (max = signed value of largest
    /// magnitude), `q = min(127, nearest_int(x * iscale))`, `d = 1/iscale`. An all-zero block
    /// gets d = 0 and zero sums.
    fn quantize_block(x: &[f32], out: &mut [u8]) {
        let max = signed_absmax(x);
        let mut b = BlockQ8K {
            d: 0.0,
            qs: [0; QK_K],
            bsums: [0; QK_K / 16],
        };
        if max != 0.0 {
            let iscale = -127.0 / max;
            for (q, &v) in b.qs.iter_mut().zip(x) {
                *q = nearest_int(iscale * v).min(127) as i8;
            }
            for (s, g) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
                *s = g.iter().map(|&q| q as i16).sum();
            }
            b.d = 1.0 / iscale;
        }
        write_block(&b, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil;

    #[test]
    fn hand_built_bytes() {
        let mut bytes = vec![0u8; 292];
        bytes[..4].copy_from_slice(&0.125f32.to_le_bytes());
        for i in 0..256 {
            bytes[4 + i] = (i as i32 - 128) as i8 as u8;
        }
        let mut out = [0f32; 256];
        Q8K::dequantize(&bytes, &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, (i as f32 - 128.0) * 0.125);
        }
        testutil::check_dot_ref::<Q8K>(&bytes, &[1.0; 256]);
    }

    #[test]
    fn quantize_sums_and_round_trip() {
        let mut r = testutil::rng(15);
        let mut x = testutil::weights(&mut r, 256 * 8);
        x[256..512].fill(0.0); // an all-zero block
        let q = Q8K::quantize(&x).unwrap();
        for blk in q.chunks_exact(292) {
            let b: BlockQ8K = read_block(blk);
            for (g, s) in b.qs.chunks_exact(16).zip(b.bsums) {
                assert_eq!(g.iter().map(|&v| v as i16).sum::<i16>(), s);
            }
        }
        let mut y = vec![0f32; x.len()];
        Q8K::dequantize(&q, &mut y).unwrap();
        assert!(y[256..512].iter().all(|&v| v == 0.0));
        // half a step of amax/127 (d is f32: no storage rounding)
        let e = testutil::max_rel_block_err(&x, &y, 256);
        assert!(e <= 0.5 / 127.0 + 1e-6, "err {e}");
    }
}
