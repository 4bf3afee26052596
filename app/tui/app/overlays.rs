//! The overlays that edit or switch what a conversation is: settings (Ctrl+S: the system prompt
//! and sampling of the next replies), saved conversations (Ctrl+O: list, open one) and the
//! messages log (Ctrl+G: every notice, whole, newest first).
//!
//! Settings: the preset's system prompt and sampling apply unless the conversation has its own
//! (`chat_settings`, set in the overlay and saved with the conversation). The effective values
//! are kept in `self.preset`, which every request is built from; `preset_base` keeps the preset's
//! own, so "the preset's" can be restored and a preset switch can re-apply the conversation's.

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::{Action, App, EngineState, Level, Notice, Overlay};
use crate::history::{ChatSettings, Conversation};
use crate::tui::conversations::ConvList;
use crate::tui::settings::{FormKey, SettingsForm};
use crate::tui::strings;

/// Notices kept for the messages overlay (the oldest go first).
pub const LOG_CAP: usize = 200;

impl App {
    /// Records a notice for the messages overlay.
    pub(super) fn log_notice(&mut self, n: &Notice) {
        if self.log.len() == LOG_CAP {
            self.log.remove(0);
        }
        self.log.push(n.clone());
    }

    /// The preset's own system prompt and sampling (before this conversation's settings).
    pub(super) fn preset_settings(&self) -> ChatSettings {
        self.preset_base.clone()
    }

    /// A new preset is in `self.preset`: its values become the base, and the conversation's own
    /// settings (if any) go back on top.
    pub(super) fn rebase_settings(&mut self) {
        self.preset_base = ChatSettings {
            system_prompt: self.preset.system_prompt.clone(),
            sampling: self.preset.sampling.clone(),
        };
        self.set_chat_settings(self.chat_settings.clone());
    }

    /// This conversation's settings (None: the preset's) into effect for the next request.
    pub fn set_chat_settings(&mut self, s: Option<ChatSettings>) {
        let eff = s.clone().unwrap_or_else(|| self.preset_settings());
        self.preset.system_prompt = eff.system_prompt;
        self.preset.sampling = eff.sampling;
        self.chat_settings = s;
    }

    pub(super) fn open_settings(&mut self) {
        let current = ChatSettings {
            system_prompt: self.preset.system_prompt.clone(),
            sampling: self.preset.sampling.clone(),
        };
        self.settings_form = Some(SettingsForm::new(&current));
        self.overlay = Overlay::Settings;
    }

    pub(super) fn settings_key(&mut self, k: KeyEvent) -> Vec<Action> {
        let Some(form) = self.settings_form.as_mut() else {
            self.overlay = Overlay::None;
            return Vec::new();
        };
        match form.key(k) {
            FormKey::Editing => {}
            FormKey::Cancel => {
                self.settings_form = None;
                self.overlay = Overlay::None;
            }
            FormKey::Reset => {
                let cursor = form.cursor;
                let mut fresh = SettingsForm::new(&self.preset_settings());
                fresh.cursor = cursor;
                self.settings_form = Some(fresh);
            }
            FormKey::Apply(s) => {
                self.settings_form = None;
                self.overlay = Overlay::None;
                let own = (s != self.preset_settings()).then_some(s);
                let changed = own != self.chat_settings;
                let text = if own.is_some() {
                    strings::SETTINGS_APPLIED
                } else {
                    strings::SETTINGS_PRESET
                };
                self.set_chat_settings(own);
                if changed {
                    self.notify(Level::Info, text);
                    // saved with the conversation (if it has messages: the runtime skips empty)
                    return vec![Action::Save];
                }
            }
        }
        Vec::new()
    }

    pub(super) fn settings_paste(&mut self, text: &str) {
        if let Some(f) = self.settings_form.as_mut() {
            f.paste(text);
        }
    }

    /// The runtime read the saved conversations: show them, the current one selected.
    pub fn show_conversations(&mut self, list: ConvList) {
        let cursor = list
            .rows
            .iter()
            .position(|c| c.id == self.conversation_id)
            .unwrap_or(0);
        self.saved = list;
        self.overlay = Overlay::Conversations { cursor };
    }

    pub(super) fn conversations_key(&mut self, k: KeyEvent, cursor: usize) -> Vec<Action> {
        let last = self.saved.rows.len().saturating_sub(1);
        match k.code {
            KeyCode::Esc => self.overlay = Overlay::None,
            KeyCode::Up => {
                self.overlay = Overlay::Conversations {
                    cursor: cursor.saturating_sub(1),
                }
            }
            KeyCode::Down => {
                self.overlay = Overlay::Conversations {
                    cursor: (cursor + 1).min(last),
                }
            }
            KeyCode::PageUp => {
                self.overlay = Overlay::Conversations {
                    cursor: cursor.saturating_sub(10),
                }
            }
            KeyCode::PageDown => {
                self.overlay = Overlay::Conversations {
                    cursor: (cursor + 10).min(last),
                }
            }
            KeyCode::Enter => {
                let Some(row) = self.saved.rows.get(cursor) else {
                    return Vec::new();
                };
                if row.error.is_some() {
                    return Vec::new();
                }
                self.overlay = Overlay::None;
                if row.id != self.conversation_id {
                    return vec![Action::OpenConversation(row.id.clone())];
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// Replaces the conversation on screen with `c` (the runtime saved the current one first).
    /// A running reply is cancelled; the conversation's own settings come with it; it goes on
    /// under the current preset and model (a notice says when it was saved under another); a
    /// ready engine counts it for the context gauge (else the next `loaded` does).
    pub fn switch_conversation(&mut self, c: Conversation) -> Vec<Action> {
        let mut acts = self.new_conversation(c.id.clone(), c.created);
        // a message waiting for the engine belonged to the conversation that goes
        self.send_when_ready = false;
        let (id, n, preset) = (c.id.clone(), c.messages.len(), c.preset.clone());
        self.load_conversation(c);
        if self.engine == EngineState::Ready {
            acts.extend(self.recount());
        }
        let text = if !preset.is_empty() && preset != self.preset.name {
            strings::other_preset(&id, &preset, &self.preset.name)
        } else {
            strings::opened_conversation(&id, n)
        };
        self.notify(Level::Info, text);
        acts
    }

    pub(super) fn log_key(&mut self, k: KeyEvent, scroll: u16) {
        self.overlay = match k.code {
            KeyCode::Esc | KeyCode::Char('q') => Overlay::None,
            KeyCode::Up => Overlay::Log {
                scroll: scroll.saturating_sub(1),
            },
            KeyCode::Down => Overlay::Log {
                scroll: scroll.saturating_add(1),
            },
            KeyCode::PageUp => Overlay::Log {
                scroll: scroll.saturating_sub(10),
            },
            KeyCode::PageDown => Overlay::Log {
                scroll: scroll.saturating_add(10),
            },
            KeyCode::Home => Overlay::Log { scroll: 0 },
            _ => Overlay::Log { scroll },
        };
    }
}
