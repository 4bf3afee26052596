//! Rotary position embedding (`sycl/kernels/rope.cpp`), in place on Q or K rows.
//!
//! Pair i < n_rot/2 of every head rotates by pos * freq[i], freq[i] = base^(-2i / n_rot):
//! `RopeMode::Norm` (llama, SmolLM2) pairs elements (2i, 2i+1); `RopeMode::Neox` (Gemma 3) pairs
//! (i, i + n_rot/2). Elements past n_rot pass through.
//!
//! The frequency table is made on the host in f64 and rounded once to f32 (`rope_freqs`): that
//! f32 table is the definition both the kernel and the reference use (the device `pow` is only
//! 16-ulp accurate). The kernel keeps the angle pos * freq exact as hi + lo with an fma, so large
//! positions (5000+) lose no accuracy to the f32 product. Element-wise: multi-row calls are
//! bitwise the one-row calls.
//!
//! qwen4exp's IMROPE with text positions is NEOX on another table (`RopeTable::with_sections`,
//! `imrope_freqs`): the pairs ggml gives the 4th position (always 0 for text) get frequency 0,
//! which the kernel turns into the identity, bit for bit.

use super::float_args::{ensure, holds, int, prod, round_up};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "rope";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeMode {
    /// llama: pairs (2i, 2i+1).
    Norm,
    /// GPT-NeoX / Gemma: pairs (i, i + n_rot/2).
    Neox,
}

/// freq[i] = base^(-2i / n_rot) for i < n_rot/2, computed in f64 and rounded to f32.
pub fn rope_freqs(base: f64, n_rot: usize) -> Vec<f32> {
    (0..n_rot / 2)
        .map(|i| base.powf(-2.0 * i as f64 / n_rot as f64) as f32)
        .collect()
}

/// llama.cpp's IMROPE (interleaved multi-section RoPE, qwen3vl / qwen4exp) for text positions:
/// every token's four positions are [p, p, p, 0], so pair i (sector = i % (s0+s1+s2+s3)) turns by
/// p * base^(-2i / n_rot) when ggml_mrope_cache_init gives it one of the first three positions,
/// (sector % 3 == 0 && sector < 3 s0) || (sector % 3 == 1 && sector < 3 s1) ||
/// (sector % 3 == 2 && sector < 3 s2), and by 0 * ... otherwise (the 4th position): frequency 0,
/// the identity. Rotated pairs get `rope_freqs`'s values, bit for bit; the rotation is NEOX's.
/// `sections` must not sum to 0 (ggml asserts one of the first three is positive).
pub fn imrope_freqs(base: f64, n_rot: usize, sections: [u32; 4]) -> Vec<f32> {
    let total: u64 = sections.iter().map(|&s| s as u64).sum();
    let s = sections.map(|v| v as u64);
    rope_freqs(base, n_rot)
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let sector = i as u64 % total.max(1);
            let text = (sector % 3 == 0 && sector < 3 * s[0])
                || (sector % 3 == 1 && sector < 3 * s[1])
                || (sector % 3 == 2 && sector < 3 * s[2]);
            if text {
                f
            } else {
                0.0
            }
        })
        .collect()
}

/// The frequency table of one (base, n_rot) on the device; Gemma 3 needs two (1e6 and 1e4).
pub struct RopeTable {
    freq: DeviceBuffer<f32>, // (n_rot / 2)
    base: f64,
    n_rot: usize,
    sections: Option<[u32; 4]>,
}

impl RopeTable {
    pub fn new(q: &Queue, base: f64, n_rot: usize) -> Result<RopeTable> {
        ensure(OP, n_rot >= 2 && n_rot % 2 == 0, || {
            format!("n_rot {n_rot} must be even and >= 2")
        })?;
        ensure(OP, base.is_finite() && base > 1.0, || {
            format!("freq base {base} must be finite and > 1")
        })?;
        Ok(RopeTable {
            freq: q.upload(&rope_freqs(base, n_rot))?,
            base,
            n_rot,
            sections: None,
        })
    }
    /// The IMROPE table for text positions (`imrope_freqs`), for `Rope::run` with
    /// `RopeMode::Neox` (qwen4exp's full-attention q and k; its GGUF rope.dimension_sections).
    pub fn with_sections(
        q: &Queue,
        base: f64,
        n_rot: usize,
        sections: [u32; 4],
    ) -> Result<RopeTable> {
        ensure(OP, sections[..3].iter().any(|&s| s > 0), || {
            format!("rope sections {sections:?}: one of the first three must be positive")
        })?;
        let plain = RopeTable::new(q, base, n_rot)?;
        Ok(RopeTable {
            freq: q.upload(&imrope_freqs(base, n_rot, sections))?,
            sections: Some(sections),
            ..plain
        })
    }
    pub fn base(&self) -> f64 {
        self.base
    }
    pub fn n_rot(&self) -> usize {
        self.n_rot
    }
    /// The IMROPE sections of a `with_sections` table, None for a plain one.
    pub fn sections(&self) -> Option<[u32; 4]> {
        self.sections
    }
    /// The device table (n_rot / 2).
    pub fn freq(&self) -> &DeviceBuffer<f32> {
        &self.freq
    }
}

/// The RoPE kernels, built once per context.
pub struct Rope {
    norm: Kernel,
    neox: Kernel,
}

impl Rope {
    pub fn new(ctx: &Context) -> Result<Rope> {
        let m = ctx.module(&kernels::ROPE, &[])?;
        Ok(Rope {
            norm: m.kernel("rope_norm")?,
            neox: m.kernel("rope_neox")?,
        })
    }

    /// Rotates `t` rows of `n_head` heads in place; rotated dims = table.n_rot() <= head_dim.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        mode: RopeMode,
        x: &DeviceBuffer<f32>,   // (t, n_head * head_dim), in place
        pos: &DeviceBuffer<i32>, // (t)
        table: &RopeTable,
        t: usize,
        n_head: usize,
        head_dim: usize,
    ) -> Result<()> {
        ensure(OP, table.n_rot <= head_dim, || {
            format!("n_rot {} exceeds head_dim {head_dim}", table.n_rot)
        })?;
        holds(OP, "x", x, prod(OP, &[t, n_head, head_dim])?)?;
        holds(OP, "pos", pos, t)?;
        let pairs = prod(OP, &[t, n_head, table.n_rot / 2])?;
        if pairs == 0 {
            return Ok(());
        }
        let k = match mode {
            RopeMode::Norm => &self.norm,
            RopeMode::Neox => &self.neox,
        };
        q.launch(
            k,
            NdRange::d1(round_up(pairs, 64), 64),
            &[
                Arg::buf(x),
                Arg::buf(pos),
                Arg::buf(&table.freq),
                Arg::i32(int(OP, "t", t)?),
                Arg::i32(int(OP, "n_head", n_head)?),
                Arg::i32(int(OP, "head_dim", head_dim)?),
                Arg::i32(int(OP, "n_rot", table.n_rot)?),
            ],
        )
    }
}

/// Reference: rows (t, n_head * head_dim) rotated in f64 with angle pos * freq (freq as f32,
/// the table the kernel gets).
pub fn reference(
    mode: RopeMode,
    x: &[f32],    // (t, n_head * head_dim)
    pos: &[i32],  // (t)
    freq: &[f32], // (n_rot / 2)
    n_head: usize,
    head_dim: usize,
) -> Vec<f64> {
    let half = freq.len();
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for (t, &p) in pos.iter().enumerate() {
        for h in 0..n_head {
            let r = &mut out[(t * n_head + h) * head_dim..(t * n_head + h + 1) * head_dim];
            for (i, &f) in freq.iter().enumerate() {
                let (a, b) = match mode {
                    RopeMode::Norm => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + half),
                };
                let (s, c) = (p as f64 * f as f64).sin_cos();
                let (x0, x1) = (r[a], r[b]);
                r[a] = x0 * c - x1 * s;
                r[b] = x0 * s + x1 * c;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml_mrope_cache_init (ggml-cpu/ops.cpp) transcribed for is_imrope, one token with
    /// positions [p, p, p, 0]: theta per pair, the four thetas advanced by f32 products with
    /// theta_scale = base^(-2 / n_rot) as ggml does, picked by ggml's if-chain (h, w, t, else e).
    fn ggml_imrope_theta(base: f32, n_rot: usize, s: [i32; 4], p: f32) -> Vec<f32> {
        let theta_scale = base.powf(-2.0 / n_rot as f32);
        let sect_dims = s[0] + s[1] + s[2] + s[3];
        let (mut t, mut h, mut w, mut e) = (p, p, p, 0.0f32);
        let mut out = Vec::new();
        for i0 in (0..n_rot).step_by(2) {
            let sector = (i0 / 2) as i32 % sect_dims;
            let theta = if sector % 3 == 1 && sector < 3 * s[1] {
                h
            } else if sector % 3 == 2 && sector < 3 * s[2] {
                w
            } else if sector % 3 == 0 && sector < 3 * s[0] {
                t
            } else {
                e
            };
            out.push(theta);
            t *= theta_scale;
            w *= theta_scale;
            h *= theta_scale;
            e *= theta_scale;
        }
        out
    }

    /// imrope_freqs against the transcription at position 1 (theta = the frequency): the same
    /// identity pairs exactly, the rest within the f32 drift of ggml's running product.
    fn check(base: f64, n_rot: usize, sections: [u32; 4]) -> usize {
        let ours = imrope_freqs(base, n_rot, sections);
        let s = sections.map(|v| v as i32);
        let theirs = ggml_imrope_theta(base as f32, n_rot, s, 1.0);
        assert_eq!(ours.len(), theirs.len());
        let (mut identity, mut max_rel) = (0, 0f32);
        for (i, (&a, &b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(
                a == 0.0,
                b == 0.0,
                "pair {i}: {a} vs ggml {b} ({sections:?})"
            );
            if a == 0.0 {
                identity += 1;
            } else {
                let rel = ((a - b) / b).abs();
                // ggml's running f32 product drifts by about one rounding per pair
                assert!(rel < 3e-5, "pair {i}: {a} vs ggml {b}, rel {rel:e}");
                max_rel = max_rel.max(rel);
            }
        }
        println!(
            "imrope {sections:?} n_rot {n_rot}: {identity} identity pairs, max rel {max_rel:.2e}"
        );
        identity
    }

    #[test]
    fn imrope_freqs_follow_ggml() {
        // Qwen3.5 / qwen4exp's [11, 11, 10, 0] over 64 rotated dims: every pair turns, and the
        // table is the plain NEOX one bit for bit
        assert_eq!(check(1e7, 64, [11, 11, 10, 0]), 0);
        assert_eq!(imrope_freqs(1e7, 64, [11, 11, 10, 0]), rope_freqs(1e7, 64));
        // sectors 5, 6, 7 of every 8 fall to the 4th position: 6 identity pairs of 16
        assert_eq!(check(1e4, 32, [2, 2, 1, 3]), 6);
        let f = imrope_freqs(1e4, 32, [2, 2, 1, 3]);
        let zero: Vec<usize> = (0..16).filter(|&i| f[i] == 0.0).collect();
        assert_eq!(zero, vec![5, 6, 7, 13, 14, 15]);
        // sections shorter than n_rot / 2 wrap around; an empty first section
        assert_eq!(check(1e6, 128, [3, 4, 5, 0]), 5); // sector 9 of 12
        assert_eq!(check(1e6, 64, [0, 8, 8, 16]), 16);
        // the plain table is untouched by the new one
        assert_eq!(rope_freqs(1e4, 4), vec![1.0, 0.01]);
    }
}
