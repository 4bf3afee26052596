//! `strata synth`: writes a synthetic `qwen4exp` GGUF (seeded random weights) from a preset with
//! any field overridden; prints the geometry, the file's size and its SHA-256. The same flags give
//! the same bytes (tests/data/qwen4exp/README.md records the digests the dumps were made from).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use strata::synth::{self, LayerKind, SynthGeometry, WeightType, PRESETS};

use super::common;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Starting geometry: tiny, small or seeds (each flag below overrides one field).
    #[arg(long, default_value = "tiny")]
    preset: String,
    /// Output GGUF file.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Seed of the random weights.
    #[arg(long)]
    seed: Option<u64>,
    /// Transformer blocks (new layers are attention layers).
    #[arg(long)]
    layers: Option<u32>,
    /// Width of one residual stream.
    #[arg(long)]
    n_embd: Option<u32>,
    /// Hyper-connection streams S (at least 2).
    #[arg(long)]
    streams: Option<u32>,
    /// Hyper-connection low rank r.
    #[arg(long)]
    rank: Option<u32>,
    /// Query heads.
    #[arg(long)]
    heads: Option<u32>,
    /// Key/value heads (divides --heads).
    #[arg(long)]
    kv_heads: Option<u32>,
    /// Head size, a multiple of 16 (also sets --n-rot to a quarter of it and the default sections).
    #[arg(long)]
    head_dim: Option<u32>,
    /// Rotated dims per head (even, at most --head-dim).
    #[arg(long)]
    n_rot: Option<u32>,
    /// IMRoPE sections t,h,w,e in rotated pairs, summing to n_rot / 2 (default: 11:11:10:0 proportions).
    #[arg(long, value_name = "T,H,W,E")]
    rope_sections: Option<String>,
    /// RoPE frequency base.
    #[arg(long)]
    rope_base: Option<f32>,
    /// Routed experts.
    #[arg(long)]
    experts: Option<u32>,
    /// Experts used per token.
    #[arg(long)]
    experts_used: Option<u32>,
    /// Routed expert hidden size.
    #[arg(long)]
    expert_ff: Option<u32>,
    /// Shared expert hidden size (> 0: llama.cpp always loads the shared expert).
    #[arg(long)]
    shared_ff: Option<u32>,
    /// Vocabulary size (259 special and byte tokens, then word pieces).
    #[arg(long)]
    vocab: Option<u32>,
    /// context_length.
    #[arg(long)]
    ctx: Option<u32>,
    /// RMS norm epsilon.
    #[arg(long)]
    eps: Option<f32>,
    /// Layer kinds, one letter per layer: a = attention, d = Gated DeltaNet.
    #[arg(long, value_name = "aad...")]
    layer_kinds: Option<String>,
    /// Storage of the hyper-connection down/up projections: f32, f16, bf16, q8_0.
    #[arg(long)]
    hc_type: Option<String>,
    /// Storage of the embedding, LM head, attention and expert matrices: f32, f16, bf16, q8_0.
    #[arg(long)]
    mat_type: Option<String>,
    /// One ffn_gate_up_exps tensor per layer instead of ffn_gate_exps + ffn_up_exps (same numbers).
    #[arg(long, conflicts_with = "no_fused_gate_up")]
    fused_gate_up: bool,
    /// Separate ffn_gate_exps and ffn_up_exps (the tiny and seeds presets' layout).
    #[arg(long)]
    no_fused_gate_up: bool,
    /// No output.weight: the LM head is the token embedding.
    #[arg(long)]
    tied: bool,
    /// Token embedding std (the residual streams' starting scale).
    #[arg(long)]
    std: Option<f32>,
    /// Gain of the projection matrices: entries N(0, (gain / sqrt(n_in))^2).
    #[arg(long)]
    gain: Option<f32>,
    /// Gain of the LM head (larger: more peaked next-token distributions).
    #[arg(long)]
    logit_gain: Option<f32>,
    /// QSA indexer heads, head size and top-k (tensors required; unused with no QSA layer).
    #[arg(long)]
    indexer_heads: Option<u32>,
    #[arg(long)]
    indexer_dim: Option<u32>,
    #[arg(long)]
    indexer_top_k: Option<u32>,
    /// DeltaNet sizes the ssm.* keys carry (conv kernel, state = head size, key groups, value heads).
    #[arg(long)]
    ssm_conv: Option<u32>,
    #[arg(long)]
    ssm_state: Option<u32>,
    #[arg(long)]
    ssm_groups: Option<u32>,
    #[arg(long)]
    ssm_v_heads: Option<u32>,
}

fn weight_type(flag: &str, s: &str) -> anyhow::Result<WeightType> {
    WeightType::parse(s)
        .with_context(|| format!("{flag} {s}: not one of {}", WeightType::NAMES.join(", ")))
}

/// The preset with every given flag applied (checked later by `SynthGeometry::validate`).
fn geometry(a: &Args) -> anyhow::Result<SynthGeometry> {
    let Some(mut g) = SynthGeometry::preset(&a.preset) else {
        bail!("--preset {}: not one of {}", a.preset, PRESETS.join(", "));
    };
    if let Some(n) = a.layers {
        g.set_layers(n);
    }
    if let Some(d) = a.head_dim {
        g.set_head_dim(d);
    }
    if let Some(r) = a.n_rot {
        g.n_rot = r;
        g.rope_sections = synth::default_sections(r / 2);
    }
    if let Some(s) = &a.rope_sections {
        let parts: Vec<u32> = s
            .split(',')
            .map(|p| p.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .ok()
            .filter(|v: &Vec<u32>| v.len() == 4)
            .with_context(|| format!("--rope-sections {s}: give four integers t,h,w,e"))?;
        g.rope_sections = [parts[0], parts[1], parts[2], parts[3]];
    }
    if let Some(k) = &a.layer_kinds {
        g.layers = k
            .chars()
            .map(|c| match c {
                'a' => Ok(LayerKind::Attention),
                'd' => Ok(LayerKind::DeltaNet),
                _ => bail!("--layer-kinds {k}: `{c}` is not a (attention) or d (DeltaNet)"),
            })
            .collect::<anyhow::Result<_>>()?;
        if a.layers.is_none() {
            g.n_layer = g.layers.len() as u32;
        }
    }
    if let Some(t) = &a.hc_type {
        g.hc_type = weight_type("--hc-type", t)?;
    }
    if let Some(t) = &a.mat_type {
        g.mat_type = weight_type("--mat-type", t)?;
    }
    if a.fused_gate_up {
        g.fused_gate_up = true;
    }
    if a.no_fused_gate_up {
        g.fused_gate_up = false;
    }
    g.tied_output |= a.tied;
    let set = |dst: &mut u32, v: Option<u32>| {
        if let Some(v) = v {
            *dst = v;
        }
    };
    set(&mut g.n_embd, a.n_embd);
    set(&mut g.n_hc, a.streams);
    set(&mut g.hc_rank, a.rank);
    set(&mut g.n_head, a.heads);
    set(&mut g.n_head_kv, a.kv_heads);
    set(&mut g.n_expert, a.experts);
    set(&mut g.n_expert_used, a.experts_used);
    set(&mut g.n_ff_exp, a.expert_ff);
    set(&mut g.n_ff_shexp, a.shared_ff);
    set(&mut g.n_vocab, a.vocab);
    set(&mut g.ctx_train, a.ctx);
    set(&mut g.indexer_heads, a.indexer_heads);
    set(&mut g.indexer_dim, a.indexer_dim);
    set(&mut g.indexer_top_k, a.indexer_top_k);
    set(&mut g.ssm_conv, a.ssm_conv);
    set(&mut g.ssm_state, a.ssm_state);
    set(&mut g.ssm_groups, a.ssm_groups);
    set(&mut g.ssm_v_heads, a.ssm_v_heads);
    let setf = |dst: &mut f32, v: Option<f32>| {
        if let Some(v) = v {
            *dst = v;
        }
    };
    setf(&mut g.rope_base, a.rope_base);
    setf(&mut g.rms_eps, a.eps);
    setf(&mut g.embd_std, a.std);
    setf(&mut g.gain, a.gain);
    setf(&mut g.logit_gain, a.logit_gain);
    if let Some(s) = a.seed {
        g.seed = s;
    }
    Ok(g)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let g = geometry(&a)?;
    g.validate()?;
    let mut out = common::stdout();
    writeln!(out, "preset {}: {}", a.preset, g.summary())?;
    let w = synth::write_file(&g, &a.output)?;
    writeln!(
        out,
        "wrote {}: {} bytes, {} tensors",
        a.output.display(),
        w.bytes,
        w.tensors
    )?;
    writeln!(out, "sha256 {}", w.sha256)?;
    Ok(())
}
