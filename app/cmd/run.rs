//! `strata run`: generate from a prompt, streaming text to stdout; one stats line on stderr.

use super::common;
use super::engine_args::EngineArgs;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use strata::generate::{
    GenSink, GenerateConfig, Generator, StopReason, TokenText, TurnStats, WindowStats,
};
use strata::sampling::SamplingParams;
use strata::spec::{Drafter, MtpOptions, NgramDrafter};
use strata::tokenizer::{ChatMessage, ChatTemplate};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Prompt text.
    #[arg(short = 'p', long = "prompt")]
    pub prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 128)]
    pub n: usize,
    /// Temperature; 0 = greedy.
    #[arg(long, default_value_t = 0.8)]
    pub temp: f32,
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Wrap the prompt in the model's chat template as a user message.
    #[arg(long)]
    pub chat: bool,
    /// Parse control-token text such as <|im_end|> in the prompt as control tokens (off: it is
    /// plain text, and with --chat only the template's own markers are control tokens).
    #[arg(long)]
    pub parse_special: bool,
    /// Print the prompt as tokenized (ids and pieces) to stderr first.
    #[arg(long)]
    pub show_prompt: bool,
    /// Speculative decoding: draft up to N tokens per verify window (0 = off, at most 7).
    #[arg(long, default_value_t = 0)]
    pub spec: usize,
    /// Which drafter proposes tokens with --spec: `ngram` (prompt lookup, any model) or `mtp`
    /// (the model's own multi-token-prediction layer; none of the dense models has one).
    #[arg(long, default_value = "ngram", value_parser = ["ngram", "mtp"])]
    pub drafter: String,
    /// MTP drafter: most draft steps per window.
    #[arg(long, default_value_t = 4)]
    pub mtp_max_t: usize,
    /// MTP drafter: stop drafting when a draft's probability is below this.
    #[arg(long, default_value_t = 0.0)]
    pub spec_min_p: f32,
    /// Print per-window and per-turn metrics and device memory to stderr (docs/metrics.md).
    #[arg(long)]
    pub stats: bool,
}

/// Streams text to stdout; with --stats, one line per verify window to stderr. A failed write
/// (a closed pipe: `strata run ... | head -c 5`) is kept for the command's error and cancels the
/// generation: nobody reads the rest.
struct Print<'a> {
    stats: bool,
    n: u32,
    err: Option<std::io::Error>,
    cancel: &'a AtomicBool,
}

impl GenSink for Print<'_> {
    fn text(&mut self, piece: &str) {
        let mut out = std::io::stdout().lock();
        if let Err(e) = write!(out, "{piece}").and_then(|_| out.flush()) {
            self.err.get_or_insert(e);
            self.cancel.store(true, Ordering::Relaxed);
        }
    }
    fn window(&mut self, w: &WindowStats) {
        self.n += 1;
        if self.stats {
            eprintln!(
                "window {:>4}: {:7.2} ms  t {}  proposed {}  accepted {}",
                self.n, w.ms, w.t, w.proposed, w.accepted
            );
        }
    }
}

fn drafter(a: &Args, path: &std::path::Path) -> Result<Option<Box<dyn Drafter>>> {
    MtpOptions {
        max_t: a.mtp_max_t,
        min_p: a.spec_min_p,
    }
    .validate()?;
    if a.drafter == "mtp" {
        let g = strata::gguf::Gguf::open(path)?;
        strata::spec::mtp::check_available(&g, &path.display().to_string())?;
    }
    Ok(if a.spec > 0 {
        Some(Box::new(NgramDrafter::default()))
    } else {
        None
    })
}

fn print_turn(s: &TurnStats) {
    eprintln!(
        "turn: prefill {} tokens {:.1} ms {:.1} tok/s | decode {} tokens {:.1} ms {:.1} tok/s | {} windows, {:.2} tokens/window | drafts {} proposed {} accepted, acceptance {:.2}, mean accepted {:.2} | TTFT {:.1} ms | stop {:?}",
        s.prefill_tokens, s.prefill_ms, s.prefill_tps, s.decode_tokens, s.decode_ms, s.decode_tps, s.windows,
        s.tokens_per_window, s.proposed, s.accepted, s.acceptance, s.mean_accepted_len, s.ttft_ms, s.stop
    );
}

pub fn run(a: Args) -> Result<()> {
    let params = SamplingParams {
        temperature: a.temp,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        repeat_penalty: a.repeat_penalty,
        repeat_last_n: a.repeat_last_n,
        seed: a.seed,
    };
    // a bad value is refused before seconds of loading, not after (the sampler checks again)
    params.validate()?;
    let model = a.engine.open()?;
    let tok = common::tokenizer(&model.gguf, &model.path)?;
    let (path, eng) = a.engine.load_opened(model, false)?;
    let (ids, stops, stop_ids) = if a.chat {
        let r = ChatTemplate::from_tokenizer(&tok)
            .render(&[ChatMessage::new("user", a.prompt.as_str())], true);
        if let Some(w) = &r.warning {
            eprintln!("warning: {w}");
        }
        (tok.encode_chat(&r, a.parse_special), r.stops, r.stop_ids)
    } else {
        (
            tok.encode(&a.prompt, true, a.parse_special),
            Vec::new(),
            Vec::new(),
        )
    };
    if ids.is_empty() {
        bail!("the prompt is empty after tokenization");
    }
    if a.show_prompt {
        for id in &ids {
            eprintln!(
                "{id:>8} {:?}",
                String::from_utf8_lossy(tok.piece(*id, true))
            );
        }
    }
    if ids.len() + a.n > eng.n_ctx() {
        bail!(
            "the prompt ({} tokens) plus {} to generate needs {} positions, but the context is {} (--ctx)",
            ids.len(),
            a.n,
            ids.len() + a.n,
            eng.n_ctx()
        );
    }
    let budget = strata::sycl::default_device()
        .and_then(|d| d.info())
        .map(|i| i.global_mem)
        .unwrap_or(0);
    let mut gen = Generator::new(eng, drafter(&a, &path)?, budget);
    let mut stop_tokens = stop_ids;
    stop_tokens.extend(tok.eog_ids().iter().copied());
    let cfg = GenerateConfig {
        sampling: params,
        max_tokens: a.n,
        spec: a.spec,
        stop_tokens,
        stop_strings: stops,
        reuse_prefix: false,
    };
    let cancel = AtomicBool::new(false);
    let mut sink = Print {
        stats: a.stats,
        n: 0,
        err: None,
        cancel: &cancel,
    };
    let s = gen.generate(&ids, &cfg, &mut TokenText::new(&tok), &mut sink, &cancel)?;
    if let Some(e) = sink.err {
        return Err(e).context("writing to stdout");
    }
    writeln!(common::stdout())?;
    if a.stats {
        print_turn(&s);
        for d in gen.devices() {
            let m = &d.memory;
            eprintln!(
                "device {}: weights {} + kv {} + scratch {} = {} bytes of a {} budget",
                m.device,
                m.weights,
                m.kv,
                m.scratch,
                m.total(),
                d.budget
            );
        }
    } else {
        // the end-of-generation token is not text: count what was shown
        let shown = s.tokens.len() - usize::from(s.stop == StopReason::Eos);
        eprintln!(
            "prefill {} tokens {:.1} tok/s | generated {} tokens, decode {:.1} tok/s | TTFT {:.0} ms",
            s.prefill_tokens, s.prefill_tps, shown, s.decode_tps, s.ttft_ms
        );
    }
    Ok(())
}
