//! The mixture-of-experts FFN (`Ffn::Moe`), as llama.cpp's `build_moe_ffn` runs `qwen4exp`'s
//! (softmax gating, renormalised, no weight scale, no clamp on the GLU): the router's logits
//! W_r h (f64 dots); p = softmax(logits); the `n_used` largest p, largest first, ties to the lower
//! id (ggml's argsort_top_k sorts descending); their p divided by their sum clamped below at
//! `MOE_WEIGHT_SUM_MIN`; each chosen expert's down(silu(gate h) * up h) times its weight, summed
//! in that slot order (f32 adds, as ggml's chain of adds); then the shared expert's output,
//! scaled per token by sigmoid(w_sg · h), added after.

use super::ffn;
use super::ops::sigmoid;
use super::weights::RefMoe;
use super::Result;
use crate::model::parts::ffn::MOE_WEIGHT_SUM_MIN;
use crate::model::parts::{Dense, Moe};

/// A token's routing: the chosen experts in slot order and their renormalised weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub experts: Vec<usize>,
    pub weights: Vec<f32>,
}

/// softmax, top `n_used` (descending p, ties to the lower id), renormalise.
pub fn route(logits: &[f32], n_used: usize) -> Route {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let e: Vec<f64> = logits.iter().map(|&v| (v as f64 - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    // ggml's soft_max writes f32 probabilities; the sort and the weights read those
    let p: Vec<f32> = e.iter().map(|v| (v / sum) as f32).collect();
    let mut order: Vec<usize> = (0..p.len()).collect();
    // a stable sort keeps equal p in id order
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    order.truncate(n_used);
    let picked: Vec<f32> = order.iter().map(|&i| p[i]).collect();
    Route {
        weights: renormalise(&picked),
        experts: order,
    }
}

/// p / max(Σ p, MOE_WEIGHT_SUM_MIN): the chosen experts' weights (llama.cpp clamps the sum so a
/// row of zeros divides by the smallest f16 normal instead of 0).
pub fn renormalise(p: &[f32]) -> Vec<f32> {
    let sum: f64 = p.iter().map(|&v| v as f64).sum();
    let denom = (sum as f32).max(MOE_WEIGHT_SUM_MIN);
    p.iter().map(|&v| v / denom).collect()
}

/// The MoE FFN's output for one token's input `h` (n_embd).
pub fn run(w: &RefMoe, spec: &Moe, h: &[f32]) -> Result<Vec<f32>> {
    let r = route(&w.router.mul(h), spec.n_used);
    let dense = Dense {
        n_ff: spec.n_ff,
        act: spec.act,
    };
    let mut out: Option<Vec<f32>> = None;
    for (&e, &wt) in r.experts.iter().zip(&r.weights) {
        let y = ffn::dense(&w.expert(e)?, &dense, h);
        match &mut out {
            None => out = Some(y.iter().map(|&v| v * wt).collect()),
            Some(acc) => {
                for (a, v) in acc.iter_mut().zip(&y) {
                    *a += v * wt;
                }
            }
        }
    }
    let mut out = out.unwrap_or_else(|| vec![0f32; h.len()]);
    if let Some(sh) = &w.shared {
        let dense = Dense {
            n_ff: sh.gate.n_out,
            act: spec.act,
        };
        let y = ffn::dense(sh, &dense, h);
        let g = match &w.shared_gate {
            Some(m) => sigmoid(m.mul(h)[0]),
            None => 1.0,
        };
        for (a, v) in out.iter_mut().zip(&y) {
            *a += v * g;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::actq::ActRound;
    use crate::kernels::glu_q8::Glu;
    use crate::reference::ops::{InRound, Mat};
    use crate::reference::weights::{GateUp, RefDense, Stacked};

    #[test]
    fn top_k_picks_the_largest_and_renormalises() {
        let logits = [0.0f32, 2.0, -1.0, 1.0, 2.0 - 1e-3];
        let r = route(&logits, 2);
        assert_eq!(r.experts, vec![1, 4], "largest p first");
        let (a, b) = ((2.0f64).exp(), (2.0f64 - 1e-3).exp());
        assert!((r.weights[0] as f64 - a / (a + b)).abs() < 1e-6);
        assert!((r.weights[1] as f64 - b / (a + b)).abs() < 1e-6);
        let sum: f32 = r.weights.iter().sum();
        assert!((sum - 1.0).abs() < 1e-6);
    }

    #[test]
    fn ties_go_to_the_lower_id() {
        let r = route(&[1.0, 3.0, 3.0, 0.0, 3.0], 2);
        assert_eq!(r.experts, vec![1, 2]);
        assert_eq!(r.weights, vec![0.5, 0.5]);
        // all equal: the first n_used ids, each 1 / n_used
        let r = route(&[0.5; 8], 3);
        assert_eq!(r.experts, vec![0, 1, 2]);
        for w in r.weights {
            assert!((w - 1.0 / 3.0).abs() < 1e-7);
        }
    }

    #[test]
    fn one_expert_gets_weight_one_and_a_tiny_sum_is_clamped() {
        let r = route(&[-3.0, 5.0, 1.0], 1);
        assert_eq!((r.experts, r.weights), (vec![1], vec![1.0]));
        // a softmax's top k sum to at least k / n_expert, so the clamp only shows on its own:
        // a sum under 2^-14 divides by 2^-14
        let w = renormalise(&[1e-6, 2e-6]);
        assert_eq!(
            w,
            vec![1e-6 / MOE_WEIGHT_SUM_MIN, 2e-6 / MOE_WEIGHT_SUM_MIN]
        );
        assert_eq!(renormalise(&[0.0, 0.0]), vec![0.0, 0.0], "no NaN");
        // above it, a plain division by the sum
        assert_eq!(renormalise(&[0.25, 0.25]), vec![0.5, 0.5]);
    }

    fn mat(n_out: usize, n_in: usize, data: Vec<f32>) -> Mat {
        Mat {
            n_out,
            n_in,
            data,
            round: InRound::Act(ActRound::None),
        }
    }

    /// n_embd 2, n_ff 1, 3 experts: expert e's gate row [a_e, 0], up row [0, b_e], down (2, 1)
    /// [c_e, d_e]; the router prefers expert 2, then 0. Fused or split gate/up.
    fn moe(fused: bool) -> RefMoe {
        let (a, b) = ([0.5f32, -1.0, 2.0], [1.0f32, 3.0, -0.5]);
        let down = [1.0f32, 2.0, -1.0, 0.5, 0.25, -3.0];
        let gate_up = match fused {
            false => GateUp::Split {
                gate: Stacked::from_f32("g", 1, 2, &[a[0], 0.0, a[1], 0.0, a[2], 0.0]),
                up: Stacked::from_f32("u", 1, 2, &[0.0, b[0], 0.0, b[1], 0.0, b[2]]),
            },
            true => GateUp::Fused(Stacked::from_f32(
                "gu",
                2,
                2,
                &[
                    a[0], 0.0, 0.0, b[0], a[1], 0.0, 0.0, b[1], a[2], 0.0, 0.0, b[2],
                ],
            )),
        };
        RefMoe {
            router: mat(3, 2, vec![1.0, 0.0, -1.0, 0.0, 0.5, 1.0]),
            gate_up,
            down: Stacked::from_f32("d", 2, 1, &down),
            shared: Some(RefDense {
                gate: mat(1, 2, vec![1.0, 1.0]),
                up: mat(1, 2, vec![0.5, 0.0]),
                down: mat(2, 1, vec![2.0, -1.0]),
            }),
            shared_gate: Some(mat(1, 2, vec![0.25, -0.5])),
        }
    }

    #[test]
    fn experts_and_the_gated_shared_expert_match_the_sum_by_hand() {
        let spec = Moe {
            n_expert: 3,
            n_used: 2,
            n_ff: 1,
            act: Glu::Silu,
            shared_ff: Some(1),
            shared_gate: true,
            fused_gate_up: false,
        };
        let h = [1.0f32, 2.0];
        let got = run(&moe(false), &spec, &h).expect("f32 experts dequantize");
        let fused = run(&moe(true), &spec, &h).expect("f32 experts dequantize");
        assert_eq!(got, fused, "a fused gate_up is the same model");

        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let silu = |v: f64| v * sig(v);
        // router logits [1, -1, 2.5]: expert 2 then expert 0
        let p = [1.0f64.exp(), (-1.0f64).exp(), 2.5f64.exp()];
        let (w2, w0) = (p[2] / (p[2] + p[0]), p[0] / (p[2] + p[0]));
        let e2 = silu(2.0) * (-0.5 * 2.0);
        let e0 = silu(0.5) * (1.0 * 2.0);
        let sh = silu(3.0) * 0.5 * sig(0.25 - 1.0);
        let want = [
            w2 * e2 * 0.25 + w0 * e0 * 1.0 + sh * 2.0,
            w2 * e2 * -3.0 + w0 * e0 * 2.0 - sh,
        ];
        for (g, w) in got.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-5, "{g} vs {w}");
        }
    }
}
