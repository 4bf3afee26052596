//! Hyper-parameters the per-layer state is sized from, corrupted in the real models' bytes:
//! a clear error naming the key before anything is allocated, never an abort. (A block_count of
//! 2^32 - 1 asked for 64 GB and aborted the engine process; 2^30 on Gemma 3 took 24 GB before
//! the system's OOM killer stopped it.)

mod gguf_common;

use gguf_common::{after_gguf_string, put_u32};
use strata::gguf::Gguf;
use strata::model::ModelConfig;

fn model_bytes(env: &str) -> Vec<u8> {
    let p = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{e}"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `key`'s u32 value set to `v` (the value follows the key and its 4-byte type id).
fn patched(bytes: &[u8], key: &str, v: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let at = after_gguf_string(&b, key) + 4;
    put_u32(&mut b, at, v);
    b
}

fn config_error(bytes: Vec<u8>) -> String {
    let g = Gguf::from_bytes(bytes).expect("the metadata itself stays valid");
    match ModelConfig::from_gguf(&g) {
        Ok(c) => panic!("accepted: {} layers", c.n_layer),
        Err(e) => e.to_string(),
    }
}

#[test]
fn block_count_beyond_the_files_blocks_is_an_error_naming_the_key() {
    let smol = model_bytes(strata::paths::SMOLLM2_ENV);
    for v in [u32::MAX, 1 << 30, 31] {
        let msg = config_error(patched(&smol, "llama.block_count", v));
        println!("llama.block_count = {v}: {msg}");
        assert!(msg.contains(&format!("llama.block_count = {v}")), "{msg}");
        assert!(msg.contains("30 blocks (blk.0 .. blk.29)"), "{msg}");
    }
    let gemma = model_bytes(strata::paths::GEMMA3_ENV);
    let msg = config_error(patched(&gemma, "gemma3.block_count", 1 << 30));
    println!("gemma3.block_count = 2^30: {msg}");
    assert!(msg.contains("18 blocks"), "{msg}");
    // the real counts still load
    for (b, key, n) in [
        (&smol, "llama.block_count", 30),
        (&gemma, "gemma3.block_count", 18),
    ] {
        let g = Gguf::from_bytes(patched(b, key, n)).expect("valid");
        assert_eq!(
            ModelConfig::from_gguf(&g).expect("loads").n_layer,
            n as usize
        );
    }
}

#[test]
fn a_sliding_window_past_i32_is_an_error_naming_the_key() {
    let gemma = model_bytes(strata::paths::GEMMA3_ENV);
    let msg = config_error(patched(&gemma, "gemma3.attention.sliding_window", u32::MAX));
    println!("{msg}");
    assert!(
        msg.contains("gemma3.attention.sliding_window = 4294967295"),
        "{msg}"
    );
}
