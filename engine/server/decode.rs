//! One `generate`: the chat template renders the messages, the tokenizer encodes the prompt, and
//! the generation loop (`crate::generate::Generator`: prefill, verify windows with the n-gram
//! drafter when `spec > 0`, stop tokens/strings, cancel between windows) runs it. Its text pieces
//! become `token` events, its windows `window` events; its `TurnStats` the one `turn`.
//!
//! Counting (docs/protocol.md): the prefill forward yields the first token; every later forward
//! is a window. `decode_tokens` counts the tokens windows produced, so with `spec = 0` a reply of
//! n tokens has `decode_tokens = windows = n - 1`.
//!
//! A conversation longer than the context is trimmed here (`trim`: the oldest whole turns
//! dropped, the system prompt and the newest user message kept), because only the engine knows
//! the exact token counts with the template applied; the `context` event tells the app how many
//! messages were left out. `count` answers the same question without generating.

mod trim;

use super::out::Out;
use super::session::Session;
use crate::generate::{GenSink, GenerateConfig, StopReason, TokenText, TurnStats, WindowStats};
use crate::protocol::{
    reply_reserve, ChatMessage as Message, Context, Count, Event, Generate, Ids, Role, Sampling,
    Stop, Token, Turn, Window,
};
use crate::sampling::SamplingParams;
use crate::spec::MAX_DRAFT;
use crate::tokenizer::{ChatMessage, RenderedChat};
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
        prompt_tokens: 0,
        n_past: 0,
        dropped: 0,
    }
}

/// The generation loop's turn figures as the protocol's `turn`; `queued_ms` (request read ->
/// loop start: template, tokenizer, waiting for the worker) is added to the time to first token.
/// `n_past`: the prompt and the reply, at most the context (a reply that ran into its end sampled
/// one token more than the cache holds).
fn turn(id: u64, t: &TurnStats, queued_ms: f64, dropped: usize, n_ctx: usize) -> Turn {
    let prompt_tokens = t.prefill_tokens + t.cached_tokens;
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
            StopReason::MaxTokens => Stop::MaxTokens,
            StopReason::ContextFull => Stop::Context,
            StopReason::Cancelled => Stop::Cancelled,
        },
        prompt_tokens,
        n_past: (prompt_tokens + t.tokens.len() as u32).min(n_ctx as u32),
        dropped: dropped as u32,
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

/// Runs one generation to its end, emitting everything but the `turn` (returned, with the
/// turn's token ids for `ids`) and `devices`. Errors become an `error` event with the id (the
/// caller then sends `turn{stop: "error"}`).
pub fn generate(s: &mut Session, job: &GenJob, out: &Out) -> (Turn, Option<Ids>) {
    match run(s, job, out) {
        Ok((t, ids)) => (t, Some(ids)),
        Err(message) => {
            eprintln!("strata engine: generate {}: {message}", job.req.id);
            out.emit(&Event::Error(crate::protocol::EngineError {
                id: Some(job.req.id),
                message,
                fatal: false,
            }));
            (failed_turn(job.req.id), None)
        }
    }
}

/// The prompt a conversation makes in this session: rendered, encoded, trimmed to the context.
struct Prompt {
    tokens: Vec<u32>,
    /// The render of the kept messages (its stop strings and ids end the reply).
    chat: RenderedChat,
    /// Messages left out after the leading system messages.
    dropped: usize,
    /// Index of the first kept message after the system messages.
    start: usize,
    reserve: usize,
    fits: bool,
}

/// Renders and encodes messages with the model's template (the one place a conversation becomes
/// tokens: generate and count agree by construction). Message content is text unless
/// `parse_special` (docs/tokenizer.md).
fn encode(s: &Session, messages: &[ChatMessage], parse_special: bool) -> (Vec<u32>, RenderedChat) {
    let chat = s.template.render(messages, true);
    (s.tok.encode_chat(&chat, parse_special), chat)
}

fn chat_messages(messages: &[Message]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            ChatMessage::new(role, m.content.clone())
        })
        .collect()
}

/// The prompt for `messages`, older turns dropped so that it leaves `reply_reserve` free (the
/// session's remembered cut kept while the conversation still starts the same way).
fn build(s: &Session, messages: &[Message], max_tokens: u32, parse_special: bool) -> Prompt {
    let n_ctx = s.gen.engine().n_ctx();
    let reserve = reply_reserve(n_ctx as u32, max_tokens) as usize;
    let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
    let n_sys = trim::system_prefix(&roles);
    let all = chat_messages(messages);
    let kept = |start: usize| -> Vec<ChatMessage> {
        all[..n_sys].iter().chain(&all[start..]).cloned().collect()
    };
    let keep_from = s.kept_from(messages).unwrap_or(n_sys);
    let mut last: Option<(usize, Vec<u32>, RenderedChat)> = None;
    let plan = trim::plan(
        &roles,
        keep_from,
        trim::Room::new(n_ctx, reserve),
        |start| {
            let (tokens, chat) = encode(s, &kept(start), parse_special);
            let n = tokens.len();
            last = Some((start, tokens, chat));
            n
        },
    );
    let (tokens, chat) = match last {
        Some((start, tokens, chat)) if start == plan.start => (tokens, chat),
        _ => encode(s, &kept(plan.start), parse_special),
    };
    Prompt {
        tokens,
        chat,
        dropped: plan.start - n_sys,
        start: plan.start,
        reserve,
        fits: plan.fits,
    }
}

fn context_event(id: u64, p: &Prompt, n_ctx: usize) -> Event {
    Event::Context(Context {
        id,
        prompt_tokens: p.tokens.len() as u32,
        dropped: p.dropped as u32,
        n_ctx: n_ctx as u32,
        reserve: p.reserve as u32,
        fits: p.fits,
    })
}

/// `count`: the prompt `generate` would build for these messages, reported as a `context` (or an
/// `error` with the id when no model is loaded).
pub fn count(s: Option<&Session>, c: &Count, out: &Out) {
    let Some(s) = s else {
        out.emit(&Event::Error(crate::protocol::EngineError {
            id: Some(c.id),
            message: format!("count {}: no model is loaded (send load first)", c.id),
            fatal: false,
        }));
        return;
    };
    let max_tokens = c.max_tokens.unwrap_or(s.load.sampling.max_tokens);
    let p = build(s, &c.messages, max_tokens, c.parse_special);
    out.emit(&context_event(c.id, &p, s.gen.engine().n_ctx()));
}

fn run(s: &mut Session, job: &GenJob, out: &Out) -> Result<(Turn, Ids), String> {
    let req = &job.req;
    let mut spec = req.spec.unwrap_or(s.load.spec) as usize;
    if spec > MAX_DRAFT {
        eprintln!("strata engine: spec = {spec} is more than the {MAX_DRAFT} draft tokens a window holds; using {MAX_DRAFT}");
        spec = MAX_DRAFT;
    }
    let n_ctx = s.gen.engine().n_ctx();
    let p = build(s, &req.messages, req.sampling.max_tokens, req.parse_special);
    out.emit(&context_event(req.id, &p, n_ctx));
    if !p.fits {
        return Err(format!(
            "the system prompt and the newest message take {} tokens; the context holds {n_ctx} \
             and {} are kept for the reply: shorten the message or load a larger ctx",
            p.tokens.len(),
            p.reserve
        ));
    }
    if p.dropped > 0 {
        eprintln!(
            "strata engine: generate {}: {} older messages left out ({} prompt tokens of {n_ctx})",
            req.id,
            p.dropped,
            p.tokens.len()
        );
    }
    s.remember_cut(&req.messages[..p.start]);
    let chat = &p.chat;
    if let Some(w) = &chat.warning {
        eprintln!("strata engine: {w}");
    }
    let prompt = &p.tokens;
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
        .generate(prompt, &cfg, &mut dec, &mut sink, cancel)
        .map_err(|e| e.to_string())?;
    let ids = Ids {
        id: req.id,
        prompt: p.tokens.clone(),
        reply: stats.tokens.clone(),
    };
    Ok((turn(req.id, &stats, queued_ms, p.dropped, n_ctx), ids))
}
