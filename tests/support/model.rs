//! Shared by the model-level tests: an engine on a real GGUF, and the prompt-then-steps run whose
//! logits they compare.

use strata::gguf::Gguf;
use strata::model::{Engine, EngineOptions};

/// The model named by setup variable `env` on the CPU device: n_ctx 256, chunks of 32 rows (the
/// 37-token prompt of `run` crosses a chunk boundary). `profiling`: a profiling queue, so a
/// step's launches can be listed (the same results).
pub fn engine(env: &str, act_round: bool, profiling: bool) -> Engine {
    engine_with(env, profiling, opts(act_round))
}

/// The options `engine` loads with: n_ctx 256, chunks of 32 rows, the tiled-only weights.
pub fn opts(act_round: bool) -> EngineOptions {
    EngineOptions {
        n_ctx: 256,
        chunk: 32,
        act_round,
        keep_gguf: false,
    }
}

/// `engine` with the given options.
#[allow(dead_code)] // (not every test binary that includes this module uses it)
pub fn engine_with(env: &str, profiling: bool, opts: EngineOptions) -> Engine {
    strata::sycl::runtime::init();
    let p = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    let g = Gguf::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let dev = strata::sycl::cpu_device().expect("the CPU SYCL device (run `make setup`)");
    let card = strata::sycl::Card::on(dev, profiling).expect("a card on the CPU device");
    Engine::from_gguf(&g, card, &opts).expect("engine load")
}

/// All logits of a 37-token prompt (the matmul path and, for its last 5 rows, the decode
/// products) then of steps of 1, 2, 5 and 8 tokens (the decode / verify-window products).
pub fn run(e: &mut Engine) -> Vec<Vec<f32>> {
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
