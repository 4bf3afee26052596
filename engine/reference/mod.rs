//! A plain, scalar, slow forward pass, for tests: weights dequantized to f32 by engine/quant,
//! f64 accumulation in every dot product and norm, keys and values rounded through f16 like the
//! device KV cache. The engine's logits are compared with these (tests/model_*.rs). It runs the
//! same parts as the device (engine/model/parts/), one file per part with the device's names
//! (`residual`, `attention`, `ffn`; `weights` typed by part), so a new architecture's reference
//! is written in the same shape; the arithmetic is written independently of the device's on
//! purpose: it shares only `ModelConfig`, the parts' declarations and the tensor names.

mod attention;
mod ffn;
pub mod ops;
mod residual;
pub mod weights;

use crate::gguf::Gguf;
use crate::kernels::actq::{self, ActRound};
use crate::model::config::{names, ModelConfig};
use crate::model::parts::Ffn;
use ops::Mat;
use weights::{matrix, tensor, vector, RefLayer, RefMixer};

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
    #[error("not supported: {0}")]
    Unsupported(String),
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

impl RefModel {
    /// `act_round`: round matmul inputs like llama.cpp (and the engine's default).
    pub fn load(g: &Gguf, act_round: bool) -> Result<RefModel> {
        let cfg = ModelConfig::from_gguf(g)?;
        let e = cfg.n_embd;
        let layers = (0..cfg.n_layer)
            .map(|il| weights::layer(g, &cfg, il, act_round))
            .collect::<Result<Vec<_>>>()?;
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
        let h = residual::read(x, &self.output_norm, self.cfg.rms_eps);
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
                let (lc, eps) = (&m.cfg.layers[il], m.cfg.rms_eps);
                let (keys, values) = (&mut self.keys[il], &mut self.values[il]);
                // the mixer's sublayer, then the FFN's
                let h = residual::read(&x, &layer.mixer.norm, eps);
                let o = match &layer.mixer.part {
                    RefMixer::Attention(a) => {
                        attention::run(&m.cfg, a, lc.attention(), &h, pos, keys, values)
                    }
                };
                residual::write(&mut x, o, layer.mixer.post_norm.as_deref(), eps);
                let h = residual::read(&x, &layer.ffn.norm, eps);
                let Ffn::Dense(d) = &lc.ffn.part else {
                    return Err(RefError::Unsupported(format!("layer {il}: a MoE FFN")));
                };
                let o = ffn::dense(&layer.ffn.part, d, &h);
                residual::write(&mut x, o, layer.ffn.post_norm.as_deref(), eps);
            }
            out.push(m.logits(&x)?);
        }
        Ok(out)
    }
}
