//! `strata ab` as a real child process on SmolLM2 (`make setup`), every arm in its own
//! `strata engine`: the table, the Markdown and JSON report, identity for a bitwise flag pair
//! (STRATA_FUSED=0 against the default), the prompt-token check, the NLL column, the latch
//! lines; bad arm names and bad presets refused before any engine starts, with a clear error.

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_strata");

fn ab(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("ab")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run strata ab")
}

#[test]
fn ab_reports_identity_divergence_prompt_tokens_and_nll() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("ab.md");
    let out = ab(&[
        "--arms",
        "default,STRATA_FUSED=0,vnni",
        "-p",
        "Why is the sky blue?",
        "-p",
        "Name three colors.",
        "-n",
        "16",
        "-r",
        "2",
        "--ctx",
        "512",
        "--nll",
        "assets/nll_sample.txt",
        "--nll-ctx",
        "128",
        "--report",
        report.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "strata ab failed: {stderr}");

    // the table: a header, one row per arm in order, the checks line
    let lines: Vec<&str> = stdout.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("arm "))
        .expect("header row");
    assert!(
        lines[head].contains("window ms") && lines[head].contains("output"),
        "{stdout}"
    );
    for (i, arm) in ["default", "STRATA_FUSED=0", "vnni"].iter().enumerate() {
        assert!(lines[head + 1 + i].starts_with(arm), "{stdout}");
    }
    assert!(
        lines[head + 2].contains("identical (16 tok); identical (16 tok)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("checks: prompt tokens identical (6 runs"),
        "{stdout}"
    );
    assert!(
        stdout.contains("vnni latch: strata: STRATA_VNNI=1"),
        "{stdout}"
    );

    // the JSON beside the Markdown
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(report.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(j["build"]["sha256"].as_str().unwrap().len(), 16);
    let runs = j["runs"].as_array().unwrap();
    let order: Vec<u64> = runs.iter().map(|r| r["arm"].as_u64().unwrap()).collect();
    assert_eq!(order, [0, 1, 2, 0, 1, 2], "interleaved A B C A B C");
    // the prompt-token check: every run ran each prompt as the same ids, as many as it counted
    for pi in 0..2 {
        let first = &runs[0]["prompts"][pi]["prompt_ids"];
        for r in runs {
            let p = &r["prompts"][pi];
            assert_eq!(&p["prompt_ids"], first);
            assert_eq!(
                p["prompt_ids"].as_array().unwrap().len() as u64,
                p["turn"]["prompt_tokens"].as_u64().unwrap()
            );
            assert_eq!(p["reply_ids"].as_array().unwrap().len(), 16);
        }
    }
    let c = &j["comparison"];
    assert_eq!(c["checks"]["same_prompt_tokens"], true);
    assert_eq!(c["checks"]["flags_latched"], true);
    let arms = c["arms"].as_array().unwrap();
    assert_eq!(arms[0]["outputs"][0]["kind"], "base");
    // STRATA_FUSED is bitwise (docs/flags.md): the replies are identical, and said so
    assert_eq!(arms[1]["bitwise_expected"], true);
    for o in arms[1]["outputs"].as_array().unwrap() {
        assert_eq!(o["kind"], "identical", "{o}");
    }
    // STRATA_VNNI is not: identical, or a divergence whose tokens are the replies' own
    assert_eq!(arms[2]["bitwise_expected"], false);
    for (pi, o) in arms[2]["outputs"].as_array().unwrap().iter().enumerate() {
        if o["kind"] == "differs" {
            let p = o["position"].as_u64().unwrap() as usize;
            let base = &runs[0]["prompts"][pi]["reply_ids"];
            let vnni = &runs[2]["prompts"][pi]["reply_ids"];
            assert_eq!(o["base_token"], base[p]);
            assert_eq!(o["arm_token"], vnni[p]);
            assert_ne!(base[p], vnni[p]);
            assert_eq!(base.as_array().unwrap()[..p], vnni.as_array().unwrap()[..p]);
        } else {
            assert_eq!(o["kind"], "identical", "{o}");
        }
    }
    for a in arms {
        let w = &a["window_ms"];
        assert!(w["median"].as_f64().unwrap() > 0.0, "{a}");
        assert!(w["q1"].as_f64().unwrap() <= w["q3"].as_f64().unwrap());
        assert_eq!(a["round_window_ms"].as_array().unwrap().len(), 2);
        assert!(a["decode_tps"]["median"].as_f64().unwrap() > 0.0);
        assert!(
            a["memory"][0]["weights"].as_u64().unwrap() > 50 << 20,
            "{a}"
        );
        let nll = a["nll"]["mean"].as_f64().unwrap();
        assert!(nll > 1.0 && nll < 6.0, "NLL {nll}");
        assert_eq!(a["reproducible"], true, "{a}");
    }
    // the bitwise arm's NLL through the same targets is the default's, to the printed digit
    assert_eq!(arms[0]["nll"]["mean"], arms[1]["nll"]["mean"]);

    let md = std::fs::read_to_string(&report).unwrap();
    assert!(
        md.starts_with("### A/B: default vs STRATA_FUSED=0 vs vnni on `SmolLM2"),
        "{md}"
    );
    assert!(md.contains("\n| arm | flags | window ms median"), "{md}");
    assert!(
        md.contains("- output (bitwise flags: identical expected): identical"),
        "{md}"
    );
}

#[test]
fn a_preset_ab_section_runs_its_arms() {
    // the shipped default preset A/Bs the planner's fused kernels off (bitwise) against on
    let out = ab(&["--preset", "default", "-n", "6", "-r", "1", "--ctx", "256"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("unfused"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        row.contains("STRATA_FUSED=0") && row.ends_with("identical (6 tok)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("WARNING: arm unfused: its flags are bitwise"),
        "{stdout}"
    );
}

#[test]
fn bad_arms_and_bad_presets_are_refused_with_a_clear_error() {
    let refused = |args: &[&str], want: &[&str]| {
        let t0 = std::time::Instant::now();
        let out = ab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must fail");
        for w in want {
            assert!(stderr.contains(w), "{args:?}: want {w:?} in {stderr}");
        }
        assert!(
            out.stdout.is_empty(),
            "no table: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        // refused before any engine starts (a load takes seconds)
        assert!(
            t0.elapsed().as_secs() < 20,
            "{args:?} took {:?}",
            t0.elapsed()
        );
    };
    refused(
        &["--arms", "default,kerg", "-p", "hi"],
        &[
            "unknown arm \"kerg\"",
            "default, kreg, hc-q8, gr-fused, vnni",
        ],
    );
    refused(
        &["--arms", "default,STRATA_VNNI=2", "-p", "hi"],
        &["STRATA_VNNI=2: a switch takes 1 or 0"],
    );
    refused(&["--arms", "kreg", "-p", "hi"], &["needs two arms"]);
    refused(&["--arms", "default,kreg"], &["no prompt"]);
    refused(&["--arms", "default,default", "-p", "hi"], &["named twice"]);

    let dir = tempfile::tempdir().unwrap();
    let bad_arm = dir.path().join("bad-arm.toml");
    std::fs::write(
        &bad_arm,
        "ctx = 256\n\n[ab]\nrun = [\"default\", \"nope\"]\n",
    )
    .unwrap();
    refused(
        &["--preset", bad_arm.to_str().unwrap(), "-p", "hi"],
        &["bad-arm.toml:3:1: [ab]: unknown arm \"nope\""],
    );
    let bad_key = dir.path().join("bad-key.toml");
    std::fs::write(
        &bad_key,
        "[ab]\nrun = [\"default\", \"kreg\"]\nrounds = 3\n",
    )
    .unwrap();
    refused(
        &["--preset", bad_key.to_str().unwrap(), "-p", "hi"],
        &["bad-key.toml:", "rounds"],
    );
    refused(
        &["--preset", "no-such-preset", "-p", "hi"],
        &["no such preset"],
    );
}
