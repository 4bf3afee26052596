//! KV cache write (`sycl/kernels/kv.cpp`): K and V rows (T, n_kv_head * head_dim) f32 go to the
//! f16 caches (n_kv_head, n_ctx, head_dim) at per-row positions. f32 -> f16 rounds to nearest
//! even, bitwise the same as `half::f16::from_f32`. Rows whose position is outside [0, n_ctx)
//! are skipped by the kernel; the launcher's caller keeps positions in range.

use super::float_args::{ensure, holds, int, prod};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};
use half::f16;

const OP: &str = "kv_store";

/// The KV-store kernel, built once per context.
pub struct KvStore {
    k: Kernel,
}

impl KvStore {
    pub fn new(ctx: &Context) -> Result<KvStore> {
        let m = ctx.module(&kernels::KV, &[])?;
        Ok(KvStore {
            k: m.kernel("kv_store")?,
        })
    }

    /// Stores `t` K and V rows at positions pos[0..t]. head_dim must be a multiple of 16.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        k: &DeviceBuffer<f32>,   // (t, n_kv_head * head_dim)
        v: &DeviceBuffer<f32>,   // (t, n_kv_head * head_dim)
        kc: &DeviceBuffer<f16>,  // (n_kv_head, n_ctx, head_dim)
        vc: &DeviceBuffer<f16>,  // (n_kv_head, n_ctx, head_dim)
        pos: &DeviceBuffer<i32>, // (t)
        t: usize,
        n_kv_head: usize,
        head_dim: usize,
        n_ctx: usize,
    ) -> Result<()> {
        ensure(OP, head_dim % 16 == 0 && head_dim > 0, || {
            format!("head_dim {head_dim} must be a positive multiple of 16")
        })?;
        let rows = prod(OP, &[t, n_kv_head, head_dim])?;
        let cache = prod(OP, &[n_kv_head, n_ctx, head_dim])?;
        holds(OP, "k", k, rows)?;
        holds(OP, "v", v, rows)?;
        holds(OP, "k cache", kc, cache)?;
        holds(OP, "v cache", vc, cache)?;
        holds(OP, "pos", pos, t)?;
        if rows == 0 {
            return Ok(());
        }
        int(OP, "t * n_kv_head * head_dim", rows)?;
        q.launch(
            &self.k,
            NdRange::d1(rows, 16),
            &[
                Arg::buf(k),
                Arg::buf(v),
                Arg::buf(kc),
                Arg::buf(vc),
                Arg::buf(pos),
                Arg::i32(int(OP, "n_kv_head", n_kv_head)?),
                Arg::i32(int(OP, "head_dim", head_dim)?),
                Arg::i32(int(OP, "n_ctx", n_ctx)?),
            ],
        )
    }
}

/// Reference: writes rows (t, n_kv_head * head_dim) into a host cache (n_kv_head, n_ctx,
/// head_dim), skipping positions outside [0, n_ctx) like the kernel.
pub fn reference(
    rows: &[f32],      // (t, n_kv_head * head_dim)
    pos: &[i32],       // (t)
    cache: &mut [f16], // (n_kv_head, n_ctx, head_dim)
    n_kv_head: usize,
    head_dim: usize,
    n_ctx: usize,
) {
    for (t, &p) in pos.iter().enumerate() {
        if p < 0 || p as usize >= n_ctx {
            continue;
        }
        for h in 0..n_kv_head {
            let src = &rows[(t * n_kv_head + h) * head_dim..][..head_dim];
            let dst = &mut cache[(h * n_ctx + p as usize) * head_dim..][..head_dim];
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f16::from_f32(s);
            }
        }
    }
}
