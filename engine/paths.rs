//! Where things live: the SYCL runtime root, the real models installed by `scripts/setup.sh`,
//! and the per-user cache/config/data/state directories.

use std::path::PathBuf;

/// The environment variable naming a model installed by setup, e.g. `STRATA_MODEL_SMOLLM2`.
pub const SMOLLM2_ENV: &str = "STRATA_MODEL_SMOLLM2";
pub const GEMMA3_ENV: &str = "STRATA_MODEL_GEMMA3";
/// SmolLM2 converted to hyper-connection streams by setup (`strata convert --to hc`).
pub const SMOLLM2_HC_ENV: &str = "STRATA_MODEL_SMOLLM2_HC";

/// The project root baked in at build time, used to find `.strata/env` when the variables are unset.
pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Reads `KEY` from the environment, else from `<project>/.strata/env` (written by setup).
pub fn setup_var(key: &str) -> Option<String> {
    if let Ok(v) = std::env::var(key) {
        if !v.is_empty() {
            return Some(v);
        }
    }
    let text = std::fs::read_to_string(project_root().join(".strata/env")).ok()?;
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

/// Path of a setup-installed model, or an error telling how to get it.
pub fn model_path(env_key: &str) -> Result<PathBuf, String> {
    setup_var(env_key).map(PathBuf::from).ok_or_else(|| {
        format!("{env_key} is not set and .strata/env has no entry: run `make setup` (scripts/setup.sh) first")
    })
}
