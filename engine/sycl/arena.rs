//! Weights packed into large device blocks instead of one allocation per tensor.
//!
//! On the CPU device a block of 2 MiB or more is huge-page backed (the shim's `strata_malloc`
//! aligns it and asks for transparent huge pages). A model's matrices are mostly 70-600 KB each;
//! allocated one by one they sit on 4 KiB pages, where the hardware prefetcher stops at every
//! page edge and each page costs a TLB entry. Packed into 32 MiB blocks they stream from huge
//! pages. On a GPU the blocks are plain device allocations.
//!
//! The arena only grows: slices live as long as their `DeviceBuffer`s, and a block is freed when
//! its last slice is dropped. It is for data loaded once (weights), not for scratch.

use super::buffer::DeviceBuffer;
use super::context::Queue;
use super::error::Result;
use std::sync::{Arc, Mutex};

/// The block size; a tensor larger than this gets a block of its own.
pub const BLOCK_BYTES: usize = 32 << 20;
/// Every slice starts on this boundary (a cache line, and the shim's own minimum).
const ALIGN: usize = 64;

pub struct Arena {
    queue: Queue,
    /// The block being filled and its first free byte.
    open: Mutex<Option<(Arc<DeviceBuffer<u8>>, usize)>>,
}

impl Arena {
    pub fn new(queue: &Queue) -> Arena {
        Arena {
            queue: queue.clone(),
            open: Mutex::new(None),
        }
    }

    /// Uninitialised room for `n` elements of `T`.
    pub fn alloc<T: Copy>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        let bytes = n.saturating_mul(std::mem::size_of::<T>());
        if bytes > BLOCK_BYTES / 2 {
            // its own block: no half-empty 32 MiB block behind it
            return self.queue.alloc::<T>(n);
        }
        // Poisoning only means another thread panicked mid-bump; the offset it left is still
        // a valid high-water mark.
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let fits = open
            .take()
            .filter(|(b, used)| used.next_multiple_of(ALIGN) + bytes <= b.len());
        let (block, used) = match fits {
            Some(o) => open.insert(o),
            None => open.insert((Arc::new(self.queue.alloc::<u8>(BLOCK_BYTES)?), 0)),
        };
        let at = used.next_multiple_of(ALIGN);
        *used = at + bytes;
        Ok(DeviceBuffer::slice_of(block, at, n))
    }

    /// A slice holding a copy of `data` (waits for the copy).
    pub fn upload<T: Copy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let b = self.alloc::<T>(data.len())?;
        self.queue.upload_to(&b, data)?;
        Ok(b)
    }
}

/// Where data loaded once goes: a queue's own allocation per upload, or a slice of an arena.
pub trait Store {
    /// A device copy of `data` (waits for the copy).
    fn put<T: Copy>(&self, data: &[T]) -> Result<DeviceBuffer<T>>;
}

impl Store for Queue {
    fn put<T: Copy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        self.upload(data)
    }
}

impl Store for Arena {
    fn put<T: Copy>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        self.upload(data)
    }
}
