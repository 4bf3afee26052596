//! The model's weights on the device: every matrix is its GGUF bytes uploaded once, unchanged
//! (ENGINE.md), or, for the formats the decode kernels read repacked (tiled.rs, ktiled.rs), only
//! that repacked copy: every default-path kernel reads it with the same results, so the GGUF
//! bytes would be a second copy of the weights (`STRATA_KEEP_GGUF=1` keeps them, as before).
//! Norms are f32 vectors. Also the per-category memory accounting.

use super::config::{names, ModelConfig};
use super::EngineError;
use crate::gguf::{Arch, Gguf};
use crate::kernels::embed::EmbedType;
use crate::kernels::{QuantMatrix, WeightView};
use crate::quant::type_id;
use crate::sycl::{Arena, DeviceBuffer, Queue};

/// Device bytes held per category on one device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    pub device: String,
    /// Weight matrices, embedding and norm vectors.
    pub weights: usize,
    /// K and V caches.
    pub kv: usize,
    /// Activations, ids, positions, logits, RoPE tables.
    pub scratch: usize,
}

impl DeviceMemory {
    pub fn total(&self) -> usize {
        self.weights + self.kv + self.scratch
    }
}

pub struct LayerWeights {
    pub attn_norm: DeviceBuffer<f32>,              // (n_embd)
    pub wq: QuantMatrix,                           // (n_head * head_dim, n_embd)
    pub wk: QuantMatrix,                           // (n_kv_head * head_dim, n_embd)
    pub wv: QuantMatrix,                           // (n_kv_head * head_dim, n_embd)
    pub wo: QuantMatrix,                           // (n_embd, n_head * head_dim)
    pub q_norm: Option<DeviceBuffer<f32>>,         // (head_dim), Gemma
    pub k_norm: Option<DeviceBuffer<f32>>,         // (head_dim), Gemma
    pub post_attn_norm: Option<DeviceBuffer<f32>>, // (n_embd), Gemma
    pub ffn_norm: DeviceBuffer<f32>,               // (n_embd)
    pub gate: QuantMatrix,                         // (n_ff, n_embd)
    pub up: QuantMatrix,                           // (n_ff, n_embd)
    pub down: QuantMatrix,                         // (n_embd, n_ff)
    pub post_ffw_norm: Option<DeviceBuffer<f32>>,  // (n_embd), Gemma
}

/// Which card (an index into the queues given to `Weights::load_placed`) holds what: layer `il` on
/// `layer_card[il]`, the token embedding on the first card, output norm and head on the last.
pub struct Placement<'a> {
    pub queues: &'a [Queue],
    pub layer_card: Vec<usize>,
    /// Keep every matrix's GGUF bytes on the device beside its tiled copy (and read them, as
    /// before the tiled-only load): `STRATA_KEEP_GGUF=1`, an A/B and test knob
    /// (`EngineOptions::keep_gguf`). Matrices a GGUF-only kernel reads keep them anyway.
    pub keep_gguf: bool,
}

pub struct Weights {
    /// (n_vocab, n_embd) GGUF bytes, on the first card; None when the embedding is read from
    /// the tied head's tiled copy (`embedding`)
    pub embd: Option<DeviceBuffer<u8>>,
    /// The tied head's tiled copy on the first card, for the embedding, when the model is split
    /// and `embd` is None (unsplit, `head_tiled` serves both).
    pub embd_tiled: Option<DeviceBuffer<u8>>,
    /// A copy of the embedding on the last card when the head is tied to it and the model is
    /// split (the head runs where the last layer's output is). (n_vocab, n_embd)
    pub head_embd: Option<DeviceBuffer<u8>>,
    /// The tied head repacked one lane per row (`kernels::repack`) on the last card, for
    /// the decode kernel; None when the format has no tiled kernel or the head is untied.
    pub head_tiled: Option<DeviceBuffer<u8>>,
    pub embd_type: EmbedType,
    pub embd_type_id: u32,
    pub output: Option<QuantMatrix>, // (n_vocab, n_embd); None = tied to embd
    pub output_norm: DeviceBuffer<f32>, // (n_embd)
    pub layers: Vec<LayerWeights>,
    pub bytes: usize,
    /// Weight bytes per card (`bytes` is their sum, the tied head's copy included).
    pub card_bytes: Vec<usize>,
}

impl Weights {
    /// The output head: output.weight, or the token embedding when tied.
    pub fn head(&self, cfg: &ModelConfig) -> WeightView<'_> {
        match &self.output {
            Some(m) => m.view(),
            // (split: head_embd on the last card, or None when the tiled copy serves alone)
            None => WeightView {
                buf: self.head_embd.as_ref().or(self.embd.as_ref()),
                offset: 0,
                type_id: self.embd_type_id,
                n_out: cfg.n_vocab,
                n_in: cfg.n_embd,
                tiled: self.head_tiled.as_ref(),
            },
        }
    }

    /// The embedding's bytes on the first card and how the kernel reads them.
    pub fn embedding(&self) -> Result<(&DeviceBuffer<u8>, EmbedType), EngineError> {
        match (&self.embd, &self.embd_tiled, &self.head_tiled) {
            (Some(e), _, _) => Ok((e, self.embd_type)),
            (None, Some(t), _) | (None, None, Some(t)) => Ok((t, EmbedType::Q8_0Tiled)),
            // (load_placed drops `embd` only when one of the tiled copies serves it)
            (None, None, None) => Err(EngineError::Tensor {
                name: names::TOKEN_EMBD.into(),
                why: "neither its GGUF bytes nor a tiled copy are on the device".into(),
            }),
        }
    }

    /// Everything on the one queue `q`.
    pub fn load(g: &Gguf, cfg: &ModelConfig, q: &Queue) -> Result<Weights, EngineError> {
        Weights::load_placed(
            g,
            cfg,
            &Placement {
                queues: std::slice::from_ref(q),
                layer_card: vec![0; cfg.n_layer],
                keep_gguf: false,
            },
        )
    }

    pub fn load_placed(
        g: &Gguf,
        cfg: &ModelConfig,
        place: &Placement,
    ) -> Result<Weights, EngineError> {
        let n_cards = place.queues.len();
        if n_cards == 0
            || place.layer_card.len() != cfg.n_layer
            || place.layer_card.iter().any(|&c| c >= n_cards)
        {
            return Err(EngineError::Unsupported(format!(
                "a placement of {} layers over {n_cards} cards for a {}-layer model",
                place.layer_card.len(),
                cfg.n_layer
            )));
        }
        let (first, last) = (0, n_cards - 1);
        // one arena per card: the weights in huge-page blocks (sycl/arena.rs)
        let arenas: Vec<Arena> = place.queues.iter().map(Arena::new).collect();
        let mut mbytes = vec![0usize; n_cards];
        let mut matrix = |card: usize,
                          name: &str,
                          n_out: usize,
                          n_in: usize|
         -> Result<QuantMatrix, EngineError> {
            let info = g.tensor(name)?;
            if info.dims.len() != 2
                || info.dims[0] as usize != n_in
                || info.dims[1] as usize != n_out
            {
                return Err(EngineError::Tensor {
                    name: name.into(),
                    why: format!(
                        "dims {:?}, expected [{n_in}, {n_out}] (ne0 = n_in)",
                        info.dims
                    ),
                });
            }
            let data = g.tensor_data(info)?;
            let tid = info.ggml_type.id();
            // (KREG, STRATA_MMVQ_KREG=1, reads the K-quants' GGUF bytes)
            let keep = place.keep_gguf || crate::kernels::mmvq_kreg::reads_gguf(tid);
            let m = QuantMatrix::upload_for(&arenas[card], name, tid, n_out, n_in, data, keep)?;
            mbytes[card] += m.device_bytes();
            Ok(m)
        };
        let mut vbytes = vec![0usize; n_cards];
        let mut vector = |card: usize,
                          name: &str,
                          n: usize|
         -> Result<DeviceBuffer<f32>, EngineError> {
            let info = g.tensor(name)?;
            if info.n_elements as usize != n {
                return Err(EngineError::Tensor {
                    name: name.into(),
                    why: format!("{} elements, expected {n}", info.n_elements),
                });
            }
            let mut v = vec![0f32; n];
            crate::quant::dequantize_by_type(info.ggml_type.id(), g.tensor_data(info)?, &mut v)?;
            vbytes[card] += n * 4;
            Ok(arenas[card].upload(&v)?)
        };
        let (e, d, qd, kv, ff) = (
            cfg.n_embd,
            cfg.head_dim,
            cfg.q_dim(),
            cfg.kv_dim(),
            cfg.n_ff,
        );
        let gemma = cfg.arch == Arch::Gemma3;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for il in 0..cfg.n_layer {
            let n = |w: &str| names::blk(il, w);
            let c = place.layer_card[il];
            let mut opt = |w: &str, len| -> Result<Option<DeviceBuffer<f32>>, EngineError> {
                if gemma {
                    vector(c, &n(w), len).map(Some)
                } else {
                    Ok(None)
                }
            };
            let q_norm = opt("attn_q_norm", d)?;
            let k_norm = opt("attn_k_norm", d)?;
            let post_attn_norm = opt("post_attention_norm", e)?;
            let post_ffw_norm = opt("post_ffw_norm", e)?;
            layers.push(LayerWeights {
                attn_norm: vector(c, &n("attn_norm"), e)?,
                ffn_norm: vector(c, &n("ffn_norm"), e)?,
                q_norm,
                k_norm,
                post_attn_norm,
                post_ffw_norm,
                wq: matrix(c, &n("attn_q"), qd, e)?,
                wk: matrix(c, &n("attn_k"), kv, e)?,
                wv: matrix(c, &n("attn_v"), kv, e)?,
                wo: matrix(c, &n("attn_output"), e, qd)?,
                gate: matrix(c, &n("ffn_gate"), ff, e)?,
                up: matrix(c, &n("ffn_up"), ff, e)?,
                down: matrix(c, &n("ffn_down"), e, ff)?,
            });
        }
        let output_norm = vector(last, names::OUTPUT_NORM, e)?;
        let output = match g.tensor_info(names::OUTPUT) {
            Some(_) => Some(matrix(last, names::OUTPUT, cfg.n_vocab, e)?),
            None => None,
        };
        let info = g.tensor(names::TOKEN_EMBD)?;
        let embd_type_id = info.ggml_type.id();
        let embd_type = match embd_type_id {
            type_id::Q8_0 => EmbedType::Q8_0,
            type_id::F16 => EmbedType::F16,
            type_id::F32 => EmbedType::F32,
            _ => {
                return Err(EngineError::Tensor {
                    name: names::TOKEN_EMBD.into(),
                    why: format!(
                        "type {} has no embedding kernel (Q8_0, F16, F32)",
                        info.ggml_type.name()
                    ),
                })
            }
        };
        let data = g.tensor_data(info)?;
        if info.dims.len() != 2
            || info.dims[0] as usize != e
            || info.dims[1] as usize != cfg.n_vocab
        {
            return Err(EngineError::Tensor {
                name: names::TOKEN_EMBD.into(),
                why: format!("dims {:?}, expected [{e}, {}]", info.dims, cfg.n_vocab),
            });
        }
        // A tied head is repacked for the decode kernel; then the embedding (Q8_0) reads that
        // copy too, and the GGUF bytes stay on the host unless kept.
        let tiled = match output {
            Some(_) => None,
            None => crate::kernels::repack(embd_type_id, data, cfg.n_vocab, e),
        };
        let tiled_only = tiled.is_some() && embd_type == EmbedType::Q8_0 && !place.keep_gguf;
        let head_tiled = tiled.as_ref().map(|t| arenas[last].upload(t)).transpose()?;
        let (embd, embd_tiled) = match (&tiled, tiled_only) {
            (Some(t), true) if last != first => (None, Some(arenas[first].upload(t)?)),
            (_, true) => (None, None),
            (_, false) => (Some(arenas[first].upload(data)?), None),
        };
        let head_embd = if output.is_none() && last != first && !tiled_only {
            Some(arenas[last].upload(data)?)
        } else {
            None
        };
        let mut card_bytes: Vec<usize> = mbytes.iter().zip(&vbytes).map(|(m, v)| m + v).collect();
        let len = |b: &Option<DeviceBuffer<u8>>| b.as_ref().map_or(0, |b| b.len());
        card_bytes[first] += len(&embd) + len(&embd_tiled);
        card_bytes[last] += len(&head_embd) + len(&head_tiled);
        Ok(Weights {
            embd,
            embd_tiled,
            head_embd,
            head_tiled,
            embd_type,
            embd_type_id,
            output,
            output_norm,
            layers,
            bytes: card_bytes.iter().sum(),
            card_bytes,
        })
    }

    /// Every (ggml type, GGUF bytes on the device, tiled copy on the device) a matrix has, the
    /// head included: what `MatrixKernels::prepare` builds the kernels for.
    pub fn matrix_layouts(&self, cfg: &ModelConfig) -> Vec<(u32, bool, bool)> {
        let mut t: Vec<(u32, bool, bool)> = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down])
            .map(QuantMatrix::view)
            .chain(std::iter::once(self.head(cfg)))
            .map(|w| (w.type_id, w.buf.is_some(), w.tiled.is_some()))
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}
