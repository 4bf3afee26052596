//! Screen tests: the app state is built by feeding real protocol events and key presses through
//! `App::apply_event` / `App::handle_key`, then drawn with ratatui's TestBackend and compared with
//! reviewed insta snapshots (`snapshots/`). Its helpers build and draw the app for the other
//! `tests_*` modules too (chat behaviour: `tests_chat`; presets and resume: `tests_presets`).

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use strata::protocol::*;

use super::app::{Action, App, EngineState, Overlay};
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

pub(super) const REPLY: &str = "## Rust iterators\n\nAn iterator yields items **lazily**:\n\n- `map` transforms each item\n- `filter` keeps some\n  1. nested step\n\n```rust\nlet v: Vec<u32> = (1..4).map(|x| x * 2).collect(); // [2, 4, 6]\n```\n\nThat is all.";

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

/// The top line of a drawn screen.
pub(super) fn top_line(t: &Terminal<TestBackend>) -> String {
    let b = t.backend().buffer();
    (0..b.area.width)
        .map(|x| b[(x, 0)].symbol().to_string())
        .collect()
}
