//! Leaving the process after `shutdown` or EOF without racing the SYCL runtime.
//!
//! Returning from `main` (or `std::process::exit`) runs the C++ runtime's static destructors. If
//! the worker thread is still inside the SYCL runtime then (a load uploading weights or building
//! kernels: those calls cannot be interrupted), the destructors free what it is using and the
//! process dies with "Pure virtual function called" (134) or SIGSEGV (139): 6 runs in 10 before
//! this file. So: a worker that stops in time is joined and the process exits normally; one
//! still busy is left behind with `_exit`, which ends every thread at once and runs no
//! destructors or atexit handlers. Nothing is lost that way: every event is already written and
//! flushed (and no new one can start, `Out::seal`), and a load's work is discarded anyway.

use super::out::Out;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker that is generating may take to stop (it checks its cancel flag between
/// windows, every few ms) before it is left behind.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Waits for the worker (already told to stop) and returns the exit status, or leaves without
/// it. A worker in a load (`loading`) is left at once unless a kernel build is in flight: such a
/// build may be writing the runtime's kernel cache, so it gets up to `EXIT_GRACE` to finish.
pub fn join_or_leave(worker: JoinHandle<()>, loading: &AtomicBool, out: &Out) -> i32 {
    let t0 = Instant::now();
    loop {
        if worker.is_finished() {
            // (the worker catches its own panics: join cannot fail in a way worth reporting)
            let _ = worker.join();
            return 0;
        }
        let building = !crate::sycl::build_activity::activity().building.is_empty();
        let load_idle = loading.load(Ordering::Relaxed) && !building;
        if load_idle || t0.elapsed() >= EXIT_GRACE {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    out.seal();
    eprintln!(
        "strata engine: the worker is still busy ({}); exiting without it",
        if loading.load(Ordering::Relaxed) {
            "loading"
        } else {
            "generating"
        }
    );
    // SAFETY: _exit only ends the process; stdout is flushed and sealed above, stderr is
    // unbuffered.
    unsafe { libc::_exit(0) }
}
