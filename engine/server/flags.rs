//! The toggle flags (the opt-in kernel variants of the registry, engine/flags/) as this process
//! latched them, reported in `hello`. The kernels latch the same variables themselves.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The names `hello` reports: the registry's toggles.
pub fn known() -> Vec<&'static str> {
    crate::flags::toggles().map(|f| f.name).collect()
}

/// The flags as latched at the first call: later changes to the environment are not seen, so
/// `hello` says what the kernels run with.
pub fn latched() -> &'static BTreeMap<String, bool> {
    static FLAGS: OnceLock<BTreeMap<String, bool>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        crate::flags::toggles()
            .map(|f| (f.name.to_string(), f.on()))
            .collect()
    })
}
