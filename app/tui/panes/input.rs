//! The message editor pane. The text is drawn through `sanitize::text` (a paste may hold control
//! characters: they show as markers, tabs as spaces), and the cursor column is measured on that
//! same drawn text.

use ratatui::layout::{Position, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::block;
use crate::tui::app::{App, Overlay};
use crate::tui::{sanitize, strings, theme};

/// Rows the pane wants: its lines (at most 6) plus borders.
pub fn height(app: &App) -> u16 {
    app.input.lines().len().clamp(1, 6) as u16 + 2
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let b = block(strings::TITLE_INPUT).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let (row, col) = app.input.cursor();
    let rows = inner.height as usize;
    let first = (row + 1).saturating_sub(rows);
    let line = &app.input.lines()[row];
    let before: String = line.chars().take(col).collect();
    let cx = sanitize::text(&before).width();
    let shift = (cx + 1).saturating_sub(inner.width as usize);
    let lines: Vec<Line> = app.input.lines()[first..]
        .iter()
        .take(rows)
        .map(|l| Line::raw(sanitize::text(l)))
        .collect();
    f.render_widget(Paragraph::new(lines).scroll((0, shift as u16)), inner);
    if app.overlay == Overlay::None {
        f.set_cursor_position(Position::new(
            inner.x + (cx - shift) as u16,
            inner.y + (row - first) as u16,
        ));
    }
}
