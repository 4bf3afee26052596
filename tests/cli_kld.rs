//! `strata nll --kld-base FILE` / `--kld FILE` through the real binary on SmolLM2 (`make setup`):
//! the file's layout (llama-perplexity's --kl-divergence-base: header, tokens, rows), a round
//! trip Strata -> Strata (KLD ~0 from the u16 rounding alone, top-1 the same wherever the
//! stored row separates the top two), two flag sets
//! (STRATA_VNNI on vs off: close but not bitwise), and bad or mismatched files refused with one
//! line naming the file and the field. The comparison with llama.cpp itself is
//! scripts/kld_vs_llamacpp.sh (docs/kld.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_strata");
const TEXT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/nll_sample.txt");
const N_CTX: usize = 128;

fn model() -> String {
    strata::paths::model_path(strata::paths::SMOLLM2_ENV)
        .unwrap_or_else(|e| panic!("{e}"))
        .display()
        .to_string()
}

fn strata(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args).env_remove("STRATA_VNNI");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run strata");
    println!(
        "strata {} {env:?}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| !l.starts_with("chunk "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    out
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The number after `label` on its line of the report (llama-perplexity's labels).
fn field(report: &str, label: &str) -> f64 {
    let line = report
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line in\n{report}"));
    let rest = line[label.len()..].trim_start_matches([' ', ':']);
    rest.split_whitespace()
        .next()
        .and_then(|v| v.trim_end_matches('%').parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

fn base(dir: &Path, name: &str, env: &[(&str, &str)]) -> PathBuf {
    let p = dir.join(name);
    let m = model();
    let args = ["nll", "-m", &m, "-f", TEXT, "--ctx", "128", "--kld-base"];
    let mut a: Vec<&str> = args.to_vec();
    let ps = p.display().to_string();
    a.push(&ps);
    stdout(&strata(&a, env));
    p
}

fn kld(file: &Path, env: &[(&str, &str)], extra: &[&str]) -> Output {
    let m = model();
    let f = file.display().to_string();
    let mut a = vec!["nll", "-m", &m, "--kld", &f];
    a.extend_from_slice(extra);
    strata(&a, env)
}

fn assert_error(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "expected exit 1: {err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("strata: "), "{err}");
    for n in needles {
        assert!(last.contains(n), "{n:?} not in {last:?}");
    }
}

#[test]
fn round_trip_layout_bad_files_and_two_flag_sets() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let p = base(dir.path(), "default.kld", &[]);
    let bytes = std::fs::read(&p).expect("the base file");

    // The layout: header, n_chunk * n_ctx tokens, n_chunk * 63 rows of nv u16.
    let g = strata::gguf::Gguf::open(model()).expect("open the model");
    let cfg = strata::model::ModelConfig::from_gguf(&g).expect("model config");
    let tok = strata::tokenizer::Tokenizer::from_gguf_path(Path::new(&model())).expect("tok");
    let text = std::fs::read_to_string(TEXT).expect("the text");
    let ids = tok.encode(&text, true, false);
    let n_chunk = ids.len() / N_CTX;
    let nv = 2 * cfg.n_vocab.div_ceil(2) + 4;
    let rows = N_CTX - 1 - N_CTX / 2;
    assert_eq!(&bytes[..8], b"_logits_");
    let word = |i: usize| i32::from_le_bytes(bytes[8 + 4 * i..12 + 4 * i].try_into().unwrap());
    assert_eq!(
        [word(0), word(1), word(2)],
        [N_CTX as i32, cfg.n_vocab as i32, n_chunk as i32]
    );
    let stored: Vec<u32> = (0..n_chunk * N_CTX).map(|i| word(3 + i) as u32).collect();
    assert_eq!(
        stored,
        ids[..n_chunk * N_CTX],
        "the tokens as tokenized, BOS first"
    );
    assert_eq!(
        bytes.len(),
        20 + 4 * n_chunk * N_CTX + 2 * n_chunk * rows * nv
    );

    // Round trip: the same run reads its own base back. The base keeps each log-probability
    // in u16 steps (16 nats / 65535 at most), so where the top two logits lie within a step
    // the stored row cannot tell them apart and its first maximum may be the other token:
    // a real top-1 difference only outside those rows (how many depends on the CPU's
    // rounding: none where earlier CI runs ran, 1 of 441 on an AVX-512 Xeon on 2026-12-06).
    let offset = 20 + 4 * n_chunk * N_CTX;
    let ambiguous = bytes[offset..]
        .chunks_exact(2 * nv)
        .filter(|row| {
            let q: Vec<u16> = row[8..8 + 2 * cfg.n_vocab]
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .collect();
            // unwrap: a row holds n_vocab > 0 entries
            let top = *q.iter().max().unwrap();
            q.iter().filter(|&&v| top - v <= 1).count() > 1
        })
        .count();
    let n_rows = n_chunk * rows;
    let r = stdout(&kld(&p, &[], &["-f", TEXT]));
    let (mean, top) = (field(&r, "Mean    KLD"), field(&r, "Same top p"));
    let same = (top / 100.0 * n_rows as f64).round() as usize;
    println!(
        "round trip: mean KLD {mean}, same top p {top} % ({same} of {n_rows}; \
         {ambiguous} rows with the top two within a u16 step)"
    );
    assert!(mean.abs() < 1e-5, "{r}");
    assert!(same + ambiguous >= n_rows, "{r}");
    assert!(
        ambiguous * 100 < n_rows,
        "{ambiguous} of {n_rows} rows tie at the top"
    );
    assert_eq!(field(&r, "Maximum KLD").abs() < 1e-3, true, "{r}");

    // Two flag sets: the integer-dot products against the default, close but not equal.
    let v = base(dir.path(), "vnni.kld", &[("STRATA_VNNI", "1")]);
    let r = stdout(&kld(&v, &[], &[]));
    let (mean, top) = (field(&r, "Mean    KLD"), field(&r, "Same top p"));
    println!("STRATA_VNNI=1 base vs default: mean KLD {mean}, same top p {top} %");
    assert!(mean > 1e-6 && mean < 1e-2, "{r}");
    assert!(top >= 90.0, "{r}");

    // Bad files, each named with its field.
    let bad = |name: &str, b: &[u8]| {
        let q = dir.path().join(name);
        std::fs::write(&q, b).expect("write");
        q
    };
    let q = bad("magic.kld", b"not a base file at all");
    assert_error(&kld(&q, &[], &[]), &["magic.kld", "_logits_"]);
    let q = bad("short.kld", &bytes[..bytes.len() - 2]);
    assert_error(&kld(&q, &[], &[]), &["short.kld", "bytes", "header"]);
    let mut b = bytes.clone();
    b[12..16].copy_from_slice(&32000i32.to_le_bytes());
    let q = bad("vocab.kld", &b);
    assert_error(&kld(&q, &[], &[]), &["vocab.kld", "n_vocab"]);
    // n_vocab changed together with the length: the header is consistent, the model is not.
    let small_nv = 2 * 1000usize.div_ceil(2) + 4;
    let mut b = bytes[..20 + 4 * n_chunk * N_CTX].to_vec();
    b[12..16].copy_from_slice(&1000i32.to_le_bytes());
    for t in b[20..].chunks_exact_mut(4) {
        t.copy_from_slice(&(i32::from_le_bytes(t[..].try_into().unwrap()) % 1000).to_le_bytes());
    }
    b.resize(b.len() + 2 * n_chunk * rows * small_nv, 0);
    let q = bad("other_model.kld", &b);
    assert_error(
        &kld(&q, &[], &[]),
        &["other_model.kld", "n_vocab is 1000", "49152"],
    );
    let mut b = bytes.clone();
    b[20 + 4 * 5..24 + 4 * 5].copy_from_slice(&7i32.to_le_bytes());
    let q = bad("token.kld", &b);
    assert_error(
        &kld(&q, &[], &["-f", TEXT]),
        &["token.kld", "token mismatch", "at token 5"],
    );
    assert_error(
        &kld(&p, &[], &["--ctx", "256"]),
        &["--ctx 256", "n_ctx 128"],
    );
}
