//! The `strata` binary: the TUI (no subcommand), the engine process (`strata engine`), and the
//! command-line tools.

mod ab;
mod client;
mod cmd;
mod history;
mod presets;
mod tui;

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
    /// TUI: start with this preset (a name from `config/` or the user's presets, or a .toml path).
    #[arg(long, value_name = "NAME")]
    preset: Option<String>,
    /// TUI: reopen a saved conversation (the latest without ID).
    #[arg(long, value_name = "ID", num_args = 0..=1)]
    resume: Option<Option<String>>,
    /// TUI: use this GGUF model instead of the preset's.
    #[arg(long, value_name = "PATH")]
    model: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List SYCL platforms and devices (optionally split the CPU device into sub-devices).
    Devices(cmd::devices::Args),
    /// Show a GGUF file's architecture, hyper-parameters, tokenizer and tensors.
    Inspect(cmd::inspect::Args),
    /// The inference engine process (JSON lines on stdin/stdout; run by the TUI).
    Engine(cmd::engine::Args),
    /// Tokenize text (or a chat prompt) with a model's tokenizer, or decode ids.
    Tokenize(cmd::tokenize::Args),
    /// Generate text from a prompt (streams to stdout, stats on stderr).
    Run(cmd::run::Args),
    /// Benchmark prompt processing and generation (llama-bench's table).
    Bench(cmd::bench::Args),
    /// Teacher-forced mean NLL and perplexity of a text file.
    Nll(cmd::nll::Args),
    /// The environment variables the engine reads: values, defaults, what each applies to.
    Flags(cmd::flags::Args),
    /// Kernel-family parity self-tests and micro-benchmarks (`strata parity mmvq-kreg --selftest`).
    Parity(cmd::parity::Args),
    /// Write a synthetic qwen4exp GGUF (seeded random weights) at any geometry.
    Synth(cmd::synth::Args),
    /// A/B of engine flags: the same prompts under two or more flag sets, each in its own engine,
    /// interleaved over rounds; per-window ms, tok/s, drafts, output identity, NLL; a report.
    Ab(cmd::ab::Args),
    /// Convert a model to another architecture (`--to hc`: SmolLM2 with hyper-connection streams).
    Convert(cmd::convert::Args),
}

fn main() {
    // SYCL's environment (ICD path, kernel disk cache) must be set before any thread exists.
    strata::sycl::runtime::init();
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Devices(a)) => cmd::devices::run(a),
        Some(Command::Inspect(a)) => cmd::inspect::run(a),
        Some(Command::Parity(a)) => cmd::parity::run(a),
        Some(Command::Engine(a)) => cmd::engine::run(a),
        Some(Command::Tokenize(a)) => cmd::tokenize::run(a),
        Some(Command::Run(a)) => cmd::run::run(a),
        Some(Command::Bench(a)) => cmd::bench::run(a),
        Some(Command::Nll(a)) => cmd::nll::run(a),
        Some(Command::Flags(a)) => cmd::flags::run(a),
        Some(Command::Synth(a)) => cmd::synth::run(a),
        Some(Command::Convert(a)) => cmd::convert::run(a),
        Some(Command::Ab(a)) => cmd::ab::run(a),
        None => tui::run(tui::Options {
            preset: cli.preset,
            resume: cli.resume,
            model: cli.model,
        }),
    };
    if let Err(e) = result {
        eprintln!("strata: {e:#}");
        std::process::exit(1);
    }
}
