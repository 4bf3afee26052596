//! The A/B pane (Ctrl+B / F2): the prompt, how the arms run (at once or one after the other,
//! and why), the two replies side by side as they stream with the token where they part
//! highlighted in both, each arm's per-window ms and the ratio, then the medians per flag set
//! over this conversation.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::{block, wrapped_height};
use crate::tui::app::ab::{AbRunState, ArmState, Phase};
use crate::tui::app::App;
use crate::tui::{sanitize, strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let r = area;
    f.render_widget(Clear, r);
    let b = block(strings::TITLE_AB).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let ab = &app.ab;
    let run = ab.run.as_ref();
    let medians = median_lines(app);
    let summary_lines = summary_lines(run);
    let [prompt, note, cols, summary, med, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(summary_lines.len() as u16),
        Constraint::Length(medians.len() as u16),
        Constraint::Length(1),
    ])
    .areas(inner);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(strings::AB_PROMPT, theme::LABEL),
            Span::styled(sanitize::text(&ab.prompt.text()).into_owned(), theme::TEXT),
            Span::styled("▏", theme::CURSOR),
        ])),
        prompt,
    );
    let note_text = run.map_or(String::new(), |r| r.plan.note.clone());
    f.render_widget(Paragraph::new(Span::styled(note_text, theme::DIM)), note);
    let [a, bcol] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(cols);
    for (i, area) in [a, bcol].into_iter().enumerate() {
        column(app, f, area, i);
    }
    f.render_widget(Paragraph::new(summary_lines), summary);
    f.render_widget(Paragraph::new(medians), med);
    f.render_widget(
        Paragraph::new(Span::styled(strings::AB_FOOTER, theme::DIM)),
        footer,
    );
}

fn phase_text(a: &ArmState) -> (String, ratatui::style::Style) {
    match &a.phase {
        Phase::Waiting => (strings::AB_WAITING.into(), theme::DIM),
        Phase::Starting => (strings::AB_STARTING.into(), theme::WARN),
        Phase::Loading => (strings::AB_LOADING.into(), theme::WARN),
        Phase::Generating => (strings::ab_generating(a.windows.len()), theme::WARN),
        Phase::Done => (strings::AB_DONE.into(), theme::OK),
        Phase::Failed(why) => (strings::ab_failed(why), theme::ERROR),
        Phase::Stopped => (strings::AB_ARM_STOPPED.into(), theme::DIM),
    }
}

/// Column `i`: the arm (picker), its flags and engine, its window ms, where it parts, its text.
fn column(app: &App, f: &mut Frame, area: Rect, i: usize) {
    let ab = &app.ab;
    let label = strings::AB_COLUMNS[i];
    let picked = ab.choices.get(ab.pick[i]);
    let run = ab.run.as_ref();
    let state = run.map(|r| &r.arms[i]);
    // the running arm's name, else the one picked for the next run
    let name = state
        .map(|s| s.arm.name.clone())
        .or_else(|| picked.map(|a| a.name.clone()))
        .unwrap_or_default();
    let focused = app.ab.focus == i;
    let title = format!(" {label}: {name} ");
    let b = block(&title).border_style(if focused {
        theme::BORDER_FOCUS
    } else {
        theme::BORDER
    });
    let inner = b.inner(area);
    f.render_widget(b, area);
    let mut head: Vec<Line> = Vec::new();
    let pick_style = if focused {
        theme::SELECTED
    } else {
        theme::VALUE
    };
    if let Some(p) = picked {
        // what Enter runs next: the arm shown, unless ↑/↓ picked another
        let next = state.is_some_and(|s| s.arm.name != p.name);
        head.push(Line::from(vec![
            Span::styled(format!("◂ {} ▸", p.name), pick_style),
            Span::styled(format!(" {}", p.describe()), theme::DIM),
            Span::styled(if next { strings::AB_NEXT } else { "" }, theme::WARN),
        ]));
    }
    if let Some(s) = state {
        let (ph, st) = phase_text(s);
        let pid = s.pid.map_or(String::new(), |p| format!(" · pid {p}"));
        head.push(Line::from(vec![
            Span::styled(s.arm.describe(), theme::LABEL),
            Span::styled(pid, theme::DIM),
            Span::styled(" · ", theme::DIM),
            Span::styled(ph, st),
        ]));
        head.push(match s.window_ms() {
            Some(w) => Line::from(Span::styled(
                strings::ab_window(w.median, w.q1, w.q3, w.n),
                theme::VALUE,
            )),
            None => Line::from(Span::styled(strings::NO_DATA, theme::DIM)),
        });
        if let Some(o) = run.and_then(|r| r.outcome.as_ref()) {
            head.push(match &o.divergence {
                Some(d) => {
                    let piece = if i == 0 { &d.base_piece } else { &d.arm_piece };
                    Line::from(Span::styled(
                        strings::ab_parts_here(d.position, piece),
                        theme::AB_PART,
                    ))
                }
                None => Line::from(Span::styled(strings::AB_IDENTICAL, theme::OK)),
            });
        }
    }
    let head_h = head.len() as u16;
    let [h, body] =
        Layout::vertical([Constraint::Length(head_h), Constraint::Fill(1)]).areas(inner);
    f.render_widget(Paragraph::new(sanitize::lines(head)), h);
    let Some(s) = state else { return };
    let at = run
        .and_then(|r| r.outcome.as_ref())
        .filter(|o| o.divergence.is_some())
        .map(|o| o.at[i]);
    let (lines, part_line) = text_lines(&s.text, at);
    let total = wrapped_height(&lines, body.width);
    // follow the stream; once parted, show the parting token (two rows above it)
    let top = match part_line {
        Some(l) => wrapped_height(&lines[..l], body.width).saturating_sub(2),
        None => total.saturating_sub(body.height),
    };
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((top, 0)),
        body,
    );
}

/// The reply as lines, the characters `at = (before, len)` highlighted as the parting token and
/// what follows it marked as the arm's own; also the index of the line the token is on.
fn text_lines(text: &str, at: Option<(usize, usize)>) -> (Vec<Line<'static>>, Option<usize>) {
    let (before, len) = at.unwrap_or((usize::MAX, 0));
    let style_of = |ci: usize| {
        if ci < before {
            theme::TEXT
        } else if ci < before + len.max(1) {
            theme::AB_PART
        } else {
            theme::AB_AFTER
        }
    };
    let mut lines = vec![Vec::<Span<'static>>::new()];
    let mut part_line = None;
    let (mut run, mut run_style) = (String::new(), theme::TEXT);
    let flush = |lines: &mut Vec<Vec<Span<'static>>>, run: &mut String, st| {
        if !run.is_empty() {
            let t = sanitize::text(run).into_owned();
            if let Some(l) = lines.last_mut() {
                l.push(Span::styled(t, st));
            }
            run.clear();
        }
    };
    for (ci, c) in text.chars().enumerate() {
        let st = style_of(ci);
        if ci == before {
            part_line = Some(lines.len() - 1);
        }
        if c == '\n' {
            flush(&mut lines, &mut run, run_style);
            lines.push(Vec::new());
            continue;
        }
        if st != run_style {
            flush(&mut lines, &mut run, run_style);
            run_style = st;
        }
        run.push(c);
    }
    flush(&mut lines, &mut run, run_style);
    // a reply that ended where the other went on: the end itself is the parting point
    if at.is_some() && part_line.is_none() {
        if let Some(l) = lines.last_mut() {
            l.push(Span::styled(strings::AB_END, theme::AB_PART));
        }
        part_line = Some(lines.len() - 1);
    }
    (lines.into_iter().map(Line::from).collect(), part_line)
}

/// `B/A window ms 1.020 (+2.0%) · the replies part at token 37` under the columns.
/// Then a row per warning (`Outcome::warnings`), in red.
fn summary_lines(run: Option<&AbRunState>) -> Vec<Line<'static>> {
    let Some(r) = run else {
        return vec![Line::default()];
    };
    let mut spans = vec![Span::styled(
        r.ratio().map_or(String::new(), strings::ab_ratio),
        theme::VALUE,
    )];
    if let Some(o) = &r.outcome {
        spans.push(Span::styled(" · ", theme::DIM));
        spans.push(Span::styled(
            if o.bitwise {
                strings::AB_BITWISE
            } else {
                strings::AB_NOT_BITWISE
            },
            theme::LABEL,
        ));
        spans.push(Span::styled(" · ", theme::DIM));
        spans.push(match &o.divergence {
            Some(d) => Span::styled(
                strings::ab_parts(d.position, &d.base_piece, &d.arm_piece),
                theme::WARN,
            ),
            None => Span::styled(strings::ab_identical(d_len(r)), theme::OK),
        });
    }
    let mut out = vec![sanitize::line(Line::from(spans))];
    for w in r.outcome.iter().flat_map(|o| &o.warnings) {
        out.push(Line::from(Span::styled(
            format!("⚠ {}", sanitize::text(w)),
            theme::ERROR,
        )));
    }
    out
}

fn d_len(r: &AbRunState) -> usize {
    r.arms[0].ids.as_ref().map_or(0, |i| i.reply.len())
}

/// The medians per flag set over this conversation: a heading and one row per set.
fn median_lines(app: &App) -> Vec<Line<'static>> {
    let m = &app.ab.medians;
    let mut out = vec![Line::from(Span::styled(strings::AB_MEDIANS, theme::LABEL))];
    if m.sets.is_empty() {
        out.push(Line::from(Span::styled(
            format!("  {}", strings::AB_NO_MEDIANS),
            theme::DIM,
        )));
    }
    let w = m.sets.keys().map(|k| k.chars().count()).max().unwrap_or(0);
    // the six most measured sets: the pane stays one screen
    let mut sets: Vec<_> = m.sets.iter().collect();
    sets.sort_by_key(|(_, s)| std::cmp::Reverse(s.window_ms.len()));
    for (k, set) in sets.into_iter().take(6) {
        let Some(s) = m.spread(k) else { continue };
        out.push(sanitize::line(Line::from(vec![
            Span::styled(format!("  {k:<w$}  "), theme::LABEL),
            Span::styled(format!("{:>8.2} ms", s.median), theme::VALUE),
            Span::styled(
                format!("  ({} windows: {})", s.n, set.sources.join(", ")),
                theme::DIM,
            ),
        ])));
    }
    out
}
