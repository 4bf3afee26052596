//! One file per pane. Each `render` takes the app state and a frame area and draws; none changes
//! state (the chat pane's line cache and geometry cell are interior, invisible to the app logic).

pub mod ab;
pub mod chat;
pub mod conversations;
pub mod devices;
pub mod draft;
pub mod flags;
pub mod help;
pub mod hints;
pub mod input;
pub mod log;
pub mod presets;
pub mod settings;
pub mod spark;
pub mod speed;
pub mod status;
pub mod toggles;
pub mod window;

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::theme;

pub fn block(title: &str) -> Block<'_> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme::BORDER)
        .title(super::sanitize::text(title))
        .title_style(theme::TITLE)
}

/// A rectangle `w`×`h` centred in `area` (clamped to it), for overlays.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    r
}

/// Rows `lines` take wrapped at `width` columns (an upper bound: word wrapping may take one more
/// row now and then than a character count says, so each wrapped line counts one spare).
pub fn wrapped_height(lines: &[Line], width: u16) -> u16 {
    let w = usize::from(width.max(1));
    lines
        .iter()
        .map(|l| match l.width() {
            n if n <= w => 1,
            n => n.div_ceil(w) + 1,
        })
        .sum::<usize>()
        .min(usize::from(u16::MAX)) as u16
}

/// A picker overlay: `lines` wrapped in a focused box titled `title`, up to 96 columns wide and
/// as high as the lines once wrapped (a long description does not push the footer out).
pub fn wrapped_overlay(f: &mut Frame, area: Rect, title: &str, lines: Vec<Line<'_>>) {
    let w = 96.min(area.width.saturating_sub(2));
    let h = wrapped_height(&lines, w.saturating_sub(2)) + 2;
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let b = block(title).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(r);
    f.render_widget(b, r);
    f.render_widget(
        Paragraph::new(super::sanitize::lines(lines)).wrap(Wrap { trim: false }),
        inner,
    );
}

pub fn fmt_ms(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0} ms")
        } else {
            format!("{v:.1} ms")
        }
    })
}

pub fn fmt_tps(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    })
}

pub fn fmt_bytes(b: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let m = b as f64 / MIB;
    if m >= 1024.0 {
        format!("{:.1} GiB", m / 1024.0)
    } else if m >= 10.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}
