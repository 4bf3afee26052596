//! `strata nll`: teacher-forced mean negative log-likelihood and perplexity of a text, over
//! consecutive chunks of --ctx tokens (each chunk from an empty cache, BOS first when the model
//! adds one). `--half` scores only the second half of each chunk, as llama-perplexity does.

use super::engine_args::EngineArgs;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use strata::tokenizer::Tokenizer;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Text file to score.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Score only the second half of each chunk (llama-perplexity's convention).
    #[arg(long)]
    pub half: bool,
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

pub fn run(mut a: Args) -> Result<()> {
    if a.engine.ctx == 0 {
        a.engine.ctx = 512;
    }
    let n_ctx = a.engine.ctx;
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?;
    let (path, mut eng) = a.engine.load()?;
    let tok = Tokenizer::from_gguf_path(&path)?;
    let ids = tok.encode(&text, false, false);
    let bos = if tok.add_bos() { tok.bos() } else { None };
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
        let logits = eng.forward(&input, 0, &rows)?;
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
    let mean = sum / count as f64;
    println!(
        "{}: {} tokens scored in {} chunks of {n_ctx}{}: mean NLL {mean:.4}, perplexity {:.4} ({:.1} s)",
        a.file.display(),
        count,
        ids.len() / per_chunk,
        if a.half { " (second halves)" } else { "" },
        mean.exp(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
