//! Causal grouped-query attention over the f16 KV cache (`sycl/kernels/attn.cpp`).
//!
//! For query row t at position pos[t] and head h (kv head h / (n_head / n_kv_head)), keys j with
//! lo <= j <= pos[t], lo = pos[t] - window + 1 (clamped at 0) when window > 0, else 0 — Gemma's
//! sliding window keeps keys with pos_q - pos_k < window. score = scale * q.k, softmax with max
//! subtraction, out = sum softmax * v.
//!
//! Split-K ("flash decoding"): the keys are cut into fixed chunks of `CHUNK` absolute positions;
//! `attn_part` writes a (max, sum, unnormalised acc) partial per (row, head, chunk) into a scratch
//! buffer owned by this struct (one per queue), `attn_combine` folds a row's chunks in chunk order.
//! A work-group handles one kv head and a strided set of chunks for every row and every query head
//! of the kv head's group, so K/V are read once per call even for T rows or grouped heads.
//!
//! Bitwise guarantee: the chunk boundaries and every summation order depend only on pos[t],
//! window and head_dim, so a T-row call equals T one-row calls bitwise (the speculative verify
//! window relies on it). The rows' own K/V must be in the cache (`KvStore`) first.

use super::float_args::{ensure, holds, int, prod};
use super::xstage::{stage_check, XStage};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};
use half::f16;
use std::sync::{Arc, Mutex, MutexGuard};

const OP: &str = "attention";

/// One attention call's operands and shape: what `Attention::run`, `run_rounded`,
/// `AttnPrefill::run` and `AttnDispatch::run` take. window = 0: full causal; > 0: sliding window.
#[derive(Clone, Copy)]
pub struct AttnCall<'a> {
    pub qrows: &'a DeviceBuffer<f32>, // (t, n_head * head_dim)
    pub kc: &'a DeviceBuffer<f16>,    // (n_kv_head, n_ctx, head_dim)
    pub vc: &'a DeviceBuffer<f16>,    // (n_kv_head, n_ctx, head_dim)
    pub pos: &'a DeviceBuffer<i32>,   // (t)
    pub out: &'a DeviceBuffer<f32>,   // (t, n_head * head_dim)
    pub t: usize,
    pub n_head: usize,
    pub n_kv_head: usize,
    pub n_ctx: usize,
    pub window: usize,
    pub scale: f32,
}

impl AttnCall<'_> {
    /// The argument checks both attention kernels share; returns the element count of `qrows`.
    pub(super) fn check(&self, op: &'static str, hd: usize) -> Result<usize> {
        let (t, n_head, n_kv_head, n_ctx) = (self.t, self.n_head, self.n_kv_head, self.n_ctx);
        ensure(op, n_kv_head > 0 && n_head % n_kv_head == 0, || {
            format!("n_head {n_head} is not a multiple of n_kv_head {n_kv_head}")
        })?;
        let rows = prod(op, &[t, n_head, hd])?;
        let cache = prod(op, &[n_kv_head, n_ctx, hd])?;
        holds(op, "q", self.qrows, rows)?;
        holds(op, "out", self.out, rows)?;
        holds(op, "k cache", self.kc, cache)?;
        holds(op, "v cache", self.vc, cache)?;
        holds(op, "pos", self.pos, t)?;
        Ok(rows)
    }
}

/// Keys per chunk (-DCFG_C). Fixed: part of the bitwise contract between T-row and one-row calls.
pub const CHUNK: usize = 128;

/// The attention kernels for one head_dim (a build option: -DCFG_HD), built once per context.
pub struct Attention {
    part: Kernel,
    combine: Kernel,
    head_dim: usize,
    /// work-groups wanted per call (a few per compute unit), shared out among the kv heads
    target_groups: usize,
    /// partial-record scratch, one per queue that ran this
    scratch: Mutex<Vec<PerQueue>>,
}

struct PerQueue {
    part: DeviceBuffer<f32>, // (T, n_head, n_chunks, head_dim + 16)
}

impl Attention {
    /// head_dim: a multiple of 16 (64 for SmolLM2, 256 for Gemma 3 270M).
    pub fn new(ctx: &Context, head_dim: usize) -> Result<Attention> {
        ensure(
            OP,
            head_dim % 16 == 0 && head_dim > 0 && head_dim <= 1024,
            || format!("head_dim {head_dim} must be a multiple of 16 in 16..=1024"),
        )?;
        let opts = [format!("-DCFG_HD={head_dim}"), format!("-DCFG_C={CHUNK}")];
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let m = ctx.module(&kernels::ATTN, &opts)?;
        let cus = match ctx.devices().first() {
            Some(d) => d.info()?.compute_units.max(1) as usize,
            None => 1,
        };
        Ok(Attention {
            part: m.kernel("attn_part")?,
            combine: m.kernel("attn_combine")?,
            head_dim,
            target_groups: 4 * cus,
            scratch: Mutex::new(Vec::new()),
        })
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Allocates `q`'s partial-record scratch for calls of up to `t` rows now. A recorded graph
    /// captures the scratch pointer, so a later, wider call must not reallocate it.
    pub fn reserve(&self, q: &Queue, t: usize, n_head: usize, n_ctx: usize) -> Result<()> {
        let n_chunks = n_ctx.div_ceil(CHUNK);
        let need = prod(OP, &[t, n_head, n_chunks, self.head_dim + 16])?;
        self.scratch_for(q, need).map(|_| ())
    }

    /// `q`'s scratch (index into the locked list), grown to at least `need` floats.
    fn scratch_for(
        &self,
        q: &Queue,
        need: usize,
    ) -> Result<(MutexGuard<'_, Vec<PerQueue>>, usize)> {
        // poisoned only if a launch panicked; the Vec itself is still consistent
        let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let i = match scratch
            .iter()
            .position(|b| Arc::ptr_eq(&b.part.queue().0, &q.0))
        {
            Some(i) => i,
            None => {
                scratch.push(PerQueue {
                    part: q.alloc::<f32>(need)?,
                });
                scratch.len() - 1
            }
        };
        if scratch[i].part.len() < need {
            // the old buffer's drop waits for the queue, so no queued kernel still uses it
            scratch[i].part = q.alloc::<f32>(need)?;
        }
        Ok((scratch, i))
    }

    /// Attention for `a.t` query rows.
    pub fn run(&self, q: &Queue, a: &AttnCall) -> Result<()> {
        self.launch(q, a, 0, None)
    }

    /// Whether `run_rounded` can round this call's output through blocks of `block` (32 or 256):
    /// heads a whole number of blocks.
    pub fn can_round(&self, t: usize, n_head: usize, block: usize) -> bool {
        let e = self.head_dim / 16;
        let fits = match block {
            32 => e % 2 == 0,
            256 => e % 16 == 0,
            _ => false,
        };
        fits && t * n_head > 0
    }

    /// `run`, with the output rounded through 8-bit blocks of `block` exactly as `ActQ` would
    /// round it afterwards (the same bits), in the combine launch. Refuses (an argument error)
    /// when `can_round` is false. `st` (blocks of 32): the output also staged for the output
    /// projection (xstage.rs).
    pub fn run_rounded(
        &self,
        q: &Queue,
        a: &AttnCall, // a.out: (t, n_head * head_dim) rounded
        block: usize,
        st: Option<XStage>, // (t * n_head * head_dim) elements staged
    ) -> Result<()> {
        let (t, n_head) = (a.t, a.n_head);
        stage_check(OP, st, block, t * n_head * self.head_dim)?;
        ensure(OP, self.can_round(t, n_head, block), || {
            format!(
                "rounding blocks of {block} in the attention output need head_dim {} a \
                 multiple of them (t * n_head = {})",
                self.head_dim,
                t * n_head
            )
        })?;
        self.launch(q, a, block, st)
    }

    fn launch(
        &self,
        q: &Queue,
        a: &AttnCall,
        round_block: usize,
        st: Option<XStage>,
    ) -> Result<()> {
        let AttnCall {
            qrows,
            kc,
            vc,
            pos,
            out,
            t,
            n_head,
            n_kv_head,
            n_ctx,
            window,
            scale,
        } = *a;
        let hd = self.head_dim;
        let rows = a.check(OP, hd)?;
        if rows == 0 || n_ctx == 0 {
            return Ok(());
        }
        let n_chunks = n_ctx.div_ceil(CHUNK);
        let slices = self.target_groups.div_ceil(n_kv_head).clamp(1, n_chunks);
        let groups = prod(OP, &[n_kv_head, slices])?;
        int(OP, "t * n_head * 16", prod(OP, &[t, n_head, 16])?)?;
        let need = prod(OP, &[t, n_head, n_chunks, hd + 16])?;
        int(OP, "partial records", need)?;

        let (scratch, i) = self.scratch_for(q, need)?;
        let part = &scratch[i].part;
        q.launch(
            &self.part,
            NdRange::groups(groups, 16),
            &[
                // addresses, not pointer arguments: sycl/kernels/addr.hpp
                Arg::addr(qrows),
                Arg::addr(kc),
                Arg::addr(vc),
                Arg::addr(pos),
                Arg::addr(part),
                Arg::i32(int(OP, "t", t)?),
                Arg::i32(int(OP, "n_head", n_head)?),
                Arg::i32(int(OP, "n_kv_head", n_kv_head)?),
                Arg::i32(int(OP, "n_ctx", n_ctx)?),
                Arg::i32(int(OP, "window", window)?),
                Arg::f32(scale),
                Arg::i32(int(OP, "slices", slices)?),
            ],
        )?;
        let [st_arg, rec_arg] = XStage::args(st);
        q.launch(
            &self.combine,
            NdRange::groups(t * n_head, 16),
            &[
                Arg::addr(part),
                Arg::addr(pos),
                Arg::addr(out),
                st_arg,
                rec_arg,
                Arg::i32(int(OP, "n_head", n_head)?),
                Arg::i32(int(OP, "n_ctx", n_ctx)?),
                Arg::i32(int(OP, "window", window)?),
                Arg::i32(int(OP, "round block", round_block)?),
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
