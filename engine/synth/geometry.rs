//! `SynthGeometry`: every size, type and scale of a synthetic `qwen4exp` file, the named presets,
//! and the checks (checks.rs). A check's error names the `strata synth` flag that sets the field,
//! so the CLI reports a bad value in the user's terms.

use crate::gguf::GgmlType;

/// What a layer's token mixer is (`qwen4exp.attention.recurrent_layers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// Full (dense, gated-query) attention with IMRoPE.
    Attention,
    /// Gated DeltaNet linear attention (sizes from the `ssm_*` fields; the engine runs it in
    /// issue 26).
    DeltaNet,
}

/// The storage types the writer offers for the matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightType {
    F32,
    F16,
    Bf16,
    Q8_0,
}

impl WeightType {
    pub const NAMES: [&'static str; 4] = ["f32", "f16", "bf16", "q8_0"];

    pub fn parse(s: &str) -> Option<WeightType> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Some(WeightType::F32),
            "f16" => Some(WeightType::F16),
            "bf16" => Some(WeightType::Bf16),
            "q8_0" => Some(WeightType::Q8_0),
            _ => None,
        }
    }

    pub fn ggml(self) -> GgmlType {
        match self {
            WeightType::F32 => GgmlType::F32,
            WeightType::F16 => GgmlType::F16,
            WeightType::Bf16 => GgmlType::BF16,
            WeightType::Q8_0 => GgmlType::Q8_0,
        }
    }

    /// Values per block: a tensor's ne0 must be a multiple of it.
    pub fn block(self) -> u32 {
        match self {
            WeightType::Q8_0 => 32,
            _ => 1,
        }
    }
}

impl std::fmt::Display for WeightType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Self::NAMES[*self as usize])
    }
}

/// A synthetic model's shape and scales. Field docs give the `strata synth` flag.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthGeometry {
    /// `--layers`: transformer blocks (`block_count`).
    pub n_layer: u32,
    /// `--n-embd`: the width of one residual stream.
    pub n_embd: u32,
    /// `--streams`: S, hyper-connection residual streams (> 1).
    pub n_hc: u32,
    /// `--rank`: r, the hyper-connection read gate's low rank.
    pub hc_rank: u32,
    /// `--heads` / `--kv-heads`: query and key/value heads.
    pub n_head: u32,
    pub n_head_kv: u32,
    /// `--head-dim`: key = value head size (a multiple of 16).
    pub head_dim: u32,
    /// `--n-rot`: rotated dims per head (partial rotary; qwen4exp: head_dim / 4).
    pub n_rot: u32,
    /// `--rope-sections t,h,w,e`: IMRoPE sections in rotated pairs, summing to n_rot / 2. Text
    /// positions are (p, p, p, 0), so pairs mapped to the e section do not rotate.
    pub rope_sections: [u32; 4],
    /// `--rope-base`.
    pub rope_base: f32,
    /// `--experts` / `--experts-used`.
    pub n_expert: u32,
    pub n_expert_used: u32,
    /// `--expert-ff`: each routed expert's hidden size.
    pub n_ff_exp: u32,
    /// `--shared-ff`: the shared expert's hidden size (llama.cpp's qwen4exp always loads one).
    pub n_ff_shexp: u32,
    /// `--vocab`: tokens (the 259 special and byte tokens, then word pieces).
    pub n_vocab: u32,
    /// `--ctx`: `context_length`.
    pub ctx_train: u32,
    /// `--eps`: `attention.layer_norm_rms_epsilon`.
    pub rms_eps: f32,
    /// `--layer-kinds`: one per layer, `a` (attention) or `d` (DeltaNet); default all attention.
    pub layers: Vec<LayerKind>,
    /// `--hc-type`: storage of the hyper-connection down/up projections.
    pub hc_type: WeightType,
    /// `--mat-type`: storage of the embedding, LM head, attention, indexer and expert matrices.
    pub mat_type: WeightType,
    /// `--fused-gate-up`: one `ffn_gate_up_exps` tensor instead of `ffn_gate_exps` + `ffn_up_exps`
    /// (the same numbers: a fused file is the same model as the unfused one).
    pub fused_gate_up: bool,
    /// `--tied`: no `output.weight`; llama.cpp reads the embedding as the LM head.
    pub tied_output: bool,
    /// `--seed`.
    pub seed: u64,
    /// `--std`: the token embedding's std (the residual streams' starting scale).
    pub embd_std: f32,
    /// `--gain`: the projection matrices' gain; entries are N(0, (gain / sqrt(n_in))^2).
    pub gain: f32,
    /// `--logit-gain`: the LM head's gain (logit std ~ logit_gain x rms of the final mix).
    pub logit_gain: f32,
    /// `--indexer-heads`, `--indexer-dim`, `--indexer-top-k`: the QSA indexer (its tensors are
    /// required on attention layers; with every compress ratio 0 it is never used).
    pub indexer_heads: u32,
    pub indexer_dim: u32,
    pub indexer_top_k: u32,
    /// `--ssm-conv`, `--ssm-state`, `--ssm-groups`, `--ssm-v-heads`: the DeltaNet sizes the
    /// `ssm.*` keys carry (required and non-zero even with no DeltaNet layer).
    pub ssm_conv: u32,
    pub ssm_state: u32,
    pub ssm_groups: u32,
    pub ssm_v_heads: u32,
}

/// The preset names, in `--preset` order.
pub const PRESETS: [&str; 3] = ["tiny", "small", "seeds"];

/// IMRoPE sections for `pairs` rotated pairs in the 11:11:10 proportion of Qwen3.5 / qwen4exp
/// ([11, 11, 10, 0] for 32 pairs), e = 0.
pub fn default_sections(pairs: u32) -> [u32; 4] {
    let t = pairs.div_ceil(3);
    let h = (pairs - t).div_ceil(2);
    [t, h, pairs - t - h, 0]
}

impl SynthGeometry {
    /// `tiny`: 2 layers, n_embd 64, S 4 r 16, 4/2 heads of 32, 8 experts top 2: the fast tests'.
    fn tiny() -> SynthGeometry {
        SynthGeometry {
            n_layer: 2,
            n_embd: 64,
            n_hc: 4,
            hc_rank: 16,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 32,
            n_rot: 8,
            rope_sections: default_sections(4),
            rope_base: 10_000.0,
            n_expert: 8,
            n_expert_used: 2,
            n_ff_exp: 32,
            n_ff_shexp: 64,
            n_vocab: 320,
            ctx_train: 4096,
            rms_eps: 1e-6,
            layers: vec![LayerKind::Attention; 2],
            hc_type: WeightType::F32,
            mat_type: WeightType::F16,
            fused_gate_up: false,
            tied_output: false,
            seed: 1,
            embd_std: 0.3,
            gain: 1.0,
            logit_gain: 12.0,
            indexer_heads: 2,
            indexer_dim: 16,
            indexer_top_k: 64,
            ssm_conv: 4,
            ssm_state: 16,
            ssm_groups: 2,
            ssm_v_heads: 4,
        }
    }

    /// `small`: 3 layers, n_embd 256, S 4 r 32, 16 experts top 4, fused gate_up, F16 HC weights.
    fn small() -> SynthGeometry {
        SynthGeometry {
            n_layer: 3,
            n_embd: 256,
            hc_rank: 32,
            n_head: 8,
            n_head_kv: 2,
            head_dim: 64,
            n_rot: 16,
            rope_sections: default_sections(8),
            rope_base: 1_000_000.0,
            n_expert: 16,
            n_expert_used: 4,
            n_ff_exp: 64,
            n_ff_shexp: 128,
            n_vocab: 384,
            layers: vec![LayerKind::Attention; 3],
            hc_type: WeightType::F16,
            fused_gate_up: true,
            seed: 2,
            ..SynthGeometry::tiny()
        }
    }

    /// `seeds`: the seed PRs' hyper-connection geometry (n_embd 2560, S 4, r 320, BF16 HC
    /// weights) in 2 layers with few, small experts, so the file stays near 120 MB.
    fn seeds() -> SynthGeometry {
        SynthGeometry {
            n_layer: 2,
            n_embd: 2560,
            hc_rank: 320,
            n_head: 8,
            n_head_kv: 2,
            head_dim: 128,
            n_rot: 32,
            rope_sections: default_sections(16),
            rope_base: 10_000_000.0,
            n_expert: 4,
            n_expert_used: 2,
            n_ff_exp: 64,
            n_ff_shexp: 128,
            n_vocab: 512,
            layers: vec![LayerKind::Attention; 2],
            hc_type: WeightType::Bf16,
            seed: 3,
            indexer_dim: 32,
            ..SynthGeometry::tiny()
        }
    }

    /// A named preset (`PRESETS`), or None.
    pub fn preset(name: &str) -> Option<SynthGeometry> {
        match name {
            "tiny" => Some(Self::tiny()),
            "small" => Some(Self::small()),
            "seeds" => Some(Self::seeds()),
            _ => None,
        }
    }

    /// Sets the layer count and resizes `layers` (new layers are attention layers).
    pub fn set_layers(&mut self, n: u32) {
        self.n_layer = n;
        self.layers.resize(n as usize, LayerKind::Attention);
    }

    /// Sets head_dim and the rotary part that follows it (n_rot = head_dim / 4, default sections).
    pub fn set_head_dim(&mut self, d: u32) {
        self.head_dim = d;
        self.n_rot = d / 4;
        self.rope_sections = default_sections(self.n_rot / 2);
    }

    /// The largest vocabulary the synthetic tokenizer can fill.
    pub fn max_vocab() -> u32 {
        super::tokenizer::max_vocab()
    }

    /// One-line summary for the CLI and the test data's README.
    pub fn summary(&self) -> String {
        let kinds: String = self
            .layers
            .iter()
            .map(|k| match k {
                LayerKind::Attention => 'a',
                LayerKind::DeltaNet => 'd',
            })
            .collect();
        format!(
            "layers {} ({kinds}), n_embd {}, streams {} rank {}, heads {}/{} x {} (n_rot {}, \
             sections {:?}, base {}), experts {} top {} ff {} + shared ff {}{}, vocab {}, \
             hc {}, matrices {}{}, seed {}, std {} gain {} logit-gain {}",
            self.n_layer,
            self.n_embd,
            self.n_hc,
            self.hc_rank,
            self.n_head,
            self.n_head_kv,
            self.head_dim,
            self.n_rot,
            self.rope_sections,
            self.rope_base,
            self.n_expert,
            self.n_expert_used,
            self.n_ff_exp,
            self.n_ff_shexp,
            if self.fused_gate_up {
                " (fused gate_up)"
            } else {
                ""
            },
            self.n_vocab,
            self.hc_type,
            self.mat_type,
            if self.tied_output {
                ", tied output"
            } else {
                ""
            },
            self.seed,
            self.embd_std,
            self.gain,
            self.logit_gain,
        )
    }
}
