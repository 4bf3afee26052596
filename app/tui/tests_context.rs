//! A conversation that outgrows the context (issue 27, defect 4), as the app sees it: the
//! status bar's gauge follows the engine's token counts, a marker stands above the first message
//! the model still sees, a reply cut at max_tokens or at the context's end says so, and a message
//! too long for the context is counted by the engine and refused before it enters the
//! conversation, the text kept in the input. State is built from protocol events and keys, drawn
//! with TestBackend; the screen is an insta snapshot (`snapshots/`).

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;
use ratatui::Terminal;
use strata::protocol::*;

use super::app::{Action, App, Cut, EngineState, Marker, MsgStatus};
use super::{panes, strings, theme, ui};
use crate::presets::PresetStore;

const N_CTX: u32 = 256;

fn ready_app() -> App {
    let store = PresetStore::load(None);
    let mut app = App::new(
        store.default_preset(),
        store.presets.clone(),
        "20261202-120000".into(),
        1_764_676_800,
    );
    app.apply_event(Event::Hello(Hello {
        version: PROTOCOL_VERSION,
        pid: 4242,
        flags: Default::default(),
    }));
    let acts = app.apply_event(loaded());
    assert!(
        acts.is_empty(),
        "nothing to count in an empty chat: {acts:?}"
    );
    assert_eq!(app.engine, EngineState::Ready);
    app
}

fn loaded() -> Event {
    Event::Loaded(Loaded {
        model: "/models/SmolLM2-135M-Instruct.Q4_1.gguf".into(),
        arch: "llama".into(),
        n_ctx: N_CTX,
        n_params: 134_515_008,
        load_ms: 412.0,
        hc: false,
        quant_types: vec!["Q4_1".into()],
        experts: false,
        synthetic: false,
    })
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        app.handle_key(key(KeyCode::Char(c)));
    }
}

fn enter(app: &mut App) -> Vec<Action> {
    app.handle_key(key(KeyCode::Enter))
}

/// Types a message and presses Enter: the generate it sends.
fn send(app: &mut App, text: &str) -> Generate {
    type_text(app, text);
    match enter(app).as_slice() {
        [Action::Send(Request::Generate(g))] => g.clone(),
        other => panic!("Enter did not send a generate: {other:?}"),
    }
}

fn context(id: u64, prompt_tokens: u32, dropped: u32, fits: bool) -> Event {
    Event::Context(Context {
        id,
        prompt_tokens,
        dropped,
        n_ctx: N_CTX,
        reserve: 64,
        fits,
    })
}

fn turn(id: u64, t: &Turn) -> Event {
    Event::Turn(Turn { id, ..t.clone() })
}

fn base_turn(prompt_tokens: u32, reply: u32, dropped: u32, stop: Stop) -> Turn {
    Turn {
        id: 0,
        prefill_tokens: prompt_tokens,
        prefill_ms: 40.0,
        prefill_tps: 600.0,
        decode_tokens: reply - 1,
        decode_ms: 400.0,
        decode_tps: 80.0,
        windows: reply - 1,
        tokens_per_window: 1.0,
        proposed: 0,
        accepted: 0,
        acceptance: 0.0,
        mean_accepted_len: 0.0,
        ttft_ms: 50.0,
        stop,
        prompt_tokens,
        n_past: (prompt_tokens + reply).min(N_CTX),
        dropped,
    }
}

/// One whole exchange the way the engine reports it: context, the reply's text and windows, turn.
fn exchange(app: &mut App, question: &str, answer: &str, prompt: u32, dropped: u32, stop: Stop) {
    let g = send(app, question);
    app.apply_event(context(g.id, prompt, dropped, true));
    app.apply_event(Event::Token(Token {
        id: g.id,
        text: answer.into(),
    }));
    let reply = 40;
    for _ in 0..reply - 1 {
        app.apply_event(Event::Window(Window {
            id: g.id,
            ms: 12.0,
            t: 1,
            proposed: 0,
            accepted: 0,
        }));
    }
    app.apply_event(turn(g.id, &base_turn(prompt, reply, dropped, stop)));
}

/// Five exchanges in a 256-token context: the fourth and fifth run with the oldest turns
/// dropped; the last reply hits max_tokens.
fn outgrown() -> App {
    let mut app = ready_app();
    exchange(
        &mut app,
        "Tell me about the ocean.",
        "The ocean is vast.",
        30,
        0,
        Stop::Eos,
    );
    exchange(
        &mut app,
        "And mountains?",
        "Mountains are tall.",
        82,
        0,
        Stop::Eos,
    );
    exchange(
        &mut app,
        "And the moon?",
        "The moon is far.",
        134,
        0,
        Stop::Eos,
    );
    exchange(&mut app, "And coffee?", "Coffee is warm.", 80, 4, Stop::Eos);
    exchange(
        &mut app,
        "And bicycles?",
        "Bicycles have two wheels and",
        132,
        4,
        Stop::MaxTokens,
    );
    app
}

fn draw(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    t
}

fn screen(t: &Terminal<TestBackend>) -> String {
    let b = t.backend().buffer();
    (0..b.area.height)
        .map(|y| {
            (0..b.area.width)
                .map(|x| b[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn snapshot_context_gauge_and_dropped_marker() {
    let app = outgrown();
    let t = draw(&app, 120, 40);
    let s = screen(&t);
    assert!(s.lines().next().unwrap().contains("ctx 172/256"), "{s}");
    assert!(s.contains(&strings::dropped_marker(4)), "{s}");
    assert!(s.contains(&strings::cut_max_tokens(512)), "{s}");
    insta::assert_snapshot!(t.backend());
}

#[test]
fn the_marker_stands_above_the_first_message_still_in_context() {
    let app = outgrown();
    let Some(Marker { uid, dropped: 4 }) = app.context.marker else {
        panic!("no marker: {:?}", app.context)
    };
    let at = app.messages.iter().position(|m| m.uid == uid).unwrap();
    assert_eq!(at, 4, "4 messages dropped: the marker is above the 5th");
    assert_eq!(app.messages[at].content, "And the moon?");
    assert_eq!(app.messages.last().unwrap().cut, Some(Cut::MaxTokens(512)));
    assert_eq!(app.messages[1].cut, None, "an eos reply is not cut");
}

#[test]
fn the_gauge_follows_the_context_events_windows_and_turns() {
    let mut app = ready_app();
    assert_eq!(app.context.used, Some(0));
    let g = send(&mut app, "Hi there");
    app.apply_event(context(g.id, 30, 0, true));
    assert_eq!(app.context.used, Some(30), "the prompt once it is built");
    app.apply_event(Event::Window(Window {
        id: g.id,
        ms: 10.0,
        t: 3,
        proposed: 2,
        accepted: 1,
    }));
    // the prefill's token, then the window's accepted draft and its own token
    assert_eq!(app.context.used, Some(33));
    app.apply_event(turn(g.id, &base_turn(30, 12, 0, Stop::Context)));
    assert_eq!(app.context.used, Some(42), "the turn's n_past");
    assert_eq!(app.messages.last().unwrap().cut, Some(Cut::Context(N_CTX)));
    let s = screen(&draw(&app, 120, 30));
    assert!(s.contains(&strings::cut_context(N_CTX)), "{s}");
}

#[test]
fn the_gauge_colours_as_the_context_fills() {
    use panes::status::gauge_style;
    assert_eq!(gauge_style(Some(100), 256), theme::STATUS_BAR);
    assert_eq!(gauge_style(Some(160), 256), theme::CTX_HIGH);
    assert_eq!(gauge_style(Some(230), 256), theme::CTX_FULL);
    assert_eq!(gauge_style(None, 256), theme::STATUS_BAR);
    // on screen: the gauge's cells carry the colour
    let mut app = ready_app();
    let g = send(&mut app, "Hi");
    app.apply_event(context(g.id, 230, 0, true));
    let t = draw(&app, 120, 30);
    let b = t.backend().buffer();
    let top: String = (0..120).map(|x| b[(x, 0)].symbol().to_string()).collect();
    let at = top
        .find("ctx 230/256")
        .expect("the gauge in the status bar");
    let col = top[..at].chars().count() as u16;
    assert_eq!(b[(col, 0)].bg, Color::Red, "{top}");
}

#[test]
fn a_message_too_long_for_the_context_is_refused_before_it_enters_the_chat() {
    let mut app = ready_app();
    let paste = "The quick brown fox jumps over the lazy dog. ".repeat(40);
    app.handle_paste(&paste);
    let acts = enter(&mut app);
    let [Action::Send(Request::Count(c))] = acts.as_slice() else {
        panic!("a long message is counted first: {acts:?}")
    };
    assert_eq!(c.messages.last().unwrap().content, paste);
    assert!(app.messages.is_empty(), "not in the conversation yet");
    assert_eq!(app.input.text(), paste, "still in the input");
    // another Enter waits for the verdict
    assert!(enter(&mut app).is_empty());
    let acts = app.apply_event(context(c.id, 420, 0, false));
    assert!(acts.is_empty(), "nothing is sent: {acts:?}");
    assert!(app.messages.is_empty());
    assert_eq!(app.input.text(), paste, "the input keeps the text");
    let notice = app.notice.clone().expect("a notice");
    assert!(notice.text.contains("message too long"), "{notice:?}");
    assert!(notice.text.contains("420 tokens"), "{notice:?}");
    let s = screen(&draw(&app, 120, 30));
    assert!(s.contains("message too long"), "{s}");

    // shortened to what the engine says fits: it goes in and out as a generate
    app.input.take();
    let shorter = "Summarise: ".to_string() + &"fox and dog. ".repeat(10);
    app.handle_paste(&shorter);
    let acts = enter(&mut app);
    let [Action::Send(Request::Count(c))] = acts.as_slice() else {
        panic!("counted first: {acts:?}")
    };
    let acts = app.apply_event(context(c.id, 80, 0, true));
    let [Action::Send(Request::Generate(g))] = acts.as_slice() else {
        panic!("sent once it fits: {acts:?}")
    };
    assert_eq!(g.messages.last().unwrap().content, shorter);
    assert!(app.input.is_empty());
    assert_eq!(app.messages[0].content, shorter);
    assert_eq!(app.engine, EngineState::Generating(g.id));
}

#[test]
fn a_short_message_is_sent_without_a_count() {
    let mut app = ready_app();
    let g = send(&mut app, "What is the capital of France?");
    assert_eq!(
        g.messages.last().unwrap().content,
        "What is the capital of France?"
    );
}

#[test]
fn a_generate_the_engine_refuses_gives_the_message_back_to_the_input() {
    // sent while the engine was loading (no count possible), refused once it is up
    let store = PresetStore::load(None);
    let mut app = App::new(
        store.default_preset(),
        store.presets.clone(),
        "20261202-120000".into(),
        0,
    );
    let paste = "lorem ipsum dolor ".repeat(60);
    app.handle_paste(&paste);
    enter(&mut app);
    assert_eq!(
        app.messages.len(),
        1,
        "queued in the chat while the engine loads"
    );
    let acts = app.apply_event(loaded());
    let [Action::Send(Request::Generate(g))] = acts.as_slice() else {
        panic!("the queued message goes out on loaded: {acts:?}")
    };
    let id = g.id;
    app.apply_event(context(id, 300, 0, false));
    app.apply_event(Event::Error(EngineError {
        id: Some(id),
        message: "the system prompt and the newest message take 300 tokens".into(),
        fatal: false,
    }));
    let acts = app.apply_event(turn(id, &base_turn(0, 1, 0, Stop::Error)));
    assert_eq!(acts, vec![Action::Save]);
    assert!(app.messages.is_empty(), "{:?}", app.messages);
    assert_eq!(app.input.text(), paste);
    assert_eq!(app.engine, EngineState::Ready);
    let notice = app.notice.clone().expect("a notice");
    assert!(notice.text.contains("message too long"), "{notice:?}");
}

#[test]
fn a_resumed_conversation_is_counted_once_loaded() {
    let store = PresetStore::load(None);
    let mut app = App::new(
        store.default_preset(),
        store.presets.clone(),
        "20261202-120000".into(),
        0,
    );
    let mut conv = app.conversation();
    for (role, text) in [
        (Role::User, "one"),
        (Role::Assistant, "two"),
        (Role::User, "three"),
        (Role::Assistant, "four"),
    ] {
        conv.messages.push(crate::history::SavedMessage {
            role,
            content: text.into(),
            interrupted: false,
        });
    }
    app.load_conversation(conv);
    assert_eq!(app.context.used, None, "unknown until counted");
    let t = draw(&app, 120, 30);
    assert!(
        !screen(&t).lines().next().unwrap().contains("ctx"),
        "no model yet"
    );
    let acts = app.apply_event(loaded());
    let [Action::Send(Request::Count(c))] = acts.as_slice() else {
        panic!("a count of the resumed conversation: {acts:?}")
    };
    assert_eq!(c.messages.len(), 5, "system prompt + 4 messages");
    let top = screen(&draw(&app, 120, 30));
    assert!(top.lines().next().unwrap().contains("ctx ?/256"), "{top}");
    app.apply_event(context(c.id, 200, 2, true));
    assert_eq!(app.context.used, Some(200));
    let m = app.context.marker.expect("the marker");
    assert_eq!(app.messages.iter().position(|e| e.uid == m.uid), Some(2));
    assert!(app.messages.iter().all(|m| m.status == MsgStatus::Done));
}

#[test]
fn an_engine_restart_during_the_check_leaves_the_message_sendable() {
    let mut app = ready_app();
    let paste = "lorem ipsum dolor ".repeat(60);
    app.handle_paste(&paste);
    let acts = enter(&mut app);
    assert!(matches!(acts.as_slice(), [Action::Send(Request::Count(_))]));
    assert!(app.context.checking());
    // the engine is restarted (a flag change) before it answers: the count is lost with it
    app.apply_client(crate::client::ClientEvent::Spawned { pid: 99 });
    assert!(
        !app.context.checking(),
        "Enter is not blocked by a lost count"
    );
    app.apply_event(loaded());
    let acts = enter(&mut app);
    assert!(
        matches!(acts.as_slice(), [Action::Send(Request::Count(_))]),
        "counted again by the new engine: {acts:?}"
    );
    assert_eq!(app.input.text(), paste);
}

#[test]
fn a_narrow_status_bar_keeps_the_gauge_and_the_engine_state_whole() {
    let mut app = ready_app();
    let g = send(&mut app, "Hi");
    app.apply_event(context(g.id, 30, 0, true));
    for w in [60, 70, 80] {
        let s = screen(&draw(&app, w, 24));
        let top = s.lines().next().unwrap();
        assert!(
            top.contains("ctx 30/256") && top.contains("engine generating"),
            "{w} columns: {top}"
        );
    }
}
