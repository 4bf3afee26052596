//! The reference's weights, typed by part as the device's (engine/model/weights/): matrices
//! dequantized to f32 (`Mat`, with the input rounding llama.cpp applies), norms as f32 vectors.
//! The tensor table (model/parts/tensors.rs) checked every shape before this runs.

use super::ops::Mat;
use super::{RefError, Result};
use crate::gguf::Gguf;
use crate::kernels::actq::ActRound;
use crate::model::config::{names, ModelConfig};
use crate::model::parts::{Ffn, Mixer};

/// One residual sublayer: its read norm, its part, its post norm.
pub struct RefSub<P> {
    pub norm: Vec<f32>,
    pub part: P,
    pub post_norm: Option<Vec<f32>>,
}

pub enum RefMixer {
    Attention(RefAttn),
}

pub struct RefAttn {
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

pub struct RefLayer {
    pub mixer: RefSub<RefMixer>,
    pub ffn: RefSub<RefDense>,
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

/// The (n_out, n_in) matrix `name`, its input rounded as llama.cpp's CPU backend rounds it for
/// the stored format when `round`.
pub fn matrix(g: &Gguf, name: &str, n_out: usize, n_in: usize, round: bool) -> Result<Mat> {
    let (info, bytes) = tensor(g, name)?;
    let mut data = vec![0f32; n_out * n_in];
    crate::quant::dequantize_by_type(info.ggml_type.id(), bytes, &mut data)?;
    let t = info.ggml_type.id();
    let round = if round {
        ActRound::for_type(t)
    } else {
        ActRound::None
    };
    Ok(Mat {
        n_out,
        n_in,
        data,
        round,
    })
}

/// Layer `il` as its parts declare it.
pub fn layer(g: &Gguf, c: &ModelConfig, il: usize, round: bool) -> Result<RefLayer> {
    let n = |w: &str| names::blk(il, w);
    let lc = &c.layers[il];
    let (e, hd, qd, kv) = (c.n_embd, c.head_dim, c.q_dim(), c.kv_dim());
    let post = |on: bool, w: &str| on.then(|| vector(g, &n(w), e)).transpose();
    let mixer = match &lc.mixer.part {
        Mixer::Attention(a) => RefMixer::Attention(RefAttn {
            wq: matrix(g, &n("attn_q"), qd, e, round)?,
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
        Ffn::Dense(d) => RefDense {
            gate: matrix(g, &n("ffn_gate"), d.n_ff, e, round)?,
            up: matrix(g, &n("ffn_up"), d.n_ff, e, round)?,
            down: matrix(g, &n("ffn_down"), e, d.n_ff, round)?,
        },
        Ffn::Moe(_) => {
            return Err(RefError::Unsupported(format!(
                "layer {il}: the reference runs no mixture-of-experts FFN yet"
            )))
        }
    };
    Ok(RefLayer {
        mixer: RefSub {
            norm: vector(g, &n("attn_norm"), e)?,
            part: mixer,
            post_norm: post(lc.mixer.post_norm, "post_attention_norm")?,
        },
        ffn: RefSub {
            norm: vector(g, &n("ffn_norm"), e)?,
            part: ffn,
            post_norm: post(lc.ffn.post_norm, "post_ffw_norm")?,
        },
    })
}
