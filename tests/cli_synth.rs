//! `strata synth` through the real binary: the presets reproduce the sha256 that
//! tests/data/qwen4exp/README.md recorded when llama.cpp's logits were dumped (so the dumps still
//! describe the files a test regenerates), the same flags give the same bytes, overrides land in
//! the file, the tokenizer gives the ids llama.cpp gave, and bad values name their flag.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strata::gguf::Gguf;

const BIN: &str = env!("CARGO_BIN_EXE_strata");

fn strata(args: &[&str]) -> Output {
    let out = Command::new(BIN).args(args).output().expect("run strata");
    println!(
        "strata {}: {}\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/qwen4exp")
}

/// (geometry, command arguments after `strata`, sha256) from the README's table.
fn recorded() -> Vec<(String, Vec<String>, String)> {
    let readme = std::fs::read_to_string(data_dir().join("README.md")).expect("the README");
    let rows: Vec<_> = readme
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("`strata synth"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let cmd = cells[2].trim_matches('`');
            let args = cmd.split_whitespace().skip(1).map(str::to_string).collect();
            (
                cells[1].to_string(),
                args,
                cells[3].trim_matches('`').to_string(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 3, "three geometries in the README");
    rows
}

/// Runs a recorded command with its `-o` pointed into `dir`; returns the file and the sha256
/// the command printed.
fn synth_into(dir: &Path, args: &[String]) -> (PathBuf, String) {
    let mut args = args.to_vec();
    let o = args
        .iter()
        .position(|a| a == "-o")
        .expect("the command has -o");
    let file = dir.join(&args[o + 1]);
    args[o + 1] = file.display().to_string();
    let out = strata(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let printed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sha256 "))
        .expect("a sha256 line")
        .to_string();
    (file, printed)
}

#[test]
fn presets_reproduce_the_recorded_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (geometry, args, sha) in recorded() {
        let (file, printed) = synth_into(dir.path(), &args);
        let bytes = std::fs::read(&file).expect("the written file");
        assert_eq!(
            printed,
            strata::synth::sha256_hex(&bytes),
            "{geometry}: printed digest"
        );
        assert_eq!(
            printed, sha,
            "{geometry}: the writer no longer gives the file the dumps were made from: \
             rerun scripts/llama-cpp/dump.sh"
        );
        std::fs::remove_file(&file).expect("remove");
    }
}

#[test]
fn same_flags_same_bytes_and_overrides_land() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = |n: &str| dir.path().join(n).display().to_string();
    let args = |o: &str| {
        vec![
            "synth",
            "--preset",
            "tiny",
            "--seed",
            "9",
            "--layers",
            "3",
            "--n-embd",
            "128",
            "--rank",
            "32",
            "--heads",
            "2",
            "--kv-heads",
            "1",
            "--head-dim",
            "64",
            "--experts",
            "4",
            "--experts-used",
            "3",
            "--expert-ff",
            "48",
            "--vocab",
            "400",
            "--hc-type",
            "bf16",
            "--fused-gate-up",
            "--layer-kinds",
            "ada",
            "-o",
        ]
        .into_iter()
        .map(str::to_string)
        .chain([o.to_string()])
        .collect::<Vec<_>>()
    };
    let run = |o: &str| {
        let a = args(o);
        let out = strata(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success());
    };
    run(&path("a.gguf"));
    run(&path("b.gguf"));
    let (a, b) = (
        std::fs::read(path("a.gguf")).expect("a"),
        std::fs::read(path("b.gguf")).expect("b"),
    );
    assert!(a == b, "same flags, different bytes");

    let g = Gguf::open(path("a.gguf")).expect("the reader accepts it");
    let k = |s: &str| format!("qwen4exp.{s}");
    for (key, want) in [
        ("block_count", 3),
        ("embedding_length", 128),
        ("hyper_connection.low_rank", 32),
        ("attention.head_count", 2),
        ("attention.head_count_kv", 1),
        ("attention.key_length", 64),
        ("rope.dimension_count", 16),
        ("expert_count", 4),
        ("expert_used_count", 3),
        ("expert_feed_forward_length", 48),
    ] {
        assert_eq!(g.get_u32(&k(key)).expect(key), want, "{key}");
    }
    assert_eq!(
        g.get_i32_array(&k("rope.dimension_sections"))
            .expect("sections"),
        [3, 3, 2, 0]
    );
    assert_eq!(
        g.get_str_array("tokenizer.ggml.tokens")
            .expect("tokens")
            .len(),
        400
    );
    let t = g.tensor("blk.0.ffn_gate_up_exps.weight").expect("fused");
    assert_eq!(t.dims, [128, 96, 4]);
    assert_eq!(
        g.tensor("blk.0.hc_attn_down.weight").expect("hc").ggml_type,
        strata::gguf::GgmlType::BF16
    );
    assert!(
        g.tensor("blk.1.ssm_out.weight").is_ok(),
        "layer 1 is DeltaNet"
    );
    assert!(
        g.tensor("blk.1.attn_q.weight").is_err(),
        "and has no attention"
    );
}

#[test]
fn tokenizer_gives_llama_cpps_ids() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, args, _) = recorded().into_iter().next().expect("tiny");
    let (file, _) = synth_into(dir.path(), &args);
    for i in 0..4 {
        let bytes = std::fs::read(data_dir().join(format!("tiny-{i}.logits"))).expect("dump");
        let n = bytes.iter().position(|&b| b == b'\n').expect("header line");
        let header: serde_json::Value = serde_json::from_slice(&bytes[..n]).expect("JSON header");
        let prompt = header["prompt"].as_str().expect("prompt");
        let theirs: Vec<u64> = header["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .map(|v| v.as_u64().expect("id"))
            .collect();
        let out = strata(&[
            "tokenize",
            "-m",
            &file.display().to_string(),
            "--text",
            prompt,
            "--ids",
        ]);
        assert!(out.status.success());
        let ours: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|s| s.parse().expect("id"))
            .collect();
        assert_eq!(ours, theirs, "prompt {i}: {prompt:?}");
        let rows = header["rows"].as_u64().expect("rows") as usize;
        assert_eq!(
            bytes.len() - n - 1,
            rows * 320 * 4,
            "prompt {i}: rows x n_vocab f32"
        );
    }
}

#[test]
fn bad_values_name_their_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let o = dir.path().join("x.gguf").display().to_string();
    for (extra, flag) in [
        (&["--streams", "1"][..], "--streams"),
        (&["--rank", "0"], "--rank"),
        (&["--experts", "4", "--experts-used", "5"], "--experts-used"),
        (&["--head-dim", "40"], "--head-dim"),
        (&["--kv-heads", "3"], "--kv-heads"),
        (&["--hc-type", "q4_0"], "--hc-type"),
        (&["--mat-type", "q8_0", "--expert-ff", "48"], "--mat-type"),
        (&["--rope-sections", "1,2,3"], "--rope-sections"),
        (&["--vocab", "100"], "--vocab"),
        (&["--shared-ff", "0"], "--shared-ff"),
        (&["--layer-kinds", "ax"], "--layer-kinds"),
        (&["--preset", "huge"], "--preset"),
    ] {
        let mut args = vec!["synth", "-o", o.as_str()];
        args.extend_from_slice(extra);
        let out = strata(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with(&format!("strata: {flag}")),
            "{flag}: {last}"
        );
        assert!(!Path::new(&o).exists(), "{flag}: no file is written");
    }
}
