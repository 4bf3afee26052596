//! The parts a layer is made of, as an architecture declares them (engine/model/arch/): the
//! residual stream they read and write, a token mixer, an FFN, and the norms around each. A
//! layer is two residual sublayers, `x += post(part(read(x)))`: the mixer's, then the FFN's.
//! The device runs these declarations (engine/model/device/: one file per part, the plain
//! order of operations; engine/model/plan/: the fusions), and so does the Rust reference
//! (engine/reference/: the same files). What a part reads from the file is in `tensors`.

pub mod attention;
pub mod ffn;
pub mod tensors;

pub use attention::Attention;
pub use ffn::{Dense, Ffn, Moe};

/// How the residual stream is carried from part to part, through the layer split's hand-off,
/// the verify window and into the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residual {
    /// One vector of n_embd per token: a part reads it through an RMS norm and adds its output.
    Single,
    /// S hyper-connection streams of n_embd per token (`qwen4exp`). A part reads them through a
    /// mixer (per-stream RMS norm, a rank-r gate, a gated stream mean: docs/hyper-connections.md)
    /// instead of a norm, and its output is written into every stream scaled by the mixer's
    /// injection weight for that stream.
    Hyper(Hyper),
}

/// The hyper-connection geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hyper {
    /// S (`hyper_connection.count`, > 1).
    pub streams: usize,
    /// r (`hyper_connection.low_rank`, > 0).
    pub rank: usize,
}

impl Residual {
    /// Vectors of n_embd per token: what the scratch holds per row and what crosses cards.
    pub fn streams(self) -> usize {
        match self {
            Residual::Single => 1,
            Residual::Hyper(h) => h.streams,
        }
    }

    pub fn hyper(self) -> Option<Hyper> {
        match self {
            Residual::Hyper(h) => Some(h),
            Residual::Single => None,
        }
    }
}

/// The token mixer of a layer.
#[derive(Clone, Debug, PartialEq)]
pub enum Mixer {
    /// Causal (optionally windowed) attention over the KV cache.
    Attention(Attention),
    // Next: gated attention, Gated DeltaNet (linear attention with a recurrent state).
}

/// One residual sublayer: x += post_norm(part(rms_norm(x) * norm)), the norm weights read from
/// the file under the names `tensors` gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Sub<P> {
    pub part: P,
    /// The part's output goes through its own RMS norm before the add (Gemma's "sandwich").
    pub post_norm: bool,
}

/// One layer's parts and per-layer hyper-parameters (layers of one model may differ in kind
/// and width).
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub mixer: Sub<Mixer>,
    pub ffn: Sub<Ffn>,
}

impl Layer {
    /// An attention layer with a dense FFN, both sublayers with post norms or neither (llama's
    /// and Gemma 3's layers).
    pub fn attention_dense(attention: Attention, dense: Dense, post_norms: bool) -> Layer {
        Layer {
            mixer: Sub {
                part: Mixer::Attention(attention),
                post_norm: post_norms,
            },
            ffn: Sub {
                part: Ffn::Dense(dense),
                post_norm: post_norms,
            },
        }
    }

    /// The attention settings of an attention layer.
    pub fn attention(&self) -> &Attention {
        match &self.mixer.part {
            Mixer::Attention(a) => a,
        }
    }

    /// The FFN's widest hidden activation (the scratch is sized by it).
    pub fn ffn_width(&self) -> usize {
        self.ffn.part.width()
    }
}
