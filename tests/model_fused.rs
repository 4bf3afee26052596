//! The engine with the fused small kernels (norm + rounding, activation + rounding, RoPE + KV
//! store) against the unfused kernel sequence (`Engine::set_fused(false)`), on the real GGUF
//! files: every logit of a 37-token prompt (the matmul path) and of decode / verify steps of
//! T = 1, 2, 5, 8 rows (the mmvq path) must be bitwise equal, with and without the 8-bit
//! activation rounding.

mod support;
use support::model::{engine, run};

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
