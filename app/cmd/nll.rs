//! `strata nll`: teacher-forced mean negative log-likelihood and perplexity of a text, over
//! consecutive chunks of --ctx tokens (each chunk from an empty cache, BOS first when the model
//! adds one). `--half` scores only the second half of each chunk, as llama-perplexity does.
//! `--windows N` feeds each chunk N tokens at a time through the decode / verify-window path
//! (the seeds' "NLL through the decode windows": the same targets, the kernels a flag changes).
//! `--kld-base FILE` writes llama-perplexity's `--kl-divergence-base` file of the text and
//! `--kld FILE` scores such a file's tokens against its stored log-probabilities (app/cmd/kld.rs),
//! both in llama-perplexity's layout: the text tokenized with BOS, chunks of --ctx, BOS fed first,
//! the second half of each chunk scored.

use super::common;
use super::engine_args::EngineArgs;
use super::kld;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Text file to score (with --kld: optional, its tokens are checked against the file's).
    #[arg(short = 'f', long = "file", required_unless_present = "kld")]
    pub file: Option<PathBuf>,
    /// Score only the second half of each chunk (llama-perplexity's convention; needs --ctx 3
    /// or more).
    #[arg(long)]
    pub half: bool,
    /// Feed each chunk in windows of N tokens (1..=8) through the decode / verify-window path
    /// (its products and in-step head), as `--spec N-1` verifies drafts, instead of the prompt
    /// path: the same targets, scored through the kernels a flag like STRATA_HC_Q8 changes.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=8))]
    pub windows: u8,
    /// Write the second-half log-probabilities of every chunk to FILE in llama-perplexity's
    /// --kl-divergence-base format (read it with `llama-perplexity --kl-divergence
    /// --kl-divergence-base FILE` or `strata nll --kld FILE`).
    #[arg(long = "kld-base", value_name = "FILE", conflicts_with_all = ["kld", "half"])]
    pub kld_base: Option<PathBuf>,
    /// Score FILE's tokens (written by llama-perplexity --kl-divergence-base or --kld-base)
    /// against its log-probabilities: KL divergence, top-1 agreement, RMS Δp, as llama-perplexity
    /// --kl-divergence prints them. --ctx is the file's.
    #[arg(long = "kld", value_name = "FILE", conflicts_with = "half")]
    pub kld: Option<PathBuf>,
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

/// The logits of rows first..input.len()-1 of `input` (each predicting the next token), through
/// the prompt path or, with `windows` > 0, the decode windows.
fn chunk_logits(
    eng: &mut strata::model::Engine,
    input: &[u32],
    first: usize,
    windows: u8,
) -> Result<Vec<Vec<f32>>> {
    match windows as usize {
        0 => {
            let rows: Vec<usize> = (first..input.len() - 1).collect();
            Ok(eng.forward(input, 0, &rows)?)
        }
        w => windowed(eng, input, w, first),
    }
}

/// Reads the text file (`-f`), naming it in the error.
fn read_text(file: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

/// `--kld-base` / `--kld`: llama-perplexity's chunking (tokens with BOS, chunks of n_ctx whose
/// first token is fed as BOS, the second half scored), either written or compared.
fn run_kld(mut a: Args) -> Result<()> {
    let model = a.engine.open()?;
    let reader = match &a.kld {
        Some(p) => {
            let r = kld::BaseReader::open(p)?;
            if a.engine.ctx != 0 && a.engine.ctx != r.n_ctx {
                bail!(
                    "--ctx {} but {} was computed with n_ctx {}: drop --ctx or pass --ctx {}",
                    a.engine.ctx,
                    p.display(),
                    r.n_ctx,
                    r.n_ctx
                );
            }
            if r.n_vocab != model.config.n_vocab {
                bail!(
                    "{}: header field n_vocab is {}, but {} has a vocabulary of {}: a base of                      another model",
                    p.display(),
                    r.n_vocab,
                    model.path.display(),
                    model.config.n_vocab
                );
            }
            a.engine.ctx = r.n_ctx;
            eprintln!(
                "{}: {} chunks of {}, {} positions scored",
                p.display(),
                r.n_chunk,
                r.n_ctx,
                r.n_chunk * kld::scored_rows(r.n_ctx)
            );
            Some(r)
        }
        None => None,
    };
    if a.engine.ctx == 0 {
        a.engine.ctx = 512.min(model.config.n_ctx_train);
    }
    let n_ctx = a.engine.ctx;
    if n_ctx < 3 {
        bail!(
            "--ctx {n_ctx} leaves no token to score in a chunk's second half; use --ctx 3 or more"
        );
    }
    let tok = common::tokenizer(&model.gguf, &model.path)?;
    let text_ids = match &a.file {
        Some(f) => Some(tok.encode(&read_text(f)?, true, false)),
        None => None,
    };
    let n_vocab = model.config.n_vocab;
    let (_, mut eng) = a.engine.load_opened(model, false)?;
    let bos = if tok.add_bos() { tok.bos() } else { None };
    let (tokens, mut writer) = match (&reader, &a.kld_base) {
        (Some(r), _) => {
            if let Some(ids) = &text_ids {
                let file = a.file.as_deref().map(|f| f.display().to_string());
                let file = file.unwrap_or_default();
                if let Some(i) = (0..r.tokens.len()).find(|&i| ids.get(i) != Some(&r.tokens[i])) {
                    bail!(
                        "{}: token mismatch with {file} at token {i}: the base has {}, the text                          gives {} ({} tokens, the base {}): another text or tokenizer",
                        r.path.display(),
                        r.tokens[i],
                        ids.get(i).map_or("nothing".into(), |t| t.to_string()),
                        ids.len(),
                        r.tokens.len()
                    );
                }
            }
            (r.tokens.clone(), None)
        }
        (None, Some(out)) => {
            // text_ids is Some: clap requires -f unless --kld is given
            let ids = text_ids.unwrap_or_default();
            let n_chunk = ids.len() / n_ctx;
            if n_chunk == 0 {
                bail!(
                    "{} has {} tokens (with BOS); one chunk of --ctx {n_ctx} needs {n_ctx}",
                    a.file.as_deref().unwrap_or(out).display(),
                    ids.len()
                );
            }
            let tokens = ids[..n_chunk * n_ctx].to_vec();
            let w = kld::BaseWriter::create(out, n_ctx, n_vocab, &tokens)?;
            (tokens, Some(w))
        }
        (None, None) => unreachable!("run_kld is called with --kld or --kld-base"),
    };
    let mut reader = reader;
    let first = kld::first_row(n_ctx);
    let mut stats = kld::Kld::default();
    let mut rows = Vec::new(); // (scored_rows(n_ctx), row_len(n_vocab)) u16 from the base
    let nv = kld::row_len(n_vocab);
    let (mut nll_sum, mut count) = (0f64, 0usize);
    let t0 = std::time::Instant::now();
    for (ci, chunk) in tokens.chunks_exact(n_ctx).enumerate() {
        let mut input = chunk.to_vec();
        if let Some(b) = bos {
            input[0] = b;
        }
        let logits = chunk_logits(&mut eng, &input, first, a.windows)?;
        let targets = &chunk[first + 1..];
        match (&mut writer, &mut reader) {
            (Some(w), _) => {
                let s = w.chunk(&logits, targets)?;
                nll_sum += s;
                count += targets.len();
                eprintln!(
                    "chunk {ci}: mean NLL {:.4} over {} tokens",
                    s / targets.len() as f64,
                    targets.len()
                );
            }
            (None, Some(r)) => {
                r.chunk(&mut rows)?;
                for ((l, row), &t) in logits.iter().zip(rows.chunks_exact(nv)).zip(targets) {
                    stats.add(l, row, t);
                }
                let s = stats.summary();
                eprintln!(
                    "chunk {ci}: KLD {:.6} ± {:.6}, same top p {:.3} % ({} positions)",
                    s.mean_kld,
                    s.mean_kld_err,
                    100.0 * s.same_top,
                    s.count
                );
            }
            (None, None) => unreachable!("one of writer / reader is set above"),
        }
    }
    let mut out = common::stdout();
    match (writer, &a.kld_base) {
        (Some(w), Some(p)) => {
            w.finish()?;
            let mean = nll_sum / count as f64;
            writeln!(
                out,
                "{}: {} chunks of {n_ctx}, {count} positions (second halves): mean NLL {mean:.4}, perplexity {:.4} ({:.1} s)",
                p.display(),
                tokens.len() / n_ctx,
                mean.exp(),
                t0.elapsed().as_secs_f64()
            )?;
        }
        _ => {
            write!(out, "{}", stats.report())?;
        }
    }
    Ok(())
}

pub fn run(mut a: Args) -> Result<()> {
    if a.kld.is_some() || a.kld_base.is_some() {
        return run_kld(a);
    }
    // clap requires -f unless --kld is given
    let file = a.file.clone().unwrap_or_default();
    let text = read_text(&file)?;
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
            file.display(),
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
        let logits = chunk_logits(&mut eng, &input, first, a.windows)?;
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
            file.display(),
            if a.half { " --half" } else { "" }
        );
    }
    let mean = sum / count as f64;
    writeln!(
        common::stdout(),
        "{}: {} tokens scored in {} chunks of {n_ctx}{}{}: mean NLL {mean:.4}, perplexity {:.4} ({:.1} s)",
        file.display(),
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
