//! Chat behaviour (no snapshots): sending, streaming, stopping, regenerating, scrolling, the
//! engine dying or loading, and a message sent before the engine is ready. Built and drawn as
//! `tests.rs` does, with its helpers.

use std::time::Duration;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use strata::protocol::*;

use super::app::{Action, EngineState, MsgStatus};
use super::tests::*;
use crate::client::ClientEvent;

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
