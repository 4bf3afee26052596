//! The slot for a multi-token-prediction drafter: a model's own MTP layer (DeepSeek-style
//! `blk.N.nextn.*` tensors) run on the target's last hidden state and the last token, one draft
//! token per step, up to `max_t` steps, stopping early when the draft's probability falls below
//! `min_p`. Its drafts are sampled, so it returns q per token and the rejection rule uses it. The
//! dense models here have no such layer: `check_available` says so in words.

use super::SpecError;
use crate::gguf::Gguf;

/// Tensor-name prefix an MTP layer has in GGUF (llama.cpp's convention).
pub const MTP_TENSOR: &str = "nextn.";

/// `--mtp-max-t` and `--spec-min-p`, stored for the MTP drafter.
#[derive(Clone, Debug, PartialEq)]
pub struct MtpOptions {
    /// Most draft steps the MTP layer runs per window (its own T).
    pub max_t: usize,
    /// Stop drafting when the drafted token's probability under the MTP head is below this.
    pub min_p: f32,
}

impl Default for MtpOptions {
    fn default() -> Self {
        MtpOptions {
            max_t: 4,
            min_p: 0.0,
        }
    }
}

impl MtpOptions {
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.max_t == 0 || self.max_t > super::MAX_DRAFT {
            return Err(SpecError::BadParam {
                name: "mtp-max-t",
                value: self.max_t as f64,
                why: "must be in 1..=7 (the verify window is at most 8 rows)",
            });
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(SpecError::BadParam {
                name: "spec-min-p",
                value: self.min_p as f64,
                why: "must be in [0, 1]",
            });
        }
        Ok(())
    }
}

/// True when the file has MTP tensors.
pub fn has_mtp(g: &Gguf) -> bool {
    g.tensors().iter().any(|t| t.name.contains(MTP_TENSOR))
}

/// Ok when the file could drive an MTP drafter; otherwise the error the user sees. No
/// architecture here has an MTP implementation yet, so a file with the tensors is reported as
/// unsupported rather than silently falling back.
pub fn check_available(g: &Gguf, model: &str) -> Result<(), SpecError> {
    let arch = g
        .opt_str("general.architecture")
        .ok()
        .flatten()
        .unwrap_or("?")
        .to_string();
    if !has_mtp(g) {
        return Err(SpecError::MtpUnavailable {
            model: model.into(),
            arch,
            tensor: "blk.N.nextn.*",
        });
    }
    Err(SpecError::MtpNotImplemented {
        model: model.into(),
        arch,
    })
}
