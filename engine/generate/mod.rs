//! The generation loop: prompt tokens -> prefill (the engine chunks it) -> decode windows, each a
//! forward pass over T = 1 + d rows (the last accepted token and d drafted tokens), the longest
//! agreeing prefix plus one token from the target kept, the cache past it rolled back by position
//! (the next window simply starts there). With no drafter or `spec = 0` every window is T = 1,
//! plain decoding. Events go to a `GenSink`: text pieces (through a streaming detokenizer and the
//! stop-string matcher), one `WindowStats` per window; the `TurnStats` is returned. A cancel flag
//! is checked between windows.

pub mod metrics;

pub use metrics::{DeviceStats, StopReason, TurnStats, WindowStats};

use crate::model::{Engine, EngineError};
use crate::sampling::{SampleError, Sampler, SamplingParams, SplitMix64, StopMatcher};
use crate::spec::{verify_window, Draft, DraftInput, Drafter, SpecError, MAX_DRAFT};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Sample(#[from] SampleError),
    #[error("the prompt is empty (at least one token is needed to predict from)")]
    EmptyPrompt,
    #[error("the prompt has {n_prompt} tokens; the context holds {n_ctx}")]
    PromptTooLong { n_prompt: usize, n_ctx: usize },
}

/// Token ids -> text, incrementally (a UTF-8 character split across tokens comes out whole, once
/// complete). The tokenizer's streaming decoder implements it.
pub trait TextDecoder {
    fn push(&mut self, token: u32) -> String;
    /// End of the turn: whatever is still held.
    fn flush(&mut self) -> String;
}

/// Receives a turn's events as they happen.
pub trait GenSink {
    /// Newly released text (whole characters, stop strings held back and never shown).
    fn text(&mut self, _piece: &str) {}
    /// The tokens a step kept (the first token after the prefill, then each window's).
    fn tokens(&mut self, _ids: &[u32]) {}
    /// One verify window finished (after its tokens were passed on).
    fn window(&mut self, _w: &WindowStats) {}
}

/// A sink that ignores everything.
pub struct NullSink;
impl GenSink for NullSink {}

#[derive(Clone, Debug)]
pub struct GenerateConfig {
    pub sampling: SamplingParams,
    /// Upper bound on generated tokens (an end-of-generation token counts).
    pub max_tokens: usize,
    /// Draft tokens per window (0 = no speculation), at most `MAX_DRAFT`.
    pub spec: usize,
    /// End-of-generation tokens: generation stops after one is produced; it is not decoded.
    pub stop_tokens: Vec<u32>,
    pub stop_strings: Vec<String>,
    /// Reuse the KV of the longest common prefix with the previous turn's sequence. Off gives
    /// every turn the numerics of a fresh prefill.
    pub reuse_prefix: bool,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        GenerateConfig {
            sampling: SamplingParams::greedy(),
            max_tokens: 128,
            spec: 0,
            stop_tokens: Vec::new(),
            stop_strings: Vec::new(),
            reuse_prefix: false,
        }
    }
}

/// The model engine, its drafter, and what its KV cache holds between turns.
pub struct Generator {
    engine: Engine,
    drafter: Option<Box<dyn Drafter>>,
    /// Tokens whose K/V are in the cache at positions 0..len.
    cached: Vec<u32>,
    budget: u64,
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

impl Generator {
    /// `budget`: the device's memory size in bytes, reported beside the engine's use.
    pub fn new(engine: Engine, drafter: Option<Box<dyn Drafter>>, budget: u64) -> Generator {
        Generator {
            engine,
            drafter,
            cached: Vec::new(),
            budget,
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn engine_mut(&mut self) -> &mut Engine {
        self.cached.clear();
        &mut self.engine
    }

    pub fn set_drafter(&mut self, drafter: Option<Box<dyn Drafter>>) {
        self.drafter = drafter;
    }

    pub fn drafter_name(&self) -> Option<&'static str> {
        self.drafter.as_ref().map(|d| d.name())
    }

    /// Forget the cached sequence (the next turn prefills from position 0).
    pub fn forget(&mut self) {
        self.cached.clear();
        self.engine.reset();
    }

    /// Memory per device against the budget.
    pub fn devices(&self) -> Vec<DeviceStats> {
        self.engine
            .memory()
            .into_iter()
            .map(|memory| DeviceStats {
                memory,
                budget: self.budget,
            })
            .collect()
    }

    /// Generates one turn continuing `prompt`. Errors end the turn (the sink has seen the text
    /// released so far); the cache is then forgotten.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        cfg: &GenerateConfig,
        dec: &mut dyn TextDecoder,
        sink: &mut dyn GenSink,
        cancel: &AtomicBool,
    ) -> Result<TurnStats, GenerateError> {
        let r = self.run(prompt, cfg, dec, sink, cancel);
        if r.is_err() {
            self.forget();
        }
        r
    }

    fn run(
        &mut self,
        prompt: &[u32],
        cfg: &GenerateConfig,
        dec: &mut dyn TextDecoder,
        sink: &mut dyn GenSink,
        cancel: &AtomicBool,
    ) -> Result<TurnStats, GenerateError> {
        let t_start = Instant::now();
        if cfg.spec > MAX_DRAFT {
            return Err(SpecError::TooManyDrafts(cfg.spec).into());
        }
        if prompt.is_empty() {
            return Err(GenerateError::EmptyPrompt);
        }
        let n_ctx = self.engine.n_ctx();
        if prompt.len() > n_ctx {
            return Err(GenerateError::PromptTooLong {
                n_prompt: prompt.len(),
                n_ctx,
            });
        }
        let mut sampler = Sampler::new(cfg.sampling.clone())?;
        let mut rng = SplitMix64::new(cfg.sampling.seed ^ 0x5bec_0001_d4af_7c3e);
        let keep = cfg.sampling.repeat_last_n.min(prompt.len());
        for &t in &prompt[prompt.len() - keep..] {
            sampler.accept(t);
        }
        let spec = if self.drafter.is_some() { cfg.spec } else { 0 };
        if let Some(d) = &mut self.drafter {
            d.begin(prompt)?;
        }
        let mut stats = TurnStats::default();
        let mut out = Output {
            dec,
            sink,
            stop: StopMatcher::new(&cfg.stop_strings),
            stop_tokens: &cfg.stop_tokens,
        };

        // Prefill: the part of the prompt the cache does not already hold (at least one token,
        // whose logits predict the first output token).
        let reuse = if cfg.reuse_prefix {
            let lcp = self
                .cached
                .iter()
                .zip(prompt)
                .take_while(|(a, b)| a == b)
                .count();
            lcp.min(prompt.len() - 1)
        } else {
            0
        };
        self.cached.clear();
        let t0 = Instant::now();
        let logits = self
            .engine
            .forward(&prompt[reuse..], reuse, &[prompt.len() - reuse - 1])?;
        stats.prefill_ms = ms_since(t0);
        stats.prefill_tokens = (prompt.len() - reuse) as u32;
        stats.cached_tokens = reuse as u32;
        if cfg.max_tokens == 0 {
            // nothing asked for (`run -n 0`, `max_tokens: 0`): the prompt is evaluated and
            // kept in the cache, and no token is sampled
            out.finish();
            stats.finish();
            self.cached = prompt.to_vec();
            return Ok(stats);
        }
        let first = sampler.sample(&logits[0])?;
        sampler.accept(first);
        let mut seq: Vec<u32> = prompt.to_vec();
        // K/V are valid for seq[..kv_len].
        let mut kv_len = prompt.len();
        seq.push(first);
        stats.tokens.push(first);
        let done = out.emit(&[first]);
        stats.ttft_ms = ms_since(t_start);
        let t_decode = Instant::now();
        let mut stop = done;
        while stop.is_none() {
            if stats.tokens.len() >= cfg.max_tokens {
                stop = Some(StopReason::MaxTokens);
                break;
            }
            if cancel.load(Ordering::Relaxed) {
                stop = Some(StopReason::Cancelled);
                break;
            }
            let pos = seq.len() - 1; // the window's first row: the last kept token
            if pos >= n_ctx {
                stop = Some(StopReason::ContextFull);
                break;
            }
            let room = (cfg.max_tokens - stats.tokens.len() - 1)
                .min(n_ctx - pos - 1)
                .min(spec);
            let mut draft = match (&mut self.drafter, room) {
                (Some(d), r) if r > 0 => {
                    let dr = d.propose(
                        &DraftInput {
                            tokens: &seq,
                            hidden: None,
                        },
                        r,
                    )?;
                    if dr.len() > r {
                        return Err(SpecError::DraftTooLong {
                            drafter: d.name(),
                            got: dr.len(),
                            max: r,
                        }
                        .into());
                    }
                    dr
                }
                _ => Draft::default(),
            };
            draft.truncate(room);
            let mut window = Vec::with_capacity(1 + draft.len());
            window.push(seq[pos]);
            window.extend_from_slice(&draft.tokens);
            let rows: Vec<usize> = (0..window.len()).collect();
            let tw = Instant::now();
            let logits = self.engine.forward(&window, pos, &rows)?;
            let w = WindowStats {
                ms: ms_since(tw),
                t: window.len() as u32,
                proposed: draft.len() as u32,
                accepted: 0,
            };
            let v = verify_window(&mut sampler, &mut rng, &logits, &draft)?;
            if let Some(d) = &mut self.drafter {
                d.accepted(draft.len(), v.accepted);
            }
            // Rows 0..=accepted hold kept tokens; rows past them are rolled back (the next window
            // starts at their position and overwrites them).
            kv_len = pos + v.accepted + 1;
            let mut kept: Vec<u32> = draft.tokens[..v.accepted].to_vec();
            kept.push(v.next);
            kept.truncate(cfg.max_tokens - stats.tokens.len());
            let w = WindowStats {
                accepted: v.accepted as u32,
                ..w
            };
            stats.windows += 1;
            stats.proposed += w.proposed;
            stats.accepted += w.accepted;
            stats.verify_ms += w.ms;
            let (n, s) = out.emit_counted(&kept);
            seq.extend_from_slice(&kept[..n]);
            stats.tokens.extend_from_slice(&kept[..n]);
            stats.decode_tokens += n as u32;
            out.sink.window(&w);
            stop = s;
        }
        stats.stop = stop.unwrap_or(StopReason::MaxTokens);
        out.finish();
        stats.decode_ms = if stats.windows > 0 {
            ms_since(t_decode)
        } else {
            0.0
        };
        stats.finish();
        self.cached = seq[..kv_len.min(seq.len())].to_vec();
        Ok(stats)
    }
}

/// The turn's text path: ids -> detokenizer -> stop strings -> sink.
struct Output<'a> {
    dec: &'a mut dyn TextDecoder,
    sink: &'a mut dyn GenSink,
    stop: StopMatcher,
    stop_tokens: &'a [u32],
}

impl Output<'_> {
    fn emit(&mut self, ids: &[u32]) -> Option<StopReason> {
        self.emit_counted(ids).1
    }

    /// Passes `ids` on until one ends the turn; returns how many were kept (the ending token
    /// included) and why it ended, if it did.
    fn emit_counted(&mut self, ids: &[u32]) -> (usize, Option<StopReason>) {
        let mut text = String::new();
        let mut end = (ids.len(), None);
        for (i, &id) in ids.iter().enumerate() {
            if self.stop_tokens.contains(&id) {
                end = (i + 1, Some(StopReason::Eos));
                break;
            }
            let piece = self.dec.push(id);
            let o = self.stop.push(&piece);
            text.push_str(&o.emit);
            if o.stopped {
                end = (i + 1, Some(StopReason::StopString));
                break;
            }
        }
        self.sink.tokens(&ids[..end.0]);
        if !text.is_empty() {
            self.sink.text(&text);
        }
        end
    }

    /// End of the turn: release held text unless a stop string cut it.
    fn finish(&mut self) {
        if self.stop.is_stopped() {
            return;
        }
        let tail = self.dec.flush();
        let mut text = self.stop.push(&tail).emit;
        if !self.stop.is_stopped() {
            text.push_str(&self.stop.finish());
        }
        if !text.is_empty() {
            self.sink.text(&text);
        }
    }
}

/// The tokenizer's streaming decoder as a `TextDecoder` (control tokens not rendered).
pub struct TokenText<'a> {
    tok: &'a crate::tokenizer::Tokenizer,
    stream: crate::tokenizer::StreamDecoder,
}

impl<'a> TokenText<'a> {
    pub fn new(tok: &'a crate::tokenizer::Tokenizer) -> TokenText<'a> {
        TokenText {
            tok,
            stream: crate::tokenizer::StreamDecoder::new(false),
        }
    }
}

impl TextDecoder for TokenText<'_> {
    fn push(&mut self, token: u32) -> String {
        self.stream.push(self.tok, token)
    }

    fn flush(&mut self) -> String {
        self.stream.flush()
    }
}
