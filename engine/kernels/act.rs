//! Element-wise kernels (`sycl/kernels/act.cpp`) over n elements of any shape, e.g. (T, n_ff):
//! gated FFN activations out = act(gate) * up with SiLU (llama) or GELU-tanh (Gemma), the
//! residual add, a scale, and a row repeated into hyper-connection streams. Outputs may alias
//! inputs (except the repeat's). Element-wise, so multi-row calls are
//! bitwise the one-row calls.

use super::float_args::{holds, int, prod, round_up};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "elementwise";

/// The element-wise kernels, built once per context.
pub struct Elementwise {
    silu_mul: Kernel,
    gelu_mul: Kernel,
    add: Kernel,
    scale: Kernel,
    repeat: Kernel,
}

impl Elementwise {
    pub fn new(ctx: &Context) -> Result<Elementwise> {
        let m = ctx.module(&kernels::ACT, &[])?;
        Ok(Elementwise {
            silu_mul: m.kernel("silu_mul")?,
            gelu_mul: m.kernel("gelu_mul")?,
            add: m.kernel("add_f32")?,
            scale: m.kernel("scale_f32")?,
            repeat: m.kernel("repeat_rows")?,
        })
    }

    fn binary(
        &self,
        q: &Queue,
        k: &Kernel,
        a: &DeviceBuffer<f32>,
        b: &DeviceBuffer<f32>,
        out: &DeviceBuffer<f32>,
        n: usize,
    ) -> Result<()> {
        holds(OP, "first input", a, n)?;
        holds(OP, "second input", b, n)?;
        holds(OP, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        // the rounded-up global size must fit the kernel's int index too
        int(OP, "n", round_up(n, 256))?;
        q.launch(
            k,
            NdRange::d1(round_up(n, 256), 256),
            &[
                Arg::addr(a),
                Arg::addr(b),
                Arg::addr(out),
                Arg::i32(n as i32),
            ],
        )
    }

    /// out = silu(gate) * up, silu(g) = g / (1 + e^-g).
    pub fn silu_mul(
        &self,
        q: &Queue,
        gate: &DeviceBuffer<f32>, // (n), e.g. (t, n_ff)
        up: &DeviceBuffer<f32>,   // (n)
        out: &DeviceBuffer<f32>,  // (n)
        n: usize,
    ) -> Result<()> {
        self.binary(q, &self.silu_mul, gate, up, out, n)
    }

    /// out = gelu_tanh(gate) * up, gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
    pub fn gelu_mul(
        &self,
        q: &Queue,
        gate: &DeviceBuffer<f32>, // (n), e.g. (t, n_ff)
        up: &DeviceBuffer<f32>,   // (n)
        out: &DeviceBuffer<f32>,  // (n)
        n: usize,
    ) -> Result<()> {
        self.binary(q, &self.gelu_mul, gate, up, out, n)
    }

    /// out = a + b (the residual add; `out` may be `a`).
    pub fn add(
        &self,
        q: &Queue,
        a: &DeviceBuffer<f32>,   // (n)
        b: &DeviceBuffer<f32>,   // (n)
        out: &DeviceBuffer<f32>, // (n)
        n: usize,
    ) -> Result<()> {
        self.binary(q, &self.add, a, b, out, n)
    }

    /// out[r, s, :] = x[r, :] for every s < streams (`out` is not `x`): a row copied into each of
    /// its hyper-connection streams. Exact copies.
    pub fn repeat_rows(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,   // (rows, n)
        out: &DeviceBuffer<f32>, // (rows, streams, n)
        rows: usize,
        n: usize,
        streams: usize,
    ) -> Result<()> {
        let total = prod(OP, &[rows, streams, n])?;
        holds(OP, "x", x, prod(OP, &[rows, n])?)?;
        holds(OP, "out", out, total)?;
        if total == 0 {
            return Ok(());
        }
        int(OP, "rows * streams * n", round_up(total, 256))?;
        q.launch(
            &self.repeat,
            NdRange::d1(round_up(total, 256), 256),
            &[
                Arg::addr(x),
                Arg::addr(out),
                Arg::i32(total as i32),
                Arg::i32(int(OP, "n", n)?),
                Arg::i32(int(OP, "streams", streams)?),
            ],
        )
    }

    /// out = x * s (`out` may be `x`).
    pub fn scale(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,   // (n)
        out: &DeviceBuffer<f32>, // (n)
        n: usize,
        s: f32,
    ) -> Result<()> {
        holds(OP, "x", x, n)?;
        holds(OP, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        // the rounded-up global size must fit the kernel's int index too
        int(OP, "n", round_up(n, 256))?;
        q.launch(
            &self.scale,
            NdRange::d1(round_up(n, 256), 256),
            &[
                Arg::addr(x),
                Arg::addr(out),
                Arg::i32(n as i32),
                Arg::f32(s),
            ],
        )
    }
}

/// silu(g) * up in f64.
pub fn reference_silu_mul(gate: &[f32], up: &[f32]) -> Vec<f64> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let g = g as f64;
            g / (1.0 + (-g).exp()) * u as f64
        })
        .collect()
}

/// gelu_tanh(g) * up in f64.
pub fn reference_gelu_mul(gate: &[f32], up: &[f32]) -> Vec<f64> {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let g = g as f64;
            0.5 * g * (1.0 + (k * (g + 0.044715 * g * g * g)).tanh()) * u as f64
        })
        .collect()
}

/// a + b in f64.
pub fn reference_add(a: &[f32], b: &[f32]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| x as f64 + y as f64)
        .collect()
}

/// x * s in f64.
pub fn reference_scale(x: &[f32], s: f32) -> Vec<f64> {
    x.iter().map(|&v| v as f64 * s as f64).collect()
}
