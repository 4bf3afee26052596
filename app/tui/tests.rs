//! Screen tests: the app state is built by feeding real protocol events and key presses through
//! `App::apply_event` / `App::handle_key`, then drawn with ratatui's TestBackend and compared with
//! reviewed insta snapshots (`snapshots/`).

use std::collections::BTreeMap;
use std::time::Duration;

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use strata::protocol::*;

use super::app::{Action, App, EngineState, MsgStatus, Overlay};
use super::{panes, ui};
use crate::client::ClientEvent;
use crate::presets::{PresetError, PresetStore};

pub(super) const SMOL: &str = "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

pub(super) fn new_app() -> App {
    let store = PresetStore::load(None);
    let mut app = App::new(
        store.default_preset(),
        store.presets.clone(),
        "20251129-231735".into(),
        1_764_458_255,
    );
    // screens must not depend on the CPU the tests run on (STRATA_VNNI's AVX2 check)
    app.host = super::flags::Host::capable();
    app
}

pub(super) fn hello(flags: &[(&str, bool)]) -> Event {
    Event::Hello(Hello {
        version: PROTOCOL_VERSION,
        pid: 4242,
        flags: flags.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    })
}

pub(super) fn loaded(model: &str, arch: &str, hc: bool, types: &[&str], experts: bool) -> Event {
    Event::Loaded(Loaded {
        model: model.into(),
        arch: arch.into(),
        n_ctx: 2048,
        n_params: 134_515_008,
        load_ms: 412.0,
        hc,
        quant_types: types.iter().map(|s| s.to_string()).collect(),
        experts,
        synthetic: false,
    })
}

pub(super) fn card(
    index: u32,
    mib: [u64; 4],
    budget_mib: u64,
    experts: Option<ExpertCache>,
) -> Card {
    let m = |v: u64| v * 1024 * 1024;
    Card {
        index,
        name: format!("cpu.{index}"),
        used: MemoryUse {
            weights: m(mib[0]),
            kv: m(mib[1]),
            scratch: m(mib[2]),
            other: m(mib[3]),
            hc_q8: 0,
        },
        budget: m(budget_mib),
        experts,
        host: None,
    }
}

pub(super) fn turn(id: u64, decode_tps: f64, stop: Stop) -> Event {
    Event::Turn(Turn {
        id,
        prefill_tokens: 24,
        prefill_ms: 80.0,
        prefill_tps: 300.0,
        decode_tokens: 40,
        decode_ms: 40.0 / decode_tps * 1000.0,
        decode_tps,
        windows: 16,
        tokens_per_window: 2.5,
        proposed: 64,
        accepted: 24,
        acceptance: 0.375,
        mean_accepted_len: 1.5,
        ttft_ms: 95.0,
        stop,
        prompt_tokens: 24,
        n_past: 65,
        dropped: 0,
    })
}

pub(super) fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

pub(super) fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

pub(super) fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
}

/// Types a message, presses Enter, returns the generate id the app sent.
pub(super) fn send(app: &mut App, text: &str) -> u64 {
    type_text(app, text);
    let acts = app.handle_key(key(KeyCode::Enter));
    match acts.as_slice() {
        [Action::Send(Request::Generate(g))] => g.id,
        other => panic!("Enter did not send a generate: {other:?}"),
    }
}

pub(super) fn stream(app: &mut App, id: u64, text: &str) {
    // Feed in small pieces, as the engine does.
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(5) {
        app.apply_event(Event::Token(Token {
            id,
            text: piece.iter().collect(),
        }));
    }
}

pub(super) fn windows(app: &mut App, id: u64, ms: &[f64], accepted: &[u32]) {
    for (m, a) in ms.iter().zip(accepted) {
        app.apply_event(Event::Window(Window {
            id,
            ms: *m,
            t: 5,
            proposed: 4,
            accepted: *a,
        }));
    }
}

pub(super) fn ready_app() -> App {
    let mut app = new_app();
    app.apply_event(hello(&[
        ("STRATA_HC_Q8", false),
        ("STRATA_GR_FUSED", false),
        ("STRATA_MMVQ_KREG", false),
    ]));
    app.apply_event(Event::Progress(Progress {
        stage: "tensors".into(),
        done: 272,
        total: 272,
        detail: None,
    }));
    app.apply_event(loaded(
        SMOL,
        "llama",
        false,
        &["Q4_1", "Q6_K", "F32"],
        false,
    ));
    app.apply_event(Event::Devices(Devices {
        cards: vec![
            card(0, [48, 12, 6, 1], 512, None),
            card(1, [40, 12, 6, 1], 512, None),
        ],
    }));
    assert_eq!(app.engine, EngineState::Ready);
    app
}

const REPLY: &str = "## Rust iterators\n\nAn iterator yields items **lazily**:\n\n- `map` transforms each item\n- `filter` keeps some\n  1. nested step\n\n```rust\nlet v: Vec<u32> = (1..4).map(|x| x * 2).collect(); // [2, 4, 6]\n```\n\nThat is all.";

pub(super) fn mid_conversation() -> App {
    let mut app = ready_app();
    let id = send(&mut app, "How do iterators work in Rust?");
    stream(&mut app, id, REPLY);
    windows(
        &mut app,
        id,
        &[12.4, 11.8, 13.1, 12.0, 12.6, 11.9],
        &[2, 1, 3, 0, 2, 1],
    );
    app.apply_event(turn(id, 61.5, Stop::Eos));
    let id2 = send(&mut app, "And in Python?\nShort answer please.");
    stream(
        &mut app,
        id2,
        "Python has the iterator protocol: `__iter__` and",
    );
    windows(&mut app, id2, &[12.2, 12.8], &[3, 2]);
    app
}

pub(super) fn draw(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    t
}

#[test]
fn snapshot_main_screen_mid_conversation() {
    let app = mid_conversation();
    assert_eq!(app.engine, EngineState::Generating(2));
    insta::assert_snapshot!(draw(&app, 120, 40).backend());
}

#[test]
fn snapshot_toggles_pane_on_hyper_connection_model() {
    let mut app = new_app();
    app.apply_event(hello(&[
        ("STRATA_HC_Q8", false),
        ("STRATA_GR_FUSED", true),
        ("STRATA_MMVQ_KREG", false),
    ]));
    app.apply_event(loaded(
        "/models/hc-model.gguf",
        "deepseek4",
        true,
        &["BF16", "Q8_0", "F32"],
        true,
    ));
    app.apply_client(ClientEvent::Restarted { ms: 1834.0 });
    app.handle_key(ctrl('t'));
    app.handle_key(key(KeyCode::Char(' '))); // HC_Q8 on (pending)
    assert!(matches!(app.overlay, Overlay::Toggles { cursor: 0 }));
    insta::assert_snapshot!(draw(&app, 120, 30).backend());
}

#[test]
fn snapshot_toggles_pane_on_dense_model() {
    let mut app = ready_app();
    app.handle_key(ctrl('t'));
    app.handle_key(key(KeyCode::Down));
    app.handle_key(key(KeyCode::Down));
    insta::assert_snapshot!(draw(&app, 110, 24).backend());
}

#[test]
fn snapshot_help_overlay() {
    let mut app = ready_app();
    app.handle_key(key(KeyCode::Char('?')));
    assert_eq!(app.overlay, Overlay::Help);
    assert!(
        app.input.is_empty(),
        "? on an empty input opens help, it is not typed"
    );
    insta::assert_snapshot!(draw(&app, 100, 26).backend());
}

#[test]
fn snapshot_presets_picker_with_a_bad_file() {
    let mut app = ready_app();
    app.preset_errors.push(PresetError {
        file: "/home/u/.config/strata/presets/mine.toml".into(),
        line: 4,
        col: 1,
        message: "unknown field `top_q`".into(),
    });
    app.handle_key(ctrl('p'));
    app.handle_key(key(KeyCode::Down));
    insta::assert_snapshot!(draw(&app, 110, 24).backend());
}

#[test]
fn snapshot_terminal_too_small() {
    let app = mid_conversation();
    insta::assert_snapshot!(draw(&app, 50, 12).backend());
}

#[test]
fn snapshot_narrow_terminal_hides_panels() {
    let app = mid_conversation();
    insta::assert_snapshot!(draw(&app, 70, 24).backend());
}

pub(super) fn draw_devices(app: &App) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(44, 14)).unwrap();
    t.draw(|f| panes::devices::render(app, f, f.area()))
        .unwrap();
    t
}

#[test]
fn snapshot_dense_model_has_no_experts() {
    let app = ready_app();
    insta::assert_snapshot!(draw_devices(&app).backend());
}

#[test]
fn snapshot_moe_model_expert_cache() {
    let mut app = new_app();
    app.apply_event(loaded(
        "/models/moe.gguf",
        "qwen3moe",
        false,
        &["Q4_K"],
        true,
    ));
    let hits = |h, m, r| {
        Some(ExpertCache {
            hits: h,
            misses: m,
            refusals: r,
        })
    };
    app.apply_event(Event::Devices(Devices {
        cards: vec![
            card(0, [300, 40, 16, 2], 512, hits(1200, 85, 3)),
            card(1, [280, 40, 16, 2], 512, hits(990, 140, 0)),
        ],
    }));
    insta::assert_snapshot!(draw_devices(&app).backend());
}

#[test]
fn snapshot_ab_after_flag_change() {
    let mut app = mid_conversation();
    app.apply_event(turn(2, 63.0, Stop::Eos));
    app.handle_key(ctrl('t'));
    app.handle_key(key(KeyCode::Down));
    app.handle_key(key(KeyCode::Down));
    app.handle_key(key(KeyCode::Char(' '))); // MMVQ_KREG
    let acts = app.handle_key(key(KeyCode::Enter));
    let Some(Action::Restart { flags, load: None }) = acts.last() else {
        panic!("no restart: {acts:?}")
    };
    assert!(flags["STRATA_MMVQ_KREG"]);
    // The engine comes back with the new flags and is measured again.
    app.apply_client(ClientEvent::Spawned { pid: 4243 });
    app.apply_event(hello(&[
        ("STRATA_HC_Q8", false),
        ("STRATA_GR_FUSED", false),
        ("STRATA_MMVQ_KREG", true),
    ]));
    app.apply_event(loaded(
        SMOL,
        "llama",
        false,
        &["Q4_1", "Q6_K", "F32"],
        false,
    ));
    app.apply_client(ClientEvent::Restarted { ms: 951.0 });
    let id = send(&mut app, "Again?");
    stream(&mut app, id, "Yes.");
    windows(&mut app, id, &[10.9, 11.2, 11.0], &[2, 2, 1]);
    app.apply_event(turn(id, 66.0, Stop::Eos));
    let prev = app.previous.as_ref().expect("previous medians kept");
    assert_eq!(prev.label, "no flags");
    assert_eq!(app.metrics.windows, 3, "new flag set starts fresh");
    insta::assert_snapshot!(draw(&app, 120, 40).backend());
}

// ---- behaviour (no snapshots) ----

#[test]
fn engine_death_keeps_conversation_and_marks_partial_reply() {
    let mut app = mid_conversation();
    let n = app.messages.len();
    let acts = app.apply_client(ClientEvent::Died {
        reason: "the engine exited (signal 9)".into(),
        in_flight: vec![2],
    });
    assert_eq!(acts, vec![Action::Save]);
    assert_eq!(app.messages.len(), n);
    let last = app.messages.last().unwrap();
    assert_eq!(last.status, MsgStatus::Interrupted);
    assert!(last.content.starts_with("Python has"));
    assert!(app.notice.as_ref().unwrap().text.contains("signal 9"));
    app.apply_client(ClientEvent::Restarting {
        attempt: 1,
        delay: Duration::from_millis(500),
    });
    assert_eq!(
        app.engine,
        EngineState::Restarting {
            attempt: 1,
            delay_ms: 500
        }
    );
    // Tokens of the dead generation arriving late change nothing.
    app.apply_event(Event::Token(Token {
        id: 2,
        text: "zzz".into(),
    }));
    assert!(!app.messages.last().unwrap().content.contains("zzz"));
    let saved = app.conversation();
    assert!(saved.messages.last().unwrap().interrupted);
}

#[test]
fn esc_cancels_and_the_turn_marks_the_reply_stopped() {
    let mut app = mid_conversation();
    assert_eq!(
        app.handle_key(key(KeyCode::Esc)),
        vec![Action::Send(Request::Cancel { id: 2 })]
    );
    app.apply_event(turn(2, 60.0, Stop::Cancelled));
    assert_eq!(app.messages.last().unwrap().status, MsgStatus::Stopped);
    assert_eq!(app.engine, EngineState::Ready);
}

#[test]
fn regenerate_resends_history_up_to_the_last_question() {
    let mut app = mid_conversation();
    app.apply_event(turn(2, 60.0, Stop::Eos));
    let acts = app.handle_key(ctrl('r'));
    let [Action::Send(Request::Generate(g))] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert_eq!(g.id, 3);
    let roles: Vec<Role> = g.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::System, Role::User, Role::Assistant, Role::User]
    );
    assert_eq!(
        g.messages[3].content,
        "And in Python?\nShort answer please."
    );
    assert_eq!(app.messages.last().unwrap().status, MsgStatus::Streaming);
    assert!(app.messages.last().unwrap().content.is_empty());
}

#[test]
fn enter_sends_ctrl_j_and_shift_enter_insert_newlines() {
    let mut app = ready_app();
    type_text(&mut app, "a");
    assert!(app.handle_key(ctrl('j')).is_empty());
    type_text(&mut app, "b");
    assert!(app
        .handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT))
        .is_empty());
    type_text(&mut app, "c?");
    assert_eq!(app.input.text(), "a\nb\nc?");
    let acts = app.handle_key(key(KeyCode::Enter));
    let [Action::Send(Request::Generate(g))] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert_eq!(g.messages.last().unwrap().content, "a\nb\nc?");
    assert!(app.input.is_empty());
}

#[test]
fn sending_to_a_down_engine_is_refused_with_a_notice() {
    let mut app = new_app();
    app.apply_client(ClientEvent::GaveUp { attempts: 6 });
    type_text(&mut app, "hi");
    assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
    assert_eq!(app.input.text(), "hi", "the text is kept");
    assert!(app.notice.as_ref().unwrap().text.contains("not ready"));
    assert!(app.messages.is_empty());
}

#[test]
fn chat_cache_relayouts_only_what_changed() {
    let mut app = mid_conversation();
    draw(&app, 120, 40);
    let after_first = app.chat_cache.builds();
    assert_eq!(after_first, app.messages.len());
    draw(&app, 120, 40);
    assert_eq!(
        app.chat_cache.builds(),
        after_first,
        "unchanged messages are not laid out again"
    );
    app.apply_event(Event::Token(Token {
        id: 2,
        text: " `__next__`".into(),
    }));
    draw(&app, 120, 40);
    assert_eq!(
        app.chat_cache.builds(),
        after_first + 1,
        "only the streaming message"
    );
    draw(&app, 110, 40);
    assert_eq!(
        app.chat_cache.builds(),
        after_first + 1 + app.messages.len(),
        "a new width relayouts all"
    );
}

#[test]
fn view_follows_the_stream_only_at_the_bottom() {
    let mut app = mid_conversation();
    let t = draw(&app, 120, 20);
    let (total, height) = app.chat_geometry.get();
    assert!(
        total > height,
        "the test needs a conversation taller than the view"
    );
    assert!(app.scroll.following());
    app.handle_key(key(KeyCode::PageUp));
    assert!(!app.scroll.following());
    let top = app.scroll.top(total, height);
    assert!(top < total - height);
    drop(t);
    let before = format!("{}", draw(&app, 120, 20).backend());
    for _ in 0..5 {
        app.apply_event(Event::Token(Token {
            id: 2,
            text: " more words\n\nand lines".into(),
        }));
    }
    let t = draw(&app, 120, 20);
    let (total2, _) = app.chat_geometry.get();
    assert!(total2 > total);
    assert_eq!(
        app.scroll.top(total2, height),
        top,
        "a pinned view does not move while the reply grows"
    );
    let chat_rows = |s: &str| {
        s.lines()
            .skip(2)
            .take(8)
            .map(|l| l.chars().take(70).collect::<String>())
            .collect::<Vec<_>>()
    };
    assert_eq!(chat_rows(&before), chat_rows(&format!("{}", t.backend())));
    // Back down to the bottom: following again, and new text shows.
    for _ in 0..20 {
        app.handle_key(key(KeyCode::PageDown));
    }
    assert!(app.scroll.following());
    app.apply_event(Event::Token(Token {
        id: 2,
        text: " THE-END".into(),
    }));
    let t = draw(&app, 120, 20);
    assert!(format!("{}", t.backend()).contains("THE-END"));
}

#[test]
fn scroll_logic() {
    use super::app::Scroll;
    let mut s = Scroll::default();
    assert_eq!(s.top(100, 20), 80);
    s.up(5, 100, 20);
    assert_eq!(s.top(100, 20), 75);
    assert_eq!(s.top(150, 20), 75, "pinned");
    s.down(3, 150, 20);
    assert_eq!(s.top(150, 20), 78);
    s.down(1000, 150, 20);
    assert!(s.following());
    assert_eq!(s.top(150, 20), 130);
    s.up(5, 10, 20);
    assert!(s.following(), "nothing to scroll when everything fits");
}

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

/// The top line of a drawn screen.
pub(super) fn top_line(t: &Terminal<TestBackend>) -> String {
    let b = t.backend().buffer();
    (0..b.area.width)
        .map(|x| b[(x, 0)].symbol().to_string())
        .collect()
}

#[test]
fn a_long_kernel_build_shows_in_the_status_bar() {
    let mut app = new_app();
    app.apply_event(hello(&[("STRATA_VNNI", true)]));
    let detail = "compiling mmvq_vnni Q4_1 VNNI_AVX2 (7 s, 12 modules ready)";
    app.apply_event(Event::Progress(Progress {
        stage: "weights+kernels".into(),
        done: 3,
        total: 5,
        detail: Some(detail.into()),
    }));
    // wide: the whole state, the model's file ($STRATA_MODEL_SMOLLM2 resolved when set up) and
    // the conversation id
    let top = top_line(&draw(&app, 160, 30));
    assert!(
        top.contains(&format!("engine loading weights+kernels 3/5 · {detail}")),
        "{top}"
    );
    assert!(!top.contains("$STRATA_MODEL"), "{top}");
    assert!(top.contains("20251129-231735"), "{top}");
    // narrow: the state keeps its start, the model name and the id give way
    let top = top_line(&draw(&app, 100, 24));
    assert!(
        top.contains("engine loading weights+kernels 3/5 · compiling mm"),
        "{top}"
    );
    // the next heartbeat without a build in progress clears it
    app.apply_event(Event::Progress(Progress {
        stage: "warmup".into(),
        done: 4,
        total: 5,
        detail: None,
    }));
    let top = top_line(&draw(&app, 160, 30));
    assert!(top.contains("engine loading warmup 4/5 │"), "{top}");
    assert!(!top.contains("compiling"), "{top}");
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

#[test]
fn a_message_sent_while_the_engine_loads_goes_out_when_it_is_ready() {
    let mut app = new_app();
    app.apply_event(hello(&[]));
    app.apply_event(Event::Progress(Progress {
        stage: "weights+kernels".into(),
        done: 3,
        total: 5,
        detail: None,
    }));
    type_text(&mut app, "Hello early");
    let acts = app.handle_key(key(KeyCode::Enter));
    assert!(matches!(acts.as_slice(), [Action::Save]), "{acts:?}");
    assert_eq!(app.messages.last().unwrap().content, "Hello early");
    assert!(app.send_when_ready);
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("goes out when it is ready"));
    // a second one waits in the input, said so
    type_text(&mut app, "and more");
    assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
    assert_eq!(app.input.text(), "and more");
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("already waiting"));
    // loaded: the waiting message is generated for, with the conversation up to it
    let acts = app.apply_event(loaded(SMOL, "llama", false, &["Q4_1"], false));
    let [Action::Send(Request::Generate(g))] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert_eq!(g.messages.last().unwrap().content, "Hello early");
    assert_eq!(app.engine, EngineState::Generating(g.id));
    assert!(!app.send_when_ready);
}

#[test]
fn a_waiting_message_is_dropped_when_the_engine_gives_up_or_by_esc() {
    // the client gives up restarting: no `loaded` is coming
    let mut app = new_app();
    type_text(&mut app, "Anyone there?");
    app.handle_key(key(KeyCode::Enter));
    assert!(app.send_when_ready);
    app.apply_client(ClientEvent::GaveUp { attempts: 6 });
    assert!(!app.send_when_ready);
    let n = app.notice.as_ref().unwrap().text.clone();
    assert!(n.contains("not sent") && n.contains("Ctrl+R"), "{n}");
    assert_eq!(app.messages.last().unwrap().content, "Anyone there?");
    // Esc takes a waiting message back; a later `loaded` sends nothing
    let mut app = new_app();
    type_text(&mut app, "Never mind");
    app.handle_key(key(KeyCode::Enter));
    assert!(app.handle_key(key(KeyCode::Esc)).is_empty());
    assert!(!app.send_when_ready);
    let acts = app.apply_event(loaded(SMOL, "llama", false, &["Q4_1"], false));
    // (only the conversation's token count for the context gauge goes out)
    assert!(
        matches!(acts.as_slice(), [Action::Send(Request::Count(_))]),
        "{acts:?}"
    );
    assert_eq!(app.engine, EngineState::Ready);
    // ... and Ctrl+R sends it
    let acts = app.handle_key(ctrl('r'));
    assert!(
        matches!(acts.as_slice(), [Action::Send(Request::Generate(g))] if g.messages.last().unwrap().content == "Never mind"),
        "{acts:?}"
    );
}
