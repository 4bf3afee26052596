//! The bottom bar: the latest notice (errors stay until replaced), else the main keys. An error
//! wraps over up to `MAX_ERROR_ROWS` rows; anything that still does not fit is cut with a pointer
//! to the messages overlay (Ctrl+G), which shows every notice whole, the newest first.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthChar;

use crate::tui::app::{App, Level};
use crate::tui::{sanitize, strings, theme};

pub const MAX_ERROR_ROWS: u16 = 3;

/// `text` cut into rows of at most `width` columns (by character, so the count is exact).
fn rows(text: &str, width: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut w = 0;
    for c in text.chars() {
        let cw = c.width().unwrap_or(0);
        if w + cw > width && w > 0 {
            out.push(String::new());
            w = 0;
        }
        if let Some(last) = out.last_mut() {
            last.push(c);
        }
        w += cw;
    }
    out
}

/// The bar's rows for this notice at this width.
fn notice_rows(text: &str, level: Level, width: usize) -> Vec<String> {
    let max = if level == Level::Error {
        MAX_ERROR_ROWS as usize
    } else {
        1
    };
    let text = sanitize::text(text).replace('\n', " ");
    let mut r = rows(&format!(" {text}"), width.max(1));
    if r.len() > max {
        r.truncate(max);
        // the last row ends with the pointer to the whole text
        let keep = width.saturating_sub(strings::MORE_IN_LOG.chars().count());
        let last: String = r[max - 1].chars().take(keep).collect();
        r[max - 1] = format!("{last}{}", strings::MORE_IN_LOG);
    }
    r
}

/// As many key hints as fit in `width`, in their order, then "? help".
fn key_hints(width: usize) -> String {
    let room = width.saturating_sub(1 + strings::HINT_HELP.chars().count());
    let mut out = String::from(" ");
    for h in strings::HINTS {
        let add = h.chars().count() + strings::HINT_SEP.chars().count();
        if out.chars().count() - 1 + add > room {
            break;
        }
        out.push_str(h);
        out.push_str(strings::HINT_SEP);
    }
    out.push_str(strings::HINT_HELP);
    out
}

/// Rows the bar takes: one, or up to `MAX_ERROR_ROWS` for a long error.
pub fn height(app: &App, width: u16) -> u16 {
    match &app.notice {
        Some(n) => notice_rows(&n.text, n.level, width as usize).len() as u16,
        None => 1,
    }
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let lines: Vec<Line> = match &app.notice {
        Some(n) => {
            let st = match n.level {
                Level::Info => theme::OK,
                Level::Warn => theme::WARN,
                Level::Error => theme::ERROR,
            };
            notice_rows(&n.text, n.level, area.width as usize)
                .into_iter()
                .map(|r| Line::from(Span::styled(r, st)))
                .collect()
        }
        None => vec![Line::from(Span::styled(
            key_hints(area.width as usize),
            theme::HINT_BAR,
        ))],
    };
    f.render_widget(Paragraph::new(lines).style(theme::HINT_BAR), area);
}
