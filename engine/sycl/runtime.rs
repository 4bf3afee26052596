//! Process-wide runtime setup, done once before the first SYCL call.
//!
//! - `OCL_ICD_FILENAMES`: the runtime wheel's OpenCL ICD file points at a placeholder path, so the
//!   CPU device is only found when this names `$ROOT/lib/libintelocl.so`. Set if unset.
//! - `SYCL_CACHE_PERSISTENT=1`, `SYCL_CACHE_DIR=<user cache>/strata/sycl-cache`: the runtime's
//!   on-disk cache of compiled kernels, so a second process start does not recompile (~2.5 s ->
//!   ~0.2 s per module). Left alone when the user set them.
//!
//! Environment writes race with other threads reading the environment (C `getenv` has no lock),
//! so `init` should run at the top of `main`; every entry point of this module also calls it.

use std::path::PathBuf;
use std::sync::Once;

/// The runtime root this binary was built and rpath-linked against (found by build.rs).
pub const BUILT_ROOT: &str = env!("STRATA_SYCL_ROOT_BUILT");

pub const OCL_ICD_VAR: &str = "OCL_ICD_FILENAMES";

static INIT: Once = Once::new();

/// The runtime root: the one libsycl was linked against.
pub fn root() -> PathBuf {
    PathBuf::from(BUILT_ROOT)
}

/// The OpenCL CPU device library inside the runtime root.
pub fn intel_ocl_lib() -> PathBuf {
    root().join("lib/libintelocl.so")
}

/// Where the persistent kernel cache goes unless `SYCL_CACHE_DIR` is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "strata").map(|d| d.cache_dir().join("sycl-cache"))
}

/// The persistent kernel cache's directory (`SYCL_CACHE_DIR`), or None when the runtime keeps no
/// disk cache (`SYCL_CACHE_PERSISTENT=0`, or no directory). After `init`, unless the user said
/// otherwise, it is on.
pub fn disk_cache_dir() -> Option<PathBuf> {
    init();
    if std::env::var_os("SYCL_CACHE_PERSISTENT").is_some_and(|v| v == "0") {
        return None;
    }
    std::env::var_os("SYCL_CACHE_DIR").map(PathBuf::from)
}

/// Sets the runtime's environment once. Idempotent and cheap after the first call.
pub fn init() {
    INIT.call_once(|| {
        if std::env::var_os(OCL_ICD_VAR).is_none() {
            std::env::set_var(OCL_ICD_VAR, intel_ocl_lib());
        }
        if std::env::var_os("SYCL_CACHE_PERSISTENT").is_none() {
            std::env::set_var("SYCL_CACHE_PERSISTENT", "1");
        }
        if std::env::var_os("SYCL_CACHE_DIR").is_none() {
            if let Some(dir) = default_cache_dir() {
                // A failure here only costs the disk cache; the runtime then compiles each time.
                let _ = std::fs::create_dir_all(&dir);
                std::env::set_var("SYCL_CACHE_DIR", dir);
            }
        }
    });
}

/// The message for "the runtime found no device", naming what to check.
pub fn no_device_message(what: &str) -> String {
    let ocl = std::env::var_os(OCL_ICD_VAR)
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lib = intel_ocl_lib();
    let mut msg = format!("no SYCL {what} found. ");
    if ocl.is_empty() {
        msg.push_str(&format!("{OCL_ICD_VAR} is empty. "));
    } else if ocl.split(':').all(|p| !std::path::Path::new(p).exists()) {
        msg.push_str(&format!(
            "{OCL_ICD_VAR}={ocl} names no existing file, so the OpenCL CPU device cannot load. "
        ));
    } else {
        msg.push_str(&format!("{OCL_ICD_VAR}={ocl}. "));
    }
    if !lib.exists() {
        msg.push_str(&format!(
            "The SYCL runtime's OpenCL CPU library {} is missing: run `make setup` (or rebuild \
             with STRATA_SYCL_ROOT naming a complete runtime).",
            lib.display()
        ));
    } else {
        msg.push_str(&format!(
            "Fix: unset {OCL_ICD_VAR} (strata then sets it itself) or set \
             {OCL_ICD_VAR}={}; a GPU needs the Level Zero driver installed.",
            lib.display()
        ));
    }
    msg
}
