//! The conversations overlay (Ctrl+O): saved conversations newest first, with their ids, dates,
//! message counts and first user lines; Enter opens one (the current one is saved first).

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use super::{block, centered};
use crate::tui::app::{truncate, App};
use crate::tui::conversations::date;
use crate::tui::{sanitize, strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect, cursor: usize) {
    let list = &app.saved;
    let rows = list.rows.len().max(1) as u16;
    let r = centered(area, 110.min(area.width.saturating_sub(2)), rows + 5);
    f.render_widget(Clear, r);
    let title = strings::conversations_title(list.rows.len(), list.total);
    let b = block(&title).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let width = inner.width as usize;
    // the rows that fit, scrolled so the cursor is on screen
    let room = (inner.height as usize).saturating_sub(2).max(1);
    let first = (cursor + 1).saturating_sub(room);
    let mut lines: Vec<Line> = Vec::new();
    if list.rows.is_empty() {
        lines.push(Line::from(Span::styled(
            strings::NO_CONVERSATIONS,
            theme::DIM,
        )));
    }
    for (i, c) in list.rows.iter().enumerate().skip(first).take(room) {
        let sel = i == cursor;
        let mut spans = vec![
            Span::styled(if sel { "> " } else { "  " }, theme::KEY),
            Span::styled(
                format!("{:<17}", c.id),
                if sel { theme::SELECTED } else { theme::VALUE },
            ),
        ];
        match &c.error {
            Some(e) => spans.push(Span::styled(
                truncate(&format!(" ✗ {e}"), width.saturating_sub(19)),
                theme::ERROR,
            )),
            None => {
                let current = c.id == app.conversation_id;
                let meta = format!(" {}  {:>3} msgs  ", date(c.created), c.messages);
                let tail = if current { strings::CURRENT } else { "" };
                let room = width.saturating_sub(19 + meta.chars().count() + tail.chars().count());
                spans.push(Span::styled(meta, theme::DIM));
                spans.push(Span::styled(truncate(&c.first_line, room), theme::TEXT));
                spans.push(Span::styled(tail, theme::OK));
            }
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        strings::CONVERSATIONS_FOOTER,
        theme::DIM,
    )));
    f.render_widget(Paragraph::new(sanitize::lines(lines)), inner);
}
