//! The conversation: messages rendered (markdown for replies), wrapped to the width, cached per
//! message so only a message that changed is laid out again; a scroll view that follows the
//! stream only while it is at the bottom. Above the first message the model still sees, a marker
//! says how many earlier ones the engine left out of the context; under a reply cut at its limit
//! or at the end of the context, a line says so.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use strata::protocol::{Role, Stop, Turn};

use super::block;
use crate::tui::app::{App, ChatEntry, Cut, Marker, MsgStatus};
use crate::tui::{markdown, strings, theme};

struct Entry {
    width: usize,
    rev: u64,
    /// The dropped-messages marker drawn above this message (part of the cache key).
    marker: Option<u32>,
    lines: Vec<Line<'static>>,
}

/// Rendered lines per message uid, valid for one (width, rev).
#[derive(Default)]
pub struct ChatCache {
    entries: RefCell<HashMap<u64, Entry>>,
    builds: Cell<usize>,
}

impl ChatCache {
    /// How many times a message was laid out (for tests of the cache).
    #[cfg(test)]
    pub fn builds(&self) -> usize {
        self.builds.get()
    }

    /// Makes sure every message has lines for `width`; returns the line count per message.
    fn ensure(&self, messages: &[ChatEntry], width: usize, marker: Option<Marker>) -> Vec<usize> {
        let mut map = self.entries.borrow_mut();
        if map.len() > messages.len() {
            map.retain(|uid, _| messages.iter().any(|m| m.uid == *uid));
        }
        messages
            .iter()
            .map(|m| {
                let above = marker.filter(|k| k.uid == m.uid).map(|k| k.dropped);
                let fresh = map
                    .get(&m.uid)
                    .is_some_and(|e| e.width == width && e.rev == m.rev && e.marker == above);
                if !fresh {
                    self.builds.set(self.builds.get() + 1);
                    map.insert(
                        m.uid,
                        Entry {
                            width,
                            rev: m.rev,
                            marker: above,
                            lines: layout(m, width, above),
                        },
                    );
                }
                map[&m.uid].lines.len()
            })
            .collect()
    }
}

fn layout(m: &ChatEntry, width: usize, marker: Option<u32>) -> Vec<Line<'static>> {
    let (name, style) = match m.role {
        Role::User => (strings::YOU, theme::USER),
        Role::Assistant => (strings::ASSISTANT, theme::ASSISTANT),
        Role::System => (strings::SYSTEM, theme::SYSTEM),
    };
    let mut header = vec![Span::styled(name, style)];
    match &m.status {
        MsgStatus::Interrupted => header.push(Span::styled(
            format!(" · {}", strings::INTERRUPTED),
            theme::WARN,
        )),
        MsgStatus::Stopped => header.push(Span::styled(
            format!(" · {}", strings::STOPPED),
            theme::WARN,
        )),
        MsgStatus::Failed(_) => header.push(Span::styled(" · error", theme::ERROR)),
        MsgStatus::Streaming | MsgStatus::Done => {}
    }
    let mut lines = Vec::new();
    if let Some(n) = marker {
        lines.extend(markdown::plain(
            &strings::dropped_marker(n),
            width,
            theme::WARN,
        ));
        lines.push(Line::default());
    }
    lines.push(Line::from(header));
    let mut body = match m.role {
        Role::Assistant => markdown::render(&m.content, width),
        _ => markdown::plain(&m.content, width, theme::TEXT),
    };
    if m.status == MsgStatus::Streaming {
        match body.last_mut() {
            Some(l) if l.width() < width && !m.content.is_empty() => {
                l.spans.push(Span::styled("▌", theme::CURSOR))
            }
            _ => body.push(Line::from(Span::styled("▌", theme::CURSOR))),
        }
    }
    lines.extend(body);
    if let MsgStatus::Failed(e) = &m.status {
        lines.extend(markdown::plain(e, width, theme::ERROR));
    }
    let cut = match m.cut {
        Some(Cut::MaxTokens(n)) => Some(strings::cut_max_tokens(n)),
        Some(Cut::Context(n)) => Some(strings::cut_context(n)),
        None => None,
    };
    if let Some(c) = cut {
        lines.extend(markdown::plain(&c, width, theme::WARN));
    }
    if let Some(t) = m.turn.as_ref().filter(|t| t.stop != Stop::Error) {
        lines.push(Line::from(Span::styled(reply_stats(t), theme::DIM)));
    }
    lines.push(Line::default());
    lines
}

/// `64 tok · 142 tok/s · max_tokens`: the reply's tokens (the prefill's first one + the
/// windows'), its decode rate, and why it stopped (the protocol's name).
fn reply_stats(t: &Turn) -> String {
    let stop = serde_json::to_value(t.stop)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let tps = (t.decode_tokens > 0).then_some(t.decode_tps);
    strings::reply_stats(t.decode_tokens + 1, tps, &stop)
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let title = if app.scroll.following() {
        strings::TITLE_CHAT
    } else {
        strings::TITLE_CHAT_SCROLLED
    };
    let b = block(title);
    let inner = b.inner(area);
    f.render_widget(b, area);
    if app.messages.is_empty() {
        f.render_widget(
            Paragraph::new(Span::styled(strings::EMPTY_CHAT, theme::DIM)),
            inner,
        );
        app.chat_geometry.set((0, inner.height as usize));
        return;
    }
    let width = inner.width as usize;
    let height = inner.height as usize;
    let counts = app
        .chat_cache
        .ensure(&app.messages, width, app.context.marker);
    let total: usize = counts.iter().sum();
    app.chat_geometry.set((total, height));
    let top = app.scroll.top(total, height);
    let map = app.chat_cache.entries.borrow();
    let mut visible = Vec::with_capacity(height);
    let mut start = 0;
    for (m, n) in app.messages.iter().zip(&counts) {
        let end = start + n;
        if end > top && start < top + height {
            let lines = &map[&m.uid].lines;
            let from = top.saturating_sub(start);
            let to = (top + height - start).min(*n);
            visible.extend(lines[from..to].iter().cloned());
        }
        start = end;
        if start >= top + height {
            break;
        }
    }
    f.render_widget(Paragraph::new(visible), inner);
}
