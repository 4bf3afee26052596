//! The kernel-flag toggles: each flag with its description, whether it applies to the loaded
//! model and the host (and why not: such a flag cannot be turned on), pending vs running state;
//! Enter restarts the engine with the new set.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

use super::wrapped_overlay;
use crate::tui::app::App;
use crate::tui::stats::flags_label;
use crate::tui::{flags, strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect, cursor: usize) {
    let names = app.flag_names();
    let mut lines = Vec::new();
    let pid = app.hello.as_ref().map_or("–".into(), |h| h.pid.to_string());
    let restart = app
        .last_restart_ms
        .map_or("–".into(), |ms| format!("{ms:.0} ms"));
    lines.push(Line::from(vec![
        Span::styled("running: ", theme::LABEL),
        Span::styled(flags_label(&app.active_flags), theme::VALUE),
        Span::styled(
            format!("  (engine pid {pid}, last restart {restart})"),
            theme::DIM,
        ),
    ]));
    lines.push(Line::default());
    let pending = |n: &str| app.pending_flags.get(n).copied().unwrap_or(false);
    for (i, name) in names.iter().enumerate() {
        let on = pending(name);
        let running = app.active_flags.get(name).copied().unwrap_or(false);
        let sel = i == cursor;
        let mut head = vec![
            Span::styled(if sel { "> " } else { "  " }, theme::KEY),
            Span::styled(
                if on { "[x] " } else { "[ ] " },
                if on { theme::FLAG_ON } else { theme::FLAG_OFF },
            ),
            Span::styled(
                name.clone(),
                if sel { theme::SELECTED } else { theme::VALUE },
            ),
        ];
        if on != running {
            head.push(Span::styled(
                format!(
                    "  (running: {}; Enter applies)",
                    if running { "on" } else { "off" }
                ),
                theme::WARN,
            ));
        }
        lines.push(Line::from(head));
        lines.push(Line::from(Span::styled(
            format!("      {}", flags::description(name)),
            theme::TEXT,
        )));
        let applies = flags::applies(name, app.loaded.as_ref(), &pending, &app.host);
        lines.push(match applies {
            Ok(()) if app.loaded.is_some() => {
                Line::from(Span::styled("      ✓ applies to this model", theme::OK))
            }
            Ok(()) => Line::from(Span::styled(
                "      ? not judged (no model loaded)",
                theme::DIM,
            )),
            Err(why) if why == flags::NO_MODEL_YET => Line::from(Span::styled(
                if on {
                    format!("      ? {why}")
                } else {
                    format!("      ? {why}: it can be turned on once a model it applies to is loaded")
                },
                theme::DIM,
            )),
            // on already (a preset's, or the model changed): it can still be turned off
            Err(why) if on => Line::from(Span::styled(
                format!("      ✗ does not apply: {why} (Space turns it off)"),
                theme::WARN,
            )),
            Err(why) => Line::from(Span::styled(
                format!("      ✗ does not apply, cannot be turned on: {why}"),
                theme::WARN,
            )),
        });
    }
    lines.push(Line::default());
    if let Some(note) = &app.toggles_note {
        lines.push(Line::from(Span::styled(note.clone(), theme::ERROR)));
    }
    lines.push(Line::from(Span::styled(
        strings::TOGGLES_FOOTER,
        theme::DIM,
    )));
    wrapped_overlay(f, area, strings::TITLE_TOGGLES, lines);
}
