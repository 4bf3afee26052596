//! Contexts (over one or more devices), in-order queues, events.

use super::binary_cache::BinaryCache;
use super::device::Device;
use super::error::{check, Result, SyclError};
use super::ffi;
use super::module::Module;
use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// One module's place in the map: filled by the first thread that builds it; a thread asking for
/// the same module meanwhile waits on the slot, one asking for another builds in parallel.
pub(crate) type ModuleSlot = Arc<Mutex<Option<Arc<Module>>>>;

/// (source name, build options) -> built module.
type ModuleMap = HashMap<(String, Vec<String>), ModuleSlot>;

pub(crate) struct ContextInner {
    pub(crate) raw: *mut ffi::StrataContext,
    pub(crate) id: u64,
    pub(crate) devices: Vec<Device>,
    /// Built modules of this context: (source name, options) -> module. Bundles belong to a
    /// context, so this is the natural scope; the runtime has no in-process cache of its own.
    pub(crate) modules: Mutex<ModuleMap>,
    /// The devices as the kernel binary cache keys them (binary_cache.rs), computed once.
    pub(crate) identity: OnceLock<String>,
    /// The binary cache `module` goes through: None = the process's (`BinaryCache::process`),
    /// Some(None) = none (source builds only), Some(Some(c)) = c (`set_binary_cache`).
    pub(crate) binary_cache: Mutex<Option<Option<BinaryCache>>>,
}

// SAFETY: sycl::context is thread-safe; the module map is behind a Mutex.
unsafe impl Send for ContextInner {}
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // Modules first: they reference the context.
        if let Ok(m) = self.modules.get_mut() {
            m.clear();
        }
        // SAFETY: owned handle, freed once.
        unsafe { ffi::strata_context_free(self.raw) }
    }
}

/// A SYCL context over one or more devices (e.g. the sub-devices of a split CPU). Cheap to clone.
#[derive(Clone)]
pub struct Context(pub(crate) Arc<ContextInner>);

static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Context {
    pub fn new(devices: &[Device]) -> Result<Context> {
        if devices.is_empty() {
            return Err(SyclError::invalid("context creation", "no devices given"));
        }
        let raws: Vec<*const ffi::StrataDevice> =
            devices.iter().map(|d| d.raw() as *const _).collect();
        let mut raw = ptr::null_mut();
        // SAFETY: raws holds live handles; raw is a valid out-pointer.
        check("context creation", unsafe {
            ffi::strata_context_create(raws.as_ptr(), raws.len(), &mut raw)
        })?;
        Ok(Context(Arc::new(ContextInner {
            raw,
            id: NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed),
            devices: devices.to_vec(),
            modules: Mutex::new(HashMap::new()),
            identity: OnceLock::new(),
            binary_cache: Mutex::new(None),
        })))
    }

    pub fn devices(&self) -> &[Device] {
        &self.0.devices
    }

    /// A process-unique id (for caches keyed by context).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Builds this context's later modules through `cache` (None: from source only) instead of
    /// the process's kernel binary cache (`BinaryCache::process`). Modules built already stay.
    pub fn set_binary_cache(&self, cache: Option<BinaryCache>) {
        *self
            .0
            .binary_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(cache);
    }

    /// The binary cache `module` goes through, if any.
    pub fn binary_cache(&self) -> Option<BinaryCache> {
        let chosen = self
            .0
            .binary_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match &*chosen {
            Some(c) => c.clone(),
            None => BinaryCache::process().cloned(),
        }
    }

    /// The modules `module` has built in this context so far (in no particular order).
    pub fn modules(&self) -> Vec<Arc<Module>> {
        let map = self.0.modules.lock().unwrap_or_else(|p| p.into_inner());
        map.values()
            .filter_map(|slot| slot.try_lock().ok().and_then(|m| m.clone()))
            .collect()
    }

    pub(crate) fn raw(&self) -> *mut ffi::StrataContext {
        self.0.raw
    }

    /// An in-order queue on `device` (one of this context's devices).
    pub fn queue(&self, device: &Device) -> Result<Queue> {
        self.make_queue(device, false)
    }

    /// An in-order queue whose events carry profiling timestamps.
    pub fn profiling_queue(&self, device: &Device) -> Result<Queue> {
        self.make_queue(device, true)
    }

    fn make_queue(&self, device: &Device, profiling: bool) -> Result<Queue> {
        if !self.0.devices.iter().any(|d| d == device) {
            return Err(SyclError::invalid(
                "queue creation",
                "the device is not one of the context's devices",
            ));
        }
        let mut raw = ptr::null_mut();
        // SAFETY: live handles, valid out-pointer.
        check("queue creation", unsafe {
            ffi::strata_queue_create(self.raw(), device.raw(), profiling as i32, &mut raw)
        })?;
        Ok(Queue(Arc::new(QueueInner {
            raw,
            ctx: self.clone(),
            device: device.clone(),
            profiling,
            trace: Mutex::new(None),
        })))
    }
}

pub(crate) struct QueueInner {
    pub(crate) raw: *mut ffi::StrataQueue,
    pub(crate) ctx: Context,
    pub(crate) device: Device,
    pub(crate) profiling: bool,
    /// Launches recorded by `trace_begin` (profiling queues only): (label, event).
    pub(crate) trace: Mutex<Option<Vec<(String, Event)>>>,
}

// SAFETY: sycl::queue is thread-safe for submission from several threads.
unsafe impl Send for QueueInner {}
unsafe impl Sync for QueueInner {}

impl Drop for QueueInner {
    fn drop(&mut self) {
        // SAFETY: owned handle; the shim drains the queue before freeing it.
        unsafe { ffi::strata_queue_free(self.raw) }
    }
}

/// An in-order queue on one device. Cheap to clone (clones share the queue). The transfer,
/// launch and graph methods live in `buffer.rs`, `module.rs` and `graph.rs`.
#[derive(Clone)]
pub struct Queue(pub(crate) Arc<QueueInner>);

impl Queue {
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }

    pub fn device(&self) -> &Device {
        &self.0.device
    }

    pub fn is_profiling(&self) -> bool {
        self.0.profiling
    }

    pub(crate) fn raw(&self) -> *mut ffi::StrataQueue {
        self.0.raw
    }

    /// Blocks until everything submitted so far has finished; reports asynchronous errors.
    pub fn wait(&self) -> Result<()> {
        // SAFETY: live handle.
        check("queue wait", unsafe { ffi::strata_queue_wait(self.raw()) })
    }
}

/// A submitted command. Profiling timestamps need a profiling queue.
pub struct Event(pub(crate) *mut ffi::StrataEvent);

// SAFETY: sycl::event is a thread-safe handle.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: owned handle, freed once.
        unsafe { ffi::strata_event_free(self.0) }
    }
}

/// Device timestamps of one command, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    pub submit: u64,
    pub start: u64,
    pub end: u64,
}

impl Profile {
    /// Execution time (end - start) in seconds.
    pub fn seconds(&self) -> f64 {
        self.end.saturating_sub(self.start) as f64 * 1e-9
    }
}

impl Event {
    pub fn wait(&self) -> Result<()> {
        // SAFETY: live handle.
        check("event wait", unsafe { ffi::strata_event_wait(self.0) })
    }

    /// Waits, then reads the timestamps (an error on a non-profiling queue).
    pub fn profile(&self) -> Result<Profile> {
        let (mut submit, mut start, mut end) = (0, 0, 0);
        // SAFETY: live handle, valid out-pointers.
        check("event profiling", unsafe {
            ffi::strata_event_profiling(self.0, &mut submit, &mut start, &mut end)
        })?;
        Ok(Profile { submit, start, end })
    }
}

/// Runs a shim call that optionally returns an event.
pub(crate) fn with_event(
    op: &'static str,
    f: impl FnOnce(*mut *mut ffi::StrataEvent) -> ffi::strata_status,
) -> Result<Event> {
    let mut ev = ptr::null_mut();
    check(op, f(&mut ev))?;
    Ok(Event(ev))
}
