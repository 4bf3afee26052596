//! The `?` overlay: every key.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use super::{block, centered};
use crate::tui::app::App;
use crate::tui::{strings, theme};

pub fn render(_app: &App, f: &mut Frame, area: Rect) {
    let keys_w = strings::KEYS
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let desc_w = strings::KEYS
        .iter()
        .map(|(_, d)| d.chars().count())
        .max()
        .unwrap_or(0);
    let w = (keys_w + desc_w + 7) as u16;
    let h = strings::KEYS.len() as u16 + 4;
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let b = block(strings::TITLE_HELP).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let mut lines: Vec<Line> = strings::KEYS
        .iter()
        .map(|(k, d)| {
            Line::from(vec![
                Span::styled(format!(" {k:<keys_w$}  "), theme::KEY),
                Span::styled(*d, theme::TEXT),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        format!(" {}", strings::HELP_FOOTER),
        theme::DIM,
    )));
    f.render_widget(Paragraph::new(lines), inner);
}
