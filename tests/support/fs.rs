//! Files of kinds a model path must be refused for.

use std::path::{Path, PathBuf};

/// A FIFO named `name` in `dir`: opening it for reading blocks until a writer comes, which is
/// why a model path has to be checked for its file type before it is opened.
pub fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let c = std::ffi::CString::new(path.to_string_lossy().as_bytes()).expect("no NUL");
    // SAFETY: a valid C string path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    path
}
