//! `strata nll`: teacher-forced mean negative log-likelihood and perplexity of a text, over
//! consecutive chunks of --ctx tokens (each chunk from an empty cache, BOS first when the model
//! adds one). `--half` scores only the second half of each chunk, as llama-perplexity does.
//! `--windows N` feeds each chunk N tokens at a time through the decode / verify-window path
//! (the seeds' "NLL through the decode windows": the same targets, the kernels a flag changes).

use super::common;
use super::engine_args::EngineArgs;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Text file to score.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Score only the second half of each chunk (llama-perplexity's convention; needs --ctx 3
    /// or more).
    #[arg(long)]
    pub half: bool,
    /// Feed each chunk in windows of N tokens (1..=8) through the decode / verify-window path
    /// (its products and in-step head), as `--spec N-1` verifies drafts, instead of the prompt
    /// path: the same targets, scored through the kernels a flag like STRATA_HC_Q8 changes.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=8))]
    pub windows: u8,
}

/// -log softmax(logits)[target], in f64.
fn nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let lse = logits
        .iter()
        .map(|&v| (v as f64 - max).exp())
        .sum::<f64>()
        .ln()
        + max;
    lse - logits[target as usize] as f64
}

/// Rows scored in a chunk of `n_ctx` tokens: row r predicts token r + 1, so the last row
/// predicts nothing; with `half` the rows start at the middle one.
fn scored_per_chunk(n_ctx: usize, half: bool) -> usize {
    let first = if half { n_ctx / 2 } else { 0 };
    n_ctx.saturating_sub(1).saturating_sub(first)
}

/// The logits of rows first..len-1 of `input`, fed `w` tokens at a time from position 0 (each
/// window's rows 0..w: the decode and verify-window path).
fn windowed(
    eng: &mut strata::model::Engine,
    input: &[u32],
    w: usize,
    first: usize,
) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(input.len());
    for (i, win) in input.chunks(w).enumerate() {
        let p = i * w;
        let rows: Vec<usize> = (0..win.len()).collect();
        for (r, l) in rows.iter().zip(eng.forward(win, p, &rows)?) {
            if p + r >= first && p + r + 1 < input.len() {
                out.push(l);
            }
        }
    }
    Ok(out)
}

pub fn run(mut a: Args) -> Result<()> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?;
    let model = a.engine.open()?;
    if a.engine.ctx == 0 {
        a.engine.ctx = 512.min(model.config.n_ctx_train);
    }
    let n_ctx = a.engine.ctx;
    if scored_per_chunk(n_ctx, a.half) == 0 {
        let (with, what, least) = if a.half {
            (" with --half", "only the tokens after its middle one", 3)
        } else {
            ("", "every token after its first", 2)
        };
        bail!(
            "--ctx {n_ctx}{with} leaves no token to score: a {n_ctx}-token chunk scores \
             {what} (none here); use --ctx {least} or more"
        );
    }
    let tok = common::tokenizer(&model.gguf, &model.path)?;
    let (_, mut eng) = a.engine.load_opened(model, false)?;
    let ids = tok.encode(&text, false, false);
    let bos = if tok.add_bos() { tok.bos() } else { None };
    // n_ctx >= 2 (scored_per_chunk > 0 above), so a chunk holds at least one token of the text
    let per_chunk = n_ctx - usize::from(bos.is_some());
    if ids.len() < per_chunk {
        bail!(
            "{} has {} tokens; one chunk of --ctx {} needs {}",
            a.file.display(),
            ids.len(),
            n_ctx,
            per_chunk
        );
    }
    let (mut sum, mut count) = (0f64, 0usize);
    let t0 = std::time::Instant::now();
    for (ci, chunk) in ids.chunks_exact(per_chunk).enumerate() {
        let mut input: Vec<u32> = bos.into_iter().collect();
        input.extend_from_slice(chunk);
        // Row r predicts input[r + 1]; the first scored row is the middle one with --half.
        let first = if a.half { input.len() / 2 } else { 0 };
        let rows: Vec<usize> = (first..input.len() - 1).collect();
        let logits = match a.windows as usize {
            0 => eng.forward(&input, 0, &rows)?,
            w => windowed(&mut eng, &input, w, first)?,
        };
        let mut csum = 0f64;
        for (l, &r) in logits.iter().zip(&rows) {
            csum += nll(l, input[r + 1]);
        }
        sum += csum;
        count += rows.len();
        eprintln!(
            "chunk {ci}: mean NLL {:.4} over {} tokens",
            csum / rows.len() as f64,
            rows.len()
        );
    }
    if count == 0 {
        bail!(
            "{}: no token scored with --ctx {n_ctx}{}",
            a.file.display(),
            if a.half { " --half" } else { "" }
        );
    }
    let mean = sum / count as f64;
    writeln!(
        common::stdout(),
        "{}: {} tokens scored in {} chunks of {n_ctx}{}{}: mean NLL {mean:.4}, perplexity {:.4} ({:.1} s)",
        a.file.display(),
        count,
        ids.len() / per_chunk,
        if a.half { " (second halves)" } else { "" },
        match a.windows {
            0 => String::new(),
            w => format!(" through windows of {w}"),
        },
        mean.exp(),
        t0.elapsed().as_secs_f64()
    )?;
    Ok(())
}
