//! `strata inspect` on the committed flash-mini (docs/flash-mini.md, issue 30) as a real child
//! process: the file `make setup` sha256-checks is read whole (architecture, the seeds' layer
//! pattern, hyper-connections, experts, the MTP block, the tokenizer, BF16 HC tensors), and then
//! refused by name for the part the engine does not run yet, with exit status 1.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_strata");

fn flash_mini() -> String {
    // make setup writes STRATA_MODEL_FLASH_MINI into .strata/env; the committed file otherwise
    std::env::var("STRATA_MODEL_FLASH_MINI").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/models/flash-mini-Q4_K_M.gguf"
        )
        .to_string()
    })
}

/// The value printed after `key` on its own `inspect` line, whitespace-trimmed.
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(key).map(str::trim))
        .unwrap_or_else(|| panic!("no `{key}` line in:\n{out}"))
}

#[test]
fn inspect_reads_flash_mini_then_refuses_the_mtp_block_by_name() {
    let path = flash_mini();
    let out = Command::new(BIN)
        .args(["inspect", &path])
        .output()
        .expect("run strata inspect");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}{stderr}");
    assert_eq!(field(&stdout, "architecture:"), "qwen4exp (Hf)");
    assert_eq!(field(&stdout, "layer_kinds"), "DDDQDDDQQ");
    assert_eq!(field(&stdout, "nextn_predict_layers"), "1");
    assert_eq!(field(&stdout, "hyper_connection.count"), "4");
    assert_eq!(field(&stdout, "hyper_connection.low_rank"), "64");
    assert_eq!(field(&stdout, "expert_count"), "32");
    assert_eq!(field(&stdout, "expert_used_count"), "4");
    assert_eq!(field(&stdout, "embedding_length"), "256");
    // 8x32h8: twice stage 9's attention heads (docs/flash-mini.md, "The answers alone, and
    // twice the heads"), so a stale file in .strata fails here
    assert_eq!(field(&stdout, "head_count"), "8");
    assert_eq!(field(&stdout, "head_count_kv"), "4");
    assert!(
        field(&stdout, "tokenizer:").contains("49152 tokens"),
        "{stdout}"
    );
    // every hyper-connection tensor stays BF16, as in the seeds' files
    assert!(field(&stdout, "BF16").starts_with("64 tensors"), "{stdout}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "inspect must refuse what the engine cannot run"
    );
    assert!(
        stderr.contains("nextn_predict_layers = 1") && stderr.contains("MTP"),
        "the refusal names the MTP key: {stderr}"
    );
}
