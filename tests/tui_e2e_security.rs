//! Security end to end, in a real terminal (the harness of `tui_e2e.rs`: the real `strata` in a
//! private tmux server, temp HOME/XDG dirs, the real engine and SmolLM2):
//!
//! - Terminal escape injection: hostile text reaches the screen from a resumed conversation file
//!   and from a bracketed paste into the input box. The pane title (OSC 0) and tmux's buffers
//!   (OSC 52 with `set-clipboard on`) must not change, the screen must not be cleared (CSI 2J),
//!   and the sequences must show as visible markers (`␛`, `␇`).
//! - Path traversal through conversation ids: `strata --resume <a path>` touches no file and says
//!   why; a conversation file whose inner id climbs out of the data dir writes nothing outside.
//!
//! Needs tmux. Run with `--nocapture` to see the screens.

mod tui_support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tui_support::{bin, conversation, status_line, Home, Tmux};

const TITLE_SEQ: &str = "\x1b]0;PWNED\x07";
const CLIP_SEQ: &str = "\x1b]52;c;cHduZWQ=\x07";
const CLEAR_SEQ: &str = "\x1b[2J";
/// How the sanitiser shows them.
const TITLE_SHOWN: &str = "␛]0;PWNED␇";
const CLIP_SHOWN: &str = "␛]52;c;cHduZWQ=␇";
const CLEAR_SHOWN: &str = "␛[2J";
const ID: &str = "20261202-101500";

/// Starts the private server with `set-clipboard on` (so an OSC 52 from the app would become a
/// tmux buffer) and the shell; returns the pane title before anything runs.
fn start(tag: &str, home: &Home) -> (Tmux, String) {
    let tmux = Tmux::new(tag);
    tmux.start_shell(home);
    tmux.cmd(&["set-option", "-s", "set-clipboard", "on"]);
    let title = tmux.display("#{pane_title}");
    assert!(!title.contains("PWNED"));
    assert_eq!(buffers(&tmux), "", "a fresh server has no buffers");
    (tmux, title)
}

fn buffers(tmux: &Tmux) -> String {
    tmux.cmd(&["list-buffers", "-F", "#{buffer_name}: #{buffer_sample}"])
}

/// The UI is all there: the top bar, the conversation and input panes, the side panels and the
/// hint bar (a CSI 2J that reached the terminal would have blanked what was drawn before it).
fn ui_intact(s: &str) -> bool {
    let lines: Vec<&str> = s.lines().collect();
    status_line(s).starts_with(" strata ")
        && status_line(s).contains("engine ready")
        && lines.iter().any(|l| l.starts_with("╭ Conversation"))
        && lines.iter().any(|l| l.contains("╭ Verify window"))
        && lines.iter().any(|l| l.contains("╭ Message"))
        && lines.len() >= 39
        && !lines[39].trim().is_empty()
}

/// The terminal obeyed nothing: same title, no new buffer, and the UI was not cleared.
fn assert_nothing_obeyed(tmux: &Tmux, title: &str, what: &str) {
    let now = tmux.display("#{pane_title}");
    assert_eq!(
        now, title,
        "{what}: the pane title changed (OSC 0 reached the terminal)"
    );
    let b = buffers(tmux);
    assert_eq!(
        b, "",
        "{what}: a tmux buffer appeared (OSC 52 reached the terminal)"
    );
    let s = tmux.wait(&format!("{what}: the whole UI on screen"), 240, |s| {
        ui_intact(s).then(|| s.to_string())
    });
    println!("{what}:\n{s}");
}

fn conversation_file(dir: &Path, id_inside: &str, model: &Path, messages: serde_json::Value) {
    std::fs::create_dir_all(dir).unwrap();
    let c = serde_json::json!({
        "version": 1,
        "id": id_inside,
        "created": 1_764_656_100u64,
        "preset": "default",
        "model": model.display().to_string(),
        "messages": messages,
    });
    std::fs::write(
        dir.join(format!("{ID}.json")),
        serde_json::to_vec_pretty(&c).unwrap(),
    )
    .unwrap();
}

#[test]
fn escapes_in_a_resumed_conversation_are_shown_not_obeyed() {
    let model = tui_support::smollm2();
    let home = Home::new();
    let user = format!("Say {TITLE_SEQ} and {CLIP_SEQ} back");
    let reply = format!(
        "Title {TITLE_SEQ} clip {CLIP_SEQ} clear {CLEAR_SEQ} end-of-reply\n\n\
         ```\n{TITLE_SEQ} in-code\n```\n"
    );
    conversation_file(
        &home.conversations(),
        ID,
        &model,
        serde_json::json!([
            { "role": "user", "content": user },
            { "role": "assistant", "content": reply },
        ]),
    );
    let (tmux, title) = start("sec-resume", &home);
    tmux.run_line(&format!(
        "{} --resume {ID} --model {}",
        bin(),
        model.display()
    ));
    tmux.wait("the resumed reply on screen", 60, |s| {
        s.contains("end-of-reply").then_some(())
    });
    // the whole frame is out by now (one frame is 33 ms)
    std::thread::sleep(Duration::from_millis(500));
    assert_nothing_obeyed(&tmux, &title, "a resumed conversation");
    let s = tmux.screen();
    let conv = conversation(&s);
    for shown in [TITLE_SHOWN, CLIP_SHOWN, CLEAR_SHOWN] {
        assert!(conv.contains(shown), "{shown} not shown in:\n{conv}");
    }
    assert!(conv.contains(&format!("{TITLE_SHOWN} in-code")), "{conv}");
    assert!(
        conv.contains(&format!("Say {TITLE_SHOWN} and {CLIP_SHOWN} back")),
        "the user's message: {conv}"
    );
    tmux.keys(&["C-q"]);
    tmux.wait_prompt("the shell prompt after quitting", 30);
    assert_eq!(tmux.display("#{pane_title}"), title);
    assert_eq!(buffers(&tmux), "");
}

#[test]
fn escapes_pasted_into_the_input_are_shown_not_obeyed() {
    let model = tui_support::smollm2();
    let home = Home::new();
    let (tmux, title) = start("sec-paste", &home);
    tmux.run_line(&format!("{} --model {}", bin(), model.display()));
    tmux.wait("engine ready", 240, |s| {
        status_line(s).contains("engine ready").then_some(())
    });
    // a bracketed paste (-p; the app asks for it), from a named buffer deleted after (-d)
    let hostile = format!("pasted {TITLE_SEQ} {CLIP_SEQ} {CLEAR_SEQ} tail-of-paste");
    tmux.cmd(&["set-buffer", "-b", "hostile", &hostile]);
    tmux.cmd(&["paste-buffer", "-p", "-d", "-b", "hostile", "-t", "e2e"]);
    let s = tmux.wait("the pasted text in the input box", 30, |s| {
        s.contains("tail-of-paste").then(|| s.to_string())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_nothing_obeyed(&tmux, &title, "a paste into the input box");
    let input_row = s
        .lines()
        .find(|l| l.contains("tail-of-paste"))
        .unwrap_or_default();
    assert!(
        input_row.contains(&format!(
            "pasted {TITLE_SHOWN} {CLIP_SHOWN} {CLEAR_SHOWN} tail"
        )),
        "{input_row}"
    );
    tmux.keys(&["C-q"]);
    tmux.wait_prompt("the shell prompt after quitting", 30);
    assert_eq!(tmux.display("#{pane_title}"), title);
    assert_eq!(buffers(&tmux), "");
}

/// Every file under `dir` with its bytes (a snapshot to compare before/after).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let bytes = std::fs::read(e.path()).unwrap_or_default();
                    (e.file_name().to_string_lossy().into_owned(), bytes)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The same files with the same bytes; a failure names the files.
fn assert_same(now: &[(String, Vec<u8>)], before: &[(String, Vec<u8>)], what: &str) {
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(now),
        names(before),
        "{what}: files added, removed or renamed"
    );
    assert!(now == before, "{what}: a file's content changed");
}

/// As many `../` as climb from `dir` to `/`.
fn to_root(dir: &Path) -> String {
    "../".repeat(dir.components().count().saturating_sub(1))
}

#[test]
fn resume_with_a_path_touches_no_file_and_says_why() {
    let home = Home::new();
    let victim = tempfile::tempdir().unwrap();
    let precious = b"{\"precious\": true, \"not\": \"a conversation\"}";
    std::fs::write(victim.path().join("victim.json"), precious).unwrap();
    let before = files(victim.path());
    let abs = victim.path().join("victim").display().to_string();
    let climbing = format!(
        "{}{}",
        to_root(&home.conversations()),
        abs.trim_start_matches('/')
    );
    for id in [abs.as_str(), climbing.as_str()] {
        let mut child = home
            .command()
            .args(["--resume", id])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning strata");
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("waiting for strata") {
                break st;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("strata --resume {id} did not exit within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = child.wait_with_output().expect("strata's output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("strata --resume {id}: {status}, stderr: {stderr}");
        assert_same(&files(victim.path()), &before, "the victim's dir");
        assert_eq!(status.code(), Some(1), "refused: {stderr}");
        assert!(
            stderr.contains(&format!("\"{id}\"")) && stderr.contains("not a conversation id"),
            "the error names the id: {stderr}"
        );
    }
    assert!(
        !home.conversations().exists(),
        "nothing was written to the history either"
    );
}

#[test]
fn a_hostile_id_inside_a_file_writes_nothing_outside() {
    let model = tui_support::smollm2();
    let home = Home::new();
    let victim = tempfile::tempdir().unwrap();
    let hostile = format!(
        "{}{}/pwned",
        to_root(&home.conversations()),
        victim.path().display().to_string().trim_start_matches('/')
    );
    conversation_file(
        &home.conversations(),
        &hostile,
        &model,
        serde_json::json!([
            { "role": "user", "content": "Hi" },
            { "role": "assistant", "content": "Hello there" },
        ]),
    );
    let file = home.conversations().join(format!("{ID}.json"));
    let original = std::fs::read(&file).unwrap();
    let (tmux, _title) = start("sec-id", &home);
    tmux.run_line(&format!(
        "{} --resume {ID} --model {}",
        bin(),
        model.display()
    ));
    let s = tmux.wait("the app up", 60, |s| {
        s.lines()
            .any(|l| l.starts_with("╭ Conversation"))
            .then(|| s.to_string())
    });
    println!("after --resume of the hostile file:\n{s}");
    // export (Ctrl+E) and quit (Ctrl+Q, which saves): the two writes a conversation id names
    tmux.keys(&["C-e"]);
    tmux.wait("the export's notice", 30, |s| {
        s.contains("exported to").then_some(())
    });
    tmux.keys(&["C-q"]);
    tmux.wait_prompt("the shell prompt after quitting", 30);
    assert_same(
        &files(victim.path()),
        &[],
        "nothing written outside the data dir",
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        original,
        "the hostile file is left as it was"
    );
    let names: Vec<String> = files(&home.conversations())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        vec![format!("{ID}.json")],
        "no rename, no other file"
    );
    let exports = files(&home.exports());
    assert_eq!(exports.len(), 1, "one export, inside exports/");
    assert!(
        exports[0].0.ends_with(".md") && !exports[0].0.contains("pwned"),
        "{:?}",
        exports[0].0
    );
    // the user was told why, with the id
    assert!(
        s.contains("cannot resume") && s.contains("pwned"),
        "the error names the bad id:\n{s}"
    );
}
