//! The default hyper-connection read (engine/kernels/hc.rs: four launches) at the seeds' geometry,
//! Qwen3.8-Flash-Next's: n 2560, S 4, r 320, BF16 W_down / W_up / W_inj (13.2 MB per read site).
//! `cargo bench --bench hc_read`. For T = 1, 4, 6 (decode, verify windows):
//! - "wall us": one layer read site (pending write + injection rows) per call, launched back to
//!   back on an in-order queue over distinct weight copies (>= STRATA_BENCH_POOL_MB, default 512
//!   MiB in all: more than this machine's last-level cache, so no call finds its weights cached),
//!   one wait per run; the run's time / copies, median (and 90th percentile) of RUNS runs;
//! - "GB/s": the weight bytes of one read over that time;
//! - per launch: device time (end - start of its profiling events, mean over the copies, median
//!   of the runs) of the same reads on a profiling queue, one read at a time;
//! - "head us": the head mixer's read (no pending write, no injection rows), wall as above.
//! STRATA_BENCH_T=1,8,64 runs those row counts instead (the prompt path: any T).

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::Instant;
use strata::kernels::hc::{HcCall, HcMat, HcRead, HcScratch};
use strata::quant::{self, type_id as ty};
use strata::sycl::{self, Context, DeviceBuffer, Queue};

const RUNS: usize = 7;
const N: usize = 2560;
const S: usize = 4;
const R: usize = 320;
const LAUNCHES: [&str; 4] = ["hc_norm", "hc_down", "hc_reduce", "hc_up"];

/// One weight copy: W_down (r, S n), W_up (S n, r), W_inj (S, S n) BF16, gamma (S, n) f32.
struct Copy {
    down: DeviceBuffer<u8>,
    up: DeviceBuffer<u8>,
    inj: DeviceBuffer<u8>,
    gamma: DeviceBuffer<f32>,
}

impl Copy {
    fn call(&self, t: usize, inject: bool) -> HcCall<'_> {
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
            inject: inject.then_some(bf(&self.inj)),
        }
    }
}

/// The buffers of a T-row read.
struct Rows {
    x: DeviceBuffer<f32>,     // (t, S, n)
    y: DeviceBuffer<f32>,     // (t, n)
    a: DeviceBuffer<f32>,     // (t, S)
    rs: DeviceBuffer<f32>,    // (t, S)
    lo: DeviceBuffer<f32>,    // (t, r)
    a_out: DeviceBuffer<f32>, // (t, S)
    mixed: DeviceBuffer<f32>, // (t, n)
    sc: HcScratch,
}

fn percentile(v: &mut [f64], p: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    strata::sycl::runtime::init();
    let dev = sycl::default_device()?;
    let ctx = Context::new(std::slice::from_ref(&dev))?;
    let q = ctx.queue(&dev)?;
    let qp = ctx.profiling_queue(&dev)?;
    let _ = sycl::affinity::pin_off_workers();
    println!("device: {}", dev.info()?.name);
    let k = HcRead::new(&ctx)?;
    k.prepare(ty::BF16, Some(ty::BF16), ty::BF16)?;

    let mut rng = StdRng::seed_from_u64(7);
    // random values (a constant fill could read faster than real weights on some devices)
    let mut mat = |rows: usize, cols: usize| {
        let a = (3.0 / cols as f32).sqrt();
        let v: Vec<f32> = (0..rows * cols).map(|_| rng.gen_range(-a..a)).collect();
        quant::quantize_by_type(ty::BF16, &v)
    };
    let (down, up, inj) = (mat(R, S * N)?, mat(S * N, R)?, mat(S, S * N)?);
    let gamma: Vec<f32> = (0..S * N).map(|i| 0.5 + (i % 11) as f32 / 10.0).collect();
    let read_bytes = down.len() + up.len() + inj.len();
    let pool = std::env::var("STRATA_BENCH_POOL_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(512 << 20, |mb| mb << 20);
    let copies = (pool / read_bytes).clamp(3, 256);
    // in huge-page blocks, as the engine loads weights (sycl/arena.rs)
    let arena = sycl::Arena::new(&q);
    let ws = (0..copies)
        .map(|_| {
            Ok(Copy {
                down: arena.upload(&down)?,
                up: arena.upload(&up)?,
                inj: arena.upload(&inj)?,
                gamma: arena.upload(&gamma)?,
            })
        })
        .collect::<Result<Vec<_>, sycl::SyclError>>()?;
    println!(
        "n {N} S {S} r {R}, BF16 weights: {:.1} MB per read site, {copies} copies ({:.0} MiB), \
         median of {RUNS} runs",
        read_bytes as f64 / 1e6,
        (copies * read_bytes) as f64 / (1 << 20) as f64
    );
    println!(
        "{:>3} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "T",
        "wall us",
        "p90 us",
        "GB/s",
        LAUNCHES[0],
        LAUNCHES[1],
        LAUNCHES[2],
        LAUNCHES[3],
        "head us"
    );
    let ts: Vec<usize> = match std::env::var("STRATA_BENCH_T") {
        Ok(v) => v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![1, 4, 6],
    };
    for t in ts {
        let up = |v: Vec<f32>| q.upload(&v);
        let b = Rows {
            x: up((0..t * S * N).map(|_| rng.gen_range(-2.0..2.0)).collect())?,
            y: up((0..t * N).map(|_| rng.gen_range(-0.01..0.01)).collect())?,
            a: up(vec![1.0; t * S])?,
            rs: q.alloc(t * S)?,
            lo: q.alloc(t * R)?,
            a_out: q.alloc(t * S)?,
            mixed: q.alloc(t * N)?,
            sc: HcScratch::new(&q, t, N, S, R)?,
        };
        // a layer's read site: the pending write (y, a) and the injection rows
        let read = |qq: &Queue, w: &Copy, layer: bool| {
            k.run(
                qq,
                &w.call(t, layer),
                &b.x,
                layer.then_some((&b.y, &b.a)),
                &b.rs,
                &b.lo,
                layer.then_some(&b.a_out),
                &b.mixed,
                &b.sc,
            )
        };
        let wall = |layer: bool| -> anyhow::Result<Vec<f64>> {
            let mut us = Vec::with_capacity(RUNS);
            for run in 0..=RUNS {
                let t0 = Instant::now();
                for w in &ws {
                    read(&q, w, layer)?;
                }
                q.wait()?;
                if run > 0 {
                    us.push(t0.elapsed().as_secs_f64() * 1e6 / copies as f64); // run 0 warms up
                }
            }
            Ok(us)
        };
        let mut layer_us = wall(true)?;
        let mut head_us = wall(false)?;
        // device time per launch, one read at a time on the profiling queue
        let mut per: Vec<Vec<f64>> = vec![Vec::new(); LAUNCHES.len()];
        for run in 0..=RUNS {
            let mut s = [0.0f64; 4];
            for w in &ws {
                qp.trace_begin();
                read(&qp, w, true)?;
                for kt in qp.trace_end()? {
                    if let Some(i) = LAUNCHES
                        .iter()
                        .position(|l| kt.label.split(' ').next() == Some(l))
                    {
                        s[i] += kt.seconds * 1e6;
                    }
                }
            }
            if run > 0 {
                for i in 0..4 {
                    per[i].push(s[i] / copies as f64);
                }
            }
        }
        let med = percentile(&mut layer_us, 50);
        let p90 = percentile(&mut layer_us, 90);
        let kern: Vec<f64> = per.iter_mut().map(|v| percentile(v, 50)).collect();
        println!(
            "{t:>3} {med:>9.1} {p90:>9.1} {:>7.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            read_bytes as f64 / med / 1e3,
            kern[0],
            kern[1],
            kern[2],
            kern[3],
            percentile(&mut head_us, 50)
        );
    }
    Ok(())
}
