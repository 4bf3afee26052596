//! The activations of one card for up to `rows` tokens, all (rows, width) f32, token-major,
//! allocated once for the chunk size.

use crate::kernels::XStage;
use crate::model::config::ModelConfig;
use crate::model::EngineError;
use crate::model::LOGIT_ROWS;
use crate::sycl::{DeviceBuffer, Queue};

pub struct Scratch {
    pub rows: usize,
    pub x: DeviceBuffer<f32>,   // (rows, residual width) the residual stream
    pub h: DeviceBuffer<f32>,   // (rows, n_embd) a part's normed input (the plain read)
    pub q: DeviceBuffer<f32>,   // (rows, n_head * head_dim)
    pub k: DeviceBuffer<f32>,   // (rows, n_kv_head * head_dim)
    pub v: DeviceBuffer<f32>,   // (rows, n_kv_head * head_dim)
    pub att: DeviceBuffer<f32>, // (rows, n_head * head_dim)
    pub o: DeviceBuffer<f32>,   // (rows, n_embd) a part's output
    pub gate: DeviceBuffer<f32>, // (rows, max n_ff)
    pub up: DeviceBuffer<f32>,  // (rows, max n_ff)
    pub xq: DeviceBuffer<f32>,  // (rows, max(n_embd, q_dim, n_ff)) rounded matmul input
    /// xq's stage (xstage.rs) for up to MMVQ_MAX_T rows: (min(rows, 8) * width * 33 / 32)
    pub xst: DeviceBuffer<f32>,
    pub ids: DeviceBuffer<i32>, // (rows)
    pub pos: DeviceBuffer<i32>, // (rows)
    /// (1) the arrival counter of the launches with a norm folded in (`NormTail`): zero
    /// between launches
    pub arrivals: DeviceBuffer<u32>,
    pub sel1: DeviceBuffer<f32>, // (1, n_embd) the row the head runs on when one is wanted
    pub sel: DeviceBuffer<f32>,  // (LOGIT_ROWS, n_embd)
    pub logits1: DeviceBuffer<f32>, // (1, n_vocab)
    pub logits: DeviceBuffer<f32>, // (LOGIT_ROWS, n_vocab)
    /// The hyper-connection reads' and the gated attention's buffers (Residual::Hyper models).
    pub hyper: Option<super::hyper::HyperScratch>,
    /// The MoE FFN's buffers (models with a MoE layer).
    pub moe: Option<super::moe::MoeScratch>,
    pub bytes: usize,
}

impl Scratch {
    /// The widest matmul input of any part (xq's and the stage's row width).
    pub fn input_width(c: &ModelConfig) -> usize {
        c.n_embd.max(c.q_dim()).max(c.max_ff())
    }

    /// `head`: this card runs the output head (only then are the logits buffers full size).
    pub fn new(
        q: &Queue,
        c: &ModelConfig,
        (rows, stage_rows): (usize, usize),
        head: bool,
    ) -> Result<Scratch, EngineError> {
        let n_vocab = if head { c.n_vocab } else { 1 };
        let (ff, width) = (c.max_ff(), Scratch::input_width(c));
        let mut bytes = 0;
        let mut f = |n: usize| -> Result<DeviceBuffer<f32>, EngineError> {
            bytes += n * 4;
            Ok(q.alloc::<f32>(n)?)
        };
        let s = Scratch {
            rows,
            x: f(rows * c.residual_width())?,
            h: f(rows * c.n_embd)?,
            q: f(rows * c.q_dim())?,
            k: f(rows * c.kv_dim())?,
            v: f(rows * c.kv_dim())?,
            att: f(rows * c.q_dim())?,
            o: f(rows * c.n_embd)?,
            gate: f(rows * ff)?,
            up: f(rows * ff)?,
            xq: f(rows * width)?,
            xst: f(XStage::floats(stage_rows * width))?,
            sel1: f(c.n_embd)?,
            sel: f(LOGIT_ROWS * c.n_embd)?,
            logits1: f(n_vocab)?,
            logits: f(LOGIT_ROWS * n_vocab)?,
            ids: q.alloc::<i32>(rows)?,
            pos: q.alloc::<i32>(rows)?,
            arrivals: q.upload(&[0u32])?,
            hyper: None,
            moe: None,
            bytes: 0,
        };
        let hyper = super::hyper::HyperScratch::new(q, c, rows)?;
        let moe = super::moe::MoeScratch::new(q, c, rows)?;
        let extra = hyper.as_ref().map_or(0, |h| h.bytes) + moe.as_ref().map_or(0, |m| m.bytes);
        Ok(Scratch {
            bytes: bytes + rows * 8 + 4 + extra,
            hyper,
            moe,
            ..s
        })
    }
}
