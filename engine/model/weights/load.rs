//! Loads the weights the parts declare (parts/tensors.rs, whose shapes `ModelConfig::from_gguf`
//! checked) onto the cards of a placement: the layers where the split puts them, the embedding
//! on the first card, the output norm and head on the last.

use super::{
    AttnWeights, DenseWeights, FfnWeights, HcMatrix, HcWeights, LayerWeights, MixerWeights,
    MoeWeights, ReadWeights, SubWeights, Weights,
};
use crate::gguf::Gguf;
use crate::kernels::embed::EmbedType;
use crate::kernels::{GgufBytes, QuantMatrix};
use crate::model::config::{names, ModelConfig};
use crate::model::parts::{Dense, Ffn, Mixer, Residual};
use crate::model::EngineError;
use crate::quant::type_id;
use crate::sycl::{Arena, DeviceBuffer, Queue};

/// Which card (an index into the queues given to `Weights::load_placed`) holds what: layer `il` on
/// `layer_card[il]`, the token embedding on the first card, output norm and head on the last.
pub struct Placement<'a> {
    pub queues: &'a [Queue],
    pub layer_card: Vec<usize>,
    /// Keep every matrix's GGUF bytes on the device beside its tiled copy (and read them, as
    /// before the tiled-only load): `STRATA_KEEP_GGUF=1`, an A/B and test knob
    /// (`EngineOptions::keep_gguf`). Matrices a GGUF-only kernel reads keep them anyway.
    pub keep_gguf: bool,
    /// Upload the Q8_0 copies of every hyper-connection down / up projection
    /// (`STRATA_HC_Q8=1`), beside the stored ones.
    pub hc_q8: bool,
}

/// Uploads tensors by name onto the cards, counting bytes per card.
struct Loader<'a> {
    g: &'a Gguf,
    arenas: Vec<Arena>,
    keep_gguf: bool,
    hc_q8: bool,
    bytes: Vec<usize>,
    /// Of `bytes`: the Q8_0 copies of the hyper-connection projections.
    q8_bytes: Vec<usize>,
    /// A site without Q8_0 copies was reported (one line per load, not per site).
    q8_warned: bool,
}

impl Loader<'_> {
    /// The (n_out, n_in) matrix `name` (dims checked by the tensor table) on `card`.
    fn matrix(
        &mut self,
        card: usize,
        name: &str,
        n_out: usize,
        n_in: usize,
    ) -> Result<QuantMatrix, EngineError> {
        let info = self.g.tensor(name)?;
        let data = self.g.tensor_data(info)?;
        let tid = info.ggml_type.id();
        // (KREG, STRATA_MMVQ_KREG=1, reads the K-quants' GGUF bytes in its decode products; the
        // prompt's matmul stays on the tiled copy: reading the GGUF bytes there made KREG's
        // prompts ~1.6x slower for the same bits)
        let gguf = match (self.keep_gguf, crate::kernels::mmvq_kreg::reads_gguf(tid)) {
            (true, _) => GgufBytes::Read,
            (false, true) => GgufBytes::Keep,
            (false, false) => GgufBytes::Drop,
        };
        let m = QuantMatrix::upload_for(&self.arenas[card], name, tid, n_out, n_in, data, gguf)?;
        self.bytes[card] += m.device_bytes();
        Ok(m)
    }

    /// The f32 vector `name` of `n` elements on `card`.
    fn vector(
        &mut self,
        card: usize,
        name: &str,
        n: usize,
    ) -> Result<DeviceBuffer<f32>, EngineError> {
        let info = self.g.tensor(name)?;
        if info.n_elements as usize != n {
            return Err(EngineError::Tensor {
                name: name.into(),
                why: format!("{} elements, expected {n}", info.n_elements),
            });
        }
        let mut v = vec![0f32; n];
        crate::quant::dequantize_by_type(info.ggml_type.id(), self.g.tensor_data(info)?, &mut v)?;
        self.bytes[card] += n * 4;
        Ok(self.arenas[card].upload(&v)?)
    }

    /// A stacked matrix `name` (n_out, n_in), its GGUF bytes only (`QuantMatrix::rows`).
    fn stacked(
        &mut self,
        card: usize,
        name: &str,
        n_out: usize,
        n_in: usize,
    ) -> Result<QuantMatrix, EngineError> {
        let info = self.g.tensor(name)?;
        let data = self.g.tensor_data(info)?;
        let tid = info.ggml_type.id();
        let m = QuantMatrix::upload_stacked(&self.arenas[card], name, tid, n_out, n_in, data)?;
        self.bytes[card] += m.device_bytes();
        Ok(m)
    }

    /// A hyper-connection matrix (n_out, n_in) as stored: F32, F16, BF16 or Q8_0.
    fn hc_matrix(
        &mut self,
        card: usize,
        name: &str,
        n_out: usize,
        n_in: usize,
    ) -> Result<HcMatrix, EngineError> {
        let info = self.g.tensor(name)?;
        let tid = info.ggml_type.id();
        if ![type_id::F32, type_id::F16, type_id::BF16, type_id::Q8_0].contains(&tid) {
            return Err(EngineError::Tensor {
                name: name.into(),
                why: format!(
                    "type {}: a hyper-connection matrix is read as F32, F16, BF16 or Q8_0",
                    info.ggml_type.name()
                ),
            });
        }
        let data = self.g.tensor_data(info)?;
        self.bytes[card] += data.len();
        Ok(HcMatrix {
            bytes: self.arenas[card].upload(data)?,
            type_id: tid,
            n_out,
            n_in,
        })
    }

    /// A read site: the norm `norm` (Single), or the mixer `{prefix}_{norm,down,up[,inject]}`.
    fn read(
        &mut self,
        c: &ModelConfig,
        card: usize,
        norm: &str,
        prefix: &str,
        inject: bool,
    ) -> Result<ReadWeights, EngineError> {
        let e = c.n_embd;
        let Residual::Hyper(h) = c.residual else {
            return Ok(ReadWeights::Norm(self.vector(card, norm, e)?));
        };
        let (s, r) = (h.streams, h.rank);
        let n = |w: &str| format!("{prefix}_{w}.weight");
        let down = self.hc_matrix(card, &n("down"), r, s * e)?;
        let up = self.hc_matrix(card, &n("up"), s * e, r)?;
        let q8 = match self.hc_q8 {
            true => self.hc_q8_pair(card, &n("down"), &n("up"), r, s * e),
            false => None,
        };
        Ok(ReadWeights::Hyper(HcWeights {
            gamma: self.vector(card, &n("norm"), s * e)?,
            down,
            up,
            inject: match inject {
                true => Some(self.hc_matrix(card, &n("inject"), s, s * e)?),
                false => None,
            },
            q8,
        }))
    }

    /// The Q8_0 copies of a site's (down, up), or None with one stderr line when one cannot be
    /// made (a row that is not whole Q8_0 blocks): the default read then runs at that site.
    fn hc_q8_pair(
        &mut self,
        card: usize,
        down: &str,
        up: &str,
        r: usize,
        sn: usize,
    ) -> Option<(DeviceBuffer<u8>, DeviceBuffer<u8>)> {
        let pair = self
            .hc_q8_copy(card, down, r, sn)
            .and_then(|d| Ok((d, self.hc_q8_copy(card, up, sn, r)?)));
        match pair {
            Ok(p) => Some(p),
            Err(e) => {
                if !std::mem::replace(&mut self.q8_warned, true) {
                    eprintln!(
                        "strata: STRATA_HC_Q8=1: {e}; the default read runs at the sites without \
                         a Q8_0 copy"
                    );
                }
                None
            }
        }
    }

    /// The Q8_0 copy (`kernels::hc_fast::q8_copy`: the file's own Q8_0 blocks, or its values
    /// quantized with ggml's rounding) of the hyper-connection matrix `name` on `card`.
    fn hc_q8_copy(
        &mut self,
        card: usize,
        name: &str,
        n_out: usize,
        n_in: usize,
    ) -> Result<DeviceBuffer<u8>, EngineError> {
        let info = self.g.tensor(name)?;
        let data = self.g.tensor_data(info)?;
        let copy = crate::kernels::hc_fast::q8_copy(info.ggml_type.id(), data, n_out, n_in)
            .map_err(|e| EngineError::Tensor {
                name: name.into(),
                why: format!("no Q8_0 copy: {e}"),
            })?;
        self.bytes[card] += copy.len();
        self.q8_bytes[card] += copy.len();
        Ok(self.arenas[card].upload(&copy)?)
    }

    fn dense(
        &mut self,
        card: usize,
        il: usize,
        suffix: &str,
        n_ff: usize,
        e: usize,
    ) -> Result<DenseWeights, EngineError> {
        let n = |w: &str| names::blk(il, &format!("{w}{suffix}"));
        Ok(DenseWeights {
            gate: self.matrix(card, &n("ffn_gate"), n_ff, e)?,
            up: self.matrix(card, &n("ffn_up"), n_ff, e)?,
            down: self.matrix(card, &n("ffn_down"), e, n_ff)?,
        })
    }

    fn layer(
        &mut self,
        c: &ModelConfig,
        il: usize,
        card: usize,
    ) -> Result<LayerWeights, EngineError> {
        let n = |w: &str| names::blk(il, w);
        let lc = &c.layers[il];
        let (e, hd, qd, kv) = (c.n_embd, c.head_dim, c.q_dim(), c.kv_dim());
        // (the vectors first, then the matrices: the arena order of the loader before parts)
        let qk_norm = match &lc.mixer.part {
            Mixer::Attention(a) if a.qk_norm => Some((
                self.vector(card, &n("attn_q_norm"), hd)?,
                self.vector(card, &n("attn_k_norm"), hd)?,
            )),
            Mixer::Attention(_) => None,
        };
        let mut post = |on: bool, w: &str| -> Result<Option<DeviceBuffer<f32>>, EngineError> {
            on.then(|| self.vector(card, &n(w), e)).transpose()
        };
        let mixer_post = post(lc.mixer.post_norm, "post_attention_norm")?;
        let ffn_post = post(lc.ffn.post_norm, "post_ffw_norm")?;
        let blk = format!("blk.{il}");
        let mixer_read = self.read(c, card, &n("attn_norm"), &format!("{blk}.hc_attn"), true)?;
        let ffn_read = self.read(c, card, &n("ffn_norm"), &format!("{blk}.hc_ffn"), true)?;
        let mixer = match &lc.mixer.part {
            Mixer::Attention(a) => MixerWeights::Attention(AttnWeights {
                // gated: (2 * n_head * head_dim, n_embd), [q | gate] per head
                wq: self.matrix(card, &n("attn_q"), qd * (1 + a.gated as usize), e)?,
                wk: self.matrix(card, &n("attn_k"), kv, e)?,
                wv: self.matrix(card, &n("attn_v"), kv, e)?,
                wo: self.matrix(card, &n("attn_output"), e, qd)?,
                qk_norm,
            }),
        };
        let ffn = match &lc.ffn.part {
            Ffn::Dense(Dense { n_ff, .. }) => {
                FfnWeights::Dense(self.dense(card, il, "", *n_ff, e)?)
            }
            Ffn::Moe(m) => {
                let (x, f) = (m.n_expert, m.n_ff);
                let (gate, up) = match m.fused_gate_up {
                    true => (
                        self.stacked(card, &n("ffn_gate_up_exps"), x * 2 * f, e)?,
                        None,
                    ),
                    false => (
                        self.stacked(card, &n("ffn_gate_exps"), x * f, e)?,
                        Some(self.stacked(card, &n("ffn_up_exps"), x * f, e)?),
                    ),
                };
                FfnWeights::Moe(MoeWeights {
                    router: self.matrix(card, &n("ffn_gate_inp"), x, e)?,
                    gate,
                    up,
                    down: self.stacked(card, &n("ffn_down_exps"), x * e, f)?,
                    shared: match m.shared_ff {
                        Some(s) => Some(self.dense(card, il, "_shexp", s, e)?),
                        None => None,
                    },
                    shared_gate: match m.shared_gate {
                        true => Some(self.matrix(card, &n("ffn_gate_inp_shexp"), 1, e)?),
                        false => None,
                    },
                    n_ff: f,
                })
            }
        };
        Ok(LayerWeights {
            mixer: SubWeights {
                read: mixer_read,
                part: mixer,
                post_norm: mixer_post,
            },
            ffn: SubWeights {
                read: ffn_read,
                part: ffn,
                post_norm: ffn_post,
            },
        })
    }
}

impl Weights {
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
        let mut ld = Loader {
            g,
            arenas: place.queues.iter().map(Arena::new).collect(),
            keep_gguf: place.keep_gguf,
            hc_q8: place.hc_q8,
            bytes: vec![0; n_cards],
            q8_bytes: vec![0; n_cards],
            q8_warned: false,
        };
        let e = cfg.n_embd;
        let layers = (0..cfg.n_layer)
            .map(|il| ld.layer(cfg, il, place.layer_card[il]))
            .collect::<Result<Vec<_>, _>>()?;
        let output_read = ld.read(cfg, last, names::OUTPUT_NORM, "output_hc", false)?;
        let output = match g.tensor_info(names::OUTPUT) {
            Some(_) => Some(ld.matrix(last, names::OUTPUT, cfg.n_vocab, e)?),
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
        // A tied head is repacked for the decode kernel; then the embedding (Q8_0) reads that
        // copy too, and the GGUF bytes stay on the host unless kept.
        let tiled = match output {
            Some(_) => None,
            None => crate::kernels::repack(embd_type_id, data, cfg.n_vocab, e),
        };
        let tiled_only = tiled.is_some() && embd_type == EmbedType::Q8_0 && !place.keep_gguf;
        let arenas = &ld.arenas;
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
        let mut card_bytes = ld.bytes;
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
            output_read,
            layers,
            bytes: card_bytes.iter().sum(),
            card_bytes,
            hc_q8_bytes: ld.q8_bytes,
        })
    }
}
