//! The OpenCL CPU compiler of runtime 2026.1.2 can abort in its pass
//! sycl-kernel-reduce-cross-barrier-values on a kernel with many barrier regions: the pass keeps
//! a reference into a map that its own inserts can move, and `free` of what it read there aborts
//! on some runs (docs/sycl.md). With glibc's `MALLOC_PERTURB_` the freed memory is overwritten
//! at once and the abort comes every time, so this test can see the hazard in one run: every
//! kernel source of the table (`strata devices --build-kernels`, each built from source, the
//! kernel binary cache and the runtime's cache both off) must build in a child process whose
//! freed memory is perturbed. `hc_fast.cpp` with one kernel holding eight copies of its barriers
//! (a switch over the row count) failed here; one kernel per row count passes.

use std::process::Command;

#[test]
fn every_kernel_source_builds_with_freed_memory_perturbed() {
    let cache = tempfile::tempdir().expect("a temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["devices", "--build-kernels", "--json"])
        .env("MALLOC_PERTURB_", "165")
        .env("STRATA_KERNEL_CACHE", "0")
        // (the runtime's own cache in an empty directory: the first build of each source goes
        // through the whole compiler)
        .env("SYCL_CACHE_DIR", cache.path())
        .output()
        .expect("run strata devices");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "strata devices --build-kernels with MALLOC_PERTURB_=165: {:?}\n{}",
        out.status,
        &err[err.len().saturating_sub(4000)..]
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let modules = v["kernel_build"]["modules"]
        .as_array()
        .expect("the built modules");
    let names: Vec<&str> = modules.iter().filter_map(|m| m[0].as_str()).collect();
    println!("built {} sources: {names:?}", names.len());
    assert!(
        names.contains(&"hc_fast"),
        "hc_fast among the sources built: {names:?}"
    );
}
