//! `strata ab`: an A/B of engine flags (app/ab/). The run spec comes from the options, or from a
//! preset (`--preset NAME`: its model, context, sampling, speculation, system prompt, and its
//! `[ab]` section's arms, prompts, n, rounds, NLL text), the options overriding it. Prints the
//! table; `--report FILE` writes FILE as Markdown and the same name with `.json` beside it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use strata::protocol::Sampling;

use super::common;
use crate::ab::runner::{self, Progress};
use crate::ab::spec::{AbSection, NllSpec, RunSpec};
use crate::ab::{compare, report};
use crate::presets::{self, PresetStore};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The arms, comma-separated, the first the base: built-in names (default, kreg, hc-q8,
    /// gr-fused, vnni), a preset's [ab.arms] names, or VARIABLE=VALUE; parts joined by +
    /// (`hc-q8+gr-fused`, `STRATA_FUSED=0`). Default: the preset's [ab] run list.
    #[arg(long, value_delimiter = ',')]
    pub arms: Vec<String>,
    /// Take model, context, sampling, speculation, system prompt and [ab] from this preset.
    #[arg(long)]
    pub preset: Option<String>,
    /// GGUF model (default: the preset's, else SmolLM2 from setup).
    #[arg(short = 'm', long)]
    pub model: Option<PathBuf>,
    /// A prompt (a user turn); repeat for several.
    #[arg(short = 'p', long = "prompt")]
    pub prompts: Vec<String>,
    /// Prompts, one per line (blank lines skipped).
    #[arg(long)]
    pub prompt_file: Option<PathBuf>,
    /// A system message before each prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Tokens to generate per prompt (default: the preset's [ab] n, else 128).
    #[arg(short = 'n', long)]
    pub n: Option<u32>,
    /// Rounds of A B A B ... (default: the preset's [ab] reps, else 3).
    #[arg(short = 'r', long)]
    pub reps: Option<u32>,
    /// Draft tokens per verify window (0 = no speculation; default: the preset's, else 0).
    #[arg(long)]
    pub spec: Option<u32>,
    /// Context tokens (0 = the engine's automatic choice).
    #[arg(long)]
    pub ctx: Option<u32>,
    /// Split the CPU device into N cards.
    #[arg(long)]
    pub split_cpu: Option<u32>,
    /// Sampling temperature (default: the preset's, else 0 = greedy).
    #[arg(long)]
    pub temp: Option<f32>,
    /// Top-k (0 = off; default: the preset's, else 40).
    #[arg(long)]
    pub top_k: Option<u32>,
    /// Top-p (1 = off; default: the preset's, else 0.95).
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Min-p (0 = off; default: the preset's, else 0.05).
    #[arg(long)]
    pub min_p: Option<f32>,
    /// Repeat penalty (1 = off; default: the preset's, else 1.1).
    #[arg(long)]
    pub repeat_penalty: Option<f32>,
    /// The sampler's seed, the same for every arm (default: the preset's, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A text file: each arm's teacher-forced NLL of it through the decode windows
    /// (`strata nll --windows`).
    #[arg(long)]
    pub nll: Option<PathBuf>,
    /// Window size for --nll (default: spec + 1, at least 5 as the seeds' gate, at most 8).
    #[arg(long)]
    pub nll_windows: Option<u8>,
    /// Chunk length for --nll.
    #[arg(long, default_value_t = 512)]
    pub nll_ctx: u32,
    /// With --nll: also each arm's KL divergence from the base arm's logits on the same text and
    /// its same-top-1 rate (`strata nll --kld-base` / `--kld`, llama-perplexity's layout).
    #[arg(long)]
    pub kld: bool,
    /// Write the report: FILE as Markdown and FILE with .json as JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// The spec from the options over the preset (if any).
fn spec_of(a: &Args) -> Result<RunSpec> {
    let preset = match &a.preset {
        Some(name) => Some(
            PresetStore::load(presets::user_dir().as_deref())
                .resolve(name)
                .map_err(|e| anyhow!("preset: {e}"))?,
        ),
        None => None,
    };
    let ab: AbSection = preset
        .as_ref()
        .and_then(|p| p.ab.clone())
        .unwrap_or_default();
    let arms = ab.arms(&a.arms).map_err(|e| anyhow!("--arms: {e}"))?;
    if arms.is_empty() {
        bail!(
            "no arms: give --arms A,B (e.g. --arms default,kreg) or a preset with [ab] run = [...]"
        );
    }
    let model = match (&a.model, &preset) {
        (Some(m), _) => m.clone(),
        (None, Some(p)) => p.model_path().map_err(anyhow::Error::msg)?,
        (None, None) => {
            strata::paths::model_path(strata::paths::SMOLLM2_ENV).map_err(anyhow::Error::msg)?
        }
    };
    let mut prompts = a.prompts.clone();
    if let Some(f) = &a.prompt_file {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        prompts.extend(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(String::from),
        );
    }
    if prompts.is_empty() {
        prompts = ab.prompts.clone();
    }
    let base = preset
        .as_ref()
        .map(|p| p.sampling.clone())
        .unwrap_or(Sampling {
            temperature: 0.0,
            seed: Some(1),
            ..Sampling::default()
        });
    let sampling = Sampling {
        temperature: a.temp.unwrap_or(base.temperature),
        top_k: a.top_k.unwrap_or(base.top_k),
        top_p: a.top_p.unwrap_or(base.top_p),
        min_p: a.min_p.unwrap_or(base.min_p),
        repeat_penalty: a.repeat_penalty.unwrap_or(base.repeat_penalty),
        // a clock seed would make two arms sample differently for no reason of theirs
        seed: Some(a.seed.or(base.seed).unwrap_or(1)),
        max_tokens: 0, // the runner sets n
    };
    let spec = a.spec.or(preset.as_ref().map(|p| p.spec)).unwrap_or(0);
    let nll_file = a.nll.clone().or(ab.nll.as_ref().map(PathBuf::from));
    let nll = nll_file.map(|file| NllSpec {
        file,
        windows: a.nll_windows.unwrap_or((spec as u8 + 1).clamp(5, 8)),
        ctx: a.nll_ctx,
        kld: a.kld,
    });
    if a.kld && nll.is_none() {
        bail!("--kld needs --nll TEXT (the text both arms' logits are taken on)");
    }
    if let Some(n) = &nll {
        if !(1..=8).contains(&n.windows) {
            bail!("--nll-windows {}: 1 to 8", n.windows);
        }
        if !n.file.is_file() {
            bail!("--nll {}: no such file", n.file.display());
        }
    }
    let run = RunSpec {
        model,
        prompts,
        system: a
            .system
            .clone()
            .or(preset.as_ref().map(|p| p.system_prompt.clone()))
            .unwrap_or_default(),
        n: a.n.or(ab.n).unwrap_or(128),
        spec,
        ctx: a.ctx.or(preset.as_ref().map(|p| p.ctx)).unwrap_or(0),
        split_cpu: a.split_cpu.or(preset.as_ref().and_then(|p| p.split_cpu)),
        sampling,
        reps: a.reps.or(ab.reps).unwrap_or(3),
        arms,
        nll,
    };
    run.validate()?;
    if !run.model.is_file() {
        bail!("model {}: no such file", run.model.display());
    }
    Ok(run)
}

fn progress_line(p: &Progress) -> Option<String> {
    match p {
        Progress::Starting { rep, arm } => Some(format!("round {}: {arm}: starting", rep + 1)),
        Progress::Loaded { rep, arm, load_ms } => Some(format!(
            "round {}: {arm}: loaded in {load_ms:.0} ms",
            rep + 1
        )),
        Progress::Token { .. } => None,
        Progress::Turn {
            rep,
            arm,
            prompt,
            turn,
        } => Some(format!(
            "round {}: {arm}: prompt {}: {} tokens, {:.1} tok/s, {} windows",
            rep + 1,
            prompt + 1,
            turn.decode_tokens + 1,
            turn.decode_tps,
            turn.windows
        )),
        Progress::Nll { arm, result } => Some(format!("{arm}: {}", result.line)),
    }
}

pub fn run(a: Args) -> Result<()> {
    let spec = spec_of(&a)?;
    let tok = common::tokenizer_of(&spec.model)?;
    let program = runner::this_program()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let quiet = a.quiet;
    let mut progress = move |p: &Progress| {
        if !quiet {
            if let Some(l) = progress_line(p) {
                eprintln!("{l}");
            }
        }
    };
    let run = rt.block_on(runner::run(&spec, &program, &mut progress))?;
    let decode = |ids: &[u32]| tok.decode(ids, true);
    let cmp = compare::compare(&run, &decode);
    let command = std::env::args()
        .map(|s| if s.contains(' ') { format!("'{s}'") } else { s })
        .collect::<Vec<_>>()
        .join(" ");
    write!(common::stdout(), "{}", report::table(&run, &cmp))?;
    if let Some(path) = &a.report {
        let (path, jpath) = if path.extension().is_some_and(|e| e == "json") {
            (path.with_extension("md"), path.clone())
        } else {
            (path.clone(), path.with_extension("json"))
        };
        let md = report::markdown(&run, &cmp, &command);
        std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
        let j = serde_json::to_string_pretty(&report::json(&run, &cmp, &command))?;
        std::fs::write(&jpath, j).with_context(|| format!("writing {}", jpath.display()))?;
        eprintln!("report: {} and {}", path.display(), jpath.display());
    }
    Ok(())
}
