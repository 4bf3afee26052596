//! The top bar: preset, model, the context gauge, engine state, conversation id.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::app::{truncate, App, EngineState};
use crate::tui::{sanitize, strings, theme};

pub fn engine_text(s: &EngineState) -> String {
    match s {
        EngineState::Starting => "starting".into(),
        EngineState::Loading {
            stage,
            done,
            total,
            detail,
        } => {
            let mut s = format!("loading {stage}");
            if *total > 0 {
                s.push_str(&format!(" {done}/{total}"));
            }
            if let Some(d) = detail {
                s.push_str(&format!(" · {d}"));
            }
            s
        }
        EngineState::Ready => "ready".into(),
        EngineState::Generating(_) => "generating".into(),
        EngineState::Restarting { attempt, delay_ms } => strings::restarting(*attempt, *delay_ms),
        EngineState::Down(_) => "down (Ctrl+L restarts)".into(),
    }
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

const SEP: &str = " │ engine ";

/// The context gauge's colour: plain below 60% of the context, then yellow, and red from 85%
/// (older messages are about to be dropped, or are being dropped).
pub fn gauge_style(used: Option<u32>, n_ctx: u32) -> Style {
    let fill = used.unwrap_or(0) as f64 / n_ctx.max(1) as f64;
    if fill >= 0.85 {
        theme::CTX_FULL
    } else if fill >= 0.6 {
        theme::CTX_HIGH
    } else {
        theme::STATUS_BAR
    }
}

/// A parameter count as "135M", or "283K" below a million (the synthetic test models).
fn params(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.0}M", n as f64 / 1e6)
    } else {
        format!("{:.0}K", n as f64 / 1e3)
    }
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let model = match &app.loaded {
        Some(l) => format!(
            "{} ({}, {} params{})",
            file_name(&l.model),
            l.arch,
            params(l.n_params),
            if l.synthetic { strings::SYNTHETIC } else { "" },
        ),
        // ($VAR resolved, so a loading model shows its file, not "$STRATA_MODEL_SMOLLM2")
        None => match (&app.preset.model, app.preset.model_path()) {
            (None, _) => "no model".into(),
            (Some(_), Ok(p)) => file_name(&p.to_string_lossy()).to_string(),
            (Some(m), Err(_)) => file_name(m).to_string(),
        },
    };
    let preset = format!("│ preset {}", app.preset.name);
    // tokens the conversation fills of the context, once a model is loaded
    let gauge = app.loaded.as_ref().map(|l| {
        (
            format!(" {} ", strings::ctx_gauge(app.context.used, l.n_ctx)),
            gauge_style(app.context.used, l.n_ctx),
        )
    });
    // " │" + gauge + "│ engine " in place of SEP: one more than SEP and the gauge
    let gauge_len = gauge.as_ref().map_or(0, |(g, _)| g.chars().count() + 1);
    let mut conv = format!(" │ {}", app.conversation_id);
    // the engine's state first (a long load names the kernel compiling), then the gauge, the model
    // the rest: a narrow terminal drops the conversation id, then the model, rather than clip
    let width = area.width as usize;
    let fixed =
        strings::APP.chars().count() + 2 + preset.chars().count() + SEP.chars().count() + gauge_len;
    const MODEL_MIN: usize = 12;
    const MODEL_SEP: &str = " │ ";
    let engine = truncate(
        &engine_text(&app.engine),
        width
            .saturating_sub(fixed + MODEL_SEP.len() + MODEL_MIN)
            .max(16),
    );
    let room = width.saturating_sub(fixed + engine.chars().count());
    if room < conv.chars().count() + 3 + MODEL_MIN {
        conv.clear();
    }
    let model_room = room.saturating_sub(conv.chars().count() + 3);
    let model = if model_room >= MODEL_MIN {
        format!("{MODEL_SEP}{}", truncate(&model, model_room))
    } else {
        String::new()
    };
    let engine_style = match app.engine {
        EngineState::Ready | EngineState::Generating(_) => theme::STATUS_BAR,
        EngineState::Down(_) => theme::ERROR.bg(theme::STATUS_BAR.bg.unwrap_or_default()),
        _ => theme::STATUS_BAR,
    };
    let mut spans = vec![
        Span::styled(
            format!(" {} ", strings::APP),
            theme::STATUS_BAR.add_modifier(ratatui::style::Modifier::BOLD),
        ),
        Span::styled(preset, theme::STATUS_BAR),
        Span::styled(model, theme::STATUS_BAR),
    ];
    match gauge {
        Some((g, style)) => spans.extend([
            Span::styled(" │", theme::STATUS_BAR),
            Span::styled(g, style),
            Span::styled(&SEP[1..], theme::STATUS_BAR),
        ]),
        None => spans.push(Span::styled(SEP, theme::STATUS_BAR)),
    }
    spans.extend([
        Span::styled(engine, engine_style),
        Span::styled(conv, theme::STATUS_BAR),
    ]);
    let text = Line::from(spans);
    f.render_widget(
        Paragraph::new(sanitize::line(text)).style(theme::STATUS_BAR),
        area,
    );
}
