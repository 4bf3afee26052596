//! Agreement with llama.cpp: greedy continuations of the real GGUF files through the real SYCL
//! engine (default options: 8-bit rounded matmul inputs, as llama.cpp). The expected strings are
//! llama.cpp's outputs quoted in the project issue (no chat template, BOS per the model's
//! add_bos flag).

use strata::model::{Engine, EngineOptions};
use strata::tokenizer::Tokenizer;

fn greedy(env: &str, prompt: &str, n: usize) -> String {
    strata::sycl::runtime::init();
    let path = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    let tok =
        Tokenizer::from_gguf_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let card = strata::sycl::Card::cpu().expect("the CPU SYCL device (run `make setup`)");
    let mut eng = Engine::load(
        &path,
        card,
        &EngineOptions {
            n_ctx: 256,
            ..EngineOptions::default()
        },
    )
    .unwrap();
    let ids = tok.encode(prompt, true, false);
    println!("{prompt:?} -> {ids:?}");
    let mut l = eng
        .forward(&ids, 0, &[ids.len() - 1])
        .unwrap()
        .pop()
        .unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let t = (0..l.len())
            .max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a)))
            .unwrap() as u32;
        out.push(t);
        l = eng
            .forward(&[t], ids.len() + i, &[0])
            .unwrap()
            .pop()
            .unwrap();
    }
    let text = tok.decode(&out, false);
    println!("{out:?} -> {text:?}");
    text
}

#[test]
fn smollm2_q4_1_matches_llama_cpp() {
    let got = greedy(strata::paths::SMOLLM2_ENV, "The capital of France is", 24);
    assert_eq!(
        got,
        " Paris.\n\nThe United States has a population of approximately 311 million people.\n\nThe United States"
    );
}

#[test]
fn gemma3_q4_k_m_matches_llama_cpp() {
    // The issue quotes this as 16 tokens; in Gemma's vocabulary the text is 21 tokens ("    ",
    // "if", " n", " ==", " ", "0", ":", "\n", ...), and 16 end at "    elif n". Generate 21 and
    // compare the whole quoted string.
    let got = greedy(strata::paths::GEMMA3_ENV, "def fibonacci(n):\n", 21);
    assert_eq!(got, "    if n == 0:\n        return 0\n    elif n == 1:\n");
}
