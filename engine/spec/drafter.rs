//! The drafter trait. A drafter sees the whole accepted sequence and, when it asks for them, the
//! target's hidden states from the verify pass that just ran (an MTP layer drafts from the
//! target's last hidden state; a prompt-lookup drafter needs only tokens). It returns up to `max`
//! tokens and, when its drafts were sampled from a distribution, that distribution per token (the
//! rejection rule needs q; `None` means deterministic, q one-hot on the token).

use super::SpecError;
use crate::sycl::DeviceBuffer;

/// Rows of the target's final hidden states (before the output norm) on the device.
#[derive(Clone, Copy)]
pub struct HiddenRows<'a> {
    pub buf: &'a DeviceBuffer<f32>, // (rows, n_embd) token-major
    /// The row of the last accepted token (the one whose next token the drafter predicts).
    pub row: usize,
    pub n_embd: usize,
}

/// What the engine hands a drafter before a verify window.
pub struct DraftInput<'a> {
    /// Prompt plus accepted output; the last entry is the token that opens the next window (its
    /// KV is not written yet) at position `tokens.len() - 1`.
    pub tokens: &'a [u32],
    /// The target's hidden states of the previous verify pass; `Some` only when the drafter's
    /// `needs_hidden` is true and the engine provides them.
    pub hidden: Option<HiddenRows<'a>>,
}

/// A proposal: `tokens` (possibly empty) and, for sampled drafts, q per token (each n_vocab long).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Draft {
    pub tokens: Vec<u32>,
    pub probs: Option<Vec<Vec<f32>>>,
}

impl Draft {
    pub fn deterministic(tokens: Vec<u32>) -> Draft {
        Draft {
            tokens,
            probs: None,
        }
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Keeps the first `n` tokens (and their distributions).
    pub fn truncate(&mut self, n: usize) {
        self.tokens.truncate(n);
        if let Some(p) = &mut self.probs {
            p.truncate(n);
        }
    }
}

pub trait Drafter: Send {
    /// Short name for logs and stats ("ngram", "mtp").
    fn name(&self) -> &'static str;

    /// True when `propose` wants the target's hidden states (`DraftInput::hidden`).
    fn needs_hidden(&self) -> bool {
        false
    }

    /// A new sequence starts (a turn whose prompt is `prompt`): drop per-sequence state.
    fn begin(&mut self, _prompt: &[u32]) -> Result<(), SpecError> {
        Ok(())
    }

    /// Up to `max` draft tokens continuing `input.tokens`. `max` is already capped by the
    /// window size, the remaining token budget and the context.
    fn propose(&mut self, input: &DraftInput<'_>, max: usize) -> Result<Draft, SpecError>;

    /// After verification: `accepted` of the `proposed` drafts were kept (a drafter with its own
    /// cache rolls the rejected ones back here).
    fn accepted(&mut self, _proposed: usize, _accepted: usize) {}
}
