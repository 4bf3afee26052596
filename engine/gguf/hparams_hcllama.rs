//! `strata-hc-llama`'s own hyper-parameters: the hyper-connection geometry. Everything else is
//! llama's (the common keys in hparams.rs, under the `strata-hc-llama.` prefix). The keys are
//! named as llama.cpp names them for `qwen4exp` (`{arch}.hyper_connection.count`,
//! `{arch}.hyper_connection.low_rank`) and checked the same way (gguf/hparams_qwen4exp.rs).
//!
//! The architecture is Strata's own, written by `strata convert --to hc` (engine/convert/,
//! docs/convert.md); no llama.cpp release knows the name, and none must: the name is not in
//! llama.cpp 11434's src/llama-arch.cpp list, so a file of it is never mistaken for another
//! model with the same tensor names.

use super::error::{GgufError, Result};
use super::reader::Gguf;

/// The `general.architecture` string (and the metadata key prefix).
pub const ARCH: &str = "strata-hc-llama";

#[derive(Clone, Debug, PartialEq)]
pub struct HcLlamaParams {
    /// `hyper_connection.count`: S residual streams (> 1: one stream has nothing to mix).
    pub hc_count: u32,
    /// `hyper_connection.low_rank`: r, the read gate's rank (> 0).
    pub hc_rank: u32,
}

/// Reads the `strata-hc-llama.hyper_connection.*` keys; both are required.
pub fn read(g: &Gguf) -> Result<HcLlamaParams> {
    let count_key = format!("{ARCH}.hyper_connection.count");
    let rank_key = format!("{ARCH}.hyper_connection.low_rank");
    let hc_count = g.get_u32(&count_key)?;
    if hc_count <= 1 {
        return Err(bad(
            &count_key,
            hc_count,
            "must be greater than one (one stream has nothing to mix)",
        ));
    }
    let hc_rank = g.get_u32(&rank_key)?;
    if hc_rank == 0 {
        return Err(bad(&rank_key, hc_rank, "must be greater than zero"));
    }
    Ok(HcLlamaParams { hc_count, hc_rank })
}

fn bad(key: &str, value: u32, reason: &str) -> GgufError {
    GgufError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}
