//! `strata run`: generate from a prompt, streaming text to stdout; one stats line on stderr.

use super::engine_args::EngineArgs;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::time::Instant;
use strata::sampling::{Sampler, SamplingParams, StopMatcher};
use strata::tokenizer::{ChatMessage, ChatTemplate, StreamDecoder, Tokenizer};

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
    /// Print the prompt as tokenized (ids and pieces) to stderr first.
    #[arg(long)]
    pub show_prompt: bool,
}

pub fn run(a: Args) -> Result<()> {
    let (path, mut eng) = a.engine.load()?;
    let tok = Tokenizer::from_gguf_path(&path)
        .with_context(|| format!("tokenizer of {}", path.display()))?;
    let (ids, stops, stop_ids) = if a.chat {
        let r = ChatTemplate::from_tokenizer(&tok)
            .render(&[ChatMessage::new("user", a.prompt.as_str())], true);
        if let Some(w) = &r.warning {
            eprintln!("warning: {w}");
        }
        (tok.encode_prompt(&r.prompt), r.stops, r.stop_ids)
    } else {
        (tok.encode(&a.prompt, true, false), Vec::new(), Vec::new())
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
    let params = SamplingParams {
        temperature: a.temp,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        repeat_penalty: a.repeat_penalty,
        repeat_last_n: a.repeat_last_n,
        seed: a.seed,
    };
    let mut sampler = Sampler::new(params)?;
    for &t in &ids {
        sampler.accept(t);
    }
    let mut stop = StopMatcher::new(&stops);
    let mut dec = StreamDecoder::new(false);
    let mut out = std::io::stdout().lock();
    let t0 = Instant::now();
    let mut logits = eng
        .forward(&ids, 0, &[ids.len() - 1])?
        .pop()
        .context("no logits")?;
    let ttft = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut n_gen = 0;
    for i in 0..a.n {
        let t = sampler
            .sample(&logits)
            .with_context(|| format!("sampling at position {}", ids.len() + i))?;
        sampler.accept(t);
        if tok.is_eog(t) || stop_ids.contains(&t) {
            break;
        }
        let o = stop.push(&dec.push(&tok, t));
        write!(out, "{}", o.emit)?;
        out.flush()?;
        if o.stopped {
            break;
        }
        n_gen += 1;
        if i + 1 < a.n {
            logits = eng
                .forward(&[t], ids.len() + i, &[0])?
                .pop()
                .context("no logits")?;
        }
    }
    let tail = stop.push(&dec.flush());
    write!(
        out,
        "{}{}",
        tail.emit,
        if tail.stopped {
            String::new()
        } else {
            stop.finish()
        }
    )?;
    writeln!(out)?;
    let dt = t1.elapsed().as_secs_f64();
    eprintln!(
        "prefill {} tokens {:.1} tok/s | decode {} tokens {:.1} tok/s | TTFT {:.0} ms",
        ids.len(),
        ids.len() as f64 / ttft,
        n_gen,
        n_gen as f64 / dt.max(1e-9),
        ttft * 1e3
    );
    Ok(())
}
