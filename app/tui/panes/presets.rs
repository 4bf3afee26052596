//! The preset picker: shipped and user presets (the current one with the flags its engine
//! runs with, when toggled since), and the preset files that failed to parse.

use std::collections::BTreeMap;

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

use super::wrapped_overlay;
use crate::presets::Preset;
use crate::tui::app::App;
use crate::tui::stats::flags_label;
use crate::tui::{strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect, cursor: usize) {
    let mut lines = Vec::new();
    for (i, p) in app.presets.iter().enumerate() {
        let sel = i == cursor;
        let current = p.name == app.preset.name;
        lines.push(Line::from(vec![
            Span::styled(if sel { "> " } else { "  " }, theme::KEY),
            Span::styled(
                format!("{:<12}", p.name),
                if sel { theme::SELECTED } else { theme::VALUE },
            ),
            Span::styled(format!(" {}", p.description), theme::TEXT),
            Span::styled(if current { "  (current)" } else { "" }, theme::OK),
        ]));
        let mut spec = if p.spec > 0 {
            format!("spec {}", p.spec)
        } else {
            "no spec".into()
        };
        if let Some(n) = p.split_cpu.filter(|&n| n >= 2) {
            spec.push_str(&format!(" · {n} cards"));
        }
        lines.push(Line::from(Span::styled(
            format!(
                "    {} · ctx {} · T {} · {} · {} · {}",
                p.model.as_deref().unwrap_or("no model"),
                p.ctx_label(),
                p.sampling.temperature,
                spec,
                flags_text(app, p, current),
                p.source
            ),
            theme::DIM,
        )));
    }
    for e in &app.preset_errors {
        lines.push(Line::from(Span::styled(format!("  ✗ {e}"), theme::ERROR)));
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        strings::PRESETS_FOOTER,
        theme::DIM,
    )));
    wrapped_overlay(f, area, strings::TITLE_PRESETS, lines);
}

/// The preset's kernel flags (what switching to it runs with). For the current preset, when
/// the running engine's flags differ (toggled since, with Ctrl+T), both: the picker must not say
/// "no flags" while flags are on.
fn flags_text(app: &App, p: &Preset, current: bool) -> String {
    let preset = flags_label(&p.flag_env());
    let on = |m: &BTreeMap<String, bool>| -> Vec<String> {
        m.iter()
            .filter(|(_, v)| **v)
            .map(|(k, _)| k.clone())
            .collect()
    };
    if current && on(&app.active_flags) != on(&p.flag_env()) {
        format!(
            "running {} (preset: {preset})",
            flags_label(&app.active_flags)
        )
    } else {
        preset
    }
}
