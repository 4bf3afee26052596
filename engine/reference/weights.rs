//! The reference's weights, typed by part as the device's (engine/model/weights/): matrices
//! dequantized to f32 (`Mat`, with the input rounding llama.cpp applies), norms as f32 vectors,
//! a MoE layer's stacked expert tensors kept as their bytes (an expert is dequantized when the
//! router picks it: a real model's experts are most of its size).
//! The tensor table (model/parts/tensors.rs) checked every shape before this runs.

use super::ops::{InRound, Mat};
use super::{RefError, Result};
use crate::gguf::Gguf;
use crate::kernels::actq::ActRound;
use crate::model::config::{names, ModelConfig};
use crate::model::parts::{Ffn, Hyper, Mixer, Moe, Residual};

/// How the reference rounds matmul inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// f32 inputs everywhere.
    None,
    /// The engine's rule (`ActRound::for_type`, `RefModel::load(g, true)`): 8-bit blocks before a
    /// quantized weight as llama.cpp's CPU backend rounds them; float weights take f32 inputs.
    Engine,
    /// llama.cpp's CPU backend exactly (`InRound::ggml_cpu`): `Engine`'s rounding, and f16 /
    /// bf16 inputs to F16 / BF16 weights (ggml's `vec_dot_type` for those types).
    LlamaCpu,
}

impl Rounding {
    /// The input rounding of a weight of ggml type `t`.
    pub fn for_type(self, t: u32) -> InRound {
        match self {
            Rounding::None => InRound::Act(ActRound::None),
            Rounding::Engine => InRound::Act(ActRound::for_type(t)),
            Rounding::LlamaCpu => InRound::ggml_cpu(t),
        }
    }
}

/// How a sublayer reads the residual: an RMS norm of the one stream (`Residual::Single`), or a
/// hyper-connection site over the S streams (`Residual::Hyper`).
pub enum RefRead {
    Norm(Vec<f32>),
    Hyper(RefHc),
}

/// A hyper-connection mixer (`hc_{site}_{norm,down,up}`, or the head's `output_hc_*`).
pub struct RefHcMix {
    /// S
    pub streams: usize,
    /// The stored (folded, 1 + w) gamma, read as is: (S, n), stream s's at s*n..(s+1)*n
    /// (the GGUF's [n_embd, S]).
    pub gamma: Vec<f32>,
    /// (r, S n)
    pub down: Mat,
    /// (S n, r)
    pub up: Mat,
}

/// A layer's read site: its mixer and its injection rows (`hc_{site}_inject`: (S, S n)).
pub struct RefHc {
    pub mix: RefHcMix,
    pub inject: Mat,
}

/// One residual sublayer: its read, its part, its post norm.
pub struct RefSub<P> {
    pub read: RefRead,
    pub part: P,
    pub post_norm: Option<Vec<f32>>,
}

pub enum RefMixer {
    Attention(RefAttn),
}

pub struct RefAttn {
    /// (n_head * head_dim, n_embd), or (2 * n_head * head_dim, n_embd) when gated: head h's q is
    /// rows [2h hd, 2h hd + hd), its gate the next hd.
    pub wq: Mat,
    pub wk: Mat,
    pub wv: Mat,
    pub wo: Mat,
    /// (q_norm, k_norm), each (head_dim)
    pub qk_norm: Option<(Vec<f32>, Vec<f32>)>,
}

pub struct RefDense {
    pub gate: Mat,
    pub up: Mat,
    pub down: Mat,
}

pub enum RefFfn {
    Dense(RefDense),
    Moe(Box<RefMoe>),
}

/// One stacked 3-D expert tensor as its bytes: expert e's (n_out, n_in) matrix is the e-th of
/// `n_expert` equal slices (the GGUF's [n_in, n_out, n_expert]).
pub struct Stacked {
    pub name: String,
    ggml_type: u32,
    bytes: Vec<u8>,
    pub n_out: usize,
    pub n_in: usize,
    pub n_expert: usize,
    round: InRound,
}

impl Stacked {
    fn load(
        g: &Gguf,
        name: &str,
        n_out: usize,
        n_in: usize,
        n_expert: usize,
        round: Rounding,
    ) -> Result<Stacked> {
        let (info, bytes) = tensor(g, name)?;
        let t = info.ggml_type.id();
        let per = crate::quant::bytes_for(t, n_out * n_in)?;
        if bytes.len() != per * n_expert {
            return Err(RefError::Tensor {
                name: name.into(),
                why: format!(
                    "{} bytes, expected {n_expert} experts of {per}",
                    bytes.len()
                ),
            });
        }
        Ok(Stacked {
            name: name.into(),
            ggml_type: t,
            bytes: bytes.to_vec(),
            n_out,
            n_in,
            n_expert,
            round: round.for_type(t),
        })
    }

    /// `n_expert` (n_out, n_in) f32 matrices back to back, as an F32 file stores them.
    #[cfg(test)]
    pub fn from_f32(name: &str, n_out: usize, n_in: usize, data: &[f32]) -> Stacked {
        Stacked {
            name: name.into(),
            ggml_type: crate::quant::type_id::F32,
            bytes: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            n_out,
            n_in,
            n_expert: data.len() / (n_out * n_in),
            round: InRound::Act(ActRound::None),
        }
    }

    /// Expert `e`'s (n_out, n_in) matrix, dequantized.
    pub fn expert(&self, e: usize) -> Result<Mat> {
        if e >= self.n_expert {
            return Err(RefError::Tensor {
                name: self.name.clone(),
                why: format!("expert {e} of {}", self.n_expert),
            });
        }
        let per = self.bytes.len() / self.n_expert;
        let mut data = vec![0f32; self.n_out * self.n_in];
        crate::quant::dequantize_by_type(
            self.ggml_type,
            &self.bytes[e * per..(e + 1) * per],
            &mut data,
        )?;
        Ok(Mat {
            n_out: self.n_out,
            n_in: self.n_in,
            data,
            round: self.round,
        })
    }
}

/// The experts' gate and up projections: two stacked tensors, or one fused `ffn_gate_up_exps`
/// whose expert matrix is (2 n_ff, n_embd), rows 0..n_ff the gate, n_ff..2 n_ff the up.
pub enum GateUp {
    Split { gate: Stacked, up: Stacked },
    Fused(Stacked),
}

pub struct RefMoe {
    /// (n_expert, n_embd)
    pub router: Mat,
    pub gate_up: GateUp,
    /// (n_embd, n_ff) per expert
    pub down: Stacked,
    pub shared: Option<RefDense>,
    /// (1, n_embd): the shared expert's per-token gate, sigmoid(w · h).
    pub shared_gate: Option<Mat>,
}

impl RefMoe {
    /// Expert `e` as a dense GLU (its gate, up and down matrices dequantized).
    pub fn expert(&self, e: usize) -> Result<RefDense> {
        let (gate, up) = match &self.gate_up {
            GateUp::Split { gate, up } => (gate.expert(e)?, up.expert(e)?),
            GateUp::Fused(gu) => {
                let m = gu.expert(e)?;
                let (f, n) = (m.n_out / 2, m.n_in);
                let half = |rows: std::ops::Range<usize>| Mat {
                    n_out: f,
                    n_in: n,
                    data: m.data[rows.start * n..rows.end * n].to_vec(),
                    round: m.round,
                };
                (half(0..f), half(f..2 * f))
            }
        };
        Ok(RefDense {
            gate,
            up,
            down: self.down.expert(e)?,
        })
    }
}

pub struct RefLayer {
    pub mixer: RefSub<RefMixer>,
    pub ffn: RefSub<RefFfn>,
}

pub fn tensor<'a>(g: &'a Gguf, name: &str) -> Result<(&'a crate::gguf::TensorInfo, &'a [u8])> {
    let info = g.tensor(name)?;
    Ok((info, g.tensor_data(info)?))
}

pub fn vector(g: &Gguf, name: &str, n: usize) -> Result<Vec<f32>> {
    let (info, bytes) = tensor(g, name)?;
    let mut out = vec![0f32; n];
    crate::quant::dequantize_by_type(info.ggml_type.id(), bytes, &mut out)?;
    Ok(out)
}

/// The (n_out, n_in) matrix `name`, its input rounded by `round` for the stored format.
pub fn matrix(g: &Gguf, name: &str, n_out: usize, n_in: usize, round: Rounding) -> Result<Mat> {
    let (info, bytes) = tensor(g, name)?;
    let mut data = vec![0f32; n_out * n_in];
    crate::quant::dequantize_by_type(info.ggml_type.id(), bytes, &mut data)?;
    Ok(Mat {
        n_out,
        n_in,
        data,
        round: round.for_type(info.ggml_type.id()),
    })
}

/// A hyper-connection mixer's weights under `names` (norm, down, up).
pub fn hc_mix(
    g: &Gguf,
    c: &ModelConfig,
    h: Hyper,
    names: [&str; 3],
    round: Rounding,
) -> Result<RefHcMix> {
    let (sn, r) = (h.streams * c.n_embd, h.rank);
    Ok(RefHcMix {
        streams: h.streams,
        gamma: vector(g, names[0], sn)?,
        down: matrix(g, names[1], r, sn, round)?,
        up: matrix(g, names[2], sn, r, round)?,
    })
}

/// Layer `il`'s read of a sublayer: its norm `norm`, or its hyper-connection site `site`.
fn read(
    g: &Gguf,
    c: &ModelConfig,
    il: usize,
    norm: &str,
    site: &str,
    round: Rounding,
) -> Result<RefRead> {
    let n = |w: &str| names::blk(il, w);
    Ok(match c.residual {
        Residual::Single => RefRead::Norm(vector(g, &n(norm), c.n_embd)?),
        Residual::Hyper(h) => {
            let w = |part: &str| n(&format!("hc_{site}_{part}"));
            let sn = h.streams * c.n_embd;
            RefRead::Hyper(RefHc {
                mix: hc_mix(g, c, h, [&w("norm"), &w("down"), &w("up")], round)?,
                inject: matrix(g, &w("inject"), h.streams, sn, round)?,
            })
        }
    })
}

fn moe(g: &Gguf, c: &ModelConfig, il: usize, m: &Moe, round: Rounding) -> Result<RefMoe> {
    let n = |w: &str| names::blk(il, w);
    let (e, f, x) = (c.n_embd, m.n_ff, m.n_expert);
    let stacked = |w: &str, n_out, n_in| Stacked::load(g, &n(w), n_out, n_in, x, round);
    let gate_up = match m.fused_gate_up {
        true => GateUp::Fused(stacked("ffn_gate_up_exps", 2 * f, e)?),
        false => GateUp::Split {
            gate: stacked("ffn_gate_exps", f, e)?,
            up: stacked("ffn_up_exps", f, e)?,
        },
    };
    let shared = match m.shared_ff {
        Some(s) => Some(RefDense {
            gate: matrix(g, &n("ffn_gate_shexp"), s, e, round)?,
            up: matrix(g, &n("ffn_up_shexp"), s, e, round)?,
            down: matrix(g, &n("ffn_down_shexp"), e, s, round)?,
        }),
        None => None,
    };
    Ok(RefMoe {
        router: matrix(g, &n("ffn_gate_inp"), x, e, round)?,
        gate_up,
        down: stacked("ffn_down_exps", e, f)?,
        shared,
        shared_gate: match m.shared_gate {
            true => Some(matrix(g, &n("ffn_gate_inp_shexp"), 1, e, round)?),
            false => None,
        },
    })
}

/// Layer `il` as its parts declare it.
pub fn layer(g: &Gguf, c: &ModelConfig, il: usize, round: Rounding) -> Result<RefLayer> {
    let n = |w: &str| names::blk(il, w);
    let lc = &c.layers[il];
    let (e, hd, qd, kv) = (c.n_embd, c.head_dim, c.q_dim(), c.kv_dim());
    let post = |on: bool, w: &str| on.then(|| vector(g, &n(w), e)).transpose();
    let mixer = match &lc.mixer.part {
        Mixer::Attention(a) => RefMixer::Attention(RefAttn {
            wq: matrix(g, &n("attn_q"), if a.gated { 2 * qd } else { qd }, e, round)?,
            wk: matrix(g, &n("attn_k"), kv, e, round)?,
            wv: matrix(g, &n("attn_v"), kv, e, round)?,
            wo: matrix(g, &n("attn_output"), e, qd, round)?,
            qk_norm: match a.qk_norm {
                true => Some((
                    vector(g, &n("attn_q_norm"), hd)?,
                    vector(g, &n("attn_k_norm"), hd)?,
                )),
                false => None,
            },
        }),
    };
    let ffn = match &lc.ffn.part {
        Ffn::Dense(d) => RefFfn::Dense(RefDense {
            gate: matrix(g, &n("ffn_gate"), d.n_ff, e, round)?,
            up: matrix(g, &n("ffn_up"), d.n_ff, e, round)?,
            down: matrix(g, &n("ffn_down"), e, d.n_ff, round)?,
        }),
        Ffn::Moe(m) => RefFfn::Moe(Box::new(moe(g, c, il, m, round)?)),
    };
    Ok(RefLayer {
        mixer: RefSub {
            read: read(g, c, il, "attn_norm", "attn", round)?,
            part: mixer,
            post_norm: post(lc.mixer.post_norm, "post_attention_norm")?,
        },
        ffn: RefSub {
            read: read(g, c, il, "ffn_norm", "ffn", round)?,
            part: ffn,
            post_norm: post(lc.ffn.post_norm, "post_ffw_norm")?,
        },
    })
}
