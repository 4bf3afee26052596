//! The model's weights on the device, typed by part (engine/model/parts/): every matrix is its
//! GGUF bytes uploaded once, unchanged (ENGINE.md), or, for the formats the decode kernels read
//! repacked (tiled.rs, ktiled.rs), only that repacked copy: every default-path kernel reads it
//! with the same results, so the GGUF bytes would be a second copy of the weights
//! (`STRATA_KEEP_GGUF=1` keeps them, as before). Norms are f32 vectors. Also the per-category
//! memory accounting. The loader is `load.rs`.

mod load;

pub use load::Placement;

use super::config::{names, ModelConfig};
use super::EngineError;
use crate::kernels::embed::EmbedType;
use crate::kernels::{QuantMatrix, WeightView};
use crate::sycl::DeviceBuffer;

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
    /// Of `weights`: the Q8_0 copies of the hyper-connection projections `STRATA_HC_Q8=1` adds.
    pub hc_q8: usize,
}

impl DeviceMemory {
    pub fn total(&self) -> usize {
        self.weights + self.kv + self.scratch
    }
}

/// One residual sublayer's weights (`parts::Sub`).
pub struct SubWeights<P> {
    pub read: ReadWeights,
    pub part: P,
    pub post_norm: Option<DeviceBuffer<f32>>, // (n_embd) when the sublayer declares one
}

/// How a part reads the residual (`parts::Residual`).
pub enum ReadWeights {
    /// Single: the RMS norm weight (n_embd).
    Norm(DeviceBuffer<f32>),
    /// Hyper: the hyper-connection mixer's weights.
    Hyper(HcWeights),
}

/// A hyper-connection matrix as stored (F32 / F16 / BF16 / Q8_0): its GGUF bytes, read by the
/// HC kernels directly.
pub struct HcMatrix {
    pub bytes: DeviceBuffer<u8>,
    pub type_id: u32,
    pub n_out: usize,
    pub n_in: usize,
}

/// One hyper-connection read site: gamma, the down and up projections, the injection rows
/// (absent at the head).
pub struct HcWeights {
    pub gamma: DeviceBuffer<f32>, // (S, n_embd) stored folded (1 + w)
    pub down: HcMatrix,           // (r, S * n_embd)
    pub up: HcMatrix,             // (S * n_embd, r)
    pub inject: Option<HcMatrix>, // (S, S * n_embd)
    /// `STRATA_HC_Q8=1`: the Q8_0 copies of (down, up) the fast read takes in the decode and
    /// verify windows (`kernels::hc_fast::q8_copy`); the stored ones stay for the prompt path.
    pub q8: Option<(DeviceBuffer<u8>, DeviceBuffer<u8>)>,
}

impl ReadWeights {
    /// The RMS norm weight of a single-stream read.
    pub fn norm(&self) -> Option<&DeviceBuffer<f32>> {
        match self {
            ReadWeights::Norm(n) => Some(n),
            ReadWeights::Hyper(_) => None,
        }
    }
}

pub enum MixerWeights {
    Attention(AttnWeights),
}

pub struct AttnWeights {
    pub wq: QuantMatrix, // (n_head * head_dim, n_embd)
    pub wk: QuantMatrix, // (n_kv_head * head_dim, n_embd)
    pub wv: QuantMatrix, // (n_kv_head * head_dim, n_embd)
    pub wo: QuantMatrix, // (n_embd, n_head * head_dim)
    /// (q_norm, k_norm), each (head_dim), when the layer declares per-head q/k norms
    pub qk_norm: Option<(DeviceBuffer<f32>, DeviceBuffer<f32>)>,
}

// (one per layer: the variants' size difference costs nothing worth a box)
#[allow(clippy::large_enum_variant)]
pub enum FfnWeights {
    Dense(DenseWeights),
    Moe(MoeWeights),
}

pub struct DenseWeights {
    pub gate: QuantMatrix, // (n_ff, n_embd)
    pub up: QuantMatrix,   // (n_ff, n_embd)
    pub down: QuantMatrix, // (n_embd, n_ff)
}

/// The experts of one layer as stacked matrices, their GGUF bytes only (an expert is a slice by
/// byte offset, which the tiled copies' layout does not allow): expert e's rows of `gate`/`up`
/// are [e * n_ff, (e + 1) * n_ff), of `down` [e * n_embd, (e + 1) * n_embd). With the fused
/// `ffn_gate_up_exps`, `gate` holds expert e's gate rows at [2e n_ff, (2e + 1) n_ff) and its up
/// rows right after (`up` is None).
pub struct MoeWeights {
    pub router: QuantMatrix,     // (n_expert, n_embd)
    pub gate: QuantMatrix,       // (n_expert * n_ff, n_embd), fused: (n_expert * 2 n_ff, n_embd)
    pub up: Option<QuantMatrix>, // (n_expert * n_ff, n_embd)
    pub down: QuantMatrix,       // (n_expert * n_embd, n_ff)
    pub shared: Option<DenseWeights>,
    pub shared_gate: Option<QuantMatrix>, // (1, n_embd)
    pub n_ff: usize,
}

impl MoeWeights {
    /// Expert e's (gate, up, down) as views into the stacked matrices.
    pub fn expert(&self, e: usize) -> Result<[WeightView<'_>; 3], EngineError> {
        let f = self.n_ff;
        let (gate, up) = match &self.up {
            Some(up) => (self.gate.rows(e * f, f)?, up.rows(e * f, f)?),
            None => (
                self.gate.rows(2 * e * f, f)?,
                self.gate.rows((2 * e + 1) * f, f)?,
            ),
        };
        // (down is (n_expert * n_embd, n_ff): n_embd rows per expert)
        let d = self.down.n_out / self.router.n_out;
        Ok([gate, up, self.down.rows(e * d, d)?])
    }
}

pub struct LayerWeights {
    pub mixer: SubWeights<MixerWeights>,
    pub ffn: SubWeights<FfnWeights>,
}

impl MixerWeights {
    /// The products of the read's output (the consumers a fused read rounds for).
    pub fn first_products(&self) -> Vec<WeightView<'_>> {
        match self {
            MixerWeights::Attention(a) => vec![a.wq.view(), a.wk.view(), a.wv.view()],
        }
    }

    fn matrices(&self) -> Vec<&QuantMatrix> {
        match self {
            MixerWeights::Attention(a) => vec![&a.wq, &a.wk, &a.wv, &a.wo],
        }
    }
}

impl FfnWeights {
    pub fn first_products(&self) -> Vec<WeightView<'_>> {
        match self {
            FfnWeights::Dense(d) => vec![d.gate.view(), d.up.view()],
            FfnWeights::Moe(m) => vec![m.router.view()],
        }
    }

    fn matrices(&self) -> Vec<&QuantMatrix> {
        match self {
            FfnWeights::Dense(d) => d.matrices().to_vec(),
            FfnWeights::Moe(m) => {
                let mut v = vec![&m.router, &m.gate, &m.down];
                v.extend(m.up.iter());
                v.extend(m.shared.iter().flat_map(DenseWeights::matrices));
                v.extend(m.shared_gate.iter());
                v
            }
        }
    }
}

impl DenseWeights {
    fn matrices(&self) -> [&QuantMatrix; 3] {
        [&self.gate, &self.up, &self.down]
    }
}

impl LayerWeights {
    /// The matrix whose product ends each sublayer, with whether the sublayer has a post norm
    /// (the norm folds build a kernel per (format, post)).
    pub fn last_products(&self) -> Vec<(WeightView<'_>, bool)> {
        let MixerWeights::Attention(a) = &self.mixer.part;
        let mut v = vec![(a.wo.view(), self.mixer.post_norm.is_some())];
        if let FfnWeights::Dense(d) = &self.ffn.part {
            v.push((d.down.view(), self.ffn.post_norm.is_some()));
        }
        v
    }
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
    /// The head's read: output_norm, or the head's hyper-connection mixer.
    pub output_read: ReadWeights,
    pub layers: Vec<LayerWeights>,
    pub bytes: usize,
    /// Weight bytes per card (`bytes` is their sum, the tied head's copy included).
    pub card_bytes: Vec<usize>,
    /// Of `card_bytes`: the Q8_0 copies `STRATA_HC_Q8=1` adds, per card (0 without the flag).
    pub hc_q8_bytes: Vec<usize>,
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
                matmul_reads_gguf: true,
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

    /// The (down, inject, up) ggml types of every hyper-connection read site (the head's with no
    /// inject), each once.
    pub fn hc_types(&self) -> Vec<(u32, Option<u32>, u32)> {
        let reads = self
            .layers
            .iter()
            .flat_map(|l| [&l.mixer.read, &l.ffn.read])
            .chain(std::iter::once(&self.output_read));
        let mut v: Vec<(u32, Option<u32>, u32)> = reads
            .filter_map(|r| match r {
                ReadWeights::Hyper(h) => Some((
                    h.down.type_id,
                    h.inject.as_ref().map(|m| m.type_id),
                    h.up.type_id,
                )),
                ReadWeights::Norm(_) => None,
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Every (ggml type, GGUF bytes on the device, tiled copy on the device) a matrix has, the
    /// head included: what `MatrixKernels::prepare` builds the kernels for.
    pub fn matrix_layouts(&self, cfg: &ModelConfig) -> Vec<(u32, bool, bool)> {
        let mut t: Vec<(u32, bool, bool)> = self
            .layers
            .iter()
            .flat_map(|l| {
                let mut m = l.mixer.part.matrices();
                m.extend(l.ffn.part.matrices());
                m
            })
            .map(QuantMatrix::view)
            .chain(std::iter::once(self.head(cfg)))
            .map(|w| {
                (
                    w.type_id,
                    w.buf.is_some() && w.matmul_reads_gguf,
                    w.tiled.is_some(),
                )
            })
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }
}
