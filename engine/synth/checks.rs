//! `SynthGeometry::validate`: every field's range, each error naming the `strata synth` flag
//! that sets the field. The limits are llama.cpp's (its qwen4exp loader refuses S = 1, zero
//! sizes, more experts used than exist, ...) plus the writer's own (Q8_0 block widths, the
//! vocabulary's size, head sizes in multiples of 16, sections that cover the rotated pairs).

use super::geometry::SynthGeometry;
use super::SynthError;

impl SynthGeometry {
    /// Checks every field; the error names the flag.
    pub fn validate(&self) -> Result<(), SynthError> {
        let bad = |flag: &'static str, value: String, why: String| {
            Err(SynthError::Invalid { flag, value, why })
        };
        let positive = [
            ("--layers", self.n_layer),
            ("--n-embd", self.n_embd),
            ("--rank", self.hc_rank),
            ("--heads", self.n_head),
            ("--kv-heads", self.n_head_kv),
            ("--experts", self.n_expert),
            ("--experts-used", self.n_expert_used),
            ("--expert-ff", self.n_ff_exp),
            ("--ctx", self.ctx_train),
            ("--indexer-heads", self.indexer_heads),
            ("--indexer-dim", self.indexer_dim),
            ("--indexer-top-k", self.indexer_top_k),
            ("--ssm-conv", self.ssm_conv),
            ("--ssm-state", self.ssm_state),
            ("--ssm-groups", self.ssm_groups),
            ("--ssm-v-heads", self.ssm_v_heads),
        ];
        for (flag, v) in positive {
            if v == 0 {
                return bad(flag, "0".into(), "must be greater than zero".into());
            }
        }
        if self.n_layer > 512 {
            return bad(
                "--layers",
                self.n_layer.to_string(),
                "llama.cpp allows at most 512".into(),
            );
        }
        if self.n_hc < 2 {
            return bad(
                "--streams",
                self.n_hc.to_string(),
                "must be at least 2: one stream has nothing to mix (llama.cpp refuses it)".into(),
            );
        }
        if self.ssm_v_heads % self.ssm_groups != 0 {
            return bad(
                "--ssm-groups",
                self.ssm_groups.to_string(),
                format!("must divide --ssm-v-heads {}", self.ssm_v_heads),
            );
        }
        if self.n_head % self.n_head_kv != 0 {
            return bad(
                "--kv-heads",
                self.n_head_kv.to_string(),
                format!("must divide --heads {}", self.n_head),
            );
        }
        if self.head_dim == 0 || self.head_dim % 16 != 0 {
            return bad(
                "--head-dim",
                self.head_dim.to_string(),
                "must be a positive multiple of 16".into(),
            );
        }
        if self.n_rot == 0 || self.n_rot % 2 != 0 || self.n_rot > self.head_dim {
            return bad(
                "--n-rot",
                self.n_rot.to_string(),
                format!(
                    "must be even, positive and at most --head-dim {}",
                    self.head_dim
                ),
            );
        }
        let s = self.rope_sections;
        if s.iter().sum::<u32>() != self.n_rot / 2 || s[0] + s[1] + s[2] == 0 {
            return bad(
                "--rope-sections",
                format!("{s:?}"),
                format!(
                    "must sum to --n-rot / 2 = {} with t, h or w non-zero",
                    self.n_rot / 2
                ),
            );
        }
        if !(self.rope_base.is_finite() && self.rope_base > 0.0) {
            return bad(
                "--rope-base",
                self.rope_base.to_string(),
                "must be finite and positive".into(),
            );
        }
        if self.n_expert > 512 {
            return bad(
                "--experts",
                self.n_expert.to_string(),
                "llama.cpp allows at most 512".into(),
            );
        }
        if self.n_expert_used > self.n_expert {
            return bad(
                "--experts-used",
                self.n_expert_used.to_string(),
                format!("is more than --experts {}", self.n_expert),
            );
        }
        if self.n_ff_shexp == 0 {
            return bad(
                "--shared-ff",
                "0".into(),
                "must be greater than zero: llama.cpp's qwen4exp always loads the shared expert"
                    .into(),
            );
        }
        let (min_vocab, max_vocab) = (super::tokenizer::MIN_VOCAB, Self::max_vocab());
        if !(min_vocab..=max_vocab).contains(&self.n_vocab) {
            return bad(
                "--vocab",
                self.n_vocab.to_string(),
                format!("must be {min_vocab} to {max_vocab} (259 special and byte tokens, then word pieces)"),
            );
        }
        if !(self.rms_eps.is_finite() && self.rms_eps > 0.0) {
            return bad(
                "--eps",
                self.rms_eps.to_string(),
                "must be finite and positive".into(),
            );
        }
        for (flag, v) in [
            ("--std", self.embd_std),
            ("--gain", self.gain),
            ("--logit-gain", self.logit_gain),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(flag, v.to_string(), "must be finite and positive".into());
            }
        }
        if self.layers.len() != self.n_layer as usize {
            return bad(
                "--layer-kinds",
                format!("{} kinds", self.layers.len()),
                format!("needs one per layer (--layers {})", self.n_layer),
            );
        }
        self.check_blocks()
    }

    /// Q8_0 stores 32-value blocks along ne0: every matrix of that type needs its input width
    /// to be a multiple of 32.
    fn check_blocks(&self) -> Result<(), SynthError> {
        let mat = self.mat_type.block();
        let hc = self.hc_type.block();
        let widths = [
            ("--mat-type", mat, "--n-embd", self.n_embd),
            (
                "--mat-type",
                mat,
                "--heads x --head-dim",
                self.n_head * self.head_dim,
            ),
            ("--mat-type", mat, "--expert-ff", self.n_ff_exp),
            ("--mat-type", mat, "--shared-ff", self.n_ff_shexp),
            (
                "--mat-type",
                mat,
                "--ssm-state x --ssm-v-heads",
                self.ssm_state * self.ssm_v_heads,
            ),
            (
                "--hc-type",
                hc,
                "--streams x --n-embd",
                self.n_hc * self.n_embd,
            ),
            ("--hc-type", hc, "--rank", self.hc_rank),
        ];
        for (flag, block, what, width) in widths {
            if width % block != 0 {
                return Err(SynthError::Invalid {
                    flag,
                    value: if flag == "--hc-type" {
                        self.hc_type
                    } else {
                        self.mat_type
                    }
                    .to_string(),
                    why: format!("needs {what} = {width} to be a multiple of {block}"),
                });
            }
        }
        Ok(())
    }
}
