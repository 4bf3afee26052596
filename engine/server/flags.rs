//! Kernel flags: environment variables read once per process (`"1"` = on) and reported in `hello`.
//! The kernels latch the same variables themselves; this list only says which ones exist.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Every kernel flag the engine knows.
pub const KNOWN: &[&str] = &[
    "STRATA_GR_FUSED",
    "STRATA_HC_Q8",
    "STRATA_MMVQ_KREG",
    "STRATA_VNNI",
];

/// The flags as latched at the first call: later changes to the environment are not seen, so
/// `hello` says what the kernels run with.
pub fn latched() -> &'static BTreeMap<String, bool> {
    static FLAGS: OnceLock<BTreeMap<String, bool>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        KNOWN
            .iter()
            .map(|&n| (n.to_string(), crate::kernels::flag_env::flag_on(n)))
            .collect()
    })
}
