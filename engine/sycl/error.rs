//! Typed errors of the SYCL layer: the shim's status + message, compile diagnostics kept apart.

use super::ffi;
use std::ffi::CStr;

/// The shim's status codes (`strata_status` in strata_shim.h), minus OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A SYCL exception or runtime failure.
    Runtime,
    /// A kernel source failed to compile.
    Build,
    /// The device lacks the feature.
    Unsupported,
    /// A bad argument reached the shim.
    Invalid,
    /// A name (e.g. a kernel) is absent.
    NotFound,
}

#[derive(Debug, thiserror::Error)]
pub enum SyclError {
    /// Any failing shim call; `op` names the Rust-side operation.
    #[error("SYCL {op} failed ({status:?}): {message}")]
    Shim {
        op: &'static str,
        status: Status,
        message: String,
    },
    /// A kernel source did not compile; `diagnostics` is the compiler's output.
    #[error("SYCL kernel source '{source_name}' (options {options:?}) failed to compile:\n{diagnostics}")]
    Build {
        source_name: String,
        options: Vec<String>,
        diagnostics: String,
    },
    /// No usable device: the message says which variable or install step to fix.
    #[error("{0}")]
    NoDevice(String),
    /// Misuse caught on the Rust side (sizes, mismatched devices...).
    #[error("SYCL {op}: {message}")]
    Invalid { op: &'static str, message: String },
}

pub type Result<T, E = SyclError> = std::result::Result<T, E>;

impl SyclError {
    pub fn invalid(op: &'static str, message: impl Into<String>) -> Self {
        SyclError::Invalid {
            op,
            message: message.into(),
        }
    }

    pub fn status(&self) -> Option<Status> {
        match self {
            SyclError::Shim { status, .. } => Some(*status),
            SyclError::Build { .. } => Some(Status::Build),
            _ => None,
        }
    }
}

/// The shim's thread-local message for the call that just failed on this thread.
pub(crate) fn last_error() -> String {
    // SAFETY: the shim returns a pointer to a NUL-terminated thread-local string, never null.
    unsafe { CStr::from_ptr(ffi::strata_last_error()) }
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn status_of(code: ffi::strata_status) -> Status {
    match code {
        ffi::STRATA_ERR_BUILD => Status::Build,
        ffi::STRATA_ERR_UNSUPPORTED => Status::Unsupported,
        ffi::STRATA_ERR_INVALID => Status::Invalid,
        ffi::STRATA_ERR_NOT_FOUND => Status::NotFound,
        _ => Status::Runtime,
    }
}

/// Turns a shim status into `Result`, reading the message on failure.
pub(crate) fn check(op: &'static str, code: ffi::strata_status) -> Result<()> {
    if code == ffi::STRATA_OK {
        Ok(())
    } else {
        Err(SyclError::Shim {
            op,
            status: status_of(code),
            message: last_error(),
        })
    }
}
