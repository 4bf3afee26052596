//! `cargo bench --bench restart [-- --model PATH] [-n N] [--cold]`: the engine restart the TUI
//! does on a kernel-flag toggle (docs/protocol.md, "Flag change"): `shutdown` to the running
//! `strata engine`, wait for its exit, spawn a new one, `load`, wait for `loaded`. Timed from the
//! shutdown to `loaded`, median of N (5), the kernel binary cache off (`STRATA_KERNEL_CACHE=0`:
//! every module through the SYCL compiler with the runtime's warm disk cache, as before the
//! binary cache) and on, side by side in one run; with the load stages from the engine's
//! `progress` events. Then, in this process, each module the engine loads: from the binary
//! cache vs a source build on the warm runtime cache. `--cold`: both caches emptied (temporary
//! directories), the first start compiles and stores, the second is warm.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_strata");

struct Engine {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// One start: milliseconds from the request that started it to each stage, `loaded`, and the
/// engine's own `load_ms`.
#[derive(Default, Clone)]
struct Start {
    total_ms: f64,
    /// of which the old engine's exit (restarts only)
    exit_ms: f64,
    load_ms: f64,
    stages: Vec<(String, f64)>,
}

impl Start {
    /// ms spent in `stage` (from its progress event to the next stage's).
    fn stage_ms(&self, stage: &str) -> f64 {
        let i = self.stages.iter().position(|(s, _)| s == stage);
        match i {
            Some(i) => {
                let end = self.stages.get(i + 1).map_or(self.total_ms, |(_, t)| *t);
                end - self.stages[i].1
            }
            None => f64::NAN,
        }
    }
}

fn spawn(envs: &[(&str, &str)]) -> Engine {
    let mut cmd = Command::new(EXE);
    cmd.arg("engine")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // (its progress lines; a failed load panics here with the engine's error event)
        .stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn strata engine");
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    Engine {
        child,
        stdin,
        stdout,
    }
}

impl Engine {
    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write to the engine");
        self.stdin.flush().expect("flush to the engine");
    }

    fn next(&mut self) -> Value {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read the engine");
        assert!(n > 0, "the engine closed its output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad event line {line:?}: {e}"))
    }

    /// Sends `load` and reads until `loaded`; times relative to `t0`.
    fn load(&mut self, model: &Path, t0: Instant) -> Start {
        self.send(serde_json::json!({
            "type": "load", "model": model, "ctx": 0,
            "devices": {"split_cpu": null}, "spec": 0, "sampling": {}
        }));
        let mut start = Start::default();
        loop {
            let ev = self.next();
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            match ev["type"].as_str() {
                Some("progress") => {
                    let stage = ev["stage"].as_str().unwrap_or("?").to_string();
                    if start.stages.last().map(|(s, _)| s) != Some(&stage) {
                        start.stages.push((stage, ms));
                    }
                }
                Some("loaded") => {
                    start.total_ms = ms;
                    start.load_ms = ev["load_ms"].as_f64().unwrap_or(f64::NAN);
                    return start;
                }
                Some("error") => panic!("load failed: {ev}"),
                _ => {}
            }
        }
    }

    /// `shutdown`, then waits for the exit (the TUI kills after 3 s).
    fn shutdown(mut self) {
        self.send(serde_json::json!({"type": "shutdown"}));
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A fresh engine, loaded (not timed).
fn started(model: &Path, envs: &[(&str, &str)]) -> (Engine, Start) {
    let t0 = Instant::now();
    let mut e = spawn(envs);
    let _hello = e.next();
    let s = e.load(model, t0);
    (e, s)
}

/// `n` toggle restarts in a row: shutdown of the running engine + spawn + load to `loaded`.
fn restarts(model: &Path, envs: &[(&str, &str)], n: usize) -> Vec<Start> {
    let (mut running, _) = started(model, envs);
    let mut out = Vec::new();
    for _ in 0..n {
        let t0 = Instant::now();
        running.shutdown();
        let exit_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut e = spawn(envs);
        let _hello = e.next();
        out.push(Start {
            exit_ms,
            ..e.load(model, t0)
        });
        running = e;
    }
    running.shutdown();
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn row(name: &str, starts: &[Start]) {
    let m = |f: &dyn Fn(&Start) -> f64| median(starts.iter().map(f).collect());
    let all: Vec<String> = starts
        .iter()
        .map(|s| format!("{:.0}", s.total_ms))
        .collect();
    println!(
        "| {name} | {:.0} ({}) | {:.0} | {:.0} | {:.0} | {:.0} |",
        m(&|s| s.total_ms),
        all.join(" / "),
        m(&|s| s.exit_ms),
        m(&|s| s.load_ms),
        m(&|s| s.stage_ms("weights+kernels")),
        m(&|s| s.stage_ms("warmup")),
    );
}

/// In this process: the engine's load, then each module it loaded built again from source
/// (the runtime's warm disk cache) for the comparison.
fn modules(model: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use strata::sycl::{build_activity, kernels, Card};
    let g = strata::gguf::Gguf::open(model)?;
    let card = Card::cpu()?;
    let t = Instant::now();
    let opts = strata::model::EngineOptions::default();
    let _engine = strata::model::Engine::from_gguf(&g, card.clone(), &opts)?;
    let load = t.elapsed();
    let loads = build_activity::loads();
    let cache = strata::sycl::BinaryCache::process()
        .map_or("off".to_string(), |c| c.dir().display().to_string());
    println!(
        "\nmodules of one engine load in this process ({:.0} ms in all; binary cache {cache}); \
         load {}",
        load.as_secs_f64() * 1e3,
        loadavg()
    );
    println!("| module | loaded ms | from | source build ms (warm runtime cache) |");
    println!("| --- | ---: | --- | ---: |");
    let (mut sum_loaded, mut sum_source) = (0.0, 0.0);
    for l in &loads {
        let src = kernels::by_name(&l.source).ok_or("unknown source")?;
        let opts: Vec<&str> = l.options.iter().map(String::as_str).collect();
        let m = card.context.build(src.name, src.text, &opts)?;
        let (a, b) = (
            l.elapsed.as_secs_f64() * 1e3,
            m.build_time().as_secs_f64() * 1e3,
        );
        sum_loaded += a;
        sum_source += b;
        println!(
            "| {} | {a:.1} | {} | {b:.0} |",
            l.label,
            if l.from_binary { "binary" } else { "source" }
        );
    }
    println!(
        "| {} modules | {sum_loaded:.0} | | {sum_source:.0} |",
        loads.len()
    );
    Ok(())
}

/// Both caches emptied: a cold start, then a warm one.
fn cold(model: &Path) {
    let base = std::env::temp_dir().join(format!("strata-restart-{}", std::process::id()));
    let (sycl, kc) = (base.join("sycl-cache"), base.join("kernel-cache"));
    std::fs::create_dir_all(&sycl).expect("temp dir");
    let (s, k) = (sycl.display().to_string(), kc.display().to_string());
    let envs = [
        ("SYCL_CACHE_DIR", s.as_str()),
        ("STRATA_KERNEL_CACHE_DIR", k.as_str()),
    ];
    println!("\ncold caches ({}), load {}", base.display(), loadavg());
    for which in ["1st start (cold)", "2nd start"] {
        let (e, s) = started(model, &envs);
        e.shutdown();
        let entries = std::fs::read_dir(&kc).map_or(0, |d| d.count());
        println!(
            "{which}: loaded after {:.0} ms (weights+kernels {:.0} ms); {entries} binary cache entries",
            s.total_ms,
            s.stage_ms("weights+kernels")
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    strata::sycl::runtime::init();
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let model: PathBuf = match arg("--model") {
        Some(m) => m.into(),
        None => strata::paths::model_path("STRATA_MODEL_SMOLLM2")?,
    };
    let n: usize = arg("-n").map_or(Ok(5), |v| v.parse())?;
    if n == 0 {
        return Err("-n must be at least 1".into());
    }
    println!(
        "toggle restart of `strata engine` (shutdown -> spawn -> load -> loaded), {}, median of {n} \
         (each run in brackets); load average {}, {} CPUs",
        model.file_name().map_or("?".into(), |f| f.to_string_lossy()),
        loadavg(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| kernels | restart ms | old engine's exit ms | load_ms | weights+kernels ms | warmup ms |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    row(
        "SYCL compiler + runtime disk cache (STRATA_KERNEL_CACHE=0, before)",
        &restarts(&model, &[("STRATA_KERNEL_CACHE", "0")], n),
    );
    row("kernel binary cache (after)", &restarts(&model, &[], n));
    println!("load average after: {}", loadavg());
    modules(&model)?;
    if args.iter().any(|a| a == "--cold") {
        cold(&model);
    }
    Ok(())
}
