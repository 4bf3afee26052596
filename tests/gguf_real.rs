//! The real models: strata's reader against the independent gguf-py reader (every key and value,
//! every tensor's type, dims and data offset), the hyper-parameters, and `strata inspect` run as
//! the real binary. Models come from `make setup`; a missing model fails the test.

mod gguf_common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value as Json;
use strata::gguf::{Arch, ArchParams, Gguf, HParams};

fn model(env: &str) -> PathBuf {
    let p = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        p.exists(),
        "{env} points to {} which does not exist: run `make setup`",
        p.display()
    );
    p
}

fn inspect_json(path: &PathBuf) -> Json {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["inspect", "--json", "--tensors"])
        .arg(path)
        .output()
        .expect("run strata");
    assert!(
        out.status.success(),
        "strata inspect failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("inspect --json prints JSON")
}

/// Checks inspect's numbers against gguf-py's dump.
fn check_inspect(path: &PathBuf, py: &Json) {
    let j = inspect_json(path);
    let pts = py["tensors"].as_array().unwrap();
    assert_eq!(
        j["tensor_count"].as_u64(),
        Some(pts.len() as u64),
        "tensor count"
    );
    let py_total: u64 = pts.iter().map(|t| t["n_bytes"].as_u64().unwrap()).sum();
    assert_eq!(
        j["tensor_bytes"].as_u64(),
        Some(py_total),
        "total tensor bytes"
    );
    assert_eq!(j["file_size"].as_u64(), py["file_size"].as_u64());
    assert_eq!(j["metadata_count"].as_u64(), py["kv_count"].as_u64());
    let by_type = j["by_type"].as_object().unwrap();
    for (ty, e) in by_type {
        let py_n = pts
            .iter()
            .filter(|t| t["type"].as_str() == Some(ty))
            .count() as u64;
        let py_b: u64 = pts
            .iter()
            .filter(|t| t["type"].as_str() == Some(ty))
            .map(|t| t["n_bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(e["count"].as_u64(), Some(py_n), "{ty} count");
        assert_eq!(e["bytes"].as_u64(), Some(py_b), "{ty} bytes");
    }
    let listed = j["tensors"].as_array().unwrap();
    for (a, b) in listed.iter().zip(pts) {
        assert_eq!(a["name"], b["name"]);
        assert_eq!(a["offset"], b["data_offset"], "{}", a["name"]);
    }
    let meta = &py["metadata"];
    let tok = &j["tokenizer"];
    let n_tokens = meta["tokenizer.ggml.tokens"]["value"]
        .as_array()
        .unwrap()
        .len() as u64;
    assert_eq!(tok["vocab_size"].as_u64(), Some(n_tokens));
    for name in ["bos", "eos"] {
        let id = meta[format!("tokenizer.ggml.{name}_token_id")]["value"]
            .as_u64()
            .unwrap();
        assert_eq!(tok["special"][name]["id"].as_u64(), Some(id));
        let text = &meta["tokenizer.ggml.tokens"]["value"][id as usize];
        assert_eq!(&tok["special"][name]["text"], text, "{name} text");
    }
    let tmpl = meta
        .get("tokenizer.chat_template")
        .map(|t| t["value"].as_str().unwrap().len() as u64);
    assert_eq!(j["chat_template"]["length"].as_u64(), tmpl);
    match meta.get("tokenizer.ggml.merges") {
        Some(m) => assert_eq!(
            tok["merges"].as_u64(),
            Some(m["value"].as_array().unwrap().len() as u64)
        ),
        None => assert!(tok["merges"].is_null()),
    }
    let arch = meta["general.architecture"]["value"].as_str().unwrap();
    assert_eq!(j["architecture"].as_str(), Some(arch));
    for k in [
        "block_count",
        "embedding_length",
        "context_length",
        "feed_forward_length",
    ] {
        assert_eq!(
            j["hparams"][k],
            meta[format!("{arch}.{k}")]["value"],
            "hparams.{k}"
        );
    }
}

/// The hyper-parameters against the raw metadata values gguf-py read.
fn check_hparams(h: &HParams, py: &Json, arch: &str) {
    let m = &py["metadata"];
    let u = |k: &str| {
        m[format!("{arch}.{k}")]["value"]
            .as_u64()
            .unwrap_or_else(|| panic!("{arch}.{k} in gguf-py dump")) as u32
    };
    let f = |k: &str| m[format!("{arch}.{k}")]["value"].as_f64().unwrap();
    assert_eq!(h.context_length, u("context_length"));
    assert_eq!(h.embedding_length, u("embedding_length"));
    assert_eq!(h.block_count, u("block_count"));
    assert_eq!(h.feed_forward_length, u("feed_forward_length"));
    assert_eq!(h.head_count, u("attention.head_count"));
    assert_eq!(h.head_count_kv, u("attention.head_count_kv"));
    assert_eq!(f64::from(h.rope_freq_base), f("rope.freq_base"));
    assert_eq!(f64::from(h.rms_eps), f("attention.layer_norm_rms_epsilon"));
    let n_tokens = m["tokenizer.ggml.tokens"]["value"]
        .as_array()
        .unwrap()
        .len() as u32;
    assert_eq!(h.vocab_size, n_tokens);
    let embd = py["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "token_embd.weight")
        .unwrap();
    assert_eq!(
        embd["shape"][0].as_u64(),
        Some(u64::from(h.embedding_length))
    );
    assert_eq!(embd["shape"][1].as_u64(), Some(u64::from(h.vocab_size)));
}

#[test]
fn smollm2_agrees_with_gguf_py() {
    let path = model(strata::paths::SMOLLM2_ENV);
    let g = Gguf::open(&path).unwrap();
    let py = gguf_common::assert_matches_python(&g, &path);
    let h = HParams::from_gguf(&g).unwrap();
    assert_eq!(h.arch, Arch::Llama);
    check_hparams(&h, &py, "llama");
    // Keys SmolLM2 has that gemma3 lacks, and the defaults llama.cpp would derive.
    assert_eq!(
        h.vocab_size,
        py["metadata"]["llama.vocab_size"]["value"]
            .as_u64()
            .unwrap() as u32
    );
    assert_eq!(
        h.rope_dimension_count,
        py["metadata"]["llama.rope.dimension_count"]["value"]
            .as_u64()
            .unwrap() as u32
    );
    assert_eq!(h.key_length, h.embedding_length / h.head_count);
    assert_eq!(h.extra, ArchParams::Llama);
    // Every tensor's data view has its declared size and lies in the file.
    let mut total = 0;
    for t in g.tensors() {
        total += g.tensor_data(t).unwrap().len() as u64;
    }
    assert_eq!(total, g.tensors().iter().map(|t| t.n_bytes).sum::<u64>());
    check_inspect(&path, &py);
}

#[test]
fn gemma3_agrees_with_gguf_py() {
    let path = model(strata::paths::GEMMA3_ENV);
    let g = Gguf::open(&path).unwrap();
    let py = gguf_common::assert_matches_python(&g, &path);
    let h = HParams::from_gguf(&g).unwrap();
    assert_eq!(h.arch, Arch::Gemma3);
    check_hparams(&h, &py, "gemma3");
    let m = &py["metadata"];
    assert_eq!(
        u64::from(h.key_length),
        m["gemma3.attention.key_length"]["value"].as_u64().unwrap()
    );
    assert_eq!(
        u64::from(h.value_length),
        m["gemma3.attention.value_length"]["value"]
            .as_u64()
            .unwrap()
    );
    let p = h.gemma3().expect("gemma3 params");
    assert_eq!(
        u64::from(p.sliding_window),
        m["gemma3.attention.sliding_window"]["value"]
            .as_u64()
            .unwrap()
    );
    // Not stored in the file: llama.cpp's gemma3 constants.
    assert_eq!(
        (p.sliding_window_pattern, p.rope_freq_base_local),
        (6, 10000.0)
    );
    let global: Vec<u32> = (0..h.block_count).filter(|&il| !p.is_sliding(il)).collect();
    assert_eq!(global, vec![5, 11, 17]);
    check_inspect(&path, &py);
}
