//! The one parsing convention for the engine's environment variables (docs/flags.md): a switch
//! is `1` (on) or `0` (off); unset or empty means its default. Any other value (`yes`, `true`,
//! `2`) was most likely meant as "on", so it gets a one-line warning on stderr, once per variable
//! and process, and the default, instead of a silent guess. A value variable passes its text to
//! the flag's own parser, whose errors name the variable.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The switch `name`: `1` on, `0` off, unset or empty `default`; any other value warns once
/// and gives `default`.
pub fn switch(name: &str, default: bool) -> bool {
    match std::env::var(name) {
        Ok(v) if v == "1" => true,
        Ok(v) if v == "0" => false,
        Ok(v) if v.is_empty() => default,
        Ok(v) => {
            warn_once(name, &v, default);
            default
        }
        Err(std::env::VarError::NotPresent) => default,
        Err(std::env::VarError::NotUnicode(_)) => {
            warn_once(name, "<not UTF-8>", default);
            default
        }
    }
}

/// The opt-in kernel switch `name` (default off): on only when it is exactly `1`.
pub fn flag_on(name: &str) -> bool {
    switch(name, false)
}

/// The value variable `name`, None when unset or empty.
pub fn value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn warn_once(name: &str, value: &str, default: bool) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    // a poisoned lock only means a panic elsewhere while holding it; the set is still valid
    let mut w = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if w.insert(name.to_string()) {
        let d = if default { "on" } else { "off" };
        eprintln!("strata: {name}={value}: a switch is 1 (on) or 0 (off); using its default, {d}");
    }
}

#[cfg(test)]
mod tests {
    use super::{flag_on, switch};

    #[test]
    fn only_1_and_0_are_read_the_rest_is_the_default() {
        // names of their own: the process environment is shared by the tests running at once
        for (v, off_default, on_default) in [
            ("1", true, true),
            ("0", false, false),
            ("", false, true),
            ("yes", false, true),
            ("true", false, true),
            ("2", false, true),
            (" 1", false, true),
        ] {
            let name = format!(
                "STRATA_FLAG_ENV_TEST_{}",
                v.len() * 7 + v.bytes().map(u32::from).sum::<u32>() as usize
            );
            std::env::set_var(&name, v);
            assert_eq!(flag_on(&name), off_default, "{name}={v:?}");
            assert_eq!(switch(&name, true), on_default, "{name}={v:?} (default on)");
        }
        assert!(!flag_on("STRATA_FLAG_ENV_TEST_UNSET"));
        assert!(switch("STRATA_FLAG_ENV_TEST_UNSET", true));
    }
}
