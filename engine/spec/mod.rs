//! Speculative decoding: a drafter proposes up to `MAX_DRAFT` tokens, the target verifies them in
//! one forward pass over T = 1 + d rows, and the longest agreeing prefix plus one token from the
//! target is kept. The pieces: the drafter trait and its input (`drafter`), the prompt-lookup
//! drafter (`ngram`), the multi-token-prediction slot (`mtp`), and the acceptance rules (`verify`).
//! The loop that drives them is `crate::generate`. See docs/speculative.md.

pub mod drafter;
pub mod mtp;
pub mod ngram;
pub mod verify;

pub use drafter::{Draft, DraftInput, Drafter, HiddenRows};
pub use mtp::MtpOptions;
pub use ngram::NgramDrafter;
pub use verify::{verify_window, Verdict};

/// Most draft tokens per window: the verify window is at most 8 rows (the multi-row kernels'
/// limit, `kernels::qmatrix::MMVQ_MAX_T`), one of which is the last accepted token.
pub const MAX_DRAFT: usize = crate::kernels::qmatrix::MMVQ_MAX_T - 1;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("--spec {0}: at most {MAX_DRAFT} draft tokens per window (the verify window is at most {rows} rows)", rows = MAX_DRAFT + 1)]
    TooManyDrafts(usize),
    #[error("the MTP drafter needs a multi-token-prediction layer, and {model} (architecture {arch}) has none (no `{tensor}` tensors); use the n-gram drafter (--drafter ngram)")]
    MtpUnavailable {
        model: String,
        arch: String,
        tensor: &'static str,
    },
    #[error("{model} (architecture {arch}) has MTP tensors, but the MTP drafter for this architecture is not implemented yet; use the n-gram drafter (--drafter ngram)")]
    MtpNotImplemented { model: String, arch: String },
    #[error("invalid speculation setting {name} = {value}: {why}")]
    BadParam {
        name: &'static str,
        value: f64,
        why: &'static str,
    },
    #[error("draft of {got} tokens, but at most {max} were asked for ({drafter} drafter)")]
    DraftTooLong {
        drafter: &'static str,
        got: usize,
        max: usize,
    },
    #[error("draft distribution {index} has {got} entries; the vocabulary has {n_vocab}")]
    DraftProbs {
        index: usize,
        got: usize,
        n_vocab: usize,
    },
    #[error("the verify pass returned {got} logit rows for a window of {want}")]
    Rows { got: usize, want: usize },
    #[error(transparent)]
    Sample(#[from] crate::sampling::SampleError),
}
