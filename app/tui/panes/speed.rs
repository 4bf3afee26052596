//! Decode and prefill speed (tok/s, sparkline of decode per turn) and time to first token.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::Frame;

use super::{block, fmt_ms, fmt_tps};
use crate::tui::app::App;
use crate::tui::{sanitize, strings, theme};

pub const HEIGHT: u16 = 7;

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let b = block(strings::TITLE_SPEED);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let m = &app.metrics;
    let [top, spark, bottom, prev] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    if m.turns == 0 {
        f.render_widget(
            Paragraph::new(Span::styled(strings::NO_DATA, theme::DIM)),
            top,
        );
    } else {
        let line = Line::from(vec![
            Span::styled("decode ", theme::LABEL),
            Span::styled(
                format!("{} tok/s", fmt_tps(m.decode_tps.last())),
                theme::VALUE,
            ),
            Span::styled("  median ", theme::LABEL),
            Span::styled(fmt_tps(m.decode_tps.median()), theme::VALUE),
        ]);
        f.render_widget(Paragraph::new(sanitize::line(line)), top);
        let data = m.decode_tps.spark(spark.width as usize);
        f.render_widget(
            Sparkline::default().data(&data).style(theme::SPARK_SPEED),
            spark,
        );
        let line = Line::from(vec![
            Span::styled("prefill ", theme::LABEL),
            Span::styled(
                format!("{} tok/s", fmt_tps(m.prefill_tps.median())),
                theme::VALUE,
            ),
            Span::styled("  TTFT ", theme::LABEL),
            Span::styled(fmt_ms(m.ttft_ms.median()), theme::VALUE),
        ]);
        f.render_widget(Paragraph::new(sanitize::line(line)), bottom);
    }
    if let Some(p) = &app.previous {
        let line = Line::from(Span::styled(
            format!(
                "before {} tok/s · pf {} · ttft {}",
                fmt_tps(p.decode_tps),
                fmt_tps(p.prefill_tps),
                fmt_ms(p.ttft_ms)
            ),
            theme::PREVIOUS,
        ));
        f.render_widget(Paragraph::new(sanitize::line(line)), prev);
    }
}
