//! One `generate`: the chat template renders the messages, the tokenizer encodes the prompt, and
//! the generation loop (`crate::generate::Generator`: prefill, verify windows with the n-gram
//! drafter when `spec > 0`, stop tokens/strings, cancel between windows) runs it. Its text pieces
//! become `token` events, its windows `window` events; its `TurnStats` the one `turn`.
//!
//! Counting (docs/protocol.md): the prefill forward yields the first token; every later forward
//! is a window. `decode_tokens` counts the tokens windows produced, so with `spec = 0` a reply of
//! n tokens has `decode_tokens = windows = n - 1`.

use super::out::Out;
use super::session::Session;
use crate::generate::{GenSink, GenerateConfig, StopReason, TokenText, TurnStats, WindowStats};
use crate::protocol::{Event, Generate, Role, Sampling, Stop, Token, Turn, Window};
use crate::sampling::SamplingParams;
use crate::spec::MAX_DRAFT;
use crate::tokenizer::ChatMessage;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// A `generate` handed to the worker.
pub struct GenJob {
    pub req: Generate,
    /// When the request line was read (the start of `ttft_ms`).
    pub received: Instant,
    pub cancel: Arc<AtomicBool>,
}

/// The `turn` of a request that never ran (busy, no model, bad request) or failed.
pub fn failed_turn(id: u64) -> Turn {
    Turn {
        id,
        prefill_tokens: 0,
        prefill_ms: 0.0,
        prefill_tps: 0.0,
        decode_tokens: 0,
        decode_ms: 0.0,
        decode_tps: 0.0,
        windows: 0,
        tokens_per_window: 0.0,
        proposed: 0,
        accepted: 0,
        acceptance: 0.0,
        mean_accepted_len: 0.0,
        ttft_ms: 0.0,
        stop: Stop::Error,
    }
}

/// The generation loop's turn figures as the protocol's `turn`; `queued_ms` (request read ->
/// loop start: template, tokenizer, waiting for the worker) is added to the time to first token.
fn turn(id: u64, t: &TurnStats, queued_ms: f64) -> Turn {
    Turn {
        id,
        prefill_tokens: t.prefill_tokens,
        prefill_ms: t.prefill_ms,
        prefill_tps: t.prefill_tps,
        decode_tokens: t.decode_tokens,
        decode_ms: t.decode_ms,
        decode_tps: t.decode_tps,
        windows: t.windows,
        tokens_per_window: t.tokens_per_window,
        proposed: t.proposed,
        accepted: t.accepted,
        acceptance: t.acceptance,
        mean_accepted_len: t.mean_accepted_len,
        ttft_ms: t.ttft_ms + queued_ms,
        stop: match t.stop {
            StopReason::Eos => Stop::Eos,
            StopReason::StopString => Stop::StopString,
            // The protocol has no "context full": the turn ran out of room for tokens.
            StopReason::MaxTokens | StopReason::ContextFull => Stop::MaxTokens,
            StopReason::Cancelled => Stop::Cancelled,
        },
    }
}

/// Protocol sampling -> the sampler's parameters (seed None = from the clock).
pub fn sampling_params(s: &Sampling) -> SamplingParams {
    let seed = s.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    SamplingParams {
        temperature: s.temperature,
        top_k: s.top_k as usize,
        top_p: s.top_p,
        min_p: s.min_p,
        repeat_penalty: s.repeat_penalty,
        seed,
        ..SamplingParams::default()
    }
}

/// Sends the loop's text and windows out as events of generation `id`.
struct Sink<'a> {
    out: &'a Out,
    id: u64,
}

impl GenSink for Sink<'_> {
    fn text(&mut self, piece: &str) {
        if !piece.is_empty() {
            self.out.emit(&Event::Token(Token {
                id: self.id,
                text: piece.to_string(),
            }));
        }
    }

    fn window(&mut self, w: &WindowStats) {
        self.out.emit(&Event::Window(Window {
            id: self.id,
            ms: w.ms,
            t: w.t,
            proposed: w.proposed,
            accepted: w.accepted,
        }));
    }
}

/// Runs one generation to its end, emitting everything including the `turn` (not `devices`).
/// Errors become an `error` event with the id followed by `turn{stop: "error"}`.
pub fn generate(s: &mut Session, job: &GenJob, out: &Out) -> Turn {
    match run(s, job, out) {
        Ok(t) => t,
        Err(message) => {
            eprintln!("strata engine: generate {}: {message}", job.req.id);
            out.emit(&Event::Error(crate::protocol::EngineError {
                id: Some(job.req.id),
                message,
                fatal: false,
            }));
            failed_turn(job.req.id)
        }
    }
}

fn run(s: &mut Session, job: &GenJob, out: &Out) -> Result<Turn, String> {
    let req = &job.req;
    let mut spec = req.spec.unwrap_or(s.load.spec) as usize;
    if spec > MAX_DRAFT {
        eprintln!("strata engine: spec = {spec} is more than the {MAX_DRAFT} draft tokens a window holds; using {MAX_DRAFT}");
        spec = MAX_DRAFT;
    }
    let messages: Vec<ChatMessage> = req
        .messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            ChatMessage::new(role, m.content.clone())
        })
        .collect();
    let chat = s.template.render(&messages, true);
    if let Some(w) = &chat.warning {
        eprintln!("strata engine: {w}");
    }
    let prompt = s.tok.encode_chat(&chat, req.parse_special);
    let mut stop_tokens = chat.stop_ids.clone();
    stop_tokens.extend(s.tok.eog_ids());
    let cfg = GenerateConfig {
        sampling: sampling_params(&req.sampling),
        max_tokens: req.sampling.max_tokens as usize,
        spec,
        stop_tokens,
        stop_strings: chat.stops.clone(),
        reuse_prefix: true,
    };
    let queued_ms = job.received.elapsed().as_secs_f64() * 1e3;
    let mut dec = TokenText::new(&s.tok);
    let mut sink = Sink { out, id: req.id };
    let cancel: &AtomicBool = &job.cancel;
    let stats = s
        .gen
        .generate(&prompt, &cfg, &mut dec, &mut sink, cancel)
        .map_err(|e| e.to_string())?;
    Ok(turn(req.id, &stats, queued_ms))
}
