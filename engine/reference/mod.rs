//! A plain, scalar, slow forward pass for the supported architectures, for tests: weights
//! dequantized to f32 by engine/quant, f64 accumulation in every dot product and norm, keys and
//! values rounded through f16 like the device KV cache. The engine's logits are compared with
//! these (tests/model_*.rs). Written independently of the device engine on purpose: it shares
//! only `ModelConfig` and the tensor names.

mod gemma3;
mod llama;
pub mod ops;

use crate::gguf::{Arch, Gguf};
use crate::kernels::actq::{self, ActRound};
use crate::model::config::{names, ModelConfig};
use ops::Mat;

#[derive(Debug, thiserror::Error)]
pub enum RefError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error(transparent)]
    Config(#[from] crate::model::config::ConfigError),
    #[error(transparent)]
    Quant(#[from] crate::quant::QuantError),
    #[error("tensor {name}: {why}")]
    Tensor { name: String, why: String },
    #[error("{n_tokens} tokens at position {start_pos} need {} positions; the reference context is {n_ctx}", start_pos + n_tokens)]
    Context {
        start_pos: usize,
        n_tokens: usize,
        n_ctx: usize,
    },
    #[error("start position {start_pos} is past the {cached} cached positions")]
    Gap { start_pos: usize, cached: usize },
    #[error("token {token} is outside the vocabulary ({n_vocab})")]
    Token { token: u32, n_vocab: usize },
}

pub type Result<T> = std::result::Result<T, RefError>;

/// One layer's weights; the Gemma-only ones are `None` for llama.
pub struct RefLayer {
    pub attn_norm: Vec<f32>,
    pub wq: Mat,
    pub wk: Mat,
    pub wv: Mat,
    pub wo: Mat,
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub gate: Mat,
    pub up: Mat,
    pub down: Mat,
    pub post_ffw_norm: Option<Vec<f32>>,
}

/// The whole model in f32. The token embedding stays as its GGUF bytes (dequantized a row at a
/// time: Gemma's is 262144 x 640) and serves as the output head when there is no output.weight.
pub struct RefModel {
    pub cfg: ModelConfig,
    embd_type: u32,
    embd_bytes: Vec<u8>,
    embd_row_bytes: usize,
    /// Rounding of the tied head's input.
    head_round: ActRound,
    output: Option<Mat>,
    output_norm: Vec<f32>,
    layers: Vec<RefLayer>,
}

fn tensor<'a>(g: &'a Gguf, name: &str) -> Result<(&'a crate::gguf::TensorInfo, &'a [u8])> {
    let info = g.tensor(name)?;
    Ok((info, g.tensor_data(info)?))
}

fn vector(g: &Gguf, name: &str, n: usize) -> Result<Vec<f32>> {
    let (info, bytes) = tensor(g, name)?;
    if info.n_elements as usize != n {
        return Err(RefError::Tensor {
            name: name.into(),
            why: format!("{} elements, expected {n}", info.n_elements),
        });
    }
    let mut out = vec![0f32; n];
    crate::quant::dequantize_by_type(info.ggml_type.id(), bytes, &mut out)?;
    Ok(out)
}

fn matrix(g: &Gguf, name: &str, n_out: usize, n_in: usize, round: bool) -> Result<Mat> {
    let (info, bytes) = tensor(g, name)?;
    if info.dims.len() != 2 || info.dims[0] as usize != n_in || info.dims[1] as usize != n_out {
        return Err(RefError::Tensor {
            name: name.into(),
            why: format!(
                "dims {:?}, expected [{n_in}, {n_out}] (ne0 = n_in)",
                info.dims
            ),
        });
    }
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

impl RefModel {
    /// `act_round`: round matmul inputs like llama.cpp (and the engine's default).
    pub fn load(g: &Gguf, act_round: bool) -> Result<RefModel> {
        let cfg = ModelConfig::from_gguf(g)?;
        let (e, d, q, kv, ff) = (
            cfg.n_embd,
            cfg.head_dim,
            cfg.q_dim(),
            cfg.kv_dim(),
            cfg.n_ff,
        );
        let gemma = cfg.arch == Arch::Gemma3;
        let opt = |il, what: &str, n| -> Result<Option<Vec<f32>>> {
            if gemma {
                vector(g, &names::blk(il, what), n).map(Some)
            } else {
                Ok(None)
            }
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for il in 0..cfg.n_layer {
            layers.push(RefLayer {
                attn_norm: vector(g, &names::blk(il, "attn_norm"), e)?,
                wq: matrix(g, &names::blk(il, "attn_q"), q, e, act_round)?,
                wk: matrix(g, &names::blk(il, "attn_k"), kv, e, act_round)?,
                wv: matrix(g, &names::blk(il, "attn_v"), kv, e, act_round)?,
                wo: matrix(g, &names::blk(il, "attn_output"), e, q, act_round)?,
                q_norm: opt(il, "attn_q_norm", d)?,
                k_norm: opt(il, "attn_k_norm", d)?,
                post_attn_norm: opt(il, "post_attention_norm", e)?,
                ffn_norm: vector(g, &names::blk(il, "ffn_norm"), e)?,
                gate: matrix(g, &names::blk(il, "ffn_gate"), ff, e, act_round)?,
                up: matrix(g, &names::blk(il, "ffn_up"), ff, e, act_round)?,
                down: matrix(g, &names::blk(il, "ffn_down"), e, ff, act_round)?,
                post_ffw_norm: opt(il, "post_ffw_norm", e)?,
            });
        }
        let (info, bytes) = tensor(g, names::TOKEN_EMBD)?;
        let embd_type = info.ggml_type.id();
        let embd_row_bytes = crate::quant::bytes_for(embd_type, e)?;
        if bytes.len() != embd_row_bytes * cfg.n_vocab {
            return Err(RefError::Tensor {
                name: names::TOKEN_EMBD.into(),
                why: format!(
                    "{} bytes, expected {} rows of {embd_row_bytes}",
                    bytes.len(),
                    cfg.n_vocab
                ),
            });
        }
        let output = match g.tensor_info(names::OUTPUT) {
            Some(_) => Some(matrix(g, names::OUTPUT, cfg.n_vocab, e, act_round)?),
            None => None,
        };
        Ok(RefModel {
            output_norm: vector(g, names::OUTPUT_NORM, e)?,
            embd_type,
            embd_bytes: bytes.to_vec(),
            embd_row_bytes,
            head_round: if act_round {
                ActRound::for_type(embd_type)
            } else {
                ActRound::None
            },
            output,
            layers,
            cfg,
        })
    }

    fn embd_row(&self, token: u32) -> Result<Vec<f32>> {
        let t = token as usize;
        if t >= self.cfg.n_vocab {
            return Err(RefError::Token {
                token,
                n_vocab: self.cfg.n_vocab,
            });
        }
        let mut row = vec![0f32; self.cfg.n_embd];
        let bytes = &self.embd_bytes[t * self.embd_row_bytes..(t + 1) * self.embd_row_bytes];
        crate::quant::dequantize_by_type(self.embd_type, bytes, &mut row)?;
        Ok(row)
    }

    fn logits(&self, x: &[f32]) -> Result<Vec<f32>> {
        let h = ops::rms_norm(x, &self.output_norm, self.cfg.rms_eps);
        if let Some(out) = &self.output {
            return Ok(out.mul(&h));
        }
        let h = actq::reference(self.head_round, &h);
        let mut row = vec![0f32; self.cfg.n_embd];
        let mut logits = Vec::with_capacity(self.cfg.n_vocab);
        for bytes in self.embd_bytes.chunks_exact(self.embd_row_bytes) {
            crate::quant::dequantize_by_type(self.embd_type, bytes, &mut row)?;
            logits.push(ops::dot(&row, &h) as f32);
        }
        Ok(logits)
    }
}

/// The per-sequence state: the KV cache (f16-rounded values in f32), one entry per position.
pub struct RefSession<'m> {
    pub model: &'m RefModel,
    /// keys[layer][pos]: (n_kv_head * head_dim)
    keys: Vec<Vec<Vec<f32>>>,
    values: Vec<Vec<Vec<f32>>>,
    n_ctx: usize,
}

impl<'m> RefSession<'m> {
    pub fn new(model: &'m RefModel, n_ctx: usize) -> Self {
        let n = model.cfg.n_layer;
        RefSession {
            model,
            keys: vec![Vec::new(); n],
            values: vec![Vec::new(); n],
            n_ctx,
        }
    }

    /// Positions held in the cache.
    pub fn len(&self) -> usize {
        self.keys.first().map(|k| k.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `tokens` at positions `start_pos..` (dropping any cached positions >= start_pos) and
    /// returns the logits of every row.
    pub fn forward(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<Vec<f32>>> {
        let end = start_pos + tokens.len();
        if start_pos > self.len() {
            return Err(RefError::Gap {
                start_pos,
                cached: self.len(),
            });
        }
        if end > self.n_ctx {
            return Err(RefError::Context {
                start_pos,
                n_tokens: tokens.len(),
                n_ctx: self.n_ctx,
            });
        }
        for il in 0..self.keys.len() {
            self.keys[il].truncate(start_pos);
            self.values[il].truncate(start_pos);
        }
        let m = self.model;
        let mut out = Vec::with_capacity(tokens.len());
        for (i, &tok) in tokens.iter().enumerate() {
            let pos = start_pos + i;
            let mut x: Vec<f32> = m.embd_row(tok)?;
            if m.cfg.embd_scale != 1.0 {
                for v in &mut x {
                    *v *= m.cfg.embd_scale;
                }
            }
            for (il, layer) in m.layers.iter().enumerate() {
                let (keys, values) = (&mut self.keys[il], &mut self.values[il]);
                match m.cfg.arch {
                    Arch::Gemma3 => gemma3::layer(&m.cfg, il, layer, &mut x, pos, keys, values),
                    _ => llama::layer(&m.cfg, il, layer, &mut x, pos, keys, values),
                }
            }
            out.push(m.logits(&x)?);
        }
        Ok(out)
    }
}
