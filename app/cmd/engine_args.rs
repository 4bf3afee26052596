//! Options shared by `strata run`, `bench` and `nll`: the model file (default SmolLM2 from setup)
//! and the engine settings.

use anyhow::{Context, Result};
use std::path::PathBuf;
use strata::model::{Engine, EngineOptions};
use strata::sycl::Card;

#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// GGUF model file (default: SmolLM2-135M-Instruct installed by `make setup`).
    #[arg(short = 'm', long = "model")]
    pub model: Option<PathBuf>,
    /// KV cache length in tokens (default: min(4096, the model's trained context)).
    #[arg(long = "ctx", default_value_t = 0)]
    pub ctx: usize,
    /// Rows per prefill step.
    #[arg(long, default_value_t = 256)]
    pub chunk: usize,
    /// Feed matmuls f32 activations instead of llama.cpp's 8-bit rounded ones.
    #[arg(long)]
    pub f32_act: bool,
    /// Split the CPU device into N sub-device cards and the layers over them (0 = the default
    /// device whole). Same logits, bitwise (docs/engine.md, "Layer split across cards").
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

impl EngineArgs {
    pub fn model_path(&self) -> Result<PathBuf> {
        match &self.model {
            Some(p) => Ok(p.clone()),
            None => {
                strata::paths::model_path(strata::paths::SMOLLM2_ENV).map_err(anyhow::Error::msg)
            }
        }
    }

    pub fn load(&self) -> Result<(PathBuf, Engine)> {
        self.load_on(false)
    }

    /// `load` on a profiling queue when `profiling` (per-kernel timestamps, `Queue::trace_*`).
    pub fn load_on(&self, profiling: bool) -> Result<(PathBuf, Engine)> {
        let path = self.model_path()?;
        let opts = EngineOptions {
            n_ctx: self.ctx,
            chunk: self.chunk,
            act_round: !self.f32_act,
            keep_gguf: false, // (STRATA_KEEP_GGUF=1 still applies)
        };
        if self.layer_split.is_some() && self.split_cpu == 0 {
            anyhow::bail!("--layer-split needs --split-cpu N");
        }
        if profiling && self.split_cpu != 0 {
            anyhow::bail!("--profile runs on one card: drop --split-cpu");
        }
        let eng = if self.split_cpu == 0 {
            let card = strata::sycl::default_device()
                .and_then(|d| Card::on(d, profiling))
                .context("opening the SYCL device")?;
            Engine::load(&path, card, &opts)
        } else {
            let cards = Card::split_cpu(self.split_cpu)
                .with_context(|| format!("splitting the CPU device into {}", self.split_cpu))?;
            Engine::load_split(&path, cards, self.layer_split.as_deref(), &opts)
        }
        .with_context(|| format!("loading {}", path.display()))?;
        let mut eng = eng;
        if self.graphs || self.no_graphs {
            eng.set_step_graphs(self.graphs);
        }
        Ok((path, eng))
    }
}
