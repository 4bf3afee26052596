//! One card's share of the model in a layer split: a contiguous range of layers (their weights
//! live in `Engine::weights`, uploaded to this card), their per-layer state (the KV cache), the
//! RoPE tables they use, and the card's own activation scratch. `layer_ranges` makes the split.

use super::scratch::Scratch;
use crate::kernels::rope::RopeTable;
use crate::model::config::ModelConfig;
use crate::model::EngineError;
use crate::sycl::{Card, DeviceBuffer};
use half::f16;
use std::ops::Range;

/// A layer's state across steps: its mixer's (attention: the KV cache).
pub struct LayerState {
    pub k: DeviceBuffer<f16>, // (n_kv_head, n_ctx, head_dim)
    pub v: DeviceBuffer<f16>, // (n_kv_head, n_ctx, head_dim)
}

impl LayerState {
    /// Forgets the positions from `pos` on (the verify window's rollback, a new turn). The KV
    /// cache needs nothing: the next forward overwrites those rows, and attention reads only
    /// positions up to its own. (A recurrent mixer's state would restore a checkpoint here.)
    pub fn rollback(&mut self, _pos: usize) {}

    pub fn bytes(&self) -> usize {
        self.k.bytes() + self.v.bytes()
    }
}

pub struct Stage {
    pub card: Card,
    pub layers: Range<usize>,
    /// One table per distinct RoPE base among this stage's layers; `layer_rope[il - start]`.
    pub rope_tables: Vec<RopeTable>,
    pub layer_rope: Vec<usize>,
    /// Per layer of the range.
    pub state: Vec<LayerState>,
    pub scratch: Scratch,
}

impl Stage {
    pub fn new(
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
            let base = lc.attention().rope_base as f64;
            let i = match rope_tables.iter().position(|t| t.base() == base) {
                Some(i) => i,
                None => {
                    rope_tables.push(match cfg.rope_sections {
                        None => RopeTable::new(&q, base, cfg.n_rot)?,
                        Some(sections) => RopeTable::with_sections(&q, base, cfg.n_rot, sections)?,
                    });
                    rope_tables.len() - 1
                }
            };
            layer_rope.push(i);
        }
        let per_layer = cfg.n_kv_head * n_ctx * cfg.head_dim;
        let state = layers
            .clone()
            .map(|_| {
                Ok(LayerState {
                    k: q.alloc::<f16>(per_layer)?,
                    v: q.alloc::<f16>(per_layer)?,
                })
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        let scratch = Scratch::new(&q, cfg, (rows, stage_rows), head)?;
        Ok(Stage {
            card,
            layers,
            rope_tables,
            layer_rope,
            state,
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
