//! `strata bench` as a real child process on the default model (SmolLM2, `make setup`):
//! `-d` (llama-bench's --n-depth) runs both tests after that many tokens already in the cache,
//! and a depth the context cannot hold is refused with the numbers named.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_strata");

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("bench")
        .args(args)
        .output()
        .expect("run strata bench")
}

#[test]
fn bench_at_depth_reports_both_tests_at_that_depth() {
    let out = bench(&["-p", "16", "-n", "8", "-r", "1", "-d", "40", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "strata bench failed: {stderr}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    let tests: Vec<&str> = rows.iter().filter_map(|r| r["test"].as_str()).collect();
    assert_eq!(tests, ["pp16 @ d40", "tg8 @ d40"]);
    for r in &rows {
        assert_eq!(r["n_depth"], 40, "{r}");
        let ts = r["avg_ts"].as_f64().expect("avg_ts");
        assert!(ts.is_finite() && ts > 0.0, "{r}");
    }
    println!(
        "{tests:?}: {:?} t/s",
        rows.iter().map(|r| r["avg_ts"].clone()).collect::<Vec<_>>()
    );
}

#[test]
fn bench_depth_past_the_context_is_an_error() {
    let out = bench(&["-p", "16", "-n", "8", "-r", "1", "-d", "100", "--ctx", "64"]);
    assert!(!out.status.success(), "a depth past --ctx must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("-d 100") && stderr.contains("116 positions") && stderr.contains("64"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no table after an error");
}
