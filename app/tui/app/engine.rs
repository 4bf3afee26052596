//! The engine side of the app: what the client reports (spawn, death, restarts) and the
//! engine's events (hello, progress, loaded, tokens, turns, errors) change the state here.

use strata::protocol::{Event, Request, Role, Stop, Turn};

use super::{truncate, Action, App, EngineState, Level, MsgStatus, Overlay};
use crate::client::ClientEvent;
use crate::tui::strings;

impl App {
    pub fn apply_client(&mut self, ev: ClientEvent) -> Vec<Action> {
        match ev {
            ClientEvent::Spawned { .. } => {
                self.engine = EngineState::Starting;
                // a new engine answers nothing the old one was asked
                self.context_engine_gone();
                Vec::new()
            }
            ClientEvent::Engine(e) => self.apply_event(e),
            ClientEvent::Died { reason, in_flight } => {
                let lost = self.current_gen.is_some_and(|g| in_flight.contains(&g))
                    || self.current_gen.is_some();
                if lost {
                    self.finish_streaming(MsgStatus::Interrupted);
                }
                self.notify(Level::Error, strings::engine_died(&reason));
                self.context_engine_gone();
                self.engine = EngineState::Down(reason);
                if lost {
                    vec![Action::Save]
                } else {
                    Vec::new()
                }
            }
            ClientEvent::Restarting { attempt, delay } => {
                self.engine = EngineState::Restarting {
                    attempt,
                    delay_ms: delay.as_millis() as u64,
                };
                Vec::new()
            }
            ClientEvent::GaveUp { attempts } => {
                let msg = strings::gave_up(attempts);
                let text = self.with_queue_lost(msg.clone());
                self.notify(Level::Error, text);
                self.engine = EngineState::Down(msg);
                Vec::new()
            }
            ClientEvent::Restarted { ms } => {
                self.last_restart_ms = Some(ms);
                self.notify(Level::Info, strings::restarted(ms));
                Vec::new()
            }
            ClientEvent::Dropped(Request::Generate(g)) if Some(g.id) == self.current_gen => {
                self.finish_streaming(MsgStatus::Interrupted);
                self.notify(Level::Error, strings::NOT_READY);
                vec![Action::Save]
            }
            ClientEvent::Dropped(_) => Vec::new(),
            ClientEvent::BadLine(l) => {
                self.notify(
                    Level::Warn,
                    format!(
                        "engine sent a line that is not protocol: {}",
                        truncate(&l, 60)
                    ),
                );
                Vec::new()
            }
        }
    }

    pub fn apply_event(&mut self, ev: Event) -> Vec<Action> {
        match ev {
            Event::Hello(h) => {
                let mut flags = self.active_flags.clone();
                flags.extend(h.flags.clone());
                self.active_flags = flags.clone();
                // an engine coming up while the toggles are open must not undo the user's edits
                if !matches!(self.overlay, Overlay::Toggles { .. }) {
                    self.pending_flags = flags;
                }
                self.hello = Some(h);
                if !matches!(self.engine, EngineState::Loading { .. }) {
                    self.engine = EngineState::Starting;
                }
            }
            Event::Progress(p) => {
                self.engine = EngineState::Loading {
                    stage: p.stage,
                    done: p.done,
                    total: p.total,
                    detail: p.detail,
                };
            }
            Event::Loaded(l) => {
                let synthetic = l.synthetic;
                self.loaded = Some(l);
                self.engine = EngineState::Ready;
                if synthetic {
                    self.notify(Level::Info, strings::SYNTHETIC_NOTICE);
                } else if self.preset.base_model {
                    self.notify(Level::Info, strings::base_model(&self.preset.name));
                }
                if std::mem::take(&mut self.send_when_ready)
                    && self.messages.last().is_some_and(|m| m.role == Role::User)
                {
                    self.notice = None;
                    return self.start_generation();
                }
                return self.recount();
            }
            Event::Token(t) => {
                if Some(t.id) == self.current_gen {
                    if let Some(m) = self.streaming_mut() {
                        m.content.push_str(&t.text);
                        m.rev += 1;
                    }
                }
            }
            Event::Window(w) => {
                self.context_on_window(w.id, w.accepted);
                self.ab_on_chat_window(&w);
                self.metrics.on_window(&w)
            }
            Event::Context(c) => return self.on_context(c),
            Event::Turn(t) => return self.on_turn(t),
            Event::Devices(d) => self.devices = Some(d),
            Event::Error(e) => {
                self.host.learn(&e.message);
                if self.on_count_error(e.id, &e.message) {
                    return Vec::new();
                }
                if e.id.is_some() && e.id == self.current_gen {
                    if let Some(m) = self.streaming_mut() {
                        m.status = MsgStatus::Failed(e.message.clone());
                        m.rev += 1;
                    }
                } else if e.id.is_none()
                    && matches!(
                        self.engine,
                        EngineState::Loading { .. } | EngineState::Starting
                    )
                {
                    self.engine = EngineState::Down(e.message.clone());
                }
                let text = format!("engine: {}", e.message);
                let text = if matches!(self.engine, EngineState::Down(_)) {
                    self.with_queue_lost(text)
                } else {
                    text
                };
                self.notify(Level::Error, text);
            }
            // asked for by `strata ab` only
            Event::Ids(_) | Event::Unknown => {}
        }
        Vec::new()
    }

    fn on_turn(&mut self, t: Turn) -> Vec<Action> {
        self.metrics.on_turn(&t);
        if let Some(acts) = self.on_refused_turn(&t) {
            return acts;
        }
        if Some(t.id) != self.current_gen {
            return Vec::new();
        }
        let status = match t.stop {
            Stop::Cancelled => MsgStatus::Stopped,
            Stop::Error => match self.messages.last().map(|m| &m.status) {
                Some(MsgStatus::Failed(f)) => MsgStatus::Failed(f.clone()),
                _ => MsgStatus::Failed("the engine reported an error".into()),
            },
            Stop::Eos | Stop::StopString | Stop::MaxTokens | Stop::Context => MsgStatus::Done,
        };
        // A Failed status set by the error event is not Streaming any more: finish it directly.
        if let Some(m) = self
            .messages
            .last_mut()
            .filter(|m| m.role == Role::Assistant)
        {
            if matches!(m.status, MsgStatus::Streaming | MsgStatus::Failed(_)) {
                m.status = status;
                m.turn = Some(t.clone());
                m.rev += 1;
            }
        }
        self.context_on_turn(&t);
        self.current_gen = None;
        if matches!(self.engine, EngineState::Generating(_)) {
            self.engine = EngineState::Ready;
        }
        vec![Action::Save]
    }
}
