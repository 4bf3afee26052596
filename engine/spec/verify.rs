//! Acceptance of a verify window. Row i of the window's logits is the target's prediction after
//! the last accepted token and drafts 0..i; draft i is judged against row i, in order, and the
//! first rejection ends the window with a token drawn from the target's correction distribution;
//! when all drafts pass, row d gives one bonus token.
//!
//! Greedy: draft i is kept iff it equals the token the sampler picks from row i (the argmax after
//! the repetition penalty, with drafts 0..i already in the penalty window), so the output equals
//! one-token-at-a-time decoding whenever the rows' logits are bitwise those of one-row passes.
//!
//! Sampling (the standard speculative-sampling rule): with p the sampler's distribution for row i
//! and q the drafter's, draft x is kept with probability min(1, p(x) / q(x)); on rejection the
//! token is drawn from max(p - q, 0) normalised. Each emitted token is then distributed exactly as
//! p. A deterministic drafter (n-gram) has q one-hot on x: keep with probability p(x), else draw
//! from p with x removed.

use super::drafter::Draft;
use super::SpecError;
use crate::sampling::{Sampler, SplitMix64};

/// The outcome of one window: the first `accepted` drafts are kept, then `next`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub accepted: usize,
    pub next: u32,
}

/// Judges `draft` against the window's `logits` (draft.len() + 1 rows, each n_vocab). Every kept
/// token (accepted drafts and `next`) is passed to `sampler.accept`, in order. `rng` draws the
/// acceptance tests and the corrections (the bonus token comes from the sampler's own RNG, as a
/// plain decode step would).
pub fn verify_window(
    sampler: &mut Sampler,
    rng: &mut SplitMix64,
    logits: &[Vec<f32>],
    draft: &Draft,
) -> Result<Verdict, SpecError> {
    let d = draft.len();
    if logits.len() != d + 1 {
        return Err(SpecError::Rows {
            got: logits.len(),
            want: d + 1,
        });
    }
    let greedy = sampler.params().is_greedy();
    for (i, &x) in draft.tokens.iter().enumerate() {
        let row = &logits[i];
        if greedy {
            let pick = sampler.sample(row)?;
            sampler.accept(pick);
            if pick != x {
                return Ok(Verdict {
                    accepted: i,
                    next: pick,
                });
            }
            continue;
        }
        let p = sampler.probs(row)?;
        let q = match &draft.probs {
            Some(qs) => {
                let q = &qs[i];
                if q.len() != p.len() {
                    return Err(SpecError::DraftProbs {
                        index: i,
                        got: q.len(),
                        n_vocab: p.len(),
                    });
                }
                Some(q.as_slice())
            }
            None => None,
        };
        let px = p.get(x as usize).copied().unwrap_or(0.0) as f64;
        let qx = q.map_or(1.0, |q| q[x as usize] as f64);
        let keep = if qx > 0.0 {
            (px / qx).min(1.0)
        } else if px > 0.0 {
            1.0
        } else {
            0.0
        };
        if rng.next_f64() < keep {
            sampler.accept(x);
            continue;
        }
        let next = draw_residual(&p, q, x, rng);
        sampler.accept(next);
        return Ok(Verdict { accepted: i, next });
    }
    let next = sampler.sample(&logits[d])?;
    sampler.accept(next);
    Ok(Verdict { accepted: d, next })
}

/// A draw from max(p - q, 0) normalised (q one-hot on `x` when `q` is None); from p itself when
/// the residual is empty (p == q, reachable only through rounding).
fn draw_residual(p: &[f32], q: Option<&[f32]>, x: u32, rng: &mut SplitMix64) -> u32 {
    let resid = |j: usize| -> f64 {
        let qj = match q {
            Some(q) => q[j] as f64,
            None => f64::from(u8::from(j == x as usize)),
        };
        (p[j] as f64 - qj).max(0.0)
    };
    let total: f64 = (0..p.len()).map(resid).sum();
    let (weight, total): (&dyn Fn(usize) -> f64, f64) = if total > 0.0 {
        (&resid, total)
    } else {
        (&|j| p[j] as f64, p.iter().map(|&v| v as f64).sum())
    };
    let u = rng.next_f64() * total;
    let mut acc = 0.0;
    let mut last = 0;
    for j in 0..p.len() {
        let w = weight(j);
        if w <= 0.0 {
            continue;
        }
        acc += w;
        last = j;
        if u < acc {
            return j as u32;
        }
    }
    // Rounding left the running sum a hair under the total and u fell in that gap.
    last as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::SamplingParams;

    fn plain(temperature: f32, seed: u64) -> Sampler {
        Sampler::new(SamplingParams {
            temperature,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            seed,
            ..SamplingParams::default()
        })
        .unwrap()
    }

    fn softmax(l: &[f32]) -> Vec<f64> {
        let m = l.iter().cloned().fold(f32::MIN, f32::max) as f64;
        let e: Vec<f64> = l.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.into_iter().map(|v| v / s).collect()
    }

    /// Pearson's chi-square of observed counts against probabilities (cells with p > 0).
    fn chi_square(counts: &[u64], p: &[f64]) -> f64 {
        let n: u64 = counts.iter().sum();
        counts
            .iter()
            .zip(p)
            .filter(|(_, &p)| p > 0.0)
            .map(|(&c, &p)| {
                let e = n as f64 * p;
                (c as f64 - e).powi(2) / e
            })
            .sum()
    }

    #[test]
    fn greedy_keeps_the_agreeing_prefix_then_the_targets_token() {
        let mut s = plain(0.0, 1);
        let mut rng = SplitMix64::new(1);
        let row = |best: usize| {
            let mut l = vec![0.0f32; 6];
            l[best] = 5.0;
            l
        };
        let logits = vec![row(3), row(1), row(4), row(2)];
        let v = verify_window(
            &mut s,
            &mut rng,
            &logits,
            &Draft::deterministic(vec![3, 1, 5]),
        )
        .unwrap();
        assert_eq!(
            v,
            Verdict {
                accepted: 2,
                next: 4
            }
        );
        let v = verify_window(
            &mut s,
            &mut rng,
            &logits,
            &Draft::deterministic(vec![3, 1, 4]),
        )
        .unwrap();
        assert_eq!(
            v,
            Verdict {
                accepted: 3,
                next: 2
            },
            "all kept: the bonus comes from the last row"
        );
        let v = verify_window(&mut s, &mut rng, &logits[..1], &Draft::default()).unwrap();
        assert_eq!(
            v,
            Verdict {
                accepted: 0,
                next: 3
            }
        );
        assert!(verify_window(&mut s, &mut rng, &logits, &Draft::deterministic(vec![3])).is_err());
    }

    /// The first token a window emits (the accepted draft or the correction) is distributed as p,
    /// for a one-hot (n-gram) draft, a sampled draft with its own q, and a draft p gives zero.
    #[test]
    fn rejection_rule_reproduces_the_target_distribution() {
        // chi-square critical value, 5 cells (4 degrees of freedom), p = 0.001.
        const CRIT: f64 = 18.47;
        let logits = vec![1.0f32, 0.2, 2.0, -0.5, 0.7];
        let p = softmax(&logits);
        let q_dist = vec![0.05f32, 0.5, 0.1, 0.3, 0.05];
        let rows = vec![logits.clone(), logits.clone()];
        let n = 200_000;
        for case in [
            "one-hot on the likeliest",
            "one-hot on an unlikely",
            "sampled from q",
        ] {
            let mut s = plain(1.0, 7);
            let mut rng = SplitMix64::new(11);
            let mut qrng = SplitMix64::new(13);
            let mut counts = [0u64; 5];
            let mut kept = 0u64;
            for _ in 0..n {
                let draft = match case {
                    "one-hot on the likeliest" => Draft::deterministic(vec![2]),
                    "one-hot on an unlikely" => Draft::deterministic(vec![3]),
                    _ => {
                        let u = qrng.next_f64();
                        let mut acc = 0.0;
                        let mut x = 4;
                        for (j, &qj) in q_dist.iter().enumerate() {
                            acc += qj as f64;
                            if u < acc {
                                x = j;
                                break;
                            }
                        }
                        Draft {
                            tokens: vec![x as u32],
                            probs: Some(vec![q_dist.clone()]),
                        }
                    }
                };
                let v = verify_window(&mut s, &mut rng, &rows, &draft).unwrap();
                let first = if v.accepted == 1 {
                    draft.tokens[0]
                } else {
                    v.next
                };
                counts[first as usize] += 1;
                kept += v.accepted as u64;
            }
            let chi = chi_square(&counts, &p);
            // Expected acceptance: sum_x min(p(x), q(x)) (p(x) for a one-hot draft on x).
            let expect_keep: f64 = match case {
                "one-hot on the likeliest" => p[2],
                "one-hot on an unlikely" => p[3],
                _ => p.iter().zip(&q_dist).map(|(&a, &b)| a.min(b as f64)).sum(),
            };
            let keep = kept as f64 / n as f64;
            println!(
                "{case}: chi-square {chi:.2} (critical {CRIT}), acceptance {keep:.4} (expected {expect_keep:.4}), counts {counts:?}"
            );
            assert!(
                chi < CRIT,
                "{case}: emitted tokens do not follow p: chi-square {chi:.2}"
            );
            assert!(
                (keep - expect_keep).abs() < 0.005,
                "{case}: acceptance {keep} vs {expect_keep}"
            );
        }
    }

    #[test]
    fn a_draft_the_target_filtered_out_is_always_rejected() {
        let mut s = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            seed: 3,
            ..SamplingParams::default()
        })
        .unwrap();
        let mut rng = SplitMix64::new(5);
        let logits = vec![vec![3.0f32, 2.0, 1.0, 0.0]; 2];
        for _ in 0..1000 {
            let v =
                verify_window(&mut s, &mut rng, &logits, &Draft::deterministic(vec![3])).unwrap();
            assert_eq!(v.accepted, 0);
            assert!(
                v.next < 2,
                "the correction must come from the top-2: {}",
                v.next
            );
        }
    }
}
