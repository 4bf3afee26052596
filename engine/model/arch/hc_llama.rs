//! strata-hc-llama (Strata's own architecture, written by `strata convert --to hc`): llama's
//! layers (arch/llama.rs: attention with RoPE on pairs (2i, 2i + 1), one base for every layer,
//! full causal attention; a dense SiLU-gated FFN) with S hyper-connection residual streams in
//! place of the single residual vector. Each part reads the streams through a mixer
//! (`Residual::Hyper`: per-stream RMS norm, rank-r gate, gated stream mean) instead of
//! attn_norm / ffn_norm, and the head through its own mixer instead of output_norm
//! (docs/hyper-connections.md for the read, docs/convert.md for the conversion and why it is
//! exact at identity).
//! Hyper-parameters: llama's plus `strata-hc-llama.hyper_connection.{count, low_rank}`
//! (gguf/hparams_hcllama.rs).

use crate::gguf::HParams;
use crate::kernels::glu_q8::Glu;
use crate::model::config::ArchShape;
use crate::model::parts::{Attention, Dense, Hyper, Layer, Residual};

pub fn shape(
    hp: &HParams,
    n_layer: usize,
    _has: &dyn Fn(&str) -> bool,
) -> Result<ArchShape, String> {
    let p = hp
        .hc_llama()
        .ok_or_else(|| "strata-hc-llama without its parameters".to_string())?;
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
        residual: Residual::Hyper(Hyper {
            streams: p.hc_count as usize,
            rank: p.hc_rank as usize,
        }),
        rope_neox: false,
        rope_sections: None,
        embd_scale: 1.0,
        layers: vec![Layer::attention_dense(attention, dense, false); n_layer],
    })
}
