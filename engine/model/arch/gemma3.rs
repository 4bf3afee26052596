//! Gemma 3: llama's layer with per-head RMS norms of q and k before RoPE, a norm on each
//! part's output before its residual add ("sandwich" norms: post_attention_norm,
//! post_ffw_norm), GELU-tanh gating, NEOX RoPE (pairs (i, i + d/2)), the embedding scaled by
//! sqrt(n_embd), and sliding-window attention on the local layers (every
//! `sliding_window_pattern`-th layer is global) with their own RoPE base. The GGUF norm weights
//! already hold Gemma's (1 + w). Hyper-parameters: `gemma3.attention.sliding_window`,
//! `..._pattern`, `gemma3.rope.freq_base_swa` (gguf/hparams.rs, `Gemma3Params`).

use crate::gguf::HParams;
use crate::kernels::glu_q8::Glu;
use crate::model::config::ArchShape;
use crate::model::parts::{Attention, Dense, Layer, Residual};

pub fn shape(
    hp: &HParams,
    n_layer: usize,
    _has: &dyn Fn(&str) -> bool,
) -> Result<ArchShape, String> {
    let g3 = hp
        .gemma3()
        .ok_or_else(|| "gemma3 without its parameters".to_string())?;
    // the attention kernels take the window as a 32-bit int
    if g3.sliding_window > i32::MAX as u32 {
        return Err(format!(
            "gemma3.attention.sliding_window = {} does not fit a 32-bit int",
            g3.sliding_window
        ));
    }
    let layers = (0..n_layer as u32)
        .map(|il| {
            let (rope_base, window) = if g3.is_sliding(il) {
                (g3.rope_freq_base_local, g3.sliding_window as usize)
            } else {
                (hp.rope_freq_base, 0)
            };
            let attention = Attention {
                rope_base,
                window,
                qk_norm: true,
                gated: false,
                indexer: None,
            };
            let dense = Dense {
                n_ff: hp.feed_forward_length as usize,
                act: Glu::GeluTanh,
            };
            Layer::attention_dense(attention, dense, true)
        })
        .collect();
    Ok(ArchShape {
        residual: Residual::Single,
        rope_neox: true,
        rope_sections: None,
        embd_scale: (hp.embedding_length as f32).sqrt(),
        layers,
    })
}
