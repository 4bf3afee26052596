//! The model's weights on the device: every matrix is its GGUF bytes uploaded once, unchanged
//! (ENGINE.md); norms are f32 vectors. Also the per-category memory accounting.

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
}

pub struct Weights {
    pub embd: DeviceBuffer<u8>, // (n_vocab, n_embd) GGUF bytes, on the first card
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
            None => WeightView {
                buf: self.head_embd.as_ref().unwrap_or(&self.embd),
                offset: 0,
                type_id: self.embd_type_id,
                n_out: cfg.n_vocab,
                n_in: cfg.n_embd,
                tiled: self.head_tiled.as_ref(),
            },
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
            let m =
                QuantMatrix::upload(&arenas[card], name, info.ggml_type.id(), n_out, n_in, data)?;
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
        let embd = arenas[first].upload(data)?;
        let head_embd = if output.is_none() && last != first {
            Some(arenas[last].upload(data)?)
        } else {
            None
        };
        let head_tiled = match output {
            Some(_) => None,
            None => match crate::kernels::repack(embd_type_id, data, cfg.n_vocab, e) {
                Some(t) => Some(arenas[last].upload(&t)?),
                None => None,
            },
        };
        let mut card_bytes: Vec<usize> = mbytes.iter().zip(&vbytes).map(|(m, v)| m + v).collect();
        card_bytes[first] += data.len();
        if head_embd.is_some() {
            card_bytes[last] += data.len();
        }
        card_bytes[last] += head_tiled.as_ref().map_or(0, |t| t.len());
        Ok(Weights {
            embd,
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

    /// Every ggml type used by a matrix, for building the kernels at load time.
    pub fn matrix_types(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down])
            .map(|m| m.type_id)
            .chain(std::iter::once(
                self.output
                    .as_ref()
                    .map(|m| m.type_id)
                    .unwrap_or(self.embd_type_id),
            ))
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}
