//! The Rust side of the SYCL shim (`sycl/shim/`): devices, contexts, in-order queues, USM buffers,
//! kernels compiled at run time from `sycl/kernels/`, launches, events and graphs.
//!
//! ```no_run
//! use strata::sycl::{self, Arg, Context, NdRange};
//! # fn main() -> Result<(), sycl::SyclError> {
//! let dev = sycl::cpu_device()?;
//! let ctx = Context::new(&[dev.clone()])?;
//! let q = ctx.queue(&dev)?;
//! let module = ctx.module(&sycl::kernels::REDUCE, &["-DCFG_WG=256"])?;
//! let k = module.kernel("reduce_sg_sum")?;
//! let x = q.upload(&[1.0f32; 4096])?;      // (n,)
//! let partial = q.alloc::<f32>(16)?;       // (groups,)
//! q.launch(&k, NdRange::groups(16, 256), &[Arg::buf(&x), Arg::buf(&partial), Arg::i32(4096)])?;
//! let host = q.to_vec(&partial)?;
//! # Ok(()) }
//! ```
//! See docs/sycl.md.

pub mod affinity;
pub mod arena;
pub mod binary_cache;
pub mod buffer;
pub mod build_activity;
pub mod card;
pub mod context;
pub mod device;
pub mod error;
pub mod ffi;
pub mod graph;
pub mod kernels;
pub mod module;
pub mod reduce_ref;
pub mod runtime;
pub mod trace;

pub use arena::{Arena, Store};
pub use binary_cache::BinaryCache;
pub use buffer::{copy_across, copy_across_n, DeviceBuffer, DevicePod, HostBuffer, UsmKind};
pub use card::Card;
pub use context::{Context, Event, Profile, Queue};
pub use device::{
    cpu_device, default_device, devices, platforms, Device, DeviceInfo, DeviceType, Platform,
    PlatformInfo,
};
pub use error::{Result, Status, SyclError};
pub use graph::Graph;
pub use kernels::KernelSource;
pub use module::{Arg, BuildReport, CacheOutcome, Kernel, KernelInfo, Module, NdRange};
pub use trace::KernelTime;
