//! The attention mixer's declaration: per layer its RoPE base, its window, whether q and k get a
//! per-head RMS norm and whether the output is gated; the head geometry is the model's
//! (`ModelConfig`).

/// Per-layer attention settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub rope_base: f32,
    /// Keys with `pos_q - pos_k >= window` are masked; 0 = full causal attention.
    pub window: usize,
    /// Per-head RMS norms of q and k before RoPE (`attn_q_norm`, `attn_k_norm`: Gemma 3).
    pub qk_norm: bool,
    /// Gated attention (`qwen4exp`): `attn_q` holds [q | gate] interleaved per head (so it is
    /// (2 * n_head * head_dim, n_embd)), and the attention output is multiplied by
    /// sigmoid(gate) before `attn_output`.
    pub gated: bool,
    /// The QSA indexer's projections (`indexer.{q,k}_proj`, `indexer.{q,k}_norm`): llama.cpp
    /// requires them on every full-attention `qwen4exp` layer, so the file is checked for them;
    /// only QSA layers (not run yet) read them.
    pub indexer: Option<Indexer>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indexer {
    pub n_head: usize,
    pub head_dim: usize,
}
