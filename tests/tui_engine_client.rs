//! The TUI's engine client (`app/client.rs`, included below) against the real `strata engine`
//! process and the real SmolLM2 model: hello/flags, load, streaming, cancel, death + restart with
//! the last load, a flag restart with its timing, clean shutdown.
//!
//! These need the engine (`strata engine`, issue 8's engine side). Until it exists they fail with
//! "the engine died before ..." — that is the intended signal, not a flake.

#[allow(dead_code)]
#[path = "../app/client.rs"]
mod client;

use std::collections::BTreeMap;
use std::time::Duration;

use client::{Backoff, ClientEvent, EngineClient, Spawn};
use strata::protocol::*;
use tokio::sync::mpsc::UnboundedReceiver;

fn model() -> String {
    strata::paths::model_path(strata::paths::SMOLLM2_ENV)
        .unwrap_or_else(|e| panic!("SmolLM2 model missing: {e}"))
        .to_string_lossy()
        .into_owned()
}

fn flags(on: &[&str]) -> BTreeMap<String, bool> {
    [
        "STRATA_HC_Q8",
        "STRATA_GR_FUSED",
        "STRATA_MMVQ_KREG",
        "STRATA_VNNI",
    ]
    .iter()
    .map(|n| (n.to_string(), on.contains(n)))
    .collect()
}

fn spawn(on: &[&str]) -> Spawn {
    Spawn {
        program: env!("CARGO_BIN_EXE_strata").into(),
        args: vec!["engine".into()],
        flags: flags(on),
        env: Default::default(),
        stderr: None,
        hang_timeout: Duration::from_secs(60),
        backoff: Backoff::new(Duration::from_millis(200), 3),
    }
}

fn load_req() -> Load {
    Load {
        model: model(),
        ctx: 512,
        devices: DeviceSplit::default(),
        spec: 0,
        sampling: Sampling {
            temperature: 0.0,
            seed: Some(1),
            ..Sampling::default()
        },
    }
}

fn generate(id: u64, prompt: &str, max_tokens: u32) -> Request {
    Request::Generate(Generate {
        id,
        messages: vec![ChatMessage {
            role: Role::User,
            content: prompt.into(),
        }],
        sampling: Sampling {
            temperature: 0.0,
            seed: Some(1),
            max_tokens,
            ..Sampling::default()
        },
        spec: None,
        parse_special: false,
    })
}

/// Waits for the first event `pick` accepts; every event seen is returned too. A death while
/// waiting (unless `deaths_ok`) fails the test with the engine's reason.
async fn wait_for<T>(
    rx: &mut UnboundedReceiver<ClientEvent>,
    what: &str,
    secs: u64,
    deaths_ok: bool,
    mut pick: impl FnMut(&ClientEvent) -> Option<T>,
) -> (T, Vec<ClientEvent>) {
    let mut seen = Vec::new();
    // `secs` counts from the call or from the engine's last progress report (a load reports
    // every ~2 s; a first load compiles the kernels, minutes on a slow-compiling CPU device),
    // at most 30 min in all
    let start = tokio::time::Instant::now();
    let mut deadline = start + Duration::from_secs(secs);
    loop {
        let ev = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(ev)) => ev,
            Ok(None) => panic!("client channel closed while waiting for {what}"),
            Err(_) => panic!("no {what} within {secs} s of the last progress report; saw {seen:?}"),
        };
        if matches!(ev, ClientEvent::Engine(Event::Progress(_))) {
            deadline = (tokio::time::Instant::now() + Duration::from_secs(secs))
                .min(start + Duration::from_secs(1800));
        }
        if let Some(t) = pick(&ev) {
            seen.push(ev);
            return (t, seen);
        }
        if !deaths_ok {
            if let ClientEvent::Died { reason, .. } = &ev {
                panic!("the engine died before {what}: {reason} (is `strata engine` implemented?)");
            }
        }
        seen.push(ev);
    }
}

async fn started(on: &[&str]) -> (EngineClient, UnboundedReceiver<ClientEvent>, Hello) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = EngineClient::start(spawn(on), tx);
    let (h, _) = wait_for(&mut rx, "hello", 30, false, |e| match e {
        ClientEvent::Engine(Event::Hello(h)) => Some(h.clone()),
        _ => None,
    })
    .await;
    (c, rx, h)
}

async fn loaded(rx: &mut UnboundedReceiver<ClientEvent>, deaths_ok: bool) -> Loaded {
    wait_for(rx, "loaded", 120, deaths_ok, |e| match e {
        ClientEvent::Engine(Event::Loaded(l)) => Some(l.clone()),
        ClientEvent::Engine(Event::Error(err)) => panic!("load failed: {}", err.message),
        _ => None,
    })
    .await
    .0
}

#[tokio::test]
async fn hello_reports_the_flags_from_the_environment() {
    let (c, _rx, h) = started(&["STRATA_MMVQ_KREG"]).await;
    assert_eq!(h.version, PROTOCOL_VERSION);
    assert!(h.pid > 0);
    println!("hello flags: {:?}", h.flags);
    assert_eq!(h.flags.get("STRATA_MMVQ_KREG"), Some(&true));
    assert_eq!(h.flags.get("STRATA_HC_Q8"), Some(&false));
    c.shutdown().await;
}

#[tokio::test]
async fn load_then_generate_streams_tokens_windows_and_one_turn() {
    let (c, mut rx, _) = started(&[]).await;
    c.send(Request::Load(load_req()));
    let l = loaded(&mut rx, false).await;
    println!("loaded: {l:?}");
    assert_eq!(l.arch, "llama");
    assert!(
        l.quant_types.iter().any(|t| t == "Q4_1"),
        "{:?}",
        l.quant_types
    );
    assert!(!l.hc && !l.experts);

    c.send(generate(1, "Name three colours.", 24));
    let (turn, seen) = wait_for(&mut rx, "turn", 120, false, |e| match e {
        ClientEvent::Engine(Event::Turn(t)) => Some(t.clone()),
        _ => None,
    })
    .await;
    let text: String = seen
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Engine(Event::Token(t)) if t.id == 1 => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let windows = seen
        .iter()
        .filter(|e| matches!(e, ClientEvent::Engine(Event::Window(w)) if w.id == 1))
        .count();
    println!("reply: {text:?}\nturn: {turn:?}");
    assert_eq!(turn.id, 1);
    assert!(!text.trim().is_empty());
    assert!(turn.decode_tokens > 0 && turn.decode_tokens <= 24);
    assert!(
        matches!(turn.stop, Stop::Eos | Stop::MaxTokens | Stop::StopString),
        "{:?}",
        turn.stop
    );
    assert_eq!(
        windows as u32, turn.windows,
        "one window event per verify window"
    );

    c.send(Request::Stats {});
    let (d, _) = wait_for(&mut rx, "devices", 30, false, |e| match e {
        ClientEvent::Engine(Event::Devices(d)) => Some(d.clone()),
        _ => None,
    })
    .await;
    assert!(!d.cards.is_empty());
    assert!(
        d.cards.iter().all(|c| c.experts.is_none()),
        "dense model: no expert counters"
    );
    assert!(d.cards.iter().map(|c| c.used.weights).sum::<u64>() > 0);
    c.shutdown().await;
}

#[tokio::test]
async fn cancel_ends_the_turn_as_cancelled() {
    let (c, mut rx, _) = started(&[]).await;
    c.send(Request::Load(load_req()));
    loaded(&mut rx, false).await;
    c.send(generate(
        7,
        "Count from 1 to 500, one number per line.",
        2000,
    ));
    wait_for(&mut rx, "first token", 120, false, |e| match e {
        ClientEvent::Engine(Event::Token(t)) if t.id == 7 => Some(()),
        _ => None,
    })
    .await;
    c.send(Request::Cancel { id: 7 });
    let (turn, _) = wait_for(&mut rx, "turn", 60, false, |e| match e {
        ClientEvent::Engine(Event::Turn(t)) => Some(t.clone()),
        _ => None,
    })
    .await;
    assert_eq!(turn.stop, Stop::Cancelled);
    assert!(turn.decode_tokens < 2000);
    c.shutdown().await;
}

#[tokio::test]
async fn a_killed_engine_is_reported_then_restarted_and_reloaded() {
    let (c, mut rx, h) = started(&[]).await;
    c.send(Request::Load(load_req()));
    loaded(&mut rx, false).await;
    c.send(generate(3, "Write a long story about a lighthouse.", 400));
    wait_for(&mut rx, "first token", 120, false, |e| match e {
        ClientEvent::Engine(Event::Token(_)) => Some(()),
        _ => None,
    })
    .await;
    // SAFETY: kill(2) on the engine's pid, a child we own and have not reaped.
    assert_eq!(unsafe { libc::kill(h.pid as i32, libc::SIGKILL) }, 0);
    let ((reason, in_flight), _) = wait_for(&mut rx, "death", 30, true, |e| match e {
        ClientEvent::Died { reason, in_flight } => Some((reason.clone(), in_flight.clone())),
        _ => None,
    })
    .await;
    println!("death reported: {reason}");
    assert_eq!(in_flight, vec![3], "the interrupted generation is named");
    let (attempt, _) = wait_for(&mut rx, "restart", 10, true, |e| match e {
        ClientEvent::Restarting { attempt, .. } => Some(*attempt),
        _ => None,
    })
    .await;
    assert_eq!(attempt, 1);
    let (pid, _) = wait_for(&mut rx, "respawn", 30, true, |e| match e {
        ClientEvent::Spawned { pid } => Some(*pid),
        _ => None,
    })
    .await;
    assert_ne!(pid, h.pid);
    let l = loaded(&mut rx, true).await;
    assert_eq!(l.model, model(), "the last load is sent again");
    c.shutdown().await;
}

#[tokio::test]
async fn flag_restart_brings_new_flags_and_reports_its_time() {
    let (c, mut rx, h) = started(&[]).await;
    assert_eq!(h.flags.get("STRATA_MMVQ_KREG"), Some(&false));
    c.send(Request::Load(load_req()));
    loaded(&mut rx, false).await;
    c.restart(flags(&["STRATA_MMVQ_KREG"]), None);
    let (h2, _) = wait_for(&mut rx, "hello after restart", 60, false, |e| match e {
        ClientEvent::Engine(Event::Hello(h)) => Some(h.clone()),
        _ => None,
    })
    .await;
    assert_eq!(h2.flags.get("STRATA_MMVQ_KREG"), Some(&true));
    assert_ne!(h2.pid, h.pid);
    let (ms, _) = wait_for(&mut rx, "restart timing", 120, false, |e| match e {
        ClientEvent::Restarted { ms } => Some(*ms),
        _ => None,
    })
    .await;
    println!("flag restart took {ms:.0} ms (shutdown -> loaded)");
    assert!(ms > 0.0);
    c.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_the_process() {
    let (c, _rx, h) = started(&[]).await;
    c.shutdown().await;
    // The supervisor waited for the exit (or killed it), so the pid is gone.
    // SAFETY: signal 0 only checks for existence.
    let alive = unsafe { libc::kill(h.pid as i32, 0) } == 0;
    assert!(!alive, "engine pid {} still running after shutdown", h.pid);
}

/// Flips STRATA_MMVQ_KREG `n` times as fast as the app can ask (flip 1: on), then collects what
/// the client reports until the engine it ends on has loaded and a few quiet seconds passed:
/// the pids spawned, the flags of the last `hello`, the `loaded`s and `Restarted`s seen.
async fn quick_flips(n: usize) -> (Vec<u32>, BTreeMap<String, bool>, usize, usize) {
    let (c, mut rx, h) = started(&[]).await;
    c.send(Request::Load(load_req()));
    loaded(&mut rx, false).await;
    for i in 1..=n {
        let on: &[&str] = if i % 2 == 1 {
            &["STRATA_MMVQ_KREG"]
        } else {
            &[]
        };
        c.restart(flags(on), None);
    }
    let (mut pids, mut last_flags, mut loads, mut restarts) = (Vec::new(), h.flags, 0, 0);
    // until a `Restarted` (the last restart loaded), then 3 s more to catch any further one
    let mut quiet_until: Option<tokio::time::Instant> = None;
    loop {
        let deadline =
            quiet_until.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(240));
        let ev = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(ev)) => ev,
            Ok(None) => panic!("client channel closed"),
            Err(_) if quiet_until.is_some() => break,
            Err(_) => panic!("no restart finished within 240 s; pids {pids:?}"),
        };
        match ev {
            ClientEvent::Spawned { pid } => pids.push(pid),
            ClientEvent::Engine(Event::Hello(h)) => last_flags = h.flags,
            ClientEvent::Engine(Event::Loaded(_)) => loads += 1,
            ClientEvent::Engine(Event::Error(e)) => panic!("engine error: {}", e.message),
            ClientEvent::Died { reason, .. } => panic!("an engine died: {reason}"),
            ClientEvent::Restarted { ms } => {
                restarts += 1;
                println!("restart done in {ms:.0} ms");
                quiet_until = Some(tokio::time::Instant::now() + Duration::from_secs(3));
            }
            _ => {}
        }
    }
    c.shutdown().await;
    (pids, last_flags, loads, restarts)
}

#[tokio::test]
async fn ten_quick_flag_flips_run_two_restarts_ending_on_the_last_state() {
    // flips 1..10 end on "off"; flip 1's restart runs, 2..10 coalesce into one more
    let (pids, flags, loads, restarts) = quick_flips(10).await;
    println!("10 flips: engines spawned {pids:?}");
    assert_eq!(
        pids.len(),
        2,
        "the restart under way, then one with the last state"
    );
    assert_eq!(
        flags.get("STRATA_MMVQ_KREG"),
        Some(&false),
        "the last flip wins"
    );
    assert_eq!(
        (loads, restarts),
        (1, 1),
        "the interim engine's `loaded` is not reported"
    );
}

#[tokio::test]
async fn nine_quick_flag_flips_run_one_restart_when_the_last_state_is_under_way() {
    // flips 1..9 end on "on", what flip 1's restart brings up: the waiting one is cancelled
    let (pids, flags, loads, restarts) = quick_flips(9).await;
    println!("9 flips: engines spawned {pids:?}");
    assert_eq!(pids.len(), 1);
    assert_eq!(flags.get("STRATA_MMVQ_KREG"), Some(&true));
    assert_eq!((loads, restarts), (1, 1));
}

#[tokio::test]
async fn retry_after_a_failed_load_restarts_the_engine_and_reports_the_failure_again() {
    let (c, mut rx, h) = started(&[]).await;
    let mut bad = load_req();
    bad.model = "/nonexistent/strata-test/model.gguf".into();
    c.send(Request::Load(bad));
    let load_failed = |e: &ClientEvent| match e {
        ClientEvent::Engine(Event::Error(err)) if err.id.is_none() => Some(err.message.clone()),
        ClientEvent::Engine(Event::Loaded(_)) => panic!("a missing file loaded"),
        _ => None,
    };
    let (first, _) = wait_for(&mut rx, "the load error", 60, false, load_failed).await;
    println!("load failed: {first}");
    assert!(
        first.contains("/nonexistent/strata-test/model.gguf"),
        "{first}"
    );
    // Ctrl+L: the engine is up with nothing loaded; retry restarts it and loads again
    c.retry_now();
    let (pid, _) = wait_for(&mut rx, "a new engine", 30, false, |e| match e {
        ClientEvent::Spawned { pid } => Some(*pid),
        _ => None,
    })
    .await;
    assert_ne!(pid, h.pid, "a fresh engine");
    let (again, _) = wait_for(&mut rx, "the load error again", 60, false, load_failed).await;
    assert_eq!(
        again, first,
        "the retry ends in the same failure, said again"
    );
    c.shutdown().await;
}
