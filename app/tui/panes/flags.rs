//! The kernel flags in force in the running engine (as it reported them in `hello`).

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::block;
use crate::tui::app::App;
use crate::tui::{sanitize, strings, theme};

pub fn height(app: &App) -> u16 {
    app.flag_names().len() as u16 + 2
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let mut title = strings::TITLE_FLAGS.to_string();
    if let Some(h) = &app.hello {
        title.push_str(&format!("pid {} ", h.pid));
    }
    if let Some(ms) = app.last_restart_ms {
        title.push_str(&format!("· restart {ms:.0} ms "));
    }
    let b = block(&title);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let lines: Vec<Line> = app
        .flag_names()
        .into_iter()
        .map(|name| {
            let on = app.active_flags.get(&name).copied().unwrap_or(false);
            let (mark, st, word) = if on {
                ("● ", theme::FLAG_ON, "on")
            } else {
                ("○ ", theme::FLAG_OFF, "off")
            };
            Line::from(vec![
                Span::styled(mark, st),
                Span::styled(format!("{name:<18}"), theme::LABEL),
                Span::styled(word, st),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(sanitize::lines(lines)), inner);
}
