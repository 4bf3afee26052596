//! The table as text: the Markdown docs/flags.md carries between its markers (`markdown`) and
//! `strata flags`'s listing (`listing`, with each variable's value in this process).

use super::{Bitwise, Flag, Hardware, Kind, FLAGS};

pub const BEGIN: &str = "<!-- flags:begin (strata flags --markdown) -->";
pub const END: &str = "<!-- flags:end -->";

fn values(f: &Flag) -> (&'static str, String) {
    match f.kind {
        Kind::Switch { default } => ("1 / 0", (if default { "1" } else { "0" }).to_string()),
        Kind::Value { values, default } => (values, default.to_string()),
    }
}

fn bitwise(f: &Flag) -> String {
    match f.bitwise {
        Bitwise::Yes => "yes".into(),
        Bitwise::No(how) => format!("no: {how}"),
        Bitwise::NoResult => "no result changes".into(),
    }
}

/// What the flag needs, in words ("any" when nothing).
pub fn applies_to(f: &Flag) -> String {
    let mut parts = Vec::new();
    if let Some(a) = f.needs.arch {
        parts.push(format!("{} models", a.replace('|', " or ")));
    }
    if !f.needs.formats.is_empty() {
        parts.push(f.needs.formats.join("/"));
    }
    match f.needs.hardware {
        Hardware::Any => {}
        Hardware::CpuDevice => parts.push("CPU device".into()),
        Hardware::CpuIntDot => parts.push("CPU device with AVX-512 VNNI or AVX2".into()),
    }
    if parts.is_empty() {
        "any".into()
    } else {
        parts.join("; ")
    }
}

/// The Markdown table, one row per variable, in the table's order.
pub fn markdown() -> String {
    let mut s = String::from(
        "| variable | values | default | bitwise | applies to | scope | what it does |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for f in FLAGS {
        let (v, d) = values(f);
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {:?}{} | {} |\n",
            f.name,
            v,
            d,
            bitwise(f),
            applies_to(f),
            f.scope,
            if f.toggle { ", toggle" } else { "" },
            f.help
        ));
    }
    s
}

/// One block per variable: name, value now, default, values, bitwise, applies to, help.
pub fn listing() -> String {
    let mut s = String::new();
    for f in FLAGS {
        let (v, d) = values(f);
        let now = std::env::var(f.name).unwrap_or_else(|_| "(unset)".into());
        s.push_str(&format!(
            "{}={now}\n  {}\n  values {v}; default {d}; bitwise: {}\n  applies to: {}; scope {:?}{}\n",
            f.name,
            f.help,
            bitwise(f),
            applies_to(f),
            f.scope,
            if f.toggle { " (toggles pane)" } else { "" },
        ));
        // a flag for an architecture this engine does not run says so here too
        if let Err(why) = f.applies(&super::Facts::default()) {
            s.push_str(&format!("  here: {why}\n"));
        }
    }
    s
}
