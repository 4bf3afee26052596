//! Synthetic `qwen4exp` GGUF files: seeded random weights at any geometry, with the keys,
//! tensors and a small SentencePiece-style vocabulary that llama.cpp 11434 loads and runs
//! (llama.cpp is the judge of the format: scripts/llama-cpp/dump.sh runs it on these files and
//! tests/data/qwen4exp/ holds its logits). The same geometry and seed give the same bytes on
//! every run and platform (`rng.rs`), so a test can regenerate a file with `strata synth`, check
//! its SHA-256 against the recorded one, and compare the engine's logits with llama.cpp's.
//!
//! `geometry.rs`: the sizes, types, scales, presets and checks; `writer.rs`: keys and tensors
//! (and the scales' reasons); `tokenizer.rs`: the vocabulary; `rng.rs`: the random streams;
//! `sha256.rs`: the digest. CLI: `strata synth` (app/cmd/synth.rs).

mod checks;
mod geometry;
mod rng;
mod sha256;
pub mod tokenizer;
mod writer;

use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

pub use geometry::{default_sections, LayerKind, SynthGeometry, WeightType, PRESETS};
pub use sha256::{sha256_hex, Sha256};
pub use writer::{build, ARCH, NAME};

#[derive(Debug, Error)]
pub enum SynthError {
    /// A geometry field out of range; `flag` is the `strata synth` flag that sets it.
    #[error("{flag} {value}: {why}")]
    Invalid {
        flag: &'static str,
        value: String,
        why: String,
    },
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

/// What `write_file` (and `convert::write_hc`) wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub bytes: u64,
    pub tensors: usize,
    /// Lowercase hex SHA-256 of the file.
    pub sha256: String,
}

/// Forwards writes and hashes them on the way (the synthetic writer's and the converter's).
pub(crate) struct Hashing<W: Write> {
    pub(crate) inner: W,
    pub(crate) hash: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The whole file in memory.
pub fn to_bytes(g: &SynthGeometry) -> Result<Vec<u8>, SynthError> {
    Ok(build(g)?.to_bytes()?)
}

/// Writes the file for `g` to `path` and returns its size and SHA-256.
pub fn write_file(g: &SynthGeometry, path: &Path) -> Result<Written, SynthError> {
    let (w, tensors) = writer::build_counted(g)?;
    let io = |source| SynthError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = Hashing {
        inner: std::io::BufWriter::new(file),
        hash: Sha256::new(),
    };
    let bytes = w.write_to(&mut out).map_err(|e| e.in_file(path))?;
    out.flush().map_err(io)?;
    Ok(Written {
        bytes,
        tensors,
        sha256: sha256::hex(&out.hash.finish()),
    })
}

#[cfg(test)]
mod tests;
