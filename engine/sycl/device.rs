//! Platforms and devices: enumeration, facts, CPU partitioning into sub-devices.

use super::error::{check, Result, SyclError};
use super::{ffi, runtime};
use serde::Serialize;
use std::ffi::c_char;
use std::ptr;
use std::sync::Arc;

pub(crate) struct DeviceHandle(pub(crate) *mut ffi::StrataDevice);

// SAFETY: sycl::device is a thread-safe reference-counted handle (SYCL 2020 §4.5.3: all runtime
// classes are safe to share between host threads).
unsafe impl Send for DeviceHandle {}
unsafe impl Sync for DeviceHandle {}

impl Drop for DeviceHandle {
    fn drop(&mut self) {
        // SAFETY: we own the handle and free it once.
        unsafe { ffi::strata_device_free(self.0) }
    }
}

/// A SYCL device (a root device or a sub-device). Cheap to clone.
#[derive(Clone)]
pub struct Device(pub(crate) Arc<DeviceHandle>);

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        // SAFETY: both handles are live.
        Arc::ptr_eq(&self.0, &other.0)
            || unsafe { ffi::strata_device_equal(self.0 .0, other.0 .0) } != 0
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.info() {
            Ok(i) => write!(f, "Device({} / {})", i.name, i.backend),
            Err(_) => write!(f, "Device(?)"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceType {
    Cpu,
    Gpu,
    Accelerator,
    Other,
}

/// The facts `strata devices` prints and the engine plans with.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub vendor: String,
    pub platform: String,
    pub backend: String,
    pub driver_version: String,
    pub version: String,
    pub device_type: DeviceType,
    pub compute_units: u32,
    pub global_mem: u64,
    pub local_mem: u64,
    pub max_alloc: u64,
    pub max_work_group: u64,
    pub sub_group_sizes: Vec<u32>,
    pub partition_max_sub_devices: u32,
    /// Floats per native vector register (the CPU device: 8 with AVX2, 16 with AVX-512);
    /// picks the matmul register tile (`kernels::MatmulTile`).
    pub native_vector_width_float: u32,
    pub fp16: bool,
    pub fp64: bool,
    /// "full" (ext_oneapi_graph), "limited" (ext_oneapi_limited_graph) or "none".
    pub graphs: &'static str,
    pub is_sub_device: bool,
    pub usm_device: bool,
    pub usm_host: bool,
    pub usm_shared: bool,
    pub profiling: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlatformInfo {
    pub name: String,
    pub vendor: String,
    pub version: String,
    pub backend: String,
}

/// A platform with its devices.
pub struct Platform {
    pub info: PlatformInfo,
    pub devices: Vec<Device>,
}

fn cstr(buf: &[c_char]) -> String {
    // The shim always NUL-terminates inside the buffer; fall back to empty if not.
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Calls an (out, cap, n) enumeration twice: once for the count, once to fill.
fn enumerate(
    op: &'static str,
    f: impl Fn(*mut *mut ffi::StrataDevice, usize, *mut usize) -> ffi::strata_status,
) -> Result<Vec<Device>> {
    let mut n = 0usize;
    check(op, f(ptr::null_mut(), 0, &mut n))?;
    let mut raw: Vec<*mut ffi::StrataDevice> = vec![ptr::null_mut(); n];
    let mut n2 = 0usize;
    check(op, f(raw.as_mut_ptr(), n, &mut n2))?;
    raw.truncate(n2.min(n));
    Ok(raw
        .into_iter()
        .filter(|p| !p.is_null())
        .map(|p| Device(Arc::new(DeviceHandle(p))))
        .collect())
}

/// Every platform the runtime sees, with its devices.
pub fn platforms() -> Result<Vec<Platform>> {
    runtime::init();
    let mut n = 0usize;
    // SAFETY: n is a valid out-pointer.
    check("platform enumeration", unsafe {
        ffi::strata_platform_count(&mut n)
    })?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: zeroed is a valid StrataPlatformInfo (plain arrays); the shim fills it.
        let mut pi: ffi::StrataPlatformInfo = unsafe { std::mem::zeroed() };
        check("platform info", unsafe {
            ffi::strata_platform_info(i, &mut pi)
        })?;
        let devices = enumerate("device enumeration", |o, cap, n| unsafe {
            // SAFETY: o has room for cap handles (or is null with cap 0), n is valid.
            ffi::strata_platform_devices(i, o, cap, n)
        })?;
        out.push(Platform {
            info: PlatformInfo {
                name: cstr(&pi.name),
                vendor: cstr(&pi.vendor),
                version: cstr(&pi.version),
                backend: cstr(&pi.backend),
            },
            devices,
        });
    }
    Ok(out)
}

/// All devices of all platforms; an error naming the fix when there are none.
pub fn devices() -> Result<Vec<Device>> {
    let all: Vec<Device> = platforms()?.into_iter().flat_map(|p| p.devices).collect();
    if all.is_empty() {
        return Err(SyclError::NoDevice(runtime::no_device_message("device")));
    }
    Ok(all)
}

/// The first CPU device (the OpenCL CPU device here); a clear error if none.
pub fn cpu_device() -> Result<Device> {
    for d in platforms()?.into_iter().flat_map(|p| p.devices) {
        if d.info()?.device_type == DeviceType::Cpu {
            return Ok(d);
        }
    }
    Err(SyclError::NoDevice(runtime::no_device_message(
        "CPU device",
    )))
}

/// The device the engine runs on by default: a Level Zero GPU if present, else the CPU device.
pub fn default_device() -> Result<Device> {
    let all = devices()?;
    for d in &all {
        let i = d.info()?;
        if i.device_type == DeviceType::Gpu && i.backend == "level_zero" {
            return Ok(d.clone());
        }
    }
    cpu_device()
}

impl Device {
    pub(crate) fn raw(&self) -> *mut ffi::StrataDevice {
        self.0 .0
    }

    pub fn info(&self) -> Result<DeviceInfo> {
        // SAFETY: zeroed is valid for this plain-data struct; the handle is live.
        let mut r: ffi::StrataDeviceInfo = unsafe { std::mem::zeroed() };
        check("device info", unsafe {
            ffi::strata_device_info(self.raw(), &mut r)
        })?;
        Ok(DeviceInfo {
            name: cstr(&r.name),
            vendor: cstr(&r.vendor),
            platform: cstr(&r.platform),
            backend: cstr(&r.backend),
            driver_version: cstr(&r.driver_version),
            version: cstr(&r.version),
            device_type: match r.device_type {
                1 => DeviceType::Cpu,
                2 => DeviceType::Gpu,
                3 => DeviceType::Accelerator,
                _ => DeviceType::Other,
            },
            compute_units: r.compute_units,
            global_mem: r.global_mem,
            local_mem: r.local_mem,
            max_alloc: r.max_alloc,
            max_work_group: r.max_work_group,
            sub_group_sizes: r.sub_group_sizes[..(r.n_sub_group_sizes as usize).min(16)].to_vec(),
            partition_max_sub_devices: r.partition_max_sub_devices,
            native_vector_width_float: r.native_vector_width_float,
            fp16: r.fp16 != 0,
            fp64: r.fp64 != 0,
            graphs: match r.graph {
                2 => "full",
                1 => "limited",
                _ => "none",
            },
            is_sub_device: r.is_sub_device != 0,
            usm_device: r.usm_device != 0,
            usm_host: r.usm_host != 0,
            usm_shared: r.usm_shared != 0,
            profiling: r.profiling != 0,
        })
    }

    /// Partitions this device (`partition_equally`) into `n` sub-devices of
    /// `compute_units / n` compute units each; each can serve as its own "card".
    pub fn split(&self, n: u32) -> Result<Vec<Device>> {
        let info = self.info()?;
        if n == 0 || n > info.compute_units {
            return Err(SyclError::invalid(
                "split",
                format!(
                    "cannot split '{}' ({} compute units) into {n} sub-devices",
                    info.name, info.compute_units
                ),
            ));
        }
        let per = info.compute_units / n;
        let mut subs = enumerate("partition_equally", |o, cap, c| unsafe {
            // SAFETY: o has room for cap handles (or is null with cap 0), c is valid.
            ffi::strata_device_partition_equally(self.raw(), per, o, cap, c)
        })?;
        // With a remainder the runtime may return more than n; the rest stay unused.
        if subs.len() < n as usize {
            return Err(SyclError::invalid(
                "split",
                format!(
                    "'{}' gave {} sub-devices, wanted {n}",
                    info.name,
                    subs.len()
                ),
            ));
        }
        subs.truncate(n as usize);
        Ok(subs)
    }
}
