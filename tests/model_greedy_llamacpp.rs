//! Strata against llama.cpp on its own greedy text (issue 28), on both real models (SmolLM2 Q4_1,
//! Gemma 3 Q4_K_M), through the real engine with default options.
//!
//! The quantized files: llama.cpp 11434's greedy ids for the 6 prompts (48 each), fed back to
//! it teacher-forced in one batch on its default path and on its `-fa off` path
//! (tests/data/greedy/llamacpp_forced.json, made by scripts/forced_llamacpp_data.py, the command
//! in the file). Strata runs the same ids in one batch, and both Strata and `-fa off` are
//! measured against llama.cpp's default at its top 8 ids per row: how often each picks its top-1,
//! and how far each moves the logits' differences from its top-1. Teacher-forced, a near-tie
//! costs one row and never the rest of the text; the free continuations of the first version
//! of this test parted for good at the first tie a host's vector width decided the other way
//! (docs/kld.md), so free text is now checked only on the F16 files.
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

/// The index of the largest of `l`, the lowest on ties (as llama.cpp's greedy sampler).
fn argmax(l: &[f32]) -> usize {
    (0..l.len())
        .max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a)))
        .expect("a non-empty row")
}

/// The model's tokenizer and an engine on the CPU device, default options, 256 positions.
fn load(path: &Path) -> (Tokenizer, Engine) {
    strata::sycl::runtime::init();
    let tok = Tokenizer::from_gguf_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let card = strata::sycl::Card::cpu().expect("the CPU SYCL device (run `make setup`)");
    let eng = Engine::load(
        path,
        card,
        &EngineOptions {
            n_ctx: 256,
            ..EngineOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (tok, eng)
}

/// Greedy continuation of each prompt (lowest id on ties), stopping at an end-of-generation
/// token as llama-completion does.
fn continuations(path: &Path, prompts: &[String]) -> Vec<String> {
    let (tok, mut eng) = load(path);
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
                let t = argmax(&l) as u32;
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

/// llama.cpp's logits teacher-forced on its own greedy ids (scripts/forced_llamacpp_data.py).
const FORCED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/greedy/llamacpp_forced.json"
);

/// How far one path's logits are from llama.cpp's default at one row, in the shape that decides
/// the next token: over llama.cpp's top ids k0..k7, the largest
/// |(x[kj] − x[k0]) − (default[kj] − default[k0])|.
fn shape_error(x: &[f32], default: &[f32]) -> f32 {
    x.iter()
        .zip(default)
        .map(|(a, b)| ((a - x[0]) - (b - default[0])).abs())
        .fold(0.0, f32::max)
}

/// Per-row figures of one path against llama.cpp's default over a model's cases.
#[derive(Default)]
struct Spread {
    rows: usize,
    /// rows whose top-1 is llama.cpp's default top-1
    top1: usize,
    /// sum of squared shape errors, and the largest
    sq: f64,
    max: f32,
}

impl Spread {
    /// `top1`: whether the path's top-1 over the whole vocabulary is llama.cpp's default top-1
    fn add(&mut self, x: &[f32], default: &[f32], top1: bool) {
        let e = shape_error(x, default);
        self.rows += 1;
        self.sq += f64::from(e) * f64::from(e);
        self.max = self.max.max(e);
        self.top1 += usize::from(top1);
    }
    /// Adds another case's rows.
    fn absorb(&mut self, other: &Spread) {
        self.rows += other.rows;
        self.top1 += other.top1;
        self.sq += other.sq;
        self.max = self.max.max(other.max);
    }
    fn rms(&self) -> f64 {
        (self.sq / self.rows as f64).sqrt()
    }
}

/// The items of the JSON array `v` through `f`; `what` names them in a panic.
fn array<T>(
    v: &serde_json::Value,
    what: &str,
    f: impl Fn(&serde_json::Value) -> Option<T>,
) -> Vec<T> {
    v.as_array()
        .unwrap_or_else(|| panic!("{what}: not an array"))
        .iter()
        .map(|x| f(x).unwrap_or_else(|| panic!("{what}: {x}")))
        .collect()
}

/// Strata's logits are held to llama.cpp's own spread: its default path teacher-forced on its
/// greedy ids is the reference, its `-fa off` path on the same ids the yardstick (both from
/// tests/data/greedy/llamacpp_forced.json). Teacher-forced, a near-tie costs one row, not the
/// rest of a continuation, so the figures do not hang on which path wins one tie (the free
/// continuations did: docs/kld.md). Strata must rank llama.cpp's top ids with an RMS error at
/// most 1.5 times `-fa off`'s, and pick llama.cpp's top-1 as often less 4 % of the rows: each
/// path misses it at ~10-20 near-ties of the 288 rows (measured), and two such counts part by
/// about √(2·15) ≈ 5 rows by chance, so 4 % (11 rows) is two of those.
fn check(env: &str) {
    let forced: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FORCED).expect("the forced data file"))
            .expect("JSON");
    let cases = forced["models"][env]["cases"]
        .as_array()
        .expect("the model's cases");
    let texts = data()["models"][env]["cases"].clone();
    let texts = texts
        .as_array()
        .expect("the model's cases in llamacpp.json");
    let path = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    let (tok, mut eng) = load(&path);
    let floats = |v| array(v, "logits", |x| x.as_f64().map(|f| f as f32));
    let token_ids = |v| array(v, "token ids", |x| x.as_u64().map(|i| i as usize));
    let (mut ours, mut fa_off) = (Spread::default(), Spread::default());
    for c in cases {
        let ids: Vec<u32> = token_ids(&c["ids"]).into_iter().map(|i| i as u32).collect();
        let n_prompt = c["n_prompt"].as_u64().expect("n_prompt") as usize;
        let rows = c["rows"].as_array().expect("the rows");
        // the ids are llama-completion's continuation (llamacpp.json) token for token
        let text = tok.decode(&ids[n_prompt..], false);
        let want = texts
            .iter()
            .find(|t| t["prompt"] == c["prompt"])
            .expect("the prompt in llamacpp.json");
        let n = wanted(&want["default"]);
        let (k, _) = agreement(
            &text,
            want["default"]["continuation"].as_str().expect("text"),
            n,
        );
        assert_eq!(
            k, n,
            "{env}: the forced data's ids read {text:?}, not llamacpp.json's"
        );
        // the prompt and every greedy id but the last, in one batch (as llama.cpp's)
        let scored: Vec<usize> = (n_prompt - 1..ids.len() - 1).collect();
        assert_eq!(scored.len(), rows.len(), "{env}: rows in the data file");
        eng.reset();
        let logits = eng
            .forward(&ids[..ids.len() - 1], 0, &scored)
            .expect("the teacher-forced pass");
        let (mut case_ours, mut case_off) = (Spread::default(), Spread::default());
        for (l, row) in logits.iter().zip(rows) {
            let top = token_ids(&row["ids"]);
            let default = floats(&row["default"]);
            let x: Vec<f32> = top.iter().map(|&i| l[i]).collect();
            case_ours.add(&x, &default, argmax(l) == top[0]);
            // -fa off's rows hold only llama.cpp's top ids: its top-1 among them, which can
            // only flatter the yardstick
            let off = floats(&row["fa_off"]);
            case_off.add(&off, &default, argmax(&off) == 0);
        }
        println!(
            "{env} {:?}: {} rows; top-1 = llama.cpp's: strata {}, -fa off {}; shape error RMS / \
             max: strata {:.4} / {:.4}, -fa off {:.4} / {:.4}",
            c["prompt"].as_str().unwrap_or_default(),
            case_ours.rows,
            case_ours.top1,
            case_off.top1,
            case_ours.rms(),
            case_ours.max,
            case_off.rms(),
            case_off.max
        );
        ours.absorb(&case_ours);
        fa_off.absorb(&case_off);
    }
    println!(
        "{env}: {} rows; top-1 = llama.cpp's: strata {}, -fa off {}; shape error RMS / max: \
         strata {:.4} / {:.4}, -fa off {:.4} / {:.4}",
        ours.rows,
        ours.top1,
        fa_off.top1,
        ours.rms(),
        ours.max,
        fa_off.rms(),
        fa_off.max
    );
    assert!(
        ours.rms() <= 1.5 * fa_off.rms(),
        "{env}: strata's shape error RMS {:.4} is over 1.5 x llama.cpp -fa off's {:.4}",
        ours.rms(),
        fa_off.rms()
    );
    assert!(
        ours.top1 + ours.rows / 25 >= fa_off.top1,
        "{env}: strata picks llama.cpp's top-1 on {} of {} rows, -fa off on {}",
        ours.top1,
        ours.rows,
        fa_off.top1
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
