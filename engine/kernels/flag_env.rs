//! A kernel flag's environment variable: on only when it is exactly `1` (docs/flags.md). Any
//! other non-empty value but `0` is most likely meant as "on" (`yes`, `true`, `2`), so it gets a
//! one-line warning on stderr, once per variable and process, instead of a silent "off".

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Whether `name` is set to exactly "1"; warns once if it holds something else but "0" or "".
pub fn flag_on(name: &str) -> bool {
    match std::env::var(name) {
        Ok(v) if v == "1" => true,
        Ok(v) if v.is_empty() || v == "0" => false,
        Ok(v) => {
            warn_once(name, &v);
            false
        }
        Err(std::env::VarError::NotPresent) => false,
        Err(std::env::VarError::NotUnicode(_)) => {
            warn_once(name, "<not UTF-8>");
            false
        }
    }
}

fn warn_once(name: &str, value: &str) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    // a poisoned lock only means a panic elsewhere while holding it; the set is still valid
    let mut w = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if w.insert(name.to_string()) {
        eprintln!("strata: {name}={value}: a kernel flag is on only when set to exactly 1; off");
    }
}

#[cfg(test)]
mod tests {
    use super::flag_on;

    #[test]
    fn only_exactly_1_is_on() {
        // names of their own: the process environment is shared by the tests running at once
        for (v, on) in [
            ("1", true),
            ("0", false),
            ("", false),
            ("yes", false),
            ("true", false),
            ("2", false),
            (" 1", false),
        ] {
            let name = format!(
                "STRATA_FLAG_ENV_TEST_{}",
                v.len() * 7 + v.bytes().map(u32::from).sum::<u32>() as usize
            );
            std::env::set_var(&name, v);
            assert_eq!(flag_on(&name), on, "{name}={v:?}");
        }
        assert!(!flag_on("STRATA_FLAG_ENV_TEST_UNSET"));
    }
}
