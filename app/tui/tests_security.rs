//! Hostile text on screen (issue 27, terminal escape injection): text from outside the app — a
//! resumed conversation file, the model's output, a paste, engine errors, GGUF metadata, preset
//! files, notices — holding `ESC ] 0 ; … BEL` (retitle), `ESC ] 52 ; …` (clipboard) and
//! `ESC [ 2 J` (clear) is drawn with visible markers, and no control character is left in any
//! cell, so none reaches the terminal. The panes are drawn with `ui::draw_screen` (without the
//! final scrub) to check that each pane sanitises its own text; `ui::draw` is what the app runs.

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use strata::protocol::{Event, Request};

use super::app::{Action, App, Level, Overlay};
use super::{build_app, sanitize, ui, Options};
use crate::history::HistoryStore;
use crate::presets::PresetStore;

const TITLE: &str = "\x1b]0;PWNED\x07";
const CLIP: &str = "\x1b]52;c;cHduZWQ=\x07";
const CLEAR: &str = "\x1b[2J";
const TITLE_SHOWN: &str = "␛]0;PWNED␇";
const CLIP_SHOWN: &str = "␛]52;c;cHduZWQ=␇";
const CLEAR_SHOWN: &str = "␛[2J";

fn ev(v: serde_json::Value) -> Event {
    serde_json::from_value(v).expect("a protocol event")
}

fn new_app() -> App {
    let store = PresetStore::load(None);
    App::new(
        store.default_preset(),
        store.presets.clone(),
        "20261202-101500".into(),
        1_764_656_100,
    )
}

/// Hello and loaded, with a hostile flag name, model file name and architecture.
fn loaded(app: &mut App) {
    app.apply_event(ev(serde_json::json!({
        "type": "hello", "version": strata::protocol::PROTOCOL_VERSION, "pid": 4242,
        "flags": { "STRATA_HC_Q8": false, format!("STRATA_X{CLEAR}"): false },
    })));
    app.apply_event(ev(serde_json::json!({
        "type": "loaded", "model": format!("/models/smol{TITLE}.gguf"),
        "arch": format!("llama{CLEAR}"), "n_ctx": 2048, "n_params": 134_515_008,
        "load_ms": 412.0, "hc": false, "quant_types": ["Q4_1"], "experts": false,
    })));
}

/// The panes' own drawing (no scrub) and what the scrub would still have had to remove.
fn draw_panes(app: &App, w: u16, h: u16) -> (Buffer, usize) {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("a test terminal");
    t.draw(|f| ui::draw_screen(f, app)).expect("drawn");
    let buf = t.backend().buffer().clone();
    let left = sanitize::scrub(&mut buf.clone());
    (buf, left)
}

fn rows(buf: &Buffer) -> String {
    let w = buf.area.width as usize;
    buf.content
        .chunks(w)
        .map(|r| r.iter().map(|c| c.symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// No cell holds a control character, so nothing but text goes to the terminal.
fn assert_clean(buf: &Buffer, left: usize, what: &str) {
    let bad: Vec<(usize, String)> = buf
        .content
        .iter()
        .enumerate()
        .filter(|(_, c)| c.symbol().contains(|ch: char| ch.is_control()))
        .map(|(i, c)| (i, c.symbol().escape_debug().to_string()))
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: control characters in cells {bad:?}"
    );
    assert_eq!(left, 0, "{what}: the scrub found something");
}

#[test]
fn a_resumed_conversation_shows_escapes_as_markers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let history = HistoryStore::new(dir.path().join("conversations"));
    std::fs::create_dir_all(history.dir()).expect("dir");
    let c = serde_json::json!({
        "version": 1, "id": "20261202-101500", "created": 1_764_656_100u64,
        "preset": "default", "model": "",
        "messages": [
            { "role": "user", "content": format!("Say {TITLE} and {CLIP} back\r\nplease\rnow") },
            { "role": "assistant", "content": format!(
                "Title {TITLE} clip {CLIP} clear {CLEAR} c1 \u{9b}31m del \x7f\n\n\
                 ```sh{CLEAR}\necho {TITLE}\tend\n```\n") },
        ],
    });
    std::fs::write(
        history.dir().join("20261202-101500.json"),
        serde_json::to_vec(&c).expect("json"),
    )
    .expect("written");
    let mut app = build_app(
        &Options {
            resume: Some(Some("20261202-101500".into())),
            ..Options::default()
        },
        &history,
    );
    assert!(app.banner.is_empty(), "{:?}", app.banner);
    loaded(&mut app);
    let (buf, left) = draw_panes(&app, 120, 40);
    assert_clean(&buf, left, "resumed conversation");
    let s = rows(&buf);
    for shown in [
        format!("Say {TITLE_SHOWN} and {CLIP_SHOWN} back"),
        // a CRLF is a line end; a lone CR is shown
        "please␍now".to_string(),
        format!("Title {TITLE_SHOWN} clip {CLIP_SHOWN} clear {CLEAR_SHOWN} c1 �31m del ␡"),
        format!("┌─ sh{CLEAR_SHOWN}"),
        // code keeps its tab as four spaces
        format!("│ echo {TITLE_SHOWN}    end"),
    ] {
        assert!(s.contains(&shown), "{shown:?} not on screen:\n{s}");
    }
    // what the app runs: and the terminal's buffer has no ESC byte at all
    let mut t = Terminal::new(TestBackend::new(120, 40)).expect("a test terminal");
    t.draw(|f| ui::draw(f, &app)).expect("drawn");
    let all = rows(t.backend().buffer());
    assert!(!all.contains('\x1b') && !all.contains('\x07'), "{all}");
    assert!(all.contains(TITLE_SHOWN));
}

#[test]
fn a_paste_shows_escapes_as_markers_and_the_cursor_stays_after_the_text() {
    let mut app = new_app();
    loaded(&mut app);
    app.handle_paste(&format!("a\tb {TITLE} {CLIP} {CLEAR} end"));
    let mut t = Terminal::new(TestBackend::new(120, 40)).expect("a test terminal");
    t.draw(|f| ui::draw_screen(f, &app)).expect("drawn");
    let buf = t.backend().buffer().clone();
    assert_clean(&buf, sanitize::scrub(&mut buf.clone()), "input box");
    let want = format!("a    b {TITLE_SHOWN} {CLIP_SHOWN} {CLEAR_SHOWN} end");
    let s = rows(&buf);
    let (y, row) = s
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(&want))
        .unwrap_or_else(|| panic!("{want:?} not in the input box:\n{s}"));
    // every marker is one column, a tab four: the cursor sits right after "end"
    let end_col = row
        .find(&want)
        .map(|b| row[..b].chars().count())
        .unwrap_or(0)
        + want.chars().count();
    let cur = t.get_cursor_position().expect("a cursor");
    assert_eq!((cur.x as usize, cur.y as usize), (end_col, y), "{row}");
    // the text itself is kept as typed: it is what gets sent
    assert!(app.input.text().contains(TITLE));
}

#[test]
fn every_pane_shows_outside_text_as_markers() {
    let hostile = format!("{TITLE}{CLIP}{CLEAR}");
    let mut app = new_app();
    // a load whose progress detail is hostile (the top bar)
    app.apply_event(ev(serde_json::json!({
        "type": "progress", "stage": format!("weights{CLEAR}"), "done": 1, "total": 5,
        "detail": format!("compiling {TITLE}"),
    })));
    let (buf, left) = draw_panes(&app, 130, 40);
    assert_clean(&buf, left, "loading");
    assert!(rows(&buf)
        .lines()
        .next()
        .unwrap_or("")
        .contains(CLEAR_SHOWN));
    loaded(&mut app);
    // a reply streamed by the model, then an engine error on it
    app.handle_paste("question");
    let id = match app
        .handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE))
        .as_slice()
    {
        [Action::Send(Request::Generate(g))] => g.id,
        other => panic!("Enter did not send: {other:?}"),
    };
    app.apply_event(ev(serde_json::json!({
        "type": "token", "id": id, "text": format!("streamed {hostile} words"),
    })));
    app.apply_event(ev(serde_json::json!({
        "type": "error", "id": id, "message": format!("decode failed {hostile}"), "fatal": false,
    })));
    app.apply_event(ev(serde_json::json!({
        "type": "devices", "cards": [{
            "index": 0, "name": format!("cpu{hostile}"),
            "used": { "weights": 90_000_000, "kv": 12_000_000, "scratch": 4_000_000, "other": 0 },
            "budget": 4_000_000_000u64, "experts": null,
        }],
    })));
    app.banner.push(format!("banner {hostile}"));
    app.notify(Level::Error, format!("notice {hostile}"));
    for p in &mut app.presets {
        p.description = format!("described {hostile}");
    }
    let (buf, left) = draw_panes(&app, 130, 40);
    assert_clean(&buf, left, "main screen");
    let s = rows(&buf);
    for want in [
        format!("streamed {TITLE_SHOWN}{CLIP_SHOWN}{CLEAR_SHOWN} words"),
        format!("decode failed {TITLE_SHOWN}"),
        format!("cpu{TITLE_SHOWN}"),
        format!("banner {TITLE_SHOWN}"),
        format!("notice {TITLE_SHOWN}"),
        format!("smol{TITLE_SHOWN}"),
    ] {
        assert!(s.contains(&want), "{want:?} not on screen:\n{s}");
    }
    for overlay in [
        Overlay::Help,
        Overlay::Toggles { cursor: 0 },
        Overlay::Presets { cursor: 0 },
    ] {
        app.overlay = overlay;
        let (buf, left) = draw_panes(&app, 130, 40);
        assert_clean(&buf, left, &format!("{:?}", app.overlay));
    }
    app.overlay = Overlay::Presets { cursor: 0 };
    let s = rows(&draw_panes(&app, 130, 40).0);
    assert!(s.contains(&format!("described {TITLE_SHOWN}")), "{s}");
}

#[test]
fn the_conversation_list_log_and_settings_show_outside_text_as_markers() {
    // a saved conversation whose first message is hostile, listed as Ctrl+O lists them
    let dir = tempfile::tempdir().expect("temp dir");
    let history = HistoryStore::new(dir.path().join("conversations"));
    std::fs::create_dir_all(history.dir()).expect("dir");
    let c = serde_json::json!({
        "version": 1, "id": "20261202-101500", "created": 1_764_656_100u64,
        "preset": "default", "model": "",
        "messages": [{ "role": "user", "content": format!("first {TITLE}{CLIP}{CLEAR} line") }],
    });
    std::fs::write(
        history.dir().join("20261202-101500.json"),
        serde_json::to_vec(&c).expect("json"),
    )
    .expect("written");
    let mut app = new_app();
    loaded(&mut app);
    app.saved = super::conversations::list(&history).expect("listed");
    app.overlay = Overlay::Conversations { cursor: 0 };
    let (buf, left) = draw_panes(&app, 130, 40);
    assert_clean(&buf, left, "conversation list");
    let s = rows(&buf);
    assert!(s.contains(&format!("first {TITLE_SHOWN}")), "{s}");
    // the message log (every notice, whole)
    app.overlay = Overlay::None;
    app.notify(Level::Error, format!("logged {TITLE}{CLEAR}"));
    app.overlay = Overlay::Log { scroll: 0 };
    let (buf, left) = draw_panes(&app, 130, 40);
    assert_clean(&buf, left, "message log");
    assert!(rows(&buf).contains(&format!("logged {TITLE_SHOWN}")));
    // the settings form, with a system prompt holding the sequences
    app.overlay = Overlay::None;
    app.preset.system_prompt = format!("prompt {TITLE}{CLIP}");
    app.handle_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL));
    assert_eq!(app.overlay, Overlay::Settings);
    let (buf, left) = draw_panes(&app, 130, 40);
    assert_clean(&buf, left, "settings");
    assert!(rows(&buf).contains(&format!("prompt {TITLE_SHOWN}")));
}
