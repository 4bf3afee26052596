//! A sparkline on the robust scale of `stats::Spark`: spikes drawn full height in the spike
//! style, and the marker that says how high the largest one went.

use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Sparkline, SparklineBar};
use ratatui::Frame;

use crate::tui::stats::{Spark, SPARK_TOP};
use crate::tui::{strings, theme};

pub fn render(f: &mut Frame, area: Rect, spark: &Spark, style: ratatui::style::Style) {
    let bars: Vec<SparklineBar> = spark
        .bars
        .iter()
        .zip(&spark.spikes)
        .map(|(&b, &spike)| {
            let bar = SparklineBar::from(b);
            if spike {
                bar.style(theme::SPIKE)
            } else {
                bar
            }
        })
        .collect();
    f.render_widget(
        Sparkline::default().data(bars).max(SPARK_TOP).style(style),
        area,
    );
}

/// "  ▲ 612 ms" (the largest spike, in `fmt`'s units), if there is one.
pub fn marker(spark: &Spark, fmt: impl Fn(f64) -> String) -> Option<Span<'static>> {
    spark
        .max_spike
        .map(|v| Span::styled(strings::spike(&fmt(v)), theme::SPIKE))
}
