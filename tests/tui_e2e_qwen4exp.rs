//! The TUI on a synthetic qwen4exp file in a real terminal (issue 25): the engine loads it, the
//! status bar and the notice say the model is synthetic (its text is noise by design), a reply
//! streams and ends with its stats line. Needs tmux. `--nocapture` prints the screens.

mod tui_support;

use tui_support::{bin, status_line, Home, Tmux};

#[test]
fn a_synthetic_qwen4exp_model_chats_and_says_it_is_noise() {
    let home = Home::new();
    let model = home.path().join("tiny.gguf");
    let g = strata::synth::SynthGeometry::preset("tiny").expect("the tiny preset");
    strata::synth::write_file(&g, &model).expect("synth");
    let tmux = Tmux::new("qwen4exp");
    tmux.start_shell(&home);
    tmux.type_text(&format!("{} --model {}", bin(), model.display()));
    tmux.keys(&["Enter"]);
    let s = tmux.wait("the synthetic model loaded", 240, |s| {
        status_line(s)
            .contains("engine ready")
            .then(|| s.to_string())
    });
    println!("{s}");
    assert!(
        s.contains("qwen4exp"),
        "the architecture in the status bar:\n{s}"
    );
    assert!(s.contains("synthetic"), "the synthetic note:\n{s}");
    assert!(
        s.contains("283K params"),
        "a size under a million in K:\n{s}"
    );
    assert!(
        s.contains("every expert resident"),
        "the Cards panel on a MoE model:\n{s}"
    );
    tmux.type_text("hello there");
    tmux.keys(&["Enter"]);
    let s = tmux.wait("a reply with its stats line", 120, |s| {
        s.lines()
            .any(|l| l.contains(" tok · ") && l.contains(" tok/s · "))
            .then(|| s.to_string())
    });
    println!("{s}");
    tmux.keys(&["C-c"]);
    tmux.keys(&["C-c"]);
}
