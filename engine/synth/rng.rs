//! Seeded random weights that are the same bytes on every build and platform: SplitMix64
//! (the sampler's generator) and only integer and exactly rounded float arithmetic, no
//! transcendental functions (libm's `ln`/`cos` may differ between platforms in the last bit, which
//! would break the byte-identical files the tests rely on). Each tensor draws from its own
//! stream, derived from (seed, tensor name), so one tensor's values do not depend on which
//! tensors come before it (a fused gate_up file holds the same numbers as the unfused one).

use crate::sampling::SplitMix64;

/// FNV-1a over the name: a fixed, documented hash (std's `Hasher`s promise no stability).
fn fnv1a(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A tensor's random stream.
pub struct Stream(SplitMix64);

impl Stream {
    pub fn new(seed: u64, name: &str) -> Stream {
        // one SplitMix step decorrelates nearby seeds before the name's hash is mixed in
        let mut s = SplitMix64::new(seed);
        Stream(SplitMix64::new(s.next_u64() ^ fnv1a(name)))
    }

    /// An approximately standard normal value: the sum of 8 uniform 16-bit fractions (two
    /// draws), centred and scaled to variance 1 (Irwin-Hall; bounded by +-4.9).
    pub fn normal(&mut self) -> f32 {
        let mut sum = 0u32;
        for _ in 0..2 {
            let x = self.0.next_u64();
            for k in 0..4 {
                sum += ((x >> (16 * k)) & 0xffff) as u32;
            }
        }
        // each fraction (u + 0.5) / 65536 has mean 1/2 and variance ~1/12: 8 of them, mean 4
        let centred = (f64::from(sum) + 4.0) / 65536.0 - 4.0;
        // sqrt(12 / 8), spelled out so no float function is involved
        (centred * 1.224_744_871_391_589) as f32
    }

    /// `n` values N(0, std^2).
    pub fn normals(&mut self, n: usize, std: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal() * std).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_and_streams() {
        let mut s = Stream::new(7, "blk.0.attn_q.weight");
        let v = s.normals(200_000, 1.0);
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
        let var = v
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / v.len() as f64;
        println!("mean {mean:.5} variance {var:.5}");
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "mean {mean} var {var}"
        );
        assert!(v.iter().all(|x| x.abs() < 4.9));
        let again = Stream::new(7, "blk.0.attn_q.weight").normals(4, 1.0);
        assert_eq!(&v[..4], &again[..], "same seed and name, same values");
        let other = Stream::new(7, "blk.0.attn_k.weight").normals(4, 1.0);
        assert_ne!(&v[..4], &other[..], "another name, another stream");
        let seed = Stream::new(8, "blk.0.attn_q.weight").normals(4, 1.0);
        assert_ne!(&v[..4], &seed[..], "another seed, another stream");
    }
}
