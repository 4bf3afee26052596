//! The application state. Every pane is a pure function of [`App`]; the state changes only
//! through [`App::apply_client`] / [`App::apply_event`] (what the engine says) and
//! [`App::handle_key`] (what the user does), which return [`Action`]s for the runtime to perform.

use std::cell::Cell;
use std::collections::BTreeMap;

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind,
};
use strata::protocol::{Devices, Generate, Hello, Load, Loaded, Request, Role, Turn};

use super::conversations::ConvList;
use super::input::Input;
use super::panes::chat::ChatCache;
use super::settings::SettingsForm;
use super::stats::{Metrics, Summary};
use super::{flags, strings};
use crate::history::{ChatSettings, Conversation, SavedMessage, FORMAT_VERSION};
use crate::presets::{Preset, PresetError};

pub mod ab;
mod config;
mod context;
mod engine;
mod overlays;
mod scroll;
pub use ab::{AbAction, AbState};
pub use context::{ContextView, Cut, Marker};
pub use scroll::Scroll;

#[derive(Debug, Clone, PartialEq)]
pub enum MsgStatus {
    Streaming,
    Done,
    /// The engine died or disappeared mid-reply.
    Interrupted,
    /// The user pressed Esc.
    Stopped,
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatEntry {
    /// Stable identity for the render cache.
    pub uid: u64,
    pub role: Role,
    pub content: String,
    pub status: MsgStatus,
    /// Bumped on every change, so the cache knows to re-render.
    pub rev: u64,
    /// A reply that stopped at max_tokens or at the end of the context says so under it.
    pub cut: Option<Cut>,
    /// The engine's figures for a finished reply (its `turn`): the dimmed line under it.
    pub turn: Option<Turn>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EngineState {
    Starting,
    Loading {
        stage: String,
        done: u64,
        total: u64,
        /// e.g. the kernel module compiling (`Progress::detail`)
        detail: Option<String>,
    },
    Ready,
    Generating(u64),
    Restarting {
        attempt: u32,
        delay_ms: u64,
    },
    /// Not running and not coming back on its own (gave up, or no model to load).
    Down(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help,
    Toggles {
        cursor: usize,
    },
    Presets {
        cursor: usize,
    },
    Conversations {
        cursor: usize,
    },
    /// The form is `App::settings_form`.
    Settings,
    Log {
        scroll: u16,
    },
    /// The A/B pane (`App::ab`).
    Ab,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub level: Level,
    pub text: String,
}

/// Side effects the runtime carries out for the app.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Send(Request),
    /// Restart the engine with these flags; with `load`, load that instead of the last model.
    Restart {
        flags: BTreeMap<String, bool>,
        load: Option<Load>,
    },
    RetryEngine,
    Copy(String),
    Save,
    Export,
    /// Save this conversation and start an empty one (the runtime picks the new id).
    NewConversation,
    /// Save this conversation, read the saved ones, show them (`App::show_conversations`).
    ListConversations,
    /// Save this conversation and open the saved one with this id (`App::switch_conversation`).
    OpenConversation(String),
    /// The A/B pane's engines, report and stored medians (app/ab.rs).
    Ab(AbAction),
    Quit,
}

pub struct App {
    pub messages: Vec<ChatEntry>,
    next_uid: u64,
    pub scroll: Scroll,
    /// (total lines, view height) of the last chat render, for scroll keys.
    pub chat_geometry: Cell<(usize, usize)>,
    pub chat_cache: ChatCache,
    pub input: Input,
    pub engine: EngineState,
    pub hello: Option<Hello>,
    pub loaded: Option<Loaded>,
    /// The conversation in the model's context: the gauge, the marker of dropped messages.
    pub context: ContextView,
    pub devices: Option<Devices>,
    pub metrics: Metrics,
    /// Medians under the previous flag set (A/B).
    pub previous: Option<Summary>,
    /// Flags as edited in the toggles pane (applied on Enter).
    pub pending_flags: BTreeMap<String, bool>,
    /// Flags the running engine was started with (from `hello`, else what we asked for).
    pub active_flags: BTreeMap<String, bool>,
    pub last_restart_ms: Option<f64>,
    /// What the host offers the hardware-dependent flags (STRATA_VNNI), refined by the engine.
    pub host: flags::Host,
    /// Why the last Space in the toggles pane did not turn a flag on (shown in the pane).
    pub toggles_note: Option<String>,
    /// A Ctrl+C that did not quit (it stopped a reply, or nothing was running): the next one
    /// quits. Any other key disarms it.
    pub ctrl_c_armed: bool,
    /// Why the last save of this conversation failed (None once one succeeds): the quit path
    /// then keeps a recovery copy and exits non-zero.
    pub unsaved: Option<String>,
    pub overlay: Overlay,
    pub presets: Vec<Preset>,
    pub preset_errors: Vec<PresetError>,
    pub preset: Preset,
    pub notice: Option<Notice>,
    /// Startup problems (bad preset, unreadable history) shown above the input until the first
    /// message is sent, so a later notice cannot hide them.
    pub banner: Vec<String>,
    /// Every notice of the session, oldest first (the messages overlay shows them newest first).
    pub log: Vec<Notice>,
    /// The saved conversations, as the conversations overlay lists them.
    pub saved: ConvList,
    /// The settings overlay's form while it is open.
    pub settings_form: Option<SettingsForm>,
    /// This conversation's own system prompt and sampling (saved with it); None: the preset's.
    pub chat_settings: Option<ChatSettings>,
    /// The preset's own system prompt and sampling (`self.preset` holds the effective ones).
    preset_base: ChatSettings,
    pub conversation_id: String,
    pub created: u64,
    next_gen: u64,
    current_gen: Option<u64>,
    /// The last user message was sent while the engine was starting or loading: it is generated
    /// for as soon as the engine reports `loaded` (one message at most).
    pub send_when_ready: bool,
    /// The A/B pane: its arms, their engines' replies, the medians per flag set.
    pub ab: AbState,
    pub quit: bool,
}

impl App {
    pub fn new(preset: Preset, presets: Vec<Preset>, conversation_id: String, created: u64) -> App {
        let flags = preset.flag_env();
        let preset_base = ChatSettings {
            system_prompt: preset.system_prompt.clone(),
            sampling: preset.sampling.clone(),
        };
        App {
            messages: Vec::new(),
            next_uid: 1,
            scroll: Scroll::default(),
            chat_geometry: Cell::new((0, 0)),
            chat_cache: ChatCache::default(),
            input: Input::default(),
            engine: EngineState::Starting,
            hello: None,
            loaded: None,
            context: ContextView::default(),
            devices: None,
            metrics: Metrics::default(),
            previous: None,
            pending_flags: flags.clone(),
            active_flags: flags,
            last_restart_ms: None,
            host: flags::Host::detect(),
            toggles_note: None,
            ctrl_c_armed: false,
            unsaved: None,
            overlay: Overlay::None,
            presets,
            preset_errors: Vec::new(),
            preset,
            notice: None,
            banner: Vec::new(),
            conversation_id,
            created,
            next_gen: 1,
            current_gen: None,
            send_when_ready: false,
            ab: AbState::default(),
            quit: false,
            log: Vec::new(),
            saved: ConvList::default(),
            settings_form: None,
            chat_settings: None,
            preset_base,
        }
    }

    pub fn notify(&mut self, level: Level, text: impl Into<String>) {
        let n = Notice {
            level,
            text: text.into(),
        };
        self.log_notice(&n);
        self.notice = Some(n);
    }

    fn push_message(&mut self, role: Role, content: String, status: MsgStatus) {
        let uid = self.next_uid;
        self.next_uid += 1;
        self.messages.push(ChatEntry {
            uid,
            role,
            content,
            status,
            rev: 0,
            cut: None,
            turn: None,
        });
    }

    fn streaming_mut(&mut self) -> Option<&mut ChatEntry> {
        self.messages
            .last_mut()
            .filter(|m| m.status == MsgStatus::Streaming)
    }

    fn finish_streaming(&mut self, status: MsgStatus) {
        if let Some(m) = self.streaming_mut() {
            m.status = status;
            m.rev += 1;
        }
        self.current_gen = None;
    }

    /// Restores a saved conversation.
    pub fn load_conversation(&mut self, c: Conversation) {
        self.set_chat_settings(c.settings.clone());
        self.messages.clear();
        self.conversation_id = c.id;
        self.created = c.created;
        for m in c.messages {
            let st = if m.interrupted {
                MsgStatus::Interrupted
            } else {
                MsgStatus::Done
            };
            self.push_message(m.role, m.content, st);
        }
        self.context_reset();
        self.scroll.follow_bottom();
    }

    pub fn conversation(&self) -> Conversation {
        Conversation {
            version: FORMAT_VERSION,
            id: self.conversation_id.clone(),
            created: self.created,
            preset: self.preset.name.clone(),
            model: self.loaded.as_ref().map_or_else(
                || self.preset.model.clone().unwrap_or_default(),
                |l| l.model.clone(),
            ),
            messages: self
                .messages
                .iter()
                .filter(|m| !(m.role == Role::Assistant && m.content.is_empty()))
                .map(|m| SavedMessage {
                    role: m.role,
                    content: m.content.clone(),
                    interrupted: matches!(
                        m.status,
                        MsgStatus::Interrupted | MsgStatus::Stopped | MsgStatus::Streaming
                    ),
                })
                .collect(),
            settings: self.chat_settings.clone(),
        }
    }

    // ---- user side ----

    fn start_generation(&mut self) -> Vec<Action> {
        let (messages, uids) = self.request_messages();
        self.context_sent(uids);
        let id = self.next_gen;
        self.next_gen += 1;
        self.push_message(Role::Assistant, String::new(), MsgStatus::Streaming);
        self.current_gen = Some(id);
        self.engine = EngineState::Generating(id);
        self.scroll.follow_bottom();
        vec![Action::Send(Request::Generate(Generate {
            id,
            messages,
            sampling: self.preset.sampling.clone(),
            spec: None,
            parse_special: false,
        }))]
    }

    /// `text`, plus the note that a message waiting for the engine is dropped (the engine is
    /// down for good or its load failed: no `loaded` is coming). The message stays in the chat.
    fn with_queue_lost(&mut self, text: String) -> String {
        if std::mem::take(&mut self.send_when_ready) {
            format!("{text} · {}", strings::QUEUED_LOST)
        } else {
            text
        }
    }

    fn can_generate(&mut self) -> bool {
        if self.context.checking() {
            self.notify(Level::Warn, strings::CHECKING_LENGTH);
            return false;
        }
        if self.current_gen.is_some() {
            self.notify(Level::Warn, strings::BUSY);
            return false;
        }
        if self.engine != EngineState::Ready {
            self.notify(Level::Warn, strings::NOT_READY);
            return false;
        }
        true
    }

    pub fn submit(&mut self) -> Vec<Action> {
        if self.input.text().trim().is_empty() {
            return Vec::new();
        }
        // An engine on its way up (starting, loading, restarting after a flag change or a
        // crash) takes the message when it is ready: the user need not watch for it.
        let coming_up = matches!(
            self.engine,
            EngineState::Starting | EngineState::Loading { .. } | EngineState::Restarting { .. }
        );
        if coming_up && self.current_gen.is_none() {
            if self.send_when_ready {
                self.notify(Level::Warn, strings::ALREADY_QUEUED);
                return Vec::new();
            }
            let text = self.input.take();
            self.push_message(Role::User, text, MsgStatus::Done);
            self.banner.clear();
            self.send_when_ready = true;
            self.notify(Level::Info, strings::QUEUED);
            self.scroll.follow_bottom();
            return vec![Action::Save];
        }
        if !self.can_generate() {
            return Vec::new();
        }
        // a message that may be too long for the context is counted before it goes in
        if let Some(acts) = self.check_before_send(&self.input.text()) {
            return acts;
        }
        let text = self.input.take();
        self.send_message(text)
    }

    fn send_message(&mut self, text: String) -> Vec<Action> {
        self.push_message(Role::User, text, MsgStatus::Done);
        self.notice = None;
        self.banner.clear();
        self.start_generation()
    }

    pub fn regenerate(&mut self) -> Vec<Action> {
        if !self.can_generate() {
            return Vec::new();
        }
        if self
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant)
        {
            self.messages.pop();
        }
        if !self.messages.last().is_some_and(|m| m.role == Role::User) {
            self.notify(Level::Warn, strings::NOTHING_TO_REGEN);
            return Vec::new();
        }
        self.start_generation()
    }

    pub fn stop(&mut self) -> Vec<Action> {
        match self.current_gen {
            Some(id) => vec![Action::Send(Request::Cancel { id })],
            None => Vec::new(),
        }
    }

    /// Esc: stops the reply being generated, or else takes back a message waiting for the
    /// engine (it stays in the chat; Ctrl+R sends it). Restarts and preset switches keep it
    /// waiting: the engine they bring up takes it.
    fn escape(&mut self) -> Vec<Action> {
        if self.current_gen.is_none() && std::mem::take(&mut self.send_when_ready) {
            self.notify(Level::Info, strings::QUEUE_CANCELLED);
            return Vec::new();
        }
        self.stop()
    }

    fn copy_last(&mut self) -> Vec<Action> {
        match self
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant && !m.content.is_empty())
        {
            Some(m) => {
                let text = m.content.clone();
                self.notify(Level::Info, strings::COPIED);
                vec![Action::Copy(text)]
            }
            None => {
                self.notify(Level::Warn, strings::NOTHING_TO_COPY);
                Vec::new()
            }
        }
    }

    fn quit_now(&mut self) -> Vec<Action> {
        self.quit = true;
        vec![Action::Save, Action::Quit]
    }

    /// Ctrl+C as in llama.cpp's CLI: the first press stops what is running (a reply, or a
    /// message waiting for the engine, as Esc does) and says that another press quits; the
    /// second press quits. It never quits at the first press, even when idle, so a stray Ctrl+C
    /// (a copy habit) costs no engine load and no half-typed message.
    fn ctrl_c(&mut self) -> Vec<Action> {
        if self.ctrl_c_armed {
            return self.quit_now();
        }
        self.ctrl_c_armed = true;
        let stopping = self.current_gen.is_some();
        let unqueueing = !stopping && self.send_when_ready;
        let acts = self.escape();
        let text = if stopping {
            strings::CTRL_C_STOPPED.to_string()
        } else if unqueueing {
            format!(
                "{} · {}",
                strings::QUEUE_CANCELLED,
                strings::CTRL_C_AGAIN_SHORT
            )
        } else {
            strings::CTRL_C_AGAIN.to_string()
        };
        self.notify(Level::Info, text);
        acts
    }

    /// Ctrl+L: restart the engine now. With nothing to load (the preset names no model) a
    /// restart could only end in "starting"; say why instead.
    fn retry_engine(&mut self) -> Vec<Action> {
        if let Err(e) = self.preset.load_request() {
            self.notify(Level::Error, e.clone());
            self.engine = EngineState::Down(e);
            return Vec::new();
        }
        let mut acts = self.cut_reply();
        self.engine = EngineState::Starting;
        acts.push(Action::RetryEngine);
        acts
    }

    /// A restart or reload the user asked for while a reply streams: the reply ends here,
    /// marked stopped and saved. Its `turn` would come from an engine being shut down, whose
    /// last lines the client no longer reads: waiting for it left the app "busy" for good.
    fn cut_reply(&mut self) -> Vec<Action> {
        let mut acts = self.stop();
        if self.current_gen.is_some() {
            self.finish_streaming(MsgStatus::Stopped);
            acts.push(Action::Save);
        }
        acts
    }

    /// Call after saving the current one. Returns the cancel of a running generation, if any.
    pub fn new_conversation(&mut self, id: String, created: u64) -> Vec<Action> {
        let acts = self.stop();
        self.current_gen = None;
        self.messages.clear();
        self.context_reset();
        self.set_chat_settings(None);
        self.conversation_id = id;
        self.created = created;
        self.scroll.follow_bottom();
        if self.engine.is_busy() {
            self.engine = EngineState::Ready;
        }
        acts
    }

    pub fn handle_mouse(&mut self, m: MouseEvent) {
        let (total, height) = self.chat_geometry.get();
        match m.kind {
            MouseEventKind::ScrollUp => self.scroll.up(3, total, height),
            MouseEventKind::ScrollDown => self.scroll.down(3, total, height),
            _ => {}
        }
    }

    pub fn handle_paste(&mut self, text: &str) {
        if self.overlay == Overlay::None {
            self.input.insert_str(text);
        } else if self.overlay == Overlay::Settings {
            self.settings_paste(text);
        } else if self.overlay == Overlay::Ab {
            self.ab.prompt.insert_str(text);
        }
    }

    pub fn handle_key(&mut self, k: KeyEvent) -> Vec<Action> {
        if k.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        // Global keys first.
        match k.code {
            KeyCode::Char('q') if ctrl => return self.quit_now(),
            KeyCode::Char('c') if ctrl => return self.ctrl_c(),
            _ => self.ctrl_c_armed = false,
        }
        match self.overlay {
            Overlay::Help => {
                if matches!(
                    k.code,
                    KeyCode::Esc | KeyCode::Char('?') | KeyCode::F(1) | KeyCode::Char('q')
                ) {
                    self.overlay = Overlay::None;
                }
                return Vec::new();
            }
            Overlay::Toggles { cursor } => return self.toggles_key(k, cursor),
            Overlay::Presets { cursor } => return self.presets_key(k, cursor),
            Overlay::Conversations { cursor } => return self.conversations_key(k, cursor),
            Overlay::Settings => return self.settings_key(k),
            Overlay::Log { scroll } => {
                self.log_key(k, scroll);
                return Vec::new();
            }
            Overlay::Ab => return self.ab_key(k),
            Overlay::None => {}
        }
        let (total, height) = self.chat_geometry.get();
        let page = height.saturating_sub(2).max(1);
        match k.code {
            KeyCode::Enter
                if ctrl
                    || k.modifiers
                        .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
            {
                self.input.newline()
            }
            KeyCode::Char('j') if ctrl => self.input.newline(),
            KeyCode::Enter => return self.submit(),
            KeyCode::Esc => return self.escape(),
            KeyCode::Char('r') if ctrl => return self.regenerate(),
            KeyCode::Char('y') if ctrl => return self.copy_last(),
            KeyCode::Char('t') if ctrl => {
                self.pending_flags = self.active_flags.clone();
                self.toggles_note = None;
                self.overlay = Overlay::Toggles { cursor: 0 };
            }
            KeyCode::Char('p') if ctrl => {
                let cur = self
                    .presets
                    .iter()
                    .position(|p| p.name == self.preset.name)
                    .unwrap_or(0);
                self.overlay = Overlay::Presets { cursor: cur };
            }
            KeyCode::Char('n') if ctrl => return vec![Action::NewConversation],
            KeyCode::Char('e') if ctrl => return vec![Action::Export],
            KeyCode::Char('o') if ctrl => return vec![Action::Save, Action::ListConversations],
            KeyCode::Char('s') if ctrl => self.open_settings(),
            KeyCode::Char('g') if ctrl => self.overlay = Overlay::Log { scroll: 0 },
            KeyCode::Char('l') if ctrl => return self.retry_engine(),
            KeyCode::Char('b') if ctrl => self.open_ab(),
            KeyCode::F(2) => self.open_ab(),
            KeyCode::F(1) => self.overlay = Overlay::Help,
            KeyCode::Char('?') if self.input.is_empty() => self.overlay = Overlay::Help,
            KeyCode::Char(c) if !ctrl => self.input.insert(c),
            KeyCode::Backspace => self.input.backspace(),
            KeyCode::Delete => self.input.delete(),
            KeyCode::Left => self.input.left(),
            KeyCode::Right => self.input.right(),
            KeyCode::Home => self.input.home(),
            KeyCode::End if ctrl => self.scroll.follow_bottom(),
            KeyCode::End => self.input.end(),
            // Up/Down move in the editor; past its first/last line they scroll the conversation.
            KeyCode::Up if !self.input.up() => self.scroll.up(1, total, height),
            KeyCode::Down if !self.input.down() => self.scroll.down(1, total, height),
            KeyCode::PageUp => self.scroll.up(page, total, height),
            KeyCode::PageDown => self.scroll.down(page, total, height),
            _ => {}
        }
        Vec::new()
    }
}

impl EngineState {
    pub fn is_busy(&self) -> bool {
        matches!(self, EngineState::Generating(_))
    }
}

pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}
