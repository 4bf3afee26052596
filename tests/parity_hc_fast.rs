//! CI check of the fast hyper-connection reads (STRATA_HC_Q8 / STRATA_GR_FUSED,
//! engine/kernels/hc_fast.rs): runs the real binary's `strata parity hc-q8 --selftest` and
//! `strata parity gr-fused --selftest` (real SYCL device, real kernels, the seeds' geometry n 2560
//! S 4 r 320) and requires every check to pass: the 33 cases (T = 1..8 x pending write on / off x
//! injection rows on / off, and the head mixer: all five outputs within the bound of the f64
//! reference over the weights read, R_out bitwise the default read's, a recorded graph's two
//! replays bitwise the direct launches), the fallback to the default read (bitwise, one stderr
//! line per reason) and the power checks.

use std::process::Command;

const CASES: usize = 33;

/// Runs one family's self-test; returns its stdout and stderr after checking the counts.
fn selftest(family: &str, fallback: usize, power: usize) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["parity", family, "--selftest"])
        // the flags must not matter: the self-test calls the reads directly
        .env_remove("STRATA_HC_Q8")
        .env_remove("STRATA_GR_FUSED")
        .output()
        .expect("running the strata binary");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    println!("{stdout}");
    eprintln!("{stderr}");
    let cases = format!("{family} selftest: {CASES} of {CASES} cases pass");
    assert!(
        stdout.lines().any(|l| l == cases),
        "no {cases:?} line (exit {:?})",
        out.status
    );
    let total = CASES + fallback + power;
    let summary = format!(
        "{family} selftest: fallback {fallback} of {fallback}, power checks {power} of {power}; \
         PASS {total}/{total}"
    );
    assert!(
        stdout.lines().any(|l| l == summary),
        "no {summary:?} line (exit {:?})",
        out.status
    );
    assert!(out.status.success(), "exit {:?}", out.status);
    // every case line passed and printed its measured errors
    let case_lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("T ") || l.starts_with("head mixer"))
        .collect();
    assert_eq!(case_lines.len(), CASES, "case lines");
    for l in &case_lines {
        assert!(l.contains(": pass: err/scale rs "), "{l}");
    }
    (stdout, stderr)
}

/// The warning the fallback prints, once per reason.
fn warned_once(stderr: &str, flag: &str, reason: &str) {
    let n = stderr
        .lines()
        .filter(|l| l.starts_with(&format!("strata: {flag}=1: ")) && l.contains(reason))
        .count();
    assert_eq!(n, 1, "{reason:?}: {n} warning lines in\n{stderr}");
}

#[test]
fn parity_hc_q8_selftest_passes_every_check() {
    let (stdout, stderr) = selftest("hc-q8", 2, 4);
    warned_once(&stderr, "STRATA_HC_Q8", "9 rows");
    warned_once(&stderr, "STRATA_HC_Q8", "n_embd 2576");
    // the Q8_0 copies' extra memory is stated
    assert!(stdout.contains("MiB per read site"), "{stdout}");
}

#[test]
fn parity_gr_fused_selftest_passes_every_check() {
    let (_, stderr) = selftest("gr-fused", 2, 3);
    warned_once(&stderr, "STRATA_GR_FUSED", "9 rows");
    warned_once(&stderr, "STRATA_GR_FUSED", "n_embd 2576");
}
