//! Raw bindings to `sycl/shim/strata_shim.h`. Keep in step with that header; the safe wrappers in
//! this module are the only callers.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

pub type strata_status = c_int;
pub const STRATA_OK: strata_status = 0;
pub const STRATA_ERR: strata_status = 1;
pub const STRATA_ERR_BUILD: strata_status = 2;
pub const STRATA_ERR_UNSUPPORTED: strata_status = 3;
pub const STRATA_ERR_INVALID: strata_status = 4;
pub const STRATA_ERR_NOT_FOUND: strata_status = 5;

pub const STRATA_USM_DEVICE: c_int = 0;
pub const STRATA_USM_HOST: c_int = 1;
pub const STRATA_USM_SHARED: c_int = 2;

pub const STRATA_ARG_POINTER: u32 = 0;
pub const STRATA_ARG_BYTES: u32 = 1;

macro_rules! opaque {
    ($($n:ident),*) => {$(
        #[repr(C)]
        pub struct $n {
            _private: [u8; 0],
        }
    )*};
}
opaque!(
    StrataDevice,
    StrataContext,
    StrataQueue,
    StrataEvent,
    StrataModule,
    StrataKernel,
    StrataGraph,
    StrataExecGraph
);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct StrataDeviceInfo {
    pub name: [c_char; 256],
    pub vendor: [c_char; 128],
    pub platform: [c_char; 256],
    pub backend: [c_char; 32],
    pub driver_version: [c_char; 128],
    pub version: [c_char; 128],
    pub device_type: u32,
    pub compute_units: u32,
    pub global_mem: u64,
    pub local_mem: u64,
    pub max_alloc: u64,
    pub max_work_group: u64,
    pub sub_group_sizes: [u32; 16],
    pub n_sub_group_sizes: u32,
    pub partition_max_sub_devices: u32,
    pub native_vector_width_float: u32,
    pub fp16: u8,
    pub fp64: u8,
    pub graph: u8,
    pub is_sub_device: u8,
    pub usm_device: u8,
    pub usm_host: u8,
    pub usm_shared: u8,
    pub profiling: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct StrataPlatformInfo {
    pub name: [c_char; 256],
    pub vendor: [c_char; 128],
    pub version: [c_char; 128],
    pub backend: [c_char; 32],
}

#[repr(C)]
pub struct StrataArg {
    pub kind: u32,
    pub size: u32,
    pub data: *const c_void,
}

extern "C" {
    pub fn strata_last_error() -> *const c_char;

    pub fn strata_platform_count(n: *mut usize) -> strata_status;
    pub fn strata_platform_info(index: usize, out: *mut StrataPlatformInfo) -> strata_status;
    pub fn strata_platform_devices(
        platform: usize,
        out: *mut *mut StrataDevice,
        cap: usize,
        n: *mut usize,
    ) -> strata_status;
    pub fn strata_device_info(d: *const StrataDevice, out: *mut StrataDeviceInfo) -> strata_status;
    pub fn strata_device_partition_equally(
        d: *const StrataDevice,
        cus_per_sub: u32,
        out: *mut *mut StrataDevice,
        cap: usize,
        n: *mut usize,
    ) -> strata_status;
    pub fn strata_device_equal(a: *const StrataDevice, b: *const StrataDevice) -> c_int;
    pub fn strata_device_free(d: *mut StrataDevice);

    pub fn strata_context_create(
        devs: *const *const StrataDevice,
        n: usize,
        out: *mut *mut StrataContext,
    ) -> strata_status;
    pub fn strata_context_free(c: *mut StrataContext);
    pub fn strata_queue_create(
        ctx: *const StrataContext,
        dev: *const StrataDevice,
        profiling: c_int,
        out: *mut *mut StrataQueue,
    ) -> strata_status;
    pub fn strata_queue_free(q: *mut StrataQueue);
    pub fn strata_queue_wait(q: *mut StrataQueue) -> strata_status;

    pub fn strata_malloc(
        q: *mut StrataQueue,
        kind: c_int,
        bytes: usize,
        align: usize,
        out: *mut *mut c_void,
    ) -> strata_status;
    pub fn strata_free(ctx: *const StrataContext, ptr: *mut c_void);
    pub fn strata_memcpy(
        q: *mut StrataQueue,
        dst: *mut c_void,
        src: *const c_void,
        bytes: usize,
        ev: *mut *mut StrataEvent,
    ) -> strata_status;
    pub fn strata_fill(
        q: *mut StrataQueue,
        dst: *mut c_void,
        pattern: *const c_void,
        pattern_size: usize,
        count: usize,
        ev: *mut *mut StrataEvent,
    ) -> strata_status;
    pub fn strata_copy_across(
        q_src: *mut StrataQueue,
        src: *const c_void,
        q_dst: *mut StrataQueue,
        dst: *mut c_void,
        bytes: usize,
        staging: *mut c_void,
        staging_bytes: usize,
    ) -> strata_status;

    pub fn strata_event_wait(e: *mut StrataEvent) -> strata_status;
    pub fn strata_event_profiling(
        e: *mut StrataEvent,
        submit: *mut u64,
        start: *mut u64,
        end: *mut u64,
    ) -> strata_status;
    pub fn strata_event_free(e: *mut StrataEvent);

    pub fn strata_module_build(
        ctx: *const StrataContext,
        devs: *const *const StrataDevice,
        n_devs: usize,
        source: *const c_char,
        options: *const *const c_char,
        n_options: usize,
        out: *mut *mut StrataModule,
        log: *mut *mut c_char,
    ) -> strata_status;
    pub fn strata_module_free(m: *mut StrataModule);
    pub fn strata_string_free(s: *mut c_char);
    pub fn strata_module_export(
        m: *const StrataModule,
        blob: *mut *mut u8,
        len: *mut usize,
    ) -> strata_status;
    pub fn strata_module_load(
        ctx: *const StrataContext,
        devs: *const *const StrataDevice,
        n_devs: usize,
        blob: *const u8,
        len: usize,
        out: *mut *mut StrataModule,
    ) -> strata_status;
    pub fn strata_bytes_free(p: *mut u8);
    pub fn strata_runtime_version() -> *const c_char;
    pub fn strata_kernel_get(
        m: *const StrataModule,
        name: *const c_char,
        out: *mut *mut StrataKernel,
    ) -> strata_status;
    pub fn strata_kernel_info(
        k: *const StrataKernel,
        dev: *const StrataDevice,
        compile_sub_group_size: *mut u32,
        max_work_group: *mut u64,
    ) -> strata_status;
    pub fn strata_kernel_free(k: *mut StrataKernel);
    pub fn strata_launch(
        q: *mut StrataQueue,
        k: *const StrataKernel,
        dims: u32,
        global: *const usize,
        local: *const usize,
        args: *const StrataArg,
        n_args: usize,
        ev: *mut *mut StrataEvent,
    ) -> strata_status;

    pub fn strata_graph_begin(q: *mut StrataQueue, out: *mut *mut StrataGraph) -> strata_status;
    pub fn strata_graph_end(g: *mut StrataGraph, q: *mut StrataQueue) -> strata_status;
    pub fn strata_graph_finalize(
        g: *const StrataGraph,
        out: *mut *mut StrataExecGraph,
    ) -> strata_status;
    pub fn strata_graph_replay(
        q: *mut StrataQueue,
        g: *const StrataExecGraph,
        ev: *mut *mut StrataEvent,
    ) -> strata_status;
    pub fn strata_graph_free(g: *mut StrataGraph);
    pub fn strata_exec_graph_free(g: *mut StrataExecGraph);
}
