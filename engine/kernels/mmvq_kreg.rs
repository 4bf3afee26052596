//! Launcher of `sycl/kernels/mmvq_kreg.cpp`, the opt-in KREG family for Q4_K, Q5_K, Q6_K and
//! IQ4_XS at 1..8 columns (`STRATA_MMVQ_KREG=1`; docs/flags.md). The default `mmvq` entry point
//! calls `try_kreg` first; with the flag off it returns `Ok(false)` after reading one latched
//! bool and the default kernel runs exactly as before.
//! Reference: `qmatrix::matrix_ref` (f64), checked by `strata parity mmvq-kreg --selftest`.

use super::qmatrix::{check_act, MatrixError, Result, WeightView, MMVQ_MAX_T, SG};
use crate::quant::type_id;
use crate::sycl::{kernels, Arg, DeviceBuffer, Kernel, NdRange, Queue};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The environment variable that turns KREG on (value `1`).
pub const KREG_ENV: &str = crate::flags::table::MMVQ_KREG;
/// Largest n_in KREG takes: every lane keeps its whole activation slice in private storage
/// (at most `KREG_XB` super-blocks x 16 values x 8 columns).
pub const KREG_MAX_N_IN: usize = 32_768;
/// Most super-blocks one sub-group owns (CFG_XB); the sub-group count grows with n_in instead.
pub const KREG_XB: usize = 8;

static LATCH: OnceLock<bool> = OnceLock::new();
/// Test override: 1 on, 0 off, -1 the env latch (the default).
static OVERRIDE: AtomicI32 = AtomicI32::new(-1);

/// Whether `STRATA_MMVQ_KREG=1` was set: read once per process (the first call), one stderr line
/// when on. Any other value, or unset, is off.
pub fn kreg_enabled() -> bool {
    *LATCH.get_or_init(|| {
        let on = crate::flags::on(KREG_ENV);
        if on {
            eprintln!("strata: {KREG_ENV}=1: KREG mmvq kernels on for Q4_K/Q5_K/Q6_K/IQ4_XS");
        }
        on
    })
}

/// Test-only override of the flag: `Some(true)` on, `Some(false)` off, `None` back to the env
/// latch. Process-wide (tests that use it must not run matrix products concurrently).
pub fn set_kreg_override(v: Option<bool>) {
    OVERRIDE.store(
        match v {
            Some(true) => 1,
            Some(false) => 0,
            None => -1,
        },
        Ordering::SeqCst,
    );
}

fn kreg_active() -> bool {
    match OVERRIDE.load(Ordering::Relaxed) {
        1 => true,
        0 => false,
        _ => kreg_enabled(),
    }
}

/// Whether KREG is on (the flag or the test override) and reads `type_id`'s GGUF bytes: the
/// model's load keeps them for it (model/weights.rs).
pub fn reads_gguf(type_id: u32) -> bool {
    kreg_active() && format(type_id).is_some()
}

/// The ggml types KREG covers, with their -DCFG_FMT_ name and the weight alignment it needs.
fn format(type_id: u32) -> Option<(&'static str, usize)> {
    Some(match type_id {
        type_id::Q4_K => ("Q4_K", 16),
        type_id::Q5_K => ("Q5_K", 16),
        type_id::Q6_K => ("Q6_K", 1),
        type_id::IQ4_XS => ("IQ4_XS", 8),
        _ => return None,
    })
}

/// Launch geometry of one call. `nsg` depends on n_in only (it fixes the summation order);
/// `rows` and `tiles` may change per column count without changing any result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Sub-groups per work-group (CFG_NSG): each owns ceil(nb / nsg) <= KREG_XB super-blocks.
    pub nsg: usize,
    /// Rows per tile (CFG_R), 2..=8.
    pub rows: usize,
    /// Tiles per work-group (CFG_TPW); their partials wait in local memory (<= 32 KiB).
    pub tiles: usize,
}

/// Local-memory floats for the partials of one work-group.
const PART_FLOATS: usize = 8192;

impl Geometry {
    /// The geometry KREG uses for a (type, n_in) matrix at `t` columns. The rows table is
    /// provisional (docs/flags.md): `strata parity mmvq-kreg --sweep` prints the grid to pick
    /// it from on a quiet machine.
    pub fn choose(type_id: u32, n_in: usize, t: usize) -> Geometry {
        let nb = n_in / 256;
        let nsg = nb.div_ceil(KREG_XB).max(1).next_power_of_two();
        let rows = match (type_id, t) {
            (type_id::Q6_K, 1..=2) => 4,
            (type_id::Q6_K, _) => 2,
            (_, 1..=2) => 4,
            _ => 2,
        };
        Geometry {
            nsg,
            rows,
            tiles: Self::max_tiles(nsg, rows).min(64),
        }
    }

    /// Most tiles per work-group whose partials fit the local-memory budget.
    pub fn max_tiles(nsg: usize, rows: usize) -> usize {
        (PART_FLOATS / (rows * MMVQ_MAX_T * nsg)).max(1)
    }
}

type Key = (u64, u32, usize, usize, usize, usize);
static KERNELS: OnceLock<Mutex<HashMap<Key, Arc<Kernel>>>> = OnceLock::new();

/// The module of (format, geometry, xb): `xb` = super-blocks per sub-group, baked in so every
/// index into the lanes' activation arrays is a compile-time constant.
fn kernel(q: &Queue, name: &str, type_id: u32, g: &Geometry, xb: usize) -> Result<Arc<Kernel>> {
    let key = (q.context().id(), type_id, g.nsg, xb, g.rows, g.tiles);
    let map = KERNELS.get_or_init(|| Mutex::new(HashMap::new()));
    // A poisoned lock only means another thread panicked mid-build; the map is still valid.
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(k) = map.get(&key) {
        return Ok(k.clone());
    }
    let opts = build_options(name, g, xb);
    let opts: Vec<&str> = opts.iter().map(|s| s.as_str()).collect();
    let k = Arc::new(
        q.context()
            .module(&kernels::MMVQ_KREG, &opts)?
            .kernel("mmvq_kreg")?,
    );
    map.insert(key, k.clone());
    Ok(k)
}

/// The -D options of the module for (format, geometry, xb).
fn build_options(name: &str, g: &Geometry, xb: usize) -> [String; 5] {
    [
        format!("-DCFG_FMT_{name}"),
        format!("-DCFG_NSG={}", g.nsg),
        format!("-DCFG_XB={xb}"),
        format!("-DCFG_R={}", g.rows),
        format!("-DCFG_TPW={}", g.tiles),
    ]
}

/// The distinct module option sets `try_kreg` uses for these (ggml type, n_in) matrices at
/// 1..=8 columns, in a fixed order (non-KREG types are skipped).
pub fn kreg_module_sets(matrices: &[(u32, usize)]) -> Vec<[String; 5]> {
    let mut sets: Vec<[String; 5]> = Vec::new();
    for &(type_id, n_in) in matrices {
        let Some((name, _)) = format(type_id) else {
            continue;
        };
        for t in 1..=MMVQ_MAX_T {
            let g = Geometry::choose(type_id, n_in, t);
            let o = build_options(name, &g, (n_in / 256).div_ceil(g.nsg));
            if !sets.contains(&o) {
                sets.push(o);
            }
        }
    }
    sets
}

/// Builds share `share` of `of` (every `of`-th set from `share`) of `kreg_module_sets(matrices)`
/// into `q`'s context, and returns how many it built. The runtime compiles one module at a time
/// per process, and one cold KREG module takes ~50 s on a 2-core AVX2 CPU device
/// (docs/performance.md, session 5), so a caller about to run many shapes has other processes
/// build the other shares into the shared disk cache (`strata parity mmvq-kreg --selftest`).
pub fn kreg_prebuild(
    q: &Queue,
    matrices: &[(u32, usize)],
    share: usize,
    of: usize,
) -> Result<usize> {
    let mut n = 0;
    for o in kreg_module_sets(matrices)
        .iter()
        .skip(share)
        .step_by(of.max(1))
    {
        let opts: Vec<&str> = o.iter().map(|s| s.as_str()).collect();
        q.context().module(&kernels::MMVQ_KREG, &opts)?;
        n += 1;
    }
    Ok(n)
}

/// Why KREG would decline `w` (None: it takes it). The flag is not consulted.
pub fn kreg_declines(w: &WeightView) -> Option<String> {
    let Some((name, align)) = format(w.type_id) else {
        return Some(format!("ggml type {} is not a KREG format", w.type_id));
    };
    if w.n_in > KREG_MAX_N_IN {
        return Some(format!("n_in {} > {KREG_MAX_N_IN}", w.n_in));
    }
    let Some(buf) = w.buf else {
        return Some("only the tiled copy is on the device".into());
    };
    let addr = buf.as_ptr() as usize + w.offset;
    if addr % align != 0 {
        return Some(format!(
            "{name} data at {addr:#x} is not {align}-byte aligned"
        ));
    }
    None
}

/// The hook of the default `mmvq`/`mmvq_at` entry point: with the flag on and a matrix KREG
/// takes, launches KREG and returns `Ok(true)`; otherwise `Ok(false)` and nothing was launched.
/// Arguments as `MatrixKernels::mmvq_at`, which has already checked them.
pub fn try_kreg(
    q: &Queue,
    w: &WeightView,        // (n_out, n_in), ggml type w.type_id
    x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
    x_row0: usize,
    y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
    y_row0: usize,
    t: usize,
) -> Result<bool> {
    if !kreg_active() || kreg_declines(w).is_some() {
        return Ok(false);
    }
    let g = Geometry::choose(w.type_id, w.n_in, t);
    kreg_launch_at(q, w, x, x_row0, y, y_row0, t, &g)?;
    Ok(true)
}

/// KREG with an explicit geometry, flag ignored (the parity command's sweep); errors when
/// KREG would decline the matrix.
pub fn kreg_launch(
    q: &Queue,
    w: &WeightView,            // (n_out, n_in), ggml type w.type_id
    x: &DeviceBuffer<f32>,     // (t, n_in)
    y: &mut DeviceBuffer<f32>, // (t, n_out)
    t: usize,
    g: &Geometry,
) -> Result<()> {
    kreg_launch_at(q, w, x, 0, y, 0, t, g)
}

/// `kreg_launch` on rows `x_row0..x_row0+t` of x into rows `y_row0..y_row0+t` of y.
#[allow(clippy::too_many_arguments)]
pub fn kreg_launch_at(
    q: &Queue,
    w: &WeightView,        // (n_out, n_in), ggml type w.type_id
    x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
    x_row0: usize,
    y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
    y_row0: usize,
    t: usize,
    g: &Geometry,
) -> Result<()> {
    let what = "mmvq_kreg";
    let shape = |message: String| MatrixError::Shape {
        what: what.into(),
        message,
    };
    w.check(what)?;
    if let Some(why) = kreg_declines(w) {
        return Err(shape(format!("KREG declines this matrix: {why}")));
    }
    if t == 0 || t > MMVQ_MAX_T {
        return Err(shape(format!("t = {t} rows; KREG takes 1..={MMVQ_MAX_T}")));
    }
    if !(2..=8).contains(&g.rows)
        || g.tiles == 0
        || g.tiles > Geometry::max_tiles(g.nsg, g.rows)
        || !(1..=16).contains(&g.nsg)
        || (w.n_in / 256).div_ceil(g.nsg) > KREG_XB
    {
        return Err(shape(format!("bad geometry {g:?} for n_in {}", w.n_in)));
    }
    check_act(what, "x", x, x_row0 + t, w.n_in)?;
    check_act(what, "y", y, y_row0 + t, w.n_out)?;
    // format() is Some: kreg_declines returned None above
    let (name, _) = format(w.type_id).ok_or_else(|| shape("not a KREG format".into()))?;
    let k = kernel(q, name, w.type_id, g, (w.n_in / 256).div_ceil(g.nsg))?;
    let groups = w.n_out.div_ceil(g.rows).div_ceil(g.tiles);
    q.launch(
        &k,
        NdRange::groups(groups, g.nsg * SG),
        &[
            Arg::buf_at(w.gguf("mmvq_kreg")?, w.offset),
            Arg::buf_at(x, x_row0 * w.n_in),
            Arg::buf_at(y, y_row0 * w.n_out),
            Arg::i32(w.n_in as i32),
            Arg::i32(w.n_out as i32),
            Arg::i32(t as i32),
        ],
    )?;
    Ok(())
}
