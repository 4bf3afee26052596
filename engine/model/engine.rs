//! The engine: one model on one or more cards, one sequence. Weights are uploaded once; the
//! per-layer state (KV cache) and every scratch buffer are allocated once for (n_ctx, chunk)
//! (load.rs); `forward` runs T tokens at positions p.. in chunks (matmul above 8 rows, mmvq at 8
//! or fewer) and returns logits for the rows asked for. Rolling back = calling `forward` with an
//! earlier start position: each layer's state forgets the later positions
//! (`LayerState::rollback`; the KV cache rows are simply overwritten).
//!
//! Layer split: each card is a `Stage` holding a contiguous layer range with its weights, state
//! and scratch; the embedding runs on the first, the head on the last, and the residual rows
//! ((T, residual width): `ModelConfig::residual_width`) cross from card to card through pinned
//! host memory (docs/engine.md, "Layer split across cards"). The kernels are the same on every
//! card, so the logits are bitwise those of one card.

use super::config::ModelConfig;
use super::device::kernels::Kernels;
use super::device::stage::Stage;
use super::device::step::StageStep;
use super::device::{head, scratch::Scratch};
use super::plan::{graphs::StepGraphs, Plan};
use super::weights::{DeviceMemory, Weights};
use super::EngineError;
use crate::kernels::XStage;
use crate::sycl::{copy_across_n, Card, HostBuffer, Queue};
use std::ops::Range;

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
    /// `STRATA_KEEP_GGUF=1` turns it on as well (engine/flags/).
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

/// A loaded model with its state and scratch: the unit `strata run`, `bench`, `nll` and the
/// engine process drive.
pub struct Engine {
    pub cfg: ModelConfig,
    /// One per card, in layer order; stage 0 embeds, the last runs the head.
    pub(super) stages: Vec<Stage>,
    pub(super) kernels: Kernels,
    pub(super) weights: Weights,
    /// Pinned host memory the residual rows cross cards through: (rows, residual width) f32 as
    /// bytes. None on one card.
    pub(super) staging: Option<HostBuffer<u8>>,
    pub(super) n_ctx: usize,
    pub(super) pos: usize,
    pub(super) file_bytes: u64,
    pub(super) n_params: u64,
    pub(super) graphs: StepGraphs,
}

impl Engine {
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

    /// Positions filled in the state (the next token's position).
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Forgets the sequence.
    pub fn reset(&mut self) {
        self.rollback(0);
    }

    /// Every layer's state forgets the positions from `pos` on.
    fn rollback(&mut self, pos: usize) {
        for st in &mut self.stages {
            st.state.iter_mut().for_each(|s| s.rollback(pos));
        }
        self.pos = pos;
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
                let kv = st.state.iter().map(|s| s.bytes()).sum();
                let rope = st.rope_tables.len() * self.cfg.n_rot / 2 * 4;
                let staging = match (&self.staging, i) {
                    (Some(b), 0) => b.bytes(),
                    _ => 0,
                };
                DeviceMemory {
                    device: card_name(&st.card),
                    weights: self.weights.card_bytes[i],
                    hc_q8: self.weights.hc_q8_bytes[i],
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
        // A failed step leaves the state in an unknown state past start_pos.
        self.rollback(start_pos);
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

    /// All layers for `t` tokens at positions p0..; leaves the final residual rows in the last
    /// stage's scratch.x, and with `head_rows` > 0 the logits of rows 0..head_rows in its
    /// logits1 (one row) or logits buffer. Between stages the t residual rows cross through the
    /// staging memory.
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
                // the residual stream's rows, (t, residual width), from the previous card
                let prev = &done[si - 1].scratch.x;
                let n = t * self.cfg.residual_width();
                copy_across_n(prev, &st.scratch.x, n, self.staging.as_ref())?;
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
            let key = (si, t, step.head_rows);
            self.graphs.run(&q, key, |q| step.run(q, st))?;
        }
        Ok(())
    }

    /// The head (on the last card) for the chunk rows `local`, appending one logits vector per
    /// row: the t rows normed on the device, the wanted ones picked on the host, then the head
    /// in groups of up to `LOGIT_ROWS`.
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
        let (q, c, k, w) = (&st.card.queue, &self.cfg, &self.kernels, &self.weights);
        let s = &mut st.scratch;
        head::norm_rows(k, q, c, w, s, t)?;
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
            head::logits(k, q, c, w, sel, &s.xq, &s.xst, logits, n)?;
            let l = q.to_vec_prefix(logits, n * c.n_vocab)?;
            push_rows(&l, c.n_vocab, group, p0, out)?;
        }
        Ok(())
    }

    /// Turns the recording and replay of steps of up to `LOGIT_ROWS` rows on or off (default:
    /// on for GPUs, off for the CPU device; `--graphs` / `--no-graphs`). Off drops the graphs.
    pub fn set_step_graphs(&mut self, on: bool) {
        // a MoE layer reads the router's choice back to the host mid-step: nothing to record
        self.graphs.on = on && !self.cfg.host_synchronous();
        self.graphs.clear();
    }

    /// Whether steps are replayed from recorded graphs.
    pub fn step_graphs_on(&self) -> bool {
        self.graphs.on
    }

    /// Steps recorded so far (one per stage, row count and head rows seen).
    pub fn step_graphs(&self) -> usize {
        self.graphs.len()
    }

    /// The rewrites the planner applies (engine/model/plan/).
    pub fn plan(&self) -> Plan {
        self.kernels.plan
    }

    /// Sets the planner's rewrites (`Plan::plain`: none): the same bits either way. The
    /// rounding (`act_round`) stays the load's. Recorded step graphs are dropped.
    pub fn set_plan(&mut self, plan: Plan) {
        let plan = Plan {
            act_round: self.kernels.plan.act_round,
            ..plan
        };
        if self.kernels.plan != plan {
            self.kernels.plan = plan;
            self.graphs.clear();
        }
    }

    /// The fused small kernels on (the default) or off (`Plan::fused`).
    pub fn set_fused(&mut self, on: bool) {
        self.set_plan(Plan {
            fused: on,
            ..self.plan()
        });
    }

    /// The norm folds on (the default unless `STRATA_FOLD_NORMS=0`) or off (`Plan::fold_norms`).
    pub fn set_fold_norms(&mut self, on: bool) {
        self.set_plan(Plan {
            fold_norms: on,
            ..self.plan()
        });
    }

    pub fn fold_norms(&self) -> bool {
        self.kernels.plan.fold_norms
    }

    /// Turns the opt-in integer-dot decode products (`STRATA_VNNI`, engine/kernels/vnni.rs) on
    /// or off; refused, naming why, where they cannot run. They read the staged x, so
    /// `STRATA_XSTAGE=0` leaves them unused.
    /// On, each card's stage buffer grows to its scratch's rows, so the prompt's rows take the
    /// integer-dot products as well (as with `STRATA_VNNI=1` at load).
    pub fn set_int_dot(&mut self, on: bool) -> Result<(), EngineError> {
        self.kernels.mat.set_int_dot(on)?;
        self.graphs.clear();
        if on {
            let width = Scratch::input_width(&self.cfg);
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
}

pub(super) fn card_name(card: &Card) -> String {
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
