//! The `strata` binary: the TUI (no subcommand), the engine process (`strata engine`), and the
//! command-line tools.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about = "Terminal chat with a built-in SYCL LLM engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List SYCL platforms and devices (optionally split the CPU device into sub-devices).
    Devices(cmd::devices::Args),
    /// Show a GGUF file's architecture, hyper-parameters, tokenizer and tensors.
    Inspect(cmd::inspect::Args),
    /// Kernel-family parity self-tests and micro-benchmarks (`strata parity mmvq-kreg --selftest`).
    Parity(cmd::parity::Args),
}

fn main() {
    // SYCL's environment (ICD path, kernel disk cache) must be set before any thread exists.
    strata::sycl::runtime::init();
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Devices(a)) => cmd::devices::run(a),
        Some(Command::Inspect(a)) => cmd::inspect::run(a),
        Some(Command::Parity(a)) => cmd::parity::run(a),
        None => Err(anyhow::anyhow!(
            "the TUI is not built yet; see `strata --help`"
        )),
    };
    if let Err(e) = result {
        eprintln!("strata: {e:#}");
        std::process::exit(1);
    }
}
