//! Live measurements fed by protocol events, and the summary kept across a flag change (A/B).

use std::collections::{BTreeMap, VecDeque};

use strata::protocol::{Turn, Window};

/// The most recent values of one measurement (bounded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    values: VecDeque<f64>,
}

const SERIES_CAP: usize = 240;

impl Series {
    pub fn push(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        if self.values.len() == SERIES_CAP {
            self.values.pop_front();
        }
        self.values.push_back(v);
    }

    pub fn last(&self) -> Option<f64> {
        self.values.back().copied()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn median(&self) -> Option<f64> {
        if self.values.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = self.values.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        })
    }

    /// The last `n` values scaled to integers for a sparkline (relative shape is what matters).
    pub fn spark(&self, n: usize) -> Vec<u64> {
        let skip = self.values.len().saturating_sub(n);
        self.values
            .iter()
            .skip(skip)
            .map(|v| (v * 100.0).round().max(0.0) as u64)
            .collect()
    }
}

/// Everything measured under one kernel-flag set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    pub window_ms: Series,
    /// Tokens produced per verify window (accepted drafts + the verified token).
    pub tokens_per_window: Series,
    pub decode_tps: Series,
    pub prefill_tps: Series,
    pub ttft_ms: Series,
    pub proposed: u64,
    pub accepted: u64,
    pub windows: u64,
    pub turns: u64,
    pub last_turn: Option<Turn>,
}

impl Metrics {
    pub fn on_window(&mut self, w: &Window) {
        self.window_ms.push(w.ms);
        self.tokens_per_window.push(f64::from(w.accepted) + 1.0);
        self.proposed += u64::from(w.proposed);
        self.accepted += u64::from(w.accepted);
        self.windows += 1;
    }

    pub fn on_turn(&mut self, t: &Turn) {
        if t.decode_tokens > 0 {
            self.decode_tps.push(t.decode_tps);
        }
        if t.prefill_tokens > 0 {
            self.prefill_tps.push(t.prefill_tps);
            self.ttft_ms.push(t.ttft_ms);
        }
        self.turns += 1;
        self.last_turn = Some(t.clone());
    }

    /// accepted / proposed over every window seen, None if nothing was proposed.
    pub fn acceptance(&self) -> Option<f64> {
        (self.proposed > 0).then(|| self.accepted as f64 / self.proposed as f64)
    }

    pub fn mean_accepted_len(&self) -> Option<f64> {
        (self.windows > 0 && self.proposed > 0).then(|| self.accepted as f64 / self.windows as f64)
    }

    pub fn summary(&self, flags: &BTreeMap<String, bool>) -> Summary {
        Summary {
            label: flags_label(flags),
            window_ms: self.window_ms.median(),
            decode_tps: self.decode_tps.median(),
            prefill_tps: self.prefill_tps.median(),
            ttft_ms: self.ttft_ms.median(),
            acceptance: self.acceptance(),
            turns: self.turns,
        }
    }
}

/// Medians under the previous flag set, shown beside the new ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub label: String,
    pub window_ms: Option<f64>,
    pub decode_tps: Option<f64>,
    pub prefill_tps: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub acceptance: Option<f64>,
    pub turns: u64,
}

/// "HC_Q8+KREG" style short name of the flags that are on, "no flags" if none.
pub fn flags_label(flags: &BTreeMap<String, bool>) -> String {
    let on: Vec<&str> = flags
        .iter()
        .filter(|(_, on)| **on)
        .map(|(k, _)| k.strip_prefix("STRATA_").unwrap_or(k))
        .collect();
    if on.is_empty() {
        "no flags".into()
    } else {
        on.join("+")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_last_and_spark() {
        let mut s = Series::default();
        assert_eq!(s.median(), None);
        for v in [5.0, 1.0, 3.0, f64::NAN, 2.0] {
            s.push(v);
        }
        assert_eq!(s.len(), 4, "NaN is dropped");
        assert_eq!(s.median(), Some(2.5));
        assert_eq!(s.last(), Some(2.0));
        assert_eq!(s.spark(2), vec![300, 200]);
        for i in 0..1000 {
            s.push(i as f64);
        }
        assert_eq!(s.len(), SERIES_CAP);
    }

    #[test]
    fn acceptance_counts_windows() {
        let mut m = Metrics::default();
        assert_eq!(m.acceptance(), None);
        m.on_window(&Window {
            id: 1,
            ms: 10.0,
            t: 5,
            proposed: 4,
            accepted: 3,
        });
        m.on_window(&Window {
            id: 1,
            ms: 12.0,
            t: 5,
            proposed: 4,
            accepted: 1,
        });
        assert_eq!(m.acceptance(), Some(0.5));
        assert_eq!(m.mean_accepted_len(), Some(2.0));
        assert_eq!(m.tokens_per_window.median(), Some(3.0));
        let mut f = BTreeMap::new();
        f.insert("STRATA_HC_Q8".to_string(), true);
        f.insert("STRATA_GR_FUSED".to_string(), false);
        assert_eq!(m.summary(&f).label, "HC_Q8");
        assert_eq!(m.summary(&f).window_ms, Some(11.0));
    }
}
