//! Command graphs (`sycl_ext_oneapi_graph`): record a queue's submissions once, replay them cheaply
//! (~2 us per kernel instead of ~3-4 us per plain submit on the CPU device).

use super::context::{with_event, Event, Queue};
use super::error::{check, Result, SyclError};
use super::ffi;
use std::ptr;

/// A finalized graph, replayable on queues of the device it was recorded for.
pub struct Graph {
    raw: *mut ffi::StrataExecGraph,
}

// SAFETY: an executable command_graph is a thread-safe handle.
unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: owned handle, freed once.
        unsafe { ffi::strata_exec_graph_free(self.raw) }
    }
}

struct Recording(*mut ffi::StrataGraph);

impl Drop for Recording {
    fn drop(&mut self) {
        // SAFETY: owned handle, freed once.
        unsafe { ffi::strata_graph_free(self.0) }
    }
}

impl Queue {
    /// Records everything `body` submits to this queue (nothing runs), then finalizes it.
    /// `Status::Unsupported` if the device has no graph support. Buffers and argument values
    /// are captured as they are now: a replay reuses the same pointers and scalars.
    pub fn record<E: From<SyclError>>(
        &self,
        body: impl FnOnce(&Queue) -> std::result::Result<(), E>,
    ) -> std::result::Result<Graph, E> {
        let mut g = ptr::null_mut();
        // SAFETY: live queue, valid out-pointer.
        check("graph begin_recording", unsafe {
            ffi::strata_graph_begin(self.raw(), &mut g)
        })?;
        let rec = Recording(g);
        let body_result = body(self);
        // Always stop recording, or the queue stays in recording mode.
        // SAFETY: live handles.
        let end = check("graph end_recording", unsafe {
            ffi::strata_graph_end(rec.0, self.raw())
        });
        body_result?;
        end?;
        let mut exec = ptr::null_mut();
        // SAFETY: live recording, valid out-pointer.
        check("graph finalize", unsafe {
            ffi::strata_graph_finalize(rec.0, &mut exec)
        })?;
        Ok(Graph { raw: exec })
    }

    /// Submits one replay of `graph` (asynchronous; returns its event).
    pub fn replay(&self, graph: &Graph) -> Result<Event> {
        with_event("graph replay", |e| unsafe {
            // SAFETY: live handles.
            ffi::strata_graph_replay(self.raw(), graph.raw, e)
        })
    }
}
