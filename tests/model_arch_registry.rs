//! The architecture seam's refusals, on the real models' bytes: a file whose
//! `general.architecture` no module declares is refused by the config, the engine, the
//! reference and `strata run` with one error naming it and the supported ones (never run as
//! llama); a tensor the architecture's parts declare that is missing, or of the wrong shape, is
//! refused before anything is loaded, naming the tensor and the shape it should have.

mod gguf_common;

use gguf_common::{after_gguf_string, put_u64, tensor_fields};
use strata::gguf::Gguf;
use strata::model::{Engine, EngineOptions, ModelConfig};
use strata::reference::RefModel;

fn model_bytes(env: &str) -> Vec<u8> {
    let p = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn config_error(bytes: Vec<u8>) -> String {
    let g = Gguf::from_bytes(bytes).expect("the file itself stays valid");
    match ModelConfig::from_gguf(&g) {
        Ok(c) => panic!("accepted as {}", c.arch.name()),
        Err(e) => e.to_string(),
    }
}

/// SmolLM2's file with `general.architecture` = "mamba" (the same length as "llama").
fn mamba() -> Vec<u8> {
    let mut b = model_bytes(strata::paths::SMOLLM2_ENV);
    // the value: its type (u32), the string's length (u64), its bytes
    let at = after_gguf_string(&b, "general.architecture") + 4 + 8;
    assert_eq!(&b[at..at + 5], b"llama");
    b[at..at + 5].copy_from_slice(b"mamba");
    b
}

#[test]
fn an_unknown_architecture_is_refused_naming_it_and_the_supported_ones() {
    let supported = strata::model::arch::supported().join(", ");
    assert_eq!(supported, "llama, gemma3, qwen4exp, strata-hc-llama");
    let want = format!("general.architecture \"mamba\" is not supported (supported: {supported})");
    let msg = config_error(mamba());
    println!("config: {msg}");
    assert!(msg.contains(&want), "{msg}");

    strata::sycl::runtime::init();
    let g = Gguf::from_bytes(mamba()).expect("valid");
    let dev = strata::sycl::cpu_device().expect("the CPU SYCL device");
    let card = strata::sycl::Card::on(dev, false).expect("a card");
    let opts = EngineOptions {
        n_ctx: 64,
        ..EngineOptions::default()
    };
    let msg = match Engine::from_gguf(&g, card, &opts) {
        Ok(_) => panic!("the engine ran a mamba file"),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains(&want), "engine: {msg}");
    let msg = match RefModel::load(&g, true) {
        Ok(_) => panic!("the reference ran a mamba file"),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains(&want), "reference: {msg}");

    // the command line: exit 1, one line, no panic
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("mamba.gguf");
    std::fs::write(&path, mamba()).expect("write the file");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["run", "-n", "1", "-p", "hi", "-m"])
        .arg(&path)
        .output()
        .expect("run strata");
    let err = String::from_utf8_lossy(&out.stderr);
    println!("strata run: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&want) && !err.contains("panicked"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty(), "nothing generated");
}

#[test]
fn a_missing_tensor_is_refused_naming_it() {
    let mut b = model_bytes(strata::paths::GEMMA3_ENV);
    // rename it (same length) so the file no longer holds it
    let name = "blk.3.attn_q_norm.weight";
    let at = after_gguf_string(&b, name) - name.len();
    b[at + name.len() - 8] = b'X'; // "..._norX.weight"
    let msg = config_error(b);
    println!("{msg}");
    assert!(
        msg.contains(&format!(
            "tensor \"{name}\": missing; gemma3 declares it [256] = [head_dim]"
        )),
        "{msg}"
    );
}

#[test]
fn a_tensor_of_the_wrong_shape_is_refused_naming_it() {
    let mut b = model_bytes(strata::paths::SMOLLM2_ENV);
    let name = "blk.2.ffn_up.weight";
    let (_, dims_at, _, _) = tensor_fields(&b, name);
    put_u64(&mut b, dims_at + 8, 1535); // [n_embd, n_ff] = [576, 1536] -> [576, 1535]
    let msg = config_error(b);
    println!("{msg}");
    assert!(
        msg.contains(&format!(
            "tensor \"{name}\": dims [576, 1535], expected [576, 1536] = [n_embd, n_ff] (llama)"
        )),
        "{msg}"
    );
}
