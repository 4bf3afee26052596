//! Panels that say what users expect (issue 27, defect 8): live speed, the reply stats line, one
//! tokens/window mean, the robust sparkline, the cards' RSS, errors whole, the conversations and
//! settings overlays. Built and drawn as `tests.rs` does, with its helpers.

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use ratatui::Terminal;
use strata::protocol::*;

use super::app::{Action, App, EngineState, MsgStatus, Overlay};
use super::panes;
use super::tests::*;
use super::tests_controls::toggles_at;
use crate::client::ClientEvent;
use crate::presets::PresetStore;

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

#[test]
fn a_synthetic_model_says_its_text_is_noise() {
    let mut app = ready_app();
    let Event::Loaded(mut l) = loaded("/tmp/tiny.gguf", "qwen4exp", true, &["F16", "F32"], true)
    else {
        unreachable!("loaded() builds a Loaded event")
    };
    l.synthetic = true;
    app.apply_event(Event::Loaded(l));
    let n = app
        .notice
        .as_ref()
        .map(|n| n.text.clone())
        .unwrap_or_default();
    assert!(n.contains("synthetic") && n.contains("noise"), "{n}");
    let t = draw_pane(120, 1, |f| panes::status::render(&app, f, f.area()));
    let row = rows_of(&t).join("");
    assert!(
        row.contains("qwen4exp") && row.contains("synthetic"),
        "{row}"
    );
}
