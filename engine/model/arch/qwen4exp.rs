//! qwen4exp (Qwen3.8-Flash-Next): S hyper-connection residual streams read by a mixer before
//! each part (the mixer is the pre-norm: no attn_norm / ffn_norm, and the head reads through its
//! own mixer: no output_norm); gated full attention (attn_q holds [q | gate] per head, q/k RMS
//! norms, IMRoPE on text positions, the output times sigmoid(gate)); a MoE FFN (softmax → top-k
//! → renormalise, llama.cpp's hard-coded gating; the file's gating keys are ignored there and
//! here) with a shared expert scaled per token by its own sigmoid gate.
//! The engine runs files whose layers are all full attention: a Gated DeltaNet layer, a QSA
//! (compressed) layer, a PLE layer or an MTP block is refused by name until it runs them.
//! Hyper-parameters: gguf/hparams_qwen4exp.rs.

use crate::gguf::HParams;
use crate::kernels::glu_q8::Glu;
use crate::model::config::ArchShape;
use crate::model::parts::attention::Indexer;
use crate::model::parts::{Attention, Ffn, Hyper, Layer, Mixer, Moe, Residual, Sub};

pub fn shape(
    hp: &HParams,
    n_layer: usize,
    has: &dyn Fn(&str) -> bool,
) -> Result<ArchShape, String> {
    let q = hp
        .qwen4exp()
        .ok_or_else(|| "qwen4exp without its parameters".to_string())?;
    if q.nextn_layers > 0 {
        return Err(format!(
            "qwen4exp.nextn_predict_layers = {}: the MTP block is not supported yet",
            q.nextn_layers
        ));
    }
    if let Some(il) = q.recurrent.iter().position(|&r| r) {
        return Err(format!(
            "layer {il} is a Gated DeltaNet (linear attention) layer \
             (qwen4exp.attention.recurrent_layers): not supported yet; \
             this engine runs qwen4exp files whose layers are all full attention"
        ));
    }
    if let Some(il) = q.compress_ratios.iter().position(|&r| r > 0) {
        return Err(format!(
            "layer {il} is a QSA (compressed attention) layer \
             (qwen4exp.attention.compress_ratios[{il}] = {}): not supported yet",
            q.compress_ratios[il]
        ));
    }
    if let Some(il) = q.ple_layers.first() {
        return Err(format!(
            "layer {il} has a PLE n-gram embedding (qwen4exp.ple.layers): not supported yet"
        ));
    }
    let [s0, s1, s2, _] = q.rope_sections;
    if s0 + s1 + s2 == 0 {
        return Err(format!(
            "qwen4exp.rope.dimension_sections = {:?}: no rotated section",
            q.rope_sections
        ));
    }
    if q.n_ff_shexp == 0 {
        return Err(
            "qwen4exp.expert_shared_feed_forward_length (or feed_forward_length) is required: \
             the shared expert's width"
                .into(),
        );
    }
    let layers = (0..n_layer)
        .map(|il| {
            let attention = Attention {
                rope_base: hp.rope_freq_base,
                window: 0,
                qk_norm: true,
                gated: true,
                indexer: Some(Indexer {
                    n_head: q.indexer[0] as usize,
                    head_dim: q.indexer[1] as usize,
                }),
            };
            let moe = Moe {
                n_expert: q.n_expert as usize,
                n_used: q.n_expert_used as usize,
                n_ff: q.n_ff_exp as usize,
                act: Glu::Silu,
                shared_ff: Some(q.n_ff_shexp as usize),
                shared_gate: true,
                fused_gate_up: has(&format!("blk.{il}.ffn_gate_up_exps.weight")),
            };
            Layer {
                mixer: Sub {
                    part: Mixer::Attention(attention),
                    post_norm: false,
                },
                ffn: Sub {
                    part: Ffn::Moe(moe),
                    post_norm: false,
                },
            }
        })
        .collect();
    Ok(ArchShape {
        residual: Residual::Hyper(Hyper {
            streams: q.hc_count as usize,
            rank: q.hc_rank as usize,
        }),
        // IMRoPE rotates in NEOX order (pairs (i, i + n_rot/2))
        rope_neox: true,
        rope_sections: Some(q.rope_sections),
        embd_scale: 1.0,
        layers,
    })
}
