//! What this process's kernel builds are doing now, for the load heartbeat
//! (engine/server/session.rs). A module built cold takes seconds: all of SmolLM2's kernels take
//! ~45 s, and the integer-dot ones behind `STRATA_VNNI=1` ~90 s more. A user waiting on a flag
//! restart should see which module is compiling and how many are ready, not a stage that stays
//! at "3/5" for a minute and a half.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Modules `Context::module` has built in this process (from the runtime's disk cache or not).
static BUILT: AtomicU64 = AtomicU64::new(0);
/// Each finished module: label, wall time, whether it came from the kernel binary cache (the
/// first `LOG_CAP`; a process builds tens).
static LOG: Mutex<Vec<ModuleLoad>> = Mutex::new(Vec::new());
const LOG_CAP: usize = 4096;

/// One module `Context::module` finished (benches/restart.rs prints them).
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleLoad {
    /// kernel label: source + -D options, as `bench --profile` prints them
    pub label: String,
    /// the source's name (`kernels::by_name`) and the options, to build it again
    pub source: String,
    pub options: Vec<String>,
    pub elapsed: Duration,
    /// loaded from the kernel binary cache (no compiler ran)
    pub from_binary: bool,
}

/// The modules this process has finished, in order.
pub fn loads() -> Vec<ModuleLoad> {
    LOG.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
/// A label for each build in progress, with its start (several threads may build at once).
static CURRENT: Mutex<Vec<(u64, String, Instant)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the builds.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildActivity {
    /// Modules built so far in this process.
    pub built: u64,
    /// The builds in progress, longest-running first: kernel label (e.g. "mmvq_tiled Q4_1
    /// XS_PRE", source and -D options) and how long it has run.
    pub building: Vec<(String, Duration)>,
}

impl BuildActivity {
    /// "compiling mmvq_vnni Q4_1 (7 s, 12 modules ready)", once a build has run for `min`;
    /// None while nothing is building or the build is younger (a warm cache answers in ms).
    pub fn describe(&self, min: Duration) -> Option<String> {
        let (label, age) = self.building.first().filter(|(_, age)| *age >= min)?;
        let ready = match self.built {
            1 => "1 module ready".to_string(),
            n => format!("{n} modules ready"),
        };
        Some(format!("compiling {label} ({} s, {ready})", age.as_secs()))
    }
}

/// The builds now.
pub fn activity() -> BuildActivity {
    let now = Instant::now();
    // A poisoned lock only means a thread panicked while holding it; the list is still valid.
    let cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    let mut building: Vec<(String, Duration)> = cur
        .iter()
        .map(|(_, label, t0)| (label.clone(), now.duration_since(*t0)))
        .collect();
    building.sort_by_key(|b| std::cmp::Reverse(b.1));
    BuildActivity {
        built: BUILT.load(Ordering::Relaxed),
        building,
    }
}

/// Marks one build as in progress until dropped; `done` counts it as built.
pub(crate) struct Building {
    id: u64,
    label: String,
    source: String,
    options: Vec<String>,
}

impl Building {
    pub(crate) fn start(source: &str, options: &[String]) -> Building {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let label = super::trace::kernel_label(source, options);
        let mut cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
        cur.push((id, label.clone(), Instant::now()));
        Building {
            id,
            label,
            source: source.to_string(),
            options: options.to_vec(),
        }
    }

    pub(crate) fn done(mut self, elapsed: Duration, from_binary: bool) {
        BUILT.fetch_add(1, Ordering::Relaxed);
        let mut log = LOG.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() < LOG_CAP {
            log.push(ModuleLoad {
                label: std::mem::take(&mut self.label),
                source: std::mem::take(&mut self.source),
                options: std::mem::take(&mut self.options),
                elapsed,
                from_binary,
            });
        }
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        let mut cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
        cur.retain(|(id, _, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_waits_for_min_and_counts_ready_modules() {
        let mut a = BuildActivity {
            built: 1,
            building: vec![
                ("mmvq_vnni Q4_1".into(), Duration::from_millis(2500)),
                ("mmvq_tiled Q8_0".into(), Duration::from_millis(300)),
            ],
        };
        assert_eq!(a.describe(Duration::from_secs(3)), None);
        assert_eq!(
            a.describe(Duration::from_secs(1)).as_deref(),
            Some("compiling mmvq_vnni Q4_1 (2 s, 1 module ready)")
        );
        a.built = 12;
        assert_eq!(
            a.describe(Duration::ZERO).as_deref(),
            Some("compiling mmvq_vnni Q4_1 (2 s, 12 modules ready)")
        );
        a.building.clear();
        assert_eq!(a.describe(Duration::ZERO), None);
    }
}
