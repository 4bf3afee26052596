//! Changes of the engine's configuration: the kernel-flag toggles (Ctrl+T: a flag that does not
//! apply cannot be turned on; Enter restarts the engine with the new set) and preset switches
//! (Ctrl+P). Both keep the old configuration's medians as "before" beside the new series.

use ratatui::crossterm::event::{KeyCode, KeyEvent};
use strata::protocol::Request;

use super::{Action, App, EngineState, Level, Overlay};
use crate::presets::Preset;
use crate::tui::stats::Metrics;
use crate::tui::{flags, strings};

impl App {
    /// The flag names the toggles pane lists: the known ones, then any extra the engine reported.
    pub fn flag_names(&self) -> Vec<String> {
        let mut names: Vec<String> = flags::known().iter().map(|f| f.name.to_string()).collect();
        for k in self.pending_flags.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
        names
    }

    /// Applies the toggles: keep this flag set's medians for comparison, restart the engine.
    pub fn apply_flags(&mut self) -> Vec<Action> {
        self.overlay = Overlay::None;
        if self.pending_flags == self.active_flags {
            return Vec::new();
        }
        let mut acts = self.cut_reply();
        if self.metrics.windows > 0 || self.metrics.turns > 0 {
            self.previous = Some(self.metrics.summary(&self.active_flags));
        }
        self.metrics = Metrics::default();
        self.active_flags = self.pending_flags.clone();
        self.engine = EngineState::Starting;
        acts.push(Action::Restart {
            flags: self.pending_flags.clone(),
            load: None,
        });
        acts
    }

    pub fn switch_preset(&mut self, p: Preset) -> Vec<Action> {
        self.overlay = Overlay::None;
        let load = match p.load_request() {
            Ok(l) => l,
            Err(e) => {
                self.notify(Level::Error, e);
                return Vec::new();
            }
        };
        let mut acts = self.cut_reply();
        let flags = p.flag_env();
        // Another preset is another configuration (model, speculation, split, flags): its
        // figures start afresh, the old medians stay beside them as "before (preset · flags)",
        // as a flag restart does; mixing the two in one median would hide the A/B.
        if self.metrics.turns > 0 {
            let mut before = self.metrics.summary(&self.active_flags);
            if p.name != self.preset.name {
                before.label = format!("{} · {}", self.preset.name, before.label);
            }
            self.previous = Some(before);
        }
        self.metrics = Metrics::default();
        self.preset = p;
        self.rebase_settings();
        self.engine = EngineState::Loading {
            stage: "load".into(),
            done: 0,
            total: 0,
            detail: None,
        };
        if flags != self.active_flags {
            self.active_flags = flags.clone();
            self.pending_flags = flags.clone();
            acts.push(Action::Restart {
                flags,
                load: Some(load),
            });
        } else {
            acts.push(Action::Send(Request::Load(load)));
        }
        acts
    }

    pub(super) fn toggles_key(&mut self, k: KeyEvent, cursor: usize) -> Vec<Action> {
        let names = self.flag_names();
        if k.code != KeyCode::Char(' ') {
            self.toggles_note = None;
        }
        match k.code {
            KeyCode::Esc => self.overlay = Overlay::None,
            KeyCode::Up => {
                self.overlay = Overlay::Toggles {
                    cursor: cursor.saturating_sub(1),
                }
            }
            KeyCode::Down => {
                self.overlay = Overlay::Toggles {
                    cursor: (cursor + 1).min(names.len().saturating_sub(1)),
                }
            }
            KeyCode::Char(' ') => {
                if let Some(n) = names.get(cursor) {
                    self.toggle_flag(n);
                }
            }
            KeyCode::Enter => return self.apply_flags(),
            _ => {}
        }
        Vec::new()
    }

    /// Space in the toggles pane: off always works; on only where the flag applies (else the
    /// pane says why: a flag that does nothing would restart the engine and then show "on").
    fn toggle_flag(&mut self, name: &str) {
        let on = self.pending_flags.get(name).copied().unwrap_or(false);
        if !on {
            let pending = |n: &str| self.pending_flags.get(n).copied().unwrap_or(false);
            if let Err(why) = flags::applies(name, self.loaded.as_ref(), &pending, &self.host) {
                self.toggles_note = Some(strings::cannot_turn_on(name, &why));
                return;
            }
        }
        self.toggles_note = None;
        self.pending_flags.insert(name.to_string(), !on);
    }

    pub(super) fn presets_key(&mut self, k: KeyEvent, cursor: usize) -> Vec<Action> {
        match k.code {
            KeyCode::Esc => self.overlay = Overlay::None,
            KeyCode::Up => {
                self.overlay = Overlay::Presets {
                    cursor: cursor.saturating_sub(1),
                }
            }
            KeyCode::Down => {
                self.overlay = Overlay::Presets {
                    cursor: (cursor + 1).min(self.presets.len().saturating_sub(1)),
                }
            }
            KeyCode::Enter => {
                if let Some(p) = self.presets.get(cursor).cloned() {
                    return self.switch_preset(p);
                }
            }
            _ => {}
        }
        Vec::new()
    }
}
