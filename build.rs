//! Builds the C++ SYCL shim (`sycl/shim/*.cpp`) against the Intel SYCL runtime and links libsycl
//! with an rpath, so the binary runs without LD_LIBRARY_PATH.
//!
//! The runtime root is, in order: `STRATA_SYCL_ROOT`, the `STRATA_SYCL_ROOT=` line of
//! `<project>/.strata/env` (written by `make setup`), `CMPLR_ROOT`, `ONEAPI_ROOT/compiler/latest`.
//! The root found is exported to the crate as `STRATA_SYCL_ROOT_BUILT`.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets this"));
    let env_file = manifest.join(".strata/env");
    println!("cargo:rerun-if-env-changed=STRATA_SYCL_ROOT");
    println!("cargo:rerun-if-env-changed=CMPLR_ROOT");
    println!("cargo:rerun-if-env-changed=ONEAPI_ROOT");
    println!("cargo:rerun-if-changed={}", env_file.display());
    println!("cargo:rerun-if-changed=sycl/shim");

    let root = match find_root(&env_file) {
        Ok(r) => r,
        Err(tried) => panic!(
            "\n\nstrata: no SYCL runtime found (tried: {tried}).\n\
             Run `make setup` (installs Intel's SYCL runtime and writes .strata/env), or set \
             STRATA_SYCL_ROOT to a directory holding include/sycl/sycl.hpp and lib/libsycl.so.\n\n"
        ),
    };
    let include = root.join("include");
    let lib = root.join("lib");

    let mut sources: Vec<PathBuf> = std::fs::read_dir("sycl/shim")
        .expect("sycl/shim is part of the repository")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
        .collect();
    sources.sort();
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
    println!("cargo:rerun-if-changed=sycl/shim/strata_shim.h");

    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .files(&sources)
        .include(&include)
        .include("sycl/shim")
        .define("SYCL_DISABLE_FSYCL_SYCLHPP_WARNING", None)
        .flag("-Wno-deprecated-declarations")
        // Host code only: the kernels are compiled at run time, so the shim need not be fast.
        .opt_level(1)
        .compile("strata_shim");

    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=sycl");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    println!("cargo:rustc-env=STRATA_SYCL_ROOT_BUILT={}", root.display());
}

/// A usable root has the SYCL headers and libsycl.
fn usable(root: &Path) -> bool {
    root.join("include/sycl/sycl.hpp").is_file() && root.join("lib/libsycl.so").exists()
}

fn find_root(env_file: &Path) -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    if let Some(v) = std::env::var_os("STRATA_SYCL_ROOT").filter(|v| !v.is_empty()) {
        candidates.push(("STRATA_SYCL_ROOT".into(), v.into()));
    }
    if let Ok(text) = std::fs::read_to_string(env_file) {
        let line = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("STRATA_SYCL_ROOT="))
            .next_back();
        if let Some(v) = line.filter(|v| !v.trim().is_empty()) {
            candidates.push((env_file.display().to_string(), v.trim().into()));
        }
    }
    if let Some(v) = std::env::var_os("CMPLR_ROOT").filter(|v| !v.is_empty()) {
        candidates.push(("CMPLR_ROOT".into(), v.into()));
    }
    if let Some(v) = std::env::var_os("ONEAPI_ROOT").filter(|v| !v.is_empty()) {
        candidates.push((
            "ONEAPI_ROOT".into(),
            PathBuf::from(v).join("compiler/latest"),
        ));
    }
    for (origin, path) in candidates {
        if usable(&path) {
            return Ok(path);
        }
        // An explicit setting is authoritative: a typo there must not silently pick another root.
        if origin == "STRATA_SYCL_ROOT" {
            return Err(format!(
                "STRATA_SYCL_ROOT = {} has no include/sycl/sycl.hpp + lib/libsycl.so",
                path.display()
            ));
        }
        tried.push(format!(
            "{origin} = {} (no include/sycl/sycl.hpp + lib/libsycl.so)",
            path.display()
        ));
    }
    if tried.is_empty() {
        tried.push("STRATA_SYCL_ROOT, .strata/env, CMPLR_ROOT, ONEAPI_ROOT all unset".into());
    }
    Err(tried.join("; "))
}
