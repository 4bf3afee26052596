//! Weight matrices as the matrix kernels see them (`WeightView`, `QuantMatrix`), the per-device
//! kernel set (`MatrixKernels`) that builds and holds the `mmvq`/`matmul` modules per format, and
//! the errors of both families. Launchers: `mmvq.rs` (T <= 8), `matmul.rs` (any T).

use super::matmul_tile::MatmulTile;
use super::vnni;
use crate::quant::{self, type_id, QuantError};
use crate::sycl::kernels::{
    matmul_grids, mmvq_grids, MATMUL, MMVQ, MMVQ_KTILED, MMVQ_TILED, MMVQ_VNNI,
};
use crate::sycl::{Context, DeviceBuffer, Kernel, Store, SyclError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum MatrixError {
    #[error("{what}: ggml type {type_id} ({name}) has no matrix kernel (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ3_S, IQ2_S, IQ1_S, IQ1_M)")]
    UnsupportedType {
        what: String,
        type_id: u32,
        name: &'static str,
    },
    #[error("{what}: {message}")]
    Shape { what: String, message: String },
    #[error("{name}={value:?}: {why}")]
    Setting {
        name: &'static str,
        value: String,
        why: &'static str,
    },
    #[error(transparent)]
    Sycl(#[from] SyclError),
    #[error(transparent)]
    Quant(#[from] QuantError),
}

pub type Result<T> = std::result::Result<T, MatrixError>;

/// Most activation rows one `mmvq` call takes (the speculative verify window).
pub const MMVQ_MAX_T: usize = 8;

/// The `-DCFG_FMT_<name>` of a ggml type, if the matrix kernels support it.
pub fn cfg_name(type_id: u32) -> Option<&'static str> {
    Some(match type_id {
        type_id::F32 => "F32",
        type_id::F16 => "F16",
        type_id::BF16 => "BF16",
        type_id::Q4_0 => "Q4_0",
        type_id::Q4_1 => "Q4_1",
        type_id::Q5_0 => "Q5_0",
        type_id::Q5_1 => "Q5_1",
        type_id::Q8_0 => "Q8_0",
        type_id::Q2_K => "Q2_K",
        type_id::Q3_K => "Q3_K",
        type_id::Q4_K => "Q4_K",
        type_id::Q5_K => "Q5_K",
        type_id::Q6_K => "Q6_K",
        type_id::IQ4_NL => "IQ4_NL",
        type_id::IQ4_XS => "IQ4_XS",
        type_id::IQ2_S => "IQ2_S",
        type_id::IQ1_S => "IQ1_S",
        type_id::IQ1_M => "IQ1_M",
        type_id::IQ2_XXS => "IQ2_XXS",
        type_id::IQ2_XS => "IQ2_XS",
        type_id::IQ3_XXS => "IQ3_XXS",
        type_id::IQ3_S => "IQ3_S",
        _ => return None,
    })
}

/// Whether the format decodes through ggml's i-quant lookup tables (engine/quant/grids.rs): its
/// mmvq / matmul come from `mmvq_grids` / `matmul_grids` (the tables + qformats_iq.hpp) instead
/// of `MMVQ` / `MATMUL`, which stay byte-identical for every other format.
pub fn uses_grids(type_id: u32) -> bool {
    cfg_name(type_id)
        .is_some_and(|n| n.starts_with("IQ1") || n.starts_with("IQ2") || n.starts_with("IQ3"))
}

/// Elements per kernel block: the format's block, and 32 for the float types (the kernels
/// process floats in 32-element pseudo-blocks, so their n_in must be a multiple of 32).
pub fn kernel_block(type_id: u32) -> Result<(usize, usize)> {
    let (elems, bytes) = quant::block_info(type_id)?;
    Ok(if elems == 1 {
        (32, 32 * bytes)
    } else {
        (elems, bytes)
    })
}

/// A weight matrix in device memory, shape (n_out, n_in), each row `n_in / block_elems`
/// blocks: its GGUF bytes unchanged and/or their tiled copy. `offset` is in bytes into `buf` (a
/// tensor inside a larger upload); it must keep 4-byte alignment (GGUF aligns tensor data to 32).
#[derive(Clone, Copy)]
pub struct WeightView<'a> {
    /// The GGUF bytes; None when only the tiled copy is on the device (the engine's default for
    /// the formats that have one: `QuantMatrix::upload_for`), which every default-path kernel
    /// reads: the decode products directly, the prompt's `matmul` by decoding it lane = row
    /// (sycl/kernels/untile.hpp), the same bits.
    pub buf: Option<&'a DeviceBuffer<u8>>,
    pub offset: usize,
    pub type_id: u32,
    pub n_out: usize,
    pub n_in: usize,
    /// The same matrix repacked one-lane-per-row (`tiled.rs`, or `ktiled.rs` for the K-quants),
    /// which `mmvq` then reads instead of `buf` (None: mmvq reads the GGUF bytes).
    pub tiled: Option<&'a DeviceBuffer<u8>>,
    /// Whether the prompt's `matmul` reads `buf` when both copies are there (the same bits):
    /// yes when the GGUF bytes were kept to be read (`STRATA_KEEP_GGUF=1`), no when they were
    /// kept only for `STRATA_MMVQ_KREG=1`'s decode products (the tiled reader is faster).
    pub matmul_reads_gguf: bool,
}

impl<'a> WeightView<'a> {
    /// The GGUF bytes, for the kernels that read only them (`what` names the caller); an error
    /// when only the tiled copy was kept.
    pub fn gguf(&self, what: &str) -> Result<&'a DeviceBuffer<u8>> {
        self.buf.ok_or_else(|| MatrixError::Shape {
            what: what.to_string(),
            message: format!(
                "({}, {}) {}: only the tiled copy is on the device and this kernel reads GGUF \
                 bytes (load with STRATA_KEEP_GGUF=1 to keep them)",
                self.n_out,
                self.n_in,
                quant::type_name(self.type_id).unwrap_or("?")
            ),
        })
    }
}

/// An owned weight matrix: one device buffer holding exactly the tensor's bytes, and/or their
/// tiled copy for the decode kernel when the format has one.
pub struct QuantMatrix {
    /// None: dropped at upload, the tiled copy serves every default-path kernel (`upload_for`)
    pub buf: Option<DeviceBuffer<u8>>,
    pub tiled: Option<DeviceBuffer<u8>>,
    pub type_id: u32,
    pub n_out: usize,
    pub n_in: usize,
    /// `WeightView::matmul_reads_gguf` (`GgufBytes::Read`, or no tiled copy)
    pub matmul_reads_gguf: bool,
}

/// What `QuantMatrix::upload_for` does with the GGUF bytes of a format that has a tiled copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgufBytes {
    /// Not on the device: the tiled copy serves every default-path kernel (half the memory).
    Drop,
    /// On the device for the kernels that read only them (`STRATA_MMVQ_KREG=1`'s decode
    /// products); the prompt's matmul keeps reading the tiled copy, the faster reader.
    Keep,
    /// On the device and read wherever a kernel can (`STRATA_KEEP_GGUF=1`, `upload`).
    Read,
}

impl QuantMatrix {
    /// Uploads `bytes` (n_out, n_in) of ggml type `type_id` into `store` (a queue, or the model's
    /// arena of huge-page blocks: sycl/arena.rs), and their tiled copy when the format has one;
    /// `name` labels errors.
    pub fn upload(
        store: &impl Store,
        name: &str,
        type_id: u32,
        n_out: usize,
        n_in: usize,
        bytes: &[u8],
    ) -> Result<QuantMatrix> {
        QuantMatrix::upload_for(store, name, type_id, n_out, n_in, bytes, GgufBytes::Read)
    }

    /// `upload`, with the GGUF bytes as `gguf` says (always kept when the format has no tiled
    /// copy): without them the matrix takes half the memory, and every default-path kernel
    /// reads the tiled copy with the same results (the engine's load: model/weights.rs).
    pub fn upload_for(
        store: &impl Store,
        name: &str,
        type_id: u32,
        n_out: usize,
        n_in: usize,
        bytes: &[u8],
        gguf: GgufBytes,
    ) -> Result<QuantMatrix> {
        let want = quant::bytes_for(type_id, n_out * n_in)?;
        if bytes.len() != want {
            return Err(MatrixError::Shape {
                what: name.to_string(),
                message: format!(
                    "{} bytes for a ({n_out}, {n_in}) {} matrix, expected {want}",
                    bytes.len(),
                    quant::type_name(type_id)?
                ),
            });
        }
        let tiled = match repack(type_id, bytes, n_out, n_in) {
            Some(t) => Some(store.put(&t)?),
            None => None,
        };
        let buf = match gguf != GgufBytes::Drop || tiled.is_none() {
            true => Some(store.put(bytes)?),
            false => None,
        };
        Ok(QuantMatrix {
            matmul_reads_gguf: gguf == GgufBytes::Read || tiled.is_none(),
            buf,
            tiled,
            type_id,
            n_out,
            n_in,
        })
    }

    /// Uploads `bytes` (n_out, n_in) as they are, without a tiled copy: for stacked matrices
    /// read a slice of rows at a time (`rows`: a MoE layer's experts), which the tiled layout
    /// does not allow.
    pub fn upload_stacked(
        store: &impl Store,
        name: &str,
        type_id: u32,
        n_out: usize,
        n_in: usize,
        bytes: &[u8],
    ) -> Result<QuantMatrix> {
        let want = quant::bytes_for(type_id, n_out * n_in)?;
        if bytes.len() != want {
            return Err(MatrixError::Shape {
                what: name.to_string(),
                message: format!(
                    "{} bytes for a ({n_out}, {n_in}) {} matrix, expected {want}",
                    bytes.len(),
                    quant::type_name(type_id)?
                ),
            });
        }
        Ok(QuantMatrix {
            buf: Some(store.put(bytes)?),
            tiled: None,
            type_id,
            n_out,
            n_in,
            matmul_reads_gguf: true,
        })
    }

    /// Rows [start, start + n) as a matrix of their own (GGUF bytes at their offset; no tiled
    /// copy). Err when a row is not whole blocks of the format, or the rows are past the end.
    pub fn rows(&self, start: usize, n: usize) -> Result<WeightView<'_>> {
        let row = quant::bytes_for(self.type_id, self.n_in)?;
        if start + n > self.n_out {
            return Err(MatrixError::Shape {
                what: "rows".into(),
                message: format!("rows {start}..{} of a matrix of {}", start + n, self.n_out),
            });
        }
        Ok(WeightView {
            buf: self.buf.as_ref(),
            offset: start * row,
            type_id: self.type_id,
            n_out: n,
            n_in: self.n_in,
            tiled: None,
            matmul_reads_gguf: true,
        })
    }

    pub fn view(&self) -> WeightView<'_> {
        WeightView {
            buf: self.buf.as_ref(),
            offset: 0,
            type_id: self.type_id,
            n_out: self.n_out,
            n_in: self.n_in,
            tiled: self.tiled.as_ref(),
            matmul_reads_gguf: self.matmul_reads_gguf,
        }
    }

    /// Device bytes held (GGUF bytes + tiled copy).
    pub fn device_bytes(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.len()) + self.tiled.as_ref().map_or(0, |t| t.len())
    }
}

/// The decode kernels' repacked copy of (n_out, n_in) GGUF bytes `w` of `type_id`: `tiled.rs`
/// for the 32-element-block formats, `ktiled.rs` for the K-quants, None for the others.
pub fn repack(type_id: u32, w: &[u8], n_out: usize, n_in: usize) -> Option<Vec<u8>> {
    super::tiled::tile(type_id, w, n_out, n_in)
        .or_else(|| super::ktiled::tile(type_id, w, n_out, n_in))
}

/// Bytes of `repack`'s copy of an (n_out, n_in) matrix, None for a format without one.
pub fn repacked_bytes(type_id: u32, n_out: usize, n_in: usize) -> Option<usize> {
    super::tiled::tiled_bytes(type_id, n_out, n_in)
        .or_else(|| super::ktiled::tiled_bytes(type_id, n_out, n_in))
}

impl WeightView<'_> {
    /// Checks the view against its buffer and the kernels' constraints; returns
    /// (cfg name, kernel block elems).
    pub(crate) fn check(&self, what: &str) -> Result<&'static str> {
        let shape = |message: String| MatrixError::Shape {
            what: what.to_string(),
            message,
        };
        let name = cfg_name(self.type_id).ok_or_else(|| MatrixError::UnsupportedType {
            what: what.to_string(),
            type_id: self.type_id,
            name: quant::type_name(self.type_id).unwrap_or("unknown"),
        })?;
        let (elems, _) = kernel_block(self.type_id)?;
        if self.n_in == 0 || self.n_out == 0 || self.n_in % elems != 0 {
            return Err(shape(format!(
                "({}, {}) {name}: n_in must be a positive multiple of {elems}",
                self.n_out, self.n_in
            )));
        }
        if self.n_in > i32::MAX as usize || self.n_out > i32::MAX as usize {
            return Err(shape(format!(
                "({}, {}) is too large",
                self.n_out, self.n_in
            )));
        }
        let bytes = quant::bytes_for(self.type_id, self.n_out * self.n_in)?;
        match (self.buf, self.tiled) {
            (Some(buf), _) if self.offset % 4 != 0 || self.offset + bytes > buf.len() => {
                return Err(shape(format!(
                    "({}, {}) {name} needs {bytes} bytes at offset {} (4-aligned) of a {}-byte \
                     buffer",
                    self.n_out,
                    self.n_in,
                    self.offset,
                    buf.len()
                )));
            }
            (Some(_), _) => {}
            (None, Some(t)) => {
                let want = repacked_bytes(self.type_id, self.n_out, self.n_in);
                if want != Some(t.len()) {
                    return Err(shape(format!(
                        "({}, {}) {name}: a tiled copy of {} bytes, expected {want:?}",
                        self.n_out,
                        self.n_in,
                        t.len()
                    )));
                }
            }
            (None, None) => {
                return Err(shape(format!(
                    "({}, {}) {name}: neither GGUF bytes nor a tiled copy",
                    self.n_out, self.n_in
                )));
            }
        }
        Ok(name)
    }
}

/// Checks an activation buffer holds `rows` rows of `n` f32.
pub(crate) fn check_act(
    what: &str,
    arg: &str,
    b: &DeviceBuffer<f32>,
    rows: usize,
    n: usize,
) -> Result<()> {
    if b.len() < rows * n {
        return Err(MatrixError::Shape {
            what: what.to_string(),
            message: format!(
                "{arg} holds {} floats, needs ({rows}, {n}) = {}",
                b.len(),
                rows * n
            ),
        });
    }
    Ok(())
}

/// Geometry baked into the modules (must match the kernels' CFG_ defaults or options; the
/// matmul's rows per work-group are its `MatmulTile`'s).
pub(crate) const MMVQ_ROWS_PER_GROUP: usize = 4; // CFG_NSG sub-groups of 16, one row each
pub(crate) const SG: usize = 16;

/// The two kernel families over the shared format traits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Mmvq,
    Matmul,
    /// matmul decoding the tiled copy lane = row (`-DCFG_TILED`, untile.hpp)
    MatmulTiled,
    /// mmvq on tiled weights (`mmvq_tiled.cpp`), one kernel per column count 1..=8
    MmvqTiled(u8),
    /// `MmvqTiled` reading a staged x (`-DCFG_XS_PRE`, engine/kernels/xstage.rs)
    MmvqTiledPre(u8),
    /// `MmvqTiledPre` with a residual and the norm after it in the same launch
    /// (`-DCFG_NORM_TAIL`, `mmvq_tiled_norm_t<T>`: `MatrixKernels::mmvq_residual_norm`)
    MmvqTiledNorm(u8),
    /// mmvq on K-tiled weights (`mmvq_ktiled.cpp`, Q4_K/Q5_K/Q6_K), per column count 1..=8
    MmvqKTiled(u8),
    /// `MmvqKTiled` with Gemma's post-norm and the next norm in the same launch
    /// (`-DCFG_NORM_TAIL`, `mmvq_ktiled_norm_t<T>`: `MatrixKernels::mmvq_post_norm`)
    MmvqKTiledNorm(u8),
    /// the opt-in integer-dot product on tiled weights (`mmvq_vnni.cpp`, vnni.rs)
    MmvqVnni(u8),
}

/// The matrix kernels of one context, built per (format, family) on first use (or by `prepare`)
/// and kept; the shim's module cache and the runtime's disk cache sit below.
pub struct MatrixKernels {
    ctx: Context,
    built: Mutex<HashMap<(u32, Family), Arc<Kernel>>>,
    matmul_tile: MatmulTile,
    /// the products of the formats `vnni::supported` takes, with a staged x, use
    /// `mmvq_vnni.cpp` in this ISA (None: off)
    int_dot: Option<vnni::Isa>,
}

impl MatrixKernels {
    /// The kernels of `ctx`, with the matmul tile its devices want (`MatmulTile::for_context`).
    pub fn new(ctx: &Context) -> MatrixKernels {
        MatrixKernels::with_matmul_tile(ctx, MatmulTile::for_context(ctx))
    }

    /// The kernels of `ctx` with a given matmul tile (benchmarks and the tile-agreement test).
    pub fn with_matmul_tile(ctx: &Context, matmul_tile: MatmulTile) -> MatrixKernels {
        MatrixKernels {
            ctx: ctx.clone(),
            built: Mutex::new(HashMap::new()),
            matmul_tile,
            int_dot: None,
        }
    }

    pub fn matmul_tile(&self) -> MatmulTile {
        self.matmul_tile
    }

    /// Turns the integer-dot products (vnni.rs) on, in the best ISA this CPU has (`vnni::isa`),
    /// or off; refused, naming why, where they cannot run. Off by default: the engine turns them
    /// on for `STRATA_VNNI=1`.
    pub fn set_int_dot(&mut self, on: bool) -> Result<()> {
        if !on {
            return self.set_int_dot_isa(None);
        }
        let isa = vnni::isa(&self.ctx).map_err(vnni::refused)?;
        self.set_int_dot_isa(Some(isa))
    }

    /// Turns the integer-dot products on in a given ISA (tests and benchmarks compare them), or
    /// off; refused, naming why, where that ISA cannot run.
    pub fn set_int_dot_isa(&mut self, isa: Option<vnni::Isa>) -> Result<()> {
        if let Some(i) = isa {
            if let Some(why) = vnni::unsupported_isa(&self.ctx, i) {
                return Err(vnni::refused(why));
            }
        }
        if isa != self.int_dot {
            // the kernels built for the other ISA go
            let mut map = self.built.lock().unwrap_or_else(|p| p.into_inner());
            map.retain(|(_, f), _| !matches!(f, Family::MmvqVnni(_)));
        }
        self.int_dot = isa;
        Ok(())
    }

    /// Whether the integer-dot products are on.
    pub fn int_dot(&self) -> bool {
        self.int_dot.is_some()
    }

    /// The ISA of the integer-dot products, when on.
    pub fn int_dot_isa(&self) -> Option<vnni::Isa> {
        self.int_dot
    }

    /// Builds now (e.g. at model load) the families the engine uses for matrices of each listed
    /// (ggml type, GGUF bytes kept, tiled copy kept): the GGUF kernels only where the bytes are
    /// (the tiled-only load: `QuantMatrix::upload_for`), matmul's tiled reader where they are not.
    pub fn prepare(&self, layouts: &[(u32, bool, bool)]) -> Result<()> {
        for &(t, gguf, tiled) in layouts {
            if gguf && !tiled {
                self.kernel(t, Family::Mmvq, "prepare")?;
            }
            let matmul = if gguf {
                Family::Matmul
            } else {
                Family::MatmulTiled
            };
            self.kernel(t, matmul, "prepare")?;
            if !tiled {
                continue;
            }
            if super::tiled::supported(t) {
                self.kernel(t, Family::MmvqTiled(1), "prepare")?;
            }
            if super::tiled::reads_stage(t) {
                // the decode step's products read a staged x (xstage.rs): its own module, built
                // now rather than inside the first generated token's time
                self.kernel(t, Family::MmvqTiledPre(1), "prepare")?;
            }
            if self.int_dot() && vnni::supported(t) {
                self.kernel(t, Family::MmvqVnni(1), "prepare")?;
            }
            if super::ktiled::supported(t) {
                self.kernel(t, Family::MmvqKTiled(1), "prepare")?;
            }
        }
        Ok(())
    }

    /// Builds now the module of `mmvq_residual_norm` (`post` false: llama's fold, a tiled
    /// 32-block format the integer-dot products do not read) or `mmvq_post_norm` (`post`:
    /// Gemma's, a K-tiled format) for W, where it takes W.
    pub fn prepare_norm_fold(&self, w: &WeightView, post: bool) -> Result<()> {
        let int_dot = self.int_dot() && vnni::supported(w.type_id);
        let family = if post {
            self.post_norm_takes(w, 1)
                .then_some(Family::MmvqKTiledNorm(1))
        } else {
            let takes = w.tiled.is_some() && super::tiled::supported(w.type_id) && !int_dot;
            takes.then_some(Family::MmvqTiledNorm(1))
        };
        if let Some(f) = family {
            self.kernel(w.type_id, f, "prepare")?;
        }
        Ok(())
    }

    /// The kernel of (`type_id`, `family`), building it if needed; `what` labels errors.
    pub fn kernel(&self, type_id: u32, family: Family, what: &str) -> Result<Arc<Kernel>> {
        // A poisoned lock only means another thread panicked mid-build; the map is still valid.
        let mut map = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = map.get(&(type_id, family)) {
            return Ok(k.clone());
        }
        let name = cfg_name(type_id).ok_or_else(|| MatrixError::UnsupportedType {
            what: what.to_string(),
            type_id,
            name: quant::type_name(type_id).unwrap_or("unknown"),
        })?;
        let opt = format!("-DCFG_FMT_{name}");
        let (src, kname) = match family {
            Family::Mmvq if uses_grids(type_id) => (mmvq_grids(), "mmvq"),
            Family::Matmul | Family::MatmulTiled if uses_grids(type_id) => {
                (matmul_grids(), "matmul")
            }
            Family::Mmvq => (&MMVQ, "mmvq"),
            Family::Matmul | Family::MatmulTiled => (&MATMUL, "matmul"),
            Family::MmvqTiled(_) | Family::MmvqTiledPre(_) => (&MMVQ_TILED, "mmvq_tiled"),
            Family::MmvqTiledNorm(_) => (&MMVQ_TILED, "mmvq_tiled_norm"),
            Family::MmvqKTiled(_) => (&MMVQ_KTILED, "mmvq_ktiled"),
            Family::MmvqKTiledNorm(_) => (&MMVQ_KTILED, "mmvq_ktiled_norm"),
            Family::MmvqVnni(_) => (&MMVQ_VNNI, "mmvq_vnni"),
        };
        let kname = match family {
            Family::MmvqTiled(t)
            | Family::MmvqTiledPre(t)
            | Family::MmvqTiledNorm(t)
            | Family::MmvqKTiled(t)
            | Family::MmvqKTiledNorm(t)
            | Family::MmvqVnni(t) => format!("{kname}_t{t}"),
            _ => kname.to_string(),
        };
        let tile = self.matmul_tile.options();
        let mut opts = vec![opt.as_str()];
        if matches!(family, Family::Matmul | Family::MatmulTiled) {
            opts.extend(tile.iter().map(String::as_str));
        }
        if family == Family::MatmulTiled {
            opts.push("-DCFG_TILED");
        }
        if matches!(family, Family::MmvqTiledPre(_) | Family::MmvqTiledNorm(_)) {
            opts.push("-DCFG_XS_PRE");
        }
        if matches!(family, Family::MmvqTiledNorm(_) | Family::MmvqKTiledNorm(_)) {
            opts.push("-DCFG_NORM_TAIL");
        }
        if let (Family::MmvqVnni(_), Some(isa)) = (family, self.int_dot) {
            opts.extend(isa.option());
        }
        let k = Arc::new(self.ctx.module(src, &opts)?.kernel(&kname)?);
        map.insert((type_id, family), k.clone());
        Ok(k)
    }
}

/// f64 reference of both families: y[t, o] = sum_i W[o, i] * x[t, i] with W dequantized by
/// engine/quant (bitwise ggml's dequantizer) and every product and sum in f64.
/// `w`: (n_out, n_in) bytes of `type_id`; `x`: (t, n_in). Returns (t, n_out).
pub fn matrix_ref(
    type_id: u32,
    w: &[u8],
    n_out: usize,
    n_in: usize,
    x: &[f32],
    t: usize,
) -> Result<Vec<f64>> {
    let row_bytes = quant::bytes_for(type_id, n_in)?;
    if w.len() != row_bytes * n_out || x.len() != t * n_in {
        return Err(MatrixError::Shape {
            what: "matrix_ref".into(),
            message: format!(
                "w {} bytes for ({n_out}, {n_in}), x {} floats for ({t}, {n_in})",
                w.len(),
                x.len()
            ),
        });
    }
    let mut deq = vec![0f32; n_in];
    let mut y = vec![0f64; t * n_out];
    for (o, row) in w.chunks_exact(row_bytes).enumerate() {
        quant::dequantize_by_type(type_id, row, &mut deq)?;
        for (ti, xr) in x.chunks_exact(n_in).enumerate() {
            y[ti * n_out + o] = deq.iter().zip(xr).map(|(&a, &b)| a as f64 * b as f64).sum();
        }
    }
    Ok(y)
}
