//! The fast hyper-connection reads (`sycl/kernels/hc_fast.cpp`; docs/hyper-connections.md): two
//! launches per read site where the default read (`hc.rs`) takes four, with the same outputs
//! (R_out in place, rs, lo, the injection, mixed).
//!
//! - `STRATA_HC_Q8`: W_down and W_up read as Q8_0 from copies made at load (`q8_copy`: the GGUF's
//!   own Q8_0 blocks, or ggml's Q8_0 of BF16 / F16 / F32 values, reordered as quants then scales).
//!   Extra device memory: `q8_copy_bytes` per matrix (Flash-Next: 6.64 MiB per read site); the
//!   stored copies stay (the prompt path reads them).
//! - `STRATA_GR_FUSED`: the same two launches on the stored BF16 (or F16 / F32) bytes; no extra
//!   memory.
//!
//! 1. `hcf_down`, per (row group, column slab): H' = H + a * y, H' * gamma staged unscaled with
//!    the slab's sums of squares, the group's W_down rows (and the injection rows) over the slab;
//!    the last work-group to arrive (an atomic counter it resets: nothing waits, graph replays
//!    see 0) applies rs per stream and writes rs, lo, u = silu(lo / S) and the injection.
//! 2. `hcf_up`, per 16 columns: gate = sigmoid(W_up u) with the rank split over the work-group's
//!    sub-groups, then the pending write (R_out: the default read's operations, bitwise the same)
//!    and the gated stream mean.
//!
//! Not bitwise the default read (another summation order; Q8_0: rounded weights), bitwise itself
//! from call to call, T rows bitwise T one-row calls, graph replays bitwise direct launches. What
//! the kernels do not take (`covers`) runs the default read instead (`run_or_default`, one stderr
//! line per reason). f64 reference: `hc_ref::reference` on the very weights read (`q8_blocks`).
//!
//! ```ignore
//! let fast = HcFast::new(&ctx)?;                         // per context
//! let sc = HcFastScratch::new(&q, n, s, r)?;             // per queue and geometry
//! let q8d = q.upload(&hc_fast::q8_copy(down_type, &down_bytes, r, s * n)?)?; // STRATA_HC_Q8 only
//! let q8u = q.upload(&hc_fast::q8_copy(up_type, &up_bytes, s * n, r)?)?;
//! let call = HcFastCall { read: hc_call, q8: Some(HcQ8 { down: &q8d, up: &q8u }) }; // None: fused
//! fast.run_or_default(&hc_read, &q, &call, &x, Some((&y, &a)), &rs, &lo, Some(&a_out), &mixed,
//!                     &sc, &hc_scratch)?;            // or `run` after `covers(&call)` is Ok
//! ```

use super::float_args::{ensure, holds, int, prod};
use super::hc::{check_rows, check_site, HcCall, HcRead, HcScratch, SiteIo};
use crate::quant::{self, type_id, QuantError};
use crate::sycl::{
    kernels, Arg, Context, DeviceBuffer, DeviceType, Kernel, NdRange, Queue, Result, SyclError,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

const OP: &str = "hc_fast";

/// Most rows per read (hc_fast.cpp's HCF_TMAX): the decode and verify windows; the prompt path
/// (more rows) stays on the default read.
pub const TMAX: usize = 8;
/// Most streams (HCF_SMAX).
pub const SMAX: usize = 16;
/// Widest column slab of `hcf_down` (HCF_WMAX; local memory of TMAX * WMAX floats).
pub const WMAX: usize = 1280;
/// Most parts of the rank in `hcf_up` (HCF_KSMAX).
const KSMAX: usize = 8;
/// Sub-groups per `hcf_down` work-group (HCF_NSG).
const NSG: usize = 4;
/// hc_fast.cpp's id of the Q8_0 copy layout (HCF_Q8_COPY).
const Q8_COPY: u32 = 1008;

/// The two variants (the flag that selects each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// `STRATA_HC_Q8`: the Q8_0 copies of W_down / W_up.
    Q8,
    /// `STRATA_GR_FUSED`: W_down / W_up as stored (BF16, F16 or F32).
    Fused,
}

impl Variant {
    pub fn flag(self) -> &'static str {
        match self {
            Variant::Q8 => crate::flags::table::HC_Q8,
            Variant::Fused => crate::flags::table::GR_FUSED,
        }
    }
}

/// The Q8_0 copies of one read site's projections (`q8_copy` of the stored bytes, uploaded).
#[derive(Clone, Copy)]
pub struct HcQ8<'a> {
    pub down: &'a DeviceBuffer<u8>, // q8_copy of W_down (r, S * n)
    pub up: &'a DeviceBuffer<u8>,   // q8_copy of W_up (S * n, r)
}

/// One read site: the default read's call (geometry, gamma, the stored weights, the injection
/// rows) and, for `STRATA_HC_Q8`, the Q8_0 copies. `q8` None: the fused read of the stored
/// W_down / W_up.
#[derive(Clone, Copy)]
pub struct HcFastCall<'a> {
    pub read: HcCall<'a>,
    pub q8: Option<HcQ8<'a>>,
}

impl HcFastCall<'_> {
    pub fn variant(&self) -> Variant {
        if self.q8.is_some() {
            Variant::Q8
        } else {
            Variant::Fused
        }
    }
}

/// Launch geometry: `slab` columns per `hcf_down` work-group (a multiple of 32 dividing n, at
/// most WMAX), `rows` W_down rows per `hcf_down` work-group (dividing r; the grid is r / rows x
/// S * n / slab groups), `ksplit` parts of the rank over the sub-groups of an `hcf_up` work-group
/// (r / ksplit a multiple of 32). The results depend on `slab` and `ksplit` (the summation
/// order), never on `rows`; a device uses one geometry per (n, r) (`Geometry::choose`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    pub slab: usize,
    pub rows: usize,
    pub ksplit: usize,
}

impl Geometry {
    /// The widest slab that divides n (a multiple of 32, at most WMAX); 32 W_down rows per
    /// group; the rank in one part per sub-group on the CPU device, in parts of 64 (at most 5,
    /// the seeds' Arc split) on a GPU. None when n has no such slab.
    ///
    /// Measured on the CPU device (`strata parity hc-q8 --sweep`, n 2560 S 4 r 320, us per read
    /// at T = 1 / 4 / 6, Q8_0): rows 320 601 / 820 / 965, rows 32 479 / 703 / 891; ksplit 5
    /// 605 / 942 / 1186 (the sub-groups of a work-group run one after another on one core: the
    /// split adds folds and a barrier and no parallelism); slab 640 483 / 737 / 911, 320 507 /
    /// 818 / 1027. On a GPU the split is what gives hcf_up more than n / 16 sub-groups; not
    /// measured here (docs/hyper-connections.md).
    pub fn choose(n: usize, r: usize, gpu: bool) -> Option<Geometry> {
        let slab = (1..=WMAX / 32)
            .rev()
            .map(|m| m * 32)
            .find(|&w| n % w == 0)?;
        let rows = if r % 32 == 0 { 32 } else { r };
        let ksplit = if gpu {
            (1..=5)
                .rev()
                .find(|&p| r % p == 0 && (r / p) % 32 == 0)
                .unwrap_or(1)
        } else {
            1
        };
        Some(Geometry { slab, rows, ksplit })
    }

    /// The geometry a device of the other kind would choose (the self-tests run both).
    pub fn other(n: usize, r: usize, gpu: bool) -> Option<Geometry> {
        Geometry::choose(n, r, !gpu)
    }
}

/// Why the fast read does not take a site of this shape and these types (Ok: it does). `inject`:
/// the injection rows' type, None for a head mixer. `down` / `up`: the stored types (the Q8
/// variant reads copies of them, made by `q8_copy` from F32, F16, BF16 or Q8_0).
#[allow(clippy::too_many_arguments)]
pub fn covers_shape(
    v: Variant,
    n: usize,
    s: usize,
    r: usize,
    t: usize,
    down: u32,
    inject: Option<u32>,
    up: u32,
) -> std::result::Result<(), String> {
    if t == 0 || t > TMAX {
        return Err(format!("{t} rows; the fast read takes 1..={TMAX}"));
    }
    if s == 0 || s > SMAX {
        return Err(format!("{s} streams; the fast read takes 1..={SMAX}"));
    }
    if n == 0 || n % 32 != 0 {
        return Err(format!("n_embd {n} is not a multiple of 32"));
    }
    if r == 0 || r % 32 != 0 {
        return Err(format!("rank {r} is not a multiple of 32"));
    }
    let stored = |what: &str, ty: u32| -> std::result::Result<(), String> {
        let ok = match v {
            Variant::Q8 => matches!(
                ty,
                type_id::F32 | type_id::F16 | type_id::BF16 | type_id::Q8_0
            ),
            Variant::Fused => matches!(ty, type_id::F32 | type_id::F16 | type_id::BF16),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{what} stored as {} (the {} read takes {})",
                quant::type_name(ty).unwrap_or("an unknown type"),
                v.flag(),
                match v {
                    Variant::Q8 => "F32, F16, BF16 or Q8_0",
                    Variant::Fused => "F32, F16 or BF16",
                }
            ))
        }
    };
    stored("W_down", down)?;
    stored("W_up", up)?;
    if v == Variant::Fused && down != up {
        return Err(format!(
            "W_down and W_up stored as {} and {} (the {} read takes one type)",
            quant::type_name(down).unwrap_or("?"),
            quant::type_name(up).unwrap_or("?"),
            v.flag()
        ));
    }
    if let Some(ty) = inject {
        if !matches!(
            ty,
            type_id::F32 | type_id::F16 | type_id::BF16 | type_id::Q8_0
        ) {
            return Err(format!(
                "the injection rows stored as {}",
                quant::type_name(ty).unwrap_or("an unknown type")
            ));
        }
    }
    let g = Geometry::choose(n, r, false).ok_or_else(|| format!("n_embd {n}: no column slab"))?;
    check_geometry(n, r, &g)?;
    let g = Geometry::choose(n, r, true).ok_or_else(|| format!("n_embd {n}: no column slab"))?;
    check_geometry(n, r, &g)
}

fn check_geometry(n: usize, r: usize, g: &Geometry) -> std::result::Result<(), String> {
    if g.slab == 0 || g.slab % 32 != 0 || g.slab > WMAX || n % g.slab != 0 {
        return Err(format!("slab {} for n_embd {n}", g.slab));
    }
    if g.rows == 0 || r % g.rows != 0 {
        return Err(format!("{} rows per group for rank {r}", g.rows));
    }
    if g.rows == 0 || g.rows % 16 != 0 {
        // (hcf_down's sub-groups take up to 4 rows side by side, 4 sub-groups)
        return Err(format!("{} rows per group (a multiple of 16)", g.rows));
    }
    if g.ksplit == 0 || g.ksplit > KSMAX || r % g.ksplit != 0 || (r / g.ksplit) % 32 != 0 {
        return Err(format!("rank {r} in {} parts", g.ksplit));
    }
    Ok(())
}

/// `covers_shape` for a call.
pub fn covers(c: &HcFastCall) -> std::result::Result<(), String> {
    let r = &c.read;
    covers_shape(
        c.variant(),
        r.n,
        r.streams,
        r.rank,
        r.t,
        r.down.type_id,
        r.inject.map(|m| m.type_id),
        r.up.type_id,
    )
}

/// Bytes of the Q8_0 copy of an (n_out, n_in) matrix (n_in a multiple of 32): 34 per 32 weights,
/// the extra device memory per matrix of `STRATA_HC_Q8` (the stored copy stays resident).
pub fn q8_copy_bytes(n_out: usize, n_in: usize) -> usize {
    n_out * n_in / 32 * 34
}

/// The Q8_0 copy of an (n_out, n_in) matrix stored as `type_id` (its GGUF bytes): Q8_0 blocks as
/// they are, F32 / F16 / BF16 values quantized as ggml's `quantize_row_q8_0_ref` (engine/quant:
/// d = amax / 127 stored f16, q = round(x / d)); then laid out as every row's int8 quants row-
/// major, then every row's f16 scales (n_out, n_in / 32): what `hcf_down` / `hcf_up` read.
pub fn q8_copy(
    type_id: u32,
    bytes: &[u8],
    n_out: usize,
    n_in: usize,
) -> std::result::Result<Vec<u8>, QuantError> {
    let n = n_out * n_in;
    if !matches!(
        type_id,
        quant::type_id::F32 | quant::type_id::F16 | quant::type_id::BF16 | quant::type_id::Q8_0
    ) {
        // (the types a GGUF stores hyper-connection projections in; `covers_shape` agrees)
        return Err(QuantError::UnsupportedType(type_id));
    }
    if n_in % 32 != 0 {
        return Err(QuantError::RaggedValues {
            format: "Q8_0",
            n: n_in,
            block_elems: 32,
        });
    }
    let blocks = if type_id == quant::type_id::Q8_0 {
        if bytes.len() != q8_copy_bytes(n_out, n_in) {
            return Err(QuantError::LengthMismatch {
                format: "Q8_0",
                blocks: bytes.len() / 34,
                expected: bytes.len() / 34 * 32,
                got: n,
            });
        }
        bytes.to_vec()
    } else {
        let mut vals = vec![0f32; n];
        quant::dequantize_by_type(type_id, bytes, &mut vals)?;
        quant::quantize_by_type(quant::type_id::Q8_0, &vals)?
    };
    let mut out = vec![0u8; blocks.len()];
    let (qs, ds) = out.split_at_mut(n);
    for (b, blk) in blocks.chunks_exact(34).enumerate() {
        ds[2 * b..2 * b + 2].copy_from_slice(&blk[..2]);
        qs[32 * b..32 * b + 32].copy_from_slice(&blk[2..]);
    }
    Ok(out)
}

/// The GGUF Q8_0 blocks of a `q8_copy` (its inverse): the very values the Q8 read takes, for the
/// reference (`hc_ref::reference` with type Q8_0).
pub fn q8_blocks(
    copy: &[u8],
    n_out: usize,
    n_in: usize,
) -> std::result::Result<Vec<u8>, QuantError> {
    let n = n_out * n_in;
    if n_in % 32 != 0 || copy.len() != q8_copy_bytes(n_out, n_in) {
        return Err(QuantError::LengthMismatch {
            format: "Q8_0",
            blocks: copy.len() / 34,
            expected: copy.len() / 34 * 32,
            got: n,
        });
    }
    let (qs, ds) = copy.split_at(n);
    let mut out = vec![0u8; copy.len()];
    for (b, blk) in out.chunks_exact_mut(34).enumerate() {
        blk[..2].copy_from_slice(&ds[2 * b..2 * b + 2]);
        blk[2..].copy_from_slice(&qs[32 * b..32 * b + 32]);
    }
    Ok(out)
}

/// The read's intermediate buffers for one geometry (n, S, r) and up to TMAX rows; one per queue
/// (its arrival counter is zeroed here, outside any graph recording, and left zero by every
/// read).
pub struct HcFastScratch {
    part: DeviceBuffer<f32>,   // (C, TMAX, r + S) slab partials, C = S * n / slab
    ss: DeviceBuffer<f32>,     // (C, TMAX) slab sums of squares
    u: DeviceBuffer<f32>,      // (TMAX, r) silu(lo / S)
    a_prev: DeviceBuffer<f32>, // (TMAX, S) the pending a, kept for hcf_up (a_out may be it)
    count: DeviceBuffer<u32>,  // (1) hcf_down's arrival counter
    n: usize,
    s: usize,
    r: usize,
}

impl HcFastScratch {
    /// For reads of n_embd `n`, `s` streams, rank `r` at the geometry `run` uses.
    pub fn new(q: &Queue, n: usize, s: usize, r: usize) -> Result<HcFastScratch> {
        // (the slab, hence the scratch, is the same on every device)
        let g = Geometry::choose(n, r, false).unwrap_or(Geometry {
            slab: WMAX,
            rows: r,
            ksplit: 1,
        });
        Self::for_slab(q, n, s, r, g.slab)
    }

    /// For reads with column slabs of `slab` or wider (`run_with`).
    pub fn for_slab(q: &Queue, n: usize, s: usize, r: usize, slab: usize) -> Result<HcFastScratch> {
        let op = "hc_fast_scratch";
        ensure(op, n > 0 && s > 0 && r > 0 && slab > 0, || {
            format!("n {n}, S {s}, r {r}, slab {slab}: all must be > 0")
        })?;
        let c = prod(op, &[s, n.div_ceil(slab)])?;
        let scratch = HcFastScratch {
            part: q.alloc(prod(op, &[c, TMAX, r + s])?)?,
            ss: q.alloc(prod(op, &[c, TMAX])?)?,
            u: q.alloc(prod(op, &[TMAX, r])?)?,
            a_prev: q.alloc(prod(op, &[TMAX, s])?)?,
            count: q.upload(&[0u32])?,
            n,
            s,
            r,
        };
        q.wait()?;
        Ok(scratch)
    }

    /// Device bytes held.
    pub fn bytes(&self) -> usize {
        self.part.bytes()
            + self.ss.bytes()
            + self.u.bytes()
            + self.a_prev.bytes()
            + self.count.bytes()
    }
}

struct FastKernels {
    /// `hcf_down_T` and `hcf_up_T` for T = 1 ..= TMAX at index T - 1 (hc_fast.cpp builds one
    /// kernel per row count: a switch over T in one kernel trips the runtime's compiler)
    down: Vec<Kernel>,
    up: Vec<Kernel>,
}

/// The fast reads' kernels, built once per context: one module per (W_down / W_up format,
/// injection type), on first use or ahead with `prepare`.
pub struct HcFast {
    ctx: Context,
    gpu: bool, // the context's devices are GPUs (Geometry::choose)
    built: Mutex<HashMap<(u32, u32), Arc<FastKernels>>>,
    warned: Mutex<HashSet<String>>,
}

/// Which read `run_or_default` ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ran {
    Fast,
    Default,
}

impl HcFast {
    pub fn new(ctx: &Context) -> Result<HcFast> {
        let mut gpu = !ctx.devices().is_empty();
        for d in ctx.devices() {
            gpu &= d.info()?.device_type == DeviceType::Gpu;
        }
        Ok(HcFast {
            ctx: ctx.clone(),
            gpu,
            built: Mutex::new(HashMap::new()),
            warned: Mutex::new(HashSet::new()),
        })
    }

    /// The launch geometry `run` uses on this context's device.
    pub fn geometry(&self, n: usize, r: usize) -> Result<Geometry> {
        Geometry::choose(n, r, self.gpu)
            .ok_or_else(|| SyclError::invalid(OP, format!("n_embd {n}: no column slab")))
    }

    /// Whether the context's devices are GPUs (the geometry's rank split).
    pub fn on_gpu(&self) -> bool {
        self.gpu
    }

    /// Builds the module a call of this variant and these stored types uses (else the first
    /// `run` does). `inject`: the injection rows' type, None for a head mixer.
    pub fn prepare(&self, v: Variant, down: u32, inject: Option<u32>, up: u32) -> Result<()> {
        let w = match v {
            Variant::Q8 => Q8_COPY,
            Variant::Fused => {
                ensure(OP, down == up, || {
                    format!("the fused read takes W_down and W_up of one type, not {down} and {up}")
                })?;
                down
            }
        };
        self.kernels(w, inject.unwrap_or(type_id::BF16)).map(|_| ())
    }

    fn kernels(&self, w: u32, inj: u32) -> Result<Arc<FastKernels>> {
        // A poisoned lock only means another thread panicked mid-build; the map is still valid.
        let mut map = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = map.get(&(w, inj)) {
            return Ok(k.clone());
        }
        let opts = [
            format!("-DHCF_W={w}"),
            format!("-DHCF_INJ={inj}"),
            format!("-DHCF_WMAX={WMAX}"),
        ];
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let m = self.ctx.module(&kernels::HC_FAST, &opts)?;
        let named = |name: &str| -> Result<Vec<Kernel>> {
            (1..=TMAX)
                .map(|t| m.kernel(&format!("{name}_{t}")))
                .collect()
        };
        let k = Arc::new(FastKernels {
            down: named("hcf_down")?,
            up: named("hcf_up")?,
        });
        map.insert((w, inj), k.clone());
        Ok(k)
    }

    /// One read site (two launches, asynchronous on `q`), arguments as `HcRead::run`:
    /// - `pending`: the write of the site before, (y, a): x[t,s,:] += a[t,s] * y[t,:] first;
    /// - `x` is updated in place to H' (R_out, bitwise the default read's);
    /// - `a_out`: this site's injection (None: no injection rows, required at the head mixer). It
    ///   may be the pending `a` (read by every `hcf_down` group before the last one writes it);
    ///   `mixed` may be the pending `y` (read by launch 1, written by launch 2).
    ///
    /// An error (nothing launched) when `covers` says no.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        c: &HcFastCall,
        x: &DeviceBuffer<f32>, // (t, S, n) H in, H' out
        pending: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>, // (t, n) y, (t, S) a
        rs: &DeviceBuffer<f32>, // (t, S) 1 / rms per stream
        lo: &DeviceBuffer<f32>, // (t, r) W_down (rs * H' * gamma)
        a_out: Option<&DeviceBuffer<f32>>, // (t, S) 2 sigmoid(W_inj (rs * H' * gamma) / S)
        mixed: &DeviceBuffer<f32>, // (t, n) the gated stream mean
        sc: &HcFastScratch,
    ) -> Result<()> {
        covers(c).map_err(|why| SyclError::invalid(OP, why))?;
        let r = &c.read;
        let g = self.geometry(r.n, r.rank)?;
        self.run_with(q, c, &g, x, pending, rs, lo, a_out, mixed, sc)
    }

    /// `run` with an explicit launch geometry (the parity command's sweep).
    #[allow(clippy::too_many_arguments)]
    pub fn run_with(
        &self,
        q: &Queue,
        c: &HcFastCall,
        geo: &Geometry,
        x: &DeviceBuffer<f32>,                                     // (t, S, n)
        pending: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>, // (t, n), (t, S)
        rs: &DeviceBuffer<f32>,                                    // (t, S)
        lo: &DeviceBuffer<f32>,                                    // (t, r)
        a_out: Option<&DeviceBuffer<f32>>,                         // (t, S)
        mixed: &DeviceBuffer<f32>,                                 // (t, n)
        sc: &HcFastScratch,
    ) -> Result<()> {
        covers(c).map_err(|why| SyclError::invalid(OP, why))?;
        let rd = &c.read;
        let (n, s, r, t) = (rd.n, rd.streams, rd.rank, rd.t);
        check_geometry(n, r, geo).map_err(|why| SyclError::invalid(OP, why))?;
        ensure(OP, (sc.n, sc.s, sc.r) == (n, s, r), || {
            format!(
                "the scratch is for n {}, S {}, r {}; the call is n {n}, S {s}, r {r}",
                sc.n, sc.s, sc.r
            )
        })?;
        let io = SiteIo {
            x,
            pending,
            rs,
            lo,
            a_out,
            mixed,
        };
        let (k_cols, inject) = check_site(OP, rd, &io)?;
        // the weights: the Q8_0 copies, or the stored bytes
        let (wd, wu, w_fmt) = match c.q8 {
            Some(q8) => {
                holds(OP, "Q8_0 down", q8.down, q8_copy_bytes(r, k_cols))?;
                holds(OP, "Q8_0 up", q8.up, q8_copy_bytes(k_cols, r))?;
                (q8.down, q8.up, Q8_COPY)
            }
            None => {
                ensure(OP, rd.down.type_id == rd.up.type_id, || {
                    "the fused read takes W_down and W_up of one type".into()
                })?;
                check_rows(OP, "down", &rd.down, r, k_cols)?;
                check_rows(OP, "up", &rd.up, k_cols, r)?;
                (rd.down.bytes, rd.up.bytes, rd.down.type_id)
            }
        };
        let n_inj = if inject.is_some() { s } else { 0 };
        let groups = s * (n / geo.slab);
        ensure(OP, sc.ss.len() >= groups * TMAX, || {
            format!("slab {} needs more scratch", geo.slab)
        })?;
        let (ni, si, ri, ii, ti, wi, gi) = (
            int(OP, "n", n)?,
            int(OP, "S", s)?,
            int(OP, "r", r)?,
            int(OP, "n_inj", n_inj)?,
            int(OP, "t", t)?,
            int(OP, "slab", geo.slab)?,
            int(OP, "rows", geo.rows)?,
        );
        int(OP, "S * n", k_cols)?;
        let inj_type = inject.map_or(type_id::BF16, |(m, _)| m.type_id);
        let k = self.kernels(w_fmt, inj_type)?;
        let zero = Arg::u64(0);
        let (py, pa) = match pending {
            Some((y, a)) => (Arg::addr(y), Arg::addr(a)),
            None => (zero, zero),
        };
        // (t is 1 ..= TMAX, kernels at t - 1: `covers` above refused any other t)
        q.launch(
            &k.down[t - 1],
            NdRange::groups(prod(OP, &[r / geo.rows, groups])?, NSG * 16),
            &[
                Arg::addr(x),
                py,
                pa,
                Arg::addr(rd.gamma),
                Arg::addr(wd),
                inject.map_or(zero, |(m, _)| Arg::addr(m.bytes)),
                Arg::addr(&sc.part),
                Arg::addr(&sc.ss),
                Arg::addr(&sc.count),
                Arg::addr(rs),
                Arg::addr(lo),
                Arg::addr(&sc.u),
                Arg::addr(&sc.a_prev),
                inject.map_or(zero, |(_, a)| Arg::addr(a)),
                Arg::i32(ni),
                Arg::i32(si),
                Arg::i32(ri),
                Arg::i32(ii),
                Arg::i32(ti),
                Arg::i32(wi),
                Arg::i32(gi),
                Arg::f32(rd.eps),
            ],
        )?;
        q.launch(
            &k.up[t - 1],
            NdRange::groups(n / 16, geo.ksplit * 16),
            &[
                Arg::addr(x),
                py,
                Arg::addr(&sc.a_prev),
                Arg::addr(rd.gamma),
                Arg::addr(rs),
                Arg::addr(&sc.u),
                Arg::addr(wu),
                Arg::addr(mixed),
                Arg::i32(ni),
                Arg::i32(si),
                Arg::i32(ri),
                Arg::i32(ti),
                Arg::i32(int(OP, "ksplit", geo.ksplit)?),
            ],
        )
    }

    /// The fast read where `covers` takes the call, else the default read (`dflt`, on the stored
    /// weights of `c.read`) with one stderr line per distinct reason: the engine's entry point for
    /// `STRATA_HC_Q8` / `STRATA_GR_FUSED`. Returns which read ran.
    #[allow(clippy::too_many_arguments)]
    pub fn run_or_default(
        &self,
        dflt: &HcRead,
        q: &Queue,
        c: &HcFastCall,
        x: &DeviceBuffer<f32>,                                     // (t, S, n)
        pending: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>, // (t, n), (t, S)
        rs: &DeviceBuffer<f32>,                                    // (t, S)
        lo: &DeviceBuffer<f32>,                                    // (t, r)
        a_out: Option<&DeviceBuffer<f32>>,                         // (t, S)
        mixed: &DeviceBuffer<f32>,                                 // (t, n)
        sc: &HcFastScratch,
        dflt_sc: &HcScratch,
    ) -> Result<Ran> {
        match covers(c) {
            Ok(()) => {
                self.run(q, c, x, pending, rs, lo, a_out, mixed, sc)?;
                Ok(Ran::Fast)
            }
            Err(why) => {
                let mut seen = self.warned.lock().unwrap_or_else(|p| p.into_inner());
                if seen.insert(why.clone()) {
                    eprintln!(
                        "strata: {}=1: the fast hyper-connection read does not cover this read \
                         site ({why}); the default read runs there",
                        c.variant().flag()
                    );
                }
                drop(seen);
                dflt.run(q, &c.read, x, pending, rs, lo, a_out, mixed, dflt_sc)?;
                Ok(Ran::Default)
            }
        }
    }
}
