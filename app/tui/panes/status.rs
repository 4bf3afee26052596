//! The top bar: preset, model, engine state, conversation id.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::app::{truncate, App, EngineState};
use crate::tui::{strings, theme};

pub fn engine_text(s: &EngineState) -> String {
    match s {
        EngineState::Starting => "starting".into(),
        EngineState::Loading { stage, done, total } if *total > 0 => {
            format!("loading {stage} {done}/{total}")
        }
        EngineState::Loading { stage, .. } => format!("loading {stage}"),
        EngineState::Ready => "ready".into(),
        EngineState::Generating(_) => "generating".into(),
        EngineState::Restarting { attempt, delay_ms } => strings::restarting(*attempt, *delay_ms),
        EngineState::Down(_) => "down (Ctrl+L restarts)".into(),
    }
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let model = match &app.loaded {
        Some(l) => format!(
            "{} ({}, {:.0}M params, ctx {})",
            file_name(&l.model),
            l.arch,
            l.n_params as f64 / 1e6,
            l.n_ctx
        ),
        None => app
            .preset
            .model
            .as_deref()
            .map_or("no model".into(), |m| file_name(m).to_string()),
    };
    let engine_style = match app.engine {
        EngineState::Ready | EngineState::Generating(_) => theme::STATUS_BAR,
        EngineState::Down(_) => theme::ERROR.bg(theme::STATUS_BAR.bg.unwrap_or_default()),
        _ => theme::STATUS_BAR,
    };
    let text = Line::from(vec![
        Span::styled(
            format!(" {} ", strings::APP),
            theme::STATUS_BAR.add_modifier(ratatui::style::Modifier::BOLD),
        ),
        Span::styled(
            format!("│ preset {} │ ", app.preset.name),
            theme::STATUS_BAR,
        ),
        Span::styled(
            truncate(&model, (area.width as usize).saturating_sub(70).max(20)),
            theme::STATUS_BAR,
        ),
        Span::styled(" │ engine ", theme::STATUS_BAR),
        Span::styled(engine_text(&app.engine), engine_style),
        Span::styled(format!(" │ {}", app.conversation_id), theme::STATUS_BAR),
    ]);
    f.render_widget(Paragraph::new(text).style(theme::STATUS_BAR), area);
}
