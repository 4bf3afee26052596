//! Causal grouped-query attention over the f16 KV cache (`sycl/kernels/attn.cpp`).
//!
//! For query row t at position pos[t] and head h (kv head h / (n_head / n_kv_head)), keys j with
//! lo <= j <= pos[t], lo = pos[t] - window + 1 (clamped at 0) when window > 0, else 0 — Gemma's
//! sliding window keeps keys with pos_q - pos_k < window. score = scale * q.k, softmax with max
//! subtraction, out = sum softmax * v.
//!
//! Bitwise guarantee: a (t, h) pair is one work-group whose summation order depends only on
//! pos[t], window and head_dim, so a T-row call equals T one-row calls bitwise (the speculative
//! verify window relies on it). The rows' own K/V must be in the cache (`KvStore`) first.

use super::float_args::{ensure, holds, int, prod};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};
use half::f16;

const OP: &str = "attention";

/// The attention kernel for one head_dim (a build option: -DCFG_HD), built once per context.
pub struct Attention {
    k: Kernel,
    head_dim: usize,
}

impl Attention {
    /// head_dim: a multiple of 16 (64 for SmolLM2, 256 for Gemma 3 270M).
    pub fn new(ctx: &Context, head_dim: usize) -> Result<Attention> {
        ensure(
            OP,
            head_dim % 16 == 0 && head_dim > 0 && head_dim <= 1024,
            || format!("head_dim {head_dim} must be a multiple of 16 in 16..=1024"),
        )?;
        let opt = format!("-DCFG_HD={head_dim}");
        let m = ctx.module(&kernels::ATTN, &[opt.as_str()])?;
        Ok(Attention {
            k: m.kernel("attn_f16kv")?,
            head_dim,
        })
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Attention for `t` query rows. window = 0: full causal; > 0: sliding window.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        qrows: &DeviceBuffer<f32>, // (t, n_head * head_dim)
        kc: &DeviceBuffer<f16>,    // (n_kv_head, n_ctx, head_dim)
        vc: &DeviceBuffer<f16>,    // (n_kv_head, n_ctx, head_dim)
        pos: &DeviceBuffer<i32>,   // (t)
        out: &DeviceBuffer<f32>,   // (t, n_head * head_dim)
        t: usize,
        n_head: usize,
        n_kv_head: usize,
        n_ctx: usize,
        window: usize,
        scale: f32,
    ) -> Result<()> {
        ensure(OP, n_kv_head > 0 && n_head % n_kv_head == 0, || {
            format!("n_head {n_head} is not a multiple of n_kv_head {n_kv_head}")
        })?;
        let hd = self.head_dim;
        let rows = prod(OP, &[t, n_head, hd])?;
        let cache = prod(OP, &[n_kv_head, n_ctx, hd])?;
        holds(OP, "q", qrows, rows)?;
        holds(OP, "out", out, rows)?;
        holds(OP, "k cache", kc, cache)?;
        holds(OP, "v cache", vc, cache)?;
        holds(OP, "pos", pos, t)?;
        if rows == 0 {
            return Ok(());
        }
        let groups = prod(OP, &[t, n_head])?;
        int(OP, "t * n_head * 16", prod(OP, &[groups, 16])?)?;
        q.launch(
            &self.k,
            NdRange::groups(groups, 16),
            &[
                Arg::buf(qrows),
                Arg::buf(kc),
                Arg::buf(vc),
                Arg::buf(pos),
                Arg::buf(out),
                Arg::i32(int(OP, "n_head", n_head)?),
                Arg::i32(int(OP, "n_kv_head", n_kv_head)?),
                Arg::i32(int(OP, "n_ctx", n_ctx)?),
                Arg::i32(int(OP, "window", window)?),
                Arg::f32(scale),
            ],
        )
    }
}

/// Reference in f64 over the same f16 cache values the kernel reads.
#[allow(clippy::too_many_arguments)]
pub fn reference(
    qrows: &[f32], // (t, n_head * head_dim)
    kc: &[f16],    // (n_kv_head, n_ctx, head_dim)
    vc: &[f16],    // (n_kv_head, n_ctx, head_dim)
    pos: &[i32],   // (t)
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    n_ctx: usize,
    window: usize,
    scale: f32,
) -> Vec<f64> {
    let group = n_head / n_kv_head;
    let mut out = vec![0.0f64; pos.len() * n_head * head_dim];
    for (t, &p) in pos.iter().enumerate() {
        let p = p as usize;
        let lo = if window > 0 {
            (p + 1).saturating_sub(window)
        } else {
            0
        };
        for h in 0..n_head {
            let qr = &qrows[(t * n_head + h) * head_dim..][..head_dim];
            let kvh = h / group;
            let key = |j: usize| &kc[(kvh * n_ctx + j) * head_dim..][..head_dim];
            let val = |j: usize| &vc[(kvh * n_ctx + j) * head_dim..][..head_dim];
            let scores: Vec<f64> = (lo..=p)
                .map(|j| {
                    let dot: f64 = qr
                        .iter()
                        .zip(key(j))
                        .map(|(&a, b)| a as f64 * b.to_f64())
                        .sum();
                    dot * scale as f64
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let sum: f64 = w.iter().sum();
            let o = &mut out[(t * n_head + h) * head_dim..][..head_dim];
            for (j, wj) in (lo..=p).zip(&w) {
                for (od, vd) in o.iter_mut().zip(val(j)) {
                    *od += wj / sum * vd.to_f64();
                }
            }
        }
    }
    out
}
