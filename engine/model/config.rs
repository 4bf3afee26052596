//! The shape of a model as the forward passes need it: one `ModelConfig` per file, built from
//! the GGUF helper's checked `HParams` by the file's architecture module (engine/model/arch/),
//! which declares each layer's parts with their per-layer choices (RoPE base, window, widths)
//! already resolved, so neither the engine nor the reference re-derives them. The tensors those
//! parts read are checked here too (parts/tensors.rs), before anything is loaded.

use super::arch;
use super::parts::{self, Residual};
use crate::gguf::{Arch, Gguf, HParams};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    /// A file of a supported architecture using something its module does not run yet.
    #[error("{file}: {what}: not supported by the model engine")]
    Unsupported { file: String, what: String },
    #[error("{file}: {what}")]
    Shape { file: String, what: String },
    #[error("{file}: tensor \"{name}\": {why}")]
    Tensor {
        file: String,
        name: String,
        why: String,
    },
}

/// Per-layer parts and settings (`parts::Layer`).
pub type LayerConfig = parts::Layer;

#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub arch: Arch,
    pub residual: Residual,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    /// q/k/v head length (key_length == value_length is required).
    pub head_dim: usize,
    pub n_rot: usize,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    /// NEOX rotation (pairs (i, i + n_rot/2)) instead of llama's (2i, 2i + 1).
    pub rope_neox: bool,
    /// IMRoPE sections (t, h, w, e) for text positions [p, p, p, 0] (`qwen4exp`): which rotated
    /// pairs turn (`kernels::rope::imrope_freqs`); None: every pair of n_rot.
    pub rope_sections: Option<[u32; 4]>,
    /// Linear RoPE scaling: positions are multiplied by 1 / factor.
    pub rope_scale: f32,
    /// Multiplies the embedding rows (Gemma: sqrt(n_embd)).
    pub embd_scale: f32,
    /// Multiplies q·k before the softmax.
    pub attn_scale: f32,
    pub layers: Vec<LayerConfig>,
    /// `tokenizer.ggml.add_bos_token` (llama.cpp's default when absent: true for SPM vocabularies,
    /// false for BPE).
    pub add_bos: bool,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
}

/// What an architecture module decides from the hyper-parameters (arch/*.rs).
#[derive(Clone, Debug, PartialEq)]
pub struct ArchShape {
    pub residual: Residual,
    pub rope_neox: bool,
    pub rope_sections: Option<[u32; 4]>,
    pub embd_scale: f32,
    pub layers: Vec<LayerConfig>,
}

impl ModelConfig {
    pub fn from_gguf(g: &Gguf) -> Result<ModelConfig, ConfigError> {
        // (refuses an architecture outside gguf::Arch, naming it and the supported ones)
        let hp = HParams::from_gguf(g)?;
        let file = g
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "<memory>".into());
        let shape = |what: String| ConfigError::Shape {
            file: file.clone(),
            what,
        };
        if hp.key_length != hp.value_length {
            return Err(shape(format!(
                "key_length {} != value_length {}: not supported",
                hp.key_length, hp.value_length
            )));
        }
        let head_dim = hp.key_length as usize;
        if head_dim % 16 != 0 {
            return Err(shape(format!(
                "head dim {head_dim} is not a multiple of 16 (attention kernel)"
            )));
        }
        let n_layer = hp.block_count as usize;
        // Per-layer state is sized from block_count: check it against the blocks the file holds
        // first (a corrupt count of 2^32 - 1 asked for 64 GB and aborted the process).
        let blocks = g
            .tensors()
            .iter()
            .filter_map(|t| {
                t.name
                    .strip_prefix("blk.")?
                    .split('.')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .max()
            .map_or(0, |b| b + 1);
        if n_layer == 0 || n_layer > blocks {
            return Err(shape(format!(
                "{}.block_count = {n_layer}, but the file holds tensors for {blocks} blocks \
                 (blk.0 .. blk.{})",
                hp.arch.name(),
                blocks.saturating_sub(1)
            )));
        }
        let has = |name: &str| g.tensor_info(name).is_some();
        let a = arch::shape(&hp, n_layer, &has).map_err(shape)?;
        let spm = g
            .opt_str("tokenizer.ggml.model")?
            .map(|m| m == "llama")
            .unwrap_or(false);
        let cfg = ModelConfig {
            arch: hp.arch,
            residual: a.residual,
            n_embd: hp.embedding_length as usize,
            n_layer,
            n_head: hp.head_count as usize,
            n_kv_head: hp.head_count_kv as usize,
            head_dim,
            n_rot: hp.rope_dimension_count as usize,
            n_vocab: hp.vocab_size as usize,
            n_ctx_train: hp.context_length as usize,
            rms_eps: hp.rms_eps,
            rope_neox: a.rope_neox,
            rope_sections: a.rope_sections,
            rope_scale: hp.rope_scaling_factor.map(|f| 1.0 / f).unwrap_or(1.0),
            embd_scale: a.embd_scale,
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            layers: a.layers,
            add_bos: g.opt_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(spm),
            bos: g.opt_u32("tokenizer.ggml.bos_token_id")?,
            eos: g.opt_u32("tokenizer.ggml.eos_token_id")?,
        };
        parts::tensors::check(g, &cfg, &file)?;
        Ok(cfg)
    }

    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }

    /// The widest FFN activation of any layer.
    pub fn max_ff(&self) -> usize {
        self.layers.iter().map(|l| l.ffn_width()).max().unwrap_or(0)
    }

    /// A step reads device results back to the host mid-step (a MoE layer's router choice), so
    /// it cannot be recorded into a graph.
    pub fn host_synchronous(&self) -> bool {
        self.layers
            .iter()
            .any(|l| matches!(l.ffn.part, super::parts::Ffn::Moe(_)))
    }

    /// Floats per token of the residual stream (what crosses cards in a layer split).
    pub fn residual_width(&self) -> usize {
        self.residual.streams() * self.n_embd
    }
}

/// Tensor names, shared by the engine and the reference so both read the same bytes.
pub mod names {
    pub const TOKEN_EMBD: &str = "token_embd.weight";
    pub const OUTPUT_NORM: &str = "output_norm.weight";
    /// The head's hyper-connection mixer (no injection rows).
    pub const OUTPUT_HC_NORM: &str = "output_hc_norm.weight";
    pub const OUTPUT_HC_DOWN: &str = "output_hc_down.weight";
    pub const OUTPUT_HC_UP: &str = "output_hc_up.weight";
    pub const OUTPUT: &str = "output.weight";

    pub fn blk(il: usize, what: &str) -> String {
        format!("blk.{il}.{what}.weight")
    }
}
