//! Rotary position embedding (`sycl/kernels/rope.cpp`), in place on Q or K rows.
//!
//! Pair i < n_rot/2 of every head rotates by pos * freq[i], freq[i] = base^(-2i / n_rot):
//! `RopeMode::Norm` (llama, SmolLM2) pairs elements (2i, 2i+1); `RopeMode::Neox` (Gemma 3) pairs
//! (i, i + n_rot/2). Elements past n_rot pass through.
//!
//! The frequency table is made on the host in f64 and rounded once to f32 (`rope_freqs`): that
//! f32 table is the definition both the kernel and the reference use (the device `pow` is only
//! 16-ulp accurate). The kernel keeps the angle pos * freq exact as hi + lo with an fma, so large
//! positions (5000+) lose no accuracy to the f32 product. Element-wise: multi-row calls are
//! bitwise the one-row calls.

use super::float_args::{ensure, holds, int, prod, round_up};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "rope";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeMode {
    /// llama: pairs (2i, 2i+1).
    Norm,
    /// GPT-NeoX / Gemma: pairs (i, i + n_rot/2).
    Neox,
}

/// freq[i] = base^(-2i / n_rot) for i < n_rot/2, computed in f64 and rounded to f32.
pub fn rope_freqs(base: f64, n_rot: usize) -> Vec<f32> {
    (0..n_rot / 2)
        .map(|i| base.powf(-2.0 * i as f64 / n_rot as f64) as f32)
        .collect()
}

/// The frequency table of one (base, n_rot) on the device; Gemma 3 needs two (1e6 and 1e4).
pub struct RopeTable {
    freq: DeviceBuffer<f32>, // (n_rot / 2)
    base: f64,
    n_rot: usize,
}

impl RopeTable {
    pub fn new(q: &Queue, base: f64, n_rot: usize) -> Result<RopeTable> {
        ensure(OP, n_rot >= 2 && n_rot % 2 == 0, || {
            format!("n_rot {n_rot} must be even and >= 2")
        })?;
        ensure(OP, base.is_finite() && base > 1.0, || {
            format!("freq base {base} must be finite and > 1")
        })?;
        Ok(RopeTable {
            freq: q.upload(&rope_freqs(base, n_rot))?,
            base,
            n_rot,
        })
    }
    pub fn base(&self) -> f64 {
        self.base
    }
    pub fn n_rot(&self) -> usize {
        self.n_rot
    }
    /// The device table (n_rot / 2).
    pub fn freq(&self) -> &DeviceBuffer<f32> {
        &self.freq
    }
}

/// The RoPE kernels, built once per context.
pub struct Rope {
    norm: Kernel,
    neox: Kernel,
}

impl Rope {
    pub fn new(ctx: &Context) -> Result<Rope> {
        let m = ctx.module(&kernels::ROPE, &[])?;
        Ok(Rope {
            norm: m.kernel("rope_norm")?,
            neox: m.kernel("rope_neox")?,
        })
    }

    /// Rotates `t` rows of `n_head` heads in place; rotated dims = table.n_rot() <= head_dim.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        mode: RopeMode,
        x: &DeviceBuffer<f32>,   // (t, n_head * head_dim), in place
        pos: &DeviceBuffer<i32>, // (t)
        table: &RopeTable,
        t: usize,
        n_head: usize,
        head_dim: usize,
    ) -> Result<()> {
        ensure(OP, table.n_rot <= head_dim, || {
            format!("n_rot {} exceeds head_dim {head_dim}", table.n_rot)
        })?;
        holds(OP, "x", x, prod(OP, &[t, n_head, head_dim])?)?;
        holds(OP, "pos", pos, t)?;
        let pairs = prod(OP, &[t, n_head, table.n_rot / 2])?;
        if pairs == 0 {
            return Ok(());
        }
        let k = match mode {
            RopeMode::Norm => &self.norm,
            RopeMode::Neox => &self.neox,
        };
        q.launch(
            k,
            NdRange::d1(round_up(pairs, 64), 64),
            &[
                Arg::buf(x),
                Arg::buf(pos),
                Arg::buf(&table.freq),
                Arg::i32(int(OP, "t", t)?),
                Arg::i32(int(OP, "n_head", n_head)?),
                Arg::i32(int(OP, "head_dim", head_dim)?),
                Arg::i32(int(OP, "n_rot", table.n_rot)?),
            ],
        )
    }
}

/// Reference: rows (t, n_head * head_dim) rotated in f64 with angle pos * freq (freq as f32,
/// the table the kernel gets).
pub fn reference(
    mode: RopeMode,
    x: &[f32],    // (t, n_head * head_dim)
    pos: &[i32],  // (t)
    freq: &[f32], // (n_rot / 2)
    n_head: usize,
    head_dim: usize,
) -> Vec<f64> {
    let half = freq.len();
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for (t, &p) in pos.iter().enumerate() {
        for h in 0..n_head {
            let r = &mut out[(t * n_head + h) * head_dim..(t * n_head + h + 1) * head_dim];
            for (i, &f) in freq.iter().enumerate() {
                let (a, b) = match mode {
                    RopeMode::Norm => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + half),
                };
                let (s, c) = (p as f64 * f as f64).sin_cos();
                let (x0, x1) = (r[a], r[b]);
                r[a] = x0 * c - x1 * s;
                r[b] = x0 * s + x1 * c;
            }
        }
    }
    out
}
