//! Decode and prefill speed (tok/s: live from the windows while a reply streams, then the
//! turn's; a sparkline of decode per turn) and time to first token.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
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
    let live = m.live_tps();
    if m.turns == 0 && live.is_none() {
        f.render_widget(
            Paragraph::new(Span::styled(strings::NO_DATA, theme::DIM)),
            top,
        );
    } else {
        // while a reply streams: its running rate from the windows so far; then the turn's own
        let (now, tag) = match live {
            Some(v) => (Some(v), strings::LIVE),
            None => (m.decode_tps.last(), ""),
        };
        let data = m.decode_tps.spark(spark.width as usize);
        let mut spans = vec![
            Span::styled("decode ", theme::LABEL),
            Span::styled(format!("{} tok/s", fmt_tps(now)), theme::VALUE),
            Span::styled(tag, theme::OK),
            Span::styled("  median ", theme::LABEL),
            Span::styled(fmt_tps(m.decode_tps.median()), theme::VALUE),
        ];
        spans.extend(super::spark::marker(&data, |v| fmt_tps(Some(v))));
        f.render_widget(Paragraph::new(sanitize::line(Line::from(spans))), top);
        super::spark::render(f, spark, &data, theme::SPARK_SPEED);
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
