//! Typed, checked hyper-parameters per architecture, read from `{arch}.*` metadata. Keys a
//! converter may omit get llama.cpp's defaults (noted per field); every key that is present must
//! have a usable type and value, and a missing required key is an error naming it.
//!
//! Adding an architecture (docs/adding-a-model.md): a variant in `Arch` (name, parse), a variant
//! in `ArchParams` holding what only it has, a branch in `HParams::from_gguf` reading those keys,
//! and its module in engine/model/arch/ (whose registry matches `Arch` exhaustively). Both enums
//! are `#[non_exhaustive]` for callers outside the crate.

use super::error::{GgufError, Result};
use super::hparams_hcllama::{self, HcLlamaParams};
use super::hparams_qwen4exp::{self, Qwen4expParams};
use super::reader::Gguf;
use super::vocab::TOKENS_KEY;

/// A model architecture this engine can describe (`general.architecture`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Llama-family decoder (SmolLM2): RMSNorm, SwiGLU, RoPE, grouped-query attention.
    Llama,
    /// Gemma 3: adds q/k norms, post-norms, sliding-window layers with their own RoPE base.
    Gemma3,
    /// Qwen3.8-Flash-Next: hyper-connection residual streams, gated attention (and Gated
    /// DeltaNet / QSA layers, refused until the engine runs them), MoE with a shared expert.
    Qwen4exp,
    /// Strata's own `strata-hc-llama` (not a llama.cpp architecture): llama's layers with
    /// hyper-connection residual streams instead of the pre-norms; `strata convert` writes it
    /// from a llama file (docs/convert.md).
    HcLlama,
}

impl Arch {
    pub const ALL: &'static [Arch] = &[Arch::Llama, Arch::Gemma3, Arch::Qwen4exp, Arch::HcLlama];

    /// The `general.architecture` string (also the metadata key prefix).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Gemma3 => "gemma3",
            Arch::Qwen4exp => "qwen4exp",
            Arch::HcLlama => hparams_hcllama::ARCH,
        }
    }

    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// What only one architecture has.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum ArchParams {
    Llama,
    Gemma3(Gemma3Params),
    Qwen4exp(Qwen4expParams),
    HcLlama(HcLlamaParams),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gemma3Params {
    /// `gemma3.attention.sliding_window`: tokens a local (sliding-window) layer attends to.
    pub sliding_window: u32,
    /// Every `sliding_window_pattern`-th layer is global, the rest local. Gemma 3 files do not
    /// store it; llama.cpp hard-codes 6 (read from `gemma3.attention.sliding_window_pattern`
    /// when a file has it as a u32).
    pub sliding_window_pattern: u32,
    /// RoPE base of the local layers: `gemma3.rope.freq_base_swa`, else 10000 (llama.cpp's constant).
    pub rope_freq_base_local: f32,
}

impl Gemma3Params {
    /// True if layer `il` (0-based) uses sliding-window attention.
    pub fn is_sliding(&self, il: u32) -> bool {
        (il + 1) % self.sliding_window_pattern != 0
    }
}

/// Hyper-parameters common to the decoder architectures, plus `extra` for the rest.
#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    pub arch: Arch,
    /// `{arch}.context_length`: trained context (required).
    pub context_length: u32,
    /// `{arch}.embedding_length`: n_embd, the residual width (required).
    pub embedding_length: u32,
    /// `{arch}.block_count`: number of layers (required).
    pub block_count: u32,
    /// `{arch}.feed_forward_length`: FFN hidden width (required; qwen4exp: optional, 0 when
    /// absent, as llama.cpp reads it).
    pub feed_forward_length: u32,
    /// `{arch}.attention.head_count` (required).
    pub head_count: u32,
    /// `{arch}.attention.head_count_kv`, default head_count; divides head_count.
    pub head_count_kv: u32,
    /// `{arch}.attention.key_length`: q/k head dim, default embedding_length / head_count.
    pub key_length: u32,
    /// `{arch}.attention.value_length`: v head dim, default embedding_length / head_count.
    pub value_length: u32,
    /// `{arch}.rope.dimension_count`: rotated dims per head, default key_length.
    pub rope_dimension_count: u32,
    /// `{arch}.rope.freq_base`, default 10000 (for gemma3: of the global layers).
    pub rope_freq_base: f32,
    /// `{arch}.rope.scaling.factor` when present (linear RoPE scaling).
    pub rope_scaling_factor: Option<f32>,
    /// `{arch}.attention.layer_norm_rms_epsilon` (required).
    pub rms_eps: f32,
    /// `{arch}.vocab_size`, else the length of tokenizer.ggml.tokens, else token_embd.weight's
    /// dims[1]; all that are present must agree.
    pub vocab_size: u32,
    pub extra: ArchParams,
}

impl HParams {
    /// Reads and checks the hyper-parameters of `g`'s architecture. Errors carry the file path.
    pub fn from_gguf(g: &Gguf) -> Result<HParams> {
        read(g).map_err(|e| g.err_in_file(e))
    }

    /// Number of query heads sharing one k/v head.
    pub fn gqa_group(&self) -> u32 {
        self.head_count / self.head_count_kv
    }

    pub fn qwen4exp(&self) -> Option<&Qwen4expParams> {
        match &self.extra {
            ArchParams::Qwen4exp(p) => Some(p),
            _ => None,
        }
    }

    pub fn hc_llama(&self) -> Option<&HcLlamaParams> {
        match &self.extra {
            ArchParams::HcLlama(p) => Some(p),
            _ => None,
        }
    }

    pub fn gemma3(&self) -> Option<&Gemma3Params> {
        match &self.extra {
            ArchParams::Gemma3(p) => Some(p),
            _ => None,
        }
    }
}

fn read(g: &Gguf) -> Result<HParams> {
    let arch_name = g.architecture()?;
    let arch = Arch::from_name(arch_name).ok_or_else(|| {
        let names: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        GgufError::UnsupportedArchitecture(arch_name.to_string(), names.join(", "))
    })?;
    let p = arch.name();
    let k = |suffix: &str| format!("{p}.{suffix}");
    let positive = |suffix: &str| -> Result<u32> {
        let key = k(suffix);
        let v = g.get_u32(&key)?;
        nonzero(&key, v)
    };
    let positive_or = |suffix: &str, default: u32| -> Result<u32> {
        let key = k(suffix);
        match g.opt_u32(&key)? {
            Some(v) => nonzero(&key, v),
            None => Ok(default),
        }
    };

    let context_length = positive("context_length")?;
    let embedding_length = positive("embedding_length")?;
    let block_count = positive("block_count")?;
    let feed_forward_length = match arch {
        Arch::Qwen4exp => g.opt_u32(&k("feed_forward_length"))?.unwrap_or(0),
        _ => positive("feed_forward_length")?,
    };
    let head_count = positive("attention.head_count")?;
    let head_count_kv = positive_or("attention.head_count_kv", head_count)?;
    if head_count % head_count_kv != 0 {
        return Err(bad(
            &k("attention.head_count_kv"),
            head_count_kv,
            format!("does not divide head_count {head_count}"),
        ));
    }
    let default_head_dim = if embedding_length % head_count == 0 {
        Some(embedding_length / head_count)
    } else {
        None
    };
    let head_dim = |suffix: &str| -> Result<u32> {
        match default_head_dim {
            Some(d) => positive_or(suffix, d),
            None => positive(suffix).map_err(|e| match e {
                GgufError::MissingKey { key } => GgufError::BadValue {
                    key: key.clone(),
                    value: "missing".into(),
                    reason: format!("required because embedding_length {embedding_length} is not a multiple of head_count {head_count}"),
                },
                e => e,
            }),
        }
    };
    let key_length = head_dim("attention.key_length")?;
    let value_length = head_dim("attention.value_length")?;
    let rope_dimension_count = positive_or("rope.dimension_count", key_length)?;
    if rope_dimension_count > key_length || rope_dimension_count % 2 != 0 {
        return Err(bad(
            &k("rope.dimension_count"),
            rope_dimension_count,
            format!("must be even and at most key_length {key_length}"),
        ));
    }
    let rope_freq_base = positive_f32(g, &k("rope.freq_base"))?.unwrap_or(10000.0);
    let rope_scaling_factor = positive_f32(g, &k("rope.scaling.factor"))?;
    let rms_key = k("attention.layer_norm_rms_epsilon");
    let rms_eps = positive_f32(g, &rms_key)?.ok_or(GgufError::MissingKey { key: rms_key })?;
    let vocab_size = vocab_size(g, &k("vocab_size"), embedding_length)?;

    let extra = match arch {
        Arch::Llama => ArchParams::Llama,
        Arch::Gemma3 => ArchParams::Gemma3(Gemma3Params {
            sliding_window: positive("attention.sliding_window")?,
            sliding_window_pattern: positive_or("attention.sliding_window_pattern", 6)?,
            rope_freq_base_local: positive_f32(g, &k("rope.freq_base_swa"))?.unwrap_or(10000.0),
        }),
        Arch::Qwen4exp => {
            ArchParams::Qwen4exp(hparams_qwen4exp::read(g, block_count, feed_forward_length)?)
        }
        Arch::HcLlama => ArchParams::HcLlama(hparams_hcllama::read(g)?),
    };

    Ok(HParams {
        arch,
        context_length,
        embedding_length,
        block_count,
        feed_forward_length,
        head_count,
        head_count_kv,
        key_length,
        value_length,
        rope_dimension_count,
        rope_freq_base,
        rope_scaling_factor,
        rms_eps,
        vocab_size,
        extra,
    })
}

fn bad(key: &str, value: impl ToString, reason: String) -> GgufError {
    GgufError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    }
}

fn nonzero(key: &str, v: u32) -> Result<u32> {
    if v == 0 {
        return Err(bad(key, v, "must be at least 1".into()));
    }
    Ok(v)
}

fn positive_f32(g: &Gguf, key: &str) -> Result<Option<f32>> {
    match g.opt_f32(key)? {
        Some(v) if !(v.is_finite() && v > 0.0) => {
            Err(bad(key, v, "must be a finite number above 0".into()))
        }
        v => Ok(v),
    }
}

/// The vocabulary size from every source present, which must agree.
fn vocab_size(g: &Gguf, key: &str, n_embd: u32) -> Result<u32> {
    let from_key = g.opt_u32(key)?;
    let from_tokens = match g.get(TOKENS_KEY) {
        Some(_) => Some(
            u32::try_from(g.get_str_array(TOKENS_KEY)?.len())
                .map_err(|_| bad(TOKENS_KEY, "(array)", "more than 2^32 tokens".into()))?,
        ),
        None => None,
    };
    let embd = g.tensor_info("token_embd.weight");
    if let Some(t) = embd {
        if t.dims.len() != 2 || t.dims[0] != u64::from(n_embd) {
            return Err(GgufError::BadTensor {
                tensor: t.name.clone(),
                reason: format!(
                    "dims {:?}, expected [embedding_length {n_embd}, vocab size]",
                    t.dims
                ),
            });
        }
    }
    let from_embd = embd.map(|t| t.dims[1]);
    if let (Some(a), Some(b)) = (from_key, from_tokens) {
        if a != b {
            return Err(bad(key, a, format!("but {TOKENS_KEY} has {b} entries")));
        }
    }
    let n = from_key.or(from_tokens);
    match (n, from_embd) {
        (Some(n), Some(e)) if u64::from(n) != e => Err(GgufError::BadTensor {
            tensor: "token_embd.weight".into(),
            reason: format!("has {e} rows but the vocabulary has {n} tokens"),
        }),
        (Some(n), _) => nonzero(key, n),
        (None, Some(e)) => u32::try_from(e).map_err(|_| GgufError::BadTensor {
            tensor: "token_embd.weight".into(),
            reason: format!("{e} rows is more than 2^32 tokens"),
        }),
        (None, None) => Err(GgufError::MissingKey {
            key: key.to_string(),
        }),
    }
}
