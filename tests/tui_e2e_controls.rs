//! Issue 27's lifecycle and controls, end to end in a real terminal (tmux, the real `strata`
//! binary, its real engine child, the real SmolLM2 model; harness in `tui_support`):
//! - Ctrl+C mid-reply stops the reply and keeps the app (the reply is marked stopped, the hint
//!   says a second Ctrl+C quits); the second Ctrl+C quits and the terminal is restored;
//! - Ctrl+L after a failed load restarts the engine and ends in the failure again ("down", the
//!   reason shown), not "starting" forever; `kill -INT` ends the app cleanly (exit 0);
//! - a save that fails (the data dir is a file) is said on stderr after the terminal is
//!   restored, the exit status is 1, and a recovery copy holds the conversation.
//!
//! `STRATA_E2E_BIN=<an older build>` runs them against a build without the fixes (they fail).
//! Needs tmux. Run with `--nocapture` to see the screens.

mod tui_support;

use std::time::{Duration, Instant};

use tui_support::{alive, bin, children, conversation, shown_pid, status_line, Home, Tmux};

/// The TUI's pid: the pane shell's child running the binary.
fn tui_pid(tmux: &Tmux) -> u32 {
    children(tmux.pane_pid(), &bin())
        .into_iter()
        .next()
        .expect("the strata TUI runs under the pane's shell")
}

/// Runs `line` at the shell prompt and returns the text it printed after `mark`.
fn shell_says(tmux: &Tmux, line: &str, mark: &str) -> String {
    tmux.run_line(line);
    tmux.wait(mark, 10, |s| {
        s.lines()
            .rev()
            .find(|l| l.starts_with(mark))
            .map(|l| l[mark.len()..].trim().to_string())
    })
}

/// The exit status of the last command, asked from the shell.
fn exit_status(tmux: &Tmux) -> i32 {
    shell_says(tmux, "echo EXIT=$?", "EXIT=")
        .parse()
        .expect("a number after EXIT=")
}

/// The terminal is cooked again: `stty -a` shows `icanon` and `echo` (not `-icanon`/`-echo`).
fn assert_tty_restored(tmux: &Tmux) {
    let modes = shell_says(
        tmux,
        "stty -a | tr ' ;' '\\n\\n' | grep -E -x -e '-?icanon' -e '-?echo' | tr '\\n' ' ' | sed 's/^/MODES=/'; echo",
        "MODES=",
    );
    let words: Vec<&str> = modes.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "the terminal is restored: {modes}"
    );
}

fn wait_gone(pids: &[u32]) {
    let t0 = Instant::now();
    while pids.iter().any(|&p| alive(p)) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    for &p in pids {
        assert!(!alive(p), "process {p} exited");
    }
}

/// Words of the last assistant reply in the conversation pane, after its header `header`.
fn reply_words(screen: &str, header: &str) -> usize {
    conversation(screen)
        .rsplit_once(header)
        .map(|(_, after)| {
            after
                .split(|c: char| c.is_whitespace() || c == '│')
                .filter(|w| !w.is_empty())
                .count()
        })
        .unwrap_or(0)
}

fn start_ready(tmux: &Tmux, home: &Home) -> (u32, u32) {
    tmux.start_shell(home);
    tmux.run_line(&format!(
        "{} --model {}",
        bin(),
        tui_support::smollm2().display()
    ));
    let s = tmux.wait("model loaded (engine ready)", 240, |s| {
        let st = status_line(s);
        (st.contains("engine ready") && st.contains("llama")).then(|| s.to_string())
    });
    let engine = shown_pid(&s).expect("the flags panel names the engine pid");
    (tui_pid(tmux), engine)
}

#[test]
fn ctrl_c_stops_the_reply_first_and_the_second_ctrl_c_quits() {
    let home = Home::new();
    let tmux = Tmux::new("ctrlc");
    let (tui, engine) = start_ready(&tmux, &home);

    tmux.type_text("Write a long story about a lighthouse keeper and his cat.");
    tmux.keys(&["Enter"]);
    tmux.wait("the reply streaming", 120, |s| {
        (status_line(s).contains("generating") && reply_words(s, "Assistant") > 12).then_some(())
    });
    tmux.keys(&["C-c"]);
    let s = tmux.wait("the reply marked stopped, the app still up", 30, |s| {
        let idle = status_line(s).contains("engine ready");
        (idle && s.contains("Assistant · stopped")).then(|| s.to_string())
    });
    println!("after the first Ctrl+C:\n{s}");
    assert!(alive(tui), "the first Ctrl+C does not quit the app");
    assert!(alive(engine), "nor end the engine");
    assert!(
        s.contains("Ctrl+C again to quit"),
        "the hint is shown:\n{s}"
    );
    let words = reply_words(&s, "Assistant · stopped");
    assert!(words > 12, "the partial reply is kept ({words} words)");
    std::thread::sleep(Duration::from_millis(1500));
    let later = tmux.screen();
    assert_eq!(
        reply_words(&later, "Assistant · stopped"),
        words,
        "the stopped reply does not grow:\n{later}"
    );

    tmux.keys(&["C-c"]);
    tmux.wait_prompt("the shell prompt after the second Ctrl+C", 30);
    wait_gone(&[tui, engine]);
    assert_eq!(exit_status(&tmux), 0);
    assert_tty_restored(&tmux);
}

#[test]
fn ctrl_l_after_a_failed_load_ends_down_again_and_sigint_ends_the_app_cleanly() {
    let home = Home::new();
    let tmux = Tmux::new("ctrll");
    tmux.start_shell(&home);
    let missing = "/nonexistent/strata-e2e/model.gguf";
    tmux.run_line(&format!("{} --model {missing}", bin()));
    let s = tmux.wait("the load failed (engine down)", 60, |s| {
        (status_line(s).contains("down") && s.contains(missing)).then(|| s.to_string())
    });
    let engine1 = shown_pid(&s).expect("the engine said hello before its load failed");
    let tui = tui_pid(&tmux);

    tmux.keys(&["C-l"]);
    let s = tmux.wait("a new engine whose load fails again", 30, |s| {
        let pid = shown_pid(s)?;
        (pid != engine1 && status_line(s).contains("down") && s.contains(missing))
            .then(|| s.to_string())
    });
    println!("after Ctrl+L:\n{s}");
    assert!(!status_line(&s).contains("starting"), "{s}");
    assert!(!alive(engine1), "the engine whose load failed was replaced");
    let engine2 = shown_pid(&s).unwrap_or(0);
    assert_eq!(children(tui, "engine"), vec![engine2]);

    // SIGINT from outside (raw mode turns the key into a key, not this): a clean end
    // SAFETY: kill(2) with SIGINT on the TUI's pid, found under our own tmux session.
    assert_eq!(unsafe { libc::kill(tui as i32, libc::SIGINT) }, 0);
    tmux.wait_prompt("the shell prompt after SIGINT", 30);
    wait_gone(&[tui, engine2]);
    assert_eq!(exit_status(&tmux), 0, "SIGINT is a normal quit");
    assert_tty_restored(&tmux);
}

#[test]
fn a_failed_save_on_quit_is_said_after_the_terminal_is_restored_with_a_recovery_copy() {
    let home = Home::new();
    // the data dir is a file: creating <data dir>/conversations fails (as root too)
    std::fs::create_dir_all(home.path().join("data")).unwrap();
    std::fs::write(home.path().join("data/strata"), "not a directory").unwrap();
    let tmux = Tmux::new("savefail");
    let (tui, engine) = start_ready(&tmux, &home);

    let question = "Say hello in three words.";
    tmux.type_text(question);
    tmux.keys(&["Enter"]);
    tmux.wait("the reply done", 120, |s| {
        let idle = status_line(s).contains("engine ready");
        (idle && reply_words(s, "Assistant") > 0).then_some(())
    });
    tmux.keys(&["C-q"]);
    let s = tmux.wait_prompt("the shell prompt after quitting", 30);
    println!("after quitting:\n{s}");
    wait_gone(&[tui, engine]);
    // one logical line the terminal may wrap anywhere: compare without whitespace
    let squash = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let joined = squash(&s);
    assert!(
        joined.contains(&squash("strata: the conversation could not be saved"))
            && joined.contains("Notadirectory"),
        "the failure is said:\n{s}"
    );
    assert_eq!(exit_status(&tmux), 1, "a failed save is not a success");
    assert_tty_restored(&tmux);

    let dir = home.path().join("state/strata/recovery");
    let copies: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("no recovery dir {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    let shown = copies[0].display().to_string();
    assert!(
        joined.contains(&squash(&shown)),
        "the message names the copy {shown}:\n{s}"
    );
    let text = std::fs::read_to_string(&copies[0]).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).expect("the copy is JSON");
    let msgs = v["messages"].as_array().expect("a conversation's messages");
    assert_eq!(msgs[0]["content"], question, "{text}");
    assert!(msgs.len() >= 2, "the reply is kept too: {text}");
}
