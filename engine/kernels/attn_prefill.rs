//! Causal grouped-query attention for the prompt path (`sycl/kernels/attn_prefill.cpp`): the
//! maths, arguments and f64 reference (`attn::reference`) of `attn`, organised for many query
//! rows: a work-group owns 16 query rows of one head (lane = row) and shares each 16-key block of
//! the f16 cache, converted once to f32 in local memory, between them. No cross-lane reductions.
//!
//! No bitwise guarantee across T (the key blocks start at the tile's lowest key, and the
//! summation order differs from `attn`'s): `AttnDispatch` keeps `attn` for t <= 8 rows (the
//! speculative verify window) and uses this kernel above.

use super::attn::{Attention, AttnCall};
use super::float_args::{ensure, int, prod};
use crate::sycl::{kernels, Arg, Context, Kernel, NdRange, Queue, Result};

const OP: &str = "attention (prefill)";

/// Query rows per work-group (the sub-group width).
pub const TILE_ROWS: usize = 16;

/// The prefill attention kernel for one head_dim (-DCFG_HD), built once per context.
pub struct AttnPrefill {
    k: Kernel,
    head_dim: usize,
}

impl AttnPrefill {
    /// head_dim: a multiple of 16 (64 for SmolLM2, 256 for Gemma 3 270M).
    pub fn new(ctx: &Context, head_dim: usize) -> Result<AttnPrefill> {
        ensure(
            OP,
            head_dim % 16 == 0 && head_dim > 0 && head_dim <= 1024,
            || format!("head_dim {head_dim} must be a multiple of 16 in 16..=1024"),
        )?;
        let opt = format!("-DCFG_HD={head_dim}");
        let m = ctx.module(&kernels::ATTN_PREFILL, &[opt.as_str()])?;
        Ok(AttnPrefill {
            k: m.kernel("attn_prefill")?,
            head_dim,
        })
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Attention for `a.t` query rows, same contract as `Attention::run`.
    pub fn run(&self, q: &Queue, a: &AttnCall) -> Result<()> {
        let hd = self.head_dim;
        let rows = a.check(OP, hd)?;
        if rows == 0 {
            return Ok(());
        }
        let (t, n_head) = (a.t, a.n_head);
        let groups = prod(OP, &[t.div_ceil(TILE_ROWS), n_head])?;
        int(OP, "groups * 16", prod(OP, &[groups, 16])?)?;
        q.launch(
            &self.k,
            NdRange::groups(groups, 16),
            &[
                Arg::buf(a.qrows),
                Arg::buf(a.kc),
                Arg::buf(a.vc),
                Arg::buf(a.pos),
                Arg::buf(a.out),
                Arg::i32(int(OP, "t", t)?),
                Arg::i32(int(OP, "n_head", n_head)?),
                Arg::i32(int(OP, "n_kv_head", a.n_kv_head)?),
                Arg::i32(int(OP, "n_ctx", a.n_ctx)?),
                Arg::i32(int(OP, "window", a.window)?),
                Arg::f32(a.scale),
            ],
        )
    }
}

/// The model's attention entry: `attn` (bitwise per row) for t <= `DECODE_MAX_T`, else prefill.
pub struct AttnDispatch {
    pub decode: Attention,
    pub prefill: AttnPrefill,
}

/// Most rows that go to the decode kernel (the speculative verify window, as mmvq's).
pub const DECODE_MAX_T: usize = 8;

impl AttnDispatch {
    pub fn new(ctx: &Context, head_dim: usize) -> Result<AttnDispatch> {
        Ok(AttnDispatch {
            decode: Attention::new(ctx, head_dim)?,
            prefill: AttnPrefill::new(ctx, head_dim)?,
        })
    }

    /// Whether `decode.run_rounded` takes this call (rows the decode kernel handles, heads a whole
    /// number of rounding blocks).
    pub fn can_round(&self, t: usize, n_head: usize, block: usize) -> bool {
        t <= DECODE_MAX_T && self.decode.can_round(t, n_head, block)
    }

    /// `Attention::run`'s contract; picks the kernel by `a.t`.
    pub fn run(&self, q: &Queue, a: &AttnCall) -> Result<()> {
        if a.t <= DECODE_MAX_T {
            self.decode.run(q, a)
        } else {
            self.prefill.run(q, a)
        }
    }
}
