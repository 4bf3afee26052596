//! Gated attention kernels (`sycl/kernels/gated_attn.cpp`) for qwen4exp's full-attention layers
//! (llama.cpp build_layer_attn): the q projection outputs per head [q | gate], `split_q_gate`
//! separates them (q then goes through the per-head q norm and IMRoPE), and after attention
//! `sigmoid_mul` gates its output, att * sigmoid(gate), before the output projection.
//! Element-wise, so multi-row calls are bitwise the one-row calls.

use super::float_args::{ensure, holds, int, prod, round_up};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "gated attention";

/// The gated-attention kernels, built once per context.
pub struct GatedAttnKernels {
    split: Kernel,
    sigmoid_mul: Kernel,
}

impl GatedAttnKernels {
    pub fn new(ctx: &Context) -> Result<GatedAttnKernels> {
        let m = ctx.module(&kernels::GATED_ATTN, &[])?;
        Ok(GatedAttnKernels {
            split: m.kernel("split_q_gate")?,
            sigmoid_mul: m.kernel("sigmoid_mul")?,
        })
    }

    /// q[t, h, :] = qg[t, h, 0..head_dim], gate[t, h, :] = qg[t, h, head_dim..2 head_dim]
    /// (llama.cpp's Qcur_full views). Exact copies.
    #[allow(clippy::too_many_arguments)]
    pub fn split_q_gate(
        &self,
        q: &Queue,
        qg: &DeviceBuffer<f32>, // (t, n_head * 2 * head_dim) [q | gate] per head
        q_out: &DeviceBuffer<f32>, // (t, n_head * head_dim)
        gate: &DeviceBuffer<f32>, // (t, n_head * head_dim)
        t: usize,
        n_head: usize,
        head_dim: usize,
    ) -> Result<()> {
        let n = prod(OP, &[t, n_head, head_dim])?;
        holds(OP, "split q+gate input", qg, prod(OP, &[n, 2])?)?;
        holds(OP, "split q output", q_out, n)?;
        holds(OP, "split gate output", gate, n)?;
        if n == 0 {
            return Ok(());
        }
        let distinct =
            |a: &DeviceBuffer<f32>, b: &DeviceBuffer<f32>| !std::ptr::eq(a.as_ptr(), b.as_ptr());
        ensure(
            OP,
            distinct(q_out, qg) && distinct(gate, qg) && distinct(q_out, gate),
            || "split_q_gate: input, q and gate must be three buffers".to_string(),
        )?;
        // the rounded-up global size must fit the kernel's int index too (the input's offsets
        // are size_t there)
        int(OP, "split t * n_head * head_dim", round_up(n, 256))?;
        q.launch(
            &self.split,
            NdRange::d1(round_up(n, 256), 256),
            &[
                Arg::addr(qg),
                Arg::addr(q_out),
                Arg::addr(gate),
                Arg::i32(n as i32),
                Arg::i32(int(OP, "head_dim", head_dim)?),
            ],
        )
    }

    /// att[i] = att[i] * (1 / (1 + exp(-gate[i]))), in place (llama.cpp's ggml_sigmoid then
    /// ggml_mul).
    pub fn sigmoid_mul(
        &self,
        q: &Queue,
        att: &DeviceBuffer<f32>, // (n), e.g. (t, n_head * head_dim), in place
        gate: &DeviceBuffer<f32>, // (n)
        n: usize,
    ) -> Result<()> {
        holds(OP, "sigmoid_mul att", att, n)?;
        holds(OP, "sigmoid_mul gate", gate, n)?;
        if n == 0 {
            return Ok(());
        }
        // the rounded-up global size must fit the kernel's int index too
        int(OP, "sigmoid_mul n", round_up(n, 256))?;
        q.launch(
            &self.sigmoid_mul,
            NdRange::d1(round_up(n, 256), 256),
            &[Arg::addr(att), Arg::addr(gate), Arg::i32(n as i32)],
        )
    }
}

/// `split_q_gate`'s reference: (q, gate), each (t, n_head * head_dim), copied.
pub fn reference_split(qg: &[f32], head_dim: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut q, mut g) = (Vec::new(), Vec::new());
    for head in qg.chunks(2 * head_dim) {
        q.extend_from_slice(&head[..head_dim]);
        g.extend_from_slice(&head[head_dim..]);
    }
    (q, g)
}

/// `sigmoid_mul`'s reference in f64: att * 1 / (1 + e^-gate).
pub fn reference_sigmoid_mul(att: &[f32], gate: &[f32]) -> Vec<f64> {
    att.iter()
        .zip(gate)
        .map(|(&a, &g)| a as f64 / (1.0 + (-(g as f64)).exp()))
        .collect()
}
