//! Controls that must not mislead (issue 27, defect 7: flags that do not apply, the preset
//! picker's flags, Ctrl+C) and the engine lifecycle as the app sees it (defect 6: Ctrl+L after a
//! failed load, a failed save on quit). Built and drawn as `tests.rs` does, with its helpers.

use ratatui::crossterm::event::KeyCode;
use strata::protocol::*;

use super::app::{Action, App, EngineState, MsgStatus};
use super::tests::*;
use crate::client::ClientEvent;

pub(super) fn toggles_at(app: &mut App, flag: &str) {
    app.handle_key(ctrl('t'));
    let at = app.flag_names().iter().position(|n| n == flag).unwrap();
    for _ in 0..at {
        app.handle_key(key(KeyCode::Down));
    }
}

#[test]
fn a_flag_that_does_not_apply_cannot_be_turned_on_and_the_pane_says_why() {
    // SmolLM2-like dense model storing only Q4_1: no HC tensors, no KREG format
    let mut app = new_app();
    app.apply_event(hello(&[]));
    app.apply_event(loaded(SMOL, "llama", false, &["Q4_1", "F32"], false));
    for (flag, why) in [
        ("STRATA_HC_Q8", "no hyper-connection tensors"),
        ("STRATA_GR_FUSED", "no hyper-connection tensors"),
        (
            "STRATA_MMVQ_KREG",
            "model stores none of Q4_K/Q5_K/Q6_K/IQ4_XS",
        ),
    ] {
        toggles_at(&mut app, flag);
        assert!(app.handle_key(key(KeyCode::Char(' '))).is_empty());
        assert_eq!(
            app.pending_flags.get(flag),
            Some(&false),
            "{flag} stays off"
        );
        let note = app.toggles_note.clone().expect("the refusal is shown");
        assert!(note.contains(flag) && note.contains(why), "{note}");
        let screen = format!("{}", draw(&app, 120, 30).backend());
        assert!(screen.contains("cannot be turned on"), "{screen}");
        // Enter applies nothing: no restart for a flag that does nothing
        assert!(app.handle_key(key(KeyCode::Enter)).is_empty(), "{flag}");
        assert_eq!(app.active_flags.get(flag), Some(&false));
    }
    // VNNI applies to Q4_1 on a capable host; on a host without AVX2 it is refused too
    app.host = super::flags::Host {
        vnni: Err("this CPU has no AVX-512 VNNI and no AVX2".into()),
    };
    toggles_at(&mut app, "STRATA_VNNI");
    app.handle_key(key(KeyCode::Char(' ')));
    assert_eq!(app.pending_flags.get("STRATA_VNNI"), Some(&false));
    assert!(app.toggles_note.as_ref().unwrap().contains("no AVX2"));
    // a cursor move clears the note
    app.handle_key(key(KeyCode::Up));
    assert!(app.toggles_note.is_none());
}

#[test]
fn snapshot_toggles_refuse_a_flag_for_another_model() {
    let mut app = ready_app();
    app.handle_key(ctrl('t'));
    app.handle_key(key(KeyCode::Char(' '))); // HC_Q8 on a dense model: refused
    assert_eq!(app.pending_flags.get("STRATA_HC_Q8"), Some(&false));
    insta::assert_snapshot!(draw(&app, 110, 26).backend());
}

#[test]
fn a_flag_on_that_does_not_apply_can_be_turned_off() {
    // a preset (or an earlier model) left HC_Q8 on; this model has no HC tensors
    let mut app = new_app();
    app.apply_event(hello(&[("STRATA_HC_Q8", true)]));
    app.apply_event(loaded(SMOL, "llama", false, &["Q4_1"], false));
    toggles_at(&mut app, "STRATA_HC_Q8");
    let screen = format!("{}", draw(&app, 120, 30).backend());
    assert!(screen.contains("(Space turns it off)"), "{screen}");
    app.handle_key(key(KeyCode::Char(' ')));
    assert_eq!(app.pending_flags.get("STRATA_HC_Q8"), Some(&false));
    assert!(app.toggles_note.is_none());
    let acts = app.handle_key(key(KeyCode::Enter));
    assert!(
        matches!(acts.as_slice(), [Action::Restart { flags, .. }] if !flags["STRATA_HC_Q8"]),
        "{acts:?}"
    );
}

#[test]
fn with_no_model_loaded_the_toggles_wait_for_one() {
    let mut app = new_app();
    app.apply_event(hello(&[]));
    toggles_at(&mut app, "STRATA_MMVQ_KREG");
    app.handle_key(key(KeyCode::Char(' ')));
    assert_eq!(app.pending_flags.get("STRATA_MMVQ_KREG"), Some(&false));
    assert!(app
        .toggles_note
        .as_ref()
        .unwrap()
        .contains("no model loaded yet"));
    // once a model with its formats is loaded it can
    app.handle_key(key(KeyCode::Esc));
    app.apply_event(loaded(
        "/m/gemma.gguf",
        "gemma3",
        false,
        &["Q4_K", "Q6_K"],
        false,
    ));
    toggles_at(&mut app, "STRATA_MMVQ_KREG");
    app.handle_key(key(KeyCode::Char(' ')));
    assert_eq!(app.pending_flags.get("STRATA_MMVQ_KREG"), Some(&true));
}

#[test]
fn the_engines_vnni_refusal_is_learned_and_then_the_toggle_refuses() {
    // e.g. on a GPU: the engine refuses STRATA_VNNI at load and says why
    let mut app = ready_app();
    app.apply_event(Event::Error(EngineError {
        id: None,
        message: "loading the model: mmvq_vnni: STRATA_VNNI: the integer-dot kernel cannot run \
                  here: device Intel(R) Arc(TM) A770 Graphics is not the CPU device"
            .into(),
        fatal: false,
    }));
    toggles_at(&mut app, "STRATA_VNNI");
    app.handle_key(key(KeyCode::Char(' ')));
    assert_eq!(app.pending_flags.get("STRATA_VNNI"), Some(&false));
    assert!(
        app.toggles_note
            .as_ref()
            .unwrap()
            .contains("not the CPU device"),
        "{:?}",
        app.toggles_note
    );
}

#[test]
fn the_preset_picker_shows_the_flags_the_engine_runs_with() {
    let mut app = ready_app();
    // KREG applies to this model (Q6_K): turn it on, the engine restarts with it
    toggles_at(&mut app, "STRATA_MMVQ_KREG");
    app.handle_key(key(KeyCode::Char(' ')));
    let acts = app.handle_key(key(KeyCode::Enter));
    assert!(
        matches!(acts.as_slice(), [Action::Restart { .. }]),
        "{acts:?}"
    );
    app.apply_event(hello(&[("STRATA_MMVQ_KREG", true)]));
    app.apply_event(loaded(SMOL, "llama", false, &["Q4_1", "Q6_K"], false));
    app.handle_key(ctrl('p'));
    let screen = format!("{}", draw(&app, 110, 24).backend());
    let default_line = screen
        .lines()
        .skip_while(|l| !l.contains("(current)"))
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(
        default_line.contains("running MMVQ_KREG (preset: no flags)"),
        "{screen}"
    );
    // another preset's line is what switching to it runs with
    assert!(screen.contains("· VNNI ·"), "{screen}");
}

#[test]
fn ctrl_c_stops_the_reply_first_and_quits_at_the_second_press() {
    let mut app = ready_app();
    let id = send(&mut app, "Count to a thousand.");
    stream(&mut app, id, "1, 2, 3, 4");
    let acts = app.handle_key(ctrl('c'));
    assert_eq!(acts, vec![Action::Send(Request::Cancel { id })]);
    assert!(!app.quit, "the first Ctrl+C stops the reply, not the app");
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("Ctrl+C again to quit"));
    app.apply_event(turn(id, 50.0, Stop::Cancelled));
    assert_eq!(app.messages.last().unwrap().status, MsgStatus::Stopped);
    let acts = app.handle_key(ctrl('c'));
    assert!(app.quit);
    assert_eq!(acts, vec![Action::Save, Action::Quit]);
}

#[test]
fn ctrl_c_when_idle_asks_for_a_second_press_and_other_keys_disarm_it() {
    let mut app = ready_app();
    assert!(app.handle_key(ctrl('c')).is_empty());
    assert!(!app.quit);
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("Ctrl+C again to quit"));
    type_text(&mut app, "x"); // anything else in between: the next Ctrl+C starts over
    assert!(app.handle_key(ctrl('c')).is_empty());
    assert!(!app.quit);
    assert_eq!(app.input.text(), "x", "the draft is kept");
    assert_eq!(app.handle_key(ctrl('c')), vec![Action::Save, Action::Quit]);
    assert!(app.quit);
    // Ctrl+Q quits at once
    let mut app = ready_app();
    assert_eq!(app.handle_key(ctrl('q')), vec![Action::Save, Action::Quit]);
}

#[test]
fn ctrl_l_after_a_failed_load_restarts_and_ends_in_the_failure_not_starting() {
    let mut app = new_app();
    app.apply_client(ClientEvent::Spawned { pid: 10 });
    app.apply_event(hello(&[]));
    let failed = || {
        Event::Error(EngineError {
            id: None,
            message: "cannot open /nope.gguf: No such file or directory".into(),
            fatal: false,
        })
    };
    app.apply_event(failed());
    assert!(matches!(&app.engine, EngineState::Down(r) if r.contains("/nope.gguf")));
    assert_eq!(app.handle_key(ctrl('l')), vec![Action::RetryEngine]);
    assert_eq!(app.engine, EngineState::Starting);
    // the client restarts the engine (tests/tui_engine_client.rs), which fails the same way
    app.apply_client(ClientEvent::Spawned { pid: 11 });
    app.apply_event(hello(&[]));
    app.apply_event(failed());
    assert!(
        matches!(&app.engine, EngineState::Down(r) if r.contains("/nope.gguf")),
        "{:?}",
        app.engine
    );
    // a preset with no model to load: Ctrl+L says so instead of "starting"
    let mut app = new_app();
    app.preset.model = None;
    assert!(app.handle_key(ctrl('l')).is_empty());
    assert!(
        matches!(&app.engine, EngineState::Down(r) if r.contains("names no model")),
        "{:?}",
        app.engine
    );
}

#[test]
fn a_failed_save_on_quit_keeps_a_recovery_copy_and_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // the data dir is a file: every save fails (root ignores permissions, not this)
    std::fs::write(dir.path().join("data"), "not a directory").unwrap();
    let history = crate::history::HistoryStore::new(dir.path().join("data/conversations"));
    let mut app = mid_conversation();
    super::save(&mut app, &history);
    let why = app.unsaved.clone().expect("the failed save is remembered");
    assert!(why.contains("data/conversations"), "{why}");
    let rec = dir.path().join("state/recovery");
    let err = super::unsaved_on_quit(&app, &[dir.path().join("data/x"), rec.clone()])
        .unwrap_err()
        .to_string();
    let copy = rec.join(format!("{}.json", app.conversation_id));
    assert!(
        err.contains("could not be saved") && err.contains(&copy.display().to_string()),
        "{err}"
    );
    let saved: crate::history::Conversation =
        serde_json::from_slice(&std::fs::read(&copy).unwrap()).unwrap();
    assert_eq!(
        saved,
        app.conversation(),
        "the copy is the whole conversation"
    );
    // a later successful save clears it: quitting is then Ok
    let ok = crate::history::HistoryStore::new(dir.path().join("ok/conversations"));
    super::save(&mut app, &ok);
    assert!(app.unsaved.is_none());
    assert!(super::unsaved_on_quit(&app, &[rec]).is_ok());
}
