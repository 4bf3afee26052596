//! `cargo bench --bench vs_llamacpp [-- ARGS]`: Strata vs llama.cpp on this machine, in one run
//! (pp512 / tg128 for both models, and greedy decode on a fixed prompt with and without
//! `--spec`), medians over interleaved rounds, with the ratio. The work is done by
//! scripts/bench_vs_llamacpp.py (which needs no Rust); this target makes it a `benches/` harness.
//! llama.cpp comes from scripts/llamacpp_setup.sh (optional): without it, Strata's figures only.
//! ARGS go to the script, e.g. `-- --rounds 3 -r 3 --spec 4`.

use std::path::Path;
use std::process::{exit, Command};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // cargo bench passes --bench to harness = false targets: not the script's business
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let status = Command::new("bash")
        .arg(root.join("scripts/bench_vs_llamacpp.sh"))
        .args(&args)
        .current_dir(root)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("scripts/bench_vs_llamacpp.sh failed: {s}");
            exit(s.code().unwrap_or(1));
        }
        Err(e) => {
            eprintln!("running bash scripts/bench_vs_llamacpp.sh: {e}");
            exit(1);
        }
    }
}
