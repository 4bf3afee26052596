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

/// A path named `name` in a temporary directory of its own (`prefix` starts the directory's
/// name), removed with everything in it when this is dropped. Converted and synthetic models
/// are tens to hundreds of MB; a directory per test process that nothing removed kept about
/// 1.6 GB in /tmp for every run of the suite.
pub struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl TempFile {
    pub fn new(prefix: &str, name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .expect("temp dir");
        let path = dir.path().join(name);
        TempFile { _dir: dir, path }
    }
}

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}
