//! The event writer: one JSON line per event, flushed at once, shared by the request reader and
//! the worker thread.

use crate::protocol::Event;
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct Out {
    w: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Out {
    pub fn new(w: Box<dyn Write + Send>) -> Out {
        Out {
            w: Arc::new(Mutex::new(w)),
        }
    }

    /// Writes one event line and flushes. A closed stdout (the app is gone) is not an error worth
    /// dying for mid-generation: the reader sees EOF on stdin and ends the process.
    pub fn emit(&self, e: &Event) {
        let line = e.to_line();
        // A poisoned lock means another thread panicked mid-write; the writer itself is fine.
        let mut w = self.w.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(err) = w.write_all(line.as_bytes()).and_then(|_| w.flush()) {
            eprintln!("strata engine: writing an event failed: {err}");
        }
    }

    /// Flushes and keeps the writer locked for good: a thread that emits later blocks, so the
    /// process can end (exit.rs) without a half-written event on stdout. When another thread
    /// holds the writer (blocked on a full pipe nobody reads) it is left as it is.
    pub fn seal(&self) {
        let w = match self.w.try_lock() {
            Ok(w) => w,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        let mut w = w;
        let _ = w.flush();
        std::mem::forget(w);
    }
}
