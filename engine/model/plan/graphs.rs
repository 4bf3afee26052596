//! Recorded steps (SYCL graphs), keyed by (stage, rows, head rows). A step of t <= LOGIT_ROWS
//! rows submits the same kernels with the same arguments at every position: token ids and
//! positions are read from device buffers, buffers are allocated once, and the attention's
//! launch geometry depends on n_ctx only (its scratch is reserved for LOGIT_ROWS rows up
//! front). So each shape is recorded once and replayed, which costs a fraction of submitting
//! its ~300-600 launches one by one, with bitwise the same results (same kernels, same
//! arguments, same order). On by default on GPUs, off on the OpenCL CPU device, where replays
//! measured slower (`--graphs` / `--no-graphs`, `Engine::set_step_graphs`).

use crate::model::{EngineError, LOGIT_ROWS};
use crate::sycl::{Graph, Queue};
use std::collections::hash_map::Entry;
use std::collections::HashMap;

pub struct StepGraphs {
    pub on: bool,
    map: HashMap<(usize, usize, usize), Graph>,
}

impl StepGraphs {
    pub fn new(on: bool) -> StepGraphs {
        StepGraphs {
            on,
            map: HashMap::new(),
        }
    }

    /// Drops the recorded steps (their launches no longer match the plan).
    pub fn clear(&mut self) {
        self.map.clear();
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Runs `step` on `q`: replayed from its graph (recorded the first time) when graphs are on,
    /// the step has at most `LOGIT_ROWS` rows and the queue is not tracing (a profiling trace
    /// wants every launch's own event), else submitted directly.
    pub fn run(
        &mut self,
        q: &Queue,
        (stage, t, head_rows): (usize, usize, usize),
        step: impl FnOnce(&Queue) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        if !self.on || t > LOGIT_ROWS || q.tracing() {
            return step(q);
        }
        let graph = match self.map.entry((stage, t, head_rows)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(q.record(step)?),
        };
        q.replay(graph)?;
        Ok(())
    }
}
