//! One card's device work for one step: the embedding (first card), the card's layers as a
//! sequence of parts, each ended by its residual write and the next part's read, and the head
//! on rows 0..n in place (last card, when the step wants those logits). The same launches
//! whether run directly or recorded into a graph (plan/graphs.rs).

use super::stage::Stage;
use super::{attention, ffn, head, hyper, residual, Input, LayerCtx, Out, Read};
use crate::model::config::ModelConfig;
use crate::model::parts::Residual;
use crate::model::weights::{
    FfnWeights, LayerWeights, MixerWeights, ReadWeights, SubWeights, Weights,
};
use crate::model::EngineError;
use crate::sycl::{DeviceBuffer, Queue};

use super::kernels::Kernels;
use super::scratch::Scratch;

pub struct StageStep<'a> {
    pub cfg: &'a ModelConfig,
    pub k: &'a Kernels,
    pub weights: &'a Weights,
    pub n_ctx: usize,
    /// this stage embeds the token ids (the first card)
    pub embed: bool,
    /// > 0 on the last card when the head runs on rows 0..head_rows in place
    pub head_rows: usize,
    pub t: usize,
}

/// One residual sublayer of a layer: the mixer's or the FFN's.
#[derive(Clone, Copy)]
pub(super) enum Part<'w> {
    Mixer(&'w SubWeights<MixerWeights>),
    Ffn(&'w SubWeights<FfnWeights>),
}

impl<'w> Part<'w> {
    /// The single-stream read: the part's norm and its first products.
    fn read(self) -> Result<Read<'w>, EngineError> {
        let (read, consumers) = match self {
            Part::Mixer(m) => (&m.read, m.part.first_products()),
            Part::Ffn(f) => (&f.read, f.part.first_products()),
        };
        let norm = read.norm().ok_or_else(|| {
            EngineError::Unsupported("a hyper-connection read on the single-stream path".into())
        })?;
        Ok(Read { norm, consumers })
    }

    pub(super) fn read_weights(self) -> &'w ReadWeights {
        match self {
            Part::Mixer(m) => &m.read,
            Part::Ffn(f) => &f.read,
        }
    }

    fn post_norm(self) -> Option<&'w DeviceBuffer<f32>> {
        match self {
            Part::Mixer(m) => m.post_norm.as_ref(),
            Part::Ffn(f) => f.post_norm.as_ref(),
        }
    }

    /// The part from its input to its pending last product (or its output, in s.o).
    pub(super) fn run(
        self,
        l: &LayerCtx,
        s: &mut Scratch,
        input: Input,
    ) -> Result<Out<'w>, EngineError> {
        let lc = &l.cfg.layers[l.il];
        match self {
            Part::Mixer(m) => match &m.part {
                MixerWeights::Attention(a) => {
                    attention::run(l, s, a, lc.attention(), input).map(Out::Product)
                }
            },
            Part::Ffn(f) => ffn::run(l, s, &f.part, &lc.ffn.part, input),
        }
    }
}

pub(super) fn parts(lw: &LayerWeights) -> [Part<'_>; 2] {
    [Part::Mixer(&lw.mixer), Part::Ffn(&lw.ffn)]
}

impl StageStep<'_> {
    pub fn run(&self, q: &Queue, st: &mut Stage) -> Result<(), EngineError> {
        match self.cfg.residual {
            Residual::Single => self.run_single(q, st),
            Residual::Hyper(h) => hyper::run(self, q, st, h),
        }
    }

    fn run_single(&self, q: &Queue, st: &mut Stage) -> Result<(), EngineError> {
        let (c, k, t) = (self.cfg, self.k, self.t);
        let s = &mut st.scratch;
        if self.embed {
            let (embd, embd_type) = self.weights.embedding()?;
            k.embed.run(
                q,
                embd,
                embd_type,
                c.n_vocab,
                c.n_embd,
                &s.ids,
                t,
                &s.x,
                c.embd_scale,
            )?;
        }
        // the card's parts in order, each with its layer
        let seq: Vec<(usize, Part)> = st
            .layers
            .clone()
            .flat_map(|il| parts(&self.weights.layers[il]).map(|p| (il, p)))
            .collect();
        let mut input = None;
        for (i, &(il, part)) in seq.iter().enumerate() {
            let j = il - st.layers.start;
            let l = LayerCtx {
                k,
                q,
                cfg: c,
                il,
                rope: &st.rope_tables[st.layer_rope[j]],
                kc: &st.state[j].k,
                vc: &st.state[j].v,
                n_ctx: self.n_ctx,
                t,
            };
            let inp = match input.take() {
                Some(inp) => inp,
                None => residual::read(&l, s, &part.read()?)?,
            };
            let Out::Product(pending) = part.run(&l, s, inp)? else {
                return Err(EngineError::Unsupported(format!(
                    "layer {il}: a part without a last product on the single-stream path"
                )));
            };
            let next = seq.get(i + 1).map(|&(_, p)| p.read()).transpose()?;
            input = residual::boundary(&l, s, pending, part.post_norm(), next.as_ref())?;
        }
        let n = self.head_rows;
        if n > 0 {
            head::norm_rows(k, q, c, self.weights, s, t)?;
            let logits = if n == 1 {
                &mut s.logits1
            } else {
                &mut s.logits
            };
            head::logits(k, q, c, self.weights, &s.h, &s.xq, &s.xst, logits, n)?;
        }
        Ok(())
    }
}
