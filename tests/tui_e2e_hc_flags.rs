//! The HC read toggles made real (issue 26), in a real terminal against the real engine on the
//! converted SmolLM2 (`strata-hc-llama`, built by `make setup`; preset `smollm2-hc`): a reply,
//! then Ctrl+T turns STRATA_GR_FUSED on, the engine restarts with it in its environment, the same
//! prompt again, and the Verify window pane shows the new per-window median beside the one before
//! the flag ("before (no flags): median …"). Needs tmux. `--nocapture` prints the screens.

mod tui_support;

use tui_support::{
    answered_last_prompt, bin, flag_shown_on, number_after, shown_pid, status_line, Home, Tmux,
};

/// The median of the Verify window pane's "last … median … ms" line (this engine's windows).
fn current_median(screen: &str) -> Option<f64> {
    let line = screen
        .lines()
        .find(|l| l.contains("last ") && l.contains(" median ") && !l.contains("before"))?;
    number_after(line, " median")
}

#[test]
fn the_fused_read_toggle_restarts_the_engine_and_keeps_the_medians_before() {
    let home = Home::new();
    let tmux = Tmux::new("hcflags");
    tmux.start_shell(&home);
    tmux.type_text(&format!("{} --preset smollm2-hc", bin()));
    tmux.keys(&["Enter"]);
    let s = tmux.wait("the converted model loaded", 300, |s| {
        status_line(s)
            .contains("engine ready")
            .then(|| s.to_string())
    });
    assert!(s.contains("strata-hc-llama"), "{s}");
    let engine1 = shown_pid(&s).expect("the flags panel names the engine pid");
    let prompt = "Why is the sky blue?";
    tmux.type_text(prompt);
    tmux.keys(&["Enter"]);
    tmux.wait("the first reply", 240, |s| {
        (status_line(s).contains("engine ready") && number_after(s, "median").is_some())
            .then_some(())
    });
    // STRATA_HC_Q8 is first in the pane, STRATA_GR_FUSED second
    tmux.keys(&["C-t"]);
    tmux.wait("the toggles pane", 10, |s| {
        s.contains("Kernel flag toggles").then_some(())
    });
    tmux.keys(&["Down", "Space"]);
    tmux.wait("GR_FUSED pending", 10, |s| {
        s.contains("[x] STRATA_GR_FUSED").then_some(())
    });
    tmux.keys(&["Enter"]);
    let s = tmux.wait("restart with GR_FUSED on", 300, |s| {
        let pid = shown_pid(s)?;
        let ready = status_line(s).contains("engine ready");
        (ready && pid != engine1 && flag_shown_on(s, "STRATA_GR_FUSED")).then(|| s.to_string())
    });
    let engine2 = shown_pid(&s).unwrap_or(0);
    let environ = std::fs::read(format!("/proc/{engine2}/environ")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&environ)
            .split('\0')
            .any(|kv| kv == "STRATA_GR_FUSED=1"),
        "the new engine runs with STRATA_GR_FUSED=1"
    );
    tmux.type_text(prompt);
    tmux.keys(&["Enter"]);
    let s = tmux.wait(
        "the reply under the flag, with the median before it",
        240,
        |s| {
            // (not a count of "Assistant" headers: this reply can be long enough to scroll the
            // first one off the pane)
            let ready = status_line(s).contains("engine ready");
            (ready
                && answered_last_prompt(s)
                && current_median(s).is_some()
                && s.contains("before (no flags)"))
            .then(|| s.to_string())
        },
    );
    println!("{s}");
    let before = number_after(&s, "before (no flags): median").expect("the median before");
    let now = current_median(&s).expect("the median now");
    println!("per-window median: before {before} ms, with STRATA_GR_FUSED=1 {now} ms");
    assert!(before > 0.0 && now > 0.0);
    tmux.keys(&["C-c"]);
    tmux.keys(&["C-c"]);
}
