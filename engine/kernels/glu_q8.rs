//! Gated FFN activation fused with the 8-bit block rounding of its output
//! (`sycl/kernels/glu_q8.cpp`): yq = round(act(gate) * up), act = SiLU (llama) or GELU-tanh
//! (Gemma), written straight into the down product's input. One launch instead of
//! `Elementwise::{silu_mul, gelu_mul}` + `ActQ`, bitwise the same (shared act.hpp / actq.hpp).
//! Blocks never straddle rows (n_ff is a multiple of the block), so multi-row calls are bitwise
//! the one-row calls.

use super::float_args::{holds, int};
use super::norm_q8::block_index;
use super::xstage::{stage_check, XStage};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "glu_q8";

/// Which gate activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Glu {
    /// silu(g) = g / (1 + e^-g) (llama).
    Silu,
    /// gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (Gemma).
    GeluTanh,
}

/// The fused activation + rounding kernels, built once per context.
pub struct GluQ8 {
    silu: [Kernel; 2],
    gelu: [Kernel; 2],
}

impl GluQ8 {
    pub fn new(ctx: &Context) -> Result<GluQ8> {
        let m = ctx.module(&kernels::GLU_Q8, &[])?;
        Ok(GluQ8 {
            silu: [m.kernel("silu_mul_q8_32")?, m.kernel("silu_mul_q8_256")?],
            gelu: [m.kernel("gelu_mul_q8_32")?, m.kernel("gelu_mul_q8_256")?],
        })
    }

    /// yq = round_block(act(gate) * up) over n elements (a multiple of `block`, 32 or 256).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        act: Glu,
        gate: &DeviceBuffer<f32>, // (n), e.g. (t, n_ff)
        up: &DeviceBuffer<f32>,   // (n)
        yq: &DeviceBuffer<f32>,   // (n) rounded
        n: usize,
        block: usize,
        st: Option<XStage>, // blocks of 32: yq staged for the down product (xstage.rs)
    ) -> Result<()> {
        let bi = block_index(OP, block, n)?;
        stage_check(OP, st, block, n)?;
        holds(OP, "gate", gate, n)?;
        holds(OP, "up", up, n)?;
        holds(OP, "yq", yq, n)?;
        let nb = n / block;
        if nb == 0 {
            return Ok(());
        }
        int(OP, "n", n)?;
        let k = match act {
            Glu::Silu => &self.silu[bi],
            Glu::GeluTanh => &self.gelu[bi],
        };
        let mut args = vec![Arg::addr(gate), Arg::addr(up), Arg::addr(yq)];
        XStage::push_arg(&mut args, block, st);
        args.push(Arg::i32(nb as i32));
        q.launch(k, NdRange::groups(nb, 16), &args)
    }
}

/// round_block(act(gate) * up) in f64 (`act::reference_*_mul`, then `norm_q8::reference_round`).
pub fn reference(act: Glu, gate: &[f32], up: &[f32], block: usize) -> Vec<f64> {
    let y = match act {
        Glu::Silu => super::act::reference_silu_mul(gate, up),
        Glu::GeluTanh => super::act::reference_gelu_mul(gate, up),
    };
    super::norm_q8::reference_round(block, &y)
}
