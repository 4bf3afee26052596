//! The A/B written down: a table for the terminal, Markdown in the shape of the seeds' PR
//! "Measured" sections (what ran where, then one bullet per figure, base -> arm, the per-round
//! medians, the caveats), and JSON with everything (the raw runs included).

use std::fmt::Write;

use serde_json::json;

use super::compare::{ArmSummary, Comparison, Identity};
use super::runner::AbRun;
use super::stats::Spread;

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

fn med(s: &Option<Spread>, prec: usize) -> String {
    s.map_or("-".into(), |s| format!("{:.prec$}", s.median))
}

fn window_cell(a: &ArmSummary) -> String {
    a.window_ms.map_or("-".into(), |s| {
        format!("{:.2} ({:.2}-{:.2})", s.median, s.q1, s.q3)
    })
}

fn pct(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{:+.1}%", 100.0 * (r - 1.0)))
}

fn drafts(a: &ArmSummary) -> String {
    if a.proposed == 0 {
        "-".into()
    } else {
        format!(
            "{}/{} ({:.0}%)",
            a.accepted,
            a.proposed,
            100.0 * a.acceptance
        )
    }
}

fn nll(a: &ArmSummary) -> String {
    a.nll.as_ref().map_or("-".into(), |n| match &n.kld {
        Some(k) => format!(
            "{:.4} (KLD {:.6}, top-1 {:.2}%)",
            n.mean, k.mean, k.same_top_p
        ),
        None => format!("{:.4}", n.mean),
    })
}

/// Text shown in a cell: control characters visible (`\n`), at most `max` characters.
fn shown(s: &str, max: usize) -> String {
    let t: String = s
        .chars()
        .flat_map(|c| {
            let v: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            v
        })
        .collect();
    if t.chars().count() > max {
        let cut: String = t.chars().take(max).collect();
        format!("{cut}…")
    } else {
        t
    }
}

/// One prompt's identity, short: `identical (128 tok)` / `differs at token 37`.
fn identity_short(o: &Identity) -> String {
    match o {
        Identity::Base { tokens } => format!("base ({tokens} tok)"),
        Identity::Identical { tokens } => format!("identical ({tokens} tok)"),
        Identity::Differs(d) => format!("differs at token {}", d.position),
    }
}

fn outputs_short(a: &ArmSummary) -> String {
    a.outputs
        .iter()
        .map(identity_short)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The divergence of one prompt in words (None when identical).
fn divergence_line(base: &str, a: &ArmSummary, pi: usize, n_prompts: usize) -> Option<String> {
    let Identity::Differs(d) = &a.outputs[pi] else {
        return None;
    };
    let which = if n_prompts > 1 {
        format!("prompt {}: ", pi + 1)
    } else {
        String::new()
    };
    let tok = |t: Option<u32>| t.map_or("end".into(), |t| t.to_string());
    Some(format!(
        "{which}{} parts from {base} at reply token {} of {}/{}: \"…{}\" then {base} [{}] \"{}\" \"{}…\", {} [{}] \"{}\" \"{}…\"",
        a.name,
        d.position,
        d.base_len,
        d.arm_len,
        shown(&d.before, 60),
        tok(d.base_token),
        shown(&d.base_piece, 20),
        shown(&d.base_after, 40),
        a.name,
        tok(d.arm_token),
        shown(&d.arm_piece, 20),
        shown(&d.arm_after, 40),
    ))
}

/// The terminal table, the divergences, the checks and the warnings.
pub fn table(run: &AbRun, cmp: &Comparison) -> String {
    let head = [
        "arm",
        "flags",
        "window ms (q1-q3)",
        "vs base",
        "rounds",
        "decode tok/s",
        "prompt tok/s",
        "tok/window",
        "drafts",
        "NLL",
        "output",
    ];
    let rows: Vec<Vec<String>> = cmp
        .arms
        .iter()
        .enumerate()
        .map(|(i, a)| {
            vec![
                a.name.clone(),
                a.flags.clone(),
                window_cell(a),
                if i == 0 {
                    "-".into()
                } else {
                    pct(a.window_ratio)
                },
                a.round_window_ms
                    .iter()
                    .map(|m| format!("{m:.2}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                med(&a.decode_tps, 1),
                med(&a.prefill_tps, 1),
                format!("{:.2}", a.tokens_per_window),
                drafts(a),
                nll(a),
                outputs_short(a),
            ]
        })
        .collect();
    let width: Vec<usize> = (0..head.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([head[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (c, cell) in cells.iter().enumerate() {
            let pad = width[c] - cell.chars().count();
            s.push_str(cell);
            if c + 1 < cells.len() {
                s.push_str(&" ".repeat(pad + 2));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    let spec = &run.spec;
    let _ = writeln!(
        out,
        "A/B {} on {} ({}), {} prompt(s) x -n {}, spec {}, {} round(s) A B A B, {}{}",
        spec.arms
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(" vs "),
        spec.model
            .file_name()
            .map_or("?".into(), |f| f.to_string_lossy().into_owned()),
        run.runs.first().map_or("?", |r| r.loaded.arch.as_str()),
        spec.prompts.len(),
        spec.n,
        spec.spec,
        spec.reps,
        run.build.describe(),
        load_words(run)
    );
    let _ = writeln!(out, "{}", line(&head.map(String::from)));
    for r in &rows {
        let _ = writeln!(out, "{}", line(r));
    }
    let base = &cmp.arms[0].name;
    for a in &cmp.arms[1..] {
        for pi in 0..spec.prompts.len() {
            if let Some(l) = divergence_line(base, a, pi, spec.prompts.len()) {
                let _ = writeln!(out, "{l}");
            }
        }
    }
    for a in &cmp.arms {
        let mem: Vec<String> = a
            .memory
            .iter()
            .map(|c| {
                let rss = c
                    .rss
                    .map(|r| format!(", rss {}", mib(r)))
                    .unwrap_or_default();
                format!("card {} weights {}{rss}", c.index, mib(c.weights))
            })
            .collect();
        let refusals = a
            .expert_refusals
            .map(|r| format!(", expert refusals {r}"))
            .unwrap_or_default();
        let _ = writeln!(out, "{}: {}{refusals}", a.name, mem.join("; "));
    }
    let _ = writeln!(out, "{}", checks_line(run, cmp));
    for a in &cmp.arms {
        for l in &a.latch_lines {
            let _ = writeln!(out, "{} latch: {l}", a.name);
        }
    }
    for w in &cmp.warnings {
        let _ = writeln!(out, "WARNING: {w}");
    }
    out
}

fn checks_line(run: &AbRun, cmp: &Comparison) -> String {
    let c = &cmp.checks;
    format!(
        "checks: prompt tokens {} ({} runs, {} tokens); sampler {}; flags latched {}",
        if c.same_prompt_tokens {
            "identical"
        } else {
            "DIFFER"
        },
        run.runs.len(),
        c.prompt_tokens
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        c.sampler,
        if c.flags_latched {
            "as asked"
        } else {
            "NOT as asked"
        }
    )
}

fn slash(v: &[f64], prec: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.prec$}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// `, load average 10.2 -> 11.0` (the machine's, at the start and the end).
fn load_words(run: &AbRun) -> String {
    match run.load_avg {
        (Some(a), Some(b)) => format!(" (load average {a:.1} -> {b:.1})"),
        _ => String::new(),
    }
}

/// `card 0 weights 235.2 -> 257.0 MiB, engine rss 530.0 -> 555.7 MiB` (+ expert refusals).
fn memory_change(base: &ArmSummary, a: &ArmSummary) -> String {
    let mut parts = Vec::new();
    for (b, x) in base.memory.iter().zip(&a.memory) {
        let mut s = format!(
            "card {} weights {} -> {}",
            b.index,
            mib(b.weights),
            mib(x.weights)
        );
        if x.hc_q8 > 0 {
            let _ = write!(s, " (of which HC Q8_0 copies {})", mib(x.hc_q8));
        }
        if let (Some(rb), Some(rx)) = (b.rss, x.rss) {
            let _ = write!(s, ", engine rss {} -> {}", mib(rb), mib(rx));
        }
        parts.push(s);
    }
    if let (Some(rb), Some(rx)) = (base.expert_refusals, a.expert_refusals) {
        parts.push(format!("expert refusals {rb} -> {rx}"));
    }
    if parts.is_empty() {
        "not reported".into()
    } else {
        parts.join("; ")
    }
}

/// Markdown after the seeds' "Measured" sections. `command` is the command line that ran it.
pub fn markdown(run: &AbRun, cmp: &Comparison, command: &str) -> String {
    let spec = &run.spec;
    let base = &cmp.arms[0];
    let mut md = String::new();
    let names: Vec<&str> = spec.arms.iter().map(|a| a.name.as_str()).collect();
    let model = spec
        .model
        .file_name()
        .map_or("?".into(), |f| f.to_string_lossy().into_owned());
    let arch = run.runs.first().map_or("?", |r| r.loaded.arch.as_str());
    let _ = writeln!(
        md,
        "### A/B: {} on `{model}` ({arch})\n",
        names.join(" vs ")
    );
    let _ = writeln!(
        md,
        "Measured {} UTC on {}{}, {}, `{command}`: {} prompt(s), {} tokens each, {}, speculation {}, \
         {} rounds interleaved ({} ...), a fresh engine process per run, the same binary for every arm.\n",
        run.started,
        run.host,
        load_words(run),
        run.build.describe(),
        spec.prompts.len(),
        spec.n,
        cmp.checks.sampler,
        if spec.spec == 0 { "off".to_string() } else { format!("{} drafts a window", spec.spec) },
        spec.reps,
        names.join(" "),
    );
    for a in &cmp.arms[1..] {
        let _ = writeln!(md, "{} (`{}`) against {}:\n", a.name, a.flags, base.name);
        let _ = writeln!(
            md,
            "- verify window (median per round) {} -> {} ms ({}; every window: {} -> {} ms);",
            slash(&base.round_window_ms, 2),
            slash(&a.round_window_ms, 2),
            pct(a.window_ratio),
            med(&base.window_ms, 2),
            med(&a.window_ms, 2),
        );
        // the full verify windows alone (t = spec + 1): a mix of window sizes moves the median
        let t = spec.spec + 1;
        if let (true, Some(b), Some(x)) = (
            spec.spec > 0,
            base.window_ms_by_t.get(&t),
            a.window_ms_by_t.get(&t),
        ) {
            let _ = writeln!(
                md,
                "- full verify windows (t = {t}) {:.2} -> {:.2} ms ({}; {} and {} windows);",
                b.median,
                x.median,
                pct(crate::ab::stats::ratio(b.median, x.median)),
                b.n,
                x.n
            );
        }
        let ratio = match (base.decode_tps, a.decode_tps) {
            (Some(b), Some(x)) => pct(crate::ab::stats::ratio(b.median, x.median)),
            _ => "-".into(),
        };
        let _ = writeln!(
            md,
            "- decode (median per round) {} -> {} tok/s (median {} -> {}, {ratio}){};",
            slash(&base.round_decode_tps, 1),
            slash(&a.round_decode_tps, 1),
            med(&base.decode_tps, 1),
            med(&a.decode_tps, 1),
            if spec.spec > 0 {
                format!(
                    "; drafts accepted {} -> {}, {:.2} -> {:.2} tokens a window",
                    drafts(base),
                    drafts(a),
                    base.tokens_per_window,
                    a.tokens_per_window
                )
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            md,
            "- prompt reading {} -> {} tok/s;",
            med(&base.prefill_tps, 1),
            med(&a.prefill_tps, 1)
        );
        if let (Some(b), Some(x)) = (&base.nll, &a.nll) {
            let _ = writeln!(
                md,
                "- quality: teacher-forced NLL of {} tokens through the decode windows, same targets: {:.4} -> {:.4};",
                x.tokens, b.mean, x.mean
            );
            if let Some(k) = &x.kld {
                let _ = writeln!(
                    md,
                    "- KL divergence from {}'s logits on that text (`strata nll --kld`, the second half of each chunk): mean {:.6} ± {:.6}, same top-1 {:.2}%;",
                    base.name, k.mean, k.err, k.same_top_p
                );
            }
        }
        let out: Vec<String> = (0..spec.prompts.len())
            .map(|pi| {
                divergence_line(&base.name, a, pi, spec.prompts.len())
                    .unwrap_or_else(|| identity_short(&a.outputs[pi]))
            })
            .collect();
        let expect = if a.bitwise_expected {
            "bitwise flags: identical expected"
        } else {
            "not bitwise: may differ"
        };
        let _ = writeln!(md, "- output ({expect}): {};", out.join("; "));
        let _ = writeln!(md, "- memory per card: {}.\n", memory_change(base, a));
    }
    let _ = writeln!(md, "| arm | flags | window ms median (q1-q3) | vs {} | per round | decode tok/s | prompt tok/s | tokens/window | drafts accepted/proposed | NLL | output vs {} |", base.name, base.name);
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, a) in cmp.arms.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} |",
            a.name,
            a.flags,
            window_cell(a),
            if i == 0 {
                "-".into()
            } else {
                pct(a.window_ratio)
            },
            slash(&a.round_window_ms, 2),
            med(&a.decode_tps, 1),
            med(&a.prefill_tps, 1),
            a.tokens_per_window,
            drafts(a),
            nll(a),
            outputs_short(a)
        );
    }
    let _ = writeln!(md, "\n{}.", checks_line(run, cmp));
    for a in &cmp.arms {
        for l in &a.latch_lines {
            let _ = writeln!(md, "\n{} latch: `{l}`", a.name);
        }
    }
    for w in &cmp.warnings {
        let _ = writeln!(md, "\n**Warning:** {w}");
    }
    md
}

/// Everything: the spec, the build, the comparison and the raw runs.
pub fn json(run: &AbRun, cmp: &Comparison, command: &str) -> serde_json::Value {
    json!({
        "command": command,
        "started": run.started,
        "host": run.host,
        "load_avg": [run.load_avg.0, run.load_avg.1],
        "build": run.build,
        "spec": run.spec,
        "wall_s": run.wall_s,
        "comparison": cmp,
        "runs": run.runs,
    })
}
