//! The hyper-connection residual (`Residual::Hyper`: S streams of n per token), as llama.cpp's
//! `qwen4exp` runs it (`build_hc_mix`, `build_hc_combine`; /work/shared/design/hyper-connections.md
//! has the maths). The streams start as S copies of the embedding. A read site, before each part
//! and once more before the head:
//!   H' = H + a * y                                  (the previous site's pending write)
//!   Ĥ_s = H'_s / sqrt(mean(H'_s^2) + eps) * g_s     (per-stream RMS norm, stored gamma as is)
//!   lo = W_down vec(Ĥ);  gate = sigmoid(W_up silu(lo / S))
//!   mixed = (1/S) Σ_s gate_s ⊙ Ĥ_s                  (the part's input)
//!   a = 2 sigmoid(W_inj vec(Ĥ) / S)                 (this site's write weights; not at the head)
//! and the part's output y is written into every stream, H_s += a_s y, when the next site reads.
//! llama.cpp adds the write right after the part; holding it until the next read is the same
//! arithmetic (the device fuses it into the read) and keeps each site's inputs in one place.
//! Every dot product and sum of squares accumulates in f64 (`Mat::mul`, `rms_norm`), as does the
//! stream mean; values between steps are f32.

use super::ops::{rms_norm, sigmoid, silu, Mat};
use super::weights::RefHcMix;

/// A part's output waiting to be added into the streams: H_s += a_s * y.
pub struct Write {
    /// (S) the writing site's injection weights
    pub a: Vec<f32>,
    /// (n) the part's output
    pub y: Vec<f32>,
}

/// What a read site gives: the part's input, and the normed streams its injection reads.
pub struct Read {
    /// (n)
    pub mixed: Vec<f32>,
    /// (S, n): Ĥ
    pub normed: Vec<f32>,
}

/// The streams at the embedding: `x` (n) copied into each of `s` streams, (S, n).
pub fn embed(x: &[f32], s: usize) -> Vec<f32> {
    x.repeat(s)
}

/// H_s += a_s * y for every stream (f32, as ggml's mul then add: a_s * y rounds first).
pub fn combine(h: &mut [f32], w: &Write) {
    let n = w.y.len();
    for (hs, &a) in h.chunks_exact_mut(n).zip(&w.a) {
        for (v, &y) in hs.iter_mut().zip(&w.y) {
            *v += a * y;
        }
    }
}

/// One read site over `h` (S, n): adds `pending` into `h` in place (h becomes H'), then norms
/// and mixes the streams through `w`.
pub fn read(h: &mut [f32], pending: Option<&Write>, w: &RefHcMix, eps: f32) -> Read {
    let s = w.streams;
    let n = h.len() / s;
    assert_eq!(
        (w.gamma.len(), w.down.n_in, w.up.n_out),
        (h.len(), h.len(), h.len()),
        "reference hyper read: the weights are the loader's for these S streams of n"
    );
    if let Some(p) = pending {
        combine(h, p);
    }
    let normed: Vec<f32> = h
        .chunks_exact(n)
        .zip(w.gamma.chunks_exact(n))
        .flat_map(|(hs, g)| rms_norm(hs, g, eps))
        .collect();
    // ggml_scale by 1/S, then silu
    let inv_s = 1.0 / s as f32;
    let lo: Vec<f32> = w
        .down
        .mul(&normed)
        .iter()
        .map(|&v| silu(v * inv_s))
        .collect();
    let gate = w.up.mul(&lo);
    let mixed = (0..n)
        .map(|k| {
            let acc: f64 = (0..s)
                .map(|st| sigmoid(gate[st * n + k]) as f64 * normed[st * n + k] as f64)
                .sum();
            (acc / s as f64) as f32
        })
        .collect();
    Read { mixed, normed }
}

/// A site's write weights from its normed streams: a = 2 sigmoid((W_inj vec(Ĥ)) / S), W_inj
/// (S, S n).
pub fn inject(normed: &[f32], w_inj: &Mat) -> Vec<f32> {
    let inv_s = 1.0 / w_inj.n_out as f32;
    w_inj
        .mul(normed)
        .iter()
        .map(|&z| 2.0 * sigmoid(z * inv_s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::actq::ActRound;
    use crate::reference::ops::InRound;

    fn mat(n_out: usize, n_in: usize, data: Vec<f32>) -> Mat {
        assert_eq!(data.len(), n_out * n_in);
        Mat {
            n_out,
            n_in,
            data,
            round: InRound::Act(ActRound::None),
        }
    }

    /// S streams of n, rank r, every weight zero and gamma 1.
    fn zero_mix(s: usize, n: usize, r: usize) -> RefHcMix {
        RefHcMix {
            streams: s,
            gamma: vec![1.0; s * n],
            down: mat(r, s * n, vec![0.0; r * s * n]),
            up: mat(s * n, r, vec![0.0; s * n * r]),
        }
    }

    fn rms(x: &[f64]) -> f64 {
        (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64).sqrt()
    }

    #[test]
    fn zero_weights_read_half_the_mean_of_the_normed_streams() {
        let (s, n) = (3, 4);
        let mut h: Vec<f32> = (0..s * n).map(|i| i as f32 - 5.5).collect();
        let h0 = h.clone();
        let r = read(&mut h, None, &zero_mix(s, n, 2), 0.0);
        assert_eq!(h, h0, "no pending write: the streams are unchanged");
        // lo = 0, silu(0) = 0, gate = sigmoid(0) = 1/2 on every element
        for k in 0..n {
            let want: f64 = (0..s)
                .map(|st| {
                    let row: Vec<f64> =
                        h0[st * n..(st + 1) * n].iter().map(|&v| v as f64).collect();
                    0.5 * row[k] / rms(&row)
                })
                .sum::<f64>()
                / s as f64;
            assert!(
                (r.mixed[k] as f64 - want).abs() < 1e-6,
                "k {k}: {} vs {want}",
                r.mixed[k]
            );
        }
        // every normed stream has rms 1
        for st in r.normed.chunks_exact(n) {
            let row: Vec<f64> = st.iter().map(|&v| v as f64).collect();
            assert!((rms(&row) - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn a_zero_injection_is_a_plain_residual_add_into_every_stream() {
        let (s, n) = (4, 3);
        let x = [1.0f32, -2.0, 0.5];
        let mut h = embed(&x, s);
        assert_eq!(h.len(), s * n);
        let w_inj = mat(s, s * n, vec![0.0; s * s * n]);
        let r = read(&mut h, None, &zero_mix(s, n, 2), 1e-6);
        let a = inject(&r.normed, &w_inj);
        assert_eq!(a, vec![1.0; s], "2 sigmoid(0) = 1");
        let y = vec![0.25f32, 1.0, -3.0];
        let pending = Write { a, y: y.clone() };
        // the next site applies it before reading
        read(&mut h, Some(&pending), &zero_mix(s, n, 2), 1e-6);
        for st in h.chunks_exact(n) {
            let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
            assert_eq!(st, &want[..]);
        }
    }

    #[test]
    fn the_pending_write_scales_by_each_streams_weight() {
        let mut h = vec![1.0f32, 2.0, 10.0, 20.0]; // S 2, n 2
        combine(
            &mut h,
            &Write {
                a: vec![0.5, 2.0],
                y: vec![4.0, -1.0],
            },
        );
        assert_eq!(h, vec![3.0, 1.5, 18.0, 18.0]);
    }

    #[test]
    fn a_gated_read_matches_the_formula_by_hand() {
        // S 2, n 2, r 1: lo reads Ĥ[0][0] and Ĥ[1][1]; gamma differs per stream
        let (s, n) = (2usize, 2usize);
        let w = RefHcMix {
            streams: s,
            gamma: vec![1.0, 2.0, 0.5, 1.5],
            down: mat(1, 4, vec![1.0, 0.0, 0.0, -2.0]),
            up: mat(4, 1, vec![1.0, -1.0, 3.0, 0.0]),
        };
        let w_inj = mat(2, 4, vec![1.0, 1.0, 0.0, 0.0, 0.0, 0.0, -1.0, 2.0]);
        let mut h = vec![3.0f32, 4.0, -1.0, 1.0];
        let y = vec![1.0f32, -2.0];
        let pending = Write {
            a: vec![1.5, 0.5],
            y: y.clone(),
        };
        let r = read(&mut h, Some(&pending), &w, 0.0);
        let a = inject(&r.normed, &w_inj);

        // by hand, in f64
        let hp = [
            3.0 + 1.5 * 1.0,
            4.0 + 1.5 * -2.0,
            -1.0 + 0.5 * 1.0,
            1.0 + 0.5 * -2.0,
        ];
        assert_eq!(h, hp.map(|v| v as f32).to_vec(), "H' is written back");
        let g = [1.0, 2.0, 0.5, 1.5];
        let mut nh = [0f64; 4];
        for st in 0..s {
            let row = &hp[st * n..(st + 1) * n];
            let rs = 1.0 / rms(row);
            for k in 0..n {
                nh[st * n + k] = row[k] * rs * g[st * n + k];
            }
        }
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let lo = nh[0] - 2.0 * nh[3];
        let m = lo / s as f64;
        let act = m * sig(m);
        let gate = [1.0, -1.0, 3.0, 0.0].map(|u| sig(u * act));
        for k in 0..n {
            let want = (gate[k] * nh[k] + gate[n + k] * nh[n + k]) / s as f64;
            assert!(
                (r.mixed[k] as f64 - want).abs() < 1e-6,
                "mixed[{k}] {} vs {want}",
                r.mixed[k]
            );
        }
        let z = [nh[0] + nh[1], -nh[2] + 2.0 * nh[3]];
        for st in 0..s {
            let want = 2.0 * sig(z[st] / s as f64);
            assert!(
                (a[st] as f64 - want).abs() < 1e-6,
                "a[{st}] {} vs {want}",
                a[st]
            );
        }
    }

    #[test]
    fn scaling_a_stream_leaves_the_read_unchanged() {
        // the per-stream norm removes each stream's scale (eps 0)
        let (s, n) = (2, 3);
        let w = RefHcMix {
            streams: s,
            gamma: vec![1.0, 0.5, 2.0, 1.5, 1.0, 0.25],
            down: mat(1, 6, vec![0.3, -0.2, 0.1, 0.5, 0.0, -0.4]),
            up: mat(6, 1, vec![1.0, 2.0, -1.0, 0.5, -0.5, 1.5]),
        };
        let mut a = vec![1.0f32, -2.0, 3.0, 0.5, 0.25, -1.0];
        let mut b: Vec<f32> = a
            .iter()
            .enumerate()
            .map(|(i, &v)| if i < n { v * 8.0 } else { v * 0.25 })
            .collect();
        let (ra, rb) = (read(&mut a, None, &w, 0.0), read(&mut b, None, &w, 0.0));
        for (x, y) in ra.mixed.iter().zip(&rb.mixed) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
    }
}
