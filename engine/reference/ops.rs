//! Scalar building blocks of the reference forward: every dot product and every sum of squares
//! accumulates in f64; values between steps are f32, as on the device.

use crate::kernels::actq::{self, ActRound};

/// A dequantized weight matrix (n_out, n_in), row-major.
pub struct Mat {
    pub n_out: usize,
    pub n_in: usize,
    pub data: Vec<f32>,
    /// How the input is rounded first (llama.cpp's 8-bit activations, or none).
    pub round: ActRound,
}

impl Mat {
    /// y = W round(x) for one activation row.
    pub fn mul(&self, x: &[f32]) -> Vec<f32> {
        assert_eq!(
            x.len(),
            self.n_in,
            "reference matmul: caller passes an n_in row"
        );
        let xr = actq::reference(self.round, x);
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

/// Rounds through f16, as the device KV cache stores keys and values.
pub fn f16_round(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect()
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
    fn attention_over_one_key_returns_its_value() {
        let q = vec![1.0, 0.0];
        let k = vec![vec![0.5, 0.5]];
        let v = vec![vec![7.0, -2.0]];
        assert_eq!(attention(&q, &k, &v, 0, 0, 1, 1, 2, 1.0), vec![7.0, -2.0]);
    }
}
