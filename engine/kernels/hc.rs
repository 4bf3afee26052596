//! The default hyper-connection read (`sycl/kernels/hc.cpp`, qwen4exp; the maths:
//! docs/hyper-connections.md): four launches per read site over t rows of S streams of n.
//!
//! 1. `hc_norm`: the pending write H' = H + a * y (in place: R_out), rs = 1 / rms per stream, and
//!    H' * gamma staged for the down projection;
//! 2. `hc_down`: W_down and W_inj times the stage, in column slices of one stream each;
//! 3. `hc_reduce`: the slices summed, rs applied per stream: lo, and the injection 2 sigmoid(z / S);
//! 4. `hc_up`: gate = sigmoid(W_up silu(lo / S)) and the gated stream mean `mixed`.
//!
//! Weights are their GGUF bytes (F32, F16, BF16 or Q8_0, each matrix its own type; one module per
//! (down, inject, up) type triple, built on first use). Every sum has an order fixed by n, S and r:
//! a t-row call is bitwise t one-row calls. f64 reference: `hc_ref::reference`.

use super::float_args::{ensure, holds, int, prod};
use crate::quant::{self, type_id};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result, SyclError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use super::hc_ref::{reference, HcHost, HcHostMat, HcRef};

const OP: &str = "hc_read";

/// Sub-groups per work-group of `hc_down` / `hc_up` (hc.cpp's HC_NSG).
const NSG: usize = 4;
/// Activation rows per pass of `hc_down` / `hc_up` (HC_TMAX).
const TMAX: usize = 8;
/// Widest `hc_down` slice. On the CPU device a work-group's start costs about as much as
/// reading a few hundred weights, so slices are wide: at n 2560 (us per T = 1 read, benches/
/// hc_read.rs) 256 columns 1275, 640 914, 1280 831, one slice per stream 1203.
pub const MAX_SLICE: usize = 1280;
/// Work-group of `hc_reduce`.
const REDUCE_WG: usize = 64;

/// Columns per `hc_down` slice for n_embd `n`: a stream in ceil(n / MAX_SLICE) slices of nearly
/// equal width (a multiple of 32: whole Q8_0 blocks when n is a multiple of 32), the last one
/// shorter when they do not divide n. A function of n alone, so the summation order is too.
pub fn slice_width(n: usize) -> usize {
    let per = n.div_ceil(MAX_SLICE).max(1);
    n.div_ceil(per).next_multiple_of(32)
}

/// Column slices of one read's down projection (all S streams).
pub fn slices(n: usize, s: usize) -> usize {
    s * n.div_ceil(slice_width(n))
}

/// A hyper-connection weight matrix on the device: its GGUF bytes, ggml type F32, F16, BF16 or
/// Q8_0 (the shape comes from the call: `HcCall`).
#[derive(Clone, Copy)]
pub struct HcMat<'a> {
    pub bytes: &'a DeviceBuffer<u8>,
    pub type_id: u32,
}

/// One read site's geometry and weights.
#[derive(Clone, Copy)]
pub struct HcCall<'a> {
    pub n: usize,                     // n_embd
    pub streams: usize,               // S
    pub rank: usize,                  // r
    pub t: usize,                     // rows in the call
    pub eps: f32,                     // the RMS norm's epsilon
    pub gamma: &'a DeviceBuffer<f32>, // (S, n) = ggml [n, S], stored folded (1 + w)
    pub down: HcMat<'a>,              // (r, S * n)
    pub up: HcMat<'a>,                // (S * n, r)
    pub inject: Option<HcMat<'a>>,    // (S, S * n); None: the head mixer (no injection rows)
}

/// The read's intermediate buffers, for up to `rows` rows of one geometry.
pub struct HcScratch {
    xg: DeviceBuffer<f32>,   // (rows, S * n) H' * gamma, unscaled
    part: DeviceBuffer<f32>, // (C, rows, r + S) hc_down's slice partials, C = slices(n, S)
    u: DeviceBuffer<f32>,    // (rows, r) silu(lo / S)
    rows: usize,
    n: usize,
    s: usize,
    r: usize,
}

impl HcScratch {
    /// For reads of up to `rows` rows of n_embd `n`, `s` streams, rank `r`.
    pub fn new(q: &Queue, rows: usize, n: usize, s: usize, r: usize) -> Result<HcScratch> {
        let op = "hc_scratch";
        ensure(op, rows > 0 && n > 0 && s > 0 && r > 0, || {
            format!("rows {rows}, n {n}, S {s}, r {r}: all must be > 0")
        })?;
        Ok(HcScratch {
            xg: q.alloc(prod(op, &[rows, s, n])?)?,
            part: q.alloc(prod(op, &[slices(n, s), rows, r + s])?)?,
            u: q.alloc(prod(op, &[rows, r])?)?,
            rows,
            n,
            s,
            r,
        })
    }

    /// Device bytes held.
    pub fn bytes(&self) -> usize {
        self.xg.bytes() + self.part.bytes() + self.u.bytes()
    }

    /// Most rows one read may take with this scratch.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// The four kernels for one (down, inject, up) type triple.
struct HcKernels {
    norm: Kernel,
    down: Kernel,
    reduce: Kernel,
    up: Kernel,
}

/// The read's kernels, built once per context; the modules per weight-type triple on first use
/// (or ahead with `prepare`).
pub struct HcRead {
    ctx: Context,
    built: Mutex<HashMap<(u32, u32, u32), Arc<HcKernels>>>,
}

/// The -D name of a ggml type the read takes (hc.cpp's HC_F32 ...), or an error naming `what`.
fn check_type(what: &str, type_id: u32) -> Result<()> {
    match type_id {
        type_id::F32 | type_id::F16 | type_id::BF16 | type_id::Q8_0 => Ok(()),
        _ => Err(SyclError::invalid(
            OP,
            format!(
                "{what}: ggml type {type_id} ({}): the read takes F32, F16, BF16 or Q8_0",
                quant::type_name(type_id).unwrap_or("unknown")
            ),
        )),
    }
}

/// Checks that `m` holds `rows` rows of `len` elements of its type (any type: the default
/// read's type list is `check_type`'s; the fast reads check theirs with `covers`).
pub(super) fn check_rows(
    op: &'static str,
    what: &str,
    m: &HcMat,
    rows: usize,
    len: usize,
) -> Result<()> {
    let row = quant::bytes_for(m.type_id, len).map_err(|_| {
        SyclError::invalid(
            op,
            format!(
                "{what}: rows of {len} elements are not whole {} blocks",
                quant::type_name(m.type_id).unwrap_or("?")
            ),
        )
    })?;
    holds(op, what, m.bytes, prod(op, &[rows, row])?)
}

/// `check_rows` on a weight the default read decodes.
fn check_mat(what: &str, m: &HcMat, rows: usize, len: usize) -> Result<()> {
    check_type(what, m.type_id)?;
    check_rows(OP, what, m, rows, len)
}

/// The per-row buffers of one read site, shared by the default and the fast reads (`run`'s
/// arguments say what each holds).
pub(super) struct SiteIo<'b> {
    pub x: &'b DeviceBuffer<f32>, // (t, S, n)
    pub pending: Option<(&'b DeviceBuffer<f32>, &'b DeviceBuffer<f32>)>, // (t, n), (t, S)
    pub rs: &'b DeviceBuffer<f32>, // (t, S)
    pub lo: &'b DeviceBuffer<f32>, // (t, r)
    pub a_out: Option<&'b DeviceBuffer<f32>>, // (t, S)
    pub mixed: &'b DeviceBuffer<f32>, // (t, n)
}

/// Checks the site's buffers against `c`'s geometry, and pairs the injection rows with
/// `a_out`. Returns S * n (the read's column count) and the injection, if computed.
pub(super) fn check_site<'a, 'b>(
    op: &'static str,
    c: &HcCall<'a>,
    io: &SiteIo<'b>,
) -> Result<(usize, Option<(HcMat<'a>, &'b DeviceBuffer<f32>)>)> {
    let (n, s, r, t) = (c.n, c.streams, c.rank, c.t);
    let k_cols = prod(op, &[s, n])?;
    holds(op, "x", io.x, prod(op, &[t, k_cols])?)?;
    if let Some((y, a)) = io.pending {
        holds(op, "pending y", y, prod(op, &[t, n])?)?;
        holds(op, "pending a", a, prod(op, &[t, s])?)?;
    }
    holds(op, "rs", io.rs, prod(op, &[t, s])?)?;
    holds(op, "lo", io.lo, prod(op, &[t, r])?)?;
    holds(op, "mixed", io.mixed, prod(op, &[t, n])?)?;
    holds(op, "gamma", c.gamma, k_cols)?;
    let inject = match (c.inject, io.a_out) {
        (Some(m), Some(a)) => {
            check_rows(op, "inject", &m, s, k_cols)?;
            holds(op, "a_out", a, prod(op, &[t, s])?)?;
            Some((m, a))
        }
        (None, Some(_)) => {
            return Err(SyclError::invalid(
                op,
                "a_out given for a read without injection rows (the head mixer)",
            ))
        }
        // (injection rows without a_out: not computed)
        _ => None,
    };
    Ok((k_cols, inject))
}

impl HcRead {
    pub fn new(ctx: &Context) -> Result<HcRead> {
        Ok(HcRead {
            ctx: ctx.clone(),
            built: Mutex::new(HashMap::new()),
        })
    }

    /// Builds the module for weights of these types now (else the first `run` does). `inject`:
    /// the injection rows' type, None for a head mixer.
    pub fn prepare(&self, down: u32, inject: Option<u32>, up: u32) -> Result<()> {
        self.kernels(down, inject.unwrap_or(down), up).map(|_| ())
    }

    fn kernels(&self, down: u32, inj: u32, up: u32) -> Result<Arc<HcKernels>> {
        check_type("down", down)?;
        check_type("inject", inj)?;
        check_type("up", up)?;
        // A poisoned lock only means another thread panicked mid-build; the map is still valid.
        let mut map = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = map.get(&(down, inj, up)) {
            return Ok(k.clone());
        }
        let opts = [
            format!("-DHC_DOWN={down}"),
            format!("-DHC_INJ={inj}"),
            format!("-DHC_UP={up}"),
        ];
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let m = self.ctx.module(&kernels::HC, &opts)?;
        let k = Arc::new(HcKernels {
            norm: m.kernel("hc_norm")?,
            down: m.kernel("hc_down")?,
            reduce: m.kernel("hc_reduce")?,
            up: m.kernel("hc_up")?,
        });
        map.insert((down, inj, up), k.clone());
        Ok(k)
    }

    /// The `hc_norm` kernel of any built module (its code does not depend on the weight types, so
    /// every module's gives the same bits), or of the BF16 one when none is built yet.
    fn norm_kernels(&self) -> Result<Arc<HcKernels>> {
        let any = {
            let map = self.built.lock().unwrap_or_else(|p| p.into_inner());
            map.values().next().cloned()
        };
        match any {
            Some(k) => Ok(k),
            None => self.kernels(type_id::BF16, type_id::BF16, type_id::BF16),
        }
    }

    /// One read site over `c.t` rows (the four launches, asynchronous on `q`):
    /// - `pending`: the write of the site before, (y, a): x[t,s,:] += a[t,s] * y[t,:] first;
    ///   None at the first site (x is then only normed);
    /// - `x` is updated in place to H' (R_out);
    /// - `a_out`: this site's injection 2 sigmoid(z / S); None skips the injection rows (and is
    ///   required with `c.inject` None). It may be the pending `a` (read by the first launch,
    ///   written by the third); `mixed` may be the pending `y`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &Queue,
        c: &HcCall,
        x: &DeviceBuffer<f32>, // (t, S, n) H in, H' out
        pending: Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)>, // (t, n) y, (t, S) a
        rs: &DeviceBuffer<f32>, // (t, S) 1 / rms per stream
        lo: &DeviceBuffer<f32>, // (t, r) W_down (rs * H' * gamma)
        a_out: Option<&DeviceBuffer<f32>>, // (t, S) 2 sigmoid(W_inj (rs * H' * gamma) / S)
        mixed: &DeviceBuffer<f32>, // (t, n) the gated stream mean
        sc: &HcScratch,
    ) -> Result<()> {
        let (n, s, r, t) = (c.n, c.streams, c.rank, c.t);
        ensure(OP, n > 0 && s > 0 && r > 0, || {
            format!("n {n}, S {s}, r {r}: all must be > 0")
        })?;
        ensure(OP, (sc.n, sc.s, sc.r) == (n, s, r), || {
            format!(
                "the scratch is for n {}, S {}, r {}; the call is n {n}, S {s}, r {r}",
                sc.n, sc.s, sc.r
            )
        })?;
        ensure(OP, t <= sc.rows, || {
            format!("{t} rows; the scratch takes {}", sc.rows)
        })?;
        let io = SiteIo {
            x,
            pending,
            rs,
            lo,
            a_out,
            mixed,
        };
        let (k_cols, inject) = check_site(OP, c, &io)?;
        check_mat("down", &c.down, r, k_cols)?;
        check_mat("up", &c.up, k_cols, r)?;
        if let Some((m, _)) = &inject {
            check_type("inject", m.type_id)?;
        }
        let n_inj = if inject.is_some() { s } else { 0 };
        let j_rows = r + n_inj;
        let c_slices = slices(n, s);
        let slice = int(OP, "slice", slice_width(n))?;
        // the kernels' int arguments, and the largest flat indices they form (size_t there)
        let (ni, si, ri, ii, ti) = (
            int(OP, "n", n)?,
            int(OP, "S", s)?,
            int(OP, "r", r)?,
            int(OP, "n_inj", n_inj)?,
            int(OP, "t", t)?,
        );
        int(OP, "r + S", j_rows)?;
        int(OP, "t * (r + S)", prod(OP, &[t, j_rows])?)?;
        if t == 0 {
            return Ok(());
        }
        let inj_type = inject.map_or(c.down.type_id, |(m, _)| m.type_id);
        let k = self.kernels(c.down.type_id, inj_type, c.up.type_id)?;
        let zero = Arg::u64(0);
        let (py, pa) = match pending {
            Some((y, a)) => (Arg::addr(y), Arg::addr(a)),
            None => (zero, zero),
        };
        q.launch(
            &k.norm,
            NdRange::groups(t * s, 16),
            &[
                Arg::addr(x),
                py,
                pa,
                Arg::addr(c.gamma),
                Arg::addr(rs),
                Arg::addr(&sc.xg),
                Arg::i32(ni),
                Arg::i32(si),
                Arg::f32(c.eps),
            ],
        )?;
        let passes = t.div_ceil(TMAX);
        q.launch(
            &k.down,
            NdRange::groups(
                prod(OP, &[passes, c_slices, j_rows.div_ceil(NSG)])?,
                NSG * 16,
            ),
            &[
                Arg::addr(&sc.xg),
                Arg::addr(c.down.bytes),
                inject.map_or(zero, |(m, _)| Arg::addr(m.bytes)),
                Arg::addr(&sc.part),
                Arg::i32(ni),
                Arg::i32(si),
                Arg::i32(ri),
                Arg::i32(ii),
                Arg::i32(ti),
                Arg::i32(slice),
            ],
        )?;
        q.launch(
            &k.reduce,
            NdRange::groups((t * j_rows).div_ceil(REDUCE_WG), REDUCE_WG),
            &[
                Arg::addr(&sc.part),
                Arg::addr(rs),
                Arg::addr(lo),
                Arg::addr(&sc.u),
                inject.map_or(zero, |(_, a)| Arg::addr(a)),
                Arg::i32(ni),
                Arg::i32(si),
                Arg::i32(ri),
                Arg::i32(ii),
                Arg::i32(ti),
                Arg::i32(slice),
            ],
        )?;
        q.launch(
            &k.up,
            NdRange::groups(prod(OP, &[passes, n.div_ceil(NSG)])?, NSG * 16),
            &[
                Arg::addr(&sc.u),
                Arg::addr(c.up.bytes),
                Arg::addr(rs),
                Arg::addr(&sc.xg),
                Arg::addr(mixed),
                Arg::i32(ni),
                Arg::i32(si),
                Arg::i32(ri),
                Arg::i32(ti),
            ],
        )
    }

    /// The pending write alone, x[t,s,:] += a[t,s] * y[t,:] (and rs of the result), by the read's
    /// own first launch: the bits a following read would have written (the engine's last write
    /// before a card boundary or the head).
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,  // (t, S, n) updated in place
        y: &DeviceBuffer<f32>,  // (t, n)
        a: &DeviceBuffer<f32>,  // (t, S)
        rs: &DeviceBuffer<f32>, // (t, S) 1 / rms of the written streams
        t: usize,
        n: usize,
        s: usize,
        eps: f32,
    ) -> Result<()> {
        holds(OP, "x", x, prod(OP, &[t, s, n])?)?;
        holds(OP, "y", y, prod(OP, &[t, n])?)?;
        holds(OP, "a", a, prod(OP, &[t, s])?)?;
        holds(OP, "rs", rs, prod(OP, &[t, s])?)?;
        let (ni, si) = (int(OP, "n", n)?, int(OP, "S", s)?);
        int(OP, "t * S", t * s)?;
        if t == 0 || n == 0 || s == 0 {
            return Ok(());
        }
        let k = self.norm_kernels()?;
        q.launch(
            &k.norm,
            NdRange::groups(t * s, 16),
            &[
                Arg::addr(x),
                Arg::addr(y),
                Arg::addr(a),
                Arg::u64(0),
                Arg::addr(rs),
                Arg::u64(0),
                Arg::i32(ni),
                Arg::i32(si),
                Arg::f32(eps),
            ],
        )
    }
}
