//! Every user-visible string of the TUI in one place.

pub const APP: &str = "strata";

/// (keys, what they do) for the help overlay, in display order.
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "send the message"),
    ("Shift+Enter, Ctrl+J, Alt+Enter", "insert a newline"),
    ("Esc", "stop generation / close a pane"),
    ("Ctrl+R", "regenerate the last reply"),
    ("Ctrl+Y", "copy the last reply (OSC 52 clipboard)"),
    ("Ctrl+T", "kernel flag toggles (A/B)"),
    ("Ctrl+P", "preset picker"),
    ("Ctrl+N", "new conversation"),
    ("Ctrl+E", "export the conversation to markdown"),
    ("Ctrl+L", "restart the engine now"),
    ("PgUp/PgDn, mouse wheel", "scroll the conversation"),
    ("Ctrl+End", "back to the bottom (follow the stream)"),
    ("? (empty input), F1", "this help"),
    ("Ctrl+C, Ctrl+Q", "quit"),
];

pub const HINTS: &str =
    "Enter send · Ctrl+J newline · Esc stop · Ctrl+R regen · Ctrl+Y copy · Ctrl+T flags · Ctrl+P presets · ? help";

pub const TITLE_CHAT: &str = " Conversation ";
pub const TITLE_CHAT_SCROLLED: &str = " Conversation (scrolled: Ctrl+End to follow) ";
pub const TITLE_INPUT: &str = " Message ";
pub const TITLE_WINDOW: &str = " Verify window ";
pub const TITLE_SPEED: &str = " Speed ";
pub const TITLE_DRAFT: &str = " Draft acceptance ";
pub const TITLE_DEVICES: &str = " Cards ";
pub const TITLE_FLAGS: &str = " Kernel flags ";
pub const TITLE_HELP: &str = " Keys ";
pub const TITLE_TOGGLES: &str = " Kernel flag toggles ";
pub const TITLE_PRESETS: &str = " Presets ";

pub const YOU: &str = "You";
pub const ASSISTANT: &str = "Assistant";
pub const SYSTEM: &str = "System";
pub const INTERRUPTED: &str = "interrupted";
pub const STOPPED: &str = "stopped";

pub const EMPTY_CHAT: &str = "Type a message and press Enter. ? shows all keys.";
pub const NO_DATA: &str = "no data yet";
pub const NO_EXPERTS: &str = "dense model: no experts";
pub const NO_SPEC: &str = "no drafts proposed (speculation off)";
pub const NOT_READY: &str = "the engine is not ready yet";
pub const QUEUED: &str = "the engine is loading: the message goes out when it is ready";
pub const QUEUE_CANCELLED: &str = "the waiting message will not be sent (Ctrl+R sends it)";
pub const ALREADY_QUEUED: &str = "a message is already waiting for the engine";
pub const QUEUED_LOST: &str =
    "the waiting message was not sent (the engine is down): Ctrl+R sends it once it is back";
pub const BUSY: &str = "a reply is being generated (Esc stops it)";
pub const NOTHING_TO_COPY: &str = "no reply to copy yet";
pub const COPIED: &str = "last reply copied to the clipboard (OSC 52)";
pub const NOTHING_TO_REGEN: &str = "no reply to regenerate";

pub const TOGGLES_FOOTER: &str =
    "↑/↓ select · Space toggle · Enter apply (restarts the engine) · Esc close";
pub const PRESETS_FOOTER: &str = "↑/↓ select · Enter switch (reloads the engine) · Esc close";
pub const HELP_FOOTER: &str = "Esc or ? closes";

pub fn too_small(w: u16, h: u16, min_w: u16, min_h: u16) -> String {
    format!("Terminal too small: {w}×{h}. Strata needs at least {min_w}×{min_h}.")
}

pub fn engine_died(reason: &str) -> String {
    format!("engine stopped: {reason}")
}

pub fn restarting(attempt: u32, delay_ms: u64) -> String {
    format!(
        "restarting the engine (attempt {attempt}) in {:.1} s",
        delay_ms as f64 / 1000.0
    )
}

pub fn gave_up(attempts: u32) -> String {
    format!("the engine failed {attempts} times in a row; press Ctrl+L to restart it")
}

pub fn restarted(ms: f64) -> String {
    format!("engine restarted with the new flags in {ms:.0} ms")
}
