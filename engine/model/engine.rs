//! The engine loop: one model on one or more cards, one sequence. Weights are uploaded once; the
//! KV cache and every scratch buffer are allocated once for (n_ctx, chunk); `forward` runs T tokens
//! at positions p.. in chunks (matmul above 8 rows, mmvq at 8 or fewer, via `MatrixKernels::mul`)
//! and returns logits for the rows asked for. Rolling back = calling `forward` with an earlier
//! start position: the cache rows past it are simply overwritten.
//!
//! Layer split: each card is a `Stage` holding a contiguous layer range with its weights, KV cache
//! and scratch; the embedding runs on the first, output norm and head on the last, and the
//! (T, n_embd) residual rows cross from card to card through pinned host memory (docs/engine.md,
//! "Layer split across cards"). The kernels are the same on every card, so the logits are bitwise
//! those of one card.

use super::config::ModelConfig;
use super::weights::{DeviceMemory, LayerWeights, Placement, Weights};
use super::{gemma3, llama, EngineError};
use crate::gguf::{Arch, Gguf};
use crate::kernels::act::Elementwise;
use crate::kernels::actq::{ActQ, ActRound};
use crate::kernels::attn_prefill::AttnDispatch;
use crate::kernels::embed::Embed;
use crate::kernels::glu_q8::GluQ8;
use crate::kernels::kv::KvStore;
use crate::kernels::norm::Norm;
use crate::kernels::norm_q8::NormQ8;
use crate::kernels::qmatrix::MMVQ_MAX_T;
use crate::kernels::rope::{Rope, RopeMode, RopeTable};
use crate::kernels::rope_kv::{QkNorm, RopeKv, RopeKvShape};
use crate::kernels::{tiled, vnni};
use crate::kernels::{MatmulTile, MatrixKernels, NormTail, WeightView, XStage};
use crate::sycl::{copy_across_n, Card, DeviceBuffer, Graph, HostBuffer, Queue};
use half::f16;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

/// Rows of logits computed per head call (the speculative verify window fits in one).
pub const LOGIT_ROWS: usize = 8;

#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// KV cache length; 0 = min(4096, the model's trained context).
    pub n_ctx: usize,
    /// Rows per prefill step (scratch buffers are sized by it).
    pub chunk: usize,
    /// Round matmul inputs through 8-bit blocks as llama.cpp does (`actq`); off = f32 inputs.
    pub act_round: bool,
    /// Keep the GGUF bytes of the matrices with a tiled copy on the device too, and read them
    /// where a kernel can read either (the prompt's matmul, the embedding): the load before
    /// tiled-only weights, the same results with twice the weight memory. An A/B and test knob;
    /// `STRATA_KEEP_GGUF=1` turns it on as well (model/weights.rs).
    pub keep_gguf: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            n_ctx: 0,
            chunk: 256,
            act_round: true,
            keep_gguf: false,
        }
    }
}

/// The kernel families one forward pass uses, built once.
pub struct Kernels {
    pub mat: MatrixKernels,
    pub embed: Embed,
    pub norm: Norm,
    pub rope: Rope,
    pub kv: KvStore,
    pub attn: AttnDispatch,
    pub act: Elementwise,
    pub actq: ActQ,
    pub act_round: bool,
    /// Fused small kernels (norm + rounding, activation + rounding, rope + KV store) where they
    /// apply; off = the unfused sequence, bitwise the same results (`Engine::set_fused`).
    pub fused: bool,
    pub norm_q8: NormQ8,
    pub glu_q8: GluQ8,
    pub rope_kv: RopeKv,
    /// The fused rounding kernels also stage their output for the decode products
    /// (engine/kernels/xstage.rs): the same bits, fewer instructions per weight block.
    /// `STRATA_XSTAGE=0` turns it off (a measurement knob, docs/performance.md).
    pub xstage: bool,
    /// The norms after the output and down projections in those products' launches
    /// (`MatrixKernels::mmvq_residual_norm` for llama, `mmvq_post_norm` for Gemma 3), where the
    /// fused path would launch them after the product: the same bits, fewer launches. `STRATA_FOLD_NORMS=0` turns it off (a
    /// measurement knob, docs/performance.md).
    pub fold_norms: bool,
}

impl Kernels {
    /// The stage a fused rounding kernel writes for `t` rows of `n` elements and the products
    /// by `ws` after it read: blocks of 32, decode-sized t (the products are mmvq's), staging
    /// on, and one of `ws` a tiled format that reads it (`tiled::reads_stage`; a Q8_0-only
    /// consumer would leave the stage unread). With the integer-dot products on (vnni.rs), also
    /// blocks of 256 when a K-quant product reads the records.
    pub fn stage<'a>(
        &self,
        buf: &'a DeviceBuffer<f32>, // Scratch::xst
        m: ActRound,
        ws: &[&WeightView],
        t: usize,
        n: usize,
    ) -> Option<XStage<'a>> {
        // the prompt's rows (t > 8) only for the integer-dot products, which take any t
        if !self.xstage || (t > MMVQ_MAX_T && !self.mat.int_dot()) {
            return None;
        }
        // XStage::new fails only if `buf` is short, and Scratch::xst is sized for 8 rows of the
        // widest input; with None the products stage x themselves: the same bits either way
        match m {
            ActRound::Q8Block32 => {
                // (Q8_0 reads no stage in the float kernels, only in the integer-dot ones)
                let int_dot = self.mat.int_dot();
                let read = ws.iter().any(|w| {
                    w.tiled.is_some()
                        && (tiled::reads_stage(w.type_id)
                            || (int_dot && vnni::stage_block(w.type_id) == Some(32)))
                });
                // the integer records only for the integer-dot products (the default path
                // neither writes nor reads them)
                let make = if int_dot {
                    XStage::with_records
                } else {
                    XStage::new
                };
                read.then(|| make(buf, t * n).ok()).flatten()
            }
            ActRound::Q8Block256 => {
                // only the integer-dot products read records of 256 (Scratch::xst holds them:
                // floats_k(n) <= floats(n))
                let read = self.mat.int_dot()
                    && ws
                        .iter()
                        .any(|w| w.tiled.is_some() && vnni::stage_block(w.type_id) == Some(256));
                read.then(|| XStage::new_k(buf, t * n).ok()).flatten()
            }
            ActRound::None => None,
        }
    }

    /// The stage an unfused rounding (`ActQ::run_staged`) of `t` rows of `n` writes for the
    /// product by `w`: only with the integer-dot products on (STRATA_VNNI=1), where the fused
    /// kernels do not serve: blocks of 256 (`fused_glu_round` takes only 32), the prompt's rows
    /// (t > 8), the attention output when the prompt's attention does not round it, the head.
    fn unfused_stage<'a>(
        &self,
        buf: &'a DeviceBuffer<f32>, // Scratch::xst
        w: &WeightView,
        t: usize,
        n: usize,
    ) -> Option<XStage<'a>> {
        let m = ActRound::for_type(w.type_id);
        let on = self.act_round && self.mat.int_dot() && m != ActRound::None;
        on.then(|| self.stage(buf, m, &[w], t, n)).flatten()
    }

    /// x rounded for `w` into `xq` per `ActRound::for_type` when rounding is on (else x itself),
    /// and its stage in `xst` when the integer-dot products read one (`unfused_stage`; `xst`
    /// None: never staged).
    pub(crate) fn round_input<'a>(
        &self,
        q: &Queue,
        w: &WeightView,
        x: &'a DeviceBuffer<f32>,           // (t, n_in)
        xq: &'a DeviceBuffer<f32>,          // (>= t * n_in) rounding scratch
        xst: Option<&'a DeviceBuffer<f32>>, // Scratch::xst
        t: usize,
    ) -> Result<(&'a DeviceBuffer<f32>, Option<XStage<'a>>), EngineError> {
        let mode = if self.act_round {
            ActRound::for_type(w.type_id)
        } else {
            ActRound::None
        };
        if mode == ActRound::None {
            return Ok((x, None));
        }
        let (n, st) = (
            t * w.n_in,
            xst.and_then(|b| self.unfused_stage(b, w, t, w.n_in)),
        );
        match st {
            Some(st) => self.actq.run_staged(q, x, xq, n, st)?,
            None => self.actq.run(q, mode, x, xq, n)?,
        }
        Ok((xq, st))
    }

    /// y = W x for `t` rows, x first rounded into `xq` (and staged into `xst` for the
    /// integer-dot products, STRATA_VNNI=1) as `round_input` says.
    #[allow(clippy::too_many_arguments)]
    pub fn mul(
        &self,
        q: &Queue,
        w: &WeightView,
        x: &DeviceBuffer<f32>,           // (t, n_in)
        xq: &DeviceBuffer<f32>,          // (>= t * n_in) rounding scratch
        xst: Option<&DeviceBuffer<f32>>, // Scratch::xst, or None: never staged
        y: &mut DeviceBuffer<f32>,       // (t, n_out)
        t: usize,
    ) -> Result<(), EngineError> {
        let (input, st) = self.round_input(q, w, x, xq, xst, t)?;
        self.mat.mul_staged(q, w, input, st, y, t)?;
        Ok(())
    }
}

impl Kernels {
    /// Several products of the same input (q/k/v, gate/up): the input is rounded once when
    /// every weight wants the same rounding (one launch instead of one per matrix), and the
    /// matrices with a tiled layout of one format share one `mmvq_group` launch at t <= 8; the
    /// rest go one by one. Results are bitwise those of separate `mul` calls.
    pub fn mul_same_x(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,                              // (t, n_in)
        xq: &DeviceBuffer<f32>,                             // (>= t * n_in) rounding scratch
        outs: &mut [(&WeightView, &mut DeviceBuffer<f32>)], // (n_out, n_in), (t, n_out)
        t: usize,
    ) -> Result<(), EngineError> {
        let mode = |w: &WeightView| {
            if self.act_round {
                ActRound::for_type(w.type_id)
            } else {
                ActRound::None
            }
        };
        let Some(first) = outs.first() else {
            return Ok(());
        };
        let m0 = mode(first.0);
        let n_in = first.0.n_in;
        if outs.iter().any(|(w, _)| mode(w) != m0 || w.n_in != n_in) {
            for (w, y) in outs.iter_mut() {
                self.mul(q, w, x, xq, None, y, t)?;
            }
            return Ok(());
        }
        let input = if m0 == ActRound::None {
            x
        } else {
            self.actq.run(q, m0, x, xq, t * n_in)?;
            xq
        };
        self.mul_rounded(q, input, None, outs, t)
    }

    /// The rounding a fused kernel can write for products of one input by `ws` (q/k/v,
    /// gate/up, down): fusion on, rounding on, every weight the same mode (not `None`) and the
    /// same n_in, a multiple of the block. None = take the unfused path.
    pub fn fused_round(&self, ws: &[&WeightView]) -> Option<ActRound> {
        let first = ws.first()?;
        if !self.fused || !self.act_round {
            return None;
        }
        let m = ActRound::for_type(first.type_id);
        let same = ws
            .iter()
            .all(|w| ActRound::for_type(w.type_id) == m && w.n_in == first.n_in);
        (m != ActRound::None && same && first.n_in % m.block() == 0).then_some(m)
    }

    /// `fused_round` for the gated activation feeding the down product `w`, where `glu_q8` is
    /// measured faster than the unfused pair (`cargo bench --bench float_kernels -- fused`):
    /// blocks of 32 up to 8 rows (1.4x at t = 1..8, but 1.7x slower at 256). Not blocks of 256
    /// (Gemma's K-quant down): that variant's loads compile to gathers, a tie at t = 1 with
    /// launches and 1.8-2.6x slower at t >= 8 (docs/kernels.md). Either path gives the same bits.
    pub fn fused_glu_round(&self, w: &WeightView, t: usize) -> Option<ActRound> {
        self.fused_round(&[w])
            .filter(|&m| m == ActRound::Q8Block32 && t <= 8)
    }

    /// y = W xq for each output, `xq` already rounded for these weights (see `fused_round`), or
    /// f32 when rounding is off. Matrices with a tiled layout of one format share one
    /// `mmvq_group` launch at t <= 8 (up to 3); the rest go one by one. Bitwise separate calls.
    /// `st`: xq's stage, when the kernel that rounded it wrote one (`stage`).
    pub fn mul_rounded(
        &self,
        q: &Queue,
        xq: &DeviceBuffer<f32>, // (t, n_in) rounded
        st: Option<XStage>,     // xq staged, (t * n_in) elements
        outs: &mut [(&WeightView, &mut DeviceBuffer<f32>)], // (n_out, n_in), (t, n_out)
        t: usize,
    ) -> Result<(), EngineError> {
        let input = xq;
        // matrices of one tiled format together (order of launches is free: outputs disjoint)
        let mut groups: Vec<Vec<(&WeightView, &mut DeviceBuffer<f32>)>> = Vec::new();
        for (w, y) in outs.iter_mut() {
            let w: &WeightView = w;
            let same = |g: &Vec<(&WeightView, &mut DeviceBuffer<f32>)>| {
                g.len() < 3
                    && w.tiled.is_some()
                    && g[0].0.tiled.is_some()
                    && g[0].0.type_id == w.type_id
            };
            match groups.iter_mut().find(|g| same(g)) {
                Some(g) => g.push((w, &mut **y)),
                None => groups.push(vec![(w, &mut **y)]),
            }
        }
        for g in groups.iter_mut() {
            if g.len() > 1 && t <= MMVQ_MAX_T && self.mat.mmvq_group(q, input, st, g, t)? {
                continue;
            }
            for (w, y) in g.iter_mut() {
                self.mat.mul_staged(q, w, input, st, y, t)?;
            }
        }
        Ok(())
    }

    /// y = y + W x (the residual add after a projection) for `t` rows, x rounded into `xq` as
    /// in `mul`. One launch at t <= 8 when W has a tiled layout (`mmvq_residual`), else the
    /// product into `tmp` and an add; bitwise the same either way.
    #[allow(clippy::too_many_arguments)]
    pub fn mul_residual(
        &self,
        q: &Queue,
        w: &WeightView,
        x: &DeviceBuffer<f32>,           // (t, n_in)
        xq: &DeviceBuffer<f32>,          // (>= t * n_in) rounding scratch
        xst: Option<&DeviceBuffer<f32>>, // Scratch::xst, or None: never staged
        tmp: &mut DeviceBuffer<f32>,     // (>= t * n_out) product scratch of the fallback
        y: &mut DeviceBuffer<f32>,       // (t, n_out) residual in, residual + W x out
        t: usize,
    ) -> Result<(), EngineError> {
        let (input, st) = self.round_input(q, w, x, xq, xst, t)?;
        self.mul_rounded_residual(q, w, input, st, tmp, y, t)
    }

    /// `mul_residual` with the input already rounded for W (see `fused_round`), or f32 when
    /// rounding is off; `st` as in `mul_rounded`.
    #[allow(clippy::too_many_arguments)]
    pub fn mul_rounded_residual(
        &self,
        q: &Queue,
        w: &WeightView,
        xq: &DeviceBuffer<f32>,      // (t, n_in)
        st: Option<XStage>,          // xq staged, (t * n_in) elements
        tmp: &mut DeviceBuffer<f32>, // (>= t * n_out) product scratch of the fallback
        y: &mut DeviceBuffer<f32>,   // (t, n_out) residual in, residual + W x out
        t: usize,
    ) -> Result<(), EngineError> {
        if t <= MMVQ_MAX_T && self.mat.mmvq_residual(q, w, xq, st, y, t)? {
            return Ok(());
        }
        // (a stage at t > 8 is the integer-dot products', which read it for the prompt's rows)
        self.mat.mul_staged(q, w, xq, st, tmp, t)?;
        self.act.add(q, y, tmp, y, t * w.n_out)?;
        Ok(())
    }
}

/// Activations for up to `rows` tokens, all (rows, width) f32, token-major.
pub struct Scratch {
    pub rows: usize,
    pub x: DeviceBuffer<f32>,    // (rows, n_embd) residual stream
    pub h: DeviceBuffer<f32>,    // (rows, n_embd) normed input of a block
    pub q: DeviceBuffer<f32>,    // (rows, n_head * head_dim)
    pub k: DeviceBuffer<f32>,    // (rows, n_kv_head * head_dim)
    pub v: DeviceBuffer<f32>,    // (rows, n_kv_head * head_dim)
    pub att: DeviceBuffer<f32>,  // (rows, n_head * head_dim)
    pub o: DeviceBuffer<f32>,    // (rows, n_embd) block output
    pub gate: DeviceBuffer<f32>, // (rows, n_ff)
    pub up: DeviceBuffer<f32>,   // (rows, n_ff)
    pub xq: DeviceBuffer<f32>,   // (rows, max(n_embd, q_dim, n_ff)) rounded matmul input
    /// xq's stage (xstage.rs) for up to MMVQ_MAX_T rows: (min(rows, 8) * width * 33 / 32)
    pub xst: DeviceBuffer<f32>,
    pub ids: DeviceBuffer<i32>, // (rows)
    pub pos: DeviceBuffer<i32>, // (rows)
    /// (1) the arrival counter of the launches with a norm folded in (`NormTail`): zero
    /// between launches
    pub arrivals: DeviceBuffer<u32>,
    sel1: DeviceBuffer<f32>, // (1, n_embd) the row the head runs on when one is wanted
    sel: DeviceBuffer<f32>,  // (LOGIT_ROWS, n_embd)
    logits1: DeviceBuffer<f32>, // (1, n_vocab)
    logits: DeviceBuffer<f32>, // (LOGIT_ROWS, n_vocab)
    bytes: usize,
}

impl Scratch {
    /// `head`: this card runs the output head (only then are the logits buffers full size).
    fn new(
        q: &Queue,
        c: &ModelConfig,
        (rows, stage_rows): (usize, usize),
        head: bool,
    ) -> Result<Scratch, EngineError> {
        let n_vocab = if head { c.n_vocab } else { 1 };
        let mut bytes = 0;
        let mut f = |n: usize| -> Result<DeviceBuffer<f32>, EngineError> {
            bytes += n * 4;
            Ok(q.alloc::<f32>(n)?)
        };
        let s = Scratch {
            rows,
            x: f(rows * c.n_embd)?,
            h: f(rows * c.n_embd)?,
            q: f(rows * c.q_dim())?,
            k: f(rows * c.kv_dim())?,
            v: f(rows * c.kv_dim())?,
            att: f(rows * c.q_dim())?,
            o: f(rows * c.n_embd)?,
            gate: f(rows * c.n_ff)?,
            up: f(rows * c.n_ff)?,
            xq: f(rows * c.n_embd.max(c.q_dim()).max(c.n_ff))?,
            xst: f(XStage::floats(
                stage_rows * c.n_embd.max(c.q_dim()).max(c.n_ff),
            ))?,
            sel1: f(c.n_embd)?,
            sel: f(LOGIT_ROWS * c.n_embd)?,
            logits1: f(n_vocab)?,
            logits: f(LOGIT_ROWS * n_vocab)?,
            ids: q.alloc::<i32>(rows)?,
            pos: q.alloc::<i32>(rows)?,
            arrivals: q.upload(&[0u32])?,
            bytes: 0,
        };
        Ok(Scratch {
            bytes: bytes + rows * 8 + 4,
            ..s
        })
    }
}

/// What a layer function needs: the kernels, the queue, config, its weights and cache, scratch.
pub struct LayerCtx<'a> {
    pub k: &'a Kernels,
    pub q: &'a Queue,
    pub cfg: &'a ModelConfig,
    pub il: usize,
    pub w: &'a LayerWeights,
    pub rope: &'a RopeTable,
    pub kc: &'a DeviceBuffer<f16>, // (n_kv_head, n_ctx, head_dim)
    pub vc: &'a DeviceBuffer<f16>, // (n_kv_head, n_ctx, head_dim)
    pub n_ctx: usize,
    pub t: usize,
    /// The next layer on this card (None: the last of the card's range), whose input norm the
    /// layer may fold into its last launch (llama: `layer` returns true when it did).
    pub next: Option<&'a LayerWeights>,
    /// s.xq already holds this layer's input norm, rounded for q/k/v and staged as
    /// `norm_products` would write them (the previous layer folded it in).
    pub pre_normed: bool,
}

impl LayerCtx<'_> {
    /// The attention core both architectures share: [per-head RMS norms of q and k (Gemma:
    /// `qk_norm` = (q_norm, k_norm) weights (head_dim)),] RoPE on q and k (s.q, s.k: (t, heads *
    /// head_dim)), k and v stored into this layer's f16 cache at s.pos, then causal attention
    /// (this layer's window) into s.att (t, n_head * head_dim). Fused: one `rope_kv` launch
    /// before the attention (s.k then stays unrotated: only the cache reads it). With `round`
    /// and a call the one-launch attention takes, the output goes to s.xq rounded for the
    /// output projection instead (staged into `st` too, when given), and the result is true.
    pub fn rope_store_attend(
        &self,
        s: &Scratch,
        qk_norm: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>,
        round: Option<ActRound>,
        st: Option<XStage>, // (t * n_head * head_dim) elements
    ) -> Result<bool, EngineError> {
        let (k, q, c, t) = (self.k, self.q, self.cfg, self.t);
        let mode = Engine::rope_mode(c);
        let (kc, vc, n_ctx) = (self.kc, self.vc, self.n_ctx);
        if k.fused {
            let nq = qk_norm.map(|(q_w, k_w)| QkNorm {
                q_w,
                k_w,
                eps: c.rms_eps,
            });
            let shape = RopeKvShape {
                t,
                n_head: c.n_head,
                n_kv_head: c.n_kv_head,
                head_dim: c.head_dim,
                n_ctx,
            };
            k.rope_kv.run(
                q,
                mode,
                nq.as_ref(),
                &s.q,
                &s.k,
                &s.v,
                kc,
                vc,
                &s.pos,
                self.rope,
                shape,
            )?;
        } else {
            if let Some((q_w, k_w)) = qk_norm {
                let hd = c.head_dim;
                k.norm
                    .rms_norm(q, &s.q, q_w, &s.q, t * c.n_head, hd, c.rms_eps)?;
                k.norm
                    .rms_norm(q, &s.k, k_w, &s.k, t * c.n_kv_head, hd, c.rms_eps)?;
            }
            k.rope
                .run(q, mode, &s.q, &s.pos, self.rope, t, c.n_head, c.head_dim)?;
            k.rope
                .run(q, mode, &s.k, &s.pos, self.rope, t, c.n_kv_head, c.head_dim)?;
            k.kv.run(
                q,
                &s.k,
                &s.v,
                kc,
                vc,
                &s.pos,
                t,
                c.n_kv_head,
                c.head_dim,
                n_ctx,
            )?;
        }
        let window = c.layers[self.il].window;
        if let Some(m) = round.filter(|m| k.attn.can_round(t, c.n_head, m.block())) {
            let block = m.block();
            k.attn.decode.run_rounded(
                q,
                &s.q,
                kc,
                vc,
                &s.pos,
                &s.xq,
                t,
                c.n_head,
                c.n_kv_head,
                n_ctx,
                window,
                c.attn_scale,
                block,
                st,
            )?;
            return Ok(true);
        }
        k.attn.run(
            q,
            &s.q,
            kc,
            vc,
            &s.pos,
            &s.att,
            t,
            c.n_head,
            c.n_kv_head,
            n_ctx,
            window,
            c.attn_scale,
        )?;
        Ok(false)
    }

    /// h = rms_norm(x) * norm, then the products of h into `outs` (q/k/v): with `fused_round`
    /// for them the norm writes their rounded input straight into `xq` (h is read by nothing
    /// else), else it writes `h` and `mul_same_x` rounds it. The same bits either way. `xst`:
    /// the stage the fused norm also writes for the products (`Kernels::stage`).
    #[allow(clippy::too_many_arguments)]
    pub fn norm_products(
        &self,
        x: &DeviceBuffer<f32>,                              // (t, n_embd)
        norm: &DeviceBuffer<f32>,                           // (n_embd)
        h: &DeviceBuffer<f32>,                              // (t, n_embd)
        xq: &DeviceBuffer<f32>,                             // (t, n_embd) rounded input
        xst: &DeviceBuffer<f32>,                            // Scratch::xst
        outs: &mut [(&WeightView, &mut DeviceBuffer<f32>)], // (n_out, n_embd), (t, n_out)
    ) -> Result<(), EngineError> {
        let (k, q, c, t) = (self.k, self.q, self.cfg, self.t);
        let ws: Vec<&WeightView> = outs.iter().map(|(w, _)| *w).collect();
        if let Some(m) = k.fused_round(&ws) {
            let st = k.stage(xst, m, &ws, t, c.n_embd);
            k.norm_q8
                .rms_norm(q, x, norm, xq, t, c.n_embd, c.rms_eps, m.block(), st)?;
            k.mul_rounded(q, xq, st, outs, t)
        } else {
            k.norm.rms_norm(q, x, norm, h, t, c.n_embd, c.rms_eps)?;
            k.mul_same_x(q, h, xq, outs, t)
        }
    }

    /// The attention core and the output projection into s.o: with `fused_round` for Wo, the
    /// attention launch writes its output already rounded for Wo (one launch fewer), else the
    /// product rounds s.att itself. The same bits either way.
    pub fn attend_project(
        &self,
        s: &mut Scratch,
        qk_norm: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>,
        wo: &WeightView,
    ) -> Result<(), EngineError> {
        let (k, c) = (self.k, self.cfg);
        let m = k.fused_round(&[wo]);
        let st = m.and_then(|m| k.stage(&s.xst, m, &[wo], self.t, c.n_head * c.head_dim));
        let rounded = self.rope_store_attend(s, qk_norm, m, st)?;
        self.project(s, wo, rounded)
    }

    /// s.o = Wo times the attention's output: s.xq and its stage when the attention rounded
    /// it for Wo (`rounded`), else s.att, which the product rounds itself.
    fn project(&self, s: &mut Scratch, wo: &WeightView, rounded: bool) -> Result<(), EngineError> {
        let (k, q, c, t) = (self.k, self.q, self.cfg, self.t);
        if let Some(m) = k.fused_round(&[wo]).filter(|_| rounded) {
            // the stage the attention wrote (attend_project's)
            let st = k.stage(&s.xst, m, &[wo], t, c.n_head * c.head_dim);
            k.mul_rounded(q, &s.xq, st, &mut [(wo, &mut s.o)], t)
        } else {
            k.mul(q, wo, &s.att, &s.xq, Some(&s.xst), &mut s.o, t)
        }
    }

    /// `attend_project`, then the residual update and the norm after it: llama (`post` None)
    /// x += o; Gemma (`post` = post_attention_norm) x += rms_norm(o) * post; then xq =
    /// round_32(rms_norm(x) * norm), staged for the products `next` (gate/up) as
    /// `Kernels::stage` says. In the projection's launch where `mmvq_residual_norm` (llama) or
    /// `mmvq_post_norm` (Gemma) takes it (`Kernels::fold_norms`), else the projection into s.o
    /// and `NormQ8::add_rms_norm` / `norm_add_norm`. The same bits either way.
    #[allow(clippy::too_many_arguments)]
    pub fn attend_project_add_norm(
        &self,
        s: &mut Scratch,
        qk_norm: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>,
        wo: &WeightView,                  // (n_embd, n_head * head_dim)
        post: Option<&DeviceBuffer<f32>>, // (n_embd) Gemma's post_attention_norm
        norm: &DeviceBuffer<f32>,         // (n_embd)
        next: &[&WeightView],             // the products of xq, rounded in blocks of 32 for them
    ) -> Result<(), EngineError> {
        let (k, q, c, t) = (self.k, self.q, self.cfg, self.t);
        let m = k.fused_round(&[wo]);
        let st = m.and_then(|m| k.stage(&s.xst, m, &[wo], t, c.n_head * c.head_dim));
        // decided before the attention runs: the fold reads the output rounded for Wo
        let fold = k.fold_norms
            && m.is_some()
            && match post {
                None => k.mat.residual_norm_takes(wo, st, t),
                Some(_) => k.mat.post_norm_takes(wo, t),
            };
        // (false: the attention could not round its output for Wo, and wrote s.att)
        let rounded = self.rope_store_attend(s, qk_norm, m, st)?;
        if fold && rounded {
            let tail = NormTail {
                counter: &s.arrivals,
                w: norm,
                yq: &s.xq,
                st: k.stage(&s.xst, ActRound::Q8Block32, next, t, c.n_embd),
                eps: c.rms_eps,
            };
            let took = match post {
                None => k
                    .mat
                    .mmvq_residual_norm(q, wo, &s.xq, st, &mut s.x, &tail, t)?,
                Some(pw) => k
                    .mat
                    .mmvq_post_norm(q, wo, &s.xq, &mut s.o, pw, &mut s.x, &tail, t)?,
            };
            if took {
                return Ok(());
            }
        }
        self.project(s, wo, rounded)?;
        let (n, eps) = (c.n_embd, c.rms_eps);
        let st2 = k.stage(&s.xst, ActRound::Q8Block32, next, t, n);
        match post {
            None => k
                .norm_q8
                .add_rms_norm(q, &s.x, &s.o, norm, &s.xq, t, n, eps, 32, st2)?,
            Some(pw) => k
                .norm_q8
                .norm_add_norm(q, &s.o, pw, &s.x, norm, &s.xq, t, n, eps, 32, st2)?,
        }
        Ok(())
    }

    /// Whether the next layer's input norm may be folded into this layer's last launch:
    /// folding on, and that norm on `norm_products`' fused path rounding in blocks of 32 (what
    /// the fold writes). Its stage: `Kernels::stage` for the next q/k/v.
    pub fn next_prenorm(&self) -> Option<&LayerWeights> {
        self.next.filter(|nw| {
            let (nq, nk, nv) = (nw.wq.view(), nw.wk.view(), nw.wv.view());
            self.k.fold_norms && self.k.fused_round(&[&nq, &nk, &nv]) == Some(ActRound::Q8Block32)
        })
    }

    /// The products of this layer's input norm into q/k/v: `norm_products`, or with
    /// `pre_normed` (the previous layer's fold wrote s.xq and its stage) the products alone.
    pub fn qkv(&self, s: &mut Scratch) -> Result<(), EngineError> {
        let (k, q, c, w, t) = (self.k, self.q, self.cfg, self.w, self.t);
        let (wq, wk, wv) = (w.wq.view(), w.wk.view(), w.wv.view());
        let outs = &mut [(&wq, &mut s.q), (&wk, &mut s.k), (&wv, &mut s.v)];
        if self.pre_normed {
            let st = k.stage(&s.xst, ActRound::Q8Block32, &[&wq, &wk, &wv], t, c.n_embd);
            k.mul_rounded(q, &s.xq, st, outs, t)
        } else {
            self.norm_products(&s.x, &w.attn_norm, &s.h, &s.xq, &s.xst, outs)
        }
    }

    /// The tail of the next layer's input norm `nw.attn_norm` into xq (Scratch::xq), staged
    /// in xst (Scratch::xst) for its q/k/v; `arrivals`: Scratch::arrivals. (Fields, not the
    /// Scratch: the fold's product writes other fields of it.)
    pub fn next_norm_tail<'b>(
        &self,
        arrivals: &'b DeviceBuffer<u32>,
        xq: &'b DeviceBuffer<f32>,
        xst: &'b DeviceBuffer<f32>,
        nw: &'b LayerWeights,
    ) -> NormTail<'b> {
        let (nq, nk, nv) = (nw.wq.view(), nw.wk.view(), nw.wv.view());
        let (t, n) = (self.t, self.cfg.n_embd);
        NormTail {
            counter: arrivals,
            w: &nw.attn_norm,
            yq: xq,
            st: self
                .k
                .stage(xst, ActRound::Q8Block32, &[&nq, &nk, &nv], t, n),
            eps: self.cfg.rms_eps,
        }
    }
}

/// One card's share of the model: a contiguous range of layers (their weights live in
/// `Engine::weights`, uploaded to this card), their KV cache, the RoPE tables they use, and the
/// card's own activation scratch.
struct Stage {
    card: Card,
    layers: Range<usize>,
    /// One table per distinct RoPE base among this stage's layers; `layer_rope[il - start]`.
    rope_tables: Vec<RopeTable>,
    layer_rope: Vec<usize>,
    kcache: Vec<DeviceBuffer<f16>>, // per layer of the range (n_kv_head, n_ctx, head_dim)
    vcache: Vec<DeviceBuffer<f16>>,
    scratch: Scratch,
}

impl Stage {
    fn new(
        card: Card,
        layers: Range<usize>,
        cfg: &ModelConfig,
        n_ctx: usize,
        (rows, stage_rows): (usize, usize), // scratch rows, of which the stage buffer's
        head: bool,
    ) -> Result<Stage, EngineError> {
        let q = card.queue.clone();
        let mut rope_tables: Vec<RopeTable> = Vec::new();
        let mut layer_rope = Vec::with_capacity(layers.len());
        for lc in &cfg.layers[layers.clone()] {
            let base = lc.rope_base as f64;
            let i = match rope_tables.iter().position(|t| t.base() == base) {
                Some(i) => i,
                None => {
                    rope_tables.push(RopeTable::new(&q, base, cfg.n_rot)?);
                    rope_tables.len() - 1
                }
            };
            layer_rope.push(i);
        }
        let per_layer = cfg.n_kv_head * n_ctx * cfg.head_dim;
        let mut kcache = Vec::with_capacity(layers.len());
        let mut vcache = Vec::with_capacity(layers.len());
        for _ in layers.clone() {
            kcache.push(q.alloc::<f16>(per_layer)?);
            vcache.push(q.alloc::<f16>(per_layer)?);
        }
        let scratch = Scratch::new(&q, cfg, (rows, stage_rows), head)?;
        Ok(Stage {
            card,
            layers,
            rope_tables,
            layer_rope,
            kcache,
            vcache,
            scratch,
        })
    }
}

/// Contiguous layer ranges for `n_cards` cards: `counts` layers per card when given (they must
/// add up to `n_layer`, each at least 1), else an even split with the remainder on the first
/// cards (the last card also runs the head).
pub fn layer_ranges(
    n_layer: usize,
    n_cards: usize,
    counts: Option<&[usize]>,
) -> Result<Vec<Range<usize>>, EngineError> {
    if n_cards == 0 || n_cards > n_layer {
        return Err(EngineError::Unsupported(format!(
            "splitting {n_layer} layers over {n_cards} cards (each card needs at least one layer)"
        )));
    }
    let counts: Vec<usize> = match counts {
        Some(c) => {
            if c.len() != n_cards || c.contains(&0) || c.iter().sum::<usize>() != n_layer {
                return Err(EngineError::Unsupported(format!(
                    "layer split {c:?}: need {n_cards} counts of at least 1 adding up to {n_layer} layers"
                )));
            }
            c.to_vec()
        }
        None => (0..n_cards)
            .map(|i| n_layer / n_cards + usize::from(i < n_layer % n_cards))
            .collect(),
    };
    let mut start = 0;
    Ok(counts
        .iter()
        .map(|&n| {
            start += n;
            start - n..start
        })
        .collect())
}

/// A loaded model with its KV cache and scratch: the unit `strata run`, `bench`, `nll` and the
/// engine process drive.
pub struct Engine {
    pub cfg: ModelConfig,
    /// One per card, in layer order; stage 0 embeds, the last runs the head.
    stages: Vec<Stage>,
    kernels: Kernels,
    weights: Weights,
    /// Pinned host memory the residual rows cross cards through: (rows, n_embd) f32 as bytes.
    /// None on one card.
    staging: Option<HostBuffer<u8>>,
    n_ctx: usize,
    pos: usize,
    file_bytes: u64,
    n_params: u64,
    graphs: StepGraphs,
}

impl Engine {
    /// Loads `path` onto `card`.
    pub fn load(path: &Path, card: Card, opts: &EngineOptions) -> Result<Engine, EngineError> {
        let g = Gguf::open(path)?;
        Engine::from_gguf(&g, card, opts)
    }

    /// Loads `path` split over `cards` (see `from_gguf_split`).
    pub fn load_split(
        path: &Path,
        cards: Vec<Card>,
        layers: Option<&[usize]>,
        opts: &EngineOptions,
    ) -> Result<Engine, EngineError> {
        let g = Gguf::open(path)?;
        Engine::from_gguf_split(&g, cards, layers, opts)
    }

    pub fn from_gguf(g: &Gguf, card: Card, opts: &EngineOptions) -> Result<Engine, EngineError> {
        Engine::from_gguf_split(g, vec![card], None, opts)
    }

    /// The model over `cards` (all of one context, e.g. `Card::split_cpu`): contiguous layer
    /// ranges, `layers[i]` layers on card i (None = an even split; see `layer_ranges`).
    pub fn from_gguf_split(
        g: &Gguf,
        cards: Vec<Card>,
        layers: Option<&[usize]>,
        opts: &EngineOptions,
    ) -> Result<Engine, EngineError> {
        let cfg = ModelConfig::from_gguf(g)?;
        if cfg.rope_scale != 1.0 {
            return Err(EngineError::Unsupported(
                "RoPE scaling (rope.scaling.factor)".into(),
            ));
        }
        let n_ctx = if opts.n_ctx == 0 {
            cfg.n_ctx_train.min(4096)
        } else {
            opts.n_ctx
        };
        // positions the model never saw; and a huge value would fail as an allocation error
        // that names neither the context nor the model, so this comes before any allocation
        if n_ctx > cfg.n_ctx_train {
            return Err(EngineError::CtxPastTraining {
                ctx: n_ctx,
                train: cfg.n_ctx_train,
            });
        }
        if opts.chunk == 0 {
            return Err(EngineError::Unsupported("a prefill chunk of 0 rows".into()));
        }
        let ranges = layer_ranges(cfg.n_layer, cards.len(), layers)?;
        // Replaying recorded steps pays on GPUs (one submission of a command list); the OpenCL
        // CPU runtime re-enqueues every command of a graph and measured slower that way
        // (docs/performance.md), so there it is opt-in.
        let on_cpu = cards[0]
            .device
            .info()
            .is_ok_and(|i| i.device_type == crate::sycl::DeviceType::Cpu);
        let graphs_default = !on_cpu;
        if on_cpu {
            // The thread that loads is the one that runs the steps (the server's worker, the
            // CLI's main thread): keep it off the runtime's pinned worker (sycl/affinity.rs).
            if let Some(cpus) = crate::sycl::affinity::pin_off_workers() {
                tracing::info!(?cpus, "host thread pinned off the OpenCL CPU workers");
            }
        }
        // One context: the modules are built once and serve every card's queue.
        let ctx = cards[0].context.clone();
        if cards.iter().any(|c| c.context.id() != ctx.id()) {
            return Err(EngineError::Unsupported(
                "cards of different SYCL contexts (split one device: Card::split_cpu)".into(),
            ));
        }
        let queues: Vec<Queue> = cards.iter().map(|c| c.queue.clone()).collect();
        let mut layer_card = vec![0; cfg.n_layer];
        for (i, r) in ranges.iter().enumerate() {
            layer_card[r.clone()].fill(i);
        }
        let weights = Weights::load_placed(
            g,
            &cfg,
            &Placement {
                queues: &queues,
                layer_card,
                keep_gguf: opts.keep_gguf || crate::flags::on(crate::flags::table::KEEP_GGUF),
            },
        )?;
        // the prompt path's register tile: the device's, unless STRATA_MATMUL_TILE forces one
        let mut mat = MatrixKernels::with_matmul_tile(&ctx, MatmulTile::for_context_or_env(&ctx)?);
        tracing::info!(tile = %mat.matmul_tile().label(), "matmul register tile");
        // STRATA_VNNI=1: the integer-dot decode products (not bitwise the default; refused with
        // the reason where they cannot run)
        if crate::kernels::vnni::requested() {
            mat.set_int_dot(true)?;
            let isa = mat.int_dot_isa().map_or("?", |i| i.label());
            tracing::info!(isa, "integer-dot products on (STRATA_VNNI=1)");
        }
        let kernels = Kernels {
            mat,
            embed: Embed::new(&ctx)?,
            norm: Norm::new(&ctx)?,
            rope: Rope::new(&ctx)?,
            kv: KvStore::new(&ctx)?,
            attn: AttnDispatch::new(&ctx, cfg.head_dim)?,
            act: Elementwise::new(&ctx)?,
            actq: ActQ::new(&ctx)?,
            act_round: opts.act_round,
            fused: true,
            xstage: crate::flags::on(crate::flags::table::XSTAGE),
            fold_norms: crate::flags::on(crate::flags::table::FOLD_NORMS),
            norm_q8: NormQ8::new(&ctx)?,
            glu_q8: GluQ8::new(&ctx)?,
            rope_kv: RopeKv::new(&ctx)?,
        };
        kernels.mat.prepare(&weights.matrix_layouts(&cfg))?;
        if kernels.fold_norms && kernels.fused && opts.act_round {
            // the modules of the folded projections (Wo, Wdown), built now rather than in the
            // first token's time (Gemma 3's down is Q4_K or Q6_K by layer: all distinct types)
            let mut seen = Vec::new();
            for lw in &weights.layers {
                for w in [lw.wo.view(), lw.down.view()] {
                    if !seen.contains(&w.type_id) {
                        seen.push(w.type_id);
                        kernels
                            .mat
                            .prepare_norm_fold(&w, cfg.arch == Arch::Gemma3)?;
                    }
                }
            }
        }
        let rows = opts.chunk.max(LOGIT_ROWS);
        let n_cards = cards.len();
        let stages = cards
            .into_iter()
            .zip(ranges)
            .enumerate()
            .map(|(i, (card, r))| {
                // the stage buffer: decode rows, or every chunk row when the integer-dot
                // products read the prompt's rows too (STRATA_VNNI=1)
                let stage_rows = if kernels.mat.int_dot() {
                    rows
                } else {
                    rows.min(MMVQ_MAX_T)
                };
                Stage::new(card, r, &cfg, n_ctx, (rows, stage_rows), i + 1 == n_cards)
            })
            .collect::<Result<Vec<_>, _>>()?;
        for st in &stages {
            // graphs capture the attention scratch pointer: size it for the widest step now
            kernels
                .attn
                .decode
                .reserve(&st.card.queue, LOGIT_ROWS, cfg.n_head, n_ctx)?;
        }
        let staging = if n_cards > 1 {
            Some(
                stages[0]
                    .card
                    .queue
                    .alloc_host::<u8>(rows * cfg.n_embd * 4)?,
            )
        } else {
            None
        };
        let n_params = g.tensors().iter().map(|t| t.n_elements).sum();
        Ok(Engine {
            cfg,
            stages,
            kernels,
            weights,
            staging,
            n_ctx,
            pos: 0,
            file_bytes: g.file_len(),
            n_params,
            graphs: StepGraphs {
                on: graphs_default,
                map: HashMap::new(),
            },
        })
    }

    /// The first card's queue (every kernel of a one-card engine runs on it; `bench --profile`
    /// traces it and refuses a split).
    pub fn queue(&self) -> &Queue {
        &self.stages[0].card.queue
    }

    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Positions filled in the KV cache (the next token's position).
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Forgets the sequence (the cache rows are overwritten by the next forward).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    pub fn n_params(&self) -> u64 {
        self.n_params
    }

    /// The first card's device name, with the card count when split.
    pub fn device_name(&self) -> String {
        let name = card_name(&self.stages[0].card);
        match self.stages.len() {
            1 => name,
            n => format!("{name} x{n}"),
        }
    }

    /// Cards the model is split over (1 = not split).
    pub fn n_cards(&self) -> usize {
        self.stages.len()
    }

    /// The layer range of each card.
    pub fn layer_split(&self) -> Vec<Range<usize>> {
        self.stages.iter().map(|s| s.layers.clone()).collect()
    }

    /// Bytes per card by category. Scratch includes the RoPE tables and, on the first card, the
    /// pinned host staging area of a split.
    pub fn memory(&self) -> Vec<DeviceMemory> {
        self.stages
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let kv = st.kcache.iter().chain(&st.vcache).map(|b| b.bytes()).sum();
                let rope = st.rope_tables.len() * self.cfg.n_rot / 2 * 4;
                let staging = match (&self.staging, i) {
                    (Some(b), 0) => b.bytes(),
                    _ => 0,
                };
                DeviceMemory {
                    device: card_name(&st.card),
                    weights: self.weights.card_bytes[i],
                    kv,
                    scratch: st.scratch.bytes + rope + staging,
                }
            })
            .collect()
    }

    /// Runs `tokens` at positions `start_pos..start_pos + tokens.len()` and returns the logits
    /// of the rows `want` (indices into `tokens`, ascending), each n_vocab long. `start_pos` may
    /// be at most `pos()` (rolling back drops the later positions).
    pub fn forward(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        want: &[usize],
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        let end = start_pos + tokens.len();
        if start_pos > self.pos {
            return Err(EngineError::Gap {
                start_pos,
                pos: self.pos,
            });
        }
        if end > self.n_ctx {
            return Err(EngineError::ContextFull {
                start_pos,
                n_tokens: tokens.len(),
                n_ctx: self.n_ctx,
            });
        }
        if let Some(&bad) = want.iter().find(|&&r| r >= tokens.len()) {
            return Err(EngineError::Rows {
                row: bad,
                n_tokens: tokens.len(),
            });
        }
        if want.windows(2).any(|w| w[0] >= w[1]) {
            return Err(EngineError::Unsupported(
                "logit rows not in ascending order".into(),
            ));
        }
        if let Some((i, &t)) = tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= self.cfg.n_vocab)
        {
            return Err(EngineError::Token {
                index: i,
                token: t,
                n_vocab: self.cfg.n_vocab,
            });
        }
        // A failed step leaves the cache in an unknown state past start_pos.
        self.pos = start_pos;
        let mut out = Vec::with_capacity(want.len());
        let rows = self.stages[0].scratch.rows;
        for (ci, chunk) in tokens.chunks(rows).enumerate() {
            let r0 = ci * rows;
            let p0 = start_pos + r0;
            let local: Vec<usize> = want
                .iter()
                .filter(|&&r| r >= r0 && r < r0 + chunk.len())
                .map(|&r| r - r0)
                .collect();
            // The decode step and the verify window want the logits of rows 0..n: the head then
            // runs on the normed rows in place, inside the step (and its graph).
            let n = local.len();
            let direct = n > 0 && n <= LOGIT_ROWS && local.iter().enumerate().all(|(i, &r)| i == r);
            self.run_chunk(chunk, p0, if direct { n } else { 0 })?;
            if direct {
                let last = &self.stages[self.stages.len() - 1];
                let s = &last.scratch;
                let buf = if n == 1 { &s.logits1 } else { &s.logits };
                let l = last.card.queue.to_vec_prefix(buf, n * self.cfg.n_vocab)?;
                push_rows(&l, self.cfg.n_vocab, &local, p0, &mut out)?;
            } else if !local.is_empty() {
                self.head(chunk.len(), &local, p0, &mut out)?;
            }
            self.pos = p0 + chunk.len();
        }
        Ok(out)
    }

    /// Turns the recording and replay of steps of up to `LOGIT_ROWS` rows on or off (default:
    /// on for GPUs, off for the CPU device; `--graphs` / `--no-graphs`). Off drops the graphs.
    pub fn set_step_graphs(&mut self, on: bool) {
        self.graphs.on = on;
        self.graphs.map.clear();
    }

    /// Whether steps are replayed from recorded graphs.
    pub fn step_graphs_on(&self) -> bool {
        self.graphs.on
    }

    /// Steps recorded so far (one per stage, row count and head rows seen).
    pub fn step_graphs(&self) -> usize {
        self.graphs.map.len()
    }

    /// All layers for `t` tokens at positions p0..; leaves the final hidden states in the last
    /// stage's scratch.x, and with `head_rows` > 0 the logits of rows 0..head_rows in its
    /// logits1 (one row) or logits buffer. Between stages the t residual rows cross through the
    /// staging memory. Steps of at most `LOGIT_ROWS` rows are replayed from a recorded graph.
    fn run_chunk(
        &mut self,
        tokens: &[u32],
        p0: usize,
        head_rows: usize,
    ) -> Result<(), EngineError> {
        let t = tokens.len();
        let ids: Vec<i32> = tokens.iter().map(|&x| x as i32).collect();
        let pos: Vec<i32> = (0..t).map(|i| (p0 + i) as i32).collect();
        let n_stages = self.stages.len();
        for si in 0..n_stages {
            let (done, rest) = self.stages.split_at_mut(si);
            let st = &mut rest[0];
            let q = st.card.queue.clone();
            if si == 0 {
                q.upload_prefix(&st.scratch.ids, &ids)?;
            } else {
                let prev = &done[si - 1].scratch.x; // (rows, n_embd) on the previous card
                copy_across_n(
                    prev,
                    &st.scratch.x,
                    t * self.cfg.n_embd,
                    self.staging.as_ref(),
                )?;
            }
            q.upload_prefix(&st.scratch.pos, &pos)?;
            let step = StageStep {
                cfg: &self.cfg,
                k: &self.kernels,
                weights: &self.weights,
                n_ctx: self.n_ctx,
                embed: si == 0,
                head_rows: if si + 1 == n_stages { head_rows } else { 0 },
                t,
            };
            // A profiling trace wants every launch's own event: no graphs then.
            if !self.graphs.on || t > LOGIT_ROWS || q.tracing() {
                step.run(&q, st)?;
                continue;
            }
            let key = (si, t, step.head_rows);
            let graph = match self.graphs.map.entry(key) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(q.record(|q| step.run(q, st))?),
            };
            q.replay(graph)?;
        }
        Ok(())
    }

    /// Output norm and head (on the last card) for the chunk rows `local`, appending one logits
    /// vector per row.
    fn head(
        &mut self,
        t: usize,
        local: &[usize],
        p0: usize,
        out: &mut Vec<Vec<f32>>,
    ) -> Result<(), EngineError> {
        // the constructor makes one stage per card, and at least one card
        let last = self.stages.len() - 1;
        let st = &mut self.stages[last];
        let q = &st.card.queue;
        let c = &self.cfg;
        let s = &mut st.scratch;
        let k = &self.kernels;
        k.norm.rms_norm(
            q,
            &s.x,
            &self.weights.output_norm,
            &s.h,
            t,
            c.n_embd,
            c.rms_eps,
        )?;
        let head = self.weights.head(c);
        let all: Vec<f32> = q.to_vec_prefix(&s.h, t * c.n_embd)?;
        for group in local.chunks(LOGIT_ROWS) {
            let n = group.len();
            let (sel, logits) = if n == 1 {
                (&mut s.sel1, &mut s.logits1)
            } else {
                (&mut s.sel, &mut s.logits)
            };
            let mut rows = vec![0f32; n * c.n_embd];
            for (j, &r) in group.iter().enumerate() {
                rows[j * c.n_embd..(j + 1) * c.n_embd]
                    .copy_from_slice(&all[r * c.n_embd..(r + 1) * c.n_embd]);
            }
            q.upload_prefix(sel, &rows)?;
            k.mul(q, &head, sel, &s.xq, Some(&s.xst), logits, n)?;
            let l = q.to_vec_prefix(logits, n * c.n_vocab)?;
            push_rows(&l, c.n_vocab, group, p0, out)?;
        }
        Ok(())
    }

    /// Fused small kernels on (the default) or off: the unfused kernel sequence, bitwise the
    /// same results (tests and A/B measurements compare the two).
    pub fn set_fused(&mut self, on: bool) {
        self.kernels.fused = on;
        self.graphs.map.clear(); // recorded with the other kernel sequence
    }

    /// Folds the residual add and the RMSNorm after a projection into its launch where the
    /// kernels take it (`Kernels::fold_norms`, on unless `STRATA_FOLD_NORMS=0`), or not: the
    /// same bits either way. Recorded step graphs are dropped (their launches differ).
    pub fn set_fold_norms(&mut self, on: bool) {
        if self.kernels.fold_norms != on {
            self.kernels.fold_norms = on;
            self.graphs.map.clear();
        }
    }

    pub fn fold_norms(&self) -> bool {
        self.kernels.fold_norms
    }

    /// Turns the opt-in integer-dot decode products (`STRATA_VNNI`, engine/kernels/vnni.rs) on
    /// or off; refused, naming why, where they cannot run. They read the staged x, so
    /// `STRATA_XSTAGE=0` leaves them unused.
    /// On, each card's stage buffer grows to its scratch's rows, so the prompt's rows take the
    /// integer-dot products as well (as with `STRATA_VNNI=1` at load).
    pub fn set_int_dot(&mut self, on: bool) -> Result<(), EngineError> {
        self.kernels.mat.set_int_dot(on)?;
        if on {
            let width = self.cfg.n_embd.max(self.cfg.q_dim()).max(self.cfg.n_ff);
            for st in &mut self.stages {
                let s = &mut st.scratch;
                let need = XStage::floats(s.rows * width);
                if s.xst.len() < need {
                    s.bytes += (need - s.xst.len()) * 4;
                    s.xst = st.card.queue.alloc::<f32>(need)?;
                }
            }
        }
        Ok(())
    }

    /// Mode of the RoPE kernel for this model.
    pub fn rope_mode(cfg: &ModelConfig) -> RopeMode {
        if cfg.rope_neox {
            RopeMode::Neox
        } else {
            RopeMode::Norm
        }
    }
}

fn card_name(card: &Card) -> String {
    card.device
        .info()
        .map(|i| i.name)
        .unwrap_or_else(|_| "?".into())
}

/// Appends the `rows.len()` logits rows of `l` ((n, n_vocab)) to `out`, refusing non-finite
/// values (the position is p0 + the chunk row).
fn push_rows(
    l: &[f32],
    n_vocab: usize,
    rows: &[usize],
    p0: usize,
    out: &mut Vec<Vec<f32>>,
) -> Result<(), EngineError> {
    for (j, &r) in rows.iter().enumerate() {
        let row = l[j * n_vocab..(j + 1) * n_vocab].to_vec();
        if let Some(i) = row.iter().position(|v| !v.is_finite()) {
            return Err(EngineError::NonFinite {
                pos: p0 + r,
                index: i,
                value: row[i],
            });
        }
        out.push(row);
    }
    Ok(())
}

/// Recorded steps (SYCL graphs), keyed by (stage, rows, head rows). A step of t <= LOGIT_ROWS
/// rows submits the same kernels with the same arguments at every position: token ids and
/// positions are read from device buffers, buffers are allocated once, and the attention's
/// launch geometry depends on n_ctx only (its scratch is reserved for LOGIT_ROWS rows up
/// front). So each shape is recorded once and replayed, which costs a fraction of submitting
/// its ~300-600 launches one by one, with bitwise the same results (same kernels, same
/// arguments, same order).
struct StepGraphs {
    on: bool,
    map: HashMap<(usize, usize, usize), Graph>,
}

/// The device work of one stage for one step, the same whether run directly or recorded.
struct StageStep<'a> {
    cfg: &'a ModelConfig,
    k: &'a Kernels,
    weights: &'a Weights,
    n_ctx: usize,
    /// this stage embeds the token ids (the first card)
    embed: bool,
    /// > 0 on the last card when the head runs on rows 0..head_rows in place
    head_rows: usize,
    t: usize,
}

impl StageStep<'_> {
    fn run(&self, q: &Queue, st: &mut Stage) -> Result<(), EngineError> {
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
        let mut pre_normed = false;
        for il in st.layers.clone() {
            let j = il - st.layers.start;
            let next = (il + 1 < st.layers.end).then(|| &self.weights.layers[il + 1]);
            let lc = LayerCtx {
                k,
                q,
                cfg: c,
                il,
                w: &self.weights.layers[il],
                rope: &st.rope_tables[st.layer_rope[j]],
                kc: &st.kcache[j],
                vc: &st.vcache[j],
                n_ctx: self.n_ctx,
                t,
                next,
                pre_normed,
            };
            pre_normed = match c.arch {
                Arch::Gemma3 => gemma3::layer(&lc, s)?,
                _ => llama::layer(&lc, s)?,
            };
        }
        let n = self.head_rows;
        if n > 0 {
            k.norm.rms_norm(
                q,
                &s.x,
                &self.weights.output_norm,
                &s.h,
                t,
                c.n_embd,
                c.rms_eps,
            )?;
            let logits = if n == 1 {
                &mut s.logits1
            } else {
                &mut s.logits
            };
            k.mul(
                q,
                &self.weights.head(c),
                &s.h,
                &s.xq,
                Some(&s.xst),
                logits,
                n,
            )?;
        }
        Ok(())
    }
}
