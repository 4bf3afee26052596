//! The attention prologue in one launch (`sycl/kernels/rope_kv.cpp`): RoPE on the q rows (in
//! place), RoPE on the k rows stored straight into the f16 K cache, the v rows into the V cache,
//! and optionally (Gemma 3) the per-head RMS norms of q and k before the rotation. Replaces
//! `[Norm::rms_norm x2,] Rope::run x2, KvStore::run` with bitwise the same q rows and caches
//! (shared norm.hpp / rope.hpp, same f16 rounding). The k rows are left unrotated (only the
//! cache reads the rotated k). One sub-group per head row: multi-row calls are bitwise the
//! one-row calls.

use super::float_args::{ensure, holds, int, prod};
use super::rope::{RopeMode, RopeTable};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};
use half::f16;

const OP: &str = "rope_kv";

/// Gemma's per-head norms of q and k (weights (head_dim), shared by every head).
pub struct QkNorm<'a> {
    pub q_w: &'a DeviceBuffer<f32>, // (head_dim)
    pub k_w: &'a DeviceBuffer<f32>, // (head_dim)
    pub eps: f32,
}

/// The shapes of one call.
#[derive(Debug, Clone, Copy)]
pub struct RopeKvShape {
    pub t: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub n_ctx: usize,
}

/// The fused kernels, built once per context.
pub struct RopeKv {
    norm: Kernel,
    neox: Kernel,
    norm_qk: Kernel,
    neox_qk: Kernel,
}

impl RopeKv {
    pub fn new(ctx: &Context) -> Result<RopeKv> {
        let m = ctx.module(&kernels::ROPE_KV, &[])?;
        Ok(RopeKv {
            norm: m.kernel("rope_kv_norm")?,
            neox: m.kernel("rope_kv_neox")?,
            norm_qk: m.kernel("rope_kv_norm_qknorm")?,
            neox_qk: m.kernel("rope_kv_neox_qknorm")?,
        })
    }

    /// [q, k per-head norms,] RoPE on q (in place) and k, k and v stored at pos[0..t].
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        queue: &Queue,
        mode: RopeMode,
        qk_norm: Option<&QkNorm>,
        q: &DeviceBuffer<f32>,   // (t, n_head * head_dim), rotated in place
        k: &DeviceBuffer<f32>,   // (t, n_kv_head * head_dim), read only
        v: &DeviceBuffer<f32>,   // (t, n_kv_head * head_dim)
        kc: &DeviceBuffer<f16>,  // (n_kv_head, n_ctx, head_dim)
        vc: &DeviceBuffer<f16>,  // (n_kv_head, n_ctx, head_dim)
        pos: &DeviceBuffer<i32>, // (t)
        table: &RopeTable,
        s: RopeKvShape,
    ) -> Result<()> {
        let RopeKvShape {
            t,
            n_head,
            n_kv_head,
            head_dim,
            n_ctx,
        } = s;
        ensure(OP, head_dim % 16 == 0 && head_dim > 0, || {
            format!("head_dim {head_dim} must be a positive multiple of 16")
        })?;
        ensure(OP, table.n_rot() <= head_dim, || {
            format!("n_rot {} exceeds head_dim {head_dim}", table.n_rot())
        })?;
        holds(OP, "q", q, prod(OP, &[t, n_head, head_dim])?)?;
        let kv_rows = prod(OP, &[t, n_kv_head, head_dim])?;
        holds(OP, "k", k, kv_rows)?;
        holds(OP, "v", v, kv_rows)?;
        let cache = prod(OP, &[n_kv_head, n_ctx, head_dim])?;
        holds(OP, "k cache", kc, cache)?;
        holds(OP, "v cache", vc, cache)?;
        holds(OP, "pos", pos, t)?;
        if let Some(nq) = qk_norm {
            holds(OP, "q norm weight", nq.q_w, head_dim)?;
            holds(OP, "k norm weight", nq.k_w, head_dim)?;
        }
        let groups = prod(OP, &[t, n_head + n_kv_head])?;
        if groups == 0 {
            return Ok(());
        }
        int(OP, "rows", prod(OP, &[groups, 16])?)?;
        int(
            OP,
            "t * n_head * head_dim",
            prod(OP, &[t, n_head, head_dim])?,
        )?;
        let kern = match (mode, qk_norm.is_some()) {
            (RopeMode::Norm, false) => &self.norm,
            (RopeMode::Neox, false) => &self.neox,
            (RopeMode::Norm, true) => &self.norm_qk,
            (RopeMode::Neox, true) => &self.neox_qk,
        };
        // without norms the weight arguments are never read: any buffer will do
        let (q_w, k_w, eps) = match qk_norm {
            Some(nq) => (nq.q_w, nq.k_w, nq.eps),
            None => (table.freq(), table.freq(), 0.0),
        };
        queue.launch(
            kern,
            NdRange::groups(groups, 16),
            &[
                Arg::addr(q),
                Arg::addr(k),
                Arg::addr(v),
                Arg::addr(kc),
                Arg::addr(vc),
                Arg::addr(pos),
                Arg::addr(table.freq()),
                Arg::addr(q_w),
                Arg::addr(k_w),
                Arg::i32(int(OP, "t", t)?),
                Arg::i32(int(OP, "n_head", n_head)?),
                Arg::i32(int(OP, "n_kv_head", n_kv_head)?),
                Arg::i32(int(OP, "head_dim", head_dim)?),
                Arg::i32(int(OP, "n_rot", table.n_rot())?),
                Arg::i32(int(OP, "n_ctx", n_ctx)?),
                Arg::f32(eps),
            ],
        )
    }
}

/// Reference in f64: (q rows after [norm and] RoPE, the K and V cache contents after the store)
/// for host caches given as `kc`, `vc` (n_kv_head, n_ctx, head_dim) in f64. Norm weights per
/// head as (q_w, k_w, eps); freq as the f32 table the kernel gets.
#[allow(clippy::too_many_arguments)]
pub fn reference(
    mode: RopeMode,
    qk_norm: Option<(&[f32], &[f32], f32)>,
    q: &[f32],    // (t, n_head * head_dim)
    k: &[f32],    // (t, n_kv_head * head_dim)
    v: &[f32],    // (t, n_kv_head * head_dim)
    pos: &[i32],  // (t)
    freq: &[f32], // (n_rot / 2)
    s: RopeKvShape,
    kc: &mut [f64], // (n_kv_head, n_ctx, head_dim)
    vc: &mut [f64], // (n_kv_head, n_ctx, head_dim)
) -> Vec<f64> {
    let hd = s.head_dim;
    let normed = |x: &[f32], w: Option<&[f32]>, eps: f32| -> Vec<f64> {
        match w {
            Some(w) => super::norm::reference(x, w, hd, eps),
            None => x.iter().map(|&v| v as f64).collect(),
        }
    };
    let (qw, kw, eps) = match qk_norm {
        Some((a, b, e)) => (Some(a), Some(b), e),
        None => (None, None, 0.0),
    };
    let qn = normed(q, qw, eps);
    let kn = normed(k, kw, eps);
    let qr = rope_f64(mode, &qn, pos, freq, s.n_head, hd);
    let kr = rope_f64(mode, &kn, pos, freq, s.n_kv_head, hd);
    for (t, &p) in pos.iter().enumerate() {
        if p < 0 || p as usize >= s.n_ctx {
            continue;
        }
        for h in 0..s.n_kv_head {
            let src = (t * s.n_kv_head + h) * hd;
            let dst = (h * s.n_ctx + p as usize) * hd;
            kc[dst..dst + hd].copy_from_slice(&kr[src..src + hd]);
            for d in 0..hd {
                vc[dst + d] = v[src + d] as f64;
            }
        }
    }
    qr
}

/// RoPE of f64 rows (t, n_head * head_dim) (the rotation of `rope::reference`, on f64 input).
fn rope_f64(
    mode: RopeMode,
    x: &[f64],
    pos: &[i32],
    freq: &[f32],
    n_head: usize,
    head_dim: usize,
) -> Vec<f64> {
    let half = freq.len();
    let mut out = x.to_vec();
    for (t, &p) in pos.iter().enumerate() {
        for h in 0..n_head {
            let r = &mut out[(t * n_head + h) * head_dim..(t * n_head + h + 1) * head_dim];
            for (i, &f) in freq.iter().enumerate() {
                let (a, b) = match mode {
                    RopeMode::Norm => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + half),
                };
                let (sn, c) = (p as f64 * f as f64).sin_cos();
                let (x0, x1) = (r[a], r[b]);
                r[a] = x0 * c - x1 * sn;
                r[b] = x0 * sn + x1 * c;
            }
        }
    }
    out
}
