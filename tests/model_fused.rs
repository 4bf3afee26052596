//! The engine with the fused small kernels (norm + rounding, activation + rounding, RoPE + KV
//! store) against the unfused kernel sequence (`Engine::set_fused(false)`), on the real GGUF
//! files: every logit of a 37-token prompt (the matmul path) and of decode / verify steps of
//! T = 1, 2, 5, 8 rows (the mmvq path) must be bitwise equal, with and without the 8-bit
//! activation rounding. Also the tiled-only weights (the default load) against the load that
//! keeps the GGUF bytes and reads them (`STRATA_KEEP_GGUF=1`): bitwise the same logits.

mod support;
use support::model::{engine, engine_with, opts, run};

fn check(env: &str, act_round: bool) {
    let mut e = engine(env, act_round, false);
    let fused = run(&mut e);
    e.set_fused(false);
    let plain = run(&mut e);
    assert_eq!(fused.len(), plain.len());
    let mut diff = 0usize;
    for (a, b) in fused.iter().zip(&plain) {
        diff += a
            .iter()
            .zip(b)
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
    }
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
    let diff: usize = a
        .iter()
        .zip(&b)
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .filter(|(p, q)| p.to_bits() != q.to_bits())
                .count()
        })
        .sum();
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
