//! What the generation loop measures, per verify window and per turn, with the protocol's field
//! names (`window`, `turn` events in docs/protocol.md). docs/metrics.md defines each field exactly
//! as computed here.

use crate::model::DeviceMemory;

/// One verify window: the target's forward pass over `t` rows.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowStats {
    /// Wall time of the verify forward pass, from submitting the first kernel to the logits
    /// being on the host (the copy waits for the queue, so the device work is inside).
    pub ms: f64,
    /// Rows in the window: 1 + proposed.
    pub t: u32,
    /// Draft tokens checked.
    pub proposed: u32,
    /// Draft tokens accepted (the bonus/correction token is not counted).
    pub accepted: u32,
}

/// Why a turn ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-generation token (`GenerateConfig::stop_tokens`).
    Eos,
    StopString,
    /// The turn's token budget (what a turn ends by unless something else stops it first).
    #[default]
    MaxTokens,
    /// The KV cache is full (the protocol reports it as `max_tokens`).
    ContextFull,
    Cancelled,
}

/// One turn: a prefill and the decode windows after it (`Default`: nothing run yet).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TurnStats {
    /// Prompt tokens run through the model (after reusing a cached prefix).
    pub prefill_tokens: u32,
    /// Prompt tokens whose KV was reused from the previous turn.
    pub cached_tokens: u32,
    pub prefill_ms: f64,
    pub prefill_tps: f64,
    /// Tokens produced by verify windows (all generated tokens but the first, which the prefill
    /// produces), including an end-of-generation token.
    pub decode_tokens: u32,
    pub decode_ms: f64,
    pub decode_tps: f64,
    pub windows: u32,
    pub tokens_per_window: f64,
    pub proposed: u32,
    pub accepted: u32,
    pub acceptance: f64,
    pub mean_accepted_len: f64,
    pub ttft_ms: f64,
    /// Sum of the windows' `ms`.
    pub verify_ms: f64,
    pub stop: StopReason,
    /// Every generated token, in order (the first from the prefill).
    pub tokens: Vec<u32>,
}

impl TurnStats {
    /// Fills the derived fields from the counted ones.
    pub(crate) fn finish(&mut self) {
        let rate = |n: u32, ms: f64| {
            if ms > 0.0 {
                n as f64 * 1000.0 / ms
            } else {
                0.0
            }
        };
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        self.prefill_tps = rate(self.prefill_tokens, self.prefill_ms);
        self.decode_tps = rate(self.decode_tokens, self.decode_ms);
        self.tokens_per_window = ratio(self.decode_tokens as f64, self.windows as f64);
        self.acceptance = ratio(self.accepted as f64, self.proposed as f64);
        self.mean_accepted_len = ratio(self.accepted as f64, self.windows as f64);
    }
}

/// One device's memory against its budget.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceStats {
    pub memory: DeviceMemory,
    /// The device's global memory size, bytes.
    pub budget: u64,
}
