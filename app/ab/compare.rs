//! Reads an `AbRun` into per-arm figures against the first arm (the base) and the checks that
//! make the A/B honest: the same prompt tokens in every run, the flags each engine latched, the
//! output identical or where it parts (and whether the flags promised identity), each arm
//! reproducing itself across rounds, and draft acceptance close enough that tok/s compares.

use std::collections::BTreeMap;

use serde::Serialize;
use strata::flags::Facts;

use super::runner::{AbRun, ArmRun, NllResult};
use super::stats::{ratio, Spread};

/// Acceptance rates further apart than this (absolute) make tok/s a comparison of drafts, not
/// of kernels: the seeds' caveat ("read per-window ms").
pub const ACCEPTANCE_GAP: f64 = 0.05;
/// Tokens per window further apart than this (relative) likewise.
pub const TOKENS_PER_WINDOW_GAP: f64 = 0.05;
/// Rounds whose median window ms lie further apart than this fraction of their median are
/// called noisy (the machine's load changed under the A/B).
pub const NOISY: f64 = 0.25;
/// Tokens of text shown on each side of a divergence.
const AROUND: usize = 6;

/// Where two replies part: token `position` of the reply (0 = the first generated token).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    pub position: usize,
    /// None where that reply had already ended.
    pub base_token: Option<u32>,
    pub arm_token: Option<u32>,
    pub base_piece: String,
    pub arm_piece: String,
    /// The text before the divergence (shared by both) and each reply's next few tokens.
    pub before: String,
    pub base_after: String,
    pub arm_after: String,
    pub base_len: usize,
    pub arm_len: usize,
}

/// An arm's reply to one prompt against the base arm's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Identity {
    Base { tokens: usize },
    Identical { tokens: usize },
    Differs(Divergence),
}

/// Memory of one card after the arm's last turn (bytes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardMemory {
    pub index: u32,
    pub name: String,
    pub weights: u64,
    pub kv: u64,
    pub scratch: u64,
    pub hc_q8: u64,
    /// The engine process's resident memory (a CPU-device card).
    pub rss: Option<u64>,
}

/// One arm's figures over all its rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSummary {
    pub name: String,
    /// `VAR=V ...` as set for its engine.
    pub flags: String,
    /// Every variable it changes against the base keeps results bitwise (docs/flags.md).
    pub bitwise_expected: bool,
    /// Every verify window of every run.
    pub window_ms: Option<Spread>,
    /// The same by rows in the window (`t`).
    pub window_ms_by_t: BTreeMap<u32, Spread>,
    /// Median window ms of each round (the seeds' "39.4 / 39.6 / 39.8").
    pub round_window_ms: Vec<f64>,
    /// Median window ms over the base arm's.
    pub window_ratio: Option<f64>,
    /// Per generation (every prompt of every round).
    pub decode_tps: Option<Spread>,
    /// Median decode tok/s of each round's generations.
    pub round_decode_tps: Vec<f64>,
    pub prefill_tps: Option<Spread>,
    pub tokens_per_window: f64,
    pub proposed: u64,
    pub accepted: u64,
    pub acceptance: f64,
    pub memory: Vec<CardMemory>,
    /// Expert-cache refusals summed over cards (None: a dense model).
    pub expert_refusals: Option<u64>,
    /// Per prompt, round 1, against the base arm's round 1.
    pub outputs: Vec<Identity>,
    /// Its replies were the same tokens in every round.
    pub reproducible: bool,
    pub nll: Option<NllResult>,
    /// The toggles its engines reported latched (`hello`).
    pub latched: BTreeMap<String, bool>,
    /// Its engines' stderr lines about STRATA_ variables, once each.
    pub latch_lines: Vec<String>,
}

/// The checks, each with what it found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checks {
    /// Every run of every arm ran each prompt as the same token ids.
    pub same_prompt_tokens: bool,
    /// Prompt tokens per prompt (the engines' `ids`).
    pub prompt_tokens: Vec<usize>,
    /// The sampler every arm ran (one value by construction: the spec's).
    pub sampler: String,
    /// Each engine latched exactly the toggles its arm asked for.
    pub flags_latched: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub arms: Vec<ArmSummary>,
    pub checks: Checks,
    /// Things a reader must know before believing a number (empty: none).
    pub warnings: Vec<String>,
}

/// The first index where the two sequences differ, or where the shorter ends (None: equal).
pub fn first_divergence(a: &[u32], b: &[u32]) -> Option<usize> {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => Some(i),
        None if a.len() == b.len() => None,
        None => Some(a.len().min(b.len())),
    }
}

/// The divergence of `arm` from `base`, its text through `decode` (token ids -> text).
pub fn divergence(
    base: &[u32],
    arm: &[u32],
    decode: &dyn Fn(&[u32]) -> String,
) -> Option<Divergence> {
    let p = first_divergence(base, arm)?;
    let after = |r: &[u32]| decode(&r[(p + 1).min(r.len())..(p + 1 + AROUND).min(r.len())]);
    let piece = |r: &[u32]| r.get(p).map_or(String::from("(end)"), |&t| decode(&[t]));
    Some(Divergence {
        position: p,
        base_token: base.get(p).copied(),
        arm_token: arm.get(p).copied(),
        base_piece: piece(base),
        arm_piece: piece(arm),
        before: decode(&base[p.saturating_sub(AROUND)..p]),
        base_after: after(base),
        arm_after: after(arm),
        base_len: base.len(),
        arm_len: arm.len(),
    })
}

fn runs_of(run: &AbRun, arm: usize) -> Vec<&ArmRun> {
    run.runs.iter().filter(|r| r.arm == arm).collect()
}

fn memory(r: &ArmRun) -> (Vec<CardMemory>, Option<u64>) {
    let Some(d) = &r.devices else {
        return (Vec::new(), None);
    };
    let cards = d
        .cards
        .iter()
        .map(|c| CardMemory {
            index: c.index,
            name: c.name.clone(),
            weights: c.used.weights,
            kv: c.used.kv,
            scratch: c.used.scratch,
            hc_q8: c.used.hc_q8,
            rss: c.host.as_ref().map(|h| h.rss),
        })
        .collect();
    let refusals = d
        .cards
        .iter()
        .filter_map(|c| c.experts.as_ref().map(|e| e.refusals))
        .reduce(|a, b| a + b);
    (cards, refusals)
}

fn summarize(run: &AbRun, arm: usize, decode: &dyn Fn(&[u32]) -> String) -> ArmSummary {
    let spec = &run.spec;
    let a = &spec.arms[arm];
    let mine = runs_of(run, arm);
    let base = runs_of(run, 0);
    let all_windows = |rs: &[&ArmRun]| -> Vec<f64> {
        rs.iter()
            .flat_map(|r| {
                r.prompts
                    .iter()
                    .flat_map(|p| p.windows.iter().map(|w| w.ms))
            })
            .collect()
    };
    let window_ms = Spread::of(&all_windows(&mine));
    let base_ms = Spread::of(&all_windows(&base));
    let mut by_t: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for r in &mine {
        for w in r.prompts.iter().flat_map(|p| &p.windows) {
            by_t.entry(w.t).or_default().push(w.ms);
        }
    }
    let turns: Vec<_> = mine
        .iter()
        .flat_map(|r| r.prompts.iter().map(|p| &p.turn))
        .collect();
    let (tokens, windows): (u64, u64) = turns.iter().fold((0, 0), |(t, w), x| {
        (t + u64::from(x.decode_tokens), w + u64::from(x.windows))
    });
    let proposed: u64 = turns.iter().map(|t| u64::from(t.proposed)).sum();
    let accepted: u64 = turns.iter().map(|t| u64::from(t.accepted)).sum();
    let outputs = (0..spec.prompts.len())
        .map(|pi| {
            let reply = |rs: &[&ArmRun]| {
                rs.first()
                    .map(|r| r.prompts[pi].reply_ids.clone())
                    .unwrap_or_default()
            };
            let (mine_ids, base_ids) = (reply(&mine), reply(&base));
            if arm == 0 {
                Identity::Base {
                    tokens: mine_ids.len(),
                }
            } else {
                match divergence(&base_ids, &mine_ids, decode) {
                    None => Identity::Identical {
                        tokens: mine_ids.len(),
                    },
                    Some(d) => Identity::Differs(d),
                }
            }
        })
        .collect();
    let reproducible = mine.windows(2).all(|w| {
        w[0].prompts
            .iter()
            .zip(&w[1].prompts)
            .all(|(x, y)| x.reply_ids == y.reply_ids)
    });
    let mut latch_lines: Vec<String> = Vec::new();
    for l in mine.iter().flat_map(|r| &r.latch) {
        if !latch_lines.contains(l) {
            latch_lines.push(l.clone());
        }
    }
    let (mem, refusals) = mine.last().map(|r| memory(r)).unwrap_or_default();
    ArmSummary {
        name: a.name.clone(),
        flags: a.describe(),
        bitwise_expected: a.bitwise_with(&spec.arms[0]),
        window_ratio: match (base_ms, window_ms) {
            (Some(b), Some(m)) => ratio(b.median, m.median),
            _ => None,
        },
        window_ms,
        window_ms_by_t: by_t
            .iter()
            .filter_map(|(t, v)| Some((*t, Spread::of(v)?)))
            .collect(),
        round_window_ms: mine
            .iter()
            .filter_map(|r| Spread::of(&all_windows(&[r])).map(|s| s.median))
            .collect(),
        decode_tps: Spread::of(&turns.iter().map(|t| t.decode_tps).collect::<Vec<_>>()),
        round_decode_tps: mine
            .iter()
            .filter_map(|r| {
                let v: Vec<f64> = r.prompts.iter().map(|p| p.turn.decode_tps).collect();
                Spread::of(&v).map(|s| s.median)
            })
            .collect(),
        prefill_tps: Spread::of(&turns.iter().map(|t| t.prefill_tps).collect::<Vec<_>>()),
        tokens_per_window: if windows == 0 {
            0.0
        } else {
            tokens as f64 / windows as f64
        },
        proposed,
        accepted,
        acceptance: if proposed == 0 {
            0.0
        } else {
            accepted as f64 / proposed as f64
        },
        memory: mem,
        expert_refusals: refusals,
        outputs,
        reproducible,
        nll: run.nll.get(arm).cloned().flatten(),
        latched: mine
            .first()
            .map(|r| r.hello_flags.clone())
            .unwrap_or_default(),
        latch_lines,
    }
}

/// Compares every arm with the first. `decode` turns token ids into text (the model's
/// tokenizer) for the divergence columns.
pub fn compare(run: &AbRun, decode: &dyn Fn(&[u32]) -> String) -> Comparison {
    let spec = &run.spec;
    let arms: Vec<ArmSummary> = (0..spec.arms.len())
        .map(|a| summarize(run, a, decode))
        .collect();
    let mut warnings = Vec::new();

    // the same prompt tokens everywhere
    let mut same_prompt_tokens = true;
    let mut prompt_tokens = Vec::new();
    for pi in 0..spec.prompts.len() {
        let first = run.runs.first().map(|r| &r.prompts[pi].prompt_ids);
        prompt_tokens.push(first.map_or(0, Vec::len));
        for r in &run.runs {
            if Some(&r.prompts[pi].prompt_ids) != first {
                same_prompt_tokens = false;
                warnings.push(format!(
                    "prompt {}: arm {} round {} ran other prompt tokens than arm {} round 1: \
                     the arms are not comparable",
                    pi + 1,
                    spec.arms[r.arm].name,
                    r.rep + 1,
                    spec.arms[0].name
                ));
            }
        }
    }
    // each engine latched what its arm asked for
    let mut flags_latched = true;
    for r in &run.runs {
        let want = spec.arms[r.arm].toggles();
        for (k, v) in &want {
            if r.hello_flags.get(k) != Some(v) {
                flags_latched = false;
                warnings.push(format!(
                    "arm {} round {}: the engine latched {k}={} (asked {})",
                    spec.arms[r.arm].name,
                    r.rep + 1,
                    r.hello_flags
                        .get(k)
                        .map_or("?", |b| if *b { "1" } else { "0" }),
                    if *v { "1" } else { "0" }
                ));
            }
        }
    }
    // flags that cannot act on this model
    if let Some(r) = run.runs.first() {
        let facts = Facts {
            arch: Some(&r.loaded.arch),
            formats: Some(&r.loaded.quant_types),
            cpu_device: None,
        };
        for a in &spec.arms {
            for f in a.differs_from(&spec.arms[0]) {
                if let Err(why) = f.applies(&facts) {
                    warnings.push(format!(
                        "arm {}: {} {why}: it changes nothing here",
                        a.name, f.name
                    ));
                }
            }
        }
    }
    let base = &arms[0];
    for s in &arms {
        if let Some(r) = Spread::of(&s.round_window_ms).filter(|r| r.n > 1) {
            let gap = (r.max - r.min) / r.median;
            if gap > NOISY {
                warnings.push(format!(
                    "arm {}: its rounds' median window ms run {:.2} to {:.2} ({:.0}% apart): the \
                     machine was busy; read the ratio with care, or run more rounds",
                    s.name,
                    r.min,
                    r.max,
                    100.0 * gap
                ));
            }
        }
        if !s.reproducible {
            warnings.push(format!(
                "arm {}: its replies differ between rounds (a fixed seed should repeat them)",
                s.name
            ));
        }
        if s.name == base.name {
            continue;
        }
        let differs = s.outputs.iter().any(|o| matches!(o, Identity::Differs(_)));
        if s.bitwise_expected && differs {
            warnings.push(format!(
                "arm {}: its flags are bitwise ({}), yet its output differs from {}",
                s.name, s.flags, base.name
            ));
        }
        if spec.spec > 0 {
            let gap = (s.acceptance - base.acceptance).abs();
            let tpw =
                ratio(base.tokens_per_window, s.tokens_per_window).map_or(0.0, |r| (r - 1.0).abs());
            if gap > ACCEPTANCE_GAP || tpw > TOKENS_PER_WINDOW_GAP {
                warnings.push(format!(
                    "arm {}: drafts accepted {:.1}% against {:.1}% ({:.2} against {:.2} tokens a \
                     window): tok/s is not comparable between these arms; read the per-window ms",
                    s.name,
                    100.0 * s.acceptance,
                    100.0 * base.acceptance,
                    s.tokens_per_window,
                    base.tokens_per_window
                ));
            }
        }
    }
    let sm = &spec.sampling;
    let sampler = format!(
        "temperature {} top_k {} top_p {} min_p {} repeat_penalty {} seed {}",
        sm.temperature,
        sm.top_k,
        sm.top_p,
        sm.min_p,
        sm.repeat_penalty,
        sm.seed.map_or("clock".into(), |s| s.to_string())
    );
    Comparison {
        arms,
        checks: Checks {
            same_prompt_tokens,
            prompt_tokens,
            sampler,
            flags_latched,
        },
        warnings,
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
