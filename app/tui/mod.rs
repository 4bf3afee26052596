//! The terminal UI: a tokio event loop (keys, mouse, resize, engine events, a tick, a capped
//! render rate) around [`app::App`], drawn by [`ui::draw`].

pub mod ab_engines;
pub mod ab_medians;
pub mod app;
pub mod conversations;
pub mod flags;
pub mod highlight;
pub mod input;
pub mod logging;
pub mod markdown;
pub mod panes;
pub mod sanitize;
pub mod settings;
pub mod stats;
pub mod strings;
pub mod terminal;
pub mod theme;
pub mod ui;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ab;
#[cfg(test)]
mod tests_chat;
#[cfg(test)]
mod tests_context;
#[cfg(test)]
mod tests_controls;
#[cfg(test)]
mod tests_panels;
#[cfg(test)]
mod tests_presets;
#[cfg(test)]
mod tests_security;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use ratatui::crossterm::event::{self, Event as TermEvent};
use strata::protocol::Request;
use tokio::sync::mpsc;

use crate::client::{ClientEvent, EngineClient, Spawn};
use crate::history::{self, HistoryStore};
use crate::presets::{self, PresetStore};
use app::{Action, App, EngineState, Level};

/// Command-line choices for the TUI.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub preset: Option<String>,
    /// `--resume` (Some(None): the latest) or `--resume ID`.
    pub resume: Option<Option<String>>,
    pub model: Option<PathBuf>,
}

/// Frames are drawn at most this often; events in between only mark the screen dirty.
const FRAME: Duration = Duration::from_millis(33);
/// Housekeeping tick: `stats` polling (which also feeds hang detection).
const TICK: Duration = Duration::from_secs(1);
const STATS_EVERY_TICKS: u32 = 3;

pub fn run(opts: Options) -> Result<()> {
    // a bad `--resume ID` (a path, `../x`) is refused before anything opens or touches a file
    if let Some(Some(id)) = &opts.resume {
        history::check_id(id).map_err(|e| anyhow::anyhow!("--resume: {e}"))?;
    }
    let (_log_guard, log_dir) = logging::init()?;
    tracing::info!(?opts, log_dir = %log_dir.display(), "strata TUI starting");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let res = rt.block_on(run_async(opts));
    if let Err(e) = &res {
        tracing::error!("{e:#}");
    }
    res
}

/// Builds the app from presets, history and options. Problems become notices, never a refusal
/// to start.
fn build_app(opts: &Options, history: &HistoryStore) -> App {
    build_app_with(
        opts,
        history,
        &PresetStore::load(presets::user_dir().as_deref()),
    )
}

/// [`build_app`] on a given preset store (tests: a user preset dir without the environment).
fn build_app_with(opts: &Options, history: &HistoryStore, store: &PresetStore) -> App {
    let mut errors = store.errors.clone();
    let mut notice = None;
    // the conversation first: without --preset, a resumed chat goes on under its own preset
    let resumed = opts.resume.as_ref().and_then(|resume| {
        let id = match resume {
            Some(id) => Ok(Some(id.clone())),
            None => history.list().map(|l| l.into_iter().next()),
        };
        match id.and_then(|id| id.map(|id| history.load(&id)).transpose()) {
            Ok(Some(c)) => Some(c),
            Ok(None) => {
                notice = Some("no saved conversation to resume".into());
                None
            }
            Err(e) => {
                notice = Some(format!("cannot resume: {e:#}"));
                None
            }
        }
    });
    let mut preset = store.default_preset();
    if let Some(name) = &opts.preset {
        match store.resolve(name) {
            Ok(p) => preset = p,
            Err(e) => {
                notice = Some(format!("preset error (using defaults): {e}"));
                // a broken user preset named by --preset is in the store's errors already
                if !errors.contains(&e) {
                    errors.push(e);
                }
            }
        }
    } else if let Some(c) = &resumed {
        match store.find(&c.preset) {
            Some(p) => preset = p.clone(),
            None => {
                notice = Some(format!(
                    "conversation {}: its preset {:?} is gone, using {}",
                    c.id, c.preset, preset.name
                ))
            }
        }
    }
    if let Some(m) = &opts.model {
        preset.model = Some(m.to_string_lossy().into_owned());
    } else if let Some(c) = &resumed {
        // the model that wrote it (e.g. one given with --model then); a moved file: the preset's
        if std::path::Path::new(&c.model).is_file() {
            preset.model = Some(c.model.clone());
        } else if notice.is_none() && !c.model.is_empty() {
            notice = Some(format!(
                "conversation {}: its model {} is not there, using the preset's",
                c.id, c.model
            ));
        }
    }
    let now = history::now_unix();
    let mut app = App::new(preset, store.presets.clone(), history.new_id(now), now);
    if notice.is_none() {
        if let Some(e) = errors.first() {
            notice = Some(format!("preset file skipped: {e}"));
        }
    }
    app.preset_errors = errors;
    if let Some(c) = resumed {
        app.load_conversation(c);
    }
    if let Some(n) = notice {
        app.notify(Level::Error, n.clone());
        app.banner.push(n);
    }
    app
}

async fn run_async(opts: Options) -> Result<()> {
    let history = HistoryStore::new(
        HistoryStore::default_dir()
            .ok_or_else(|| anyhow::anyhow!("no home directory for the history"))?,
    );
    let mut app = build_app(&opts, &history);

    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<ClientEvent>();
    let (ab_tx, mut ab_rx) = mpsc::unbounded_channel::<ab_engines::AbEvent>();
    let mut ab = ab_engines::AbEngines::new(ab_tx);
    let client = EngineClient::start(Spawn::current_exe(app.active_flags.clone())?, ev_tx);
    match app.preset.load_request() {
        Ok(load) => client.send(Request::Load(load)),
        Err(e) => {
            app.notify(Level::Error, e.clone());
            app.engine = EngineState::Down(e);
        }
    }

    let (_guard, mut term) = terminal::Guard::enter()?;
    let (key_tx, mut key_rx) = mpsc::unbounded_channel::<TermEvent>();
    let stop_input = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = stop_input.clone();
    std::thread::spawn(move || {
        // crossterm's reader blocks; a thread keeps the runtime free. It polls so it can notice
        // the stop flag and exit with the app.
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match event::poll(Duration::from_millis(100)) {
                Ok(true) => match event::read() {
                    Ok(ev) => {
                        if key_tx.send(ev).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                },
                Ok(false) => {}
                Err(_) => break,
            }
        }
    });

    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut tick = tokio::time::interval(TICK);
    let mut frame = tokio::time::interval(FRAME);
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut ticks = 0u32;
    let mut dirty = true;

    while !app.quit {
        ab.follow_conversation(&mut app, &history);
        let actions = tokio::select! {
            Some(ev) = key_rx.recv() => {
                dirty = true;
                match ev {
                    TermEvent::Key(k) => app.handle_key(k),
                    TermEvent::Mouse(m) => { app.handle_mouse(m); Vec::new() }
                    TermEvent::Paste(t) => { app.handle_paste(&t); Vec::new() }
                    _ => Vec::new(), // resize: the next frame redraws at the new size
                }
            }
            Some(ev) = ev_rx.recv() => { dirty = true; app.apply_client(ev) }
            Some(ev) = ab_rx.recv() => { dirty = true; ab.on_event(ev, &mut app, &history); Vec::new() }
            _ = tick.tick() => {
                ticks += 1;
                if ticks % STATS_EVERY_TICKS == 0 && matches!(app.engine, EngineState::Ready | EngineState::Generating(_)) {
                    client.send(Request::Stats {});
                }
                Vec::new()
            }
            _ = frame.tick() => {
                if dirty {
                    term.draw(|f| ui::draw(f, &app))?;
                    dirty = false;
                }
                Vec::new()
            }
            _ = sigterm.recv() => { tracing::info!("SIGTERM"); vec![Action::Save, Action::Quit] }
            _ = sighup.recv() => { tracing::info!("SIGHUP"); vec![Action::Save, Action::Quit] }
            _ = sigint.recv() => { tracing::info!("SIGINT"); vec![Action::Save, Action::Quit] }
        };
        for a in actions {
            match a {
                Action::Ab(_) => ab.perform(a, &mut app, &history),
                Action::Save => {
                    perform(a, &mut app, &client, &history);
                    ab.save_medians(&mut app, &history);
                }
                a => perform(a, &mut app, &client, &history),
            }
        }
    }
    stop_input.store(true, std::sync::atomic::Ordering::Relaxed);
    ab.save_medians(&mut app, &history);
    ab.shutdown_all().await;
    client.shutdown().await;
    // returned past the terminal guard (dropped with this frame), so main prints it on a
    // restored terminal and exits non-zero
    unsaved_on_quit(&app, &recovery_dirs())
}

/// Where a conversation that could not be saved on quit goes instead: `<state dir>/recovery`,
/// else the temp dir (the data dir is what failed, so neither is under it).
fn recovery_dirs() -> Vec<PathBuf> {
    vec![
        logging::log_dir().join("recovery"),
        std::env::temp_dir().join("strata-recovery"),
    ]
}

/// The quit path's last word on the history: if the last save failed (`App::unsaved`), a
/// recovery copy of the conversation is written to the first of `dirs` that takes it and the
/// error names the failure and the copy. A failed save must not end in a silent exit 0.
pub(crate) fn unsaved_on_quit(app: &App, dirs: &[PathBuf]) -> Result<()> {
    let Some(why) = &app.unsaved else {
        return Ok(());
    };
    let conv = app.conversation();
    match write_recovery(&conv, dirs) {
        Ok(path) => anyhow::bail!(
            "the conversation could not be saved ({why}); a recovery copy is in {} (copy it \
             into the conversations directory to --resume it)",
            path.display()
        ),
        Err(tried) => {
            // nowhere to write: the conversation itself on stderr is the last copy there is
            eprintln!("{}", serde_json::to_string_pretty(&conv)?);
            anyhow::bail!(
                "the conversation could not be saved ({why}) and no recovery copy could be \
                 written ({tried}); it was printed above"
            )
        }
    }
}

/// Writes `conv` as `<dir>/<id>.json` in the first of `dirs` that takes it; Err lists the
/// failures.
fn write_recovery(conv: &history::Conversation, dirs: &[PathBuf]) -> Result<PathBuf, String> {
    let json = serde_json::to_vec_pretty(conv).map_err(|e| e.to_string())?;
    // the id is a file name here: keep only the characters the app's own ids use
    let id: String = conv
        .id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    let mut tried = Vec::new();
    for dir in dirs {
        let path = dir.join(format!("{id}.json"));
        let res = std::fs::create_dir_all(dir)
            .map_err(anyhow::Error::from)
            .and_then(|()| history::write_atomic(&path, &json));
        match res {
            Ok(()) => return Ok(path),
            Err(e) => tried.push(format!("{}: {e:#}", path.display())),
        }
    }
    Err(tried.join("; "))
}

fn perform(a: Action, app: &mut App, client: &EngineClient, history: &HistoryStore) {
    match a {
        Action::Send(r) => client.send(r),
        Action::Restart { flags, load } => client.restart(flags, load),
        Action::RetryEngine => client.retry_now(),
        Action::Copy(text) => {
            if let Err(e) = terminal::copy_osc52(&text) {
                app.notify(Level::Error, format!("copy failed: {e}"));
            }
        }
        Action::Save => save(app, history),
        Action::Export => {
            let dir = history
                .dir()
                .parent()
                .map_or_else(|| history.dir().join("exports"), |p| p.join("exports"));
            match history.export_markdown(&app.conversation(), &dir) {
                Ok(p) => app.notify(Level::Info, format!("exported to {}", p.display())),
                Err(e) => app.notify(Level::Error, format!("export failed: {e:#}")),
            }
        }
        Action::NewConversation => {
            save(app, history);
            if let Some(why) = app.unsaved.take() {
                // the conversation is about to leave the screen: keep a copy somewhere
                let text = match write_recovery(&app.conversation(), &recovery_dirs()) {
                    Ok(p) => format!("not saved ({why}); a recovery copy is in {}", p.display()),
                    Err(tried) => format!("not saved ({why}); no recovery copy either: {tried}"),
                };
                tracing::error!("{text}");
                app.notify(Level::Error, text);
            }
            let now = history::now_unix();
            for a in app.new_conversation(history.new_id(now), now) {
                perform(a, app, client, history);
            }
        }
        Action::ListConversations => match conversations::list(history) {
            Ok(list) => app.show_conversations(list),
            Err(e) => app.notify(Level::Error, strings::cannot_list(&e)),
        },
        Action::OpenConversation(id) => {
            save(app, history);
            // a conversation that could not be saved stays on screen rather than be lost
            if let Some(why) = &app.unsaved {
                let text = strings::not_switching(why);
                app.notify(Level::Error, text);
                return;
            }
            match history.load(&id) {
                Ok(c) => {
                    for a in app.switch_conversation(c) {
                        perform(a, app, client, history);
                    }
                }
                Err(e) => app.notify(Level::Error, strings::cannot_open(&id, &format!("{e:#}"))),
            }
        }
        // the A/B pane's: the loop hands them to its `AbEngines`
        Action::Ab(_) => {}
        Action::Quit => app.quit = true,
    }
}

fn save(app: &mut App, history: &HistoryStore) {
    if app.messages.is_empty() {
        return;
    }
    match history.save(&app.conversation()) {
        Ok(_) => app.unsaved = None,
        Err(e) => {
            tracing::error!("saving history: {e:#}");
            app.notify(
                Level::Error,
                format!("saving the conversation failed: {e:#}"),
            );
            app.unsaved = Some(format!("{e:#}"));
        }
    }
}
