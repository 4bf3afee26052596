//! `strata bench`: llama-bench's table: prompt processing (ppN: N tokens in one forward from an
//! empty cache) and text generation (tgN: N single-token steps), r repetitions, mean ± sd t/s.
//! Token ids are random, as llama-bench's. With `-d D` (llama-bench's --n-depth) both tests run
//! after D tokens already in the cache ("pp512 @ d2048"): decode at depth also reads the KV cache.

use super::common;
use super::engine_args::EngineArgs;
use anyhow::{bail, Result};
use std::io::Write;
use std::time::Instant;
use strata::sampling::SplitMix64;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Prompt tokens for the pp test (0 = skip).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    pub n_prompt: usize,
    /// Generated tokens for the tg test (0 = skip).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    pub n_gen: usize,
    /// Repetitions (at least 1).
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    pub reps: usize,
    /// Tokens already in the context when each test starts (0 = an empty cache).
    #[arg(short = 'd', long = "n-depth", default_value_t = 0)]
    pub depth: usize,
    /// Print JSON lines instead of the table.
    #[arg(long)]
    pub json: bool,
    /// After the tests, time every kernel of 32 decode steps on a profiling queue and print
    /// the per-step breakdown (device time per kernel label, launches, share of the step).
    #[arg(long)]
    pub profile: bool,
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
    } else {
        0.0
    };
    (m, var.sqrt())
}

pub fn run(mut a: Args) -> Result<()> {
    if a.reps == 0 {
        bail!("-r/--repetitions 0: at least 1 repetition is needed");
    }
    // the depth: positions 0..d filled once; every test then starts at d (rolling back to it)
    let d = a.depth;
    let need = d + a.n_prompt.max(a.n_gen);
    let model = a.engine.open()?;
    let train = model.config.n_ctx_train;
    if a.engine.ctx == 0 {
        // no --ctx: room for the tests, which the training context must hold
        if need > train {
            bail!(
                "-d {d} with -p {} / -n {} needs {need} positions, but the model was trained on \
                 a context of {train}",
                a.n_prompt,
                a.n_gen
            );
        }
        a.engine.ctx = (d + a.n_prompt + a.n_gen).max(16).min(train);
    }
    // the process's CPUs, read before the load pins this thread to one (sycl/affinity.rs)
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    // (an explicit --ctx past the training context is refused here, naming --ctx)
    let (path, mut eng) = a.engine.load_opened(model, a.profile)?;
    if eng.n_cards() > 1 {
        eprintln!(
            "{}: layers {:?} over {} cards",
            eng.device_name(),
            eng.layer_split(),
            eng.n_cards()
        );
    }
    let n_vocab = eng.config().n_vocab as u64;
    let mut rng = SplitMix64::new(42);
    let mut rand_tokens =
        |n: usize| -> Vec<u32> { (0..n).map(|_| (rng.next_u64() % n_vocab) as u32).collect() };
    if need > eng.n_ctx() {
        bail!(
            "-d {d} with -p {} / -n {} needs {need} positions, but the context holds {} (--ctx)",
            a.n_prompt,
            a.n_gen,
            eng.n_ctx()
        );
    }
    if d > 0 {
        let fill = rand_tokens(d);
        eng.forward(&fill, 0, &[])?;
    }
    let label = |test: String| {
        if d > 0 {
            format!("{test} @ d{d}")
        } else {
            test
        }
    };
    let mut rows = Vec::new();
    if a.n_prompt > 0 {
        let toks = rand_tokens(a.n_prompt);
        eng.forward(&toks, d, &[toks.len() - 1])?; // warm-up
        let mut ts = Vec::new();
        for _ in 0..a.reps {
            let t = Instant::now();
            eng.forward(&toks, d, &[toks.len() - 1])?;
            ts.push(a.n_prompt as f64 / t.elapsed().as_secs_f64());
        }
        rows.push((label(format!("pp{}", a.n_prompt)), mean_sd(&ts)));
    }
    if a.n_gen > 0 {
        let toks = rand_tokens(a.n_gen);
        eng.forward(&toks[..1], d, &[0])?; // warm-up
        let mut ts = Vec::new();
        for _ in 0..a.reps {
            let t = Instant::now();
            for (i, &tk) in toks.iter().enumerate() {
                eng.forward(&[tk], d + i, &[0])?;
            }
            ts.push(a.n_gen as f64 / t.elapsed().as_secs_f64());
        }
        rows.push((label(format!("tg{}", a.n_gen)), mean_sd(&ts)));
    }
    let mut out = common::stdout();
    if a.profile {
        profile_decode(&mut eng, &mut rand_tokens, &mut out)?;
    }
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let size = format!("{:.2} MiB", eng.file_bytes() as f64 / (1024.0 * 1024.0));
    let params = format!("{:.2} M", eng.n_params() as f64 / 1e6);
    if a.json {
        for (test, (m, sd)) in &rows {
            writeln!(
                out,
                "{}",
                serde_json::json!({"model": name, "size_bytes": eng.file_bytes(), "params": eng.n_params(),
                    "backend": "SYCL", "device": eng.device_name(), "threads": threads, "test": test,
                    "n_depth": d,
                    "avg_ts": m, "stddev_ts": sd, "repetitions": a.reps})
            )?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "| model | size | params | backend | threads | test | t/s |"
    )?;
    writeln!(
        out,
        "| ----- | ---: | -----: | ------- | ------: | ---: | --: |"
    )?;
    for (test, (m, sd)) in &rows {
        writeln!(
            out,
            "| {name} | {size} | {params} | SYCL | {threads} | {test} | {m:.2} ± {sd:.2} |"
        )?;
    }
    Ok(())
}

/// The prompt `--profile`'s decode steps follow.
const PROMPT: usize = 64;

/// Seconds per step of decoding `toks` one at a time at positions PROMPT.., untraced, after one
/// warm-up step (which records the step graph when graphs are on).
fn step_seconds(eng: &mut strata::model::Engine, toks: &[u32]) -> Result<f64> {
    eng.forward(&toks[..1], PROMPT, &[0])?;
    let t0 = Instant::now();
    for (i, &tk) in toks.iter().enumerate() {
        eng.forward(&[tk], PROMPT + i, &[0])?;
    }
    Ok(t0.elapsed().as_secs_f64() / toks.len() as f64)
}

/// Decode steps after a 64-token prompt, every launch timed (`Queue::trace_*`).
fn profile_decode(
    eng: &mut strata::model::Engine,
    rand_tokens: &mut impl FnMut(usize) -> Vec<u32>,
    out: &mut impl Write,
) -> Result<()> {
    const STEPS: usize = 32;
    let n = (eng.n_ctx().saturating_sub(PROMPT)).min(STEPS);
    if n == 0 {
        anyhow::bail!(
            "--profile needs a context of at least {} tokens",
            PROMPT + 1
        );
    }
    let prompt = rand_tokens(PROMPT);
    eng.forward(&prompt, 0, &[PROMPT - 1])?;
    let toks = rand_tokens(n);
    let q = eng.queue().clone();
    q.trace_begin();
    let t0 = Instant::now();
    for (i, &tk) in toks.iter().enumerate() {
        eng.forward(&[tk], PROMPT + i, &[0])?;
    }
    let wall = t0.elapsed().as_secs_f64() / n as f64;
    let times = q.trace_end()?;
    let dev: f64 = times.iter().map(|k| k.seconds).sum::<f64>() / n as f64;
    let launches: usize = times.iter().map(|k| k.launches).sum::<usize>() / n;
    writeln!(
        out,
        "decode step (profiling queue, {n} steps after a {PROMPT}-token prompt): {:.0} us wall, \
         {:.0} us kernel time, {launches} launches, {:.0} us outside kernels",
        wall * 1e6,
        dev * 1e6,
        (wall - dev) * 1e6
    )?;
    // The same steps untraced, replayed from the step graph and submitted one by one, so the
    // launch overhead the graph removes is visible next to the breakdown.
    let was = eng.step_graphs_on();
    let mut untraced = |graphs: bool| -> Result<f64> {
        eng.set_step_graphs(graphs);
        let mut best = f64::MAX;
        for _ in 0..3 {
            best = best.min(step_seconds(eng, &toks)?);
        }
        Ok(best)
    };
    let (direct, replayed) = (untraced(false)?, untraced(true)?);
    eng.set_step_graphs(was);
    writeln!(
        out,
        "untraced, best of 3 x {n} steps: {:.0} us per step submitted one by one, {:.0} us replayed \
         from the step graph ({:.2}x)",
        direct * 1e6,
        replayed * 1e6,
        direct / replayed
    )?;
    fold_ab(eng, &toks, launches, out)?;
    writeln!(
        out,
        "| kernel [global/local] | launches/step | us/step | % of kernel time |"
    )?;
    writeln!(
        out,
        "| --------------------- | ------------: | ------: | ---------------: |"
    )?;
    for k in &times {
        writeln!(
            out,
            "| {} | {} | {:.1} | {:.1} |",
            k.label,
            k.launches / n,
            k.seconds / n as f64 * 1e6,
            100.0 * k.seconds / n as f64 / dev
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The fold of the norms into the projections (`Engine::set_fold_norms`) on and off in turns in
/// one process, so a process's slow or fast decode mode (docs/performance.md) does not decide
/// the comparison: the median of 6 rounds each, the order flipped every round. `launches`: a
/// traced step's launches with the engine's setting; a model with nothing to fold says so.
fn fold_ab(
    eng: &mut strata::model::Engine,
    toks: &[u32],
    launches: usize,
    out: &mut impl Write,
) -> Result<()> {
    let n = toks.len();
    let was = eng.fold_norms();
    // the launches of a step with the fold off
    eng.set_fold_norms(false);
    let q = eng.queue().clone();
    q.trace_begin();
    eng.forward(&toks[..1], PROMPT, &[0])?;
    let unfolded: usize = q.trace_end()?.iter().map(|k| k.launches).sum();
    let folded = if was { launches } else { unfolded };
    if !was || folded == unfolded {
        eng.set_fold_norms(was);
        writeln!(
            out,
            "norms folded into the projections: {}",
            if was {
                "none on this model"
            } else {
                "off (STRATA_FOLD_NORMS=0)"
            }
        )?;
        return Ok(());
    }
    let mut rounds = [Vec::new(), Vec::new()];
    for r in 0..6 {
        let order = if r % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for on in order {
            eng.set_fold_norms(on);
            rounds[usize::from(!on)].push(step_seconds(eng, toks)?);
        }
    }
    eng.set_fold_norms(was);
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    let (on, off) = (med(&mut rounds[0]), med(&mut rounds[1]));
    writeln!(
        out,
        "norms folded into the projections: {folded} launches a step against {unfolded}; \
         untraced, median of 6 x {n} steps each in turns: {:.0} us per step folded, {:.0} us not \
         ({:.2}x)",
        on * 1e6,
        off * 1e6,
        off / on
    )?;
    Ok(())
}
