//! One `generate`: chat template -> prompt tokens -> prefill -> one-token decode steps, streaming
//! `token` events through the stream decoder and the stop-string matcher, one `window` event per
//! decode step (t = 1, nothing proposed), then exactly one `turn`.
//!
//! Counting (docs/protocol.md): the prefill forward yields the first token; every later forward
//! is a window and yields one token. `decode_tokens` counts the tokens windows produced, so a
//! reply of n tokens has `decode_tokens = windows = n - 1`, and `decode_tps` is their rate.

use super::out::Out;
use super::session::Session;
use crate::protocol::{Event, Generate, Role, Sampling, Stop, Token, Turn, Window};
use crate::sampling::{Sampler, SamplingParams, StopMatcher};
use crate::tokenizer::{ChatMessage, StreamDecoder};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A `generate` handed to the worker.
pub struct GenJob {
    pub req: Generate,
    /// When the request line was read (the start of `ttft_ms`).
    pub received: Instant,
    pub cancel: Arc<AtomicBool>,
}

/// Running totals for the `turn` event.
#[derive(Default)]
struct Metrics {
    prefill_tokens: u32,
    prefill_ms: f64,
    decode_tokens: u32,
    decode_ms: f64,
    windows: u32,
    proposed: u32,
    accepted: u32,
    ttft_ms: f64,
}

impl Metrics {
    fn turn(&self, id: u64, stop: Stop) -> Turn {
        let rate = |n: u32, ms: f64| if ms > 0.0 { n as f64 * 1e3 / ms } else { 0.0 };
        let per = |a: f64, b: u32| if b > 0 { a / b as f64 } else { 0.0 };
        Turn {
            id,
            prefill_tokens: self.prefill_tokens,
            prefill_ms: self.prefill_ms,
            prefill_tps: rate(self.prefill_tokens, self.prefill_ms),
            decode_tokens: self.decode_tokens,
            decode_ms: self.decode_ms,
            decode_tps: rate(self.decode_tokens, self.decode_ms),
            windows: self.windows,
            tokens_per_window: per(self.decode_tokens as f64, self.windows),
            proposed: self.proposed,
            accepted: self.accepted,
            acceptance: per(self.accepted as f64, self.proposed),
            mean_accepted_len: per(self.accepted as f64, self.windows),
            ttft_ms: self.ttft_ms,
            stop,
        }
    }
}

/// The `turn` of a request that never ran (busy, no model, bad request).
pub fn failed_turn(id: u64) -> Turn {
    Metrics::default().turn(id, Stop::Error)
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

/// Streams text out: token ids -> UTF-8 pieces -> stop-string holdback -> `token` events.
struct Emitter<'a> {
    out: &'a Out,
    id: u64,
    dec: StreamDecoder,
    stops: StopMatcher,
}

impl Emitter<'_> {
    /// Returns true when a stop string ended the turn.
    fn push(&mut self, s: &Session, tok: u32) -> bool {
        let piece = self.dec.push(&s.tok, tok);
        let o = self.stops.push(&piece);
        self.send(o.emit);
        o.stopped
    }

    fn finish(&mut self) {
        let tail = self.dec.flush();
        let mut text = self.stops.push(&tail).emit;
        text.push_str(&self.stops.finish());
        self.send(text);
    }

    fn send(&self, text: String) {
        if !text.is_empty() {
            self.out.emit(&Event::Token(Token { id: self.id, text }));
        }
    }
}

/// Runs one generation to its end, emitting everything including the `turn` (not `devices`).
/// Errors become an `error` event with the id followed by `turn{stop: "error"}`.
pub fn generate(s: &mut Session, job: &GenJob, out: &Out) -> Turn {
    let mut m = Metrics::default();
    let stop = match run(s, job, out, &mut m) {
        Ok(stop) => stop,
        Err(message) => {
            eprintln!("strata engine: generate {}: {message}", job.req.id);
            out.emit(&Event::Error(crate::protocol::EngineError {
                id: Some(job.req.id),
                message,
                fatal: false,
            }));
            Stop::Error
        }
    };
    m.turn(job.req.id, stop)
}

fn run(s: &mut Session, job: &GenJob, out: &Out, m: &mut Metrics) -> Result<Stop, String> {
    let req = &job.req;
    let spec = req.spec.unwrap_or(s.load.spec);
    if spec > 0 {
        eprintln!("strata engine: spec = {spec} requested; speculative decoding is not in this build, decoding one token per window");
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
    let prompt = s.tok.encode(&chat.prompt, true, true);
    let n_ctx = s.engine.n_ctx();
    if prompt.is_empty() {
        return Err("the rendered prompt has no tokens".into());
    }
    if prompt.len() >= n_ctx {
        return Err(format!(
            "the prompt has {} tokens; the context holds {n_ctx} (ctx in load)",
            prompt.len()
        ));
    }
    let mut sampler = Sampler::new(sampling_params(&req.sampling))
        .map_err(|e| format!("sampling: {e}"))?;
    for &t in &prompt {
        sampler.accept(t);
    }
    let is_stop_id = |t: u32| chat.stop_ids.contains(&t) || s.tok.is_eog(t);
    let mut em = Emitter {
        out,
        id: req.id,
        dec: StreamDecoder::new(false),
        stops: StopMatcher::new(&chat.stops),
    };

    s.engine.reset();
    let t0 = Instant::now();
    let logits = s
        .engine
        .forward(&prompt, 0, &[prompt.len() - 1])
        .map_err(|e| e.to_string())?;
    let mut next = sampler.sample(&logits[0]).map_err(|e| e.to_string())?;
    m.prefill_tokens = prompt.len() as u32;
    m.prefill_ms = t0.elapsed().as_secs_f64() * 1e3;
    m.ttft_ms = job.received.elapsed().as_secs_f64() * 1e3;

    let max = req.sampling.max_tokens;
    let mut produced = 1u32;
    let stop = loop {
        if is_stop_id(next) {
            break Stop::Eos;
        }
        sampler.accept(next);
        if em.push(s, next) {
            break Stop::StopString;
        }
        if produced >= max {
            break Stop::MaxTokens;
        }
        if job.cancel.load(Ordering::Relaxed) {
            break Stop::Cancelled;
        }
        let pos = s.engine.pos();
        if pos + 1 > n_ctx {
            eprintln!("strata engine: generate {}: the context ({n_ctx} tokens) is full", req.id);
            break Stop::MaxTokens;
        }
        let tw = Instant::now();
        let logits = s
            .engine
            .forward(&[next], pos, &[0])
            .map_err(|e| e.to_string())?;
        next = sampler.sample(&logits[0]).map_err(|e| e.to_string())?;
        let ms = tw.elapsed().as_secs_f64() * 1e3;
        produced += 1;
        m.windows += 1;
        m.decode_tokens += 1;
        m.decode_ms += ms;
        out.emit(&Event::Window(Window {
            id: req.id,
            ms,
            t: 1,
            proposed: 0,
            accepted: 0,
        }));
    };
    if stop != Stop::StopString {
        em.finish();
    }
    Ok(stop)
}
