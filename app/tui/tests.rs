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

const SMOL: &str = "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

fn new_app() -> App {
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

fn hello(flags: &[(&str, bool)]) -> Event {
    Event::Hello(Hello {
        version: PROTOCOL_VERSION,
        pid: 4242,
        flags: flags.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    })
}

fn loaded(model: &str, arch: &str, hc: bool, types: &[&str], experts: bool) -> Event {
    Event::Loaded(Loaded {
        model: model.into(),
        arch: arch.into(),
        n_ctx: 2048,
        n_params: 134_515_008,
        load_ms: 412.0,
        hc,
        quant_types: types.iter().map(|s| s.to_string()).collect(),
        experts,
    })
}

fn card(index: u32, mib: [u64; 4], budget_mib: u64, experts: Option<ExpertCache>) -> Card {
    let m = |v: u64| v * 1024 * 1024;
    Card {
        index,
        name: format!("cpu.{index}"),
        used: MemoryUse {
            weights: m(mib[0]),
            kv: m(mib[1]),
            scratch: m(mib[2]),
            other: m(mib[3]),
        },
        budget: m(budget_mib),
        experts,
        host: None,
    }
}

fn turn(id: u64, decode_tps: f64, stop: Stop) -> Event {
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

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
}

/// Types a message, presses Enter, returns the generate id the app sent.
fn send(app: &mut App, text: &str) -> u64 {
    type_text(app, text);
    let acts = app.handle_key(key(KeyCode::Enter));
    match acts.as_slice() {
        [Action::Send(Request::Generate(g))] => g.id,
        other => panic!("Enter did not send a generate: {other:?}"),
    }
}

fn stream(app: &mut App, id: u64, text: &str) {
    // Feed in small pieces, as the engine does.
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(5) {
        app.apply_event(Event::Token(Token {
            id,
            text: piece.iter().collect(),
        }));
    }
}

fn windows(app: &mut App, id: u64, ms: &[f64], accepted: &[u32]) {
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

fn ready_app() -> App {
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

fn mid_conversation() -> App {
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

fn draw(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
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

fn draw_devices(app: &App) -> Terminal<TestBackend> {
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
fn top_line(t: &Terminal<TestBackend>) -> String {
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

// ---- controls that must not mislead (issue 27, defect 7) and the engine lifecycle (defect 6) ----

fn toggles_at(app: &mut App, flag: &str) {
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

// ---- panels that say what users expect (issue 27, defect 8) ----

/// The text of a drawn buffer, one string per row.
fn rows_of(t: &Terminal<TestBackend>) -> Vec<String> {
    let b = t.backend().buffer();
    (0..b.area.height)
        .map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect())
        .collect()
}

fn draw_pane(w: u16, h: u16, pane: impl FnOnce(&mut ratatui::Frame)) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(pane).unwrap();
    t
}

#[test]
fn snapshot_speed_mid_stream() {
    let mut app = ready_app();
    let id = send(&mut app, "Count to ten.");
    stream(&mut app, id, "One, two, three");
    // (3 + 1) + (2 + 1) tokens in 12.2 + 12.8 ms: 280 tok/s while the reply streams
    windows(&mut app, id, &[12.2, 12.8], &[3, 2]);
    let t = draw_pane(44, 7, |f| panes::speed::render(&app, f, f.area()));
    assert!(
        rows_of(&t)[1].contains("decode 280 tok/s live"),
        "{:#?}",
        rows_of(&t)
    );
    insta::assert_snapshot!(t.backend());
    // the turn's own figure replaces it
    app.apply_event(turn(id, 61.5, Stop::Eos));
    let t = draw_pane(44, 7, |f| panes::speed::render(&app, f, f.area()));
    assert!(
        rows_of(&t)[1].contains("decode 61.5 tok/s  median"),
        "{:#?}",
        rows_of(&t)
    );
}

#[test]
fn snapshot_reply_stats_line() {
    let mut app = ready_app();
    let id = send(&mut app, "Tell me a story.");
    stream(
        &mut app,
        id,
        "Once upon a time, a small model ran out of tokens",
    );
    app.apply_event(Event::Turn(Turn {
        decode_tokens: 63,
        decode_tps: 142.3,
        windows: 63,
        ..match turn(id, 142.3, Stop::MaxTokens) {
            Event::Turn(t) => t,
            _ => unreachable!(),
        }
    }));
    let id2 = send(&mut app, "Stop there.");
    stream(&mut app, id2, "Sure.");
    app.apply_event(Event::Turn(Turn {
        decode_tokens: 2,
        decode_tps: 88.0,
        ..match turn(id2, 88.0, Stop::Eos) {
            Event::Turn(t) => t,
            _ => unreachable!(),
        }
    }));
    let t = draw_pane(70, 20, |f| panes::chat::render(&app, f, f.area()));
    let text = rows_of(&t).join("\n");
    assert!(text.contains("64 tok · 142 tok/s · max_tokens"), "{text}");
    assert!(text.contains("3 tok · 88.0 tok/s · eos"), "{text}");
    let b = t.backend().buffer();
    let y = rows_of(&t)
        .iter()
        .position(|r| r.contains("64 tok"))
        .unwrap() as u16;
    assert_eq!(b[(1, y)].fg, ratatui::style::Color::DarkGray, "dimmed");
    insta::assert_snapshot!(t.backend());
}

#[test]
fn tokens_per_window_is_one_mean_in_both_panels() {
    let app = mid_conversation();
    // accepted 2,1,3,0,2,1,3,2 over 8 windows: (14 + 8) / 8
    assert_eq!(app.metrics.tokens_per_window(), Some(2.75));
    let w = rows_of(&draw_pane(44, 7, |f| {
        panes::window::render(&app, f, f.area())
    }))
    .join("\n");
    let d = rows_of(&draw_pane(44, 4, |f| {
        panes::draft::render(&app, f, f.area())
    }))
    .join("\n");
    assert!(w.contains("tokens/window 2.75 mean"), "{w}");
    assert!(d.contains("tokens/window 2.75 mean"), "{d}");
}

#[test]
fn snapshot_robust_sparkline() {
    let mut app = ready_app();
    let id = send(&mut app, "Go.");
    let ms = [
        12.0, 13.0, 11.0, 14.0, 12.5, 600.0, 11.5, 13.5, 12.0, 14.5, 11.0, 13.0,
    ];
    windows(&mut app, id, &ms, &[1; 12]);
    let t = draw_pane(44, 7, |f| panes::window::render(&app, f, f.area()));
    let rows = rows_of(&t);
    assert!(
        rows[1].contains("▲600 ms"),
        "the spike is marked: {rows:#?}"
    );
    // the bars other than the spike still differ (scaled to 600 they would all be one level)
    let bottom: Vec<&str> = (1..13)
        .map(|x| t.backend().buffer()[(x, 4)].symbol())
        .collect();
    let top: Vec<&str> = (1..13)
        .map(|x| t.backend().buffer()[(x, 3)].symbol())
        .collect();
    let shapes: std::collections::BTreeSet<(&str, &str)> = top
        .iter()
        .zip(&bottom)
        .enumerate()
        .filter(|(i, _)| *i != 5)
        .map(|(_, (a, b))| (*a, *b))
        .collect();
    assert!(shapes.len() >= 4, "{top:?} / {bottom:?}");
    assert_eq!(
        t.backend().buffer()[(6, 3)].fg,
        super::theme::SPIKE.fg.unwrap(),
        "the spike's bar has its own colour"
    );
    insta::assert_snapshot!(t.backend());
}

fn host_card(rss_mib: u64, budget_gib: u64) -> Card {
    let mut c = card(0, [92, 36, 9, 0], 24_064, None);
    c.name = "AMD EPYC".into();
    c.host = Some(HostMemory {
        rss: rss_mib << 20,
        budget: budget_gib << 30,
        budget_from: "meminfo".into(),
    });
    c
}

#[test]
fn snapshot_cards_with_rss() {
    let mut app = ready_app();
    app.apply_event(Event::Devices(Devices {
        cards: vec![host_card(212, 22)],
    }));
    let t = draw_devices(&app);
    let rows = rows_of(&t);
    let text = rows.join("\n");
    assert!(text.contains("RSS       212 MiB"), "{text}");
    assert!(text.contains("#0 AMD EPYC 137 MiB of the RSS"), "{text}");
    assert!(
        text.contains("of 22.0 GiB (MemAvailable + RSS) · 0.9%"),
        "{text}"
    );
    assert!(
        !text.contains("23.5 GiB"),
        "not the device's nominal memory: {text}"
    );
    // every bar shows something: the RSS against the budget, each category's share of the RSS
    for name in ["RSS", "weights", "kv", "scratch", "runtime"] {
        let row = rows
            .iter()
            .find(|r| r.contains(&format!("│{name} ")))
            .unwrap_or_else(|| panic!("no {name} row: {text}"));
        assert!(row.contains('█'), "{name}: {row}");
    }
    // weights are 92 of the 212 MiB: about 43% of the bar
    let w = rows.iter().find(|r| r.contains("│weights")).unwrap();
    let filled = w.matches('█').count() as f64;
    let cells = filled + w.matches('░').count() as f64;
    assert!((filled / cells - 92.0 / 212.0).abs() < 0.05, "{w}");
    insta::assert_snapshot!(t.backend());
}

#[test]
fn snapshot_long_error_expanded() {
    let mut app = ready_app();
    app.notify(super::app::Level::Warn, "an older warning");
    let long = format!(
        "engine: load /home/user/models/{}.gguf: tensor blk.29.ffn_down.weight: type Q4_1 \
         needs 2359296 bytes at offset 98234112 but the file ends at 97000000 (truncated \
         download? compare its size with the publisher's)",
        "a-very-long-directory-name/".repeat(6)
    );
    app.apply_event(Event::Error(EngineError {
        id: None,
        message: long.trim_start_matches("engine: ").into(),
        fatal: false,
    }));
    // the bottom bar wraps the error over three rows and points at the whole text
    let screen = rows_of(&draw(&app, 100, 30));
    let bar = screen[27..].join("");
    assert!(
        bar.contains("engine: load /home/user/models/"),
        "{screen:#?}"
    );
    assert!(bar.contains("… Ctrl+G shows all"), "{screen:#?}");
    assert!(app.handle_key(ctrl('g')).is_empty());
    assert_eq!(app.overlay, Overlay::Log { scroll: 0 });
    let t = draw(&app, 100, 30);
    let all: String = rows_of(&t)
        .iter()
        .map(|r| r.trim_matches(|c| c == '│' || c == ' ').to_string())
        .collect::<Vec<_>>()
        .join(" ");
    for word in ["truncated", "publisher's)", "98234112"] {
        assert!(all.contains(word), "{word} missing: {all}");
    }
    let newest = all.find("✗ engine: load").unwrap();
    let older = all.find("! an older warning").unwrap();
    assert!(newest < older, "newest first");
    insta::assert_snapshot!(t.backend());
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(app.overlay, Overlay::None);
}

fn saved_conversation(history: &crate::history::HistoryStore, unix: u64, lines: &[&str]) -> String {
    let id = history.new_id(unix);
    let messages = lines
        .iter()
        .enumerate()
        .map(|(i, l)| crate::history::SavedMessage {
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            content: l.to_string(),
            interrupted: false,
        })
        .collect();
    history
        .save(&crate::history::Conversation {
            version: crate::history::FORMAT_VERSION,
            id: id.clone(),
            created: unix,
            preset: "default".into(),
            model: SMOL.into(),
            messages,
            settings: None,
        })
        .unwrap();
    id
}

#[test]
fn snapshot_conversations_overlay() {
    let dir = tempfile::tempdir().unwrap();
    let history = crate::history::HistoryStore::new(dir.path().join("conv"));
    let a = saved_conversation(
        &history,
        1_764_000_000,
        &["What is a monad?\nBriefly.", "A monoid."],
    );
    let b = saved_conversation(
        &history,
        1_764_100_000,
        &[
            "Write a haiku about SYCL kernels",
            "Queues hum...",
            "Another",
            "...",
        ],
    );
    let mut app = mid_conversation();
    app.apply_event(turn(2, 60.0, Stop::Eos));
    assert_eq!(
        app.handle_key(ctrl('o')),
        vec![Action::Save, Action::ListConversations],
        "Ctrl+O saves this one first, then lists"
    );
    assert!(app.input.is_empty(), "not typed");
    super::save(&mut app, &history);
    app.show_conversations(super::conversations::list(&history).unwrap());
    assert_eq!(
        app.overlay,
        Overlay::Conversations { cursor: 0 },
        "the current one"
    );
    let t = draw(&app, 120, 30);
    let text = rows_of(&t).join("\n");
    assert!(
        text.contains(&b) && text.contains("Write a haiku about SYCL kernels"),
        "{text}"
    );
    assert!(
        text.contains(&a) && text.contains("What is a monad?"),
        "{text}"
    );
    assert!(
        text.contains("4 msgs") && text.contains("(current)"),
        "{text}"
    );
    insta::assert_snapshot!(t.backend());
    // Enter on the oldest opens it (the runtime saves first; here the action says which)
    app.handle_key(key(KeyCode::Down));
    app.handle_key(key(KeyCode::Down));
    let acts = app.handle_key(key(KeyCode::Enter));
    assert_eq!(acts, vec![Action::OpenConversation(a.clone())]);
    let acts = app.switch_conversation(history.load(&a).unwrap());
    assert!(
        matches!(acts.as_slice(), [Action::Send(Request::Count(c))] if c.messages.len() == 3),
        "nothing to cancel; the gauge counts the opened one (system prompt + 2): {acts:?}"
    );
    assert_eq!(app.conversation_id, a);
    assert_eq!(app.messages.len(), 2);
    assert_eq!(app.messages[0].content, "What is a monad?\nBriefly.");
}

#[test]
fn switching_conversation_mid_reply_cancels_it() {
    let dir = tempfile::tempdir().unwrap();
    let history = crate::history::HistoryStore::new(dir.path().join("conv"));
    let a = saved_conversation(&history, 1_764_000_000, &["Hi", "Hello"]);
    let mut app = mid_conversation();
    assert!(app.engine.is_busy());
    let acts = app.switch_conversation(history.load(&a).unwrap());
    assert_eq!(acts[0], Action::Send(Request::Cancel { id: 2 }), "{acts:?}");
    assert_eq!(app.engine, EngineState::Ready);
    assert_eq!(app.conversation_id, a);
}

#[test]
fn snapshot_settings_overlay() {
    let mut app = ready_app();
    assert!(app.handle_key(ctrl('s')).is_empty());
    assert_eq!(app.overlay, Overlay::Settings);
    let field = |app: &mut App, down: usize, text: &str| {
        for _ in 0..down {
            app.handle_key(key(KeyCode::Down));
        }
        app.handle_key(ctrl('u'));
        type_text(app, text);
    };
    field(&mut app, 0, "0.2"); // temperature
    field(&mut app, 2, "1.5"); // top_p: out of range
    field(&mut app, 4, "7"); // seed
    app.handle_key(key(KeyCode::Down));
    app.handle_key(ctrl('u'));
    app.handle_paste("You are a pirate.");
    app.handle_key(ctrl('j'));
    type_text(&mut app, "Answer in one line.");
    // Enter refuses top_p and moves there; nothing is applied
    assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
    assert_eq!(app.overlay, Overlay::Settings);
    let form = app.settings_form.as_ref().unwrap();
    assert_eq!(form.cursor, 2);
    assert!(app.chat_settings.is_none());
    let t = draw(&app, 110, 30);
    let text = rows_of(&t).join("\n");
    assert!(text.contains("✗ top_p: 1.5 is not in (0, 1]"), "{text}");
    insta::assert_snapshot!(t.backend());
    // fixed, Enter applies: the next generate carries the new sampling and system prompt
    app.handle_key(ctrl('u'));
    type_text(&mut app, "0.9");
    assert_eq!(app.handle_key(key(KeyCode::Enter)), vec![Action::Save]);
    assert_eq!(app.overlay, Overlay::None);
    let acts = {
        type_text(&mut app, "Hi");
        app.handle_key(key(KeyCode::Enter))
    };
    let Some(Action::Send(Request::Generate(g))) = acts.last() else {
        panic!("{acts:?}")
    };
    assert_eq!(g.sampling.temperature, 0.2);
    assert_eq!(g.sampling.top_p, 0.9);
    assert_eq!(g.sampling.seed, Some(7));
    assert_eq!(g.messages[0].role, Role::System);
    assert_eq!(
        g.messages[0].content,
        "You are a pirate.\nAnswer in one line."
    );
    // saved with the conversation, and back on load
    let saved = app.conversation();
    let s = saved.settings.clone().expect("saved");
    assert_eq!(s.sampling.seed, Some(7));
    let mut other = ready_app();
    other.load_conversation(saved);
    assert_eq!(other.preset.sampling.top_p, 0.9);
    assert_eq!(other.chat_settings, Some(s));
    // a new conversation follows the preset again
    app.new_conversation("20251130-000000".into(), 0);
    assert!(app.chat_settings.is_none());
    assert_eq!(
        app.preset.sampling,
        PresetStore::load(None).default_preset().sampling
    );
}

#[test]
fn settings_survive_a_preset_switch_and_ctrl_r_restores_the_presets() {
    let mut app = ready_app();
    app.handle_key(ctrl('s'));
    app.handle_key(ctrl('u'));
    type_text(&mut app, "0");
    app.handle_key(key(KeyCode::Enter));
    assert_eq!(app.preset.sampling.temperature, 0.0);
    let other = app
        .presets
        .iter()
        .find(|p| p.name != app.preset.name)
        .cloned()
        .expect("a second shipped preset");
    app.switch_preset(other.clone());
    assert_eq!(app.preset.name, other.name);
    assert_eq!(
        app.preset.sampling.temperature, 0.0,
        "the conversation's own"
    );
    // Ctrl+R in the form: the (new) preset's values; Enter: follow the preset again
    app.handle_key(ctrl('s'));
    app.handle_key(ctrl('r'));
    app.handle_key(key(KeyCode::Enter));
    assert!(app.chat_settings.is_none());
    assert_eq!(app.preset.sampling, other.sampling);
}

#[test]
fn a_conversation_file_without_settings_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let history = crate::history::HistoryStore::new(dir.path().to_path_buf());
    // as FORMAT_VERSION 1 files were written before settings existed
    std::fs::write(
        dir.path().join("20251129-231735.json"),
        r#"{"version":1,"id":"20251129-231735","created":1764458255,"preset":"default",
            "model":"smol.gguf","messages":[{"role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    let c = history.load("20251129-231735").unwrap();
    assert_eq!(c.settings, None);
    assert_eq!(c.messages.len(), 1);
    // and a file without them is written without the key (older apps read it as before)
    let mut app = ready_app();
    app.load_conversation(c);
    let json = serde_json::to_string(&app.conversation()).unwrap();
    assert!(!json.contains("settings"), "{json}");
}

#[test]
fn a_base_model_preset_says_so_when_it_loads() {
    let mut app = ready_app();
    let store = PresetStore::load(None);
    let mut g = store.find("gemma3").unwrap().clone();
    g.model = Some("/models/gemma.gguf".into());
    app.switch_preset(g);
    app.apply_event(loaded(
        "/models/gemma.gguf",
        "gemma3",
        false,
        &["Q4_K", "Q6_K"],
        false,
    ));
    let n = app.notice.as_ref().unwrap().text.clone();
    assert!(n.contains("gemma3") && n.contains("base model"), "{n}");
}

#[test]
fn a_restart_mid_reply_ends_the_reply_so_the_app_is_not_busy_for_good() {
    // a flag restart (Ctrl+T … Enter) and Ctrl+L while a reply streams: the old engine's
    // `turn` never comes (the client stops reading an engine it shuts down)
    for restart in ["flags", "ctrl+l"] {
        let mut app = ready_app();
        let id = send(&mut app, "Tell me a long story.");
        stream(&mut app, id, "Once upon a time");
        let acts = if restart == "flags" {
            toggles_at(&mut app, "STRATA_VNNI");
            app.handle_key(key(KeyCode::Char(' ')));
            app.handle_key(key(KeyCode::Enter))
        } else {
            app.handle_key(ctrl('l'))
        };
        assert_eq!(
            acts.first(),
            Some(&Action::Send(Request::Cancel { id })),
            "{restart}"
        );
        assert!(acts.contains(&Action::Save), "{restart}: {acts:?}");
        let last = app.messages.last().unwrap();
        assert_eq!(last.status, MsgStatus::Stopped, "{restart}");
        assert_eq!(
            last.content, "Once upon a time",
            "{restart}: the partial reply is kept"
        );
        // the new engine comes up: the next message goes out
        app.apply_client(ClientEvent::Spawned { pid: 99 });
        app.apply_event(hello(&[]));
        app.apply_event(loaded(SMOL, "llama", false, &["Q4_1"], false));
        type_text(&mut app, "Again?");
        let acts = app.handle_key(key(KeyCode::Enter));
        assert!(
            acts.iter()
                .any(|a| matches!(a, Action::Send(Request::Generate(_)))),
            "{restart}: not busy after the restart: {acts:?}"
        );
    }
}
