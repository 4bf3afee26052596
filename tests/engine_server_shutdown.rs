//! `strata engine` stopped by `shutdown` or EOF at any moment of a load or a generation exits 0
//! (real engine, real SmolLM2).

mod engine_server_common;

use std::time::{Duration, Instant};

use engine_server_common::*;
use strata::protocol::*;

/// `shutdown` or EOF at any moment of a load or a generation exits 0, never by a signal: the
/// worker stops at the next load stage or window, and one still inside the SYCL runtime is left
/// behind without running the runtime's static destructors (before: exit 134 "Pure virtual
/// function called" or 139 in 6 runs of 10). 10 runs send the load and the shutdown in one
/// write. One run times a whole load (L) and stops the engine while it generates; 14 more send a
/// load and a long generate and stop the engine after a delay: 10 spread over the load (k L / 10
/// plus jitter from a fixed seed), 4 during the generation; half by `shutdown`, half by EOF. The
/// time to exit is printed (a figure, not a pass/fail check).
#[test]
fn shutdown_at_any_moment_of_a_load_or_generation_exits_0() {
    let mut bad = Vec::new();
    let mut report = |what: String, st: std::process::ExitStatus, took: Duration| {
        println!("{what}: {st} after {:.0} ms", took.as_secs_f64() * 1e3);
        if st.code() != Some(0) {
            bad.push(format!("{what}: {st}"));
        }
    };
    let load = Request::Load(Load {
        model: model(),
        ctx: CTX,
        devices: DeviceSplit::default(),
        spec: 0,
        sampling: greedy(N),
    })
    .to_line();
    let long = generate(1, "Count from 1 to 500, one number per line.", 400, None);
    for run in 0..10 {
        let mut e = Engine::start(&[]);
        let t0 = Instant::now();
        e.send_line(&format!("{load}{}", Request::Shutdown {}.to_line()));
        let st = e.wait_exit(30);
        report(
            format!("run {run}: load+shutdown at once"),
            st,
            t0.elapsed(),
        );
    }
    // L: a whole load, timed from the request to `loaded`
    let mut e = Engine::start(&[]);
    hello(&mut e);
    let t0 = Instant::now();
    e.send_line(&load);
    e.send(&long);
    e.until("loaded", 180, |ev| {
        matches!(ev, Event::Loaded(_)).then_some(())
    });
    let l = t0.elapsed();
    e.until("a token", 60, |ev| {
        matches!(ev, Event::Token(_)).then_some(())
    });
    let (st, took) = stop_and_wait(&mut e, false);
    report(
        format!(
            "timing run: load {} ms, shutdown while generating",
            l.as_millis()
        ),
        st,
        took,
    );
    let mut seed = 0x5eed_u64;
    for run in 0..14u32 {
        // splitmix64 jitter in [0, 1)
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let jitter = ((z ^ (z >> 31)) % 1000) as f64 / 1000.0;
        let delay = l.mul_f64((run as f64 + jitter) / 10.0);
        let mut e = Engine::start(&[]);
        hello(&mut e);
        e.send_line(&load);
        e.send(&long);
        std::thread::sleep(delay);
        // what the engine had reported by then
        let mut stage = "nothing yet".to_string();
        while let Ok(Ok(ev)) = e.events.try_recv() {
            stage = match ev {
                Event::Progress(p) => format!("load stage {}", p.stage),
                Event::Loaded(_) | Event::Devices(_) => "loaded".into(),
                Event::Token(_) | Event::Window(_) => "generating".into(),
                Event::Turn(_) => "turn over".into(),
                _ => stage,
            };
        }
        let eof = run % 2 == 1;
        let (st, took) = stop_and_wait(&mut e, eof);
        let how = if eof { "EOF" } else { "shutdown" };
        report(
            format!("run {run}: {how} after {} ms ({stage})", delay.as_millis()),
            st,
            took,
        );
    }
    assert!(bad.is_empty(), "engines that did not exit 0: {bad:#?}");
}
