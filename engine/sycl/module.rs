//! Kernel modules compiled at run time from SYCL source, kernels, arguments and launches.

use super::binary_cache::{BinaryCache, Lookup};
use super::buffer::{pod_bytes, DeviceBuffer, DevicePod};
use super::build_activity::Building;
use super::context::{with_event, Context, Event, ModuleSlot, Queue};
use super::error::{check, last_error, status_of, Result, SyclError};
use super::ffi;
use super::kernels::KernelSource;
use super::trace::kernel_label;
use std::ffi::{c_char, c_void, CStr, CString};
use std::marker::PhantomData;
use std::ptr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A built kernel bundle (one source file + one option set) for all devices of its context.
pub struct Module {
    raw: *mut ffi::StrataModule,
    name: String,
    options: Vec<String>,
    log: String,
    build_time: Duration,
    from_binary: bool,
    // Bundles reference their context; keep it alive as long as the module.
    _ctx: Context,
}

// SAFETY: sycl::kernel_bundle is a thread-safe handle.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: owned handle, freed once.
        unsafe { ffi::strata_module_free(self.raw) }
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module({} {:?})", self.name, self.options)
    }
}

/// A kernel of a module, found by its `extern "C"` name.
pub struct Kernel {
    raw: *mut ffi::StrataKernel,
    name: String,
    /// name + the module's CFG_ options, for profiles (`trace.rs`)
    label: String,
}

// SAFETY: sycl::kernel is a thread-safe handle.
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: owned handle, freed once.
        unsafe { ffi::strata_kernel_free(self.raw) }
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({})", self.name)
    }
}

fn cstring(op: &'static str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| SyclError::invalid(op, format!("NUL byte inside {s:?}")))
}

/// How `Context::build_cached` got its module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the binary cache: no compiler ran.
    Hit,
    /// Built from source and stored in the cache.
    Stored,
    /// Built from source, nothing stored: why (e.g. a backend without binary export).
    NotStored(String),
    /// The entry could not be used (why): built from source and stored again.
    Rebuilt(String),
}

impl Context {
    fn device_ptrs(&self) -> Vec<*const ffi::StrataDevice> {
        self.devices().iter().map(|d| d.raw() as *const _).collect()
    }

    fn wrap(&self, raw: *mut ffi::StrataModule, name: &str, options: &[&str]) -> Module {
        Module {
            raw,
            name: name.to_string(),
            options: options.iter().map(|s| s.to_string()).collect(),
            log: String::new(),
            build_time: Duration::ZERO,
            from_binary: false,
            _ctx: self.clone(),
        }
    }

    /// Compiles `source` for all devices of this context (no caching: see `module`).
    /// `name` labels errors. A compile error is `SyclError::Build` with the diagnostics.
    pub fn build(&self, name: &str, source: &str, options: &[&str]) -> Result<Module> {
        let src = cstring("kernel build", source)?;
        let opts: Vec<CString> = options
            .iter()
            .map(|o| cstring("kernel build", o))
            .collect::<Result<_>>()?;
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let devs = self.device_ptrs();
        let mut raw = ptr::null_mut();
        let mut log: *mut c_char = ptr::null_mut();
        let t0 = Instant::now();
        // SAFETY: every pointer is live for the call; out-pointers are valid.
        let code = unsafe {
            ffi::strata_module_build(
                self.raw(),
                devs.as_ptr(),
                devs.len(),
                src.as_ptr(),
                opt_ptrs.as_ptr(),
                opt_ptrs.len(),
                &mut raw,
                &mut log,
            )
        };
        let build_time = t0.elapsed();
        if code != ffi::STRATA_OK {
            let message = last_error();
            if code == ffi::STRATA_ERR_BUILD {
                return Err(SyclError::Build {
                    source_name: name.to_string(),
                    options: options.iter().map(|s| s.to_string()).collect(),
                    diagnostics: message,
                });
            }
            return Err(SyclError::Shim {
                op: "kernel build",
                status: status_of(code),
                message: format!("{name}: {message}"),
            });
        }
        let log_text = if log.is_null() {
            String::new()
        } else {
            // SAFETY: the shim returns a malloc'd NUL-terminated string we free once.
            let s = unsafe { CStr::from_ptr(log) }
                .to_string_lossy()
                .into_owned();
            unsafe { ffi::strata_string_free(log) };
            s
        };
        let mut m = self.wrap(raw, name, options);
        m.log = log_text;
        m.build_time = build_time;
        Ok(m)
    }

    /// Recreates a module from `Module::export`'s bytes (no compiler runs). Bytes that do not
    /// parse or that the backend refuses are an error naming why.
    pub fn load_binary(&self, name: &str, options: &[&str], bytes: &[u8]) -> Result<Module> {
        let devs = self.device_ptrs();
        let mut raw = ptr::null_mut();
        let t0 = Instant::now();
        // SAFETY: live handles; `bytes` outlives the call; valid out-pointer.
        check("kernel binary load", unsafe {
            ffi::strata_module_load(
                self.raw(),
                devs.as_ptr(),
                devs.len(),
                bytes.as_ptr(),
                bytes.len(),
                &mut raw,
            )
        })?;
        let mut m = self.wrap(raw, name, options);
        m.build_time = t0.elapsed();
        m.from_binary = true;
        Ok(m)
    }

    /// The module for (`source`, `options`) through `cache`: loaded from its binary when the
    /// cache holds a whole one for this source, options, devices and runtime; else built from
    /// source and stored. Not kept in the context's map (see `module`).
    pub fn build_cached(
        &self,
        cache: &BinaryCache,
        source: &KernelSource,
        options: &[&str],
    ) -> Result<(Module, CacheOutcome)> {
        self.through_cache(cache, source, options, || {
            self.build(source.name, source.text, options)
        })
    }

    /// `build_cached` with `build` as the source build (run on a miss or a damaged entry).
    fn through_cache(
        &self,
        cache: &BinaryCache,
        source: &KernelSource,
        options: &[&str],
        build: impl FnOnce() -> Result<Module>,
    ) -> Result<(Module, CacheOutcome)> {
        let t0 = Instant::now();
        let key = BinaryCache::key(self, source, options);
        let damaged = match cache.read(&key) {
            Lookup::Hit(bytes) => match self.load_binary(source.name, options, &bytes) {
                Ok(mut m) => {
                    m.build_time = t0.elapsed();
                    return Ok((m, CacheOutcome::Hit));
                }
                Err(e) => Some(e.to_string()),
            },
            Lookup::Miss => None,
            Lookup::Corrupt(why) => Some(why),
        };
        if let Some(why) = &damaged {
            eprintln!(
                "strata: kernel cache entry {} is unusable ({why}); rebuilding {} from source",
                cache.path(&key).display(),
                kernel_label(
                    source.name,
                    &options.iter().map(|s| s.to_string()).collect::<Vec<_>>()
                ),
            );
        }
        let mut m = build()?;
        let stored = m.export().and_then(|bytes| {
            cache.write(&key, &bytes).map_err(|e| {
                // said once a process: every later start compiles until it is fixed
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "strata: kernel cache {} cannot store ({e}); kernels are compiled on \
                         every start",
                        cache.dir().display()
                    )
                });
                SyclError::invalid(
                    "kernel cache store",
                    format!("{}: {e}", cache.path(&key).display()),
                )
            })
        });
        let outcome = match (stored, damaged) {
            (Ok(()), Some(why)) => CacheOutcome::Rebuilt(why),
            (Ok(()), None) => CacheOutcome::Stored,
            (Err(e), _) => CacheOutcome::NotStored(e.to_string()),
        };
        m.build_time = t0.elapsed();
        Ok((m, outcome))
    }

    /// The module for (`source`, `options`), built at most once per context and process, through
    /// the context's binary cache (`binary_cache`: the process's unless set; the runtime's disk
    /// cache, see `runtime`, makes a source build itself faster on later runs). Threads asking
    /// for different modules build them in parallel.
    pub fn module(&self, source: &KernelSource, options: &[&str]) -> Result<Arc<Module>> {
        let key = (
            source.name.to_string(),
            options.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        );
        let slot: ModuleSlot = {
            // A poisoned lock only means another thread panicked mid-lookup; the map is valid.
            let mut map = self.0.modules.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(key.clone()).or_default().clone()
        };
        // (the same for a slot: a panicked build left it empty, and this thread builds again)
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        // (dropped on an error: the failed build is no longer "in progress" nor counted)
        let building = Building::start(source.name, &key.1);
        // the runtime's cache files before a source build (counted only for one: a binary
        // cache hit needs no walk of that directory)
        let mut before = None;
        let mut source_build = || {
            before = disk_cache_files();
            self.build(source.name, source.text, options)
        };
        let (m, outcome) = match self.binary_cache() {
            Some(cache) => {
                let (m, outcome) = self.through_cache(&cache, source, options, source_build)?;
                (m, Some(outcome))
            }
            None => (source_build()?, None),
        };
        if let Some(CacheOutcome::NotStored(why)) = &outcome {
            tracing::debug!(module = source.name, "kernel binary not cached: {why}");
        }
        let stored = matches!(
            outcome,
            Some(CacheOutcome::Stored | CacheOutcome::Rebuilt(_))
        );
        if !stored && before.is_some() && disk_cache_files() > before {
            // No binary of ours, and the runtime compiled and stored something: a cold build.
            // Its device binary is keyed by the fresh compile's IR, which differs from the IR
            // later processes read back from the cache (docs/sycl.md, "a warm start needs the
            // cache written twice"), so build again from the cached IR to store the binary the
            // next start will hit. The first module is kept either way; a failed rebuild only
            // costs the next start a compile. (With a stored binary the next start needs none.)
            let _ = self.build(source.name, source.text, options);
        }
        building.done(m.build_time(), m.from_binary());
        let m = Arc::new(m);
        *slot = Some(m.clone());
        Ok(m)
    }

    /// Builds (or finds) every requested module, on up to as many threads as the machine has
    /// CPUs, and reports the wall time. The first error (in `wanted`'s order) is returned.
    pub fn build_all(&self, wanted: &[(&KernelSource, &[&str])]) -> Result<BuildReport> {
        let t0 = Instant::now();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(wanted.len());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<Arc<Module>>>>> =
            wanted.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((src, opts)) = wanted.get(i) else {
                        break;
                    };
                    let r = self.module(src, opts);
                    *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                });
            }
        });
        let modules = results
            .into_iter()
            .map(|r| {
                r.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .unwrap_or_else(|| Err(SyclError::invalid("build_all", "a worker panicked")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(BuildReport {
            modules,
            elapsed: t0.elapsed(),
        })
    }
}

/// What `Context::build_all` did.
pub struct BuildReport {
    pub modules: Vec<Arc<Module>>,
    pub elapsed: Duration,
}

impl Module {
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let c = cstring("kernel lookup", name)?;
        let mut raw = ptr::null_mut();
        // SAFETY: live module, valid C string and out-pointer.
        check("kernel lookup", unsafe {
            ffi::strata_kernel_get(self.raw, c.as_ptr(), &mut raw)
        })
        .map_err(|e| match e {
            SyclError::Shim {
                op,
                status,
                message,
            } => SyclError::Shim {
                op,
                status,
                message: format!("{} {:?}: {message}", self.name, self.options),
            },
            e => e,
        })?;
        Ok(Kernel {
            raw,
            name: name.to_string(),
            label: super::trace::kernel_label(name, &self.options),
        })
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn options(&self) -> &[String] {
        &self.options
    }
    /// The compiler's log of a successful build (warnings), often empty.
    pub fn log(&self) -> &str {
        &self.log
    }
    /// Wall time of the build (a disk-cache hit is ~10x faster than a compile; a binary-cache
    /// hit ~100x).
    pub fn build_time(&self) -> Duration {
        self.build_time
    }
    /// Whether the module was loaded from the kernel binary cache (no compiler ran).
    pub fn from_binary(&self) -> bool {
        self.from_binary
    }
    /// The module's device binaries and kernel names, for `Context::load_binary` in a later
    /// process (the binary cache's payload). `SyclError::Shim` with `Status::Unsupported` on a
    /// backend the shim cannot export from (only OpenCL is supported so far).
    pub fn export(&self) -> Result<Vec<u8>> {
        let mut blob: *mut u8 = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live module, valid out-pointers.
        check("kernel binary export", unsafe {
            ffi::strata_module_export(self.raw, &mut blob, &mut len)
        })?;
        if blob.is_null() {
            return Err(SyclError::invalid(
                "kernel binary export",
                "no bytes returned",
            ));
        }
        // SAFETY: on success the shim returns a malloc'd buffer of `len` bytes we free once.
        let bytes = unsafe { std::slice::from_raw_parts(blob, len) }.to_vec();
        unsafe { ffi::strata_bytes_free(blob) };
        Ok(bytes)
    }
}

/// Kernel facts for one device.
#[derive(Debug, Clone, Copy)]
pub struct KernelInfo {
    /// The required sub-group size the kernel was compiled with (0 = none).
    pub sub_group_size: u32,
    pub max_work_group: u64,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The name with the module's CFG_ options (e.g. "mmvq Q4_1"), as profiles show it.
    pub fn label(&self) -> &str {
        &self.label
    }
    pub fn info(&self, device: &super::Device) -> Result<KernelInfo> {
        let (mut sg, mut wg) = (0u32, 0u64);
        // SAFETY: live handles, valid out-pointers.
        check("kernel info", unsafe {
            ffi::strata_kernel_info(self.raw, device.raw(), &mut sg, &mut wg)
        })?;
        Ok(KernelInfo {
            sub_group_size: sg,
            max_work_group: wg,
        })
    }
}

/// One kernel argument: a USM pointer or a value passed by bytes.
#[derive(Clone, Copy)]
pub struct Arg<'a> {
    kind: u32,
    size: u32,
    inline: [u8; 8],
    ptr: *const c_void,
    _life: PhantomData<&'a ()>,
}

impl<'a> Arg<'a> {
    fn value(bytes: &[u8]) -> Arg<'static> {
        let mut inline = [0u8; 8];
        inline[..bytes.len()].copy_from_slice(bytes);
        Arg {
            kind: ffi::STRATA_ARG_BYTES,
            size: bytes.len() as u32,
            inline,
            ptr: ptr::null(),
            _life: PhantomData,
        }
    }
    /// A buffer's USM pointer (`T *` / `const T *` in the kernel).
    pub fn buf<T: Copy>(b: &'a DeviceBuffer<T>) -> Arg<'a> {
        Self::buf_at(b, 0)
    }
    /// A buffer's device address as a u64 (`uint64_t` in the kernel, cast back with `STRATA_ADDR`,
    /// sycl/kernels/addr.hpp). The OpenCL CPU runtime does bookkeeping for every USM pointer
    /// argument of a launch (1.5-3 us each, docs/performance.md); an address is plain bytes. Safe
    /// for a buffer used on its own queue: its drop waits for that queue before freeing.
    pub fn addr<T: Copy>(b: &'a DeviceBuffer<T>) -> Arg<'a> {
        Self::addr_at(b, 0)
    }
    /// `addr` of the element `offset` into the buffer (clamped to the end, as `buf_at`).
    pub fn addr_at<T: Copy>(b: &'a DeviceBuffer<T>, offset: usize) -> Arg<'a> {
        let offset = offset.min(b.len());
        // wrapping_add: the pointer is never dereferenced on the host.
        let p = b.as_ptr().wrapping_add(offset) as usize as u64;
        Arg {
            _life: PhantomData,
            ..Arg::value(&p.to_ne_bytes())
        }
    }
    /// A pointer `offset` elements into a buffer (an offset past the end is clamped to the end).
    pub fn buf_at<T: Copy>(b: &'a DeviceBuffer<T>, offset: usize) -> Arg<'a> {
        let offset = offset.min(b.len());
        Arg {
            kind: ffi::STRATA_ARG_POINTER,
            size: std::mem::size_of::<*const c_void>() as u32,
            inline: [0; 8],
            // wrapping_add: the pointer is never dereferenced on the host.
            ptr: b.as_ptr().wrapping_add(offset) as *const c_void,
            _life: PhantomData,
        }
    }
    /// A null pointer (for optional pointer arguments the kernel checks).
    pub fn null() -> Arg<'static> {
        Arg {
            kind: ffi::STRATA_ARG_POINTER,
            size: 8,
            inline: [0; 8],
            ptr: ptr::null(),
            _life: PhantomData,
        }
    }
    pub fn i32(v: i32) -> Arg<'static> {
        Arg::value(&v.to_ne_bytes())
    }
    pub fn u32(v: u32) -> Arg<'static> {
        Arg::value(&v.to_ne_bytes())
    }
    pub fn i64(v: i64) -> Arg<'static> {
        Arg::value(&v.to_ne_bytes())
    }
    pub fn u64(v: u64) -> Arg<'static> {
        Arg::value(&v.to_ne_bytes())
    }
    pub fn f32(v: f32) -> Arg<'static> {
        Arg::value(&v.to_ne_bytes())
    }
    /// A `#[repr(C)]` struct (or any pod) by value; the kernel declares the same layout.
    pub fn pod<T: DevicePod>(v: &'a T) -> Arg<'a> {
        let bytes = pod_bytes(v);
        Arg {
            kind: ffi::STRATA_ARG_BYTES,
            size: bytes.len() as u32,
            inline: [0; 8],
            ptr: bytes.as_ptr() as *const c_void,
            _life: PhantomData,
        }
    }

    fn raw(&self) -> ffi::StrataArg {
        ffi::StrataArg {
            kind: self.kind,
            size: self.size,
            data: if self.kind == ffi::STRATA_ARG_BYTES && self.ptr.is_null() {
                self.inline.as_ptr() as *const c_void
            } else {
                self.ptr
            },
        }
    }
}

/// A launch shape: global and work-group (local) sizes in 1 to 3 dimensions.
/// As in SYCL, the last dimension is the fastest-varying one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdRange {
    pub dims: u32,
    pub global: [usize; 3],
    pub local: [usize; 3],
}

impl NdRange {
    pub fn d1(global: usize, local: usize) -> NdRange {
        NdRange {
            dims: 1,
            global: [global, 1, 1],
            local: [local, 1, 1],
        }
    }
    pub fn d2(global: [usize; 2], local: [usize; 2]) -> NdRange {
        NdRange {
            dims: 2,
            global: [global[0], global[1], 1],
            local: [local[0], local[1], 1],
        }
    }
    pub fn d3(global: [usize; 3], local: [usize; 3]) -> NdRange {
        NdRange {
            dims: 3,
            global,
            local,
        }
    }
    /// `groups` work-groups of `local` items (1-D).
    pub fn groups(groups: usize, local: usize) -> NdRange {
        NdRange::d1(groups * local, local)
    }
    /// Number of work-groups.
    pub fn n_groups(&self) -> usize {
        (0..self.dims as usize)
            .map(|i| self.global[i] / self.local[i].max(1))
            .product()
    }
}

impl Queue {
    /// Submits `kernel` over `range` with `args` (in the kernel's parameter order). Asynchronous:
    /// errors the runtime detects later surface at the next `wait`/`download`.
    pub fn launch(&self, kernel: &Kernel, range: NdRange, args: &[Arg]) -> Result<()> {
        self.submit(kernel, range, args, false).map(|_| ())
    }

    /// `launch`, returning the event (for profiling on a profiling queue, or to wait on).
    pub fn launch_event(&self, kernel: &Kernel, range: NdRange, args: &[Arg]) -> Result<Event> {
        self.submit(kernel, range, args, true)
            .map(|e| e.expect("submit with want_event returns an event"))
    }

    fn submit(
        &self,
        kernel: &Kernel,
        range: NdRange,
        args: &[Arg],
        want_event: bool,
    ) -> Result<Option<Event>> {
        if !want_event && self.tracing() {
            let ev = self.submit(kernel, range, args, true)?;
            if let Some(ev) = ev {
                self.trace_push(kernel, &range, ev);
            }
            return Ok(None);
        }
        let raw: Vec<ffi::StrataArg> = args.iter().map(|a| a.raw()).collect();
        let call = |ev: *mut *mut ffi::StrataEvent| unsafe {
            // SAFETY: raw's byte pointers borrow from `args` (or its inline copies) which outlive
            // the call; the runtime copies argument bytes at submit.
            ffi::strata_launch(
                self.raw(),
                kernel.raw,
                range.dims,
                range.global.as_ptr(),
                range.local.as_ptr(),
                raw.as_ptr(),
                raw.len(),
                ev,
            )
        };
        let label = || format!("kernel '{}'", kernel.name);
        if want_event {
            with_event("kernel launch", call)
                .map(Some)
                .map_err(|e| add_context(e, label()))
        } else {
            check("kernel launch", call(ptr::null_mut()))
                .map(|_| None)
                .map_err(|e| add_context(e, label()))
        }
    }
}

fn add_context(e: SyclError, what: String) -> SyclError {
    match e {
        SyclError::Shim {
            op,
            status,
            message,
        } => SyclError::Shim {
            op,
            status,
            message: format!("{what}: {message}"),
        },
        e => e,
    }
}

/// Files under the runtime's persistent kernel cache (`SYCL_CACHE_DIR`, set by `runtime`), or None
/// when there is no such cache to watch. A handful of small files per module: cheap to count.
fn disk_cache_files() -> Option<usize> {
    let dir = super::runtime::disk_cache_dir()?;
    let mut n = 0usize;
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => n += 1,
                Err(_) => {}
            }
        }
    }
    Some(n)
}
