//! The A/B pane end to end in a real terminal (issue 29; the harness of `tui_e2e.rs`: the real
//! `strata` in a private tmux server, temp HOME/XDG dirs, real `strata engine` children and
//! SmolLM2), with a user preset whose `[ab]` runs default against vnni:
//!
//! - a chat reply first (its windows count under the chat's flag set), then Ctrl+B: the pane
//!   opens on the preset's arms and prompt; Enter runs both arms; the replies part (STRATA_VNNI
//!   is not bitwise: at temperature 0.7, seed 7 they part at token 10 on 2026-12-03), the
//!   parting token is marked in both columns, each arm's window ms and the ratio are shown;
//! - Ctrl+E writes the report: the Markdown and JSON files in `exports/`, their divergence the
//!   one on screen, the prompt tokens the same and the flags latched as asked;
//! - the bitwise pair (default against `unfused`, STRATA_FUSED=0) says identical;
//! - the medians per flag set survive a restart (`--resume`), and a medians file that does not
//!   parse is reported and kept aside, not lost.
//!
//! Needs tmux. `--nocapture` prints the screens.

mod tui_support;

use std::fs;

use tui_support::{bin, status_line, Home, Tmux};

const PRESET: &str = r#"description = "SmolLM2 A/B (test)"
model = "$STRATA_MODEL_SMOLLM2"
ctx = 2048
system_prompt = "You are a helpful assistant. Answer concisely."

[sampling]
temperature = 0.7
top_k = 40
top_p = 0.95
min_p = 0.05
repeat_penalty = 1.1
seed = 7
max_tokens = 24

[ab]
run = ["default", "vnni"]
prompts = ["Why is the sky blue?"]
n = 48
"#;

fn ready(s: &str) -> bool {
    status_line(s).contains("engine ready")
}

/// `A/B: the replies part at token N` under the columns: N.
fn parted_at(s: &str) -> Option<u64> {
    let rest = &s[s.find("the replies part at token ")? + 26..];
    let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
    n.parse().ok()
}

fn quit(tmux: &Tmux) {
    tmux.keys(&["C-q"]);
    tmux.wait_prompt("the shell prompt after Ctrl+Q", 20);
}

#[test]
fn ab_pane_in_a_real_terminal() {
    let model = tui_support::smollm2();
    assert!(model.is_file());
    let home = Home::new();
    let presets = home.path().join("config/strata/presets");
    fs::create_dir_all(&presets).unwrap();
    fs::write(presets.join("abtest.toml"), PRESET).unwrap();
    let tmux = Tmux::new("ab");
    tmux.start_shell(&home);
    tmux.run_line(&format!("{} --preset abtest", bin()));
    tmux.wait("engine ready", 240, |s| ready(s).then_some(()));

    // a chat reply: its windows count under the chat's flags (none on: `-`)
    tmux.type_text("Say hello.");
    tmux.keys(&["Enter"]);
    tmux.wait("the chat reply", 120, |s| {
        (ready(s) && (s.contains("tok/s · max_tokens") || s.contains("tok/s · eos"))).then_some(())
    });

    // 1. default against vnni: they part, marked in both columns
    tmux.keys(&["C-b"]);
    tmux.wait("the A/B pane on the preset's arms", 10, |s| {
        (s.contains("A/B: one prompt, two flag sets")
            && s.contains("A: default")
            && s.contains("B: vnni")
            && s.contains("prompt Why is the sky blue?"))
        .then_some(())
    });
    tmux.keys(&["Enter"]);
    // the replies stream into their columns
    let s = tmux.wait("an arm streaming (3 windows or more)", 300, |s| {
        let streaming = s.split("· generating (").skip(1).any(|rest| {
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            n.parse::<u32>().is_ok_and(|n| n >= 3)
        });
        streaming.then(|| s.to_string())
    });
    println!("{s}");
    let s = tmux.wait("both arms answered and parted", 300, |s| {
        (s.matches("▲ parts at token").count() == 2 && s.contains("B/A window ms"))
            .then(|| s.to_string())
    });
    println!("{s}");
    let at = parted_at(&s).expect("the summary names the token");
    assert!(
        s.contains(&format!("▲ parts at token {at}:")),
        "both columns name token {at}:\n{s}"
    );
    assert!(
        s.contains("both arms at once") || s.contains("one arm after the other"),
        "the pane says how the arms ran:\n{s}"
    );
    assert!(
        s.contains("STRATA_VNNI=1 · pid"),
        "arm B's flags and engine:\n{s}"
    );
    assert_eq!(s.matches(" · done").count(), 2, "both arms done:\n{s}");
    assert!(
        s.matches("window ").count() >= 2 && s.contains(" windows)"),
        "{s}"
    );

    // 2. Ctrl+E: the report, its divergence the one on screen
    tmux.keys(&["C-e"]);
    tmux.wait("the report's notice", 60, |s| {
        s.contains("A/B report written").then_some(())
    });
    let files: Vec<_> = fs::read_dir(home.exports())
        .expect("the exports dir")
        .map(|e| e.unwrap().path())
        .collect();
    let md = files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "md"))
        .expect("a Markdown report");
    let json = md.with_extension("json");
    let md_text = fs::read_to_string(md).unwrap();
    println!("{md_text}");
    assert!(md_text.contains("### A/B: default vs vnni"), "{md_text}");
    assert!(
        md_text.contains(&format!("vnni parts from default at reply token {at} of")),
        "{md_text}"
    );
    let j: serde_json::Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    let out = &j["comparison"]["arms"][1]["outputs"][0];
    assert_eq!(out["kind"], "differs", "{out}");
    assert_eq!(out["position"], at);
    assert_eq!(j["comparison"]["checks"]["same_prompt_tokens"], true);
    assert_eq!(j["comparison"]["checks"]["flags_latched"], true);
    assert_eq!(j["runs"][1]["hello_flags"]["STRATA_VNNI"], true);
    assert_eq!(j["runs"][0]["hello_flags"]["STRATA_VNNI"], false);

    // 3. the bitwise pair: B = unfused (STRATA_FUSED=0) says identical
    tmux.keys(&["Tab"]);
    for _ in 0..12 {
        if tmux.screen().contains("◂ unfused ▸") {
            break;
        }
        tmux.keys(&["Down"]);
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    tmux.wait("unfused picked for B", 5, |s| {
        s.contains("◂ unfused ▸").then_some(())
    });
    tmux.keys(&["Enter"]);
    let s = tmux.wait("the bitwise pair identical", 300, |s| {
        (s.contains("B: unfused") && s.contains("the replies are identical ("))
            .then(|| s.to_string())
    });
    println!("{s}");
    assert_eq!(s.matches("│identical").count(), 2, "in both columns:\n{s}");
    assert!(s.contains("STRATA_FUSED=0 · pid"), "{s}");
    quit(&tmux);

    // 4. the medians per flag set survive a restart
    let dir = home.path().join("data/strata/medians");
    let file = fs::read_dir(&dir)
        .expect("the medians dir")
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a medians file");
    let m: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    for set in ["-", "STRATA_VNNI=1", "STRATA_FUSED=0"] {
        assert!(
            m["sets"][set]["window_ms"]
                .as_array()
                .is_some_and(|w| !w.is_empty()),
            "{set} in {m}"
        );
    }
    let sources = &m["sets"]["-"]["sources"];
    assert!(
        sources.as_array().unwrap().iter().any(|s| s == "chat"),
        "the chat's windows too: {sources}"
    );
    tmux.run_line(&format!("{} --preset abtest --resume", bin()));
    tmux.wait("engine ready after the restart", 240, |s| {
        ready(s).then_some(())
    });
    tmux.keys(&["C-b"]);
    let s = tmux.wait("the medians after the restart", 10, |s| {
        (s.contains("STRATA_VNNI=1")
            && s.contains("windows: vnni)")
            && s.contains("STRATA_FUSED=0"))
        .then(|| s.to_string())
    });
    println!("{s}");
    quit(&tmux);

    // 5. a medians file that does not parse: reported, kept aside
    fs::write(&file, b"{\"version\":1,\"sets\":").unwrap();
    tmux.run_line(&format!("{} --preset abtest --resume", bin()));
    let s = tmux.wait("the bad medians file reported", 60, |s| {
        s.contains("A/B medians file did not parse")
            .then(|| s.to_string())
    });
    println!("{s}");
    let aside = format!("{}.corrupt-1", file.display());
    assert_eq!(fs::read(&aside).unwrap(), b"{\"version\":1,\"sets\":");
    quit(&tmux);
}
