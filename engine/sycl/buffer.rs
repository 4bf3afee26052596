//! USM buffers owned by Rust, and the transfers between host slices and them.
//!
//! Transfers from/to Rust slices are synchronous (they wait), because the slice is only
//! borrowed for the call. Kernels and device-to-device copies are asynchronous on the in-order
//! queue; `download` waits, so it sees every earlier command's result.

use super::context::{with_event, Event, Queue};
use super::error::{check, Result, SyclError};
use super::ffi;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;

/// Plain data that may be viewed as bytes and made from any bytes: no padding, no invalid bit
/// patterns (no bool, no enums, no references).
///
/// # Safety
/// Implement only for `#[repr(C)]` types whose every byte is initialised (no padding) and for
/// which every bit pattern is a valid value. Kernel-argument structs must be written this way
/// anyway, since the kernel source repeats their layout.
pub unsafe trait DevicePod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: primitive numbers have no padding and no invalid bit patterns.
        unsafe impl DevicePod for $t {}
    )*};
}
pod!(
    u8,
    i8,
    u16,
    i16,
    u32,
    i32,
    u64,
    i64,
    f32,
    f64,
    half::f16,
    half::bf16
);
// SAFETY: arrays of pods have no padding between elements.
unsafe impl<T: DevicePod, const N: usize> DevicePod for [T; N] {}

/// The bytes of a pod value.
pub fn pod_bytes<T: DevicePod>(v: &T) -> &[u8] {
    // SAFETY: DevicePod guarantees every byte of T is initialised.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsmKind {
    /// Device memory: fastest for kernels, host cannot touch it.
    Device,
    /// Pinned host memory: kernels can read it (slowly); the staging area for cross-device copies.
    Host,
    /// Migrating memory visible to both.
    Shared,
}

/// `len` elements of `T` in USM memory of one queue's device. Freed on drop (after waiting for
/// that queue, so no command still uses it).
pub struct DeviceBuffer<T: Copy> {
    ptr: *mut c_void,
    len: usize,
    kind: UsmKind,
    queue: Queue,
    /// Set for a slice of an arena block (arena.rs): the block is freed when its last slice
    /// goes, not this pointer.
    block: Option<std::sync::Arc<DeviceBuffer<u8>>>,
    _t: PhantomData<T>,
}

/// Host-visible USM (`malloc_host`) of `len` elements of `T`, readable as a slice.
pub type HostBuffer<T> = DeviceBuffer<T>;

// SAFETY: the buffer is a USM pointer plus a thread-safe queue; access goes through the queue.
unsafe impl<T: Copy + Send> Send for DeviceBuffer<T> {}
unsafe impl<T: Copy + Sync> Sync for DeviceBuffer<T> {}

impl<T: Copy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.block.is_some() {
            return; // a slice: the block's own drop waits and frees
        }
        // A command may still read this memory; an error here has nowhere to go.
        let _ = self.queue.wait();
        // SAFETY: ptr came from strata_malloc in this context and is freed once.
        unsafe { ffi::strata_free(self.queue.context().raw(), self.ptr) }
    }
}

impl<T: Copy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>[{}; {:?}]",
            std::any::type_name::<T>(),
            self.len,
            self.kind
        )
    }
}

impl<T: Copy> DeviceBuffer<T> {
    /// `n` elements of `T` at byte `offset` of `block` (aligned for `T` and in bounds: the
    /// arena checks), keeping the block alive.
    pub(crate) fn slice_of(
        block: &std::sync::Arc<DeviceBuffer<u8>>,
        offset: usize,
        n: usize,
    ) -> DeviceBuffer<T> {
        debug_assert!(offset + n * std::mem::size_of::<T>() <= block.len);
        DeviceBuffer {
            // SAFETY (of the add): offset is within the block's allocation.
            ptr: unsafe { (block.ptr as *mut u8).add(offset) } as *mut c_void,
            len: n,
            kind: block.kind,
            queue: block.queue.clone(),
            block: Some(block.clone()),
            _t: PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    pub fn kind(&self) -> UsmKind {
        self.kind
    }
    /// The queue that allocated it (its device is where the memory lives).
    pub fn queue(&self) -> &Queue {
        &self.queue
    }
    /// The raw USM pointer, e.g. for a kernel argument at an offset.
    pub fn as_ptr(&self) -> *mut T {
        self.ptr as *mut T
    }

    /// Host view of host/shared memory. The caller must not race a kernel writing it: wait first.
    pub fn as_slice(&self) -> Result<&[T]> {
        if self.kind == UsmKind::Device {
            return Err(SyclError::invalid(
                "host view",
                "device memory is not host-accessible: use Queue::download",
            ));
        }
        // SAFETY: host/shared USM is host-addressable, len elements were allocated.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.len) })
    }

    /// Mutable host view of host/shared memory (see `as_slice`).
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        if self.kind == UsmKind::Device {
            return Err(SyclError::invalid(
                "host view",
                "device memory is not host-accessible: use Queue::upload_to",
            ));
        }
        // SAFETY: as above, and &mut self gives exclusive access on the host side.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, self.len) })
    }
}

fn check_fits(op: &'static str, want: usize, have: usize) -> Result<()> {
    if want > have {
        return Err(SyclError::invalid(
            op,
            format!("{want} elements do not fit a buffer of {have}"),
        ));
    }
    Ok(())
}

fn check_len(op: &'static str, have: usize, want: usize) -> Result<()> {
    if have != want {
        return Err(SyclError::invalid(
            op,
            format!("length mismatch: buffer holds {want} elements, slice has {have}"),
        ));
    }
    Ok(())
}

impl Queue {
    /// Uninitialised device memory for `n` elements.
    pub fn alloc<T: Copy>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        self.alloc_kind(n, UsmKind::Device)
    }

    /// Host USM for `n` elements (zero-filled, so it is safe to view at once).
    pub fn alloc_host<T: DevicePod>(&self, n: usize) -> Result<HostBuffer<T>> {
        let b = self.alloc_kind::<T>(n, UsmKind::Host)?;
        // SAFETY: host memory of b.bytes() bytes, just allocated.
        unsafe { ptr::write_bytes(b.ptr as *mut u8, 0, b.bytes()) };
        Ok(b)
    }

    pub fn alloc_kind<T: Copy>(&self, n: usize, kind: UsmKind) -> Result<DeviceBuffer<T>> {
        let bytes = n.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            SyclError::invalid("alloc", format!("{n} elements overflow the address space"))
        })?;
        let k = match kind {
            UsmKind::Device => ffi::STRATA_USM_DEVICE,
            UsmKind::Host => ffi::STRATA_USM_HOST,
            UsmKind::Shared => ffi::STRATA_USM_SHARED,
        };
        let mut p = ptr::null_mut();
        let align = std::mem::align_of::<T>().max(64);
        // SAFETY: live queue, valid out-pointer.
        check("alloc", unsafe {
            ffi::strata_malloc(self.raw(), k, bytes, align, &mut p)
        })?;
        Ok(DeviceBuffer {
            ptr: p,
            len: n,
            kind,
            queue: self.clone(),
            block: None,
            _t: PhantomData,
        })
    }

    /// A new device buffer holding a copy of `data`.
    pub fn upload<T: Copy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let b = self.alloc::<T>(data.len())?;
        self.upload_to(&b, data)?;
        Ok(b)
    }

    /// Copies `data` into `dst` (same length) and waits.
    pub fn upload_to<T: Copy>(&self, dst: &DeviceBuffer<T>, data: &[T]) -> Result<()> {
        check_len("upload", data.len(), dst.len)?;
        self.upload_prefix(dst, data)
    }

    /// Copies `src` (same length) into `out`, after every earlier command on this queue.
    pub fn download<T: DevicePod>(&self, src: &DeviceBuffer<T>, out: &mut [T]) -> Result<()> {
        check_len("download", out.len(), src.len)?;
        self.memcpy_wait(
            "download",
            out.as_mut_ptr() as *mut c_void,
            src.ptr,
            src.bytes(),
        )
    }

    /// Copies `data` into the first `data.len()` elements of `dst` and waits (a decode step
    /// uploads its one token, not the whole chunk-sized buffer).
    pub fn upload_prefix<T: Copy>(&self, dst: &DeviceBuffer<T>, data: &[T]) -> Result<()> {
        check_fits("upload", data.len(), dst.len)?;
        self.memcpy_wait(
            "upload",
            dst.ptr,
            data.as_ptr() as *const c_void,
            std::mem::size_of_val(data),
        )
    }

    /// The first `n` elements of `src` in a new Vec, after every earlier command on this queue.
    pub fn to_vec_prefix<T: DevicePod>(&self, src: &DeviceBuffer<T>, n: usize) -> Result<Vec<T>> {
        check_fits("download", n, src.len)?;
        let mut v = Vec::with_capacity(n);
        // SAFETY: DevicePod: any bytes are a valid T; the copy writes all n elements before
        // set_len is observable (a failed download drops v with len 0).
        unsafe {
            self.memcpy_wait(
                "download",
                v.as_mut_ptr() as *mut c_void,
                src.ptr,
                n * std::mem::size_of::<T>(),
            )?;
            v.set_len(n);
        }
        Ok(v)
    }

    /// `download` into a new Vec.
    pub fn to_vec<T: DevicePod>(&self, src: &DeviceBuffer<T>) -> Result<Vec<T>> {
        self.to_vec_prefix(src, src.len)
    }

    fn memcpy_wait(
        &self,
        op: &'static str,
        dst: *mut c_void,
        src: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        let ev = with_event(op, |e| unsafe {
            // SAFETY: both ranges hold `bytes` bytes (checked by the callers).
            ffi::strata_memcpy(self.raw(), dst, src, bytes, e)
        })?;
        ev.wait()
    }

    /// Asynchronous device-to-device copy on this queue; both buffers must live on this queue's
    /// device (use `copy_across` between devices: a direct copy there hangs the runtime).
    pub fn copy<T: Copy>(&self, src: &DeviceBuffer<T>, dst: &DeviceBuffer<T>) -> Result<Event> {
        check_len("copy", src.len, dst.len)?;
        for b in [src.queue.device(), dst.queue.device()] {
            if b != self.device() {
                return Err(SyclError::invalid(
                    "copy",
                    "buffer lives on another device: use sycl::copy_across",
                ));
            }
        }
        with_event("copy", |e| unsafe {
            // SAFETY: same length, both live.
            ffi::strata_memcpy(self.raw(), dst.ptr, src.ptr, src.bytes(), e)
        })
    }

    /// Copies `n` elements from `src[src_at..]` to `dst[dst_at..]` on this device (a block of rows
    /// between activation buffers). Asynchronous; the ranges must lie inside both buffers.
    pub fn copy_range<T: Copy>(
        &self,
        src: &DeviceBuffer<T>,
        src_at: usize,
        dst: &DeviceBuffer<T>,
        dst_at: usize,
        n: usize,
    ) -> Result<Event> {
        if src_at + n > src.len || dst_at + n > dst.len {
            return Err(SyclError::invalid(
                "copy_range",
                format!(
                    "{n} elements from {src_at} of {} into {dst_at} of {}",
                    src.len, dst.len
                ),
            ));
        }
        for b in [src.queue.device(), dst.queue.device()] {
            if b != self.device() {
                return Err(SyclError::invalid(
                    "copy_range",
                    "buffer lives on another device: use sycl::copy_across",
                ));
            }
        }
        let size = std::mem::size_of::<T>();
        with_event("copy_range", |e| unsafe {
            // SAFETY: both ranges were checked to lie inside live buffers of T.
            ffi::strata_memcpy(
                self.raw(),
                (dst.ptr as *mut u8).add(dst_at * size) as *mut c_void,
                (src.ptr as *const u8).add(src_at * size) as *const c_void,
                n * size,
                e,
            )
        })
    }

    /// Fills every element with `value` (element sizes 1, 2, 4 or 8 bytes). Asynchronous.
    pub fn fill<T: DevicePod>(&self, dst: &DeviceBuffer<T>, value: T) -> Result<Event> {
        let size = std::mem::size_of::<T>();
        if ![1, 2, 4, 8].contains(&size) {
            return Err(SyclError::invalid(
                "fill",
                format!("element size {size} is not 1, 2, 4 or 8 bytes"),
            ));
        }
        with_event("fill", |e| unsafe {
            // SAFETY: value lives for the call (the runtime copies the pattern at submit).
            ffi::strata_fill(
                self.raw(),
                dst.ptr,
                &value as *const T as *const c_void,
                size,
                dst.len,
                e,
            )
        })
    }
}

/// Copies `src` (on its queue's device) into `dst` (on another device's queue) through pinned host
/// memory, synchronously. `staging`, if given, is reused (any length, in bytes >= 1 element).
pub fn copy_across<T: Copy>(
    src: &DeviceBuffer<T>,
    dst: &DeviceBuffer<T>,
    staging: Option<&HostBuffer<u8>>,
) -> Result<()> {
    check_len("copy_across", src.len, dst.len)?;
    copy_across_n(src, dst, src.len, staging)
}

/// `copy_across` of the first `n` elements only (e.g. the rows of a partly filled activation
/// buffer); both buffers must hold at least `n`.
pub fn copy_across_n<T: Copy>(
    src: &DeviceBuffer<T>,
    dst: &DeviceBuffer<T>,
    n: usize,
    staging: Option<&HostBuffer<u8>>,
) -> Result<()> {
    if n > src.len || n > dst.len {
        return Err(SyclError::invalid(
            "copy_across",
            format!(
                "{n} elements asked, source holds {}, destination {}",
                src.len, dst.len
            ),
        ));
    }
    let (sp, sb) = match staging {
        Some(s) if s.kind == UsmKind::Host && s.len > 0 => (s.ptr, s.len),
        Some(_) => {
            return Err(SyclError::invalid(
                "copy_across",
                "staging must be non-empty host USM (Queue::alloc_host)",
            ))
        }
        None => (ptr::null_mut(), 0),
    };
    // SAFETY: both buffers are live with src.bytes() bytes; staging (if any) has sb bytes.
    check("copy_across", unsafe {
        ffi::strata_copy_across(
            src.queue.raw(),
            src.ptr,
            dst.queue.raw(),
            dst.ptr,
            n * std::mem::size_of::<T>(),
            sp,
            sb,
        )
    })
}
