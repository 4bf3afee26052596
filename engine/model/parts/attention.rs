//! The attention mixer's declaration: per layer its RoPE base, its window and whether q and k
//! get a per-head RMS norm; the head geometry is the model's (`ModelConfig`).

/// Per-layer attention settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub rope_base: f32,
    /// Keys with `pos_q - pos_k >= window` are masked; 0 = full causal attention.
    pub window: usize,
    /// Per-head RMS norms of q and k before RoPE (`attn_q_norm`, `attn_k_norm`: Gemma 3).
    pub qk_norm: bool,
}
