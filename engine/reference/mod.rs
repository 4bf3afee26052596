//! A plain, scalar, slow forward pass, for tests: weights dequantized to f32 by engine/quant,
//! f64 accumulation in every dot product and norm, keys and values rounded through f16 like the
//! device KV cache. The engine's logits are compared with these (tests/model_*.rs). It runs the
//! same parts as the device (engine/model/parts/), one file per part with the device's names
//! (`residual` / `hyper`, `attention`, `ffn` / `moe`; `weights` typed by part), so a new
//! architecture's reference is written in the same shape; the arithmetic is written
//! independently of the device's on purpose: it shares only `ModelConfig`, the parts'
//! declarations and the tensor names.
//!
//! `qwen4exp` (issue 25) follows llama.cpp 11434's graph (src/models/qwen4exp.cpp,
//! build_moe_ffn): S hyper-connection streams read by a mixer before each part and before the
//! head (`hyper`), gated attention with IMRoPE (`attention`, `ops::rope_sections`), the MoE FFN
//! with its gated shared expert (`moe`). tests/reference_qwen4exp.rs compares it with
//! llama.cpp's logits on the synthetic files.
//!
//! Matmul input rounding (`Rounding`): `RefModel::load(g, true)` is the engine's rule
//! (`Rounding::Engine`: llama.cpp's 8-bit blocks before quantized weights, f32 into float
//! weights); `load_with(g, Rounding::LlamaCpu)` is llama.cpp's CPU backend exactly, which also
//! rounds the activations into F16 / BF16 weights to f16 / bf16 (ggml's `vec_dot_type`).

mod attention;
mod ffn;
mod hyper;
mod moe;
pub mod ops;
mod residual;
pub mod weights;

use crate::gguf::Gguf;
use crate::model::config::{names, ModelConfig};
use crate::model::parts::{Ffn, Residual};
use ops::{InRound, Mat};
pub use weights::Rounding;
use weights::{matrix, tensor, vector, RefFfn, RefHcMix, RefLayer, RefMixer, RefRead};

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

/// How the residual is read before the LM head: the output norm, or the head's
/// hyper-connection mixer (`output_hc_*`, no injection).
enum HeadRead {
    Norm(Vec<f32>),
    Hyper(RefHcMix),
}

/// The whole model in f32. The token embedding stays as its GGUF bytes (dequantized a row at a
/// time: Gemma's is 262144 x 640) and serves as the output head when there is no output.weight.
pub struct RefModel {
    pub cfg: ModelConfig,
    embd_type: u32,
    embd_bytes: Vec<u8>,
    embd_row_bytes: usize,
    /// Rounding of the tied head's input.
    head_round: InRound,
    output: Option<Mat>,
    head_read: HeadRead,
    layers: Vec<RefLayer>,
}

impl RefModel {
    /// `act_round`: round matmul inputs like the engine's default (llama.cpp's 8-bit blocks
    /// before quantized weights: `Rounding::Engine`), or not at all.
    pub fn load(g: &Gguf, act_round: bool) -> Result<RefModel> {
        let round = match act_round {
            true => Rounding::Engine,
            false => Rounding::None,
        };
        Self::load_with(g, round)
    }

    /// The model with its matmul inputs rounded by `round`.
    pub fn load_with(g: &Gguf, round: Rounding) -> Result<RefModel> {
        let cfg = ModelConfig::from_gguf(g)?;
        let e = cfg.n_embd;
        let layers = (0..cfg.n_layer)
            .map(|il| weights::layer(g, &cfg, il, round))
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
            Some(_) => Some(matrix(g, names::OUTPUT, cfg.n_vocab, e, round)?),
            None => None,
        };
        let head_read = match cfg.residual {
            Residual::Single => HeadRead::Norm(vector(g, names::OUTPUT_NORM, e)?),
            Residual::Hyper(h) => HeadRead::Hyper(weights::hc_mix(
                g,
                &cfg,
                h,
                [
                    names::OUTPUT_HC_NORM,
                    names::OUTPUT_HC_DOWN,
                    names::OUTPUT_HC_UP,
                ],
                round,
            )?),
        };
        Ok(RefModel {
            head_read,
            embd_type,
            embd_bytes: bytes.to_vec(),
            embd_row_bytes,
            head_round: round.for_type(embd_type),
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

    /// The LM head on the read residual `h` (n_embd).
    fn logits(&self, h: &[f32]) -> Result<Vec<f32>> {
        if let Some(out) = &self.output {
            return Ok(out.mul(h));
        }
        let h = self.head_round.apply(h);
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
    /// When Some, every token's per-layer states on the one residual stream are appended, named
    /// as llama.cpp's graph names them (`inp_scaled`, `attn_norm-{il}`, `sa_out-{il}`,
    /// `ffn_norm-{il}`, `l_out-{il}`, `result_norm`; each (n_embd,)), to compare layer by layer
    /// with llama-eval-callback's dumps (docs/kld.md).
    pub trace: Option<Vec<(String, Vec<f32>)>>,
}

impl<'m> RefSession<'m> {
    /// Appends `v` under `name` when tracing.
    fn record(&mut self, name: impl FnOnce() -> String, v: &[f32]) {
        if let Some(t) = &mut self.trace {
            t.push((name(), v.to_vec()));
        }
    }

    pub fn new(model: &'m RefModel, n_ctx: usize) -> Self {
        let n = model.cfg.n_layer;
        RefSession {
            model,
            keys: vec![Vec::new(); n],
            values: vec![Vec::new(); n],
            n_ctx,
            trace: None,
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
            self.record(|| "inp_scaled".into(), &x);
            let h = match m.cfg.residual {
                Residual::Single => self.single(x, pos)?,
                Residual::Hyper(hc) => self.hyper(x, hc.streams, pos)?,
            };
            out.push(m.logits(&h)?);
        }
        Ok(out)
    }

    /// One token through the layers on the one residual stream; returns the head's input.
    fn single(&mut self, mut x: Vec<f32>, pos: usize) -> Result<Vec<f32>> {
        let m = self.model;
        let eps = m.cfg.rms_eps;
        for (il, layer) in m.layers.iter().enumerate() {
            // the mixer's sublayer, then the FFN's
            let h = residual::read(&x, norm(&layer.mixer.read, il)?, eps);
            self.record(|| format!("attn_norm-{il}"), &h);
            let o = self.mixer(il, &h, pos);
            residual::write(&mut x, o, layer.mixer.post_norm.as_deref(), eps);
            self.record(|| format!("sa_out-{il}"), &x);
            let h = residual::read(&x, norm(&layer.ffn.read, il)?, eps);
            self.record(|| format!("ffn_norm-{il}"), &h);
            let o = self.ffn(il, &h)?;
            residual::write(&mut x, o, layer.ffn.post_norm.as_deref(), eps);
            self.record(|| format!("l_out-{il}"), &x);
        }
        match &m.head_read {
            HeadRead::Norm(g) => {
                let h = residual::read(&x, g, eps);
                self.record(|| "result_norm".into(), &h);
                Ok(h)
            }
            HeadRead::Hyper(_) => Err(hyper_mismatch("the head")),
        }
    }

    /// One token through the layers on `s` hyper-connection streams: each read site first adds
    /// the previous part's pending write; returns the head mixer's output.
    fn hyper(&mut self, x: Vec<f32>, s: usize, pos: usize) -> Result<Vec<f32>> {
        let m = self.model;
        let eps = m.cfg.rms_eps;
        let mut h = hyper::embed(&x, s);
        let mut pending: Option<hyper::Write> = None;
        for (il, layer) in m.layers.iter().enumerate() {
            let w = site(&layer.mixer.read, il)?;
            let r = hyper::read(&mut h, pending.as_ref(), &w.mix, eps);
            let o = self.mixer(il, &r.mixed, pos);
            pending = Some(hyper::Write {
                a: hyper::inject(&r.normed, &w.inject),
                y: post(o, layer.mixer.post_norm.as_deref(), eps),
            });
            let w = site(&layer.ffn.read, il)?;
            let r = hyper::read(&mut h, pending.as_ref(), &w.mix, eps);
            let o = self.ffn(il, &r.mixed)?;
            pending = Some(hyper::Write {
                a: hyper::inject(&r.normed, &w.inject),
                y: post(o, layer.ffn.post_norm.as_deref(), eps),
            });
        }
        match &m.head_read {
            HeadRead::Hyper(mix) => Ok(hyper::read(&mut h, pending.as_ref(), mix, eps).mixed),
            HeadRead::Norm(_) => Err(hyper_mismatch("the head")),
        }
    }

    /// Layer `il`'s token mixer on its input `h`.
    fn mixer(&mut self, il: usize, h: &[f32], pos: usize) -> Vec<f32> {
        let m = self.model;
        let lc = &m.cfg.layers[il];
        let (keys, values) = (&mut self.keys[il], &mut self.values[il]);
        match &m.layers[il].mixer.part {
            RefMixer::Attention(a) => {
                attention::run(&m.cfg, a, lc.attention(), h, pos, keys, values)
            }
        }
    }

    /// Layer `il`'s FFN on its input `h`.
    fn ffn(&self, il: usize, h: &[f32]) -> Result<Vec<f32>> {
        let m = self.model;
        Ok(match (&m.layers[il].ffn.part, &m.cfg.layers[il].ffn.part) {
            (RefFfn::Dense(w), Ffn::Dense(d)) => ffn::dense(w, d, h),
            (RefFfn::Moe(w), Ffn::Moe(spec)) => moe::run(w, spec, h)?,
            _ => {
                return Err(RefError::Unsupported(format!(
                    "layer {il}: the loaded FFN is not the declared one"
                )))
            }
        })
    }
}

/// A Single layer's read norm.
fn norm(r: &RefRead, il: usize) -> Result<&[f32]> {
    match r {
        RefRead::Norm(g) => Ok(g),
        RefRead::Hyper(_) => Err(hyper_mismatch(&format!("layer {il}"))),
    }
}

/// A Hyper layer's read site.
fn site(r: &RefRead, il: usize) -> Result<&weights::RefHc> {
    match r {
        RefRead::Hyper(s) => Ok(s),
        RefRead::Norm(_) => Err(hyper_mismatch(&format!("layer {il}"))),
    }
}

/// The loader reads each sublayer as `cfg.residual` declares; a mismatch is a bug, reported
/// rather than run.
fn hyper_mismatch(what: &str) -> RefError {
    RefError::Unsupported(format!(
        "{what}: the loaded residual read is not the declared one"
    ))
}

/// A part's output through its post norm, when it has one (what the residual adds).
fn post(o: Vec<f32>, post: Option<&[f32]>, eps: f32) -> Vec<f32> {
    match post {
        Some(g) => ops::rms_norm(&o, g, eps),
        None => o,
    }
}
