//! The engine process protocol: JSON lines between the app and `strata engine`.
//!
//! Requests go to the engine's stdin, events come back on its stdout; one complete JSON object per
//! line, tagged by `"type"`. Both sides ignore fields they do not know (forward compatible), and an
//! event whose `type` is unknown decodes as [`Event::Unknown`] instead of failing. The normative
//! description (ordering, which event answers which request) is `docs/protocol.md`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol version carried by `hello`; bumped only on incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;

/// A request, app -> engine.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Load(Load),
    Generate(Generate),
    Cancel {
        id: u64,
    },
    Stats {},
    Shutdown {},
    Count(Count),
    /// The token ids of the last finished `generate` (its prompt as it ran, its reply), for
    /// an A/B that checks both arms ran the same prompt and finds where their replies part.
    /// Answered by one `ids` event (or `error{id}` when `id` is not the last finished turn).
    Ids {
        id: u64,
    },
}

/// Load a model (replacing any loaded one). Answered by `progress`* then `loaded` or `error`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Load {
    /// Path of the GGUF file.
    pub model: String,
    /// Context size in tokens (0 = the model's training context).
    #[serde(default)]
    pub ctx: u32,
    #[serde(default)]
    pub devices: DeviceSplit,
    /// Draft tokens proposed per verify window (0 = no speculation).
    #[serde(default)]
    pub spec: u32,
    /// Sampling defaults for `generate` requests that omit fields.
    #[serde(default)]
    pub sampling: Sampling,
}

/// How to place the model on devices.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct DeviceSplit {
    /// Split the CPU device into this many sub-devices ("cards"); None = use it whole.
    #[serde(default)]
    pub split_cpu: Option<u32>,
}

/// Sampling parameters. Every field has a default, so `{}` is valid.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(default)]
pub struct Sampling {
    /// 0 = greedy.
    pub temperature: f32,
    /// 0 = disabled.
    pub top_k: u32,
    /// 1.0 = disabled.
    pub top_p: f32,
    /// 0.0 = disabled.
    pub min_p: f32,
    /// 1.0 = disabled.
    pub repeat_penalty: f32,
    /// None = seeded from the clock.
    pub seed: Option<u64>,
    /// Upper bound on generated tokens for one turn.
    pub max_tokens: u32,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 0.7,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.1,
            seed: None,
            max_tokens: 512,
        }
    }
}

/// Generate one assistant turn for a conversation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Generate {
    /// Chosen by the app, echoed by every event of this turn.
    pub id: u64,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub sampling: Sampling,
    /// Overrides the load's `spec` for this turn.
    #[serde(default)]
    pub spec: Option<u32>,
    /// Parse control-token text (`<|im_end|>`, `<start_of_turn>`...) inside message content as
    /// control tokens. Off (the default): only the chat template's own markers are control
    /// tokens and such text in a message is plain text, so a pasted message cannot end its turn
    /// or open a system turn. An explicit opt-in for power users.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parse_special: bool,
}

/// Count the prompt a `generate` with these messages would run (template applied, older messages
/// dropped as that generation would drop them) without running anything. Answered by one
/// `context` event with this `id`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Count {
    /// Chosen by the app (from the same sequence as `generate` ids), echoed by the `context`.
    pub id: u64,
    pub messages: Vec<ChatMessage>,
    /// The reply limit room is kept for (None = the load's `max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// As in `generate` (the count is of the prompt that generate would encode).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parse_special: bool,
}

/// Tokens kept free for a reply when a prompt is fitted into the context: `max_tokens`, but at
/// most a quarter of the context (a larger reply may still run on into the free room and end
/// with `stop: "context"`). Both sides use it: the engine to trim, the app to pre-check a message.
pub fn reply_reserve(n_ctx: u32, max_tokens: u32) -> u32 {
    max_tokens.min(n_ctx / 4)
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// An event, engine -> app.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Hello(Hello),
    Progress(Progress),
    Loaded(Loaded),
    Token(Token),
    Window(Window),
    Turn(Turn),
    Devices(Devices),
    Error(EngineError),
    Context(Context),
    Ids(Ids),
    /// An event type this build does not know (sent by a newer engine); ignored by the app.
    #[serde(other)]
    Unknown,
}

/// First line the engine writes: who it is and the kernel flags latched from its environment.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Hello {
    pub version: u32,
    pub pid: u32,
    /// e.g. {"STRATA_HC_Q8": false, "STRATA_GR_FUSED": true, "STRATA_MMVQ_KREG": false}
    #[serde(default)]
    pub flags: BTreeMap<String, bool>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Progress {
    /// e.g. "mmap", "tensors", "kernels", "warmup".
    pub stage: String,
    pub done: u64,
    pub total: u64,
    /// What the stage is busy with, when it runs long: e.g. "compiling mmvq_vnni Q4_1 (7 s,
    /// 12 modules ready)" (a heartbeat during a cold kernel build). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Loaded {
    pub model: String,
    pub arch: String,
    pub n_ctx: u32,
    pub n_params: u64,
    pub load_ms: f64,
    /// The model has hyper-connection tensors (`blk.N.hc_*`).
    #[serde(default)]
    pub hc: bool,
    /// GGUF type names of the weight tensors, e.g. ["Q4_K", "Q6_K", "F32"].
    #[serde(default)]
    pub quant_types: Vec<String>,
    /// The model is a mixture of experts.
    #[serde(default)]
    pub experts: bool,
    /// `general.name` says the weights are synthetic (`strata synth`: seeded random weights,
    /// the text is noise by design).
    #[serde(default)]
    pub synthetic: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Token {
    pub id: u64,
    /// Decoded text of the accepted token(s); may be empty or a partial UTF-8-safe piece.
    pub text: String,
}

/// One verify window: `t` rows checked in one forward pass, timed device-synchronised.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Window {
    pub id: u64,
    pub ms: f64,
    pub t: u32,
    pub proposed: u32,
    pub accepted: u32,
}

/// Where a conversation's prompt stands in the context: sent by a `generate` once its prompt is
/// built (before the prefill, so before any `token`), and as the answer to `count`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Context {
    pub id: u64,
    /// Tokens of the prompt as it runs: template applied, older messages dropped.
    pub prompt_tokens: u32,
    /// Messages left out from the start of the conversation (after its leading system
    /// messages, which are always kept) so that the prompt fits: whole user/assistant turns.
    pub dropped: u32,
    pub n_ctx: u32,
    /// Tokens kept free for the reply (`reply_reserve`).
    pub reserve: u32,
    /// False when even with every older message dropped the system prompt and the newest
    /// message leave less than `reserve` free: `prompt_tokens` is then that smallest prompt,
    /// and a `generate` is refused (`error` + `turn{stop: "error"}`).
    pub fits: bool,
}

/// The answer to `ids`: the token ids of generation `id` (the last finished one).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Ids {
    pub id: u64,
    /// The prompt as it ran: template applied, older messages dropped (`context.prompt_tokens`
    /// of them).
    pub prompt: Vec<u32>,
    /// The reply's tokens in order, a stop token included when one ended it.
    pub reply: Vec<u32>,
}

/// End of a `generate`: exactly one per request, whatever happened.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Turn {
    pub id: u64,
    pub prefill_tokens: u32,
    pub prefill_ms: f64,
    pub prefill_tps: f64,
    pub decode_tokens: u32,
    pub decode_ms: f64,
    pub decode_tps: f64,
    pub windows: u32,
    pub tokens_per_window: f64,
    pub proposed: u32,
    pub accepted: u32,
    /// accepted / proposed (0 when nothing was proposed).
    pub acceptance: f64,
    /// Mean number of draft tokens accepted per window.
    pub mean_accepted_len: f64,
    pub ttft_ms: f64,
    pub stop: Stop,
    /// Tokens of the prompt as it ran (cached + prefilled; 0 when the turn never ran).
    #[serde(default)]
    pub prompt_tokens: u32,
    /// Tokens of the context the conversation fills after the turn: the prompt and the reply.
    #[serde(default)]
    pub n_past: u32,
    /// Messages left out of the prompt (as in `context`).
    #[serde(default)]
    pub dropped: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    Eos,
    StopString,
    MaxTokens,
    Cancelled,
    Error,
    /// The reply ran into the end of the context (`n_ctx`).
    Context,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Devices {
    pub cards: Vec<Card>,
}

/// One device ("card"): memory in use by category against its budget, bytes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Card {
    pub index: u32,
    pub name: String,
    pub used: MemoryUse,
    pub budget: u64,
    /// MoE expert cache counters; None for a dense model.
    #[serde(default)]
    pub experts: Option<ExpertCache>,
    /// Set on a card that is the host CPU (its buffers are the engine process's memory): the
    /// process's resident memory and the host memory it may grow into. None on a GPU card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostMemory>,
}

/// The engine process's memory on the host, as a CPU-device card sees it (bytes).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct HostMemory {
    /// Resident set size of the engine process (`VmRSS`): every host card's buffers plus the
    /// runtime, the kernel code and the heap.
    pub rss: u64,
    /// What the process may grow to: the smaller of `MemAvailable + rss` and its cgroup's
    /// memory limit.
    pub budget: u64,
    /// Where `budget` came from: `"meminfo"` (MemAvailable + rss) or `"cgroup"` (the limit).
    pub budget_from: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct MemoryUse {
    pub weights: u64,
    pub kv: u64,
    pub scratch: u64,
    pub other: u64,
    /// Of `weights`: the Q8_0 copies of the hyper-connection projections that `STRATA_HC_Q8=1`
    /// adds beside the stored ones (0 without the flag).
    pub hc_q8: u64,
}

impl MemoryUse {
    pub fn total(&self) -> u64 {
        self.weights + self.kv + self.scratch + self.other
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct ExpertCache {
    pub hits: u64,
    pub misses: u64,
    /// Experts that could not be cached because the card's budget was full.
    pub refusals: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct EngineError {
    /// The `generate` id this error belongs to, if any.
    #[serde(default)]
    pub id: Option<u64>,
    pub message: String,
    /// The engine exits after a fatal error.
    #[serde(default)]
    pub fatal: bool,
}

/// Error decoding one protocol line.
#[derive(Debug, thiserror::Error)]
#[error("bad protocol line ({source}): {line}")]
pub struct DecodeError {
    pub line: String,
    #[source]
    pub source: serde_json::Error,
}

fn decode<T: serde::de::DeserializeOwned>(line: &str) -> Result<T, DecodeError> {
    serde_json::from_str(line.trim_end()).map_err(|source| DecodeError {
        line: line.chars().take(200).collect(),
        source,
    })
}

/// Parses one event line (trailing newline allowed).
pub fn decode_event(line: &str) -> Result<Event, DecodeError> {
    decode(line)
}

/// Parses one request line (trailing newline allowed).
pub fn decode_request(line: &str) -> Result<Request, DecodeError> {
    decode(line)
}

/// One line of JSON with its `\n`. Serialising these plain data types cannot fail (no maps with
/// non-string keys, no custom serialisers), hence the expect.
fn encode<T: Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string(value).expect("protocol types always serialise");
    s.push('\n');
    s
}

impl Request {
    pub fn to_line(&self) -> String {
        encode(self)
    }
}

impl Event {
    pub fn to_line(&self) -> String {
        encode(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_are_tagged() {
        let reqs = vec![
            Request::Load(Load {
                model: "/m.gguf".into(),
                ctx: 2048,
                devices: DeviceSplit { split_cpu: Some(2) },
                spec: 4,
                sampling: Sampling::default(),
            }),
            Request::Generate(Generate {
                id: 7,
                messages: vec![ChatMessage {
                    role: Role::User,
                    content: "hi\nthere".into(),
                }],
                sampling: Sampling {
                    seed: Some(1),
                    ..Sampling::default()
                },
                spec: None,
                parse_special: true,
            }),
            Request::Cancel { id: 7 },
            Request::Stats {},
            Request::Shutdown {},
            Request::Count(Count {
                id: 8,
                messages: vec![ChatMessage {
                    role: Role::User,
                    content: "how long am I?".into(),
                }],
                max_tokens: Some(64),
                parse_special: false,
            }),
            Request::Ids { id: 8 },
        ];
        for r in reqs {
            let line = r.to_line();
            assert!(
                line.ends_with('\n') && !line[..line.len() - 1].contains('\n'),
                "{line}"
            );
            assert_eq!(decode_request(&line).unwrap(), r);
        }
        assert_eq!(Request::Stats {}.to_line(), "{\"type\":\"stats\"}\n");
        assert_eq!(
            Request::Cancel { id: 3 }.to_line(),
            "{\"type\":\"cancel\",\"id\":3}\n"
        );
    }

    #[test]
    fn minimal_requests_take_defaults() {
        let r = decode_request(r#"{"type":"load","model":"x.gguf"}"#).unwrap();
        let Request::Load(l) = r else {
            panic!("not a load: {r:?}")
        };
        assert_eq!((l.ctx, l.spec, l.devices.split_cpu), (0, 0, None));
        assert_eq!(l.sampling, Sampling::default());
        let r = decode_request(
            r#"{"type":"generate","id":1,"messages":[],"sampling":{"temperature":0}}"#,
        )
        .unwrap();
        let Request::Generate(g) = r else {
            panic!("not a generate: {r:?}")
        };
        assert_eq!(g.sampling.temperature, 0.0);
        assert_eq!(g.sampling.top_k, Sampling::default().top_k);
    }

    #[test]
    fn events_ignore_unknown_fields_and_types() {
        let e = decode_event(r#"{"type":"token","id":1,"text":"a","future":[1,2]}"#).unwrap();
        assert_eq!(
            e,
            Event::Token(Token {
                id: 1,
                text: "a".into()
            })
        );
        assert_eq!(
            decode_event(r#"{"type":"telemetry","x":1}"#).unwrap(),
            Event::Unknown
        );
        let e = decode_event(r#"{"type":"error","message":"boom"}"#).unwrap();
        assert_eq!(
            e,
            Event::Error(EngineError {
                id: None,
                message: "boom".into(),
                fatal: false
            })
        );
    }

    #[test]
    fn context_figures_are_additive() {
        // a turn from an engine without the context fields still decodes (zeros)
        let t = decode_event(
            r#"{"type":"turn","id":1,"prefill_tokens":3,"prefill_ms":1,"prefill_tps":1,
            "decode_tokens":1,"decode_ms":1,"decode_tps":1,"windows":1,"tokens_per_window":1,
            "proposed":0,"accepted":0,"acceptance":0,"mean_accepted_len":0,"ttft_ms":1,
            "stop":"context"}"#,
        )
        .unwrap();
        let Event::Turn(t) = t else {
            panic!("not a turn: {t:?}")
        };
        assert_eq!(
            (t.stop, t.prompt_tokens, t.n_past, t.dropped),
            (Stop::Context, 0, 0, 0)
        );
        let c = Event::Context(Context {
            id: 2,
            prompt_tokens: 190,
            dropped: 4,
            n_ctx: 256,
            reserve: 64,
            fits: true,
        });
        assert_eq!(decode_event(&c.to_line()).unwrap(), c);
        assert_eq!(
            decode_request(r#"{"type":"count","id":3,"messages":[]}"#).unwrap(),
            Request::Count(Count {
                id: 3,
                messages: vec![],
                max_tokens: None,
                parse_special: false,
            })
        );
        assert_eq!(reply_reserve(256, 512), 64);
        assert_eq!(reply_reserve(8192, 512), 512);
        assert_eq!(reply_reserve(8192, 0), 0);
    }

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        let err = decode_event("{\"type\":\"token\",\"id\":\"x\"}").unwrap_err();
        assert!(err.to_string().contains("\"id\":\"x\""), "{err}");
        assert!(decode_event("not json").is_err());
    }

    #[test]
    fn turn_stop_reasons_use_documented_names() {
        for (stop, name) in [
            (Stop::Eos, "eos"),
            (Stop::StopString, "stop_string"),
            (Stop::MaxTokens, "max_tokens"),
            (Stop::Cancelled, "cancelled"),
            (Stop::Error, "error"),
            (Stop::Context, "context"),
        ] {
            assert_eq!(serde_json::to_string(&stop).unwrap(), format!("\"{name}\""));
        }
    }
}
