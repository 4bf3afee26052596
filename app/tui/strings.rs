//! Every user-visible string of the TUI in one place.

pub const APP: &str = "strata";
/// After the model's size in the status bar when its weights are synthetic (`strata synth`).
pub const SYNTHETIC: &str = ", synthetic: random weights, the text is noise";

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
    ("Ctrl+O", "saved conversations: list, open one"),
    ("Ctrl+S", "settings: system prompt, sampling"),
    ("Ctrl+G", "messages: every notice and error, whole"),
    ("Ctrl+L", "restart the engine now"),
    ("Ctrl+B, F2", "A/B pane: one prompt under two flag sets"),
    ("PgUp/PgDn, mouse wheel", "scroll the conversation"),
    ("Ctrl+End", "back to the bottom (follow the stream)"),
    ("? (empty input), F1", "this help"),
    ("Ctrl+C", "stop the reply; press again to quit"),
    ("Ctrl+Q", "quit"),
];

/// The bottom bar's key hints, most wanted first: as many as fit are shown, then "? help".
pub const HINTS: &[&str] = &[
    "Enter send",
    "Ctrl+J newline",
    "Esc stop",
    "Ctrl+R regen",
    "Ctrl+O chats",
    "Ctrl+S settings",
    "Ctrl+T flags",
    "Ctrl+P presets",
    "Ctrl+Y copy",
    "Ctrl+G messages",
    "Ctrl+B A/B",
];
pub const HINT_HELP: &str = "? help";
pub const HINT_SEP: &str = " · ";
/// Ends a notice cut short in the bottom bar.
pub const MORE_IN_LOG: &str = "… Ctrl+G shows all";

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
pub const TITLE_SETTINGS: &str = " Settings (the preset's; Enter sets them for this conversation) ";
pub const TITLE_SETTINGS_EDITED: &str = " Settings (this conversation's) ";
pub const TITLE_LOG: &str = " Messages (newest first) ";

pub const YOU: &str = "You";
pub const ASSISTANT: &str = "Assistant";
pub const SYSTEM: &str = "System";
pub const INTERRUPTED: &str = "interrupted";
pub const STOPPED: &str = "stopped";

pub const EMPTY_CHAT: &str = "Type a message and press Enter. ? shows all keys.";
pub const NO_DATA: &str = "no data yet";
/// Tokens per verify window (accepted drafts + 1): the window and draft panels' shared label.
pub const TOKENS_PER_WINDOW: &str = "tokens/window ";
pub const MEAN: &str = " mean";
pub const LIVE: &str = " live";
pub const NO_EXPERTS: &str = "dense model: no experts";
/// Under a card's weights bar with STRATA_HC_Q8=1: the Q8_0 copies it adds.
pub fn hc_q8_copies(size: &str) -> String {
    format!("  of which {size} HC Q8_0 copies (STRATA_HC_Q8)")
}

/// A MoE model whose experts are all on the cards (no expert streaming, so none refused).
pub const EXPERTS_RESIDENT: &str = "MoE: every expert resident, none streamed";
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
pub const CTRL_C_STOPPED: &str = "reply stopped · Ctrl+C again to quit";
pub const CTRL_C_AGAIN: &str = "Ctrl+C again to quit (Ctrl+Q quits at once)";
pub const CTRL_C_AGAIN_SHORT: &str = "Ctrl+C again to quit";

pub const TOGGLES_FOOTER: &str =
    "↑/↓ select · Space toggle · Enter apply (restarts the engine) · Esc close";
pub const PRESETS_FOOTER: &str = "↑/↓ select · Enter switch (reloads the engine) · Esc close";
pub const HELP_FOOTER: &str = "Esc or ? closes";

pub const NO_MESSAGES: &str = "no messages yet";
pub const LOG_FOOTER: &str = "↑/↓ PgUp/PgDn scroll · Esc close";
pub const NO_CONVERSATIONS: &str = "no saved conversation yet";
pub const CURRENT: &str = "  (current)";
pub const CONVERSATIONS_FOOTER: &str =
    "↑/↓ select · Enter open (this conversation is saved first) · Esc close";
/// What each settings field takes (FIELDS order, the system prompt last).
pub const SETTINGS_HINTS: [&str; 7] = [
    "0 = greedy, up to 100",
    "0 = off",
    "(0, 1], 1 = off",
    "[0, 1], 0 = off",
    "> 0, 1 = off",
    "tokens per reply, at least 1",
    "empty = from the clock",
];
pub const SETTINGS_FOOTER: &str =
    "↑/↓ field · Ctrl+U clear · Ctrl+R the preset's values · Enter apply · Esc cancel";
pub const SETTINGS_PROMPT_HINT: &str = "  Ctrl+J: a new line";
pub const SETTINGS_APPLIED: &str =
    "settings set for this conversation: they apply from the next reply";
pub const SETTINGS_PRESET: &str = "this conversation follows the preset's settings again";
pub const RSS: &str = "RSS";
pub const RUNTIME: &str = "runtime";

/// The dim line under the engine's RSS bar: the budget and where it came from.
pub fn rss_budget(budget: &str, from: &str, pct: f64) -> String {
    let from = match from {
        "cgroup" => "cgroup limit",
        "meminfo" => "MemAvailable + RSS",
        other => other,
    };
    format!("of {budget} ({from}) · {pct:.1}%")
}

/// A host card's header figures: its buffers, part of the RSS (the bars below: their shares).
pub fn host_card(buffers: &str) -> String {
    format!("{buffers} of the RSS")
}

pub fn conversations_title(shown: usize, total: usize) -> String {
    if shown < total {
        format!(" Conversations ({shown} newest of {total}) ")
    } else {
        format!(" Conversations ({total} saved) ")
    }
}

pub fn cannot_list(e: &str) -> String {
    format!("cannot list the saved conversations: {e}")
}

pub fn cannot_open(id: &str, e: &str) -> String {
    format!("cannot open conversation {id}: {e}")
}

pub fn not_switching(why: &str) -> String {
    format!("not switching: the conversation on screen could not be saved ({why})")
}

pub fn opened_conversation(id: &str, messages: usize) -> String {
    format!("opened conversation {id} ({messages} messages)")
}

pub fn other_preset(id: &str, preset: &str, current: &str) -> String {
    format!("conversation {id} was saved under preset {preset:?}; it goes on under {current} (Ctrl+P switches)")
}

/// The dimmed line under a finished reply: `64 tok · 142 tok/s · max_tokens`.
pub fn reply_stats(tokens: u32, tps: Option<f64>, stop: &str) -> String {
    let tps = tps.map_or("–".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    });
    format!("{tokens} tok · {tps} tok/s · {stop}")
}

/// The marker after a panel's figures when its sparkline clamped a spike.
pub fn spike(value: &str) -> String {
    format!("  ▲{value}")
}

pub const CHECKING_LENGTH: &str = "counting the message's tokens (it is long)…";

/// The status bar's context gauge: tokens the conversation fills of the context.
pub fn ctx_gauge(used: Option<u32>, n_ctx: u32) -> String {
    match used {
        Some(u) => format!("ctx {u}/{n_ctx}"),
        None => format!("ctx ?/{n_ctx}"),
    }
}

/// The line above the first message the model still sees.
pub fn dropped_marker(n: u32) -> String {
    let s = if n == 1 { " is" } else { "s are" };
    format!("── {n} earlier message{s} outside the model's context ──")
}

/// Under a reply that stopped at its limit.
pub fn cut_max_tokens(n: u32) -> String {
    format!("⋯ cut at the reply limit (max_tokens {n})")
}

/// Under a reply that ran into the end of the context.
pub fn cut_context(n_ctx: u32) -> String {
    format!("⋯ cut: the context ({n_ctx} tokens) is full")
}

/// A message refused before it goes into the conversation.
pub fn too_long(tokens: u32, n_ctx: u32, reserve: u32) -> String {
    format!(
        "message too long: {tokens} tokens with the system prompt, but the context holds {} \
         ({n_ctx} less {reserve} kept for the reply); it stays in the input to shorten",
        n_ctx.saturating_sub(reserve)
    )
}

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

/// On loading a model whose `general.name` says its weights are synthetic.
pub const SYNTHETIC_NOTICE: &str =
    "a synthetic model (strata synth): seeded random weights, its text is noise by design";

pub fn base_model(preset: &str) -> String {
    format!(
        "preset {preset}: a base model: it continues text, it was not tuned to answer chat turns"
    )
}

pub fn cannot_turn_on(flag: &str, why: &str) -> String {
    format!("{flag} cannot be turned on: {why}")
}

pub fn restarted(ms: f64) -> String {
    format!("engine restarted with the new flags in {ms:.0} ms")
}

// ---- the A/B pane (issue 29) ----

pub const TITLE_AB: &str = " A/B: one prompt, two flag sets ";
pub const AB_PROMPT: &str = "prompt ";
/// After the arm picked for the next run when it is not the one shown running.
pub const AB_NEXT: &str = "  (next run)";
pub const AB_FOOTER: &str =
    "Tab column · ↑/↓ arm · Enter run · Ctrl+E export report · Ctrl+U clear · Esc stop/close";
pub const AB_STOPPED: &str = "A/B stopped: both engines shut down, the replies kept as they stand";
pub const AB_BUSY: &str = "an A/B is running (Esc stops it)";
pub const AB_NO_PROMPT: &str = "type the A/B's prompt first";
pub const AB_NOTHING_TO_EXPORT: &str = "no finished A/B to export yet (both arms must answer)";
pub const AB_MEMORY_UNKNOWN: &str =
    "one arm after the other: the free memory is unknown (no /proc/meminfo)";
pub const AB_IDENTICAL: &str = "identical";
pub const AB_COLUMNS: [&str; 2] = ["A", "B"];
pub const AB_WAITING: &str = "waiting for arm A (one after the other)";
pub const AB_STARTING: &str = "starting its engine";
pub const AB_LOADING: &str = "loading";
pub const AB_DONE: &str = "done";
pub const AB_ARM_STOPPED: &str = "stopped";
/// Where a reply ended while the other arm's went on (the parting point).
pub const AB_END: &str = "(end)";

/// Under the columns, after the outcome: what the flags promise.
pub const AB_BITWISE: &str = "bitwise flags: identical expected";
pub const AB_NOT_BITWISE: &str = "not bitwise: may differ";
pub const AB_OTHER_PROMPT_TOKENS: &str =
    "the two engines ran other prompt tokens: the arms are not comparable";

pub fn ab_bitwise_differs(flags: &str) -> String {
    format!("arm B's flags are bitwise ({flags}), yet its reply differs from arm A's")
}

pub fn ab_generating(windows: usize) -> String {
    format!("generating ({windows} windows)")
}

pub fn ab_failed(why: &str) -> String {
    format!("failed: {why}")
}
pub const AB_MEDIANS: &str = "per-window ms over this conversation, per flag set";
pub const AB_NO_MEDIANS: &str = "no windows yet in this conversation";

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

pub fn ab_parallel(per: u64, avail: u64) -> String {
    format!(
        "both arms at once: 2 engines × ~{} fit in {} available (they share the CPU: the ratio is \
         under that load)",
        gib(per),
        gib(avail)
    )
}

pub fn ab_sequential(per: u64, avail: u64) -> String {
    format!(
        "one arm after the other: 2 engines × ~{} would not fit in {} available",
        gib(per),
        gib(avail)
    )
}

pub fn ab_refused(why: &str) -> String {
    format!("A/B not started: {why}")
}

pub fn ab_arm_failed(arm: &str, why: &str) -> String {
    format!("A/B arm {arm}: {why}")
}

pub fn ab_identical(tokens: usize) -> String {
    format!("A/B: the replies are identical ({tokens} tokens)")
}

pub fn ab_parts(position: usize, a: &str, b: &str) -> String {
    format!("A/B: the replies part at token {position}: {a:?} against {b:?}")
}

/// The column's divergence line: `▲ token 37: " blue"` (the other arm has `" the"`).
pub fn ab_parts_here(position: usize, piece: &str) -> String {
    format!("▲ parts at token {position}: {piece:?}")
}

pub fn ab_ratio(ratio: f64) -> String {
    format!("B/A window ms {ratio:.3} ({:+.1}%)", 100.0 * (ratio - 1.0))
}

pub fn ab_window(median: f64, q1: f64, q3: f64, n: usize) -> String {
    format!("window {median:.2} ms ({q1:.2}-{q3:.2}, {n} windows)")
}

pub fn ab_exported(md: &str, json: &str) -> String {
    format!("A/B report written: {md} and {json}")
}

pub fn ab_export_failed(e: &str) -> String {
    format!("A/B report not written: {e}")
}

pub fn ab_medians_bad(aside: &str, why: &str) -> String {
    format!("the A/B medians file did not parse ({why}); kept as {aside}, starting a new one")
}

pub fn ab_medians_failed(e: &str) -> String {
    format!("the A/B medians could not be saved: {e}")
}
