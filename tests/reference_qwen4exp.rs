//! The Rust reference forward on `qwen4exp` (issue 25), on files `strata::synth` writes: it runs
//! (finite, distinct logits), a cache truncated and refilled gives the logits of a fresh run
//! bit for bit, a fused `ffn_gate_up_exps` file is the same model as its split twin, and the
//! reference agrees with llama.cpp's logits (tests/data/qwen4exp/, scripts/llama-cpp/dump.sh).

use std::path::{Path, PathBuf};

use strata::gguf::Gguf;
use strata::reference::{RefModel, RefSession, Rounding};
use strata::synth::{write_file, SynthGeometry};

/// Writes `g` into `dir` as `name` and returns its path and SHA-256.
fn synth(g: &SynthGeometry, dir: &Path, name: &str) -> (PathBuf, String) {
    let p = dir.join(name);
    let w = write_file(g, &p).unwrap_or_else(|e| panic!("synth {name}: {e}"));
    (p, w.sha256)
}

fn tiny(dir: &Path) -> Gguf {
    let g = SynthGeometry::preset("tiny").expect("the tiny preset");
    Gguf::open(synth(&g, dir, "tiny.gguf").0).expect("open tiny")
}

/// Tokens spread over the vocabulary, deterministic.
fn tokens(n: usize, seed: u32, n_vocab: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (seed + i * 7919 + i * i * 104_729) % n_vocab)
        .collect()
}

#[test]
fn tiny_runs_and_a_truncated_cache_gives_a_fresh_runs_logits() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let g = tiny(dir.path());
    let m = RefModel::load(&g, true).expect("the reference loads qwen4exp");
    let n_vocab = m.cfg.n_vocab as u32;
    let toks = tokens(20, 11, n_vocab);

    let all = RefSession::new(&m, 64).forward(&toks, 0).expect("forward");
    assert_eq!(all.len(), toks.len());
    for (r, row) in all.iter().enumerate() {
        assert_eq!(row.len(), n_vocab as usize);
        assert!(row.iter().all(|v| v.is_finite()), "row {r}");
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / row.len() as f64;
        let sd =
            (row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / row.len() as f64).sqrt();
        assert!(sd > 0.1, "row {r}: logits spread {sd}");
    }
    assert_ne!(all[3], all[4], "rows differ");

    // the prompt in two calls: the same logits
    let mut s = RefSession::new(&m, 64);
    let mut split = s.forward(&toks[..7], 0).expect("prefix");
    split.extend(s.forward(&toks[7..], 7).expect("rest"));
    assert_eq!(
        split, all,
        "forward(prefix) then forward(rest) == forward(all)"
    );

    // roll back to 12 and continue with other tokens: a fresh run of that sequence
    let other = tokens(5, 3, n_vocab);
    let rolled = s.forward(&other, 12).expect("rollback");
    assert_eq!(s.len(), 17);
    let mut seq = toks[..12].to_vec();
    seq.extend(&other);
    let fresh = RefSession::new(&m, 64).forward(&seq, 0).expect("fresh");
    assert_eq!(
        rolled,
        fresh[12..],
        "a truncated cache refilled == a fresh run"
    );
    assert_ne!(rolled[0], all[12], "the new tokens change the logits");

    // a gap and an overflow are errors, not panics
    assert!(s.forward(&other, 40).is_err(), "a gap past the cache");
    assert!(
        RefSession::new(&m, 8).forward(&toks, 0).is_err(),
        "past n_ctx"
    );
}

#[test]
fn a_fused_gate_up_file_is_the_same_model() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut geom = SynthGeometry::preset("tiny").expect("the tiny preset");
    geom.fused_gate_up = false;
    let split = Gguf::open(synth(&geom, dir.path(), "split.gguf").0).expect("open");
    geom.fused_gate_up = true;
    let fused = Gguf::open(synth(&geom, dir.path(), "fused.gguf").0).expect("open");
    assert!(fused.tensor_info("blk.0.ffn_gate_up_exps.weight").is_some());
    assert!(split.tensor_info("blk.0.ffn_gate_exps.weight").is_some());
    let toks = tokens(9, 5, 320);
    let run = |g: &Gguf| {
        let m = RefModel::load(g, true).expect("load");
        RefSession::new(&m, 16).forward(&toks, 0).expect("forward")
    };
    assert_eq!(run(&fused), run(&split));
}

/// One `strata-logits-v1` file: its header and rows x n_vocab logits.
struct Dump {
    tokens: Vec<u32>,
    n_vocab: usize,
    rows: Vec<Vec<f32>>,
}

fn read_dump(path: &Path) -> Dump {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let n = b.iter().position(|&c| c == b'\n').expect("a header line");
    let h: serde_json::Value = serde_json::from_slice(&b[..n]).expect("a JSON header");
    let ids = |k: &str| -> Vec<u32> {
        h[k].as_array()
            .unwrap_or_else(|| panic!("{k}"))
            .iter()
            .map(|v| v.as_u64().expect("an id") as u32)
            .collect()
    };
    let n_vocab = h["n_vocab"].as_u64().expect("n_vocab") as usize;
    let n_gen = h["n_gen"].as_u64().expect("n_gen") as usize;
    // the prompt, then the greedy tokens fed one at a time: one row per token
    let mut tokens = ids("tokens");
    tokens.extend(&ids("greedy")[..n_gen]);
    let vals: Vec<f32> = b[n + 1..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let rows: Vec<Vec<f32>> = vals.chunks_exact(n_vocab).map(|r| r.to_vec()).collect();
    assert_eq!(rows.len(), h["rows"].as_u64().expect("rows") as usize);
    Dump {
        tokens,
        n_vocab,
        rows,
    }
}

/// The SHA-256 the README records for `geometry`'s file.
fn recorded_sha(readme: &str, geometry: &str) -> String {
    let row = readme
        .lines()
        .find(|l| l.starts_with(&format!("| {geometry} | `strata synth")))
        .unwrap_or_else(|| panic!("README has no row for {geometry}"));
    row.rsplit('`').nth(1).expect("a sha256 cell").to_string()
}

struct Agreement {
    rows: usize,
    /// max over rows of max |ref - llama| / rms(llama row)
    max_rel: f64,
    /// mean over rows of the same
    mean_rel: f64,
    /// rows whose argmax is the same
    top1: usize,
}

fn argmax(r: &[f32]) -> usize {
    (0..r.len()).fold(0, |b, i| if r[i] > r[b] { i } else { b })
}

fn agreement(m: &RefModel, d: &Dump) -> Agreement {
    let toks = &d.tokens;
    assert_eq!(toks.len(), d.rows.len());
    let ours = RefSession::new(m, toks.len())
        .forward(toks, 0)
        .expect("reference forward");
    let (mut max_rel, mut sum_rel, mut top1) = (0f64, 0f64, 0);
    for (a, b) in ours.iter().zip(&d.rows) {
        assert_eq!(a.len(), d.n_vocab);
        let rms = (b.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / b.len() as f64).sqrt();
        let diff = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| (x as f64 - y as f64).abs())
            .fold(0f64, f64::max)
            / rms;
        max_rel = max_rel.max(diff);
        sum_rel += diff;
        top1 += (argmax(a) == argmax(b)) as usize;
    }
    Agreement {
        rows: ours.len(),
        max_rel,
        mean_rel: sum_rel / ours.len() as f64,
        top1,
    }
}

/// The reference against llama.cpp 11434's logits for `geometry`'s recorded file, four prompts,
/// under each of `rounds`. `Rounding::LlamaCpu` is llama.cpp's own input rounding (f16 / bf16
/// activations into F16 / BF16 weights): only the summation order and the f64 accumulation
/// differ, so every row is bounded. `Rounding::Engine` (f32 into float weights) flips a
/// near-tie of the router on a few rows (an expert swapped: a large |Δ| on that row), so its
/// bound is on the mean.
fn agrees_with_llama_cpp(geometry: &str, rounds: &[Rounding]) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/qwen4exp");
    let readme = std::fs::read_to_string(data.join("README.md")).expect("the dumps' README");
    let dir = tempfile::tempdir().expect("a temp dir");
    // the README's command: the preset with its own seed
    let g = SynthGeometry::preset(geometry).expect("a preset");
    let (path, sha) = synth(&g, dir.path(), &format!("{geometry}.gguf"));
    assert_eq!(
        sha,
        recorded_sha(&readme, geometry),
        "{geometry}: the synthetic file is the one llama.cpp ran"
    );
    let gguf = Gguf::open(&path).expect("open");
    for &round in rounds {
        let m = RefModel::load_with(&gguf, round).expect("load");
        for i in 0..4 {
            let d = read_dump(&data.join(format!("{geometry}-{i}.logits")));
            let a = agreement(&m, &d);
            println!(
                "{geometry}-{i} {round:?}: {} rows, max |Δ|/rms {:.2e}, mean {:.2e}, top-1 {}/{}",
                a.rows, a.max_rel, a.mean_rel, a.top1, a.rows
            );
            match round {
                Rounding::LlamaCpu => {
                    assert!(a.max_rel < 1e-2, "{geometry}-{i}: max {:.3e}", a.max_rel)
                }
                _ => assert!(a.mean_rel < 1e-2, "{geometry}-{i}: mean {:.3e}", a.mean_rel),
            }
            assert!(
                a.top1 * 100 >= a.rows * 97,
                "{geometry}-{i} {round:?}: top-1 {}/{}",
                a.top1,
                a.rows
            );
        }
    }
}

#[test]
fn tiny_agrees_with_llama_cpp() {
    agrees_with_llama_cpp("tiny", &[Rounding::LlamaCpu, Rounding::Engine]);
}

/// Fused gate_up, F16 hyper-connection weights.
#[test]
fn small_agrees_with_llama_cpp() {
    agrees_with_llama_cpp("small", &[Rounding::LlamaCpu, Rounding::Engine]);
}

/// n_embd 2560, r 320, BF16 hyper-connection weights (llama.cpp's rounding only: the f64
/// reference takes ~45 s a rounding on this geometry).
#[test]
fn seeds_agrees_with_llama_cpp() {
    agrees_with_llama_cpp("seeds", &[Rounding::LlamaCpu]);
}
