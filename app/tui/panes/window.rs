//! Verify-window time (last, median, sparkline) and tokens per window.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};
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
            .tokens_per_window
            .median()
            .map_or("–".into(), |v| format!("{v:.2}"));
        let lines = vec![
            Line::from(vec![
                Span::styled("last ", theme::LABEL),
                Span::styled(fmt_ms(m.window_ms.last()), theme::VALUE),
                Span::styled("  median ", theme::LABEL),
                Span::styled(fmt_ms(m.window_ms.median()), theme::VALUE),
            ]),
            Line::from(vec![
                Span::styled("tokens/window ", theme::LABEL),
                Span::styled(tpw, theme::VALUE),
                Span::styled(format!("  ({} windows)", m.windows), theme::DIM),
            ]),
        ];
        f.render_widget(Paragraph::new(sanitize::lines(lines)), text);
        let data = m.window_ms.spark(spark.width as usize);
        f.render_widget(Sparkline::default().data(&data).style(theme::SPARK), spark);
    }
    if let Some(p) = &app.previous {
        let line = Line::from(vec![
            Span::styled(format!("before ({}): ", p.label), theme::PREVIOUS),
            Span::styled(format!("median {}", fmt_ms(p.window_ms)), theme::PREVIOUS),
        ]);
        f.render_widget(Paragraph::new(sanitize::line(line)), prev);
    }
}
