//! Keeps the submitting thread off the CPUs the OpenCL CPU runtime pinned its workers to.
//!
//! The Intel OpenCL CPU device runs work-groups on TBB workers it pins one per CPU, and on the
//! host thread that waits for the queue. On this 2-CPU machine there is one worker, pinned to
//! CPU 1; the host thread may run anywhere. When the scheduler leaves the host thread on the
//! worker's CPU, every kernel runs on one CPU while the other idles: a 1536 x 576 Q4 product
//! measured 41.3-44.6 us with the host thread pinned to the worker's CPU against 21.7-22.9 us
//! pinned to the other one (6 processes each), and unpinned processes landed on either side.
//! That is the per-process bimodal decode speed docs/performance.md describes.
//!
//! `pin_off_workers` pins the calling thread to the CPUs of its current mask that no other
//! thread of the process is pinned to alone. It changes nothing when no such thread exists
//! (GPU runtimes, an unpinned runtime) or when the workers cover every allowed CPU.
//! `STRATA_PIN_HOST=0` turns it off.

use std::collections::BTreeSet;

/// Parses a kernel CPU list (`0-3,8,10-11`), as in `/proc/*/status`' `Cpus_allowed_list`.
pub fn parse_cpu_list(s: &str) -> Option<BTreeSet<usize>> {
    let mut set = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(part.parse().ok()?);
            }
        }
    }
    Some(set)
}

/// The CPUs other threads of this process are pinned to alone (one CPU in their mask).
fn worker_cpus(own_tid: i64) -> BTreeSet<usize> {
    let mut cpus = BTreeSet::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return cpus;
    };
    for t in tasks.flatten() {
        if t.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) == Some(own_tid) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .and_then(parse_cpu_list);
        if let Some(set) = list.filter(|s| s.len() == 1) {
            cpus.extend(set);
        }
    }
    cpus
}

fn own_mask() -> Option<BTreeSet<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the size passed is the set's own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        Some((0..max).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

/// The mask the calling thread should take, or None to leave it: `own` minus `workers`, when
/// that is neither empty nor all of `own`.
pub fn choose(own: &BTreeSet<usize>, workers: &BTreeSet<usize>) -> Option<BTreeSet<usize>> {
    let rest: BTreeSet<usize> = own.difference(workers).copied().collect();
    (!rest.is_empty() && rest.len() < own.len()).then_some(rest)
}

/// Pins the calling thread off the runtime's pinned workers (see the module comment); returns
/// the CPUs it now runs on, or None when nothing changed.
pub fn pin_off_workers() -> Option<BTreeSet<usize>> {
    if !crate::flags::on(crate::flags::table::PIN_HOST) {
        return None;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as i64;
    let own = own_mask()?;
    let target = choose(&own, &worker_cpus(tid))?;
    // SAFETY: as in own_mask; every CPU set is below the set's capacity (it came from it).
    let ok = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in &target {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    ok.then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[usize]) -> BTreeSet<usize> {
        v.iter().copied().collect()
    }

    #[test]
    fn parses_kernel_lists() {
        assert_eq!(parse_cpu_list("0-1"), Some(set(&[0, 1])));
        assert_eq!(parse_cpu_list("1"), Some(set(&[1])));
        assert_eq!(
            parse_cpu_list("0-2,5,7-8\n"),
            Some(set(&[0, 1, 2, 5, 7, 8]))
        );
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn chooses_the_cpus_no_worker_holds() {
        assert_eq!(choose(&set(&[0, 1]), &set(&[1])), Some(set(&[0])));
        assert_eq!(
            choose(&set(&[0, 1, 2, 3]), &set(&[1, 2, 3])),
            Some(set(&[0]))
        );
        // workers everywhere, none, or outside the mask: leave the thread alone
        assert_eq!(choose(&set(&[0, 1]), &set(&[0, 1])), None);
        assert_eq!(choose(&set(&[0, 1]), &set(&[])), None);
        assert_eq!(choose(&set(&[0, 1]), &set(&[4])), None);
    }
}
