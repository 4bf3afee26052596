//! The engine with the fused small kernels (norm + rounding, activation + rounding, RoPE + KV
//! store) against the unfused kernel sequence (`Engine::set_fused(false)`), on the real GGUF
//! files: every logit of a 37-token prompt (the matmul path) and of decode / verify steps of
//! T = 1, 2, 5, 8 rows (the mmvq path) must be bitwise equal, with and without the 8-bit
//! activation rounding. Also the tiled-only weights (the default load) against the load that
//! keeps the GGUF bytes and reads them (`STRATA_KEEP_GGUF=1`): bitwise the same logits.

mod support;
use support::model::{engine, engine_with, opts, run};

/// Logits of two runs that differ in any bit (the runs must have the same rows).
fn logits_differ(a: &[Vec<f32>], b: &[Vec<f32>]) -> usize {
    assert_eq!(a.len(), b.len(), "rows of logits");
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .filter(|(p, q)| p.to_bits() != q.to_bits())
                .count()
        })
        .sum()
}

fn check(env: &str, act_round: bool) {
    let mut e = engine(env, act_round, false);
    let fused = run(&mut e);
    e.set_fused(false);
    let plain = run(&mut e);
    let diff = logits_differ(&fused, &plain);
    println!(
        "{env} act_round {act_round}: {} rows x {} logits, {diff} differ (fused vs unfused)",
        fused.len(),
        fused[0].len()
    );
    assert_eq!(diff, 0, "{env}: fused and unfused logits differ");
}

#[test]
fn smollm2_fused_is_bitwise_unfused() {
    check("STRATA_MODEL_SMOLLM2", true);
    check("STRATA_MODEL_SMOLLM2", false);
}

#[test]
fn gemma3_fused_is_bitwise_unfused() {
    check("STRATA_MODEL_GEMMA3", true);
    check("STRATA_MODEL_GEMMA3", false);
}

/// The default load keeps only the tiled copies (the prompt's matmul decodes
/// them, the embedding reads the tied head's copy); `keep_gguf` keeps the GGUF bytes and reads
/// them as before. Every logit must be the same bits, in half the weight memory or less.
fn check_tiled_only(env: &str) {
    let mut only = engine(env, true, false);
    let mut keep = engine_with(
        env,
        false,
        strata::model::EngineOptions {
            keep_gguf: true,
            ..opts(true)
        },
    );
    let (a, b) = (run(&mut only), run(&mut keep));
    let diff = logits_differ(&a, &b);
    let (mo, mk) = (only.memory()[0].weights, keep.memory()[0].weights);
    println!(
        "{env}: {} rows x {} logits, {diff} differ (tiled-only vs GGUF kept); weights {mo} vs {mk} bytes ({:.1}%)",
        a.len(),
        a[0].len(),
        100.0 * mo as f64 / mk as f64
    );
    assert_eq!(diff, 0, "{env}: tiled-only and GGUF-kept logits differ");
    assert!(
        mo * 10 < mk * 6,
        "{env}: {mo} bytes tiled-only vs {mk} with the GGUF bytes"
    );
}

#[test]
fn smollm2_tiled_only_weights_are_bitwise_the_gguf_ones() {
    check_tiled_only("STRATA_MODEL_SMOLLM2");
}

#[test]
fn gemma3_tiled_only_weights_are_bitwise_the_gguf_ones() {
    check_tiled_only("STRATA_MODEL_GEMMA3");
}

/// The norms after the output and down projections folded into those launches
/// (`Engine::set_fold_norms`, on by default) against the same engine with it off: bitwise the
/// same logits (prompt and 1/2/5/8-row steps), and a decode step launches `saved` kernels fewer,
/// counted on a profiling queue.
fn check_folded(env: &str, saved: impl Fn(usize) -> usize) {
    let mut e = engine(env, true, true);
    assert!(e.fold_norms(), "folding is the default");
    let launches = |e: &mut strata::model::Engine| -> usize {
        e.reset();
        e.forward(&[1, 2, 3], 0, &[2]).unwrap();
        let q = e.queue().clone();
        q.trace_begin();
        e.forward(&[4], 3, &[0]).unwrap();
        q.trace_end().unwrap().iter().map(|k| k.launches).sum()
    };
    let (folded_n, folded) = (launches(&mut e), run(&mut e));
    e.set_fold_norms(false);
    let (plain_n, plain) = (launches(&mut e), run(&mut e));
    let n_layer = e.config().n_layer;
    let diff = logits_differ(&folded, &plain);
    println!(
        "{env}: {} rows x {} logits, {diff} differ (folded vs not); a decode step launches {folded_n} kernels folded, {plain_n} not",
        folded.len(),
        folded[0].len()
    );
    assert_eq!(diff, 0, "{env}: folding the norms changed logits");
    assert_eq!(
        plain_n - folded_n,
        saved(n_layer),
        "{env}: launches saved by the fold"
    );
}

/// llama: Wo + add_rms_norm_q8 in every layer, Wdown + add_rms_norm_q8 (the add and the next
/// layer's norm) in all but the last (it has no next layer).
#[test]
fn smollm2_folded_norms_are_bitwise_unfolded() {
    check_folded("STRATA_MODEL_SMOLLM2", |n| 2 * n - 1);
}

/// Gemma 3: Wo + norm_add_norm_q8 in every layer, Wdown + norm_add_norm_q8 (the post norm, the
/// add and the next layer's norm) in all but the last.
#[test]
fn gemma3_folded_norms_are_bitwise_unfolded() {
    check_folded("STRATA_MODEL_GEMMA3", |n| 2 * n - 1);
}

/// Each of the planner's rewrites (engine/model/plan/) alone, and all together, against the
/// plain part sequence (`Plan::plain`: no rewrite): bitwise the same logits, prompt and steps.
/// (`fold_norms` and `xstage` act on what the fused kernels write, so they are tried with
/// `fused` on.)
fn check_plan(env: &str) {
    use strata::model::Plan;
    let mut e = engine(env, true, false);
    let all = e.plan();
    e.set_plan(Plan::plain(true));
    let plain = run(&mut e);
    let none = Plan::plain(true);
    let cases = [
        (
            "fused",
            Plan {
                fused: true,
                ..none
            },
        ),
        (
            "group",
            Plan {
                group: true,
                ..none
            },
        ),
        (
            "fused + xstage",
            Plan {
                fused: true,
                xstage: true,
                ..none
            },
        ),
        (
            "fused + fold_norms",
            Plan {
                fused: true,
                fold_norms: true,
                ..none
            },
        ),
        ("all (the default)", all),
    ];
    for (what, plan) in cases {
        e.set_plan(plan);
        let diff = logits_differ(&run(&mut e), &plain);
        println!("{env}: {what}: {diff} logits differ from the plain sequence");
        assert_eq!(diff, 0, "{env}: {what} changed logits");
    }
}

#[test]
fn smollm2_each_rewrite_is_bitwise_the_plain_parts() {
    check_plan("STRATA_MODEL_SMOLLM2");
}

#[test]
fn gemma3_each_rewrite_is_bitwise_the_plain_parts() {
    check_plan("STRATA_MODEL_GEMMA3");
}
