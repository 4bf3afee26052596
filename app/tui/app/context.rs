//! The conversation in the model's context window: the figures of the status bar's gauge, the
//! marker before the first message the model still sees, the marks of replies that were cut, and
//! the size check that keeps a message too long for the context out of the conversation.
//!
//! The engine trims (it alone knows the token counts with the template applied) and says so in
//! `context` events; the app maps the count of dropped messages onto its chat entries. A message
//! is checked before it goes in: one whose bytes (an upper bound of its tokens) surely fit is sent
//! at once; a longer one is counted by the engine first (`count`), and refused with the input
//! kept when the system prompt and it leave no room for a reply.

use strata::protocol::{reply_reserve, ChatMessage, Context, Count, Request, Role, Stop, Turn};

use super::{Action, App, EngineState, Level, MsgStatus};
use crate::tui::strings;

/// Template tokens a message and the system prompt may add around their text (role markers,
/// turn ends, BOS, the generation prompt): generous, since it only decides whether to ask the
/// engine for the exact count.
const TEMPLATE_SLACK: usize = 64;

/// Chat entries the model no longer sees: `dropped` messages before the entry `uid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub uid: u64,
    pub dropped: u32,
}

/// Why a reply ended early, shown under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The reply reached `max_tokens` (its value).
    MaxTokens(u32),
    /// The reply ran into the end of the context (`n_ctx`).
    Context(u32),
}

#[derive(Debug, Clone, PartialEq)]
enum Purpose {
    /// Fill the gauge and place the marker for the conversation as it is (after a load).
    Gauge,
    /// A message waiting for the verdict: sent if it fits, else refused with the input kept.
    Send(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextView {
    /// Tokens the conversation fills in the context (None until the engine has counted it).
    pub used: Option<u32>,
    pub marker: Option<Marker>,
    /// The chat uids of the last request's messages, system prompt excluded, in request order.
    sent: Vec<u64>,
    /// A `count` out to the engine.
    pending: Option<(u64, Purpose)>,
    /// A generation the engine refused (its newest message does not fit): its `turn` takes the
    /// message back into the input.
    refused: Option<u64>,
    /// The running reply has produced its first token (the prefill's).
    first_token: bool,
}

impl ContextView {
    /// A message is being checked: another Enter waits.
    pub fn checking(&self) -> bool {
        matches!(self.pending, Some((_, Purpose::Send(_))))
    }
}

impl App {
    /// The messages that go to the engine, with their chat uids (None: the system prompt).
    pub(super) fn request_messages(&self) -> (Vec<ChatMessage>, Vec<u64>) {
        let mut msgs = Vec::new();
        let mut uids = Vec::new();
        if !self.preset.system_prompt.trim().is_empty() {
            msgs.push(ChatMessage {
                role: Role::System,
                content: self.preset.system_prompt.clone(),
            });
        }
        for m in &self.messages {
            if m.status == MsgStatus::Streaming
                || matches!(m.status, MsgStatus::Failed(_))
                || m.content.is_empty()
            {
                continue;
            }
            msgs.push(ChatMessage {
                role: m.role,
                content: m.content.clone(),
            });
            uids.push(m.uid);
        }
        (msgs, uids)
    }

    /// Tokens a reply keeps free under the preset's `max_tokens`, and the context size.
    fn room(&self) -> Option<(u32, u32)> {
        let n_ctx = self.loaded.as_ref()?.n_ctx;
        Some((n_ctx, reply_reserve(n_ctx, self.preset.sampling.max_tokens)))
    }

    /// Whether `text` surely fits beside the system prompt: a token covers at least one byte
    /// (byte-level BPE and SentencePiece with byte fallback alike), so bytes bound tokens.
    fn surely_fits(&self, text: &str) -> bool {
        let Some((n_ctx, reserve)) = self.room() else {
            return true;
        };
        let bound = text.len() + self.preset.system_prompt.len() + TEMPLATE_SLACK;
        bound + reserve as usize <= n_ctx as usize
    }

    /// Enter on a message that may not fit: ask the engine to count the conversation with it
    /// (the message stays in the input until the answer). None: send it now.
    pub(super) fn check_before_send(&mut self, text: &str) -> Option<Vec<Action>> {
        if self.surely_fits(text) {
            return None;
        }
        let (mut messages, uids) = self.request_messages();
        messages.push(ChatMessage {
            role: Role::User,
            content: text.to_string(),
        });
        let id = self.next_gen;
        self.next_gen += 1;
        self.context.pending = Some((id, Purpose::Send(text.to_string())));
        self.context.sent = uids;
        self.notify(Level::Info, strings::CHECKING_LENGTH);
        Some(vec![Action::Send(Request::Count(Count {
            id,
            messages,
            max_tokens: Some(self.preset.sampling.max_tokens),
            parse_special: false,
        }))])
    }

    /// After a load: count the conversation as it stands, for the gauge and the marker.
    pub(super) fn recount(&mut self) -> Vec<Action> {
        // a count sent to an engine that is gone will not be answered
        self.context.pending = None;
        if self.messages.is_empty() {
            self.context.used = Some(0);
            return Vec::new();
        }
        let (messages, uids) = self.request_messages();
        let id = self.next_gen;
        self.next_gen += 1;
        self.context.pending = Some((id, Purpose::Gauge));
        self.context.sent = uids;
        vec![Action::Send(Request::Count(Count {
            id,
            messages,
            max_tokens: Some(self.preset.sampling.max_tokens),
            parse_special: false,
        }))]
    }

    /// A generation goes out with these chat entries (system prompt excluded).
    pub(super) fn context_sent(&mut self, uids: Vec<u64>) {
        self.context.sent = uids;
        self.context.first_token = false;
    }

    fn place_marker(&mut self, dropped: u32) {
        self.context.marker = (dropped > 0)
            .then(|| self.context.sent.get(dropped as usize).copied())
            .flatten()
            .map(|uid| Marker { uid, dropped });
    }

    pub(super) fn on_context(&mut self, c: Context) -> Vec<Action> {
        if Some(c.id) == self.current_gen {
            if !c.fits {
                // the turn that follows takes the message back (on_refused_turn)
                self.context.refused = Some(c.id);
                self.notify(
                    Level::Error,
                    strings::too_long(c.prompt_tokens, c.n_ctx, c.reserve),
                );
                return Vec::new();
            }
            self.context.used = Some(c.prompt_tokens);
            self.place_marker(c.dropped);
            return Vec::new();
        }
        let purpose = match &self.context.pending {
            Some((id, p)) if *id == c.id => p.clone(),
            _ => return Vec::new(),
        };
        self.context.pending = None;
        match purpose {
            Purpose::Gauge => {
                self.context.used = Some(c.prompt_tokens);
                self.place_marker(c.dropped);
                Vec::new()
            }
            Purpose::Send(_) if c.fits && self.engine != EngineState::Ready => {
                // the engine went away meanwhile (a preset switch): the message stays typed
                self.notify(Level::Warn, strings::NOT_READY);
                Vec::new()
            }
            Purpose::Send(text) if c.fits => {
                self.notice = None;
                // the text as checked goes in; the input is cleared unless it was edited since
                if self.input.text() == text {
                    self.input.take();
                }
                self.send_message(text)
            }
            Purpose::Send(_) => {
                self.notify(
                    Level::Error,
                    strings::too_long(c.prompt_tokens, c.n_ctx, c.reserve),
                );
                Vec::new()
            }
        }
    }

    /// An `error` answering a count: the message stays in the input. True if it was one.
    pub(super) fn on_count_error(&mut self, id: Option<u64>, message: &str) -> bool {
        match &self.context.pending {
            Some((p, purpose)) if Some(*p) == id => {
                if matches!(purpose, Purpose::Send(_)) {
                    self.notify(Level::Error, format!("engine: {message}"));
                }
                self.context.pending = None;
                true
            }
            // the refusal's own error: the notice already says what to do
            _ => id.is_some() && id == self.context.refused,
        }
    }

    pub(super) fn context_on_window(&mut self, id: u64, accepted: u32) {
        if Some(id) != self.current_gen {
            return;
        }
        if let Some(u) = &mut self.context.used {
            // the prefill's token, then each window's accepted drafts and its own token
            *u += accepted + 1 + u32::from(!self.context.first_token);
        }
        self.context.first_token = true;
    }

    /// The `turn` of a generation the engine refused: the user message and the empty reply
    /// leave the conversation, the text goes back into the input. None: not that turn.
    pub(super) fn on_refused_turn(&mut self, t: &Turn) -> Option<Vec<Action>> {
        if self.context.refused != Some(t.id) {
            return None;
        }
        self.context.refused = None;
        if self
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant && m.content.is_empty())
        {
            self.messages.pop();
        }
        if self.messages.last().is_some_and(|m| m.role == Role::User) {
            if let Some(m) = self.messages.pop() {
                let typed = self.input.take();
                self.input.insert_str(&m.content);
                if !typed.is_empty() {
                    self.input.newline();
                    self.input.insert_str(&typed);
                }
            }
        }
        self.current_gen = None;
        if self.engine.is_busy() {
            self.engine = EngineState::Ready;
        }
        Some(vec![Action::Save])
    }

    /// A finished turn: the gauge takes the engine's count; a cut reply is marked.
    pub(super) fn context_on_turn(&mut self, t: &Turn) {
        if t.stop == Stop::Error {
            return;
        }
        if t.n_past > 0 {
            self.context.used = Some(t.n_past);
        }
        let cut = match t.stop {
            Stop::MaxTokens => Some(Cut::MaxTokens(self.preset.sampling.max_tokens)),
            Stop::Context => self.loaded.as_ref().map(|l| Cut::Context(l.n_ctx)),
            _ => None,
        };
        if let Some(m) = self
            .messages
            .last_mut()
            .filter(|m| m.role == Role::Assistant)
        {
            if m.cut != cut {
                m.cut = cut;
                m.rev += 1;
            }
        }
    }

    /// A new or reloaded conversation: nothing known about its place in the context.
    pub(super) fn context_reset(&mut self) {
        let used = self.messages.is_empty().then_some(0);
        self.context = ContextView {
            used,
            ..ContextView::default()
        };
    }

    /// The engine is gone or replaced: an unanswered count will not be answered (the input still
    /// holds a message being checked).
    pub(super) fn context_engine_gone(&mut self) {
        self.context.pending = None;
        self.context.refused = None;
    }
}
