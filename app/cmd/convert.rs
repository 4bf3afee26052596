//! `strata convert --to hc`: SmolLM2 (`llama`) into the same model with hyper-connection
//! residual streams (`strata-hc-llama`, engine/convert/, docs/convert.md). `--perturb 0` is
//! exactly the dense model; the default scale moves every part of the read off identity while
//! the text stays coherent. `--to f16`: any model with its quantized matrices widened to F16, the
//! file `llama-quantize --allow-requantize IN OUT F16` writes (docs/kld.md). Prints the options,
//! the file's size, its SHA-256 and the time taken.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use strata::convert::{self, HcOptions, Perturb};

use super::common;

/// The default `--perturb`: every part of the read matters and greedy chat text stays sensible
/// (docs/convert.md shows the samples it was chosen by).
pub const DEFAULT_PERTURB: f32 = 0.5;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Hyper-connection residual streams (architecture strata-hc-llama).
    Hc,
    /// Every quantized matrix dequantized to F16 (any architecture; what llama-quantize's F16
    /// target writes).
    F16,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The source GGUF (for `--to hc` a `llama` file; default: the setup's SmolLM2,
    /// $STRATA_MODEL_SMOLLM2).
    #[arg(long)]
    from: Option<PathBuf>,
    /// What to convert to.
    #[arg(long, value_enum)]
    to: Target,
    /// Output GGUF file (written through OUT.tmp, renamed when complete).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Residual streams S (2 to 64).
    #[arg(long, default_value_t = HcOptions::default().streams)]
    streams: u32,
    /// The read gate's rank r (a multiple of 32 keeps W_up's rows whole Q8_0 blocks).
    #[arg(long, default_value_t = HcOptions::default().rank)]
    rank: u32,
    /// Seed of the perturbations.
    #[arg(long, default_value_t = HcOptions::default().seed)]
    seed: u64,
    /// Distance from identity: lo/S and z/S get std X at the dense model's activations, W_up
    /// entries std X/sqrt(r) (0 = exactly the dense model).
    #[arg(long, default_value_t = DEFAULT_PERTURB)]
    perturb: f32,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let from = match &a.from {
        Some(p) => p.clone(),
        None => {
            strata::paths::model_path(strata::paths::SMOLLM2_ENV).map_err(anyhow::Error::msg)?
        }
    };
    let o = HcOptions {
        streams: a.streams,
        rank: a.rank,
        seed: a.seed,
        perturb: Perturb::uniform(a.perturb),
    };
    if a.to == Target::Hc {
        o.validate()?; // before the source is read: a bad option fails at once
    }
    let t0 = Instant::now();
    let src = common::open_gguf(&from)?;
    let mut out = common::stdout();
    let w = match a.to {
        Target::Hc => {
            let w = convert::write_hc(&src, &o, &a.output)?;
            writeln!(
                out,
                "{} -> {}: {} streams, rank {}, perturb {}, seed {}",
                from.display(),
                convert::HC_LLAMA_ARCH,
                o.streams,
                o.rank,
                a.perturb,
                o.seed
            )?;
            w
        }
        Target::F16 => {
            let w = convert::write_f16(&src, &a.output)?;
            writeln!(out, "{} -> F16 matrices", from.display())?;
            w
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    writeln!(
        out,
        "wrote {}: {} bytes, {} tensors in {secs:.2} s",
        a.output.display(),
        w.bytes,
        w.tensors
    )?;
    writeln!(out, "sha256 {}", w.sha256)?;
    Ok(())
}
