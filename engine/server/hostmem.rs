//! The engine process's memory on the host, for a CPU-device card in `devices`: on the CPU device
//! every buffer the engine allocates is host memory, so the device's nominal global memory says
//! little; the process's resident set against what the host (or its cgroup) can still give does.
//! Read fresh from /proc and /sys for each `devices` event (a few small files: microseconds).

use crate::protocol::{Devices, HostMemory};
use std::path::{Path, PathBuf};

/// cgroup v1 reports "no limit" as a huge page-aligned number (2^63 - 4096).
const NO_LIMIT: u64 = 1 << 62;

/// The `kB` figure of `key` in a /proc file of `Key:   123 kB` lines, in bytes.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The tightest memory limit on the process's cgroup and its ancestors (v2 `memory.max`, v1
/// `memory.limit_in_bytes`), None when there is none.
fn cgroup_limit(proc_cgroup: &str, root: &Path) -> Option<u64> {
    let mut best: Option<u64> = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (base, file) = if ctrl.is_empty() {
            (root.to_path_buf(), "memory.max")
        } else if ctrl.split(',').any(|c| c == "memory") {
            (root.join("memory"), "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir: PathBuf = base.join(path.trim_start_matches('/'));
        loop {
            if let Ok(v) = std::fs::read_to_string(dir.join(file)) {
                if let Ok(n) = v.trim().parse::<u64>() {
                    if n < NO_LIMIT {
                        best = Some(best.map_or(n, |b| b.min(n)));
                    }
                }
            }
            if dir == base || !dir.pop() {
                break;
            }
        }
    }
    best
}

/// This process's memory now; None where /proc cannot be read (not Linux).
pub fn now() -> Option<HostMemory> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let rss = kb_field(&status, "VmRSS")?;
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = kb_field(&meminfo, "MemAvailable")?;
    let host = available.saturating_add(rss);
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_limit(&c, Path::new("/sys/fs/cgroup")));
    let (budget, from) = match limit {
        Some(l) if l < host => (l, "cgroup"),
        _ => (host, "meminfo"),
    };
    Some(HostMemory {
        rss,
        budget,
        budget_from: from.into(),
    })
}

/// `d` with the host cards' process memory read afresh (the rest of `devices` changes only at
/// load time).
pub fn refreshed(mut d: Devices) -> Devices {
    if d.cards.iter().any(|c| c.host.is_some()) {
        let now = now();
        for c in d.cards.iter_mut().filter(|c| c.host.is_some()) {
            c.host = now.clone();
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kb_fields() {
        let s = "Name:\tstrata\nVmRSS:\t  212340 kB\nVmSwap:\t0 kB\n";
        assert_eq!(kb_field(s, "VmRSS"), Some(212_340 * 1024));
        assert_eq!(kb_field(s, "VmHWM"), None);
    }

    #[test]
    fn cgroup_limit_takes_the_tightest_of_the_chain() {
        let root = tempfile::tempdir().unwrap();
        let v2 = root.path().join("a/b");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        std::fs::write(root.path().join("a/memory.max"), "1073741824\n").unwrap();
        assert_eq!(cgroup_limit("0::/a/b\n", root.path()), Some(1 << 30));
        let v1 = root.path().join("memory/x");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(
            cgroup_limit("4:memory:/x\n", root.path()),
            None,
            "v1 'no limit'"
        );
        std::fs::write(v1.join("memory.limit_in_bytes"), "536870912\n").unwrap();
        assert_eq!(
            cgroup_limit("4:memory:/x\n0::/a/b\n", root.path()),
            Some(1 << 29)
        );
    }

    #[test]
    fn this_process_has_resident_memory_and_a_budget_above_it() {
        let m = now().expect("/proc readable on Linux");
        assert!(m.rss > 0 && m.budget > m.rss, "{m:?}");
    }
}
