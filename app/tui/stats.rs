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
        median_of(&self.values.iter().copied().collect::<Vec<f64>>())
    }

    /// The last `n` values as sparkline bars on a robust scale (see [`Spark`]).
    pub fn spark(&self, n: usize) -> Spark {
        let skip = self.values.len().saturating_sub(n);
        Spark::new(&self.values.iter().skip(skip).copied().collect::<Vec<f64>>())
    }
}

/// Bar heights run 0..=SPARK_TOP (the sparkline's `max`).
pub const SPARK_TOP: u64 = 1000;
/// A value above this many times the median of the shown values is a spike.
pub const SPIKE_FACTOR: f64 = 3.0;

/// Sparkline bars scaled so that one spike cannot flatten the rest: the top of the scale is the
/// largest shown value within `SPIKE_FACTOR` × their median; values above it (spikes) are drawn
/// at full height, flagged so the pane can mark them. (A high percentile such as p95 would not
/// do for the few values of a short series: the p95 of 20 values or fewer is their maximum, so
/// one slow window among the first twenty would still flatten every other bar.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spark {
    pub bars: Vec<u64>,
    /// Per bar: clamped (a spike).
    pub spikes: Vec<bool>,
    /// The largest spike's value.
    pub max_spike: Option<f64>,
}

impl Spark {
    pub fn new(values: &[f64]) -> Spark {
        let Some(median) = median_of(values) else {
            return Spark::default();
        };
        let fence = SPIKE_FACTOR * median.max(0.0);
        let top = values
            .iter()
            .copied()
            .filter(|&v| v <= fence)
            .fold(0.0_f64, f64::max);
        let mut spark = Spark::default();
        for &v in values {
            let spike = v > fence;
            let h = if spike || top <= 0.0 {
                if spike {
                    SPARK_TOP
                } else {
                    0
                }
            } else {
                ((v.max(0.0) / top) * SPARK_TOP as f64).round() as u64
            };
            if spike {
                spark.max_spike = Some(spark.max_spike.map_or(v, |m: f64| m.max(v)));
            }
            spark.bars.push(h.min(SPARK_TOP));
            spark.spikes.push(spike);
        }
        spark
    }
}

fn median_of(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The decode rate of the turn being generated, from its `window` events: tokens kept
/// (accepted + 1 per window) over the windows' device-synchronised time. It leaves out the
/// loop's host work between windows (drafting, detokenizing), so it reads a little above the
/// turn's final `decode_tps`, which replaces it when the `turn` arrives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    pub id: u64,
    pub tokens: u64,
    pub ms: f64,
}

impl Live {
    pub fn tps(&self) -> Option<f64> {
        (self.ms > 0.0).then(|| self.tokens as f64 * 1000.0 / self.ms)
    }
}

/// Everything measured under one kernel-flag set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    pub window_ms: Series,
    pub decode_tps: Series,
    pub prefill_tps: Series,
    pub ttft_ms: Series,
    pub proposed: u64,
    pub accepted: u64,
    pub windows: u64,
    pub turns: u64,
    pub last_turn: Option<Turn>,
    /// The turn being generated (its windows so far); None between turns.
    pub live: Option<Live>,
}

impl Metrics {
    pub fn on_window(&mut self, w: &Window) {
        self.window_ms.push(w.ms);
        if self.live.as_ref().is_none_or(|l| l.id != w.id) {
            self.live = Some(Live {
                id: w.id,
                ..Live::default()
            });
        }
        if let Some(l) = self
            .live
            .as_mut()
            .filter(|_| w.ms.is_finite() && w.ms >= 0.0)
        {
            l.tokens += u64::from(w.accepted) + 1;
            l.ms += w.ms;
        }
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
        self.live = None;
    }

    /// accepted / proposed over every window seen, None if nothing was proposed.
    pub fn acceptance(&self) -> Option<f64> {
        (self.proposed > 0).then(|| self.accepted as f64 / self.proposed as f64)
    }

    /// Tokens per verify window, the mean over every window seen: each window keeps its accepted
    /// drafts + 1 (the target's own token), so this is `(accepted + windows) / windows`. The
    /// window and draft panels both show this one figure, labelled "mean".
    pub fn tokens_per_window(&self) -> Option<f64> {
        (self.windows > 0).then(|| (self.accepted + self.windows) as f64 / self.windows as f64)
    }

    /// The decode rate while a turn streams (see [`Live`]).
    pub fn live_tps(&self) -> Option<f64> {
        self.live.as_ref().and_then(Live::tps)
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
        assert_eq!(s.spark(2).bars, vec![SPARK_TOP, 667]);
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
        assert_eq!(m.tokens_per_window(), Some(3.0));
        let mut f = BTreeMap::new();
        f.insert("STRATA_HC_Q8".to_string(), true);
        f.insert("STRATA_GR_FUSED".to_string(), false);
        assert_eq!(m.summary(&f).label, "HC_Q8");
        assert_eq!(m.summary(&f).window_ms, Some(11.0));
    }

    #[test]
    fn one_50x_spike_does_not_flatten_the_sparkline() {
        let mut s = Series::default();
        let normal = [10.0, 12.0, 11.0, 14.0, 13.0, 10.5, 12.5, 11.5];
        for v in &normal[..4] {
            s.push(*v);
        }
        s.push(700.0); // 50x the median
        for v in &normal[4..] {
            s.push(*v);
        }
        let sp = s.spark(40);
        assert_eq!(sp.bars.len(), 9);
        assert_eq!(sp.spikes.iter().filter(|&&x| x).count(), 1);
        assert!(sp.spikes[4] && sp.bars[4] == SPARK_TOP, "{sp:?}");
        assert_eq!(sp.max_spike, Some(700.0));
        let others: Vec<u64> = sp
            .bars
            .iter()
            .zip(&sp.spikes)
            .filter(|(_, sp)| !**sp)
            .map(|(b, _)| *b)
            .collect();
        // the rest fill the scale (14 is the top) and keep their order
        assert_eq!(others.iter().max(), Some(&SPARK_TOP));
        assert_eq!(others[0], 714, "10 of 14");
        let mut sorted = others.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            others.len(),
            "distinct values, distinct bars: {others:?}"
        );
        // scaled to the maximum (as ratatui does by default) they would all be ~2% high:
        // under one of the 16 levels a two-row sparkline has
        assert!(normal.iter().all(|v| v / 700.0 * 16.0 < 1.0));
    }

    #[test]
    fn live_rate_from_windows_until_the_turn() {
        let mut m = Metrics::default();
        let w = |id, ms, accepted| Window {
            id,
            ms,
            t: 5,
            proposed: 4,
            accepted,
        };
        assert_eq!(m.live_tps(), None);
        m.on_window(&w(7, 10.0, 3));
        m.on_window(&w(7, 10.0, 1));
        // (3 + 1) + (1 + 1) tokens in 20 ms
        assert_eq!(m.live_tps(), Some(300.0));
        m.on_window(&w(8, 5.0, 0)); // a new generation starts afresh
        assert_eq!(m.live_tps(), Some(200.0));
        assert_eq!(m.tokens_per_window(), Some(7.0 / 3.0));
        // (from the wire, so fields added later take their defaults)
        let t: Turn = serde_json::from_str(
            r#"{"id":8,"prefill_tokens":3,"prefill_ms":1,"prefill_tps":3000,"decode_tokens":1,
                "decode_ms":6,"decode_tps":166.7,"windows":1,"tokens_per_window":1,"proposed":4,
                "accepted":0,"acceptance":0,"mean_accepted_len":0,"ttft_ms":2,"stop":"eos"}"#,
        )
        .unwrap();
        m.on_turn(&t);
        assert_eq!(m.live_tps(), None, "the turn's figure replaces it");
        assert_eq!(m.decode_tps.last(), Some(166.7));
    }
}
