//! The preset picker: shipped and user presets, and the preset files that failed to parse.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::{block, centered};
use crate::tui::app::App;
use crate::tui::stats::flags_label;
use crate::tui::{sanitize, strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect, cursor: usize) {
    let h = (app.presets.len() as u16) * 2 + app.preset_errors.len() as u16 * 2 + 5;
    let r = centered(area, 96.min(area.width.saturating_sub(2)), h);
    f.render_widget(Clear, r);
    let b = block(strings::TITLE_PRESETS).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(r);
    f.render_widget(b, r);
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
                p.ctx,
                p.sampling.temperature,
                spec,
                flags_label(&p.flag_env()),
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
    f.render_widget(
        Paragraph::new(sanitize::lines(lines)).wrap(Wrap { trim: false }),
        inner,
    );
}
