use super::{doc, get, Facts, FLAGS};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir)
        .expect("read the engine's sources")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The environment variable names quoted in `src` (`"STRATA_..."`, `"SYCL_..."`, `"OCL_..."`,
/// `"CL_CONFIG_..."`), except build-time `env!("...")` ones.
fn quoted_names(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in src.match_indices('"') {
        let rest = &src[i + 1..];
        let Some(end) = rest.find('"') else { break };
        let name = &rest[..end];
        let prefixed = ["STRATA_", "SYCL_", "OCL_", "CL_CONFIG_"]
            .iter()
            .any(|p| name.starts_with(p));
        let shaped = name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        // (a name ending in '_' is a prefix the code matches variables by, not one variable)
        if prefixed && shaped && !name.ends_with('_') && !src[..i].ends_with("env!(") {
            out.push(name.to_string());
        }
    }
    out
}

/// Every variable name the engine's sources quote is declared in the table (a new
/// `std::env::var("STRATA_X")` without an entry fails here).
#[test]
fn every_read_is_declared() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("engine");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut missing = Vec::new();
    for f in &files {
        if f.starts_with(root.join("flags")) {
            continue;
        }
        let src = std::fs::read_to_string(f).expect("a source file");
        for n in quoted_names(&src) {
            if get(&n).is_none() {
                missing.push(format!("{}: {n}", f.display()));
            }
        }
    }
    assert!(files.len() > 50, "{} engine sources found", files.len());
    assert!(
        missing.is_empty(),
        "not in engine/flags/table.rs: {missing:?}"
    );
}

#[test]
fn the_scan_sees_a_read() {
    let src = r#"let a = std::env::var("STRATA_NEW_KNOB"); let b = env!("STRATA_BUILT");
        let c = ["SYCL_PROGRAM_", "CL_CONFIG_"];"#;
    assert_eq!(quoted_names(src), ["STRATA_NEW_KNOB"]);
}

#[test]
fn names_are_declared_once() {
    for (i, f) in FLAGS.iter().enumerate() {
        assert!(
            FLAGS[i + 1..].iter().all(|g| g.name != f.name),
            "{} twice",
            f.name
        );
    }
}

/// docs/flags.md carries the table as `strata flags --markdown` prints it.
#[test]
fn docs_carry_the_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/flags.md");
    let text = std::fs::read_to_string(&path).expect("docs/flags.md");
    let body = text
        .split_once(doc::BEGIN)
        .and_then(|(_, rest)| rest.split_once(doc::END))
        .map(|(b, _)| b.trim())
        .expect("docs/flags.md has the table's markers");
    assert_eq!(
        body,
        doc::markdown().trim(),
        "docs/flags.md's table is stale: paste `strata flags --markdown` between its markers"
    );
}

#[test]
fn applicability_says_why_not() {
    let dense: Vec<String> = ["Q4_1", "F32"].iter().map(|s| s.to_string()).collect();
    let iq4: Vec<String> = ["IQ4_XS", "F16"].iter().map(|s| s.to_string()).collect();
    let facts = |formats, cpu| Facts {
        arch: Some("llama"),
        formats: Some(formats),
        cpu_device: Some(cpu),
    };
    let f = |n| get(n).expect("declared");
    // hyper-connections: the architectures with streams only
    let hc = f("STRATA_HC_Q8").applies(&facts(&dense, true)).unwrap_err();
    assert!(
        hc.contains("qwen4exp") && hc.contains("strata-hc-llama") && hc.contains("only"),
        "{hc}"
    );
    for arch in ["qwen4exp", "strata-hc-llama"] {
        let on = Facts {
            arch: Some(arch),
            ..facts(&dense, true)
        };
        assert!(f("STRATA_GR_FUSED").applies(&on).is_ok(), "{arch}");
    }
    // (unknown facts are taken to fit)
    assert!(f("STRATA_GR_FUSED").applies(&Facts::default()).is_ok());
    // formats
    let vnni = f("STRATA_VNNI");
    assert!(vnni.applies(&facts(&dense, true)).is_ok());
    let e = vnni.applies(&facts(&iq4, true)).unwrap_err();
    assert!(e.contains("Q4_1") && e.contains("stores none"), "{e}");
    assert!(f("STRATA_MMVQ_KREG").applies(&facts(&iq4, true)).is_ok());
    assert!(f("STRATA_MMVQ_KREG").applies(&facts(&dense, true)).is_err());
    // hardware
    assert!(vnni
        .applies(&facts(&dense, false))
        .unwrap_err()
        .contains("CPU device"));
    // nothing known yet: taken to fit
    assert!(vnni.applies(&Facts::default()).is_ok());
    assert!(f("STRATA_KEEP_GGUF").applies(&facts(&iq4, false)).is_ok());
}

#[test]
fn the_toggles_are_the_four_kernel_variants() {
    let names: Vec<&str> = super::toggles().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "STRATA_VNNI",
            "STRATA_MMVQ_KREG",
            "STRATA_HC_Q8",
            "STRATA_GR_FUSED"
        ]
    );
}
