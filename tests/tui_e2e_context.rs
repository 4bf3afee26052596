//! A conversation that outgrows the context, end to end in a real terminal (the harness of
//! `tui_e2e.rs`: the real `strata` in a private tmux server, temp HOME/XDG dirs, the real engine
//! and SmolLM2), with a user preset of `ctx = 256`:
//!
//! - the status bar's gauge shows the tokens in use (`ctx N/256`) and grows with the replies;
//! - after several long replies another message still gets a reply (it failed with "the prompt
//!   has N tokens; the context holds 256" before), and the conversation shows the marker above
//!   the first message the model still sees;
//! - a paste larger than the context is refused with a notice, stays in the input box and never
//!   enters the conversation.
//!
//! Needs tmux. Run with `--nocapture` to see the screens.

mod tui_support;

use tui_support::{bin, conversation, status_line, Home, Tmux};

const PRESET: &str = r#"description = "SmolLM2, a 256-token context (test)"
model = "$STRATA_MODEL_SMOLLM2"
ctx = 256
system_prompt = "You are a helpful assistant."

[sampling]
temperature = 0.0
seed = 1
repeat_penalty = 1.1
max_tokens = 64
"#;

/// "ctx N/256" in the status bar: N.
fn gauge(screen: &str) -> Option<u32> {
    let st = status_line(screen);
    let rest = &st[st.find("ctx ")? + 4..];
    let (used, total) = rest.split_once('/')?;
    let total: String = total.chars().take_while(char::is_ascii_digit).collect();
    (total == "256").then_some(())?;
    used.parse().ok()
}

fn ready(screen: &str) -> bool {
    status_line(screen).contains("engine ready")
}

/// The engine is idle again and the conversation shows a reply of a few words after `question`.
fn replied(screen: &str, question: &str) -> bool {
    let conv = conversation(screen);
    let Some((_, after)) = conv.rsplit_once(question) else {
        return false;
    };
    let words = after
        .rsplit_once("Assistant")
        .map(|(_, reply)| {
            reply
                .split(|c: char| c.is_whitespace() || c == '│')
                .filter(|w| !w.is_empty())
                .count()
        })
        .unwrap_or(0);
    ready(screen) && words > 3
}

#[test]
fn a_conversation_past_a_small_context_goes_on_with_a_gauge_and_a_marker() {
    let home = Home::new();
    let presets = home.path().join("config/strata/presets");
    std::fs::create_dir_all(&presets).expect("the presets dir");
    std::fs::write(presets.join("small.toml"), PRESET).expect("writing the preset");
    let tmux = Tmux::new("ctx");
    tmux.start_shell(&home);
    tmux.run_line(&format!("{} --preset small", bin()));
    let s = tmux.wait("engine ready with the gauge", 240, |s| {
        (ready(s) && gauge(s) == Some(0)).then(|| s.to_string())
    });
    println!("{}", status_line(&s));

    // Long replies until the engine has to leave turns out; each one must come back whole.
    let topics = [
        "the ocean",
        "mountains",
        "the moon",
        "coffee",
        "bicycles",
        "libraries",
    ];
    for (i, topic) in topics.iter().enumerate() {
        let question = format!("Write a long paragraph about {topic}.");
        tmux.type_text(&question);
        tmux.keys(&["Enter"]);
        let s = tmux.wait(&format!("reply {i}"), 120, |s| {
            replied(s, &question).then(|| s.to_string())
        });
        let n = gauge(&s).unwrap_or(0);
        println!("after reply {i}: {}", status_line(&s));
        assert!(n > 0 && n <= 256, "the gauge stays within the context: {n}");
        assert!(
            !s.contains("the context holds") && !s.contains("Assistant · error"),
            "no 'prompt too long' error:\n{s}"
        );
    }
    let s = tmux.screen();
    println!("after {} replies:\n{s}", topics.len());

    // The marker stands above the first message still in context: scroll up to it.
    let mut seen = None;
    for _ in 0..12 {
        let s = tmux.screen();
        if s.contains("earlier messages are outside the model's context") {
            seen = Some(s);
            break;
        }
        tmux.keys(&["PageUp"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let s = seen.expect("the dropped-messages marker in the conversation");
    println!("the marker:\n{s}");
    tmux.keys(&["C-End"]);

    // Another message still gets its reply.
    tmux.type_text("Thank you! Now one sentence about rivers.");
    tmux.keys(&["Enter"]);
    let s = tmux.wait("the reply after the overflow", 120, |s| {
        replied(s, "one sentence about rivers.").then(|| s.to_string())
    });
    assert!(!s.contains("Assistant · error"), "{s}");
    println!("{s}");

    // A paste larger than the context: refused, kept in the input, not in the conversation.
    let paste = "The quick brown fox jumps over the lazy dog. ".repeat(30) + "END-OF-PASTE";
    tmux.cmd(&["set-buffer", "-b", "big", &paste]);
    tmux.cmd(&["paste-buffer", "-p", "-d", "-b", "big", "-t", "e2e"]);
    tmux.wait("the paste in the input box", 30, |s| {
        s.contains("END-OF-PASTE").then_some(())
    });
    tmux.keys(&["Enter"]);
    let s = tmux.wait("the refusal", 30, |s| {
        s.contains("message too long").then(|| s.to_string())
    });
    println!("refused:\n{s}");
    assert!(s.contains("END-OF-PASTE"), "the input keeps the paste");
    assert!(
        !conversation(&s).contains("lazy dog"),
        "the paste is not in the conversation"
    );
    assert!(ready(&s), "no generation started: {}", status_line(&s));

    tmux.keys(&["C-q"]);
    tmux.wait_prompt("the shell prompt after quitting", 30);
}
