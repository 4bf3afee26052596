//! Options shared by `strata run`, `bench` and `nll`: the model file (default SmolLM2 from setup)
//! and the engine settings.

use super::common::open_gguf;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use strata::gguf::Gguf;
use strata::model::{Engine, EngineOptions, ModelConfig};
use strata::sycl::Card;

#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// GGUF model file (default: SmolLM2-135M-Instruct installed by `make setup`).
    #[arg(short = 'm', long = "model")]
    pub model: Option<PathBuf>,
    /// KV cache length in tokens, at most the model's training context (default: min(4096, the
    /// training context)).
    #[arg(long = "ctx", default_value_t = 0)]
    pub ctx: usize,
    /// Rows per prefill step.
    #[arg(long, default_value_t = 256)]
    pub chunk: usize,
    /// Feed matmuls f32 activations instead of llama.cpp's 8-bit rounded ones.
    #[arg(long)]
    pub f32_act: bool,
    /// Split the CPU device into N >= 2 sub-device cards and the layers over them (0 or 1 = the
    /// default device whole). Same logits, bitwise (docs/engine.md, "Layer split across cards").
    #[arg(long = "split-cpu", default_value_t = 0)]
    pub split_cpu: u32,
    /// With --split-cpu: layers per card, comma-separated (default: an even split).
    #[arg(long = "layer-split", value_delimiter = ',')]
    pub layer_split: Option<Vec<usize>>,
    /// Replay each decode step from a recorded SYCL graph (default on GPUs; on the CPU device
    /// the OpenCL runtime makes replays slower than plain submission). Same results, bitwise.
    #[arg(long, conflicts_with = "no_graphs")]
    pub graphs: bool,
    /// Submit every kernel of a decode step one by one, never from a recorded graph.
    #[arg(long = "no-graphs")]
    pub no_graphs: bool,
}

/// The model file opened and its shape read, before any device work.
pub struct Opened {
    pub path: PathBuf,
    pub gguf: Gguf,
    pub config: ModelConfig,
}

impl EngineArgs {
    pub fn model_path(&self) -> Result<PathBuf> {
        match &self.model {
            Some(p) => Ok(p.clone()),
            None => {
                strata::paths::model_path(strata::paths::SMOLLM2_ENV).map_err(anyhow::Error::msg)
            }
        }
    }

    /// Whether --split-cpu asks for a split (1 is the device whole, as 0 and the protocol's 1).
    fn split(&self) -> Option<u32> {
        (self.split_cpu >= 2).then_some(self.split_cpu)
    }

    /// Opens the model file and reads its config (`ModelConfig`: training context, vocabulary).
    pub fn open(&self) -> Result<Opened> {
        let path = self.model_path()?;
        let gguf = open_gguf(&path)?;
        let config =
            ModelConfig::from_gguf(&gguf).with_context(|| format!("loading {}", path.display()))?;
        Ok(Opened { path, gguf, config })
    }

    /// Loads an `open`ed model onto the device(s) the options name, on a profiling queue when
    /// `profiling` (per-kernel timestamps, `Queue::trace_*`). Errors name the file and, when one
    /// was given, the `--ctx` (the engine refuses one past the training context before any
    /// allocation).
    pub fn load_opened(&self, m: Opened, profiling: bool) -> Result<(PathBuf, Engine)> {
        let Opened { path, gguf, .. } = m;
        let opts = EngineOptions {
            n_ctx: self.ctx,
            chunk: self.chunk,
            act_round: !self.f32_act,
            keep_gguf: false, // (STRATA_KEEP_GGUF=1 still applies)
        };
        if self.layer_split.is_some() && self.split().is_none() {
            bail!("--layer-split needs --split-cpu N with N >= 2");
        }
        if profiling && self.split().is_some() {
            bail!("--profile runs on one card: drop --split-cpu");
        }
        let eng = match self.split() {
            None => {
                let card = strata::sycl::default_device()
                    .and_then(|d| Card::on(d, profiling))
                    .context("opening the SYCL device")?;
                Engine::from_gguf(&gguf, card, &opts)
            }
            Some(n) => {
                let cards = Card::split_cpu(n).with_context(|| {
                    format!("--split-cpu {n}: splitting the CPU device into {n}")
                })?;
                Engine::from_gguf_split(&gguf, cards, self.layer_split.as_deref(), &opts)
            }
        }
        .with_context(|| match self.ctx {
            0 => format!("loading {}", path.display()),
            c => format!("loading {} with --ctx {c}", path.display()),
        })?;
        let mut eng = eng;
        if self.graphs || self.no_graphs {
            eng.set_step_graphs(self.graphs);
        }
        Ok((path, eng))
    }
}
