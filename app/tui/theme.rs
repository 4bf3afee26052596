//! The one theme: every colour and text style the TUI uses.

use ratatui::style::{Color, Modifier, Style};

pub const BORDER: Style = Style::new().fg(Color::DarkGray);
pub const BORDER_FOCUS: Style = Style::new().fg(Color::Cyan);
pub const TITLE: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
pub const TEXT: Style = Style::new();
pub const DIM: Style = Style::new().fg(Color::DarkGray);
pub const LABEL: Style = Style::new().fg(Color::Gray);
pub const VALUE: Style = Style::new().fg(Color::White).add_modifier(Modifier::BOLD);
pub const PREVIOUS: Style = Style::new().fg(Color::Magenta);
pub const OK: Style = Style::new().fg(Color::Green);
pub const WARN: Style = Style::new().fg(Color::Yellow);
pub const ERROR: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
pub const STATUS_BAR: Style = Style::new().fg(Color::Black).bg(Color::Cyan);
/// The status bar's context gauge as the context fills (below 60%: `STATUS_BAR`).
pub const CTX_HIGH: Style = Style::new().fg(Color::Black).bg(Color::Yellow);
pub const CTX_FULL: Style = Style::new()
    .fg(Color::White)
    .bg(Color::Red)
    .add_modifier(Modifier::BOLD);
pub const HINT_BAR: Style = Style::new().fg(Color::Gray).bg(Color::Black);
pub const KEY: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
pub const SELECTED: Style = Style::new()
    .bg(Color::DarkGray)
    .add_modifier(Modifier::BOLD);

pub const USER: Style = Style::new().fg(Color::Green).add_modifier(Modifier::BOLD);
pub const ASSISTANT: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
pub const SYSTEM: Style = Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD);
pub const CURSOR: Style = Style::new()
    .fg(Color::Cyan)
    .add_modifier(Modifier::SLOW_BLINK);

// Markdown.
pub const HEADING: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
pub const H1: Style = HEADING.add_modifier(Modifier::UNDERLINED);
pub const EMPHASIS: Style = Style::new().add_modifier(Modifier::ITALIC);
pub const STRONG: Style = Style::new().add_modifier(Modifier::BOLD);
pub const STRIKE: Style = Style::new().add_modifier(Modifier::CROSSED_OUT);
pub const INLINE_CODE: Style = Style::new().fg(Color::LightRed);
pub const LINK: Style = Style::new()
    .fg(Color::Blue)
    .add_modifier(Modifier::UNDERLINED);
pub const QUOTE: Style = Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC);
pub const BULLET: Style = Style::new().fg(Color::Yellow);
pub const RULE: Style = Style::new().fg(Color::DarkGray);
pub const CODE_FRAME: Style = Style::new().fg(Color::DarkGray);

// Code highlighting.
pub const CODE: Style = Style::new().fg(Color::White);
pub const CODE_KEYWORD: Style = Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD);
pub const CODE_STRING: Style = Style::new().fg(Color::Green);
pub const CODE_NUMBER: Style = Style::new().fg(Color::LightYellow);
pub const CODE_COMMENT: Style = Style::new()
    .fg(Color::DarkGray)
    .add_modifier(Modifier::ITALIC);
pub const CODE_TYPE: Style = Style::new().fg(Color::LightCyan);
pub const CODE_PUNCT: Style = Style::new().fg(Color::Gray);

// Panels.
pub const SPARK: Style = Style::new().fg(Color::Cyan);
pub const SPARK_SPEED: Style = Style::new().fg(Color::Green);
/// A sparkline bar clamped to the top of a robust scale (stats::Spark), and its marker.
pub const SPIKE: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
pub const GAUGE_ACCEPT: Style = Style::new().fg(Color::Green).bg(Color::Black);
pub const MEM_WEIGHTS: Style = Style::new().fg(Color::Blue);
pub const MEM_KV: Style = Style::new().fg(Color::Magenta);
pub const MEM_SCRATCH: Style = Style::new().fg(Color::Yellow);
pub const MEM_OTHER: Style = Style::new().fg(Color::Gray);
pub const MEM_RSS: Style = Style::new().fg(Color::Cyan);
pub const FLAG_ON: Style = Style::new().fg(Color::Green).add_modifier(Modifier::BOLD);
pub const FLAG_OFF: Style = Style::new().fg(Color::DarkGray);

// The A/B pane.
/// The token where the two arms' replies part, in both columns.
pub const AB_PART: Style = Style::new()
    .fg(Color::Black)
    .bg(Color::Yellow)
    .add_modifier(Modifier::BOLD);
/// A reply's text after the parting token (no longer shared with the other arm).
pub const AB_AFTER: Style = Style::new().fg(Color::LightYellow);
