//! The panels of issue 27's defect 8 in a real terminal, against the real engine and SmolLM2: the
//! Cards panel shows the engine process's RSS (the one `/proc/PID/status` gives) against the host
//! budget, not the device's nominal memory; settings edited with Ctrl+S go into the next reply
//! and into the saved file; the speed panel says `live` while the reply streams; the reply ends
//! with its `N tok · R tok/s · stop` line; Ctrl+O lists the conversation by its id.
//!
//! Needs tmux. `--nocapture` prints the screens.

mod tui_support;

use tui_support::{bin, conversation, number_after, shown_pid, status_line, Home, Tmux};

/// `(tokens, tok/s, stop)` of the first `N tok · R tok/s · stop` line.
fn reply_stats(text: &str) -> Option<(u32, String, String)> {
    text.lines().find_map(|l| {
        let l = l.trim_start_matches('│').trim();
        let (tok, rest) = l.split_once(" tok · ")?;
        let (tps, stop) = rest.split_once(" tok/s · ")?;
        Some((
            tok.parse().ok()?,
            tps.to_string(),
            stop.split_whitespace().next()?.to_string(),
        ))
    })
}

fn vm_rss_mib(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the engine's status");
    let kb: f64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kb / 1024.0
}

#[test]
fn panels_in_a_real_terminal() {
    let model = tui_support::smollm2();
    let home = Home::new();
    let tmux = Tmux::new("panels");
    tmux.start_shell(&home);
    tmux.type_text(&format!("{} --model {}", bin(), model.display()));
    tmux.keys(&["Enter"]);

    // 1. Cards: the engine's RSS against the host's budget, bars filled.
    let s = tmux.wait("engine ready with the RSS in the Cards panel", 240, |s| {
        let ready = status_line(s).contains("engine ready");
        (ready && number_after(s, "│RSS").is_some()).then(|| s.to_string())
    });
    println!("{s}");
    let engine = shown_pid(&s).expect("the flags panel names the engine pid");
    let shown = number_after(&s, "│RSS").unwrap();
    let real = vm_rss_mib(engine);
    println!("Cards RSS {shown} MiB, /proc/{engine}/status VmRSS {real:.0} MiB");
    assert!(
        (shown - real).abs() < real * 0.25,
        "the panel's RSS {shown} MiB is the engine's ({real:.0} MiB)"
    );
    let rss_row = s.lines().find(|l| l.contains("│RSS ")).unwrap();
    assert!(rss_row.contains('█'), "a non-empty bar: {rss_row}");
    assert!(
        s.contains("(MemAvailable + RSS)") || s.contains("(cgroup limit)"),
        "the budget says what it is:\n{s}"
    );
    assert!(s.contains("MiB of the RSS"), "{s}");

    // 2. Settings: greedy, 120 tokens a reply, a seed; applied and said so.
    tmux.keys(&["C-s"]);
    tmux.wait("the settings overlay", 10, |s| {
        s.contains("Settings (the preset's").then_some(())
    });
    tmux.keys(&["C-u"]);
    tmux.type_text("0");
    tmux.keys(&["Down", "Down", "Down", "Down", "Down", "C-u"]);
    tmux.type_text("120");
    tmux.keys(&["Down", "C-u"]);
    tmux.type_text("7");
    tmux.keys(&["Enter"]);
    tmux.wait("the settings applied", 10, |s| {
        s.contains("settings set for this conversation")
            .then_some(())
    });

    // 3. The speed panel is live while the reply streams, then the turn's figure.
    tmux.type_text("Write a long story about a dragon who learns to bake bread.");
    tmux.keys(&["Enter"]);
    let s = tmux.wait("a live decode rate while the reply streams", 60, |s| {
        let streaming = status_line(s).contains("generating");
        (streaming && s.contains("tok/s live")).then(|| s.to_string())
    });
    let live = number_after(&s, "decode").unwrap_or(0.0);
    println!("mid-stream: decode {live} tok/s live");
    assert!(live > 0.0, "{s}");
    let s = tmux.wait("the reply and its stats line", 120, |s| {
        let done = status_line(s).contains("engine ready");
        (done && reply_stats(&conversation(s)).is_some()).then(|| s.to_string())
    });
    println!("{s}");
    assert!(
        !s.contains("tok/s live"),
        "the turn's figure replaced it:\n{s}"
    );
    let (tokens, tps, stop) = reply_stats(&conversation(&s)).unwrap();
    println!("reply: {tokens} tok, {tps} tok/s, {stop}");
    assert!(
        tokens > 1 && tokens <= 120,
        "max_tokens 120 from the settings: {tokens}"
    );
    assert!(
        ["max_tokens", "eos", "stop_string"].contains(&stop.as_str()),
        "{stop}"
    );
    if stop == "max_tokens" {
        assert_eq!(tokens, 120);
    }
    assert!(tps.parse::<f64>().is_ok_and(|v| v > 0.0), "{tps}");

    // 4. Ctrl+O lists this conversation by its id.
    let id = status_line(&s)
        .rsplit('│')
        .next()
        .unwrap()
        .trim()
        .to_string();
    tmux.keys(&["C-o"]);
    let s = tmux.wait("the conversations overlay with this one", 10, |s| {
        s.lines()
            .any(|l| l.contains(&id) && l.contains("(current)") && l.contains("2 msgs"))
            .then(|| s.to_string())
    });
    println!("{s}");
    tmux.keys(&["Escape"]);

    // 5. Quit: the file has the conversation's settings.
    tmux.keys(&["C-q"]);
    tmux.wait_prompt("the shell prompt after quitting", 20);
    let file = home.conversations().join(format!("{id}.json"));
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).expect("the saved conversation")).unwrap();
    let sampling = &saved["settings"]["sampling"];
    assert_eq!(sampling["max_tokens"], 120, "{saved}");
    assert_eq!(sampling["seed"], 7, "{saved}");
    assert_eq!(sampling["temperature"], 0.0, "{saved}");
}
