//! Scalar building blocks of the reference forward: every dot product and every sum of squares
//! accumulates in f64; values between steps are f32, as on the device.

use crate::kernels::actq::{self, ActRound};
use crate::quant::type_id;

/// How a matmul's input row is rounded before the dot products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InRound {
    /// llama.cpp's 8-bit activation blocks, or none (`ActRound`, the engine's own rule).
    Act(ActRound),
    /// Through f16 / bf16: what llama.cpp's CPU backend does to the activations of an F16 / BF16
    /// weight (ggml's `vec_dot_type` for those types is the weight's own type).
    F16,
    Bf16,
}

impl InRound {
    /// ggml's CPU `vec_dot_type` for a weight of type `t`: F32 -> F32 (no rounding), F16 -> F16,
    /// BF16 -> BF16, the legacy quants -> Q8_0 blocks, the K-quants -> Q8_K blocks.
    pub fn ggml_cpu(t: u32) -> InRound {
        match t {
            type_id::F16 => InRound::F16,
            type_id::BF16 => InRound::Bf16,
            _ => InRound::Act(ActRound::for_type(t)),
        }
    }

    pub fn apply(self, x: &[f32]) -> Vec<f32> {
        match self {
            InRound::Act(a) => actq::reference(a, x),
            InRound::F16 => f16_round(x),
            InRound::Bf16 => x
                .iter()
                .map(|&v| half::bf16::from_f32(v).to_f32())
                .collect(),
        }
    }
}

/// A dequantized weight matrix (n_out, n_in), row-major.
pub struct Mat {
    pub n_out: usize,
    pub n_in: usize,
    pub data: Vec<f32>,
    /// How the input is rounded first (llama.cpp's activations, or none).
    pub round: InRound,
}

impl Mat {
    /// y = W round(x) for one activation row.
    pub fn mul(&self, x: &[f32]) -> Vec<f32> {
        assert_eq!(
            x.len(),
            self.n_in,
            "reference matmul: caller passes an n_in row"
        );
        let xr = self.round.apply(x);
        self.data
            .chunks_exact(self.n_in)
            .map(|row| dot(row, &xr) as f32)
            .collect()
    }
}

pub fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// x / sqrt(mean(x^2) + eps) * w.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ss: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let inv = 1.0 / (ss / x.len() as f64 + eps as f64).sqrt();
    x.iter()
        .zip(w)
        .map(|(&v, &g)| (v as f64 * inv * g as f64) as f32)
        .collect()
}

/// Rotates each head of `x` (n_head, head_dim) in place by `pos * freq[i]` on pair i.
pub fn rope(x: &mut [f32], head_dim: usize, n_rot: usize, pos: f64, base: f32, neox: bool) {
    let half = n_rot / 2;
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let theta = pos * (base as f64).powf(-2.0 * i as f64 / n_rot as f64);
            let (s, c) = theta.sin_cos();
            let (a, b) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (x0, x1) = (head[a] as f64, head[b] as f64);
            head[a] = (x0 * c - x1 * s) as f32;
            head[b] = (x0 * s + x1 * c) as f32;
        }
    }
}

/// The IMRoPE section (0 = t, 1 = h, 2 = w, 3 = e) that rotated pair `i` takes its position
/// from, as ggml's `ggml_mrope_cache_init` assigns it for `GGML_ROPE_TYPE_IMROPE`: the sector
/// i mod (s0 + s1 + s2 + s3) interleaves t, h, w (sector mod 3 = 0, 1, 2) while that section has
/// pairs left (sector < 3 s), and every other sector is e's.
pub fn imrope_section(i: usize, sections: [u32; 4]) -> usize {
    let s = sections.map(|v| v as usize);
    // the arch refuses s0 + s1 + s2 == 0; max(1) only keeps a bad table from dividing by zero
    let sector = i % s.iter().sum::<usize>().max(1);
    match sector % 3 {
        1 if sector < 3 * s[1] => 1,
        2 if sector < 3 * s[2] => 2,
        0 if sector < 3 * s[0] => 0,
        _ => 3,
    }
}

/// IMRoPE (interleaved multi-section RoPE) of each head of `x` (n_head, head_dim) in place, NEOX
/// pairs (i, i + n_rot/2): pair i turns by `pos[imrope_section(i)] * base^(-2i / n_rot)`.
/// A text token's positions are (p, p, p, 0) (llama.cpp expands a token's position so), so the
/// pairs of the e section keep their values.
pub fn rope_sections(
    x: &mut [f32],
    head_dim: usize,
    n_rot: usize,
    pos: [f64; 4],
    sections: [u32; 4],
    base: f32,
) {
    let half = n_rot / 2;
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let p = pos[imrope_section(i, sections)];
            let theta = p * (base as f64).powf(-2.0 * i as f64 / n_rot as f64);
            let (s, c) = theta.sin_cos();
            let (x0, x1) = (head[i] as f64, head[i + half] as f64);
            head[i] = (x0 * c - x1 * s) as f32;
            head[i + half] = (x0 * s + x1 * c) as f32;
        }
    }
}

/// Rounds through f16, as the device KV cache stores keys and values.
pub fn f16_round(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect()
}

pub fn sigmoid(g: f32) -> f32 {
    (1.0 / (1.0 + (-(g as f64)).exp())) as f32
}

pub fn silu(g: f32) -> f32 {
    let g = g as f64;
    (g / (1.0 + (-g).exp())) as f32
}

/// GELU with the tanh approximation (Gemma's `gelu_pytorch_tanh`, llama.cpp's ggml_gelu).
pub fn gelu_tanh(g: f32) -> f32 {
    let g = g as f64;
    let k = (2.0 / std::f64::consts::PI).sqrt();
    (0.5 * g * (1.0 + (k * (g + 0.044715 * g * g * g)).tanh())) as f32
}

/// Causal attention of one query row over cached keys/values `[lo, pos]`.
/// q: (n_head, hd); keys/values: per position (n_kv_head, hd). Returns (n_head, hd).
#[allow(clippy::too_many_arguments)] // plain scalar reference: the shapes are the arguments
pub fn attention(
    q: &[f32],
    keys: &[Vec<f32>],
    values: &[Vec<f32>],
    lo: usize,
    pos: usize,
    n_head: usize,
    n_kv_head: usize,
    hd: usize,
    scale: f32,
) -> Vec<f32> {
    let group = n_head / n_kv_head;
    let mut out = vec![0f32; n_head * hd];
    for h in 0..n_head {
        let kvh = h / group;
        let qh = &q[h * hd..(h + 1) * hd];
        let scores: Vec<f64> = (lo..=pos)
            .map(|j| dot(qh, &keys[j][kvh * hd..(kvh + 1) * hd]) * scale as f64)
            .collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        for d in 0..hd {
            let acc: f64 = (lo..=pos)
                .zip(&e)
                .map(|(j, w)| w * values[j][kvh * hd + d] as f64)
                .sum();
            out[h * hd + d] = (acc / sum) as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_of_constant_row_is_the_weight() {
        let y = rms_norm(&[3.0; 4], &[1.0, 2.0, 3.0, 4.0], 0.0);
        for (a, b) in y.iter().zip([1.0, 2.0, 3.0, 4.0]) {
            assert!((a - b).abs() < 1e-6);
        }
    }

    #[test]
    fn rope_pairs_differ_between_styles_and_keep_norms() {
        let x: Vec<f32> = (0..8).map(|i| i as f32 + 1.0).collect();
        let (mut a, mut b) = (x.clone(), x.clone());
        rope(&mut a, 8, 8, 3.0, 10000.0, false);
        rope(&mut b, 8, 8, 3.0, 10000.0, true);
        // Pair 0 of the llama style is (0, 1), of NEOX (0, 4): norms of those pairs are kept.
        let n = |v: &[f32], i, j| (v[i] as f64).hypot(v[j] as f64);
        assert!((n(&a, 0, 1) - n(&x, 0, 1)).abs() < 1e-5);
        assert!((n(&b, 0, 4) - n(&x, 0, 4)).abs() < 1e-5);
        assert!((a[0] - b[0]).abs() > 1e-3);
        // Position 0 is the identity.
        let mut c = x.clone();
        rope(&mut c, 8, 8, 0.0, 10000.0, true);
        assert_eq!(c, x);
    }

    #[test]
    fn imrope_sections_interleave_t_h_w_and_leave_the_rest_to_e() {
        // tiny's [2, 1, 1, 0]: sectors 0 t, 1 h, 2 w, 3 t again (3 < 3 * 2); no e pair
        let tiny: Vec<usize> = (0..4).map(|i| imrope_section(i, [2, 1, 1, 0])).collect();
        assert_eq!(tiny, [0, 1, 2, 0]);
        // [1, 1, 1, 1]: sector 3 has no t/h/w pair left, so it is e's; the pattern repeats
        let one: Vec<usize> = (0..8).map(|i| imrope_section(i, [1, 1, 1, 1])).collect();
        assert_eq!(one, [0, 1, 2, 3, 0, 1, 2, 3]);
        // Qwen3-VL's [24, 20, 20, 0] over 64 pairs: 61 and 62 fall past h's and w's 3 * 20
        let vl: Vec<usize> = (0..64)
            .filter(|&i| imrope_section(i, [24, 20, 20, 0]) == 3)
            .collect();
        assert_eq!(vl, [61, 62]);
    }

    #[test]
    fn imrope_text_positions_leave_e_pairs_alone_and_match_neox_elsewhere() {
        let (hd, n_rot) = (16, 8);
        let x: Vec<f32> = (0..2 * hd).map(|i| (i as f32 * 0.37).sin() + 0.5).collect();
        let sections = [1, 1, 1, 1];
        let mut a = x.clone();
        rope_sections(&mut a, hd, n_rot, [5.0, 5.0, 5.0, 0.0], sections, 10000.0);
        let mut b = x.clone();
        rope(&mut b, hd, n_rot, 5.0, 10000.0, true);
        let half = n_rot / 2;
        for head in 0..2 {
            let o = head * hd;
            for i in 0..half {
                let pair = [o + i, o + i + half];
                if i == 3 {
                    // e section at position 0: the identity, bit for bit
                    assert_eq!(pair.map(|j| a[j]), pair.map(|j| x[j]), "pair {i}");
                } else {
                    // t/h/w all at p: the plain NEOX rotation
                    assert_eq!(pair.map(|j| a[j]), pair.map(|j| b[j]), "pair {i}");
                    assert_ne!(pair.map(|j| a[j]), pair.map(|j| x[j]), "pair {i} turns");
                }
            }
            // dims past n_rot are not rotated
            assert_eq!(a[o + n_rot..o + hd], x[o + n_rot..o + hd]);
        }
        // the same positions in all four sections are NEOX RoPE exactly
        let mut c = x.clone();
        rope_sections(&mut c, hd, n_rot, [5.0; 4], sections, 10000.0);
        assert_eq!(c, b);
    }

    #[test]
    fn input_rounding_follows_ggml_vec_dot_types() {
        assert_eq!(
            InRound::ggml_cpu(type_id::F32),
            InRound::Act(ActRound::None)
        );
        assert_eq!(InRound::ggml_cpu(type_id::F16), InRound::F16);
        assert_eq!(InRound::ggml_cpu(type_id::BF16), InRound::Bf16);
        assert_eq!(
            InRound::ggml_cpu(type_id::Q8_0),
            InRound::Act(ActRound::Q8Block32)
        );
        // 1 + 2^-10 is an f16 but not a bf16 (8 bits of mantissa): bf16 rounds it to 1
        let x = [1.0 + 1.0 / 1024.0, 3.0];
        assert_eq!(InRound::F16.apply(&x), x.to_vec());
        assert_eq!(InRound::Bf16.apply(&x), vec![1.0, 3.0]);
        // 1 + 2^-12 is below f16's precision
        assert_eq!(InRound::F16.apply(&[1.0 + 1.0 / 4096.0]), vec![1.0]);
    }

    #[test]
    fn attention_over_one_key_returns_its_value() {
        let q = vec![1.0, 0.0];
        let k = vec![vec![0.5, 0.5]];
        let v = vec![vec![7.0, -2.0]];
        assert_eq!(attention(&q, &k, &v, 0, 0, 1, 1, 2, 1.0), vec![7.0, -2.0]);
    }
}
