//! The main screen layout: status bar, conversation + input, live panels, hint bar, overlays.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::app::{App, Overlay};
use super::panes;
use super::{markdown, sanitize, strings, theme};

/// Below this the layout cannot be drawn sensibly: a message instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;
/// From this width on the live panels sit beside the conversation.
pub const PANELS_FROM_WIDTH: u16 = 100;
pub const PANEL_WIDTH: u16 = 44;
/// The startup banner above the input takes at most this many rows.
pub const MAX_BANNER_ROWS: usize = 4;

/// Draws the frame; [`sanitize::scrub`] then makes sure no control character reaches the
/// terminal (each pane already shows them as markers; this catches one that did not).
pub fn draw(f: &mut Frame, app: &App) {
    draw_screen(f, app);
    let scrubbed = sanitize::scrub(f.buffer_mut());
    if scrubbed > 0 {
        tracing::warn!(
            cells = scrubbed,
            "control characters reached the frame unsanitised"
        );
    }
}

pub fn draw_screen(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = strings::too_small(area.width, area.height, MIN_WIDTH, MIN_HEIGHT);
        let [_, mid, _] = Layout::vertical([
            Constraint::Fill(1),
            Constraint::Length(3),
            Constraint::Fill(1),
        ])
        .areas(area);
        f.render_widget(
            Paragraph::new(Span::styled(msg, theme::WARN))
                .wrap(Wrap { trim: true })
                .centered(),
            mid,
        );
        return;
    }
    let [status, body, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(panes::hints::height(app, area.width)),
    ])
    .areas(area);
    panes::status::render(app, f, status);
    panes::hints::render(app, f, hints);
    let chat_col = if area.width >= PANELS_FROM_WIDTH {
        let [c, p] =
            Layout::horizontal([Constraint::Fill(1), Constraint::Length(PANEL_WIDTH)]).areas(body);
        draw_panels(app, f, p);
        c
    } else {
        body
    };
    let banner_lines = banner_lines(app, chat_col.width as usize);
    let banner_h = banner_lines.len().min(MAX_BANNER_ROWS) as u16;
    let [chat, banner, input] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(banner_h),
        Constraint::Length(panes::input::height(app)),
    ])
    .areas(chat_col);
    panes::chat::render(app, f, chat);
    if banner_h > 0 {
        f.render_widget(Paragraph::new(banner_lines), banner);
    }
    panes::input::render(app, f, input);
    match app.overlay {
        Overlay::None => {}
        Overlay::Help => panes::help::render(app, f, area),
        Overlay::Toggles { cursor } => panes::toggles::render(app, f, area, cursor),
        Overlay::Presets { cursor } => panes::presets::render(app, f, area, cursor),
        Overlay::Conversations { cursor } => panes::conversations::render(app, f, area, cursor),
        Overlay::Settings => panes::settings::render(app, f, area),
        Overlay::Log { scroll } => panes::log::render(app, f, area, scroll),
        Overlay::Ab => panes::ab::render(app, f, body),
    }
}

/// Startup problems above the input, each wrapped whole (at most `MAX_BANNER_ROWS` rows; the
/// messages overlay has them all).
fn banner_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = app
        .banner
        .iter()
        .flat_map(|b| {
            markdown::plain(
                &format!("✗ {}", sanitize::text(b)),
                width.max(1),
                theme::ERROR,
            )
        })
        .collect();
    if lines.len() > MAX_BANNER_ROWS {
        lines.truncate(MAX_BANNER_ROWS - 1);
        lines.push(Line::from(Span::styled(strings::MORE_IN_LOG, theme::ERROR)));
    }
    lines
}

fn draw_panels(app: &App, f: &mut Frame, area: Rect) {
    let [w, s, d, fl, dev] = Layout::vertical([
        Constraint::Length(panes::window::HEIGHT),
        Constraint::Length(panes::speed::HEIGHT),
        Constraint::Length(panes::draft::HEIGHT),
        Constraint::Length(panes::flags::height(app)),
        Constraint::Fill(1),
    ])
    .areas(area);
    panes::window::render(app, f, w);
    panes::speed::render(app, f, s);
    panes::draft::render(app, f, d);
    panes::flags::render(app, f, fl);
    panes::devices::render(app, f, dev);
}
