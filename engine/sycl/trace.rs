//! Per-kernel timing of a stretch of work on a profiling queue: `trace_begin` makes every later
//! `launch` keep its event (label = kernel name + the module's CFG_ options + global size), and
//! `trace_end` waits, reads the device timestamps and sums them per label. `strata bench
//! --profile` prints the result for a decode step. Launches inside a graph recording or replay
//! are not traced (a replay has one event for the whole graph).

use super::context::{Event, Queue};
use super::error::Result;
use super::module::{Kernel, NdRange};
use std::collections::HashMap;

/// Total device time of one kernel label over a trace.
#[derive(Debug, Clone)]
pub struct KernelTime {
    /// e.g. "mmvq Q4_1 [576x16]": kernel, format options, global range
    pub label: String,
    pub launches: usize,
    /// sum of end - start over the launches
    pub seconds: f64,
}

/// "mmvq" + ["-DCFG_FMT_Q4_1", "-DCFG_X=2"] -> "mmvq Q4_1 X=2".
pub(crate) fn kernel_label(name: &str, options: &[String]) -> String {
    let mut s = name.to_string();
    for o in options {
        let o = o.trim_start_matches("-D").trim_start_matches("CFG_");
        s.push(' ');
        s.push_str(o.trim_start_matches("FMT_"));
    }
    s
}

impl Queue {
    /// Starts keeping the events of launches (a no-op on a non-profiling queue).
    pub fn trace_begin(&self) {
        if self.is_profiling() {
            let mut t = self.0.trace.lock().unwrap_or_else(|p| p.into_inner());
            *t = Some(Vec::new());
        }
    }

    /// Stops tracing, waits for the traced launches and returns their device time per label,
    /// largest first (empty on a non-profiling queue).
    pub fn trace_end(&self) -> Result<Vec<KernelTime>> {
        let events = {
            let mut t = self.0.trace.lock().unwrap_or_else(|p| p.into_inner());
            t.take().unwrap_or_default()
        };
        self.wait()?;
        let mut by: HashMap<String, KernelTime> = HashMap::new();
        for (label, ev) in events {
            let p = ev.profile()?;
            let e = by.entry(label.clone()).or_insert(KernelTime {
                label,
                launches: 0,
                seconds: 0.0,
            });
            e.launches += 1;
            e.seconds += p.seconds();
        }
        let mut v: Vec<KernelTime> = by.into_values().collect();
        v.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        Ok(v)
    }

    pub(crate) fn tracing(&self) -> bool {
        self.0.profiling && self.0.trace.lock().map(|t| t.is_some()).unwrap_or(false)
    }

    pub(crate) fn trace_push(&self, kernel: &Kernel, range: &NdRange, ev: Event) {
        let g = &range.global[..range.dims as usize];
        let l = &range.local[..range.dims as usize];
        let label = format!(
            "{} [{}/{}]",
            kernel.label(),
            g.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("x"),
            l.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("x")
        );
        let mut t = self.0.trace.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = t.as_mut() {
            v.push((label, ev));
        }
    }
}
