//! Token sampling: repetition penalty, top-k, top-p, min-p, temperature, then a seeded draw (or
//! greedy argmax). Stop strings live in `stop`.
//!
//! The filter order is llama.cpp's default chain (penalties -> top-k -> top-p -> min-p ->
//! temperature -> draw): top-p and min-p are judged on the penalised logits at temperature 1, and
//! the temperature only reshapes the survivors. `probs` returns the exact distribution `sample`
//! draws from, which the speculative verifier needs for its rejection rule.

mod rng;
pub mod stop;

pub use rng::SplitMix64;
pub use stop::{StopMatcher, StopOutput};

use std::collections::VecDeque;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SampleError {
    #[error("logits contain a non-finite value {value} at token index {index}")]
    NonFinite { index: usize, value: f32 },
    #[error("logits are empty")]
    Empty,
    #[error("invalid sampling parameter {name} = {}: {why}", show(*.value))]
    BadParam {
        name: &'static str,
        value: f32,
        why: &'static str,
    },
}

/// A parameter's value as typed: `-1`, `0.5`, `1e30`, `NaN`, `inf`.
fn show(v: f32) -> String {
    if v.is_finite() && v != 0.0 && !(1e-4..1e6).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// The allowed ranges (docs/protocol.md, `Sampling`): one rule for the CLI, a `load`'s defaults
/// and each `generate`. NaN fails every range check.
pub const TEMPERATURE_MAX: f32 = 100.0;
pub const REPEAT_PENALTY_MAX: f32 = 10.0;

/// Sampling settings. `temperature == 0` means greedy (argmax after the penalty).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    /// 0 = off.
    pub top_k: usize,
    /// 1.0 = off.
    pub top_p: f32,
    /// 0.0 = off.
    pub min_p: f32,
    /// 1.0 = off. llama.cpp's rule: a seen token's logit is divided by it when positive,
    /// multiplied when negative.
    pub repeat_penalty: f32,
    /// How many of the most recent tokens the penalty looks at.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0,
        }
    }
}

impl SamplingParams {
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Self::default()
        }
    }

    /// Checks every float against its range: temperature in [0, 100] (0 = greedy), top_p in
    /// (0, 1], min_p in [0, 1], repeat_penalty in (0, 10]. The error names the parameter.
    pub fn validate(&self) -> Result<(), SampleError> {
        let bad = |name, value: f32, why| Err(SampleError::BadParam { name, value, why });
        if !(0.0..=TEMPERATURE_MAX).contains(&self.temperature) {
            return bad(
                "temperature",
                self.temperature,
                "must be in [0, 100] (0 = greedy)",
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", self.top_p, "must be in (0, 1] (1 = off)");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p", self.min_p, "must be in [0, 1] (0 = off)");
        }
        if !(self.repeat_penalty > 0.0 && self.repeat_penalty <= REPEAT_PENALTY_MAX) {
            return bad(
                "repeat_penalty",
                self.repeat_penalty,
                "must be in (0, 10] (1 = off)",
            );
        }
        Ok(())
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }
}

/// A sampler with its RNG and the recent-token window for the repetition penalty.
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: SplitMix64,
    recent: VecDeque<u32>,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Result<Self, SampleError> {
        params.validate()?;
        let rng = SplitMix64::new(params.seed);
        Ok(Self {
            params,
            rng,
            recent: VecDeque::new(),
        })
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Records a token of the sequence (prompt or generated) for the repetition penalty.
    pub fn accept(&mut self, token: u32) {
        if self.params.repeat_last_n == 0 {
            return;
        }
        if self.recent.len() == self.params.repeat_last_n {
            self.recent.pop_front();
        }
        self.recent.push_back(token);
    }

    /// The full-vocabulary distribution `sample` draws from (zeros for filtered tokens; one-hot
    /// for greedy).
    pub fn probs(&self, logits: &[f32]) -> Result<Vec<f32>, SampleError> {
        let cands = self.candidates(logits)?;
        let mut out = vec![0.0f32; logits.len()];
        for (id, p) in cands {
            out[id] = p as f32;
        }
        Ok(out)
    }

    /// Picks the next token. Does not `accept` it: the caller does, once it is kept.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SampleError> {
        let cands = self.candidates(logits)?;
        if cands.len() == 1 {
            return Ok(cands[0].0 as u32);
        }
        let u = self.rng.next_f64();
        let mut acc = 0.0f64;
        for &(id, p) in &cands {
            acc += p;
            if u < acc {
                return Ok(id as u32);
            }
        }
        // Rounding left the cumulative sum a hair under 1 and u fell in that gap.
        Ok(cands[cands.len() - 1].0 as u32)
    }

    /// Surviving (token, probability) pairs, most likely first (ties: lower id first).
    fn candidates(&self, logits: &[f32]) -> Result<Vec<(usize, f64)>, SampleError> {
        if logits.is_empty() {
            return Err(SampleError::Empty);
        }
        if let Some((index, &value)) = logits.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(SampleError::NonFinite { index, value });
        }
        let p = &self.params;
        let mut work: Vec<f32> = logits.to_vec();
        if p.repeat_penalty != 1.0 {
            let mut seen: Vec<u32> = self.recent.iter().copied().collect();
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                if let Some(l) = work.get_mut(t as usize) {
                    *l = if *l > 0.0 {
                        *l / p.repeat_penalty
                    } else {
                        *l * p.repeat_penalty
                    };
                }
            }
        }
        if p.is_greedy() {
            let mut best = 0;
            for (i, &l) in work.iter().enumerate() {
                if l > work[best] {
                    best = i;
                }
            }
            return Ok(vec![(best, 1.0)]);
        }
        let mut ids = ranked(&work, p.top_k);
        // Softmax at temperature 1 over the survivors, for top-p and min-p.
        let probs1 = softmax(&ids, &work, 1.0);
        if p.top_p < 1.0 {
            let mut acc = 0.0;
            let mut keep = ids.len();
            for (i, q) in probs1.iter().enumerate() {
                acc += q;
                if acc >= p.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            ids.truncate(keep);
        }
        if p.min_p > 0.0 {
            // probs1 is aligned with the (possibly truncated) ids prefix; renormalising does not
            // change ratios to the max, so the unnormalised values decide the same way.
            let floor = probs1[0] * p.min_p as f64;
            let keep = probs1[..ids.len()]
                .iter()
                .take_while(|&&q| q >= floor)
                .count();
            ids.truncate(keep.max(1));
        }
        let probs = softmax(&ids, &work, p.temperature as f64);
        Ok(ids.into_iter().zip(probs).collect())
    }
}

/// Token ids by descending logit, ascending id on ties (a total, reproducible order), cut to
/// the first `top_k` when 0 < top_k < n. With top-k the k best are selected first (O(n)) and
/// only they are sorted: the same list as sorting everything and truncating, since the order
/// is total, without sorting Gemma 3's 262,144 logits for every sampled token.
pub fn ranked(logits: &[f32], top_k: usize) -> Vec<usize> {
    let order = |a: &usize, b: &usize| logits[*b].total_cmp(&logits[*a]).then(a.cmp(b));
    let mut ids: Vec<usize> = (0..logits.len()).collect();
    if top_k > 0 && top_k < ids.len() {
        ids.select_nth_unstable_by(top_k - 1, order);
        ids.truncate(top_k);
    }
    ids.sort_by(order);
    ids
}

/// Softmax of `logits[ids] / temp` in f64, aligned with `ids` (which starts with the largest).
fn softmax(ids: &[usize], logits: &[f32], temp: f64) -> Vec<f64> {
    let max = logits[ids[0]] as f64;
    let e: Vec<f64> = ids
        .iter()
        .map(|&i| ((logits[i] as f64 - max) / temp).exp())
        .collect();
    let sum: f64 = e.iter().sum();
    e.into_iter().map(|x| x / sum).collect()
}

#[cfg(test)]
mod tests;
