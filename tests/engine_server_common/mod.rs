//! Shared by the `strata engine` protocol tests (engine_server*.rs): the engine as a real child
//! process over its pipes, the requests they send and the events they wait for.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};
use strata::protocol::*;

/// Longest a load that keeps reporting progress may take (cold kernel compiles included).
pub const LOAD_CAP_SECS: u64 = 1800;

pub const BIN: &str = env!("CARGO_BIN_EXE_strata");

pub const FLAGS: &[&str] = &[
    "STRATA_HC_Q8",
    "STRATA_GR_FUSED",
    "STRATA_MMVQ_KREG",
    "STRATA_VNNI",
];

pub fn model() -> String {
    strata::paths::model_path(strata::paths::SMOLLM2_ENV)
        .unwrap_or_else(|e| panic!("SmolLM2 model missing (run `make setup`): {e}"))
        .to_string_lossy()
        .into_owned()
}

pub struct Engine {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub events: Receiver<Result<Event, String>>,
    /// Every event seen, in order (printed when a wait fails).
    pub log: Vec<String>,
}

impl Engine {
    pub fn start(flags_on: &[&str]) -> Engine {
        let mut cmd = Command::new(BIN);
        cmd.arg("engine")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for f in FLAGS {
            if flags_on.contains(f) {
                cmd.env(f, "1");
            } else {
                cmd.env_remove(f);
            }
        }
        let mut child = cmd.spawn().expect("spawning strata engine");
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Every stdout line must be a protocol event; anything else fails the test.
                let ev = decode_event(&line).map_err(|e| format!("{e}"));
                if tx.send(ev).is_err() {
                    break;
                }
            }
        });
        Engine {
            stdin: child.stdin.take(),
            child,
            events,
            log: Vec::new(),
        }
    }

    pub fn send_line(&mut self, line: &str) {
        let w = self.stdin.as_mut().expect("stdin still open");
        w.write_all(line.as_bytes()).expect("writing to the engine");
        if !line.ends_with('\n') {
            w.write_all(b"\n").expect("writing to the engine");
        }
        w.flush().expect("flushing to the engine");
    }

    pub fn send(&mut self, r: &Request) {
        self.send_line(&r.to_line());
    }

    /// Events up to and including the first that `pick` accepts, within `secs` of the call or of
    /// the engine's last progress report: a load reports every ~2 s while it works, and a first
    /// load compiles the kernels, which takes minutes on a slow-compiling CPU device (an AVX2
    /// machine with an empty kernel cache: docs/performance.md, session 5). A load that keeps
    /// reporting is given up to LOAD_CAP_SECS in all.
    pub fn until<T>(
        &mut self,
        what: &str,
        secs: u64,
        mut pick: impl FnMut(&Event) -> Option<T>,
    ) -> (T, Vec<Event>) {
        let start = Instant::now();
        let mut deadline = start + Duration::from_secs(secs);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = match self.events.recv_timeout(left) {
                Ok(Ok(ev)) => ev,
                Ok(Err(bad)) => panic!("a stdout line is not a protocol event: {bad}"),
                Err(_) => panic!(
                    "no {what} within {secs} s of the last event that extends the wait \
                     (engine gone or silent); events so far:\n{}",
                    self.log.join("\n")
                ),
            };
            self.log.push(format!("{ev:?}"));
            if matches!(ev, Event::Progress(_)) {
                deadline = (Instant::now() + Duration::from_secs(secs))
                    .min(start + Duration::from_secs(LOAD_CAP_SECS));
            }
            if let Some(t) = pick(&ev) {
                seen.push(ev);
                return (t, seen);
            }
            seen.push(ev);
        }
    }

    pub fn wait_exit(&mut self, secs: u64) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(st) = self.child.try_wait().expect("waiting for the engine") {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the engine did not exit within {secs} s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn hello(e: &mut Engine) -> Hello {
    e.until("hello", 30, |ev| match ev {
        Event::Hello(h) => Some(h.clone()),
        _ => None,
    })
    .0
}

pub fn greedy(max_tokens: u32) -> Sampling {
    // repeat_penalty 1 = `strata run`'s default, so both decode the same distribution.
    Sampling {
        temperature: 0.0,
        repeat_penalty: 1.0,
        seed: Some(1),
        max_tokens,
        ..Sampling::default()
    }
}

pub fn generate(id: u64, prompt: &str, max_tokens: u32, spec: Option<u32>) -> Request {
    Request::Generate(Generate {
        id,
        messages: vec![ChatMessage {
            role: Role::User,
            content: prompt.into(),
        }],
        sampling: greedy(max_tokens),
        spec,
        parse_special: false,
    })
}

pub fn text_of(events: &[Event], id: u64) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Token(t) if t.id == id => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

pub fn turn_of(e: &mut Engine, id: u64, secs: u64) -> (Turn, Vec<Event>) {
    e.until(&format!("turn {id}"), secs, |ev| match ev {
        Event::Turn(t) if t.id == id => Some(t.clone()),
        _ => None,
    })
}

pub const PROMPT: &str = "Name three colours.";
pub const N: u32 = 24;
pub const CTX: u32 = 512;

/// A `load` of the SmolLM2 model with greedy defaults, waited for.
pub fn load_smollm2(e: &mut Engine) {
    load_smollm2_on(e, DeviceSplit::default(), "loaded");
}

/// `load_smollm2` with the layers placed by `devices`; `what` names the wait.
pub fn load_smollm2_on(e: &mut Engine, devices: DeviceSplit, what: &str) {
    e.send(&Request::Load(Load {
        model: model(),
        ctx: CTX,
        devices,
        spec: 0,
        sampling: greedy(N),
    }));
    e.until(what, 180, |ev| match ev {
        Event::Loaded(_) => Some(()),
        Event::Error(err) => panic!("{what}: load failed: {}", err.message),
        _ => None,
    });
}

/// The engine's exit status and the time from the shutdown (or EOF) to the exit.
pub fn stop_and_wait(e: &mut Engine, eof: bool) -> (std::process::ExitStatus, Duration) {
    let t0 = Instant::now();
    if eof {
        drop(e.stdin.take());
    } else {
        e.send(&Request::Shutdown {});
    }
    let st = e.wait_exit(30);
    (st, t0.elapsed())
}
