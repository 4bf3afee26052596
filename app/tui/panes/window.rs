//! Verify-window time (last, median, sparkline on a spike-proof scale) and tokens per window
//! (the mean of accepted + 1, the draft panel's figure too).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{block, fmt_ms};
use crate::tui::app::App;
use crate::tui::{sanitize, strings, theme};

pub const HEIGHT: u16 = 7;

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let b = block(strings::TITLE_WINDOW);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let m = &app.metrics;
    let [text, spark, prev] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(2),
        Constraint::Length(1),
    ])
    .areas(inner);
    if m.windows == 0 {
        f.render_widget(
            Paragraph::new(Span::styled(strings::NO_DATA, theme::DIM)),
            text,
        );
    } else {
        let tpw = m
            .tokens_per_window()
            .map_or("–".into(), |v| format!("{v:.2}"));
        let data = m.window_ms.spark(spark.width as usize);
        let mut first = vec![
            Span::styled("last ", theme::LABEL),
            Span::styled(fmt_ms(m.window_ms.last()), theme::VALUE),
            Span::styled("  median ", theme::LABEL),
            Span::styled(fmt_ms(m.window_ms.median()), theme::VALUE),
        ];
        first.extend(super::spark::marker(&data, |v| fmt_ms(Some(v))));
        let lines = vec![
            Line::from(first),
            Line::from(vec![
                Span::styled(strings::TOKENS_PER_WINDOW, theme::LABEL),
                Span::styled(tpw, theme::VALUE),
                Span::styled(strings::MEAN, theme::LABEL),
                Span::styled(format!("  ({} windows)", m.windows), theme::DIM),
            ]),
        ];
        f.render_widget(Paragraph::new(sanitize::lines(lines)), text);
        super::spark::render(f, spark, &data, theme::SPARK);
    }
    if let Some(p) = &app.previous {
        let line = Line::from(vec![
            Span::styled(format!("before ({}): ", p.label), theme::PREVIOUS),
            Span::styled(format!("median {}", fmt_ms(p.window_ms)), theme::PREVIOUS),
        ]);
        f.render_widget(Paragraph::new(sanitize::line(line)), prev);
    }
}
