//! CI check of the KREG mmvq family (STRATA_MMVQ_KREG=1): runs the real binary's
//! `strata parity mmvq-kreg --selftest` (real SYCL device, real kernels) and requires every check
//! to pass: 4 formats x 5 shapes x 1-8 columns (KREG and the default kernels within the bound of
//! the f64 reference, T-column KREG == T one-column calls bitwise, all finite), "KREG differs from
//! the default kernels in most cases", and the 4 power checks.

use std::process::Command;

const CASES: usize = 4 * 5 * 8;
const CHECKS: usize = CASES + 1 + 4;

#[test]
fn parity_mmvq_kreg_selftest_passes_every_check() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["parity", "mmvq-kreg", "--selftest"])
        // the flag must not matter: the self-test forces KREG on and off itself
        .env_remove("STRATA_MMVQ_KREG")
        .output()
        .expect("running the strata binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("mmvq-kreg selftest: PASS "))
        .unwrap_or_else(|| {
            panic!(
                "no pass-count line in the self-test output (exit {:?})",
                out.status
            )
        });
    let counts = line.trim_start_matches("mmvq-kreg selftest: PASS ");
    let (passed, total) = counts
        .split_once('/')
        .unwrap_or_else(|| panic!("malformed pass-count line {line:?}"));
    let passed: usize = passed.trim().parse().expect("pass count");
    let total: usize = total.trim().parse().expect("check count");
    assert_eq!(
        total, CHECKS,
        "the self-test ran {total} checks, expected {CHECKS}"
    );
    assert_eq!(
        passed,
        total,
        "{} of {total} KREG parity checks failed",
        total - passed
    );
    assert!(
        out.status.success(),
        "self-test exited with {:?}",
        out.status
    );
    let differ = stdout
        .lines()
        .find(|l| l.starts_with("KREG result differs"))
        .expect("the differs-from-default line");
    assert!(differ.contains(&format!("/{CASES} cases")), "{differ}");
}

#[test]
fn parity_rejects_a_call_without_a_mode() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["parity", "mmvq-kreg"])
        .output()
        .expect("running the strata binary");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--selftest"), "{err}");
}
