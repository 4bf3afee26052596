//! Rounding of matmul inputs through 8-bit blocks (`sycl/kernels/actq.cpp`), as llama.cpp does
//! before every quantized matrix product (Q8_0/Q8_1 blocks of 32 for the legacy formats, Q8_K
//! blocks of 256 for the K-quants on its CPU backend). With it the engine's greedy outputs match
//! llama.cpp's on near-ties (docs/engine.md shows one: SmolLM2's "The United States" needs it).
//! Float weights take the activations unrounded.

use crate::kernels::XStage;
use crate::quant::type_id;
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result, SyclError};

/// How a matrix's input is rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActRound {
    None,
    /// Blocks of 32, f16 scale amax / 127.
    Q8Block32,
    /// Blocks of 256, f32 scale (Q8_K).
    Q8Block256,
}

impl ActRound {
    /// llama.cpp's CPU choice for a weight of ggml type `t`.
    pub fn for_type(t: u32) -> ActRound {
        match t {
            type_id::Q4_0 | type_id::Q4_1 | type_id::Q5_0 | type_id::Q5_1 | type_id::Q8_0 => {
                ActRound::Q8Block32
            }
            // IQ4_NL's vec_dot_type is Q8_0, Q2_K/Q3_K's Q8_K (ggml-cpu.c type_traits_cpu)
            type_id::IQ4_NL => ActRound::Q8Block32,
            type_id::Q2_K | type_id::Q3_K => ActRound::Q8Block256,
            type_id::Q4_K | type_id::Q5_K | type_id::Q6_K | type_id::IQ4_XS => ActRound::Q8Block256,
            // the i-quants' vec_dot_type is Q8_K too (ggml-cpu.c type_traits_cpu)
            type_id::IQ2_XXS | type_id::IQ2_XS | type_id::IQ3_XXS | type_id::IQ3_S => {
                ActRound::Q8Block256
            }
            type_id::IQ2_S | type_id::IQ1_S | type_id::IQ1_M => ActRound::Q8Block256,
            _ => ActRound::None,
        }
    }

    pub fn block(self) -> usize {
        match self {
            ActRound::None => 1,
            ActRound::Q8Block32 => 32,
            ActRound::Q8Block256 => 256,
        }
    }
}

pub struct ActQ {
    b32: Kernel,
    b256: Kernel,
}

impl ActQ {
    pub fn new(ctx: &Context) -> Result<ActQ> {
        let m = ctx.module(&kernels::ACTQ, &[])?;
        Ok(ActQ {
            b32: m.kernel("act_q8_32")?,
            b256: m.kernel("act_q8_256")?,
        })
    }

    /// y = round(x) over the first `n` elements (n a multiple of the block). `None` copies.
    pub fn run(
        &self,
        q: &Queue,
        mode: ActRound,
        x: &DeviceBuffer<f32>, // (n), e.g. (t, n_in)
        y: &DeviceBuffer<f32>, // (n)
        n: usize,
    ) -> Result<()> {
        self.launch(q, mode, x, y, n, None)
    }

    /// `run` in blocks of 32, also staging y into `st` for the decode products
    /// (engine/kernels/xstage.rs).
    pub fn run_staged(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>, // (n)
        y: &DeviceBuffer<f32>, // (n)
        n: usize,
        st: XStage,
    ) -> Result<()> {
        st.check("act_q8", n)?;
        // blocks of 32 or 256, as the stage was made for (xstage.rs)
        let mode = if st.block() == 256 {
            ActRound::Q8Block256
        } else {
            ActRound::Q8Block32
        };
        self.launch(q, mode, x, y, n, Some(st))
    }

    fn launch(
        &self,
        q: &Queue,
        mode: ActRound,
        x: &DeviceBuffer<f32>,
        y: &DeviceBuffer<f32>,
        n: usize,
        st: Option<XStage>,
    ) -> Result<()> {
        let block = mode.block();
        if n % block != 0 || x.len() < n || y.len() < n || n / block > i32::MAX as usize {
            return Err(SyclError::invalid(
                "act_q8",
                format!(
                    "{n} elements in blocks of {block} (x holds {}, y {})",
                    x.len(),
                    y.len()
                ),
            ));
        }
        let k = match mode {
            ActRound::None => {
                return Err(SyclError::invalid("act_q8", "ActRound::None has no kernel"))
            }
            ActRound::Q8Block32 => &self.b32,
            ActRound::Q8Block256 => &self.b256,
        };
        let nb = n / block;
        let mut args = vec![Arg::addr(x), Arg::addr(y)];
        XStage::push_arg(&mut args, block, st);
        args.push(Arg::i32(nb as i32));
        q.launch(k, NdRange::groups(nb, 16), &args)?;
        Ok(())
    }
}

/// The plain Rust rounding (f64 where it matters nowhere: every step is one f32 operation).
pub fn reference(mode: ActRound, x: &[f32]) -> Vec<f32> {
    match mode {
        ActRound::None => x.to_vec(),
        ActRound::Q8Block32 => x
            .chunks(32)
            .flat_map(|b| {
                let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let dh = half::f16::from_f32(d).to_f32();
                b.iter()
                    .map(move |&v| (v * id).round_ties_even() * dh)
                    .collect::<Vec<_>>()
            })
            .collect(),
        ActRound::Q8Block256 => x
            .chunks(256)
            .flat_map(|b| {
                let mut amax = 0f32;
                let mut m = 0f32;
                for &v in b {
                    if v.abs() > amax {
                        amax = v.abs();
                        m = v;
                    }
                }
                if amax == 0.0 {
                    return vec![0f32; b.len()];
                }
                let iscale = -127.0 / m;
                let d = 1.0 / iscale;
                b.iter()
                    .map(|&v| (iscale * v).round_ties_even().min(127.0) * d)
                    .collect()
            })
            .collect(),
    }
}
