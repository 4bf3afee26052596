//! The whole app end to end: the real `strata` binary in a real terminal (a detached tmux session
//! of fixed size), its real `strata engine` child and the real SmolLM2 model. Types like a user,
//! reads the screen like a user (tmux capture-pane), and checks: the model loads, a reply streams
//! and the panels show its speed and windows; STRATA_MMVQ_KREG cannot be turned on (SmolLM2
//! stores none of its formats: the pane says so); toggling STRATA_VNNI restarts the engine with
//! the flag on; killing the engine mid-reply keeps the partial reply (marked interrupted) and the
//! engine comes back; quitting restores the terminal (the shell prompt returns, `stty` shows
//! `icanon` and `echo`).
//!
//! Needs tmux (installed by .ci/run). Run with `--nocapture` to see the screens.

mod tui_support;

use std::time::{Duration, Instant};

use tui_support::{
    alive, bin, children, conversation, flag_shown_on, number_after, shown_pid, status_line, Home,
    Tmux, COLS, PROMPT_MARK, ROWS,
};

#[test]
fn tui_against_the_real_engine_in_tmux() {
    let model = tui_support::smollm2();
    let home = Home::new();
    let tmux = Tmux::new("e2e");
    tmux.start_shell(&home);
    tmux.type_text(&format!("{} --model {}", bin(), model.display()));
    tmux.keys(&["Enter"]);

    // 1. The model loads.
    let s = tmux.wait("model loaded (engine ready)", 240, |s| {
        let st = status_line(s);
        (st.contains("engine ready") && st.contains("llama")).then(|| s.to_string())
    });
    let tui_pid = children(tmux.pane_pid(), &bin())
        .into_iter()
        .next()
        .expect("the strata TUI runs under the pane's shell");
    let engine1 = shown_pid(&s).expect("the flags panel names the engine pid");
    assert_eq!(
        children(tui_pid, "engine"),
        vec![engine1],
        "the shown pid is the TUI's engine child"
    );
    assert!(s.contains("○ STRATA_MMVQ_KREG  off"), "{s}");

    // 2. A reply streams; the panels show a non-zero rate and window figures.
    tmux.type_text("What is the capital of France?");
    tmux.keys(&["Enter"]);
    let s = tmux.wait("the first reply and its figures", 180, |s| {
        let tps = number_after(s, "decode")?;
        let windows = number_after(s, "tokens/window")?;
        let done = status_line(s).contains("engine ready");
        (done && tps > 0.0 && windows > 0.0).then(|| s.to_string())
    });
    println!("main screen after the first reply ({COLS}x{ROWS}):\n{s}");
    let tps = number_after(&s, "decode").unwrap_or(0.0);
    let median_ms = number_after(&s, "median").unwrap_or(0.0);
    println!("decode {tps} tok/s, median window {median_ms} ms");
    assert!(median_ms > 0.0, "a window median is shown");
    assert!(s.contains("Assistant"), "{s}");

    // 3. STRATA_MMVQ_KREG (third flag) does not apply to SmolLM2 (Q4_1/Q8_0): Space refuses it
    //    and says why. STRATA_VNNI (fourth) does: toggle it and apply, the engine restarts with it.
    tmux.keys(&["C-t"]);
    tmux.wait("the toggles pane", 10, |s| {
        s.contains("Kernel flag toggles").then_some(())
    });
    tmux.keys(&["Down", "Down", "Space"]);
    tmux.wait("KREG refused with its reason", 10, |s| {
        (s.contains("STRATA_MMVQ_KREG cannot be turned on: model stores none of")
            && s.contains("[ ] STRATA_MMVQ_KREG"))
        .then_some(())
    });
    tmux.keys(&["Down", "Space"]);
    tmux.wait("VNNI pending", 10, |s| {
        s.contains("[x] STRATA_VNNI").then_some(())
    });
    tmux.keys(&["Enter"]);
    let s = tmux.wait("restart with VNNI on", 240, |s| {
        let pid = shown_pid(s)?;
        let ready = status_line(s).contains("engine ready");
        (ready && pid != engine1 && flag_shown_on(s, "STRATA_VNNI")).then(|| s.to_string())
    });
    assert!(
        !flag_shown_on(&s, "STRATA_MMVQ_KREG"),
        "the refused flag stays off"
    );
    let engine2 = shown_pid(&s).unwrap_or(0);
    assert!(!alive(engine1), "the old engine {engine1} is gone");
    assert_eq!(children(tui_pid, "engine"), vec![engine2]);
    let environ = std::fs::read(format!("/proc/{engine2}/environ")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&environ)
            .split('\0')
            .any(|kv| kv == "STRATA_VNNI=1"),
        "the new engine runs with STRATA_VNNI=1 in its environment"
    );

    // 4. Kill the engine mid-reply: the partial reply stays (interrupted), the engine returns.
    tmux.type_text("Write a long story about a lighthouse keeper and his cat.");
    tmux.keys(&["Enter"]);
    tmux.wait("the second reply streaming", 120, |s| {
        let streaming = status_line(s).contains("generating");
        // Some words of the reply are in the conversation below the last "Assistant" header.
        let conv = conversation(s);
        let words = conv
            .rsplit_once("Assistant")
            .map(|(_, after)| {
                after
                    .split(|c: char| c.is_whitespace() || c == '│')
                    .filter(|w| !w.is_empty())
                    .count()
            })
            .unwrap_or(0);
        (streaming && words > 12).then_some(())
    });
    // SAFETY: kill(2) with SIGKILL on the engine pid found under our own tmux session.
    assert_eq!(unsafe { libc::kill(engine2 as i32, libc::SIGKILL) }, 0);
    let s = tmux.wait("the reply marked interrupted", 30, |s| {
        s.contains("Assistant · interrupted").then(|| s.to_string())
    });
    assert!(alive(tui_pid), "the TUI survives the engine's death");
    let partial: Vec<String> = conversation(&s)
        .rsplit_once("Assistant · interrupted")
        .map(|(_, a)| {
            a.split(|c: char| c.is_whitespace() || c == '│')
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    println!(
        "partial reply kept ({} words): {}…",
        partial.len(),
        partial.join(" ")
    );
    assert!(partial.len() > 12, "the partial reply is kept on screen");
    let s = tmux.wait("the engine restarted and reloaded", 240, |s| {
        let pid = shown_pid(s)?;
        let ready = status_line(s).contains("engine ready");
        (ready && pid != engine2).then(|| s.to_string())
    });
    assert!(s.contains("Assistant · interrupted"), "still shown:\n{s}");
    assert!(
        flag_shown_on(&s, "STRATA_VNNI"),
        "the flag survives the respawn"
    );
    let engine3 = shown_pid(&s).unwrap_or(0);
    assert_eq!(children(tui_pid, "engine"), vec![engine3]);

    // 5. Quit: the TUI and its engine exit, the shell prompt returns, the tty is cooked again.
    tmux.keys(&["C-q"]);
    tmux.wait_prompt("the shell prompt after quitting", 30);
    let t0 = Instant::now();
    while (alive(tui_pid) || alive(engine3)) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!alive(tui_pid), "the TUI exited");
    assert!(!alive(engine3), "the engine exited with the TUI");
    tmux.type_text("stty -a | tr ' ;' '\\n\\n' | grep -E -x -e '-?icanon' -e '-?echo' | tr '\\n' ' '; echo STTY-END");
    tmux.keys(&["Enter"]);
    let modes = tmux.wait("stty output", 10, |s| {
        s.lines()
            .find(|l| l.trim_end().ends_with("STTY-END") && !l.starts_with(PROMPT_MARK.trim_end()))
            .map(str::to_string)
    });
    println!("terminal modes after quitting: {modes}");
    let words: Vec<&str> = modes.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "the terminal is restored: {modes}"
    );
    let saved = std::fs::read_dir(home.conversations())
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(
        saved >= 1,
        "the conversation was saved in the temp data dir"
    );
}
