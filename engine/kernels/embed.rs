//! Embedding row fetch (`sycl/kernels/embed.cpp`): out[t, :] = dequant(token_embd[ids[t], :]) *
//! scale, from the GGUF tensor bytes unchanged, or (Q8_0) from the tied head's tiled copy
//! (tiled.rs), the same values. Gemma passes scale = sqrt(n_embd); llama 1.0.
//! Each output element is one product, so multi-row calls are trivially bitwise one-row calls.

use super::float_args::{ensure, holds, int, prod, round_up};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result};

const OP: &str = "embedding";

/// The token_embd element types the kernel reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedType {
    F32,
    F16,
    /// 34-byte blocks of 32: f16 scale d, 32 x int8; value = d * q.
    Q8_0,
    /// Q8_0 in tiled.rs's layout (tiles of 16 rows, d[16] then byte planes [32][16] per block):
    /// the tied output head's decode copy, read in place of the GGUF bytes.
    Q8_0Tiled,
}

impl EmbedType {
    /// Bytes of one row of `n_embd` elements, or None when n_embd does not fit the block size.
    pub fn row_bytes(self, n_embd: usize) -> Option<usize> {
        match self {
            EmbedType::F32 => Some(n_embd * 4),
            EmbedType::F16 => Some(n_embd * 2),
            EmbedType::Q8_0 | EmbedType::Q8_0Tiled => {
                (n_embd % 32 == 0).then_some(n_embd / 32 * 34)
            }
        }
    }

    /// Bytes of the whole (n_vocab, n_embd) table (the tiled form pads to whole tiles).
    pub fn table_bytes(self, n_vocab: usize, n_embd: usize) -> Option<usize> {
        let rows = match self {
            EmbedType::Q8_0Tiled => n_vocab.div_ceil(super::tiled::TILE) * super::tiled::TILE,
            _ => n_vocab,
        };
        rows.checked_mul(self.row_bytes(n_embd)?)
    }
}

/// The embedding kernels, built once per context.
pub struct Embed {
    q8_0: Kernel,
    q8_0_tiled: Kernel,
    f16: Kernel,
    f32: Kernel,
}

impl Embed {
    pub fn new(ctx: &Context) -> Result<Embed> {
        let m = ctx.module(&kernels::EMBED, &[])?;
        Ok(Embed {
            q8_0: m.kernel("embed_q8_0")?,
            q8_0_tiled: m.kernel("embed_q8_0_tiled")?,
            f16: m.kernel("embed_f16")?,
            f32: m.kernel("embed_f32")?,
        })
    }

    /// Fetches `t` rows. Token ids outside [0, n_vocab) give NaN rows: validate them on the host
    /// first with `check_ids`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        w: &DeviceBuffer<u8>, // (n_vocab, n_embd) in `ty`: GGUF bytes, or tiled.rs's (Q8_0Tiled)
        ty: EmbedType,
        n_vocab: usize,
        n_embd: usize,
        ids: &DeviceBuffer<i32>, // (t)
        t: usize,
        out: &DeviceBuffer<f32>, // (t, n_embd)
        scale: f32,
    ) -> Result<()> {
        let table = ty.table_bytes(n_vocab, n_embd);
        ensure(OP, table.is_some(), || {
            format!("n_embd {n_embd} is not a multiple of 32 for {ty:?}")
        })?;
        holds(OP, "token_embd", w, table.unwrap_or(0))?;
        holds(OP, "ids", ids, t)?;
        holds(OP, "out", out, prod(OP, &[t, n_embd])?)?;
        if t == 0 {
            return Ok(());
        }
        let k = match ty {
            EmbedType::Q8_0 => &self.q8_0,
            EmbedType::Q8_0Tiled => &self.q8_0_tiled,
            EmbedType::F16 => &self.f16,
            EmbedType::F32 => &self.f32,
        };
        let global = prod(OP, &[t, round_up(n_embd, 32)])?;
        int(OP, "t * n_embd", global)?;
        q.launch(
            k,
            NdRange::d1(global, 32),
            &[
                Arg::addr(w),
                Arg::addr(ids),
                Arg::addr(out),
                Arg::i32(int(OP, "n_embd", n_embd)?),
                Arg::i32(int(OP, "n_vocab", n_vocab)?),
                Arg::f32(scale),
            ],
        )
    }
}

/// An error naming the first token id outside [0, n_vocab).
pub fn check_ids(ids: &[i32], n_vocab: usize) -> Result<()> {
    match ids.iter().position(|&id| id < 0 || id as usize >= n_vocab) {
        None => Ok(()),
        Some(i) => Err(crate::sycl::SyclError::invalid(
            OP,
            format!(
                "token id {} at index {i} is outside the vocabulary [0, {n_vocab})",
                ids[i]
            ),
        )),
    }
}

/// Reference: the same rows dequantised and scaled in f64. `w` is the whole tensor's GGUF bytes
/// (for Q8_0Tiled too: the tiled copy holds the same values).
pub fn reference(w: &[u8], ty: EmbedType, n_embd: usize, ids: &[i32], scale: f32) -> Vec<f64> {
    let row = ty
        .row_bytes(n_embd)
        .expect("reference called with a valid n_embd"); // test-side use
    let mut out = Vec::with_capacity(ids.len() * n_embd);
    for &id in ids {
        let r = &w[id as usize * row..(id as usize + 1) * row];
        for e in 0..n_embd {
            let v = match ty {
                // the slice is 4 bytes long by construction
                EmbedType::F32 => {
                    f32::from_le_bytes(r[4 * e..4 * e + 4].try_into().unwrap()) as f64
                }
                EmbedType::F16 => half::f16::from_le_bytes([r[2 * e], r[2 * e + 1]]).to_f64(),
                EmbedType::Q8_0 | EmbedType::Q8_0Tiled => {
                    let b = &r[e / 32 * 34..e / 32 * 34 + 34];
                    let d = half::f16::from_le_bytes([b[0], b[1]]).to_f64();
                    d * (b[2 + e % 32] as i8) as f64
                }
            };
            out.push(v * scale as f64);
        }
    }
    out
}
