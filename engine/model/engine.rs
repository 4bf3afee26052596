//! The engine loop: one model on one device, one sequence. Weights are uploaded once; the KV
//! cache and every scratch buffer are allocated once for (n_ctx, chunk); `forward` runs T tokens
//! at positions p.. in chunks (matmul above 8 rows, mmvq at 8 or fewer, via `MatrixKernels::mul`)
//! and returns logits for the rows asked for. Rolling back = calling `forward` with an earlier
//! start position: the cache rows past it are simply overwritten.

use super::actq::{ActQ, ActRound};
use super::config::ModelConfig;
use super::weights::{DeviceMemory, LayerWeights, Weights};
use super::{gemma3, llama, EngineError};
use crate::gguf::{Arch, Gguf};
use crate::kernels::act::Elementwise;
use crate::kernels::attn_prefill::AttnDispatch;
use crate::kernels::embed::Embed;
use crate::kernels::kv::KvStore;
use crate::kernels::norm::Norm;
use crate::kernels::rope::{Rope, RopeMode, RopeTable};
use crate::kernels::{MatrixKernels, WeightView};
use crate::sycl::{Card, DeviceBuffer, Queue};
use half::f16;
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
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            n_ctx: 0,
            chunk: 256,
            act_round: true,
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
}

impl Kernels {
    /// y = W x for `t` rows, x first rounded into `xq` per `ActRound::for_type` when enabled.
    pub fn mul(
        &self,
        q: &Queue,
        w: &WeightView,
        x: &DeviceBuffer<f32>,     // (t, n_in)
        xq: &DeviceBuffer<f32>,    // (>= t * n_in) rounding scratch
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<(), EngineError> {
        let mode = if self.act_round {
            ActRound::for_type(w.type_id)
        } else {
            ActRound::None
        };
        if mode == ActRound::None {
            self.mat.mul(q, w, x, y, t)?;
        } else {
            self.actq.run(q, mode, x, xq, t * w.n_in)?;
            self.mat.mul(q, w, xq, y, t)?;
        }
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
    pub ids: DeviceBuffer<i32>,  // (rows)
    pub pos: DeviceBuffer<i32>,  // (rows)
    sel1: DeviceBuffer<f32>,     // (1, n_embd) the row the head runs on when one is wanted
    sel: DeviceBuffer<f32>,      // (LOGIT_ROWS, n_embd)
    logits1: DeviceBuffer<f32>,  // (1, n_vocab)
    logits: DeviceBuffer<f32>,   // (LOGIT_ROWS, n_vocab)
    bytes: usize,
}

impl Scratch {
    fn new(q: &Queue, c: &ModelConfig, rows: usize) -> Result<Scratch, EngineError> {
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
            sel1: f(c.n_embd)?,
            sel: f(LOGIT_ROWS * c.n_embd)?,
            logits1: f(c.n_vocab)?,
            logits: f(LOGIT_ROWS * c.n_vocab)?,
            ids: q.alloc::<i32>(rows)?,
            pos: q.alloc::<i32>(rows)?,
            bytes: 0,
        };
        Ok(Scratch {
            bytes: bytes + rows * 8,
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
}

/// A loaded model with its KV cache and scratch: the unit `strata run`, `bench`, `nll` and the
/// engine process drive.
pub struct Engine {
    pub cfg: ModelConfig,
    card: Card,
    kernels: Kernels,
    weights: Weights,
    /// One table per distinct RoPE base; `layer_rope[il]` indexes it.
    rope_tables: Vec<RopeTable>,
    layer_rope: Vec<usize>,
    kcache: Vec<DeviceBuffer<f16>>, // per layer (n_kv_head, n_ctx, head_dim)
    vcache: Vec<DeviceBuffer<f16>>,
    scratch: Scratch,
    n_ctx: usize,
    pos: usize,
    file_bytes: u64,
    n_params: u64,
}

impl Engine {
    /// Loads `path` onto `card`.
    pub fn load(path: &Path, card: Card, opts: &EngineOptions) -> Result<Engine, EngineError> {
        let g = Gguf::open(path)?;
        Engine::from_gguf(&g, card, opts)
    }

    pub fn from_gguf(g: &Gguf, card: Card, opts: &EngineOptions) -> Result<Engine, EngineError> {
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
        if opts.chunk == 0 {
            return Err(EngineError::Unsupported("a prefill chunk of 0 rows".into()));
        }
        let q = card.queue.clone();
        let weights = Weights::load(g, &cfg, &q)?;
        let ctx = &card.context;
        let kernels = Kernels {
            mat: MatrixKernels::new(ctx),
            embed: Embed::new(ctx)?,
            norm: Norm::new(ctx)?,
            rope: Rope::new(ctx)?,
            kv: KvStore::new(ctx)?,
            attn: AttnDispatch::new(ctx, cfg.head_dim)?,
            act: Elementwise::new(ctx)?,
            actq: ActQ::new(ctx)?,
            act_round: opts.act_round,
        };
        kernels.mat.prepare(&weights.matrix_types())?;
        let mut rope_tables: Vec<RopeTable> = Vec::new();
        let mut layer_rope = Vec::with_capacity(cfg.n_layer);
        for lc in &cfg.layers {
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
        let mut kcache = Vec::with_capacity(cfg.n_layer);
        let mut vcache = Vec::with_capacity(cfg.n_layer);
        for _ in 0..cfg.n_layer {
            kcache.push(q.alloc::<f16>(per_layer)?);
            vcache.push(q.alloc::<f16>(per_layer)?);
        }
        let scratch = Scratch::new(&q, &cfg, opts.chunk.max(LOGIT_ROWS))?;
        let n_params = g.tensors().iter().map(|t| t.n_elements).sum();
        Ok(Engine {
            cfg,
            card,
            kernels,
            weights,
            rope_tables,
            layer_rope,
            kcache,
            vcache,
            scratch,
            n_ctx,
            pos: 0,
            file_bytes: g.file_len(),
            n_params,
        })
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

    pub fn device_name(&self) -> String {
        self.card
            .device
            .info()
            .map(|i| i.name)
            .unwrap_or_else(|_| "?".into())
    }

    pub fn memory(&self) -> Vec<DeviceMemory> {
        let kv = self
            .kcache
            .iter()
            .chain(&self.vcache)
            .map(|b| b.bytes())
            .sum();
        let rope: usize = self.rope_tables.len() * self.cfg.n_rot / 2 * 4;
        vec![DeviceMemory {
            device: self.device_name(),
            weights: self.weights.bytes,
            kv,
            scratch: self.scratch.bytes + rope,
        }]
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
        let rows = self.scratch.rows;
        for (ci, chunk) in tokens.chunks(rows).enumerate() {
            let r0 = ci * rows;
            let p0 = start_pos + r0;
            self.run_chunk(chunk, p0)?;
            let local: Vec<usize> = want
                .iter()
                .filter(|&&r| r >= r0 && r < r0 + chunk.len())
                .map(|&r| r - r0)
                .collect();
            if !local.is_empty() {
                self.head(chunk.len(), &local, p0, &mut out)?;
            }
            self.pos = p0 + chunk.len();
        }
        Ok(out)
    }

    /// All layers for `t` tokens at positions p0..; leaves the final hidden states in scratch.x.
    fn run_chunk(&mut self, tokens: &[u32], p0: usize) -> Result<(), EngineError> {
        let t = tokens.len();
        let q = &self.card.queue;
        let s = &mut self.scratch;
        let c = &self.cfg;
        let mut ids = vec![0i32; s.rows];
        let mut pos = vec![0i32; s.rows];
        for i in 0..t {
            ids[i] = tokens[i] as i32;
            pos[i] = (p0 + i) as i32;
        }
        q.upload_to(&s.ids, &ids)?;
        q.upload_to(&s.pos, &pos)?;
        let k = &self.kernels;
        k.embed.run(
            q,
            &self.weights.embd,
            self.weights.embd_type,
            c.n_vocab,
            c.n_embd,
            &s.ids,
            t,
            &s.x,
            c.embd_scale,
        )?;
        for il in 0..c.n_layer {
            let lc = LayerCtx {
                k,
                q,
                cfg: c,
                il,
                w: &self.weights.layers[il],
                rope: &self.rope_tables[self.layer_rope[il]],
                kc: &self.kcache[il],
                vc: &self.vcache[il],
                n_ctx: self.n_ctx,
                t,
            };
            match c.arch {
                Arch::Gemma3 => gemma3::layer(&lc, s)?,
                _ => llama::layer(&lc, s)?,
            }
        }
        Ok(())
    }

    /// Output norm and head for the chunk rows `local`, appending one logits vector per row.
    fn head(
        &mut self,
        t: usize,
        local: &[usize],
        p0: usize,
        out: &mut Vec<Vec<f32>>,
    ) -> Result<(), EngineError> {
        let q = &self.card.queue;
        let c = &self.cfg;
        let s = &mut self.scratch;
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
        let all: Vec<f32> = q.to_vec(&s.h)?;
        for group in local.chunks(LOGIT_ROWS) {
            let n = group.len();
            let (sel, logits) = if n == 1 {
                (&mut s.sel1, &mut s.logits1)
            } else {
                (&mut s.sel, &mut s.logits)
            };
            let mut rows = vec![0f32; sel.len()];
            for (j, &r) in group.iter().enumerate() {
                rows[j * c.n_embd..(j + 1) * c.n_embd]
                    .copy_from_slice(&all[r * c.n_embd..(r + 1) * c.n_embd]);
            }
            q.upload_to(sel, &rows)?;
            k.mul(q, &head, sel, &s.xq, logits, n)?;
            let l = q.to_vec(logits)?;
            for (j, &r) in group.iter().enumerate() {
                let row = l[j * c.n_vocab..(j + 1) * c.n_vocab].to_vec();
                if let Some(i) = row.iter().position(|v| !v.is_finite()) {
                    return Err(EngineError::NonFinite {
                        pos: p0 + r,
                        index: i,
                        value: row[i],
                    });
                }
                out.push(row);
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
