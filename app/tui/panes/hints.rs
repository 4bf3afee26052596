//! The bottom bar: the latest notice (errors stay until replaced), else the main keys.

use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::app::{App, Level};
use crate::tui::{sanitize, strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let span = match &app.notice {
        Some(n) => {
            let st = match n.level {
                Level::Info => theme::OK,
                Level::Warn => theme::WARN,
                Level::Error => theme::ERROR,
            };
            Span::styled(format!(" {}", n.text), st)
        }
        None => Span::styled(format!(" {}", strings::HINTS), theme::HINT_BAR),
    };
    f.render_widget(
        Paragraph::new(sanitize::span(span)).style(theme::HINT_BAR),
        area,
    );
}
