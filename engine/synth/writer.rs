//! The keys and tensors of a synthetic `qwen4exp` file, as llama.cpp 11434's loader reads them
//! (src/models/qwen4exp.cpp `load_arch_hparams` / `load_arch_tensors`, src/llama-model.cpp
//! `llama_model_base::load_hparams`, names from src/llama-arch.cpp). Shapes are ggml order
//! (ne0 first): a matrix with n_out rows of n_in is `[n_in, n_out]`.
//!
//! Scales (the model is pre-normed everywhere: each block reads a gated mean of RMS-normed
//! streams, so activations cannot grow or vanish from layer to layer; what the scales set is
//! how much each part matters):
//! - token embedding: N(0, std^2) (`--std`, default 0.3), the residual streams' starting scale;
//! - projections (attention q/k/v/o, indexer, experts, shared expert): N(0, (gain/sqrt(n_in))^2)
//!   (`--gain`, default 1), so a product keeps its input's rms; with the defaults a block adds
//!   about half the embedding's rms to every stream, so every layer visibly changes the logits;
//! - LM head: gain `--logit-gain` (default 12): logit std ~ 12 x the final mix's rms (~0.4),
//!   which gives peaked next-token distributions (mean top-1 probability: tests/data/qwen4exp);
//! - router `ffn_gate_inp`: gain 4 (routing logits of std ~1.5: clear top-k, few near ties);
//!   the shared expert's gate vector: gain 4 (its sigmoid spans ~0.2..0.8);
//! - hyper-connection down: gain 2 (lo ~ N(0, 4), so silu(lo / S) is not flat); up: gain 3
//!   (gate std ~1: the sigmoid read gates differ per stream and channel); inject: gain 4
//!   (z / S of std ~1: the write weights 2 sigmoid(z / S) span ~0.5..1.5);
//! - every RMS-norm gamma (HC norms, q/k norms, indexer norms): 1 + 0.1 N(0, 1), the folded
//!   (1 + w) value llama.cpp multiplies by as stored.

use super::geometry::{LayerKind, SynthGeometry, WeightType};
use super::rng::Stream;
use super::{tokenizer, SynthError};
use crate::gguf::{GgufWriter, Value};
use crate::quant::{Bf16, QuantFormat, F16, Q8_0};

pub const ARCH: &str = "qwen4exp";
pub const NAME: &str = "Strata synthetic qwen4exp (random weights, text is noise)";

const GAIN_ROUTER: f32 = 4.0;
const GAIN_SHEXP_GATE: f32 = 4.0;
const GAIN_HC_DOWN: f32 = 2.0;
const GAIN_HC_UP: f32 = 3.0;
const GAIN_HC_INJECT: f32 = 4.0;
const NORM_JITTER: f32 = 0.1;

struct Tensors<'a> {
    g: &'a SynthGeometry,
    w: GgufWriter,
    count: usize,
}

impl Tensors<'_> {
    /// Stores `values` (ggml order `dims`) as `ty`.
    fn put(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: WeightType,
        values: &[f32],
    ) -> Result<(), SynthError> {
        let bytes = match ty {
            WeightType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            WeightType::F16 => F16::quantize(values)?,
            WeightType::Bf16 => Bf16::quantize(values)?,
            WeightType::Q8_0 => Q8_0::quantize(values)?,
        };
        self.w.add_tensor(name, dims, ty.ggml(), bytes)?;
        self.count += 1;
        Ok(())
    }

    /// A matrix with `n_out` rows of `n_in` (times `n_mat` stacked, e.g. experts), entries
    /// N(0, (gain / sqrt(n_in))^2).
    fn values(&self, name: &str, n_in: u64, rest: &[u64], gain: f32) -> Vec<f32> {
        let n = n_in * rest.iter().product::<u64>();
        let std = gain / (n_in as f32).sqrt();
        Stream::new(self.g.seed, name).normals(n as usize, std)
    }

    fn matrix(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: WeightType,
        gain: f32,
    ) -> Result<(), SynthError> {
        let v = self.values(name, dims[0], &dims[1..], gain);
        self.put(name, dims, ty, &v)
    }

    /// An RMS-norm gamma, stored folded: 1 + 0.1 N(0, 1), F32.
    fn gamma(&mut self, name: &str, dims: &[u64]) -> Result<(), SynthError> {
        let n = dims.iter().product::<u64>() as usize;
        let v: Vec<f32> = Stream::new(self.g.seed, name)
            .normals(n, NORM_JITTER)
            .into_iter()
            .map(|x| 1.0 + x)
            .collect();
        self.put(name, dims, WeightType::F32, &v)
    }

    /// One hyper-connection read site: `{prefix}_norm` [n, S], `_down` [S n, r], `_up` [r, S n],
    /// and with `inject` `_inject` [S n, S].
    fn hc_site(&mut self, prefix: &str, inject: bool) -> Result<(), SynthError> {
        let (n, s, r) = (
            u64::from(self.g.n_embd),
            u64::from(self.g.n_hc),
            u64::from(self.g.hc_rank),
        );
        let ty = self.g.hc_type;
        self.gamma(&format!("{prefix}_norm.weight"), &[n, s])?;
        self.matrix(
            &format!("{prefix}_down.weight"),
            &[s * n, r],
            ty,
            GAIN_HC_DOWN,
        )?;
        self.matrix(&format!("{prefix}_up.weight"), &[r, s * n], ty, GAIN_HC_UP)?;
        if inject {
            self.matrix(
                &format!("{prefix}_inject.weight"),
                &[s * n, s],
                WeightType::F32,
                GAIN_HC_INJECT,
            )?;
        }
        Ok(())
    }

    fn attention(&mut self, il: u32) -> Result<(), SynthError> {
        let g = self.g;
        let (n, hd, ty, gain) = (
            u64::from(g.n_embd),
            u64::from(g.head_dim),
            g.mat_type,
            g.gain,
        );
        let (q, kv) = (u64::from(g.n_head) * hd, u64::from(g.n_head_kv) * hd);
        let b = |t: &str| format!("blk.{il}.{t}.weight");
        // rows per head: head_dim query rows, then head_dim output-gate rows
        self.matrix(&b("attn_q"), &[n, 2 * q], ty, gain)?;
        self.matrix(&b("attn_k"), &[n, kv], ty, gain)?;
        self.matrix(&b("attn_v"), &[n, kv], ty, gain)?;
        self.matrix(&b("attn_output"), &[q, n], ty, gain)?;
        self.gamma(&b("attn_q_norm"), &[hd])?;
        self.gamma(&b("attn_k_norm"), &[hd])?;
        let (ih, id) = (u64::from(g.indexer_heads), u64::from(g.indexer_dim));
        self.matrix(&b("indexer.q_proj"), &[n, ih * id], ty, gain)?;
        self.matrix(&b("indexer.k_proj"), &[n, id], ty, gain)?;
        self.gamma(&b("indexer.q_norm"), &[id])?;
        self.gamma(&b("indexer.k_norm"), &[id])?;
        Ok(())
    }

    /// A Gated DeltaNet layer's token mixer, as load_arch_tensors' recurrent branch: the qkv
    /// and z projections, the causal conv over the qkv channels, the per-value-head decay
    /// (`ssm_a` = -exp(A_log), `ssm_dt` bias), the beta/alpha projections, the gated norm and
    /// the output projection. key heads = `ssm_groups`, value heads = `ssm_v_heads`, both of
    /// head size `ssm_state`.
    fn deltanet(&mut self, il: u32) -> Result<(), SynthError> {
        let g = self.g;
        let (n, ty, gain) = (u64::from(g.n_embd), g.mat_type, g.gain);
        let (hd, vh) = (u64::from(g.ssm_state), u64::from(g.ssm_v_heads));
        let (key_dim, value_dim) = (hd * u64::from(g.ssm_groups), hd * vh);
        let conv_dim = 2 * key_dim + value_dim;
        let b = |t: &str| format!("blk.{il}.{t}.weight");
        self.matrix(&b("attn_qkv"), &[n, conv_dim], ty, gain)?;
        self.matrix(&b("attn_gate"), &[n, value_dim], ty, gain)?;
        // ggml_ssm_conv reads an F32 kernel
        let k = u64::from(g.ssm_conv);
        self.matrix(&b("ssm_conv1d"), &[k, conv_dim], WeightType::F32, gain)?;
        let dt = format!("blk.{il}.ssm_dt.bias");
        let v: Vec<f32> = Stream::new(g.seed, &dt)
            .normals(vh as usize, 0.5)
            .into_iter()
            .map(|x| 1.0 + x)
            .collect();
        self.put(&dt, &[vh], WeightType::F32, &v)?;
        // decay rates -(0.1 + 0.3 |N|): memories of a few to a few tens of tokens (no exp():
        // the values must be the same bits everywhere)
        let a = format!("blk.{il}.ssm_a");
        let v: Vec<f32> = Stream::new(g.seed, &a)
            .normals(vh as usize, 0.3)
            .into_iter()
            .map(|x| -(0.1 + x.abs()))
            .collect();
        self.put(&a, &[vh], WeightType::F32, &v)?;
        self.matrix(&b("ssm_beta"), &[n, vh], ty, gain)?;
        self.matrix(&b("ssm_alpha"), &[n, vh], ty, gain)?;
        self.gamma(&b("ssm_norm"), &[hd])?;
        self.matrix(&b("ssm_out"), &[value_dim, n], ty, gain)?;
        Ok(())
    }

    fn ffn(&mut self, il: u32) -> Result<(), SynthError> {
        let g = self.g;
        let (n, ff, e, ty, gain) = (
            u64::from(g.n_embd),
            u64::from(g.n_ff_exp),
            u64::from(g.n_expert),
            g.mat_type,
            g.gain,
        );
        let b = |t: &str| format!("blk.{il}.{t}.weight");
        self.matrix(&b("ffn_gate_inp"), &[n, e], WeightType::F32, GAIN_ROUTER)?;
        if g.fused_gate_up {
            // per expert: its n_ff gate rows, then its n_ff up rows, drawn from the unfused
            // tensors' streams so both layouts hold the same model
            let gate = self.values(&b("ffn_gate_exps"), n, &[ff, e], gain);
            let up = self.values(&b("ffn_up_exps"), n, &[ff, e], gain);
            let per = (n * ff) as usize;
            let fused: Vec<f32> = gate
                .chunks_exact(per)
                .zip(up.chunks_exact(per))
                .flat_map(|(gt, u)| gt.iter().chain(u).copied())
                .collect();
            self.put(&b("ffn_gate_up_exps"), &[n, 2 * ff, e], ty, &fused)?;
        } else {
            self.matrix(&b("ffn_gate_exps"), &[n, ff, e], ty, gain)?;
            self.matrix(&b("ffn_up_exps"), &[n, ff, e], ty, gain)?;
        }
        self.matrix(&b("ffn_down_exps"), &[ff, n, e], ty, gain)?;
        let sff = u64::from(g.n_ff_shexp);
        self.matrix(
            &b("ffn_gate_inp_shexp"),
            &[n],
            WeightType::F32,
            GAIN_SHEXP_GATE,
        )?;
        self.matrix(&b("ffn_gate_shexp"), &[n, sff], ty, gain)?;
        self.matrix(&b("ffn_up_shexp"), &[n, sff], ty, gain)?;
        self.matrix(&b("ffn_down_shexp"), &[sff, n], ty, gain)?;
        Ok(())
    }
}

/// The metadata keys: everything llama.cpp's loader reads for `qwen4exp`.
fn keys(w: &mut GgufWriter, g: &SynthGeometry) -> Result<(), SynthError> {
    let k = |s: &str| format!("{ARCH}.{s}");
    w.set("general.architecture", ARCH)?;
    w.set("general.name", NAME)?;
    // llama_ftype of the bulk of the weights (llama.cpp only prints it)
    let ftype: u32 = match g.mat_type {
        WeightType::F32 => 0,
        WeightType::F16 => 1,
        WeightType::Q8_0 => 7,
        WeightType::Bf16 => 32,
    };
    w.set("general.file_type", ftype)?;
    w.set(k("context_length"), g.ctx_train)?;
    w.set(k("embedding_length"), g.n_embd)?;
    w.set(k("block_count"), g.n_layer)?;
    // only a fallback in llama.cpp (both expert sizes are given); the shared expert's size
    w.set(k("feed_forward_length"), g.n_ff_shexp)?;
    w.set(k("attention.head_count"), g.n_head)?;
    w.set(k("attention.head_count_kv"), g.n_head_kv)?;
    w.set(k("attention.key_length"), g.head_dim)?;
    w.set(k("attention.value_length"), g.head_dim)?;
    w.set(k("attention.layer_norm_rms_epsilon"), g.rms_eps)?;
    w.set(k("rope.dimension_count"), g.n_rot)?;
    w.set(k("rope.freq_base"), g.rope_base)?;
    // int32 like the converter's add_array; llama.cpp reads exactly 4 entries
    w.set(
        k("rope.dimension_sections"),
        g.rope_sections.map(|s| s as i32).to_vec(),
    )?;
    w.set(k("expert_count"), g.n_expert)?;
    w.set(k("expert_used_count"), g.n_expert_used)?;
    w.set(k("expert_feed_forward_length"), g.n_ff_exp)?;
    w.set(k("expert_shared_feed_forward_length"), g.n_ff_shexp)?;
    // DeltaNet sizes: head_k_dim = head_v_dim = state, key heads = groups, value heads = rank
    w.set(k("ssm.conv_kernel"), g.ssm_conv)?;
    w.set(k("ssm.inner_size"), g.ssm_state * g.ssm_v_heads)?;
    w.set(k("ssm.state_size"), g.ssm_state)?;
    w.set(k("ssm.time_step_rank"), g.ssm_v_heads)?;
    w.set(k("ssm.group_count"), g.ssm_groups)?;
    w.set(k("hyper_connection.count"), g.n_hc)?;
    w.set(k("hyper_connection.low_rank"), g.hc_rank)?;
    w.set(k("attention.indexer.head_count"), g.indexer_heads)?;
    w.set(k("attention.indexer.key_length"), g.indexer_dim)?;
    w.set(k("attention.indexer.top_k"), g.indexer_top_k)?;
    // no QSA: every attention layer is dense
    w.set(
        k("attention.compress_ratios"),
        vec![0i32; g.n_layer as usize],
    )?;
    let recurrent: Vec<bool> = g.layers.iter().map(|&l| l == LayerKind::DeltaNet).collect();
    w.set(k("attention.recurrent_layers"), Value::from(recurrent))?;
    tokenizer::write(w, g.n_vocab)?;
    Ok(())
}

/// The whole file, ready to write. Checks the geometry first.
pub fn build(g: &SynthGeometry) -> Result<GgufWriter, SynthError> {
    Ok(build_counted(g)?.0)
}

/// `build` and the number of tensors it added.
pub(super) fn build_counted(g: &SynthGeometry) -> Result<(GgufWriter, usize), SynthError> {
    g.validate()?;
    let mut t = Tensors {
        g,
        w: GgufWriter::new(),
        count: 0,
    };
    keys(&mut t.w, g)?;
    let (n, v) = (u64::from(g.n_embd), u64::from(g.n_vocab));
    let emb = Stream::new(g.seed, "token_embd.weight").normals((n * v) as usize, g.embd_std);
    t.put("token_embd.weight", &[n, v], g.mat_type, &emb)?;
    for il in 0..g.n_layer {
        t.hc_site(&format!("blk.{il}.hc_attn"), true)?;
        match g.layers[il as usize] {
            LayerKind::Attention => t.attention(il)?,
            LayerKind::DeltaNet => t.deltanet(il)?,
        }
        t.hc_site(&format!("blk.{il}.hc_ffn"), true)?;
        t.ffn(il)?;
    }
    // the final mixer is the output norm: no inject rows, no output_norm
    t.hc_site("output_hc", false)?;
    if !g.tied_output {
        t.matrix("output.weight", &[n, v], g.mat_type, g.logit_gain)?;
    }
    Ok((t.w, t.count))
}
