//! The comparison on hand-built runs: identity and divergence, the prompt-token check, the
//! latch check, the acceptance warning, bitwise expectations, the per-round medians.

use super::*;
use crate::ab::runner::{AbRun, ArmRun, BuildId, PromptRun};
use crate::ab::spec::{Arm, RunSpec};
use std::collections::BTreeMap;
use strata::protocol::{Loaded, Sampling, Stop, Turn, Window};

fn turn(decode_tokens: u32, windows: u32, proposed: u32, accepted: u32, tps: f64) -> Turn {
    Turn {
        id: 1,
        prefill_tokens: 10,
        prefill_ms: 10.0,
        prefill_tps: 1000.0,
        decode_tokens,
        decode_ms: 1.0,
        decode_tps: tps,
        windows,
        tokens_per_window: decode_tokens as f64 / windows as f64,
        proposed,
        accepted,
        acceptance: 0.0,
        mean_accepted_len: 0.0,
        ttft_ms: 1.0,
        stop: Stop::MaxTokens,
        prompt_tokens: 10,
        n_past: 20,
        dropped: 0,
    }
}

struct R {
    arm: usize,
    rep: u32,
    prompt: Vec<u32>,
    reply: Vec<u32>,
    ms: Vec<f64>,
    turn: Turn,
    latched: &'static [&'static str],
}

fn arm_run(r: R) -> ArmRun {
    let hello_flags = strata::flags::toggles()
        .map(|f| (f.name.to_string(), r.latched.contains(&f.name)))
        .collect();
    ArmRun {
        arm: r.arm,
        rep: r.rep,
        pid: 1,
        hello_flags,
        latch: vec![],
        loaded: Loaded {
            model: "m.gguf".into(),
            arch: "gemma3".into(),
            n_ctx: 512,
            n_params: 1,
            load_ms: 1.0,
            hc: false,
            quant_types: vec!["Q4_K".into()],
            experts: false,
            synthetic: false,
        },
        devices: None,
        prompts: vec![PromptRun {
            prompt: 0,
            text: String::new(),
            prompt_ids: r.prompt,
            reply_ids: r.reply,
            windows: r
                .ms
                .iter()
                .map(|&ms| Window {
                    id: 1,
                    ms,
                    t: 1,
                    proposed: 0,
                    accepted: 0,
                })
                .collect(),
            turn: r.turn,
        }],
    }
}

fn ab(arms: &[&str], spec_tokens: u32, runs: Vec<ArmRun>) -> AbRun {
    let none = BTreeMap::new();
    AbRun {
        spec: RunSpec {
            model: "m.gguf".into(),
            prompts: vec!["p".into()],
            system: String::new(),
            n: 8,
            spec: spec_tokens,
            ctx: 0,
            split_cpu: None,
            sampling: Sampling {
                temperature: 0.0,
                seed: Some(1),
                ..Sampling::default()
            },
            reps: 2,
            arms: arms.iter().map(|a| Arm::parse(a, &none).unwrap()).collect(),
            nll: None,
        },
        build: BuildId {
            program: "strata".into(),
            version: "0".into(),
            sha256: "0".into(),
            bytes: 0,
            git: None,
        },
        started: "2026-12-03 10:00".into(),
        host: "test".into(),
        load_avg: (None, None),
        runs,
        nll: vec![None; arms.len()],
        wall_s: 0.0,
    }
}

/// Token ids as letters, so a divergence's text can be checked.
fn letters(ids: &[u32]) -> String {
    ids.iter()
        .map(|&i| char::from(b'a' + (i % 26) as u8))
        .collect()
}

#[test]
fn divergence_finds_the_first_differing_token_and_shows_both_sides() {
    assert_eq!(first_divergence(&[1, 2, 3], &[1, 2, 3]), None);
    assert_eq!(first_divergence(&[1, 2, 3], &[1, 9, 3]), Some(1));
    assert_eq!(
        first_divergence(&[1, 2], &[1, 2, 3]),
        Some(2),
        "one ended first"
    );
    assert_eq!(first_divergence(&[], &[]), None);
    let d = divergence(&[0, 1, 2, 3, 4], &[0, 1, 2, 7, 8], &letters).unwrap();
    assert_eq!(
        (d.position, d.base_token, d.arm_token),
        (3, Some(3), Some(7))
    );
    assert_eq!(
        (
            d.before.as_str(),
            d.base_piece.as_str(),
            d.arm_piece.as_str()
        ),
        ("abc", "d", "h")
    );
    assert_eq!((d.base_after.as_str(), d.arm_after.as_str()), ("e", "i"));
    let end = divergence(&[0, 1], &[0, 1, 5], &letters).unwrap();
    assert_eq!(
        (
            end.base_token,
            end.base_piece.as_str(),
            end.arm_piece.as_str()
        ),
        (None, "(end)", "f")
    );
}

#[test]
fn identical_bitwise_arm_and_divergent_kreg_arm() {
    let same = || vec![5, 6, 7, 8];
    let mk = |arm, rep, reply: Vec<u32>, ms: Vec<f64>, latched| {
        arm_run(R {
            arm,
            rep,
            prompt: vec![1, 2],
            reply,
            ms,
            turn: turn(3, 3, 0, 0, 30.0),
            latched,
        })
    };
    let runs = vec![
        mk(0, 0, same(), vec![10.0, 10.0, 12.0], &[]),
        mk(1, 0, same(), vec![9.0, 9.0, 9.0], &[]),
        mk(
            2,
            0,
            vec![5, 6, 9, 9],
            vec![20.0, 20.0, 20.0],
            &["STRATA_MMVQ_KREG"],
        ),
        mk(0, 1, same(), vec![10.0, 10.0, 10.0], &[]),
        mk(1, 1, same(), vec![9.0, 9.0, 11.0], &[]),
        mk(
            2,
            1,
            vec![5, 6, 9, 9],
            vec![20.0, 22.0, 20.0],
            &["STRATA_MMVQ_KREG"],
        ),
    ];
    let run = ab(&["default", "STRATA_FUSED=0", "kreg"], 0, runs);
    let c = compare(&run, &letters);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert!(c.checks.same_prompt_tokens && c.checks.flags_latched);
    assert_eq!(c.checks.prompt_tokens, vec![2]);
    let [base, fused, kreg] = &c.arms[..] else {
        panic!("three arms")
    };
    assert_eq!(base.outputs, vec![Identity::Base { tokens: 4 }]);
    assert!(fused.bitwise_expected && !kreg.bitwise_expected);
    assert_eq!(fused.outputs, vec![Identity::Identical { tokens: 4 }]);
    let Identity::Differs(d) = &kreg.outputs[0] else {
        panic!("kreg differs")
    };
    assert_eq!(
        (d.position, d.base_token, d.arm_token),
        (2, Some(7), Some(9))
    );
    assert_eq!(base.round_window_ms, vec![10.0, 10.0]);
    assert_eq!(kreg.window_ms.unwrap().median, 20.0);
    assert_eq!(kreg.window_ratio, Some(2.0));
    assert!(base.reproducible && kreg.reproducible);
}

#[test]
fn the_checks_catch_what_makes_an_ab_unfair() {
    let mk = |arm, rep, prompt: Vec<u32>, reply: Vec<u32>, t: Turn, latched| {
        arm_run(R {
            arm,
            rep,
            prompt,
            reply,
            ms: vec![10.0; 4],
            turn: t,
            latched,
        })
    };
    let runs = vec![
        mk(0, 0, vec![1, 2], vec![5, 6], turn(8, 4, 12, 6, 40.0), &[]),
        // another prompt; the engine latched no KREG; drafts accepted 1/12 against 6/12
        mk(1, 0, vec![1, 3], vec![5, 6], turn(8, 7, 12, 1, 20.0), &[]),
        // the base does not repeat itself; the bitwise arm differs
        mk(0, 1, vec![1, 2], vec![5, 7], turn(8, 4, 12, 6, 40.0), &[]),
        mk(1, 1, vec![1, 2], vec![5, 6], turn(8, 7, 12, 1, 20.0), &[]),
    ];
    let run = ab(&["default", "kreg"], 4, runs);
    let c = compare(&run, &letters);
    let all = c.warnings.join("\n");
    assert!(!c.checks.same_prompt_tokens, "{all}");
    assert!(
        all.contains("prompt 1: arm kreg round 1 ran other prompt tokens"),
        "{all}"
    );
    assert!(!c.checks.flags_latched);
    assert!(
        all.contains("latched STRATA_MMVQ_KREG=0 (asked 1)"),
        "{all}"
    );
    assert!(all.contains("tok/s is not comparable"), "{all}");
    assert!(
        all.contains("arm default: its replies differ between rounds"),
        "{all}"
    );
    assert_eq!(c.arms[1].acceptance, 2.0 / 24.0);

    // a bitwise arm whose output differs is called out
    let runs = vec![
        mk(0, 0, vec![1], vec![5, 6], turn(1, 1, 0, 0, 1.0), &[]),
        mk(1, 0, vec![1], vec![5, 8], turn(1, 1, 0, 0, 1.0), &[]),
    ];
    let mut run = ab(&["default", "STRATA_XSTAGE=0"], 0, runs);
    run.spec.reps = 1;
    let c = compare(&run, &letters);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("bitwise") && w.contains("yet its output differs")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn a_flag_that_cannot_act_on_the_model_is_named() {
    let mk = |arm| {
        arm_run(R {
            arm,
            rep: 0,
            prompt: vec![1],
            reply: vec![2],
            ms: vec![1.0],
            turn: turn(1, 1, 0, 0, 1.0),
            latched: if arm == 1 { &["STRATA_HC_Q8"] } else { &[] },
        })
    };
    let run = ab(&["default", "hc-q8"], 0, vec![mk(0), mk(1)]);
    let c = compare(&run, &letters);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("STRATA_HC_Q8") && w.contains("changes nothing here")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn rounds_far_apart_are_called_noisy() {
    let mk = |arm, rep, ms: f64| {
        arm_run(R {
            arm,
            rep,
            prompt: vec![1],
            reply: vec![2],
            ms: vec![ms; 3],
            turn: turn(3, 3, 0, 0, 1.0),
            latched: &[],
        })
    };
    // the base's rounds 10 and 20 ms (67% apart); the other arm's 9 and 10 (11%)
    let runs = vec![
        mk(0, 0, 10.0),
        mk(1, 0, 9.0),
        mk(0, 1, 20.0),
        mk(1, 1, 10.0),
    ];
    let c = compare(&ab(&["default", "STRATA_FUSED=0"], 0, runs), &letters);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0].starts_with(
            "arm default: its rounds' median window ms run 10.00 to 20.00 (67% apart)"
        ),
        "{:?}",
        c.warnings
    );
}
