//! `strata convert --to hc` through the real binary: the default conversion is the file whose
//! sha256 scripts/setup.sh records (same flags, same bytes; another seed, other bytes), its keys
//! and tensors are what docs/convert.md says, bad values name their flag, a converted file with a
//! bad key or a missing mixer tensor is refused naming it, and `strata run`'s greedy text on it
//! is the same with speculation and with the layers split over two cards. `--to f16` writes
//! llama-quantize's F16 file byte for byte (the digest tests/data/greedy/llamacpp.json records
//! from llama.cpp's own tool).

mod support;

use std::path::Path;
use std::process::{Command, Output};

use strata::gguf::{GgmlType, Gguf, GgufWriter, HParams};
use strata::model::ModelConfig;
use support::fs::TempFile;

const BIN: &str = env!("CARGO_BIN_EXE_strata");

fn strata(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("STRATA_HC_Q8")
        .env_remove("STRATA_GR_FUSED")
        .output()
        .expect("run strata");
    println!(
        "strata {}: {}\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn smollm2() -> String {
    let p = strata::paths::model_path(strata::paths::SMOLLM2_ENV).unwrap_or_else(|e| panic!("{e}"));
    p.display().to_string()
}

/// Converts SmolLM2 with `extra` flags into `name`; returns the file and the printed sha256.
fn convert(name: &str, extra: &[&str]) -> (TempFile, String) {
    convert_to("hc", name, extra)
}

fn convert_to(to: &str, name: &str, extra: &[&str]) -> (TempFile, String) {
    let out_path = TempFile::new("strata-cli-convert-", name);
    let (src, o) = (smollm2(), out_path.display().to_string());
    let mut args = vec!["convert", "--from", &src, "--to", to, "-o", &o];
    args.extend_from_slice(extra);
    let out = strata(&args);
    assert!(out.status.success(), "convert failed");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let sha = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sha256 "))
        .expect("a sha256 line")
        .to_string();
    assert_eq!(
        strata::synth::sha256_hex(&std::fs::read(&out_path).expect("read")),
        sha,
        "the printed digest is not the file's"
    );
    (out_path, sha)
}

/// The digest scripts/setup.sh checks its converted SmolLM2 against.
fn recorded_sha() -> String {
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup.sh");
    let text = std::fs::read_to_string(setup).expect("scripts/setup.sh");
    text.lines()
        .find_map(|l| l.strip_prefix("SMOL_HC_SHA256="))
        .expect("SMOL_HC_SHA256= in scripts/setup.sh")
        .trim()
        .to_string()
}

#[test]
fn the_default_conversion_is_the_file_setup_records() {
    let (p, sha) = convert("default.gguf", &[]);
    assert_eq!(
        sha,
        recorded_sha(),
        "the default conversion's bytes changed"
    );
    let (_, again) = convert(
        "again.gguf",
        &["--streams", "4", "--rank", "64", "--seed", "1"],
    );
    assert_eq!(again, sha, "the same options gave other bytes");
    let (_, seed2) = convert("seed2.gguf", &["--seed", "2"]);
    assert_ne!(seed2, sha, "--seed changed nothing");

    let g = Gguf::open(&p).expect("open");
    let src = Gguf::open(smollm2()).expect("open SmolLM2");
    let hp = HParams::from_gguf(&g).expect("hyper-parameters");
    let hc = hp.hc_llama().expect("strata-hc-llama parameters");
    assert_eq!(g.architecture().expect("arch"), "strata-hc-llama");
    assert_eq!((hc.hc_count, hc.hc_rank), (4, 64));
    // every source tensor but the 61 norms, and 4 per layer site + 3 at the head
    let n_layer = hp.block_count as usize;
    assert_eq!(
        g.tensors().len(),
        src.tensors().len() - (2 * n_layer + 1) + 2 * n_layer * 4 + 3
    );
    for t in src.tensors() {
        let copied = g.tensor_info(&t.name);
        if t.name.ends_with("_norm.weight") {
            assert!(copied.is_none(), "{} kept", t.name);
        } else {
            let c = copied.unwrap_or_else(|| panic!("{} dropped", t.name));
            assert_eq!((&c.dims, c.ggml_type), (&t.dims, t.ggml_type), "{}", t.name);
            assert_eq!(g.tensor_data(c).unwrap(), src.tensor_data(t).unwrap());
        }
    }
    let ty = |n: &str| g.tensor(n).expect(n).ggml_type;
    for site in ["blk.0.hc_attn", "blk.29.hc_ffn", "output_hc"] {
        assert_eq!(ty(&format!("{site}_norm.weight")), GgmlType::F32);
        assert_eq!(ty(&format!("{site}_down.weight")), GgmlType::BF16);
        assert_eq!(ty(&format!("{site}_up.weight")), GgmlType::BF16);
    }
    assert_eq!(ty("blk.7.hc_ffn_inject.weight"), GgmlType::BF16);
    assert!(g.tensor_info("output_hc_inject.weight").is_none());
    // gamma = 2 w in each of the 4 streams
    let w = src.get_f32_tensor("blk.3.ffn_norm.weight");
    let gamma = g.get_f32_tensor("blk.3.hc_ffn_norm.weight");
    assert_eq!(gamma.len(), 4 * w.len());
    for (k, &x) in gamma.iter().enumerate() {
        assert_eq!(x, 2.0 * w[k % w.len()], "gamma[{k}]");
    }
    ModelConfig::from_gguf(&g).expect("the tensor table accepts the file");
}

trait F32Tensor {
    fn get_f32_tensor(&self, name: &str) -> Vec<f32>;
}

impl F32Tensor for Gguf {
    fn get_f32_tensor(&self, name: &str) -> Vec<f32> {
        let t = self.tensor(name).expect(name);
        assert_eq!(t.ggml_type, GgmlType::F32, "{name}");
        self.tensor_data(t)
            .expect(name)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }
}

#[test]
fn to_f16_writes_llama_quantizes_file() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/greedy/llamacpp.json");
    let data: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data).expect("the data file")).expect("JSON");
    let want = data["models"][strata::paths::SMOLLM2_ENV]["f16"]["sha256"]
        .as_str()
        .expect("the F16 file's sha256 in the data");
    let (path, sha) = convert_to("f16", "smollm2-f16.gguf", &[]);
    let g = Gguf::open(&path).expect("the F16 file reads back");
    let types: std::collections::BTreeSet<GgmlType> =
        g.tensors().iter().map(|t| t.ggml_type).collect();
    std::fs::remove_file(&path).expect("remove the F16 file");
    assert_eq!(types, [GgmlType::F32, GgmlType::F16].into_iter().collect());
    assert_eq!(
        sha, want,
        "llama-quantize --allow-requantize SMOLLM2 OUT F16 wrote other bytes"
    );
}

fn fails_naming(args: &[&str], want: &str) {
    let out = strata(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(
        err.contains(want),
        "{args:?}: {err:?} does not name {want:?}"
    );
}

#[test]
fn bad_values_name_their_flag() {
    let bad = TempFile::new("strata-cli-convert-", "bad.gguf");
    let o = bad.display().to_string();
    let src = smollm2();
    let base = ["convert", "--from", &src, "--to", "hc", "-o", &o];
    let with = |extra: &[&'static str]| -> Vec<String> {
        base.iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    };
    for (extra, want) in [
        (&["--streams", "1"][..], "--streams 1"),
        (&["--rank", "0"][..], "--rank 0"),
        (&["--perturb=-1"][..], "--perturb -1"),
        (&["--perturb", "NaN"][..], "--perturb NaN"),
    ] {
        let args = with(extra);
        fails_naming(&args.iter().map(String::as_str).collect::<Vec<_>>(), want);
    }
    fails_naming(
        &["convert", "--from", &src, "--to", "moe", "-o", &o],
        "--to",
    );
    let gemma = strata::paths::model_path(strata::paths::GEMMA3_ENV)
        .unwrap_or_else(|e| panic!("{e}"))
        .display()
        .to_string();
    fails_naming(
        &["convert", "--from", &gemma, "--to", "hc", "-o", &o],
        "general.architecture is \"gemma3\"; --to hc converts \"llama\" files",
    );
    fails_naming(
        &["convert", "--from", "/nope.gguf", "--to", "hc", "-o", &o],
        "cannot read /nope.gguf",
    );
    assert!(!Path::new(&o).exists(), "a refused conversion left a file");
}

/// `g` again with `key` set to `value` (None: left out) and without the tensor `drop`.
fn rewrite(g: &Gguf, key: &str, value: Option<u32>, drop: &str) -> Gguf {
    let mut w = GgufWriter::new();
    for (k, v) in g.metadata() {
        match (k == key, value) {
            (true, Some(x)) => w.set(k, x),
            (true, None) => continue,
            (false, _) => w.set(k, v.clone()),
        }
        .expect("set");
    }
    for t in g.tensors() {
        if t.name != drop {
            let data = g.tensor_data(t).expect("data").to_vec();
            w.add_tensor(&t.name, &t.dims, t.ggml_type, data)
                .expect("tensor");
        }
    }
    Gguf::from_bytes(w.to_bytes().expect("bytes")).expect("a valid file")
}

#[test]
fn a_bad_key_or_a_missing_mixer_tensor_is_refused_naming_it() {
    let (p, _) = convert("keys.gguf", &["--perturb", "0"]);
    let g = Gguf::open(&p).expect("open");
    let count = "strata-hc-llama.hyper_connection.count";
    let rank = "strata-hc-llama.hyper_connection.low_rank";
    for (key, value, want) in [
        (count, Some(1), "must be greater than one"),
        (rank, Some(0), "must be greater than zero"),
        (rank, None, rank),
    ] {
        let bad = rewrite(&g, key, value, "");
        let msg = HParams::from_gguf(&bad).expect_err("accepted").to_string();
        println!("{key} = {value:?}: {msg}");
        assert!(msg.contains(key) && msg.contains(want), "{msg}");
    }
    let bad = rewrite(&g, "", None, "blk.3.hc_ffn_up.weight");
    let msg = ModelConfig::from_gguf(&bad)
        .expect_err("accepted")
        .to_string();
    println!("missing tensor: {msg}");
    assert!(
        msg.contains("blk.3.hc_ffn_up.weight") && msg.contains("[64, 2304]"),
        "{msg}"
    );
}

/// `strata run`'s greedy text on `model` (64 tokens of a chat reply).
fn run_text(model: &Path, prompt: &str, extra: &[&str]) -> String {
    let m = model.display().to_string();
    let mut args = vec![
        "run", "-m", &m, "--chat", "-p", prompt, "-n", "64", "--temp", "0",
    ];
    args.extend_from_slice(extra);
    let out = strata(&args);
    assert!(out.status.success(), "strata run failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn speculation_and_the_card_split_keep_the_greedy_text() {
    let (p, _) = convert("spec.gguf", &[]);
    for prompt in [
        "What are three tips for staying healthy?",
        "Write a short poem about the sea.",
    ] {
        let plain = run_text(&p, prompt, &["--spec", "0"]);
        assert!(plain.split_whitespace().count() > 20, "{plain:?}");
        assert_eq!(plain, run_text(&p, prompt, &["--spec", "4"]), "--spec 4");
        assert_eq!(
            plain,
            run_text(&p, prompt, &["--spec", "4", "--split-cpu", "2"]),
            "--split-cpu 2"
        );
    }
}
