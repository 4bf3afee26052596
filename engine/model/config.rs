//! The shape of a model as the forward passes need it: one `ModelConfig` per file, built from
//! the GGUF helper's checked `HParams`, with the per-layer choices (RoPE base, attention window)
//! already resolved so neither the engine nor the reference re-derives them.

use crate::gguf::{Arch, Gguf, HParams};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error("{file}: architecture {arch} is not supported by the model engine (llama, gemma3)")]
    Unsupported { file: String, arch: String },
    #[error("{file}: {what}")]
    Shape { file: String, what: String },
}

/// Per-layer attention settings.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerConfig {
    pub rope_base: f32,
    /// Keys with `pos_q - pos_k >= window` are masked; 0 = full causal attention.
    pub window: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub arch: Arch,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    /// q/k/v head length (key_length == value_length is required).
    pub head_dim: usize,
    pub n_rot: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    /// NEOX rotation (pairs (i, i + n_rot/2)) instead of llama's (2i, 2i + 1).
    pub rope_neox: bool,
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

impl ModelConfig {
    pub fn from_gguf(g: &Gguf) -> Result<ModelConfig, ConfigError> {
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
        let (rope_neox, embd_scale, layers) = match hp.arch {
            Arch::Llama => (
                false,
                1.0,
                vec![
                    LayerConfig {
                        rope_base: hp.rope_freq_base,
                        window: 0
                    };
                    n_layer
                ],
            ),
            Arch::Gemma3 => {
                let g3 = hp
                    .gemma3()
                    .ok_or_else(|| shape("gemma3 without its parameters".into()))?;
                // the attention kernels take the window as a 32-bit int
                if g3.sliding_window > i32::MAX as u32 {
                    return Err(shape(format!(
                        "gemma3.attention.sliding_window = {} does not fit a 32-bit int",
                        g3.sliding_window
                    )));
                }
                let layers = (0..n_layer as u32)
                    .map(|il| {
                        if g3.is_sliding(il) {
                            LayerConfig {
                                rope_base: g3.rope_freq_base_local,
                                window: g3.sliding_window as usize,
                            }
                        } else {
                            LayerConfig {
                                rope_base: hp.rope_freq_base,
                                window: 0,
                            }
                        }
                    })
                    .collect();
                (true, (hp.embedding_length as f32).sqrt(), layers)
            }
            #[allow(unreachable_patterns)] // Arch is non_exhaustive
            other => {
                return Err(ConfigError::Unsupported {
                    file,
                    arch: other.name().into(),
                })
            }
        };
        let spm = g
            .opt_str("tokenizer.ggml.model")?
            .map(|m| m == "llama")
            .unwrap_or(false);
        Ok(ModelConfig {
            arch: hp.arch,
            n_embd: hp.embedding_length as usize,
            n_layer,
            n_head: hp.head_count as usize,
            n_kv_head: hp.head_count_kv as usize,
            head_dim,
            n_rot: hp.rope_dimension_count as usize,
            n_ff: hp.feed_forward_length as usize,
            n_vocab: hp.vocab_size as usize,
            n_ctx_train: hp.context_length as usize,
            rms_eps: hp.rms_eps,
            rope_neox,
            rope_scale: hp.rope_scaling_factor.map(|f| 1.0 / f).unwrap_or(1.0),
            embd_scale,
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            layers,
            add_bos: g.opt_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(spm),
            bos: g.opt_u32("tokenizer.ggml.bos_token_id")?,
            eos: g.opt_u32("tokenizer.ggml.eos_token_id")?,
        })
    }

    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim
    }

    /// RoPE inverse frequencies base^(-2i/n_rot), computed in f64 and rounded once.
    pub fn rope_freqs(&self, base: f32) -> Vec<f32> {
        (0..self.n_rot / 2)
            .map(|i| (base as f64).powf(-2.0 * i as f64 / self.n_rot as f64) as f32)
            .collect()
    }
}

/// Tensor names, shared by the engine and the reference so both read the same bytes.
pub mod names {
    pub const TOKEN_EMBD: &str = "token_embd.weight";
    pub const OUTPUT_NORM: &str = "output_norm.weight";
    pub const OUTPUT: &str = "output.weight";

    pub fn blk(il: usize, what: &str) -> String {
        format!("blk.{il}.{what}.weight")
    }
}
