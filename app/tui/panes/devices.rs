//! Per card: memory in use by category against the budget (gauges), and the MoE expert cache
//! (hits, misses, refusals) — or a plain statement that a dense model has no experts.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use strata::protocol::Card;

use super::{block, fmt_bytes};
use crate::tui::app::App;
use crate::tui::{sanitize, strings, theme};

fn card_lines(card: &Card, dense: bool) -> Vec<(Line<'static>, Option<(f64, Style)>)> {
    let total = card.used.total();
    let mut rows = vec![(
        Line::from(vec![
            Span::styled(format!("#{} {} ", card.index, card.name), theme::VALUE),
            Span::styled(
                format!("{} / {}", fmt_bytes(total), fmt_bytes(card.budget)),
                theme::LABEL,
            ),
        ]),
        None,
    )];
    let budget = card.budget.max(1) as f64;
    for (name, v, st) in [
        ("weights", card.used.weights, theme::MEM_WEIGHTS),
        ("kv", card.used.kv, theme::MEM_KV),
        ("scratch", card.used.scratch, theme::MEM_SCRATCH),
        ("other", card.used.other, theme::MEM_OTHER),
    ] {
        let label = Line::from(Span::styled(
            format!("{name:<8}{:>9} ", fmt_bytes(v)),
            theme::LABEL,
        ));
        rows.push((label, Some(((v as f64 / budget).clamp(0.0, 1.0), st))));
    }
    if !dense {
        let line = match &card.experts {
            Some(e) => {
                let looked = e.hits + e.misses;
                let rate = if looked > 0 {
                    format!(" · {:.0}%", 100.0 * e.hits as f64 / looked as f64)
                } else {
                    String::new()
                };
                Line::from(vec![
                    Span::styled("MoE ", theme::LABEL),
                    Span::styled(
                        format!(
                            "hit {} · miss {} · refused {}",
                            e.hits, e.misses, e.refusals
                        ),
                        theme::VALUE,
                    ),
                    Span::styled(rate, theme::DIM),
                ])
            }
            None => Line::from(Span::styled("experts: no cache on this card", theme::DIM)),
        };
        rows.push((line, None));
    }
    rows
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let b = block(strings::TITLE_DEVICES);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let Some(d) = &app.devices else {
        f.render_widget(
            Paragraph::new(Span::styled(strings::NO_DATA, theme::DIM)),
            inner,
        );
        return;
    };
    let dense = app.loaded.as_ref().is_some_and(|l| !l.experts)
        || d.cards.iter().all(|c| c.experts.is_none());
    let mut rows: Vec<(Line<'static>, Option<(f64, Style)>)> = Vec::new();
    if dense {
        rows.push((
            Line::from(Span::styled(strings::NO_EXPERTS, theme::DIM)),
            None,
        ));
    }
    for c in &d.cards {
        rows.extend(card_lines(c, dense));
    }
    for (i, (mut line, gauge)) in rows.into_iter().enumerate().take(inner.height as usize) {
        let r = Rect {
            y: inner.y + i as u16,
            height: 1,
            ..inner
        };
        if let Some((ratio, st)) = gauge {
            // A text bar (not LineGauge) so filled and free space differ in glyph, not only colour.
            let w = (r.width as usize).saturating_sub(line.width());
            let filled = ((ratio * w as f64).round() as usize).min(w);
            line.spans.push(Span::styled("█".repeat(filled), st));
            line.spans
                .push(Span::styled("░".repeat(w - filled), theme::DIM));
        }
        f.render_widget(Paragraph::new(sanitize::line(line)), r);
    }
}
