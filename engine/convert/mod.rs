//! Model conversions that keep a model's function and change how it is stored. Two today:
//! `hc` turns a `llama` GGUF (SmolLM2) into the same model with hyper-connection residual
//! streams, architecture `strata-hc-llama` (Strata's own name: llama's layers + the HC mixers;
//! engine/model/arch/hc_llama.rs). Every tensor of the source is copied as stored except the
//! three RMS norms a mixer replaces (attn_norm, ffn_norm, output_norm); the mixers' weights are
//! written at identity (exactly the dense model) plus seeded perturbations of chosen size, so
//! the converted model is a coherent hyper-connection model to measure the HC reads on
//! (docs/convert.md). The same source, options and seed give the same bytes on every platform.
//! `f16` widens every quantized matrix to F16 as llama-quantize does, the same model without the
//! 8-bit matmul-input roundings (docs/kld.md).
//! CLI: `strata convert` (app/cmd/convert.rs).

mod f16;
mod hc;

use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::gguf::Gguf;
pub use crate::synth::Written;
use crate::synth::{Hashing, Sha256};

pub use crate::gguf::HC_LLAMA_ARCH;
pub use hc::{build as build_hc, Perturb};

#[derive(Debug, Error)]
pub enum ConvertError {
    /// An option out of range; `flag` is the `strata convert` flag that sets it.
    #[error("{flag} {value}: {why}")]
    Invalid {
        flag: &'static str,
        value: String,
        why: String,
    },
    /// The source file is not one this conversion takes.
    #[error("{file}: {why}")]
    Source { file: String, why: String },
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error(transparent)]
    Quant(#[from] crate::quant::QuantError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The hyper-connection conversion's choices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HcOptions {
    /// S, the residual streams (at least 2).
    pub streams: u32,
    /// r, the read gate's rank (at least 1; a multiple of 32 keeps W_up's rows whole Q8_0
    /// blocks for the Q8_0 read).
    pub rank: u32,
    /// Seed of the perturbations' random streams (unused when every scale is 0).
    pub seed: u64,
    /// How far from identity the mixers' matrices are; all 0 = exactly the dense model.
    pub perturb: Perturb,
}

impl Default for HcOptions {
    fn default() -> Self {
        HcOptions {
            streams: 4,
            rank: 64,
            seed: 1,
            perturb: Perturb::uniform(0.0),
        }
    }
}

impl HcOptions {
    /// Errors name the CLI flag that sets the value.
    pub fn validate(&self) -> Result<(), ConvertError> {
        let bad = |flag, value: String, why: &str| {
            Err(ConvertError::Invalid {
                flag,
                value,
                why: why.into(),
            })
        };
        if !(2..=64).contains(&self.streams) {
            return bad(
                "--streams",
                self.streams.to_string(),
                "must be 2 to 64 (one stream has nothing to mix)",
            );
        }
        if self.rank == 0 {
            return bad("--rank", "0".into(), "must be at least 1");
        }
        for (part, x) in [
            ("down", self.perturb.down),
            ("up", self.perturb.up),
            ("inject", self.perturb.inject),
        ] {
            if !(x.is_finite() && (0.0..=16.0).contains(&x)) {
                return bad(
                    "--perturb",
                    x.to_string(),
                    &format!("the {part} scale must be a finite number from 0 to 16"),
                );
            }
        }
        Ok(())
    }
}

/// Converts `src` and writes the result to `path` (through `path` + ".tmp", renamed when
/// complete, so an interrupted run leaves no half file under the name); returns its size,
/// tensor count and SHA-256.
pub fn write_hc(src: &Gguf, o: &HcOptions, path: &Path) -> Result<Written, ConvertError> {
    let (w, tensors) = hc::build_counted(src, o)?;
    write(&w, tensors, path)
}

/// `src` with every quantized matrix widened to F16 (`llama-quantize --allow-requantize IN OUT
/// F16`'s file), written as `write_hc` writes.
pub fn write_f16(src: &Gguf, path: &Path) -> Result<Written, ConvertError> {
    let (w, tensors) = f16::build(src)?;
    write(&w, tensors, path)
}

fn write(
    w: &crate::gguf::GgufWriter,
    tensors: usize,
    path: &Path,
) -> Result<Written, ConvertError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ConvertError::Io { path: p, source }
    };
    let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let mut out = Hashing {
        inner: std::io::BufWriter::new(file),
        hash: Sha256::new(),
    };
    let bytes = w.write_to(&mut out).map_err(|e| e.in_file(&tmp))?;
    out.flush().map_err(io(&tmp))?;
    drop(out.inner);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    let sha256 = out
        .hash
        .finish()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Written {
        bytes,
        tensors,
        sha256,
    })
}
