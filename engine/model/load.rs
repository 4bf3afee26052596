//! Building an `Engine` from a GGUF file: the config (its architecture's parts, checked against
//! the file's tensors), the weights placed over the cards, the kernels and the plan, one
//! `Stage` per card.

use super::config::ModelConfig;
use super::device::kernels::Kernels;
use super::device::stage::{layer_ranges, Stage};
use super::engine::{Engine, EngineOptions, LOGIT_ROWS};
use super::plan::{graphs::StepGraphs, Plan};
use super::weights::{Placement, Weights};
use super::EngineError;
use crate::flags::table;
use crate::gguf::Gguf;
use crate::kernels::qmatrix::MMVQ_MAX_T;
use crate::sycl::{Card, Queue};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

impl Engine {
    /// Loads `path` onto `card`.
    pub fn load(path: &Path, card: Card, opts: &EngineOptions) -> Result<Engine, EngineError> {
        let g = Gguf::open(path)?;
        Engine::from_gguf(&g, card, opts)
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
        let place = Placement {
            queues: &queues,
            layer_card,
            keep_gguf: opts.keep_gguf || crate::flags::on(table::KEEP_GGUF),
            hc_q8: crate::model::device::kernels::hc_variant(&cfg)
                == Some(crate::kernels::hc_fast::Variant::Q8),
        };
        let plan = Plan::from_env(opts.act_round);
        // The kernel modules load on a second thread while this one uploads the weights: they
        // need the context and the configuration only (~2 ms a module from the kernel binary
        // cache, seconds when compiled; docs/sycl.md). Spawned before this thread pins itself,
        // so that it may run on the runtime worker's CPU, idle during a load. A failed upload
        // stops it at its next module.
        let stop = AtomicBool::new(false);
        let (weights, kernels) = std::thread::scope(|s| {
            let kernels = s.spawn(|| Kernels::load(&ctx, &cfg, plan, &stop));
            if on_cpu {
                // The thread that loads is the one that runs the steps (the server's worker,
                // the CLI's main thread): keep it off the runtime's pinned worker
                // (sycl/affinity.rs).
                if let Some(cpus) = crate::sycl::affinity::pin_off_workers() {
                    tracing::info!(?cpus, "host thread pinned off the OpenCL CPU workers");
                }
            }
            let weights = Weights::load_placed(g, &cfg, &place);
            stop.store(weights.is_err(), Ordering::Relaxed);
            // a panic there is re-raised here, as if this thread had built the kernels
            let kernels = kernels
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            Ok::<_, EngineError>((weights?, kernels?))
        })?;
        kernels.mat.prepare(&weights.matrix_layouts(&cfg))?;
        if let Some(hc) = &kernels.hc {
            // one module per (down, inject, up) weight types, built now rather than mid-step
            for (down, inject, up) in weights.hc_types() {
                hc.prepare(down, inject, up)?;
                if let Some((fast, v)) = &kernels.hc_fast {
                    // (a type the fast read does not take falls back at run time, said there)
                    if let Err(e) = fast.prepare(*v, down, inject, up) {
                        tracing::warn!("{}=1: {e}", v.flag());
                    }
                }
            }
            if kernels.hc_fast.is_some() {
                let mib: Vec<String> = weights
                    .hc_q8_bytes
                    .iter()
                    .map(|b| format!("{:.1}", *b as f64 / (1 << 20) as f64))
                    .collect();
                if weights.hc_q8_bytes.iter().any(|&b| b > 0) {
                    tracing::info!(
                        "STRATA_HC_Q8=1: the Q8_0 copies add {} MiB per card (the stored \
                         copies stay for the prompt path)",
                        mib.join(" + ")
                    );
                }
            }
        }
        if plan.fold_norms && plan.fused && plan.act_round {
            // the modules of the folded projections (Wo, Wdown), built now rather than in the
            // first token's time (Gemma 3's down is Q4_K or Q6_K by layer: all distinct types)
            let mut seen = Vec::new();
            for lw in &weights.layers {
                for (w, post) in lw.last_products() {
                    if !seen.contains(&(w.type_id, post)) {
                        seen.push((w.type_id, post));
                        kernels.mat.prepare_norm_fold(&w, post)?;
                    }
                }
            }
        }
        let rows = opts.chunk.max(LOGIT_ROWS);
        let n_cards = cards.len();
        // the stage buffer: decode rows, or every chunk row when the integer-dot products read
        // the prompt's rows too (STRATA_VNNI=1)
        let stage_rows = if kernels.mat.int_dot() {
            rows
        } else {
            rows.min(MMVQ_MAX_T)
        };
        let stages = cards
            .into_iter()
            .zip(ranges)
            .enumerate()
            .map(|(i, (card, r))| {
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
            let bytes = rows * cfg.residual_width() * 4;
            Some(stages[0].card.queue.alloc_host::<u8>(bytes)?)
        } else {
            None
        };
        let n_params = g.tensors().iter().map(|t| t.n_elements).sum();
        let graphs = StepGraphs::new(!on_cpu && !cfg.host_synchronous());
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
            graphs,
        })
    }
}
