//! The settings overlay (Ctrl+S): the sampling fields and the system prompt of the next replies,
//! the field being edited highlighted, the reason a value was refused under them.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::{block, centered};
use crate::tui::app::App;
use crate::tui::settings::{FIELDS, SYSTEM};
use crate::tui::{sanitize, strings, theme};

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let Some(form) = &app.settings_form else {
        return;
    };
    let w = 84.min(area.width.saturating_sub(2));
    // the fields, the prompt's lines (wrapped: counted by characters, a word wrap may take one
    // more), the error, the footer, the borders
    let text_w = (w as usize).saturating_sub(2 + 4).max(1);
    let prompt_rows: usize = form.text[SYSTEM]
        .split('\n')
        .map(|l| l.chars().count().div_ceil(text_w).max(1))
        .sum();
    let h = (SYSTEM + 1 + prompt_rows + 1 + usize::from(form.error.is_some()) + 1 + 2) as u16;
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let title = if app.chat_settings.is_some() {
        strings::TITLE_SETTINGS_EDITED
    } else {
        strings::TITLE_SETTINGS
    };
    let b = block(title).border_style(theme::BORDER_FOCUS);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let mut lines = Vec::new();
    // "> name           value▌" padded to `pad` columns after the name
    let field = |i: usize, text: &str, pad: usize| {
        let sel = i == form.cursor;
        let mut spans = vec![
            Span::styled(if sel { "> " } else { "  " }, theme::KEY),
            Span::styled(
                format!("{:<15}", FIELDS[i]),
                if sel { theme::SELECTED } else { theme::LABEL },
            ),
            Span::styled(text.to_string(), theme::VALUE),
        ];
        let mut used = text.chars().count();
        if sel {
            spans.push(Span::styled("▌", theme::CURSOR));
            used += 1;
        }
        spans.push(Span::raw(" ".repeat(pad.saturating_sub(used))));
        spans
    };
    for i in 0..SYSTEM {
        let mut spans = field(i, &form.text[i], 12);
        spans.push(Span::styled(
            format!("  {}", strings::SETTINGS_HINTS[i]),
            theme::DIM,
        ));
        lines.push(Line::from(spans));
    }
    let mut head = field(SYSTEM, "", 0);
    if form.cursor == SYSTEM {
        // the cursor goes after the prompt's text, below
        head.retain(|s| s.content != "▌");
    }
    head.push(Span::styled(strings::SETTINGS_PROMPT_HINT, theme::DIM));
    lines.push(Line::from(head));
    // the prompt's own lines, wrapped by the paragraph
    let prompt: Vec<&str> = form.text[SYSTEM].split('\n').collect();
    for (n, l) in prompt.iter().enumerate() {
        let mut spans = vec![Span::styled(format!("    {l}"), theme::TEXT)];
        if form.cursor == SYSTEM && n + 1 == prompt.len() {
            spans.push(Span::styled("▌", theme::CURSOR));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::default());
    if let Some(e) = &form.error {
        lines.push(Line::from(Span::styled(format!("✗ {e}"), theme::ERROR)));
    }
    lines.push(Line::from(Span::styled(
        strings::SETTINGS_FOOTER,
        theme::DIM,
    )));
    f.render_widget(
        Paragraph::new(sanitize::lines(lines)).wrap(Wrap { trim: false }),
        inner,
    );
}
