//! The engine with the fused small kernels (norm + rounding, activation + rounding, RoPE + KV
//! store) against the unfused kernel sequence (`Engine::set_fused(false)`), on the real GGUF
//! files: every logit of a 37-token prompt (the matmul path) and of decode / verify steps of
//! T = 1, 2, 5, 8 rows (the mmvq path) must be bitwise equal, with and without the 8-bit
//! activation rounding.

use strata::gguf::Gguf;
use strata::model::{Engine, EngineOptions};

fn engine(env: &str, act_round: bool) -> Engine {
    strata::sycl::runtime::init();
    let p = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    let g = Gguf::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let card = strata::sycl::Card::cpu().expect("the CPU SYCL device (run `make setup`)");
    let opts = EngineOptions {
        n_ctx: 256,
        chunk: 32, // the 37-token prompt crosses a chunk boundary
        act_round,
    };
    Engine::from_gguf(&g, card, &opts).expect("engine load")
}

/// All logits of the prompt then of steps of 1, 2, 5 and 8 tokens.
fn run(e: &mut Engine) -> Vec<Vec<f32>> {
    let n_vocab = e.config().n_vocab as u32;
    let toks = |n: usize, seed: u32| -> Vec<u32> {
        (0..n as u32)
            .map(|i| (seed + i * 7919 + i * i * 104_729) % n_vocab)
            .collect()
    };
    e.reset();
    let mut out = Vec::new();
    let mut pos = 0;
    for (i, n) in [37, 1, 2, 5, 8].into_iter().enumerate() {
        let want: Vec<usize> = (0..n).collect();
        out.extend(e.forward(&toks(n, 11 + i as u32), pos, &want).unwrap());
        pos += n;
    }
    out
}

fn check(env: &str, act_round: bool) {
    let mut e = engine(env, act_round);
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
