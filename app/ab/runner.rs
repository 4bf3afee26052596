//! Runs an A/B: for each of R rounds, each arm in turn (A B A B ...) in a fresh engine process
//! started with its flags (`strata engine` through the engine client, app/client.rs), the model
//! loaded, every prompt generated as its own conversation, the token ids asked for (`ids`), the
//! engine shut down. A fresh process per run: no run reuses another's KV cache, and drift on the
//! machine hits every arm alike. With an NLL spec, `strata nll --windows` runs once per arm with
//! the arm's environment (the same binary, the same targets).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use strata::protocol::{
    ChatMessage, DeviceSplit, Devices, Event, Generate, Load, Loaded, Request, Role, Turn, Window,
};
use tokio::sync::mpsc;

use super::spec::{Arm, NllSpec, RunSpec};
use crate::client::{Backoff, ClientEvent, EngineClient, Spawn};

/// The binary every arm ran: the same file for all of them (the engine is `strata engine` of
/// the running executable).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuildId {
    pub program: String,
    pub version: String,
    /// sha256 of the executable file, first 16 hex digits.
    pub sha256: String,
    pub bytes: u64,
    /// `git describe --always --dirty` of the tree the program sits in, when it is in one.
    pub git: Option<String>,
}

impl BuildId {
    pub fn of(program: &Path) -> Result<BuildId> {
        let data = std::fs::read(program)
            .with_context(|| format!("reading {} for its build id", program.display()))?;
        let sha = strata::synth::sha256_hex(&data);
        // (for /proc/self/exe, the path it was started from, for the name and the git tree)
        let shown = match program.starts_with("/proc") {
            true => std::env::current_exe().unwrap_or_else(|_| program.to_path_buf()),
            false => program.to_path_buf(),
        };
        let dir = shown.parent().unwrap_or(Path::new("."));
        let git = std::process::Command::new("git")
            .args(["describe", "--always", "--dirty", "--abbrev=7"])
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        Ok(BuildId {
            program: shown.display().to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            sha256: sha[..16].to_string(),
            bytes: data.len() as u64,
            git,
        })
    }

    /// `0.1.0 sha256 1a2b... (git abc1234-dirty)`.
    pub fn describe(&self) -> String {
        let git = self
            .git
            .as_deref()
            .map(|g| format!(", git {g}"))
            .unwrap_or_default();
        format!("strata {} (sha256 {}{git})", self.version, self.sha256)
    }
}

/// One generation of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptRun {
    /// Index into `RunSpec::prompts`.
    pub prompt: usize,
    pub text: String,
    /// The prompt as the engine ran it (template applied).
    pub prompt_ids: Vec<u32>,
    pub reply_ids: Vec<u32>,
    pub windows: Vec<Window>,
    pub turn: Turn,
}

/// One arm in one round: one engine process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmRun {
    /// Index into `RunSpec::arms`.
    pub arm: usize,
    pub rep: u32,
    pub pid: u32,
    /// The toggles as the engine's `hello` reported them latched.
    pub hello_flags: BTreeMap<String, bool>,
    /// The engine's stderr lines naming a STRATA_ variable (latch lines, warnings about values).
    pub latch: Vec<String>,
    pub loaded: Loaded,
    /// Memory after the last turn (the `devices` that follows it).
    pub devices: Option<Devices>,
    pub prompts: Vec<PromptRun>,
}

/// `strata nll --windows` of one arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NllResult {
    pub mean: f64,
    pub tokens: u64,
    /// The summary line as printed.
    pub line: String,
    /// With `NllSpec::kld`, against the base arm's logits (None for the base itself).
    pub kld: Option<KldResult>,
}

/// `strata nll --kld BASE` of one arm: its `KLD summary:` line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KldResult {
    pub mean: f64,
    pub err: f64,
    /// Positions whose top-1 token is the base's, percent.
    pub same_top_p: f64,
    pub line: String,
}

/// How an arm takes part in the KLD: it writes the base file, or reads it.
#[derive(Debug, Clone, Copy)]
pub enum KldRole<'a> {
    Base(&'a Path),
    Against(&'a Path),
}

/// "KLD summary: mean 0.003127 ± 0.000076, same top p 96.080 %, RMS Δp ..., N positions".
fn parse_kld(stdout: &str) -> Option<KldResult> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("KLD summary: "))?;
    let rest = line.strip_prefix("KLD summary: mean ")?;
    let (mean, rest) = rest.split_once(" ± ")?;
    let (err, rest) = rest.split_once(", same top p ")?;
    let (top, _) = rest.split_once(" %")?;
    Some(KldResult {
        mean: mean.trim().parse().ok()?,
        err: err.trim().parse().ok()?,
        same_top_p: top.trim().parse().ok()?,
        line: line.trim().to_string(),
    })
}

/// Everything measured; `compare::compare` reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbRun {
    pub spec: RunSpec,
    pub build: BuildId,
    /// UTC, `YYYY-MM-DD HH:MM`.
    pub started: String,
    pub host: String,
    /// The machine's 1-minute load average when the A/B started and when it ended (None where
    /// `/proc/loadavg` cannot be read): on a shared machine, what the timings ran against.
    pub load_avg: (Option<f64>, Option<f64>),
    /// In the order they ran: rep 0 arm 0, rep 0 arm 1, ..., rep 1 arm 0, ...
    pub runs: Vec<ArmRun>,
    /// Per arm, when the spec asks for it.
    pub nll: Vec<Option<NllResult>>,
    pub wall_s: f64,
}

/// What the runner reports as it goes (a terminal's progress lines, a pane's live view).
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Starting {
        rep: u32,
        arm: String,
    },
    Loaded {
        rep: u32,
        arm: String,
        load_ms: f64,
    },
    Token {
        rep: u32,
        arm: String,
        prompt: usize,
        text: String,
    },
    Turn {
        rep: u32,
        arm: String,
        prompt: usize,
        turn: Turn,
    },
    Nll {
        arm: String,
        result: NllResult,
    },
}

/// How long one event may take to come (a load sends a heartbeat every 2 s).
const EVENT_TIMEOUT: Duration = Duration::from_secs(300);

/// UTC now as `YYYY-MM-DD HH:MM` (civil-from-days, no calendar crate).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// The 1-minute load average (`/proc/loadavg`).
pub fn load_avg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn host() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores, OpenCL CPU device")
}

struct Engine {
    client: EngineClient,
    events: mpsc::UnboundedReceiver<ClientEvent>,
    stderr: mpsc::UnboundedReceiver<String>,
    latch: Vec<String>,
}

impl Engine {
    fn start(program: &Path, arm: &Arm) -> Engine {
        let (tx, events) = mpsc::unbounded_channel();
        let (etx, stderr) = mpsc::unbounded_channel();
        let spawn = Spawn {
            program: program.to_path_buf(),
            args: vec!["engine".into()],
            flags: arm.toggles(),
            env: arm.env(),
            stderr: Some(etx),
            hang_timeout: Duration::from_secs(120),
            // no restarts: an engine that dies ends the A/B with its reason
            backoff: Backoff::new(Duration::from_millis(100), 0),
        };
        Engine {
            client: EngineClient::start(spawn, tx),
            events,
            stderr,
            latch: Vec::new(),
        }
    }

    fn drain_stderr(&mut self) {
        while let Ok(l) = self.stderr.try_recv() {
            if l.contains("STRATA_") {
                self.latch.push(l);
            }
        }
    }

    /// The next protocol event; a death, a bad line or silence is an error.
    async fn next(&mut self, what: &str) -> Result<Event> {
        loop {
            let ev = tokio::time::timeout(EVENT_TIMEOUT, self.events.recv())
                .await
                .map_err(|_| anyhow!("no answer from the engine for {EVENT_TIMEOUT:?} ({what})"))?
                .ok_or_else(|| anyhow!("the engine client stopped ({what})"))?;
            self.drain_stderr();
            match ev {
                ClientEvent::Engine(e) => return Ok(e),
                ClientEvent::Died { reason, .. } => bail!("the engine died ({what}): {reason}"),
                ClientEvent::GaveUp { .. } => bail!("the engine could not be started ({what})"),
                ClientEvent::BadLine(l) => bail!("the engine wrote a bad line ({what}): {l}"),
                ClientEvent::Dropped(_) => bail!("no engine to send to ({what})"),
                ClientEvent::Spawned { .. }
                | ClientEvent::Restarting { .. }
                | ClientEvent::Restarted { .. } => {}
            }
        }
    }
}

fn messages(spec: &RunSpec, prompt: &str) -> Vec<ChatMessage> {
    let mut m = Vec::new();
    if !spec.system.is_empty() {
        m.push(ChatMessage {
            role: Role::System,
            content: spec.system.clone(),
        });
    }
    m.push(ChatMessage {
        role: Role::User,
        content: prompt.to_string(),
    });
    m
}

/// One arm, one round: start its engine, load, every prompt, `ids` after each, shut down.
pub async fn run_arm(
    spec: &RunSpec,
    program: &Path,
    arm_index: usize,
    rep: u32,
    progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<ArmRun> {
    let arm = &spec.arms[arm_index];
    let name = arm.name.clone();
    progress(&Progress::Starting {
        rep,
        arm: name.clone(),
    });
    let mut e = Engine::start(program, arm);
    let result = async {
        let hello = loop {
            if let Event::Hello(h) = e.next("hello").await? {
                break h;
            }
        };
        let mut sampling = spec.sampling.clone();
        sampling.max_tokens = spec.n;
        e.client.send(Request::Load(Load {
            model: spec.model.display().to_string(),
            ctx: spec.ctx,
            devices: DeviceSplit {
                split_cpu: spec.split_cpu,
            },
            spec: spec.spec,
            sampling: sampling.clone(),
        }));
        let loaded = loop {
            match e.next("load").await? {
                Event::Loaded(l) => break l,
                Event::Error(err) => bail!("load {}: {}", spec.model.display(), err.message),
                _ => {}
            }
        };
        progress(&Progress::Loaded {
            rep,
            arm: name.clone(),
            load_ms: loaded.load_ms,
        });
        let mut prompts = Vec::new();
        for (pi, prompt) in spec.prompts.iter().enumerate() {
            let id = pi as u64 + 1;
            e.client.send(Request::Generate(Generate {
                id,
                messages: messages(spec, prompt),
                sampling: sampling.clone(),
                spec: Some(spec.spec),
                parse_special: false,
            }));
            let (mut text, mut windows) = (String::new(), Vec::new());
            let turn = loop {
                match e.next("generate").await? {
                    Event::Token(t) if t.id == id => {
                        progress(&Progress::Token {
                            rep,
                            arm: name.clone(),
                            prompt: pi,
                            text: t.text.clone(),
                        });
                        text.push_str(&t.text);
                    }
                    Event::Window(w) if w.id == id => windows.push(w),
                    Event::Error(err) if err.id == Some(id) || err.id.is_none() => {
                        bail!("generate (prompt {}): {}", pi + 1, err.message)
                    }
                    Event::Turn(t) if t.id == id => break t,
                    _ => {}
                }
            };
            e.client.send(Request::Ids { id });
            let ids = loop {
                match e.next("ids").await? {
                    Event::Ids(i) if i.id == id => break i,
                    Event::Error(err) if err.id == Some(id) => bail!(
                        "ids: {} (an engine without the `ids` request? rebuild strata)",
                        err.message
                    ),
                    _ => {}
                }
            };
            progress(&Progress::Turn {
                rep,
                arm: name.clone(),
                prompt: pi,
                turn: turn.clone(),
            });
            prompts.push(PromptRun {
                prompt: pi,
                text,
                prompt_ids: ids.prompt,
                reply_ids: ids.reply,
                windows,
                turn,
            });
        }
        // memory after the last turn (host rss read afresh)
        e.client.send(Request::Stats {});
        let devices = loop {
            if let Event::Devices(d) = e.next("stats").await? {
                break Some(d);
            }
        };
        Ok(ArmRun {
            arm: arm_index,
            rep,
            pid: hello.pid,
            hello_flags: hello.flags,
            latch: Vec::new(),
            loaded,
            devices,
            prompts,
        })
    }
    .await;
    e.client.shutdown().await;
    e.drain_stderr();
    let mut run = result.with_context(|| format!("arm {name}, round {}", rep + 1))?;
    run.latch = std::mem::take(&mut e.latch);
    Ok(run)
}

/// `strata nll -m MODEL -f FILE --ctx C --windows W [--kld-base F | --kld F]` with the arm's
/// environment: the summary line on its stdout.
async fn nll_child(
    program: &Path,
    model: &Path,
    nll: &NllSpec,
    arm: &Arm,
    kld: Option<KldRole<'_>>,
) -> Result<String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("nll")
        .arg("-m")
        .arg(model)
        .arg("-f")
        .arg(&nll.file)
        .args([
            "--ctx",
            &nll.ctx.to_string(),
            "--windows",
            &nll.windows.to_string(),
        ]);
    match kld {
        Some(KldRole::Base(f)) => {
            cmd.arg("--kld-base").arg(f);
        }
        Some(KldRole::Against(f)) => {
            cmd.arg("--kld").arg(f);
        }
        None => {}
    }
    for (k, on) in arm.toggles() {
        if on {
            cmd.env(k, "1");
        } else {
            cmd.env_remove(k);
        }
    }
    cmd.envs(arm.env());
    let out = cmd
        .output()
        .await
        .with_context(|| format!("running {} nll", program.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "strata nll for arm {} failed ({}): {}",
            arm.name,
            out.status,
            err.lines().last().unwrap_or("")
        );
    }
    Ok(stdout)
}

/// The arm's NLL through the decode windows, and with a KLD role its KL divergence from the
/// base (a second child: the KLD scores llama-perplexity's second halves, the NLL every token).
pub async fn run_nll(
    program: &Path,
    model: &Path,
    nll: &NllSpec,
    arm: &Arm,
    kld: Option<KldRole<'_>>,
) -> Result<NllResult> {
    let stdout = nll_child(program, model, nll, arm, None).await?;
    let mut r =
        parse_nll(&stdout).ok_or_else(|| anyhow!("strata nll printed no mean NLL: {stdout}"))?;
    if let Some(role) = kld {
        let out = nll_child(program, model, nll, arm, Some(role)).await?;
        if let KldRole::Against(_) = role {
            r.kld = Some(
                parse_kld(&out)
                    .ok_or_else(|| anyhow!("strata nll --kld printed no KLD summary"))?,
            );
        }
    }
    Ok(r)
}

/// The summary line of `strata nll`: "FILE: N tokens scored in ...: mean NLL X, perplexity ...".
fn parse_nll(stdout: &str) -> Option<NllResult> {
    let line = stdout.lines().rev().find(|l| l.contains("mean NLL "))?;
    let mean = line
        .split("mean NLL ")
        .nth(1)?
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()?;
    let tokens = line.split(": ").nth(1)?.split(' ').next()?.parse().ok()?;
    Some(NllResult {
        mean,
        tokens,
        line: line.trim().to_string(),
        kld: None,
    })
}

/// The whole A/B: R rounds of every arm in order, then the NLL per arm.
pub async fn run(
    spec: &RunSpec,
    program: &Path,
    progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<AbRun> {
    spec.validate()?;
    let t0 = Instant::now();
    let build = BuildId::of(program)?;
    let started = utc_now();
    let load0 = load_avg();
    let mut runs = Vec::new();
    for rep in 0..spec.reps {
        for arm in 0..spec.arms.len() {
            runs.push(run_arm(spec, program, arm, rep, progress).await?);
        }
    }
    let mut nll = Vec::new();
    // the base arm's logits for the KLD (llama-perplexity's file; removed at the end)
    let kld_file = std::env::temp_dir().join(format!("strata-ab-{}.kld", std::process::id()));
    for (i, arm) in spec.arms.iter().enumerate() {
        match &spec.nll {
            Some(n) => {
                let role = match (n.kld, i) {
                    (false, _) => None,
                    (true, 0) => Some(KldRole::Base(&kld_file)),
                    (true, _) => Some(KldRole::Against(&kld_file)),
                };
                let r = run_nll(program, &spec.model, n, arm, role).await;
                if r.is_err() || i + 1 == spec.arms.len() {
                    // (a file that was never written is nothing to remove)
                    let _ = std::fs::remove_file(&kld_file);
                }
                let r = r?;
                progress(&Progress::Nll {
                    arm: arm.name.clone(),
                    result: r.clone(),
                });
                nll.push(Some(r));
            }
            None => nll.push(None),
        }
    }
    Ok(AbRun {
        spec: spec.clone(),
        build,
        started,
        host: host(),
        load_avg: (load0, load_avg()),
        runs,
        nll,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

/// The strata executable to run the arms' engines with: this process's own file. On Linux that
/// is `/proc/self/exe`, which stays the running binary even when a build replaces the file at
/// its path during the A/B (cargo unlinks and relinks): every arm runs the same binary, the one
/// the build id was taken of. Elsewhere, the path it was started from.
pub fn this_program() -> Result<PathBuf> {
    let proc = PathBuf::from("/proc/self/exe");
    if proc.exists() {
        return Ok(proc);
    }
    std::env::current_exe().map_err(|e| anyhow!("cannot find the strata executable: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nll_summary_line_is_read() {
        let out = "assets/nll_sample.txt: 1022 tokens scored in 2 chunks of 512 through windows of 5: mean NLL 3.1397, perplexity 23.10 (4.2 s)\n";
        let r = parse_nll(out).unwrap();
        assert_eq!((r.mean, r.tokens), (3.1397, 1022));
        assert!(parse_nll("nothing here").is_none());
        let k = parse_kld("Same top p: 96.080 ± 0.610 %\nKLD summary: mean 0.003127 ± 0.000076, same top p 96.080 %, RMS Δp 1.140 %, max 0.023500, 99.0% 0.012200, median 0.002584, 1020 positions\n").unwrap();
        assert_eq!((k.mean, k.err, k.same_top_p), (0.003127, 0.000076, 96.08));
        assert!(parse_kld("KLD summary: nonsense").is_none());
    }

    #[test]
    fn utc_date_has_its_shape() {
        let d = utc_now();
        assert_eq!(d.len(), 16, "{d}");
        assert!(
            d.starts_with("20") && &d[4..5] == "-" && &d[10..11] == " ",
            "{d}"
        );
    }
}
