//! A loaded model as the engine process holds it: the device engine, the tokenizer, the chat
//! template and the facts `loaded`/`devices` report. Loading emits `progress` events: one per
//! stage as it starts, and the current stage again every [`HEARTBEAT`] while a stage runs long
//! (uploading weights and building kernels is one library call with no callback).

use super::out::Out;
use crate::generate::Generator;
use crate::gguf::Gguf;
use crate::model::{Engine, EngineOptions, ModelConfig};
use crate::protocol::{
    Card as CardOut, ChatMessage, Devices, Event, Load, Loaded, MemoryUse, Progress,
};
use crate::spec::NgramDrafter;
use crate::sycl::{build_activity, Card};
use crate::tokenizer::{ChatTemplate, Tokenizer};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Silence between progress events during a load is at most this long (the protocol promises 5 s).
pub const HEARTBEAT: Duration = Duration::from_secs(2);

/// Tokens run once after the upload so every kernel geometry the first turn needs is built:
/// a multi-row prefill chunk (the matmul path, > 8 rows) and a one-row decode step (mmvq).
const WARMUP_ROWS: usize = 9;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("load {path}: {source}")]
    Gguf {
        path: String,
        source: crate::gguf::GgufError,
    },
    #[error("load {path}: {source}")]
    Config {
        path: String,
        source: crate::model::ConfigError,
    },
    #[error("load {path}: tokenizer: {source}")]
    Tokenizer {
        path: String,
        source: crate::tokenizer::TokenizerError,
    },
    #[error("load {path}: {source}")]
    Engine {
        path: String,
        source: crate::model::EngineError,
    },
    #[error("load {path}: no SYCL device: {source}")]
    Device {
        path: String,
        source: crate::sycl::SyclError,
    },
    #[error("load {path}: {what}, not a model file (give the path of a .gguf file)")]
    NotAFile { path: String, what: &'static str },
    #[error("load cancelled: the engine is shutting down")]
    Cancelled,
    #[error("load {path}: default sampling: {source}")]
    Sampling {
        path: String,
        source: crate::sampling::SampleError,
    },
}

/// The KV cache an automatic context (`ctx: 0`) may take: at most `AUTO_KV_CAP`, and at most
/// 1/`AUTO_KV_SHARE` of the card's memory (the weights, the scratch and, on the CPU device, the
/// rest of the machine need the remainder).
pub const AUTO_KV_CAP: u64 = 1 << 30;
pub const AUTO_KV_SHARE: u64 = 8;
/// An automatic context is a multiple of this, and at least this (or the training context).
const AUTO_CTX_STEP: usize = 256;

/// Bytes of K and V one token takes in the cache: every layer's keys and values in f16.
pub fn kv_bytes_per_token(cfg: &ModelConfig) -> u64 {
    (cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * 2) as u64
}

pub fn kv_budget(card_mem: u64) -> u64 {
    AUTO_KV_CAP.min(card_mem / AUTO_KV_SHARE)
}

/// `ctx: 0`: the training context `n_ctx_train`, as long as its KV cache (`kv_per_token` bytes a
/// token) fits `kv_budget(card_mem)`; else the longest multiple of 256 tokens that does (at
/// least 256).
pub fn auto_ctx(n_ctx_train: usize, kv_per_token: u64, card_mem: u64) -> usize {
    let fit = (kv_budget(card_mem) / kv_per_token.max(1)) as usize;
    let fit = (fit / AUTO_CTX_STEP * AUTO_CTX_STEP).max(AUTO_CTX_STEP);
    n_ctx_train.min(fit)
}

pub struct Session {
    /// The model engine inside the generation loop (with the n-gram drafter for `spec > 0`).
    pub gen: Generator,
    pub tok: Tokenizer,
    pub template: ChatTemplate,
    /// The `load` request (its `spec` and `sampling` are the defaults for `generate`).
    pub load: Load,
    pub loaded: Loaded,
    card_name: String,
    /// The messages the last generation left out of its prompt (its system messages and the
    /// dropped turns, decode.rs): while a conversation starts with them the cut stays where it
    /// is, so the cached prefix stays valid.
    cut: Vec<ChatMessage>,
    /// The cards are the host CPU: `devices` carries the process's memory (hostmem.rs).
    host: bool,
}

/// Emits the current stage at once and then every `HEARTBEAT` until dropped.
struct Ticker {
    cur: Arc<Mutex<Progress>>,
    stop: Arc<AtomicBool>,
    out: Out,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    fn start(out: &Out) -> Ticker {
        let cur = Arc::new(Mutex::new(Progress {
            stage: "start".into(),
            done: 0,
            total: 1,
            detail: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, o) = (cur.clone(), stop.clone(), out.clone());
        let thread = std::thread::spawn(move || {
            let step = Duration::from_millis(100);
            let mut since = Duration::ZERO;
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(step);
                since += step;
                if since >= HEARTBEAT {
                    since = Duration::ZERO;
                    let mut p = c.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    // a kernel compiling for a second or more: say which (warm builds take ms)
                    p.detail = build_activity::activity().describe(Duration::from_secs(1));
                    if !s.load(Ordering::Relaxed) {
                        o.emit(&Event::Progress(p));
                    }
                }
            }
        });
        Ticker {
            cur,
            stop,
            out: out.clone(),
            thread: Some(thread),
        }
    }

    /// Reports the next stage, or stops the load when `cancel` is set (the engine is shutting
    /// down: a load between stages ends cleanly instead of being abandoned mid-call).
    fn stage(
        &self,
        stage: &str,
        done: u64,
        total: u64,
        cancel: &AtomicBool,
    ) -> Result<(), LoadError> {
        if cancel.load(Ordering::Relaxed) {
            eprintln!("strata engine: load: cancelled before {stage} (shutting down)");
            return Err(LoadError::Cancelled);
        }
        let p = Progress {
            stage: stage.into(),
            done,
            total,
            detail: None,
        };
        eprintln!("strata engine: load: {stage} {done}/{total}");
        *self.cur.lock().unwrap_or_else(|p| p.into_inner()) = p.clone();
        self.out.emit(&Event::Progress(p));
        Ok(())
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Session {
    /// Loads `req.model` onto the default card, reporting progress on `out`; `cancel` stops it
    /// at the next stage (`LoadError::Cancelled`).
    pub fn load(req: &Load, out: &Out, cancel: &AtomicBool) -> Result<Session, LoadError> {
        let t0 = Instant::now();
        let path = req.model.clone();
        regular_file(&path)?;
        // the defaults every later `generate` falls back on: refused now, not at each generate
        super::decode::sampling_params(&req.sampling)
            .validate()
            .map_err(|source| LoadError::Sampling {
                path: path.clone(),
                source,
            })?;
        let ticker = Ticker::start(out);
        const STAGES: u64 = 5;
        ticker.stage("gguf", 0, STAGES, cancel)?;
        let g = Gguf::open(&path).map_err(|source| LoadError::Gguf {
            path: path.clone(),
            source,
        })?;
        let cfg = ModelConfig::from_gguf(&g).map_err(|source| LoadError::Config {
            path: path.clone(),
            source,
        })?;
        ticker.stage("tokenizer", 1, STAGES, cancel)?;
        let tok = Tokenizer::from_gguf_path(&path).map_err(|source| LoadError::Tokenizer {
            path: path.clone(),
            source,
        })?;
        let template = ChatTemplate::from_tokenizer(&tok);
        ticker.stage("device", 2, STAGES, cancel)?;
        // split_cpu >= 2: the CPU device as that many cards, the layers split over them; 1 or
        // none: the default device whole.
        let cards = match req.devices.split_cpu {
            Some(n) if n >= 2 => Card::split_cpu(n),
            _ => Card::default_card().map(|c| vec![c]),
        }
        .map_err(|source| LoadError::Device {
            path: path.clone(),
            source,
        })?;
        // both arms give at least one card (split_cpu errors when it cannot make n)
        let info = cards[0].device.info().map_err(|source| LoadError::Device {
            path: path.clone(),
            source,
        })?;
        // Protocol: ctx 0 = the training context within the KV budget; a ctx past the training
        // context is the engine's error (CtxPastTraining).
        let n_ctx = if req.ctx == 0 {
            let n = auto_ctx(cfg.n_ctx_train, kv_bytes_per_token(&cfg), info.global_mem);
            eprintln!(
                "strata engine: ctx 0: {n} tokens (trained on {}; KV {} MiB, budget {} MiB)",
                cfg.n_ctx_train,
                (n as u64 * kv_bytes_per_token(&cfg)) >> 20,
                kv_budget(info.global_mem) >> 20
            );
            n
        } else {
            req.ctx as usize
        };
        ticker.stage("weights+kernels", 3, STAGES, cancel)?;
        let opts = EngineOptions {
            n_ctx,
            ..EngineOptions::default()
        };
        let eng = |source| LoadError::Engine {
            path: path.clone(),
            source,
        };
        let mut engine = Engine::from_gguf_split(&g, cards, None, &opts).map_err(eng)?;
        ticker.stage("warmup", 4, STAGES, cancel)?;
        let bos = tok.bos().unwrap_or(0);
        engine
            .forward(&vec![bos; WARMUP_ROWS.min(n_ctx)], 0, &[0])
            .map_err(eng)?;
        engine.forward(&[bos], 0, &[0]).map_err(eng)?;
        engine.reset();
        ticker.stage("done", STAGES, STAGES, cancel)?;
        drop(ticker);

        let quant_types: BTreeSet<String> = g
            .tensors()
            .iter()
            .map(|t| t.ggml_type.name().to_string())
            .collect();
        let hc = g
            .tensors()
            .iter()
            .any(|t| t.name.starts_with("blk.") && t.name.contains(".hc_"));
        let loaded = Loaded {
            model: path,
            arch: g.architecture().unwrap_or("?").to_string(),
            n_ctx: engine.n_ctx() as u32,
            n_params: engine.n_params(),
            load_ms: t0.elapsed().as_secs_f64() * 1e3,
            hc,
            quant_types: quant_types.into_iter().collect(),
            experts: engine.config().host_synchronous(),
            synthetic: g
                .opt_str("general.name")
                .ok()
                .flatten()
                .is_some_and(|n| n.to_ascii_lowercase().contains("synthetic")),
        };
        let gen = Generator::new(
            engine,
            Some(Box::new(NgramDrafter::default())),
            info.global_mem,
        );
        Ok(Session {
            gen,
            tok,
            template,
            load: req.clone(),
            loaded,
            cut: Vec::new(),
            host: info.device_type == crate::sycl::DeviceType::Cpu,
            card_name: info.name,
        })
    }

    /// Where the kept part of `messages` starts at the earliest: past the cut the last
    /// generation made, when `messages` still begins with the messages it left out.
    pub fn kept_from(&self, messages: &[ChatMessage]) -> Option<usize> {
        let n = self.cut.len();
        (n > 0 && messages.len() > n && messages[..n] == self.cut[..]).then_some(n)
    }

    /// A generation ran with `messages[..start]` left out of its prompt (system messages
    /// included; nothing dropped when those are all).
    pub fn remember_cut(&mut self, before_kept: &[ChatMessage]) {
        let all_system = before_kept
            .iter()
            .all(|m| m.role == crate::protocol::Role::System);
        self.cut = if all_system {
            Vec::new()
        } else {
            before_kept.to_vec()
        };
    }

    /// Memory in use per card by category, against the device's global memory.
    pub fn devices(&self) -> Devices {
        let cards = self
            .gen
            .devices()
            .into_iter()
            .enumerate()
            .map(|(i, d)| (i, d.memory, d.budget))
            .map(|(i, m, budget)| CardOut {
                index: i as u32,
                name: if m.device.is_empty() {
                    self.card_name.clone()
                } else {
                    m.device
                },
                used: MemoryUse {
                    weights: m.weights as u64,
                    kv: m.kv as u64,
                    scratch: m.scratch as u64,
                    other: 0,
                    hc_q8: m.hc_q8 as u64,
                },
                budget,
                experts: None,
                host: self.host.then(super::hostmem::now).flatten(),
            })
            .collect();
        Devices { cards }
    }
}

/// Refuses a path that is not a regular file before anything opens it: opening a FIFO for reading
/// blocks until a writer comes (a load that hangs), and a directory or device is no model either.
/// A missing file passes: opening it gives the usual "no such file" error.
fn regular_file(path: &str) -> Result<(), LoadError> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a special file"
    };
    Err(LoadError::NotAFile {
        path: path.to_string(),
        what,
    })
}

/// The cards before any model is loaded: the default device with nothing in use.
pub fn idle_devices() -> Devices {
    let cards = crate::sycl::default_device()
        .and_then(|d| d.info())
        .map(|info| {
            let host = info.device_type == crate::sycl::DeviceType::Cpu;
            vec![CardOut {
                index: 0,
                name: info.name,
                used: MemoryUse::default(),
                budget: info.global_mem,
                experts: None,
                host: host.then(super::hostmem::now).flatten(),
            }]
        })
        .unwrap_or_default();
    Devices { cards }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctx_0_is_the_training_context_within_the_kv_budget() {
        const GIB: u64 = 1 << 30;
        // SmolLM2-135M: 30 layers x K,V x 3 kv heads x 64 dims x f16 = 23040 B a token
        let smol = 30 * 2 * 3 * 64 * 2;
        assert_eq!(
            auto_ctx(8192, smol, 23 * GIB),
            8192,
            "180 MiB of KV: all of it"
        );
        // a 128k-context 8B model (32 layers, 8 kv heads of 128): 128 KiB a token, so 1 GiB
        // holds 8192 tokens, not the 16 GiB the training context would take
        let big = 32 * 2 * 8 * 128 * 2;
        assert_eq!(auto_ctx(131072, big, 64 * GIB), 8192);
        // a small card: 1/8 of its memory (512 MiB of 4 GiB), rounded down to 256
        assert_eq!(auto_ctx(131072, big, 4 * GIB), 4096);
        assert_eq!(auto_ctx(131072, 100_000, 4 * GIB), 5120);
        // never below 256 tokens (or the training context, when that is smaller)
        assert_eq!(auto_ctx(131072, big, 64 << 20), 256);
        assert_eq!(auto_ctx(128, big, 64 << 20), 128);
    }
}
