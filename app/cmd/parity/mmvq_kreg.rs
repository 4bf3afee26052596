//! `strata parity mmvq-kreg`: the KREG mmvq kernels (engine/kernels/mmvq_kreg.rs) against the
//! default mmvq kernels and the f64 reference (`matrix_ref`), on random weight bytes.

use crate::cmd::common;
use anyhow::{bail, Context as _, Result};
use rand::{rngs::StdRng, Rng, RngCore, SeedableRng};
use std::io::Write;
use std::time::Instant;
use strata::kernels::mmvq_kreg::{
    kreg_declines, kreg_launch, kreg_prebuild, set_kreg_override, Geometry,
};
use strata::kernels::{matrix_ref, MatrixKernels, QuantMatrix};
use strata::quant::{self, type_id};
use strata::sycl::{self, Context, DeviceBuffer, Queue};

const FORMATS: &[(&str, u32)] = &[
    ("Q4_K", type_id::Q4_K),
    ("Q5_K", type_id::Q5_K),
    ("Q6_K", type_id::Q6_K),
    ("IQ4_XS", type_id::IQ4_XS),
];

/// (n_out, n_in): one super-block per row with a ragged last tile; Gemma 3 270M's Q4_K/Q6_K
/// shapes (attn_output 1024 -> 640, ffn_down 2048 -> 640); the bench's n_in with an n_out not a
/// multiple of any tile; KREG's largest n_in (16 sub-groups of 8 super-blocks).
const SHAPES: &[(usize, usize)] = &[
    (37, 256),
    (640, 1024),
    (640, 2048),
    (1001, 2560),
    (150, 32768),
];

/// Per-output bound: |y - ref| <= EPS * sum_i |w_i x_i|, EPS = 2^-22 (4 units of f32 roundoff).
/// Where it comes from: each kernel dequantizes a weight with up to two roundings against
/// engine/quant's (<= 2u of |w x| per product, a deterministic part), then sums in f32 (per-lane
/// fma chains of <= 1024 (default) / 128 (KREG) products, a 16-lane tree, KREG's <= 16
/// sub-group partials). The a-priori worst case of the summation, ~chain * u, would be 6e-5 for
/// the default kernel at n_in 32768 and could not see one scale step (1e-5..1e-4 of sum |w x|);
/// rounding errors of mixed signs grow like sqrt(chain) instead, which leaves the 2u the bound
/// keeps on top of the dequantization part. Measured worst over all cases: ~5e-8 (printed);
/// the power check shows one scale step lands 100x or more above the bound.
const EPS: f64 = 1.0 / 4_194_304.0; // 2^-22 ~= 2.4e-7

struct Dev {
    _ctx: Context,
    q: Queue,
    k: MatrixKernels,
}

fn device() -> Result<Dev> {
    let mut out = common::stdout();
    let dev = sycl::default_device().context("no SYCL device (see `strata devices`)")?;
    let ctx = Context::new(std::slice::from_ref(&dev))?;
    let q = ctx.queue(&dev)?;
    let k = MatrixKernels::new(&ctx);
    writeln!(out, "device: {}", dev.info()?.name)?;
    Ok(Dev { _ctx: ctx, q, k })
}

/// Byte offsets of the f16 super-block scales of a format (everything else may be any bits).
fn f16_fields(tid: u32) -> &'static [usize] {
    match tid {
        type_id::Q4_K | type_id::Q5_K => &[0, 2],
        type_id::Q6_K => &[208],
        _ => &[0], // IQ4_XS
    }
}

/// Random (n_out, n_in) weight bytes: uniformly random quants and sub-block scales, f16 super-block
/// scales in [2^-9, 2^-8) so every value is finite and rows are comparable.
fn random_weights(rng: &mut StdRng, tid: u32, n_out: usize, n_in: usize) -> Result<Vec<u8>> {
    let (_, bb) = quant::block_info(tid)?;
    let mut b = vec![0u8; quant::bytes_for(tid, n_out * n_in)?];
    rng.fill_bytes(&mut b);
    for blk in b.chunks_exact_mut(bb) {
        for &off in f16_fields(tid) {
            let v = half::f16::from_f32((1.0 + rng.gen::<f32>()) / 512.0);
            blk[off..off + 2].copy_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    Ok(b)
}

/// Activations like a model's: sum of four uniforms, centred, a few 4x outliers.
fn random_acts(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let u: f32 = (0..4).map(|_| rng.gen::<f32>()).sum::<f32>() - 2.0;
            if i % 97 == 13 {
                4.0 * u
            } else {
                u
            }
        })
        .collect()
}

/// sum_i |w[o, i] x[t, i]| in f64, (t, n_out): the scale of the bound.
fn abs_ref(tid: u32, w: &[u8], n_out: usize, n_in: usize, x: &[f32], t: usize) -> Result<Vec<f64>> {
    let row_bytes = quant::bytes_for(tid, n_in)?;
    let mut deq = vec![0f32; n_in];
    let mut out = vec![0f64; t * n_out];
    for (o, row) in w.chunks_exact(row_bytes).enumerate() {
        quant::dequantize_by_type(tid, row, &mut deq)?;
        for (ti, xr) in x.chunks_exact(n_in).enumerate() {
            out[ti * n_out + o] = deq
                .iter()
                .zip(xr)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
        }
    }
    Ok(out)
}

/// Runs `mmvq` through the default entry point with KREG forced on or off; returns (t, n_out).
fn run(d: &Dev, w: &QuantMatrix, x: &DeviceBuffer<f32>, t: usize, kreg: bool) -> Result<Vec<f32>> {
    let mut y = d.q.upload(&vec![f32::NAN; t * w.n_out])?;
    set_kreg_override(Some(kreg));
    let r = d.k.mmvq(&d.q, &w.view(), x, &mut y, t);
    set_kreg_override(None);
    r?;
    Ok(d.q.to_vec(&y)?)
}

/// Largest |y - ref| / sum |w x| over the outputs.
fn worst_ratio(y: &[f32], reference: &[f64], abs: &[f64]) -> f64 {
    y.iter()
        .zip(reference)
        .zip(abs)
        .map(|((&v, &r), &a)| (v as f64 - r).abs() / a.max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max)
}

fn bits_equal(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Every (type, n_in) the self-test runs KREG on.
fn selftest_matrices() -> Vec<(u32, usize)> {
    FORMATS
        .iter()
        .flat_map(|&(_, tid)| SHAPES.iter().map(move |&(_, n_in)| (tid, n_in)))
        .collect()
}

/// `--prebuild-share I/N`: build share I of N of the self-test's KREG modules (into the disk
/// cache) and exit; the self-test starts these itself.
pub fn prebuild_share(share: usize, of: usize) -> Result<()> {
    let mut out = common::stdout();
    let d = device()?;
    let n = kreg_prebuild(&d.q, &selftest_matrices(), share, of)?;
    writeln!(out, "built share {share}/{of}: {n} KREG modules")?;
    Ok(())
}

/// Builds every KREG module the self-test launches before its cases run. The runtime compiles
/// one module at a time per process (one thread per build measured no faster), so with the disk
/// cache on, one child process per further core (`--prebuild-share`) builds its share into the
/// cache while this process builds share 0; the cases then find every module built or cached.
/// A child that fails only costs time: the cases build whatever is missing themselves.
fn prebuild(d: &Dev) -> Result<()> {
    let mut out = common::stdout();
    let t0 = Instant::now();
    let of = if strata::sycl::runtime::disk_cache_dir().is_some() {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        1
    };
    let exe = std::env::current_exe().context("the strata binary's path")?;
    let mut children = Vec::new();
    for share in 1..of {
        let child = std::process::Command::new(&exe)
            .args([
                "parity",
                "mmvq-kreg",
                "--prebuild-share",
                &format!("{share}/{of}"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn();
        match child {
            Ok(c) => children.push((share, c)),
            Err(e) => eprintln!("prebuild share {share}/{of}: not started: {e}"),
        }
    }
    let mine = kreg_prebuild(&d.q, &selftest_matrices(), 0, of)?;
    for (share, c) in children {
        match c.wait_with_output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "prebuild share {share}/{of} failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => eprintln!("prebuild share {share}/{of}: {e}"),
        }
    }
    // the children's shares come from the disk cache now (about 0.5 s each)
    let all = kreg_prebuild(&d.q, &selftest_matrices(), 0, 1)?;
    writeln!(
        out,
        "KREG modules: {all} ({mine} built here, {of} process(es)) in {:.1} s",
        t0.elapsed().as_secs_f64()
    )?;
    Ok(())
}

pub fn selftest() -> Result<()> {
    let mut out = common::stdout();
    let d = device()?;
    let mut rng = StdRng::seed_from_u64(0x6b726567);
    let (mut cases, mut passed, mut differ) = (0usize, 0usize, 0usize);
    let (mut worst_def, mut worst_kreg) = (0f64, 0f64);
    writeln!(
        out,
        "bound: |y - ref| <= {EPS:e} * sum |w x| per output (ref: f64 over the same bytes)"
    )?;
    prebuild(&d)?;
    for &(name, tid) in FORMATS {
        for &(n_out, n_in) in SHAPES {
            let wb = random_weights(&mut rng, tid, n_out, n_in)?;
            let w = QuantMatrix::upload(&d.q, name, tid, n_out, n_in, &wb)?;
            if let Some(why) = kreg_declines(&w.view()) {
                bail!("{name} ({n_out}, {n_in}): KREG declined the test matrix: {why}");
            }
            let x = random_acts(&mut rng, 8 * n_in);
            let xd = d.q.upload(&x)?;
            let reference = matrix_ref(tid, &wb, n_out, n_in, &x, 8)?;
            let abs = abs_ref(tid, &wb, n_out, n_in, &x, 8)?;
            let mut single = Vec::new();
            for t in 0..8 {
                let xt = d.q.upload(&x[t * n_in..(t + 1) * n_in])?;
                single.push(run(&d, &w, &xt, 1, true)?);
            }
            let mut line =
                format!("{name:6} ({n_out:4}, {n_in:5}) T=1..8 default/KREG err/sum|wx|:");
            let mut fails = Vec::new();
            let mut n_differ = 0;
            for t in 1..=8 {
                cases += 1;
                let m = t * n_out;
                let yd = run(&d, &w, &xd, t, false)?;
                let yk = run(&d, &w, &xd, t, true)?;
                let ed = worst_ratio(&yd, &reference[..m], &abs[..m]);
                let ek = worst_ratio(&yk, &reference[..m], &abs[..m]);
                worst_def = worst_def.max(ed);
                worst_kreg = worst_kreg.max(ek);
                line += &format!(" {ed:.0e}/{ek:.0e}");
                let finite = yd.iter().chain(&yk).all(|v| v.is_finite());
                let rows_ok =
                    (0..t).all(|r| bits_equal(&yk[r * n_out..(r + 1) * n_out], &single[r]));
                if !bits_equal(&yk, &yd) {
                    n_differ += 1;
                }
                let ok = finite && rows_ok && ed <= EPS && ek <= EPS;
                if ok {
                    passed += 1;
                } else {
                    fails.push(format!(
                        "T={t}: finite {finite}, T-column == one-column calls {rows_ok}, default {ed:e}, KREG {ek:e}"
                    ));
                }
            }
            differ += n_differ;
            writeln!(out, "{line}  KREG != default in {n_differ}/8")?;
            for f in fails {
                writeln!(out, "  FAIL {name} ({n_out}, {n_in}) {f}")?;
            }
        }
    }
    writeln!(
        out,
        "worst err/sum|wx|: default {worst_def:.2e}, KREG {worst_kreg:.2e} (bound {EPS:e}); \
         T-column KREG calls compared bitwise with one-column calls in every case"
    )?;
    // KREG must have been reached: its summation order differs, so most results differ bitwise.
    let reached = differ * 2 > cases;
    writeln!(
        out,
        "KREG result differs from the default kernels in {differ}/{cases} cases (must be most)"
    )?;
    let mut checks = cases + 1;
    passed += reached as usize;
    for &(name, tid) in FORMATS {
        checks += 1;
        if power_check(&d, &mut rng, name, tid)? {
            passed += 1;
        }
    }
    writeln!(out, "mmvq-kreg selftest: PASS {passed}/{checks}")?;
    if passed != checks {
        bail!(
            "mmvq-kreg selftest: {} of {checks} checks failed",
            checks - passed
        );
    }
    Ok(())
}

/// One scale step in one sub-block of row 5 (first super-block, first sub-block): both kernels on
/// the changed bytes, compared with the reference of the clean bytes, must fail the bound there
/// (and only there).
fn power_check(d: &Dev, rng: &mut StdRng, name: &str, tid: u32) -> Result<bool> {
    let mut out = common::stdout();
    let (n_out, n_in, row) = (16usize, 2560usize, 5usize);
    let clean = random_weights(rng, tid, n_out, n_in)?;
    let x = random_acts(rng, n_in);
    let reference = matrix_ref(tid, &clean, n_out, n_in, &x, 1)?;
    let abs = abs_ref(tid, &clean, n_out, n_in, &x, 1)?;
    let mut wb = clean.clone();
    let blk = row * quant::bytes_for(tid, n_in)?;
    // the 6-bit (Q4_K/Q5_K scale, low bits in byte 4), int8 (Q6_K, byte 192) or low 4 bits
    // (IQ4_XS, byte 4) scale of sub-block 0, moved one step (down at the top of its range)
    match tid {
        type_id::Q4_K | type_id::Q5_K => {
            let s = wb[blk + 4];
            wb[blk + 4] = if s & 63 == 63 { s - 1 } else { s + 1 };
        }
        type_id::Q6_K => {
            let s = wb[blk + 192] as i8;
            wb[blk + 192] = (if s == 127 { s - 1 } else { s + 1 }) as u8;
        }
        _ => {
            let s = wb[blk + 4];
            wb[blk + 4] = if s & 15 == 15 { s - 1 } else { s + 1 };
        }
    }
    let w = QuantMatrix::upload(&d.q, name, tid, n_out, n_in, &wb)?;
    let xd = d.q.upload(&x)?;
    let mut ok = true;
    for (label, kreg) in [("default", false), ("KREG", true)] {
        let y = run(d, &w, &xd, 1, kreg)?;
        let ratio = |o: usize| (y[o] as f64 - reference[o]).abs() / abs[o];
        let hit = ratio(row);
        let others = (0..n_out)
            .filter(|&o| o != row)
            .map(ratio)
            .fold(0.0, f64::max);
        let good = hit > EPS && others <= EPS;
        writeln!(
            out,
            "power check {name:6} {label:7}: one scale step in row {row}: err/sum|wx| {hit:.2e} \
             ({}x the bound), other rows {others:.1e}: {}",
            (hit / EPS).round(),
            if good { "caught" } else { "MISSED" }
        )?;
        ok &= good;
    }
    Ok(ok)
}

/// The seed's shapes, (n_out, n_in).
const BENCH: &[(&str, u32, usize, usize, &str)] = &[
    ("Q6_K", type_id::Q6_K, 10240, 2560, "Q6_K 2560 x 10240"),
    (
        "Q5_K",
        type_id::Q5_K,
        248320,
        2560,
        "Q5_K head 2560 x 248320",
    ),
    ("Q4_K", type_id::Q4_K, 10240, 2560, "Q4_K 2560 x 10240"),
    (
        "IQ4_XS",
        type_id::IQ4_XS,
        10240,
        2560,
        "IQ4_XS 2560 x 10240",
    ),
];
const BENCH_T: &[usize] = &[1, 2, 4, 6];
/// Copies of each matrix rotated through: together well past the 32 MB L3.
const ROTATE_BYTES: usize = 256 << 20;

struct Bed {
    mats: Vec<QuantMatrix>,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
}

fn bed(d: &Dev, rng: &mut StdRng, name: &str, tid: u32, n_out: usize, n_in: usize) -> Result<Bed> {
    let bytes = quant::bytes_for(tid, n_out * n_in)?;
    let copies = ROTATE_BYTES.div_ceil(bytes).max(2);
    let mut mats = Vec::new();
    for _ in 0..copies {
        let wb = random_weights(rng, tid, n_out, n_in)?;
        mats.push(QuantMatrix::upload(&d.q, name, tid, n_out, n_in, &wb)?);
    }
    Ok(Bed {
        mats,
        x: d.q.upload(&random_acts(rng, 8 * n_in))?,
        y: d.q.alloc::<f32>(8 * n_out)?,
    })
}

/// Median microseconds per call of `call(matrix index)` over `reps` timed loops that rotate
/// through the copies (each loop ~0.2 s or at least one pass over the copies).
fn time_us(
    q: &Queue,
    copies: usize,
    reps: usize,
    mut call: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    let t0 = Instant::now();
    for i in 0..copies {
        call(i)?;
    }
    q.wait()?;
    let est = t0.elapsed().as_secs_f64() / copies as f64;
    let n = ((0.2 / est.max(1e-6)) as usize).max(copies);
    let mut v = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        for i in 0..n {
            call(i % copies)?;
        }
        q.wait()?;
        v.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

pub fn bench(reps: usize) -> Result<()> {
    let mut out = common::stdout();
    let d = device()?;
    let mut rng = StdRng::seed_from_u64(0xbe7c);
    writeln!(
        out,
        "us per call, default -> KREG (median of {reps}; random weights, copies rotated past L3)"
    )?;
    writeln!(
        out,
        "| format, shape (n_in x n_out) | 1 column | 2 | 4 | 6 |"
    )?;
    writeln!(out, "|---|---|---|---|---|")?;
    for &(name, tid, n_out, n_in, label) in BENCH {
        let mut b = bed(&d, &mut rng, name, tid, n_out, n_in)?;
        let mut row = format!("| {label} |");
        let mut gbs = Vec::new();
        for &t in BENCH_T {
            let mut us = [0f64; 2];
            for (i, kreg) in [false, true].into_iter().enumerate() {
                set_kreg_override(Some(kreg));
                let Bed { mats, x, y } = &mut b;
                let r = time_us(&d.q, mats.len(), reps, |m| {
                    Ok(d.k.mmvq(&d.q, &mats[m].view(), x, y, t)?)
                });
                set_kreg_override(None);
                us[i] = r?;
            }
            // (QuantMatrix::upload keeps the GGUF bytes: their size is the matrix's)
            let bytes = b.mats[0].buf.as_ref().map_or(0, |g| g.len()) as f64;
            gbs.push(format!(
                "{:.0}/{:.0}",
                bytes / us[0] / 1e3,
                bytes / us[1] / 1e3
            ));
            row += &format!(" {:.0} -> {:.0} |", us[0], us[1]);
        }
        writeln!(out, "{row}")?;
        eprintln!(
            "  {label}: weight stream GB/s default/KREG at T=1,2,4,6: {}",
            gbs.join(" ")
        );
    }
    Ok(())
}

/// KREG's rows per tile and work-group cap at the bench shape (2560 x 10240) per format and
/// column count: the table `Geometry::choose` encodes.
pub fn sweep(reps: usize) -> Result<()> {
    let mut out = common::stdout();
    let d = device()?;
    let mut rng = StdRng::seed_from_u64(0x5eeb);
    let (n_out, n_in) = (10240, 2560);
    writeln!(out, "KREG us per call at {n_in} x {n_out} (median of {reps}); columns: rows per tile / tiles per group")?;
    let geoms: Vec<(usize, usize)> = [2, 4, 8]
        .iter()
        .flat_map(|&r| [8, 64].map(|g| (r, g)))
        .collect();
    let head: Vec<String> = geoms.iter().map(|(r, g)| format!("R{r}/W{g}")).collect();
    writeln!(out, "| format | T | {} | chosen |", head.join(" | "))?;
    for &(name, tid) in FORMATS {
        let mut b = bed(&d, &mut rng, name, tid, n_out, n_in)?;
        for t in [1, 2, 4, 6, 8] {
            let mut row = format!("| {name} | {t} |");
            for &(rows, tiles) in &geoms {
                let g = Geometry {
                    nsg: Geometry::choose(tid, n_in, t).nsg,
                    rows,
                    tiles,
                };
                let Bed { mats, x, y } = &mut b;
                let us = time_us(&d.q, mats.len(), reps, |m| {
                    Ok(kreg_launch(&d.q, &mats[m].view(), x, y, t, &g)?)
                })?;
                row += &format!(" {us:.0} |");
            }
            let c = Geometry::choose(tid, n_in, t);
            writeln!(out, "{row} R{}/W{} |", c.rows, c.tiles)?;
        }
    }
    Ok(())
}
