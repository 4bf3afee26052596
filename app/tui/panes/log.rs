//! The messages overlay (Ctrl+G): every notice of this session, the newest first, each shown
//! whole (wrapped), so an error cut short in the bottom bar can be read.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::{block, centered};
use crate::tui::app::{App, Level};
use crate::tui::{sanitize, strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect, scroll: u16) {
    let w = 100.min(area.width.saturating_sub(2));
    // as high as the notices need (counted by characters; a word wrap may take a row more
    // each), clear of the status bar and of the bottom bar's three rows
    let text_w = (w as usize).saturating_sub(4).max(1);
    let need: usize = app
        .log
        .iter()
        .map(|n| {
            n.text
                .split('\n')
                .map(|l| l.chars().count().div_ceil(text_w).max(1))
                .sum::<usize>()
                + 1
        })
        .sum::<usize>()
        .max(1);
    let h = ((need + 3) as u16)
        .min(area.height.saturating_sub(8))
        .max(5);
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let b = block(strings::TITLE_LOG).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let mut lines = Vec::new();
    if app.log.is_empty() {
        lines.push(Line::from(Span::styled(strings::NO_MESSAGES, theme::DIM)));
    }
    for n in app.log.iter().rev() {
        let (mark, st) = match n.level {
            Level::Error => ("✗ ", theme::ERROR),
            Level::Warn => ("! ", theme::WARN),
            Level::Info => ("· ", theme::OK),
        };
        // each notice whole: its own lines, wrapped by the paragraph
        for (i, l) in n.text.split('\n').enumerate() {
            let lead = if i == 0 { mark } else { "  " };
            lines.push(Line::from(vec![
                Span::styled(lead, st),
                Span::styled(sanitize::text(l).into_owned(), st),
            ]));
        }
    }
    let [body, foot] = ratatui::layout::Layout::vertical([
        ratatui::layout::Constraint::Fill(1),
        ratatui::layout::Constraint::Length(1),
    ])
    .areas(inner);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        body,
    );
    f.render_widget(
        Paragraph::new(Span::styled(strings::LOG_FOOTER, theme::DIM)),
        foot,
    );
}
