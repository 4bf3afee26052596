//! Draft acceptance: gauge, accepted/proposed, and tokens per window as the window panel shows
//! it (the mean of accepted + 1 per window).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};
use ratatui::Frame;

use super::block;
use crate::tui::app::App;
use crate::tui::{sanitize, strings, theme};

pub const HEIGHT: u16 = 4;

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let b = block(strings::TITLE_DRAFT);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let m = &app.metrics;
    let [gauge, text] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(inner);
    let Some(acc) = m.acceptance() else {
        let msg = if m.windows == 0 {
            strings::NO_DATA
        } else {
            strings::NO_SPEC
        };
        f.render_widget(Paragraph::new(Span::styled(msg, theme::DIM)), gauge);
        return;
    };
    let label = format!("{:.1}%  {}/{}", acc * 100.0, m.accepted, m.proposed);
    f.render_widget(
        Gauge::default()
            .ratio(acc.clamp(0.0, 1.0))
            .label(label)
            .gauge_style(theme::GAUGE_ACCEPT),
        gauge,
    );
    // the window panel's figure and label, so the two agree
    let mut spans = vec![
        Span::styled(strings::TOKENS_PER_WINDOW, theme::LABEL),
        Span::styled(
            m.tokens_per_window()
                .map_or("–".into(), |v| format!("{v:.2}")),
            theme::VALUE,
        ),
        Span::styled(strings::MEAN, theme::LABEL),
    ];
    if let Some(p) = app.previous.as_ref().and_then(|p| p.acceptance) {
        spans.push(Span::styled(
            format!("  before {:.1}%", p * 100.0),
            theme::PREVIOUS,
        ));
    }
    f.render_widget(Paragraph::new(sanitize::line(Line::from(spans))), text);
}
