//! llama (SmolLM2): pre-norm layers, the residual one vector per token;
//!   x += Wo attention(rope(Wq h), rope(Wk h), Wv h), h = rms_norm(x) * attn_norm;
//!   x += Wdown (silu(Wgate h) * Wup h),                h = rms_norm(x) * ffn_norm.
//! RoPE on pairs (2i, 2i + 1), one base for every layer, full causal attention.
//! Hyper-parameters: the common ones (gguf/hparams.rs) only.

use crate::gguf::HParams;
use crate::kernels::glu_q8::Glu;
use crate::model::config::ArchShape;
use crate::model::parts::{Attention, Dense, Layer, Residual};

pub fn shape(
    hp: &HParams,
    n_layer: usize,
    _has: &dyn Fn(&str) -> bool,
) -> Result<ArchShape, String> {
    let attention = Attention {
        rope_base: hp.rope_freq_base,
        window: 0,
        qk_norm: false,
        gated: false,
        indexer: None,
    };
    let dense = Dense {
        n_ff: hp.feed_forward_length as usize,
        act: Glu::Silu,
    };
    Ok(ArchShape {
        residual: Residual::Single,
        rope_neox: false,
        rope_sections: None,
        embd_scale: 1.0,
        layers: vec![Layer::attention_dense(attention, dense, false); n_layer],
    })
}
