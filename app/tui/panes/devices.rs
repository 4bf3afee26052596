//! Per card: memory in use by category, and the MoE expert cache (hits, misses, refusals) — or a
//! plain statement that a dense model has no experts.
//!
//! A card on the host CPU (`Card::host`) holds host memory, so the device's nominal global memory
//! is no budget: the pane shows the engine process's resident memory against what the host (or
//! its cgroup) can still give, and each category as its share of that resident memory, with the
//! rest (SYCL runtime, kernel code, heap) as "runtime". A GPU card shows its categories against
//! its own memory. Any non-zero amount fills at least one cell, so a bar is never empty by
//! rounding.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use strata::protocol::{Card, HostMemory};

use super::{block, fmt_bytes};
use crate::tui::app::{truncate, App};
use crate::tui::{sanitize, strings, theme};

type Row = (Line<'static>, Option<(f64, Style)>);

fn bar_row(name: &str, v: u64, of: u64, st: Style) -> Row {
    let label = Line::from(Span::styled(
        format!("{name:<8}{:>9} ", fmt_bytes(v)),
        theme::LABEL,
    ));
    let ratio = if of == 0 { 0.0 } else { v as f64 / of as f64 };
    (label, Some((ratio.clamp(0.0, 1.0), st)))
}

fn process_rows(h: &HostMemory, buffers: u64) -> (Vec<Row>, Row) {
    let pct = 100.0 * h.rss as f64 / h.budget.max(1) as f64;
    let rows = vec![
        bar_row(strings::RSS, h.rss, h.budget, theme::MEM_RSS),
        (
            Line::from(Span::styled(
                strings::rss_budget(&fmt_bytes(h.budget), &h.budget_from, pct),
                theme::DIM,
            )),
            None,
        ),
    ];
    let runtime = bar_row(
        strings::RUNTIME,
        h.rss.saturating_sub(buffers),
        h.rss,
        theme::MEM_OTHER,
    );
    (rows, runtime)
}

fn card_lines(card: &Card, dense: bool, width: usize) -> Vec<Row> {
    let total = card.used.total();
    let (sizes, of) = match &card.host {
        Some(h) => (strings::host_card(&fmt_bytes(total)), h.rss),
        None => (
            format!("{} / {}", fmt_bytes(total), fmt_bytes(card.budget)),
            card.budget,
        ),
    };
    // the name gives way to the figures (a CPU's full name fills the panel)
    let index = format!("#{} ", card.index);
    let room = width.saturating_sub(index.chars().count() + sizes.chars().count() + 1);
    let mut rows = vec![(
        Line::from(vec![
            Span::styled(
                format!("{index}{} ", truncate(&card.name, room.max(4))),
                theme::VALUE,
            ),
            Span::styled(sizes, theme::LABEL),
        ]),
        None,
    )];
    for (name, v, st) in [
        ("weights", card.used.weights, theme::MEM_WEIGHTS),
        ("kv", card.used.kv, theme::MEM_KV),
        ("scratch", card.used.scratch, theme::MEM_SCRATCH),
        ("other", card.used.other, theme::MEM_OTHER),
    ] {
        // on the host, "other" (always 0 there) gives way to the runtime row
        if card.host.is_some() && name == "other" && v == 0 {
            continue;
        }
        rows.push(bar_row(name, v, of, st));
        if name == "weights" && card.used.hc_q8 > 0 {
            // what STRATA_HC_Q8=1 adds (inside the weights' figure): the A/B's memory cost
            rows.push((
                Line::from(Span::styled(
                    strings::hc_q8_copies(&fmt_bytes(card.used.hc_q8)),
                    theme::DIM,
                )),
                None,
            ));
        }
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
    let moe = app.loaded.as_ref().is_some_and(|l| l.experts);
    let no_cache = d.cards.iter().all(|c| c.experts.is_none());
    let mut rows: Vec<Row> = Vec::new();
    if !moe || no_cache {
        // a MoE model without an expert cache has every expert resident: nothing is refused
        let text = if moe {
            strings::EXPERTS_RESIDENT
        } else {
            strings::NO_EXPERTS
        };
        rows.push((Line::from(Span::styled(text, theme::DIM)), None));
    }
    // every host card reports the one process: take it once
    let host = d.cards.iter().find_map(|c| c.host.as_ref());
    let buffers: u64 = d
        .cards
        .iter()
        .filter(|c| c.host.is_some())
        .map(|c| c.used.total())
        .sum();
    let runtime = host.map(|h| {
        let (process, runtime) = process_rows(h, buffers);
        rows.extend(process);
        runtime
    });
    for c in &d.cards {
        rows.extend(card_lines(c, !moe || no_cache, inner.width as usize));
    }
    rows.extend(runtime);
    for (i, (mut line, gauge)) in rows.into_iter().enumerate().take(inner.height as usize) {
        let r = Rect {
            y: inner.y + i as u16,
            height: 1,
            ..inner
        };
        if let Some((ratio, st)) = gauge {
            // A text bar (not LineGauge) so filled and free space differ in glyph, not only
            // colour; a non-zero amount shows as at least one cell.
            let w = (r.width as usize).saturating_sub(line.width());
            let mut filled = ((ratio * w as f64).round() as usize).min(w);
            if ratio > 0.0 && filled == 0 {
                filled = 1.min(w);
            }
            line.spans.push(Span::styled("█".repeat(filled), st));
            line.spans
                .push(Span::styled("░".repeat(w - filled), theme::DIM));
        }
        f.render_widget(Paragraph::new(sanitize::line(line)), r);
    }
}
