//! `strata parity hc-q8 | gr-fused --bench | --sweep`: microseconds per hyper-connection read at
//! the seeds' geometry (Flash-Next: n 2560, S 4, r 320), the default read (four launches) beside
//! the Q8_0 read (STRATA_HC_Q8) and the fused BF16 read (STRATA_GR_FUSED), in one run.
//!
//! Each figure: a layer's read site (pending write, injection rows) over W distinct weight copies
//! back to back on one in-order queue (more bytes than the last-level cache: no read finds its
//! weights cached), one wait; the run's time / W; the median of `reps` runs. Per-launch device
//! times (profiling events, one read at a time) beside it.

use super::hc_fast::{rand_bf16, Dev};
use anyhow::Result;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::io::Write;
use std::time::Instant;
use strata::kernels::hc::{HcCall, HcMat, HcScratch};
use strata::kernels::hc_fast::{self, Geometry, HcFastCall, HcFastScratch, HcQ8, Variant};
use strata::quant::type_id as ty;
use strata::sycl::{self, DeviceBuffer, Queue};

use crate::cmd::common;

const N: usize = 2560;
const S: usize = 4;
const R: usize = 320;
const BENCH_T: [usize; 3] = [1, 4, 6];
/// Weight bytes rotated through per figure (BF16 copies; the Q8_0 copies add ~half of it).
const POOL_BYTES: usize = 640 << 20;

/// One read site's weights: BF16 as stored, gamma, and the Q8_0 copies of W_down / W_up.
struct Copy {
    down: DeviceBuffer<u8>, // (r, S n) BF16
    up: DeviceBuffer<u8>,   // (S n, r) BF16
    inj: DeviceBuffer<u8>,  // (S, S n) BF16
    gamma: DeviceBuffer<f32>,
    q8_down: DeviceBuffer<u8>,
    q8_up: DeviceBuffer<u8>,
}

impl Copy {
    fn call(&self, t: usize) -> HcCall<'_> {
        let bf = |b| HcMat {
            bytes: b,
            type_id: ty::BF16,
        };
        HcCall {
            n: N,
            streams: S,
            rank: R,
            t,
            eps: 1e-6,
            gamma: &self.gamma,
            down: bf(&self.down),
            up: bf(&self.up),
            inject: Some(bf(&self.inj)),
        }
    }
    fn fast(&self, t: usize, v: Variant) -> HcFastCall<'_> {
        HcFastCall {
            read: self.call(t),
            q8: (v == Variant::Q8).then_some(HcQ8 {
                down: &self.q8_down,
                up: &self.q8_up,
            }),
        }
    }
}

/// The buffers of a T-row read.
struct Rows {
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    a: DeviceBuffer<f32>,
    rs: DeviceBuffer<f32>,
    lo: DeviceBuffer<f32>,
    a_out: DeviceBuffer<f32>,
    mixed: DeviceBuffer<f32>,
}

fn rows(q: &Queue, rng: &mut StdRng, t: usize) -> Result<Rows> {
    let mut v = |n: usize, lo: f32, hi: f32| -> Result<DeviceBuffer<f32>> {
        let h: Vec<f32> = (0..n).map(|_| rng.gen_range(lo..hi)).collect();
        Ok(q.upload(&h)?)
    };
    Ok(Rows {
        x: v(t * S * N, -2.0, 2.0)?,
        // a small pending write: the streams stay near their values over the runs
        y: v(t * N, -0.01, 0.01)?,
        a: v(t * S, 0.9, 1.1)?,
        rs: q.alloc(t * S)?,
        lo: q.alloc(t * R)?,
        a_out: q.alloc(t * S)?,
        mixed: q.alloc(t * N)?,
    })
}

/// The weight copies (each its own random values: no two share cache lines).
fn copies(d: &Dev, rng: &mut StdRng) -> Result<Vec<Copy>> {
    let read_bytes = 2 * (2 * R * S * N + S * S * N);
    let n = (POOL_BYTES / read_bytes).clamp(3, 256);
    let arena = sycl::Arena::new(&d.q);
    let mut out = Vec::with_capacity(n);
    // one random set, shifted per copy: random values without n times the host work
    let down = rand_bf16(rng, R, S * N);
    let up = rand_bf16(rng, S * N, R);
    let inj = rand_bf16(rng, S, S * N);
    let q8_down = hc_fast::q8_copy(ty::BF16, &down, R, S * N)?;
    let q8_up = hc_fast::q8_copy(ty::BF16, &up, S * N, R)?;
    let gamma: Vec<f32> = (0..S * N).map(|_| rng.gen_range(0.5..1.5)).collect();
    for i in 0..n {
        let rot = |v: &[u8], by: usize| -> Vec<u8> {
            let mut w = v.to_vec();
            // rotate whole Q8_0 blocks / BF16 pairs: the bytes stay valid values
            let k = (by * 34 * 7) % (w.len() / 34 * 34).max(1);
            w[..v.len() / 34 * 34].rotate_left(k);
            w
        };
        out.push(Copy {
            down: arena.upload(&rot(&down, i))?,
            up: arena.upload(&rot(&up, i))?,
            inj: arena.upload(&inj)?,
            gamma: arena.upload(&gamma)?,
            q8_down: arena.upload(&q8_down)?,
            q8_up: arena.upload(&q8_up)?,
        });
    }
    Ok(out)
}

/// One read of a weight copy (a closure over the read's buffers).
type Read<'a> = dyn Fn(&Copy) -> Result<()> + 'a;

/// Median us per read of each of `reads` over `reps` runs through every copy; the reads take
/// turns within each run, so a load that comes and goes on the machine falls on all of them.
fn time_us(q: &Queue, ws: &[Copy], reps: usize, reads: &[&Read]) -> Result<Vec<f64>> {
    let mut us = vec![Vec::with_capacity(reps); reads.len()];
    for run in 0..=reps {
        for (i, read) in reads.iter().enumerate() {
            let t0 = Instant::now();
            for w in ws {
                read(w)?;
            }
            q.wait()?;
            if run > 0 {
                // run 0 warms up (module builds, first touches)
                us[i].push(t0.elapsed().as_secs_f64() * 1e6 / ws.len() as f64);
            }
        }
    }
    Ok(us
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect())
}

/// Mean device us per launch name over one pass through the copies on the profiling queue.
fn launch_us(
    qp: &Queue,
    ws: &[Copy],
    mut read: impl FnMut(&Queue, &Copy) -> Result<()>,
) -> Result<Vec<(String, f64)>> {
    let mut sum: Vec<(String, f64)> = Vec::new();
    for w in ws {
        qp.trace_begin();
        read(qp, w)?;
        for k in qp.trace_end()? {
            let name = k.label.split(' ').next().unwrap_or("?").to_string();
            match sum.iter_mut().find(|(n, _)| *n == name) {
                Some(e) => e.1 += k.seconds * 1e6,
                None => sum.push((name, k.seconds * 1e6)),
            }
        }
    }
    for e in &mut sum {
        e.1 /= ws.len() as f64;
    }
    Ok(sum)
}

pub fn bench(reps: usize) -> Result<()> {
    let mut out = common::stdout();
    let d = Dev::new()?;
    let qp = d.ctx.profiling_queue(&d.dev)?;
    let _ = sycl::affinity::pin_off_workers();
    let mut rng = StdRng::seed_from_u64(0xbe4c);
    let ws = copies(&d, &mut rng)?;
    let bf16_bytes = 2 * (2 * R * S * N + S * S * N);
    let q8_bytes = 2 * hc_fast::q8_copy_bytes(R, S * N) + 2 * S * S * N;
    writeln!(
        out,
        "n {N} S {S} r {R}, a layer's read (pending write + injection rows): {} weight copies \
         rotated, {:.1} MB BF16 / {:.1} MB Q8_0 (+ BF16 inject rows) per read; median of {reps} runs",
        ws.len(),
        bf16_bytes as f64 / 1e6,
        q8_bytes as f64 / 1e6
    )?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    writeln!(out, "load average before: {}", load.trim())?;
    writeln!(
        out,
        "| T | default us | Q8_0 us | fused us | GB/s default / Q8_0 / fused | device us per launch |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for t in BENCH_T {
        let b = rows(&d.q, &mut rng, t)?;
        let dsc = HcScratch::new(&d.q, t, N, S, R)?;
        let fsc = HcFastScratch::new(&d.q, N, S, R)?;
        let fsc_p = HcFastScratch::new(&qp, N, S, R)?;
        let dflt = |q: &Queue, w: &Copy| -> Result<()> {
            let c = w.call(t);
            d.hc.run(
                q,
                &c,
                &b.x,
                Some((&b.y, &b.a)),
                &b.rs,
                &b.lo,
                Some(&b.a_out),
                &b.mixed,
                &dsc,
            )?;
            Ok(())
        };
        let fast = |q: &Queue, w: &Copy, v: Variant, sc: &HcFastScratch| -> Result<()> {
            d.fast.run(
                q,
                &w.fast(t, v),
                &b.x,
                Some((&b.y, &b.a)),
                &b.rs,
                &b.lo,
                Some(&b.a_out),
                &b.mixed,
                sc,
            )?;
            Ok(())
        };
        let us = time_us(
            &d.q,
            &ws,
            reps,
            &[
                &|w| dflt(&d.q, w),
                &|w| fast(&d.q, w, Variant::Q8, &fsc),
                &|w| fast(&d.q, w, Variant::Fused, &fsc),
            ],
        )?;
        let (us_d, us_q, us_f) = (us[0], us[1], us[2]);
        let mut per = Vec::new();
        for (label, l) in [
            ("default", launch_us(&qp, &ws, |q, w| dflt(q, w))?),
            (
                "Q8_0",
                launch_us(&qp, &ws, |q, w| fast(q, w, Variant::Q8, &fsc_p))?,
            ),
            (
                "fused",
                launch_us(&qp, &ws, |q, w| fast(q, w, Variant::Fused, &fsc_p))?,
            ),
        ] {
            let l: Vec<String> = l.iter().map(|(n, v)| format!("{n} {v:.0}")).collect();
            per.push(format!("{label}: {}", l.join(" + ")));
        }
        writeln!(
            out,
            "| {t} | {us_d:.0} | {us_q:.0} | {us_f:.0} | {:.1} / {:.1} / {:.1} | {} |",
            bf16_bytes as f64 / us_d / 1e3,
            q8_bytes as f64 / us_q / 1e3,
            bf16_bytes as f64 / us_f / 1e3,
            per.join("; ")
        )?;
    }
    Ok(())
}

/// The fast read of one variant at each slab width and rank split (how `Geometry::choose`'s
/// choice was made).
pub fn sweep(v: Variant, reps: usize) -> Result<()> {
    let mut out = common::stdout();
    let d = Dev::new()?;
    let _ = sycl::affinity::pin_off_workers();
    let mut rng = StdRng::seed_from_u64(0x005e_eb4c);
    let ws = copies(&d, &mut rng)?;
    let chosen = d.fast.geometry(N, R)?;
    writeln!(
        out,
        "{} read, n {N} S {S} r {R}: us per layer read (median of {reps}); chosen {chosen:?}",
        v.flag()
    )?;
    // the slab and the rank split change the bits (each a summation order), the row groups only
    // the parallelism
    let mut geoms = Vec::new();
    for rows in [320, 160, 64, 32, 16] {
        geoms.push(Geometry {
            slab: 1280,
            rows,
            ksplit: 1,
        });
    }
    for slab in [1280, 640, 320] {
        for ksplit in [1, 5] {
            if (slab, ksplit) != (1280, 1) {
                geoms.push(Geometry {
                    slab,
                    rows: 32,
                    ksplit,
                });
            }
        }
    }
    writeln!(out, "| slab | rows per group | ksplit | T=1 | T=4 | T=6 |")?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    let scs: Vec<HcFastScratch> = geoms
        .iter()
        .map(|g| HcFastScratch::for_slab(&d.q, N, S, R, g.slab))
        .collect::<std::result::Result<_, _>>()?;
    // (T, geometry) -> us; the geometries of one T take turns within each run
    let mut table = vec![vec![0f64; BENCH_T.len()]; geoms.len()];
    for (ti, &t) in BENCH_T.iter().enumerate() {
        let b = rows(&d.q, &mut rng, t)?;
        let reads: Vec<Box<Read>> = geoms
            .iter()
            .zip(&scs)
            .map(|(g, sc)| {
                let (b, d) = (&b, &d);
                let f: Box<Read> = Box::new(move |w: &Copy| {
                    d.fast.run_with(
                        &d.q,
                        &w.fast(t, v),
                        g,
                        &b.x,
                        Some((&b.y, &b.a)),
                        &b.rs,
                        &b.lo,
                        Some(&b.a_out),
                        &b.mixed,
                        sc,
                    )?;
                    Ok(())
                });
                f
            })
            .collect();
        let refs: Vec<&Read> = reads.iter().map(|f| f.as_ref()).collect();
        for (gi, us) in time_us(&d.q, &ws, reps, &refs)?.into_iter().enumerate() {
            table[gi][ti] = us;
        }
    }
    for (g, us) in geoms.iter().zip(&table) {
        let cells: Vec<String> = us.iter().map(|v| format!("{v:.0}")).collect();
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            g.slab,
            g.rows,
            g.ksplit,
            cells.join(" | ")
        )?;
    }
    Ok(())
}
