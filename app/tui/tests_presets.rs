//! Presets and resume (no snapshots): switching presets (a restart or a reload), toggles that
//! change nothing, bad preset files, resuming a saved conversation under its preset and model.
//! Built and drawn as `tests.rs` does, with its helpers.

use std::collections::BTreeMap;

use ratatui::crossterm::event::KeyCode;
use strata::protocol::*;

use super::app::{Action, Overlay};
use super::tests::*;
use crate::client::ClientEvent;
use crate::presets::{PresetError, PresetStore};

#[test]
fn toggles_apply_without_change_does_nothing() {
    let mut app = ready_app();
    app.handle_key(ctrl('t'));
    assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn switching_preset_with_other_flags_restarts_with_its_load() {
    let mut app = ready_app();
    let store = PresetStore::load(None);
    let mut p = store.find("gemma3").unwrap().clone();
    p.model = Some("/models/gemma.gguf".into());
    let acts = app.switch_preset(p);
    let [Action::Restart {
        flags,
        load: Some(l),
    }] = acts.as_slice()
    else {
        panic!("{acts:?}")
    };
    assert_eq!(l.model, "/models/gemma.gguf");
    assert_eq!(flags.get("STRATA_MMVQ_KREG"), Some(&true));
    let _: &BTreeMap<String, bool> = flags;
}

#[test]
fn bad_preset_starts_on_defaults_and_shows_the_error_with_position() {
    use super::{build_app, Options};
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("mine.toml");
    std::fs::write(&bad, "ctx = 1024\n[sampling]\ntop_q = 3\n").unwrap();
    let history = crate::history::HistoryStore::new(dir.path().join("conv"));
    let opts = Options {
        preset: Some(bad.to_string_lossy().into_owned()),
        ..Options::default()
    };
    let mut app = build_app(&opts, &history);
    assert_eq!(app.preset.name, "default", "started on the defaults");
    assert_eq!(app.banner.len(), 1);
    assert!(
        app.banner[0].contains("mine.toml:3:1") && app.banner[0].contains("top_q"),
        "{:?}",
        app.banner
    );
    assert!(app.preset_errors.iter().any(|e| e.line == 3));
    // A later notice (engine death) does not hide it.
    app.apply_client(ClientEvent::Died {
        reason: "x".into(),
        in_flight: vec![],
    });
    let screen = format!("{}", draw(&app, 120, 30).backend());
    assert!(screen.contains("mine.toml:3:1"), "{screen}");

    let app = build_app(
        &Options {
            preset: Some("no-such-preset".into()),
            ..Options::default()
        },
        &history,
    );
    assert!(app.banner[0].contains("no such preset"), "{:?}", app.banner);
}

#[test]
fn preset_badsyntax_names_its_parse_error_once() {
    use super::{build_app_with, Options};
    let dir = tempfile::tempdir().unwrap();
    let history = crate::history::HistoryStore::new(dir.path().join("conv"));
    let store = PresetStore {
        presets: PresetStore::load(None).presets,
        errors: vec![PresetError {
            file: "/home/u/.config/strata/presets/badsyntax.toml".into(),
            line: 2,
            col: 10,
            message: "invalid table header; expected `.`, `]`".into(),
        }],
    };
    let app = build_app_with(
        &Options {
            preset: Some("badsyntax".into()),
            ..Options::default()
        },
        &history,
        &store,
    );
    assert!(
        app.banner[0].contains("badsyntax.toml:2:10: invalid table header; expected"),
        "{:?}",
        app.banner
    );
    assert_eq!(app.preset_errors.len(), 1, "listed once in the picker");
}

#[test]
fn resume_reloads_a_saved_conversation_and_reports_a_corrupt_one() {
    use super::{build_app, Options};
    let dir = tempfile::tempdir().unwrap();
    let history = crate::history::HistoryStore::new(dir.path().join("conv"));
    let mut app = mid_conversation();
    app.apply_event(turn(2, 60.0, Stop::Eos));
    history.save(&app.conversation()).unwrap();
    let resumed = build_app(
        &Options {
            resume: Some(None),
            ..Options::default()
        },
        &history,
    );
    assert_eq!(resumed.conversation_id, app.conversation_id);
    assert_eq!(resumed.messages.len(), 4);
    assert_eq!(resumed.messages[1].content, REPLY);
    std::fs::write(dir.path().join("conv/20251130-000000.json"), "{").unwrap();
    let r = build_app(
        &Options {
            resume: Some(Some("20251130-000000".into())),
            ..Options::default()
        },
        &history,
    );
    assert!(r.messages.is_empty());
    assert!(r.banner[0].contains("moved it to"), "{:?}", r.banner);
    assert!(dir
        .path()
        .join("conv/20251130-000000.json.corrupt-1")
        .exists());
}

#[test]
fn switching_preset_with_the_same_flags_starts_fresh_series_and_keeps_the_old_medians() {
    let mut app = mid_conversation();
    app.apply_event(turn(2, 63.0, Stop::Eos));
    let (windows_before, turns_before) = (app.metrics.windows, app.metrics.turns);
    assert!(windows_before > 0 && turns_before > 0);
    let store = PresetStore::load(None);
    let mut p = store.find("spec-ab").unwrap().clone();
    p.model = Some(SMOL.into());
    // spec-ab has no flag on, like the default preset: a reload, not a restart
    let acts = app.switch_preset(p);
    let [Action::Send(Request::Load(l))] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert_eq!(l.spec, 4);
    let prev = app
        .previous
        .as_ref()
        .expect("the default preset's medians kept");
    assert_eq!(prev.label, "default · no flags");
    assert_eq!(prev.turns, turns_before);
    assert_eq!((app.metrics.windows, app.metrics.turns), (0, 0));
    // the new preset's turn is measured on its own
    app.apply_event(loaded(SMOL, "llama", false, &["Q4_1"], false));
    let id = send(&mut app, "Count to five.");
    windows(&mut app, id, &[6.1, 6.3], &[4, 3]);
    app.apply_event(turn(id, 120.0, Stop::Eos));
    assert_eq!((app.metrics.windows, app.metrics.turns), (2, 1));
    let top = draw(&app, 120, 40);
    let screen: String = top
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(screen.contains("before (default · no flags)"), "{screen}");
}

#[test]
fn resume_goes_on_under_the_conversations_preset_and_model() {
    use super::{build_app, Options};
    let dir = tempfile::tempdir().unwrap();
    let history = crate::history::HistoryStore::new(dir.path().join("conv"));
    // a conversation held under spec-ab with a model given by path (--model then)
    let model = dir.path().join("mine.gguf");
    std::fs::write(&model, b"GGUF").unwrap();
    let mut c = mid_conversation().conversation();
    c.preset = "spec-ab".into();
    c.model = model.to_string_lossy().into_owned();
    history.save(&c).unwrap();
    let resume = |preset: Option<&str>| {
        build_app(
            &Options {
                resume: Some(Some(c.id.clone())),
                preset: preset.map(str::to_string),
                ..Options::default()
            },
            &history,
        )
    };
    let app = resume(None);
    assert_eq!(app.preset.name, "spec-ab");
    assert_eq!(app.preset.spec, 4);
    assert_eq!(app.preset.model.as_deref(), Some(c.model.as_str()));
    assert!(app.banner.is_empty(), "{:?}", app.banner);
    // --preset wins over the conversation's
    let app = resume(Some("default"));
    assert_eq!(app.preset.name, "default");
    assert_eq!(app.messages.len(), c.messages.len());
    // a preset that no longer exists: the default, said so
    c.preset = "gone-since".into();
    history.save(&c).unwrap();
    let app = resume(None);
    assert_eq!(app.preset.name, "default");
    assert!(
        app.banner[0].contains("\"gone-since\" is gone"),
        "{:?}",
        app.banner
    );
    assert_eq!(app.messages.len(), c.messages.len());
    // a model file that moved: the preset's model, said so
    c.preset = "spec-ab".into();
    std::fs::remove_file(&model).unwrap();
    history.save(&c).unwrap();
    let app = resume(None);
    assert_eq!(app.preset.name, "spec-ab");
    assert_eq!(app.preset.model.as_deref(), Some("$STRATA_MODEL_SMOLLM2"));
    assert!(app.banner[0].contains("is not there"), "{:?}", app.banner);
}
