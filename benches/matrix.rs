//! Matrix-product timings: microseconds per call and weight GB/s per format at the two models'
//! shapes, and that GB/s as a share of the cold read bandwidth measured first in the same process
//! (median and 90th percentile of 9 runs — on a loaded machine the 90th percentile is the run that
//! had the cores; T <= 8 shows the tiled and the GGUF layout of mmvq, and for the tiled formats
//! with a block sum the tiled kernel reading a staged x ("staged": the decode step's product,
//! engine/kernels/xstage.rs; x staged once beforehand, as the rounding kernel does), and for
//! the formats it takes the opt-in integer-dot kernel on the same stage ("vnni", STRATA_VNNI=1,
//! engine/kernels/vnni.rs, in the best ISA this CPU has; on an AVX-512 VNNI CPU also its AVX2
//! form, "avx2"); each run launches once on every one of several distinct weight copies, >= 256 MiB in all, back to back on an in-order queue, so no call finds its weights in
//! cache). T = 1 and 8 run mmvq, T = 64 and 512 matmul (`MatrixKernels::mul`); GB/s counts
//! weight bytes only, GFLOP/s is 2 * n_out * n_in * T per second (the figure for matmul, which is
//! compute-bound). GFLOP/cpu-s divides by the CPU time of all the process's threads instead of wall
//! time (from /proc/self/task/*/schedstat): on a machine shared with other jobs it is the
//! load-independent figure. "kern us" is the median over the runs of the mean device time per launch
//! (end - start profiling timestamps of the same launches replayed on a profiling queue): at the
//! layer sizes the wall time per call is mostly submit cost, the kernel time is what the kernel
//! itself reads at ("kern GB/s", and "kern %" of the median read bandwidth). The profiled launches
//! run one at a time (a wait after each), so no launch overlaps the next one's start. "size %" is
//! the kernel GB/s over that of the read probe run the same way over a buffer of the case's bytes
//! (printed once per case): a plain read's own start-up at that size, so the share of what one
//! launch of that size can read on this device.
//! The "launch" cases are the shapes of the decode step's grouped launches (q/k/v, gate/up of one
//! format in one `mmvq_group` launch: the same work-groups as one matrix of the summed rows).
//! `cargo bench --bench matrix [-- FILTER]`; FILTER matches the label; STRATA_BENCH_T=1,5,8 runs
//! those column counts (default 1, 8, 64, 512); STRATA_MATMUL_TILE overrides the device's matmul tile
//! (engine/kernels/matmul_tile.rs); STRATA_BENCH_POOL_MB=1 runs on 3 weight copies only (cache-hot: the
//! kernel's compute ceiling).

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::Instant;
use strata::kernels::actq::ActQ;
use strata::kernels::{tiled, vnni, MatmulTile, MatrixKernels, QuantMatrix, XStage};
use strata::quant::{self, type_id as ty};
use strata::sycl::{self, Arg, Context, NdRange};

/// How a case's weights and x are laid out for the product.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// tiled weights, x staged with its integer records, the opt-in integer-dot kernel
    /// (STRATA_VNNI=1, engine/kernels/vnni.rs)
    Vnni,
    /// the same in its AVX2 form (`vnni::Isa::Avx2`), where the best ISA is AVX-512 VNNI
    Avx2,
    /// tiled weights, x staged by the kernel that rounded it (the engine's decode step)
    Staged,
    /// tiled weights, the kernel staging x itself (t > 8: matmul on the tiled copy alone)
    Tiled,
    /// the GGUF bytes as they are
    Gguf,
}

impl Layout {
    fn label(self) -> &'static str {
        match self {
            Layout::Vnni => "vnni",
            Layout::Avx2 => "avx2",
            Layout::Staged => "staged",
            Layout::Tiled => "tiled",
            Layout::Gguf => "gguf",
        }
    }
}

struct Case {
    label: &'static str,
    tid: u32,
    n_out: usize,
    n_in: usize,
}

const CASES: &[Case] = &[
    Case {
        label: "smollm2 q/o Q4_1",
        tid: ty::Q4_1,
        n_out: 576,
        n_in: 576,
    },
    Case {
        label: "smollm2 k/v Q4_1",
        tid: ty::Q4_1,
        n_out: 192,
        n_in: 576,
    },
    Case {
        label: "smollm2 gate/up Q4_1",
        tid: ty::Q4_1,
        n_out: 1536,
        n_in: 576,
    },
    Case {
        label: "smollm2 down Q4_1",
        tid: ty::Q4_1,
        n_out: 576,
        n_in: 1536,
    },
    Case {
        label: "smollm2 q+k+v launch Q4_1",
        tid: ty::Q4_1,
        n_out: 960,
        n_in: 576,
    },
    Case {
        label: "smollm2 gate+up launch Q4_1",
        tid: ty::Q4_1,
        n_out: 3072,
        n_in: 576,
    },
    Case {
        label: "smollm2 head Q8_0",
        tid: ty::Q8_0,
        n_out: 49152,
        n_in: 576,
    },
    Case {
        label: "gemma3 q Q5_0",
        tid: ty::Q5_0,
        n_out: 1024,
        n_in: 640,
    },
    Case {
        label: "gemma3 gate/up Q5_0",
        tid: ty::Q5_0,
        n_out: 2048,
        n_in: 640,
    },
    Case {
        label: "gemma3 q+k launch Q5_0",
        tid: ty::Q5_0,
        n_out: 1280,
        n_in: 640,
    },
    Case {
        label: "gemma3 gate+up launch Q5_0",
        tid: ty::Q5_0,
        n_out: 4096,
        n_in: 640,
    },
    Case {
        label: "gemma3 v Q8_0",
        tid: ty::Q8_0,
        n_out: 256,
        n_in: 640,
    },
    Case {
        label: "gemma3 attn_out Q4_K",
        tid: ty::Q4_K,
        n_out: 640,
        n_in: 1024,
    },
    Case {
        label: "gemma3 down Q4_K",
        tid: ty::Q4_K,
        n_out: 640,
        n_in: 2048,
    },
    Case {
        label: "gemma3 down Q6_K",
        tid: ty::Q6_K,
        n_out: 640,
        n_in: 2048,
    },
    Case {
        label: "gemma3 head Q8_0",
        tid: ty::Q8_0,
        n_out: 262144,
        n_in: 640,
    },
    Case {
        label: "other Q4_0",
        tid: ty::Q4_0,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other Q5_1",
        tid: ty::Q5_1,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other Q5_K",
        tid: ty::Q5_K,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other Q2_K",
        tid: ty::Q2_K,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other Q3_K",
        tid: ty::Q3_K,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "gemma3 up IQ4_NL",
        tid: ty::IQ4_NL,
        n_out: 2048,
        n_in: 640,
    },
    Case {
        label: "other IQ4_XS",
        tid: ty::IQ4_XS,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other IQ2_XXS",
        tid: ty::IQ2_XXS,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other IQ2_XS",
        tid: ty::IQ2_XS,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other IQ3_XXS",
        tid: ty::IQ3_XXS,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other IQ3_S",
        tid: ty::IQ3_S,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other BF16",
        tid: ty::BF16,
        n_out: 2048,
        n_in: 2048,
    },
    Case {
        label: "other F32",
        tid: ty::F32,
        n_out: 2048,
        n_in: 2048,
    },
];

/// CPU seconds used so far by every thread of this process (the device's worker threads included).
fn cpu_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let ns: u64 = dir
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 * 1e-9
}

const POOL_BYTES: usize = 256 << 20;
const RUNS: usize = 9;

/// Cold read GB/s (median, 90th percentile) of `kernels::BANDWIDTH` over 6 rotating 64 MiB
/// buffers (as benches/bandwidth.rs), measured here so the % column uses this run's conditions.
fn read_bandwidth(q: &sycl::Queue, ctx: &Context) -> anyhow::Result<(f64, f64)> {
    const BUF: usize = 64 << 20;
    let (wg, per) = (64usize, 1024usize);
    let n = BUF / 4;
    let k = ctx
        .module(
            &sycl::kernels::BANDWIDTH,
            &["-DCFG_BW_WG=64", "-DCFG_BW_PER=1024"],
        )?
        .kernel("bw_read_sum")?;
    let bufs = (0..6)
        .map(|i| {
            let b = q.alloc::<f32>(n)?;
            q.fill(&b, (i + 1) as f32)?; // written: real pages, not the zero page
            Ok(b)
        })
        .collect::<Result<Vec<_>, sycl::SyclError>>()?;
    let out = q.alloc::<f32>(n / (wg * per))?;
    q.wait()?;
    let mut gbs = Vec::new();
    for round in 0..=6 {
        for b in &bufs {
            let t0 = Instant::now();
            q.launch(&k, NdRange::d1(n / per, wg), &[Arg::buf(b), Arg::buf(&out)])?;
            q.wait()?;
            if round > 0 {
                gbs.push(BUF as f64 / t0.elapsed().as_secs_f64() / 1e9);
            }
        }
    }
    gbs.sort_by(f64::total_cmp);
    Ok((gbs[gbs.len() / 2], gbs[gbs.len() * 9 / 10]))
}

/// Device seconds (median over RUNS of the mean per launch) of the read probe over `bytes` bytes
/// (rounded up to whole work-groups), launched once on each of `copies` distinct written buffers
/// and traced one at a time on the profiling queue, exactly as the products' "kern us": what a
/// plain read of a launch's bytes costs on this device, its start-up included. The faster of two
/// geometries (16 floats x 256 or x 64 per work-item), so small sizes still get several
/// work-groups. Returns (seconds, bytes read).
fn same_bytes_read(
    q: &sycl::Queue,
    qp: &sycl::Queue,
    ctx: &Context,
    bytes: usize,
    copies: usize,
) -> anyhow::Result<(f64, usize)> {
    let mut best: Option<(f64, usize)> = None;
    for per in [256usize, 64] {
        let wg = 16usize;
        let per_group = wg * per; // floats
        let n = bytes.div_ceil(4).div_ceil(per_group) * per_group;
        let opts = [format!("-DCFG_BW_WG={wg}"), format!("-DCFG_BW_PER={per}")];
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let k = ctx
            .module(&sycl::kernels::BANDWIDTH, &opts)?
            .kernel("bw_read_sum")?;
        let bufs = (0..copies)
            .map(|i| {
                let b = q.alloc::<f32>(n)?;
                q.fill(&b, (i % 7 + 1) as f32)?; // written: real pages, not the zero page
                Ok(b)
            })
            .collect::<Result<Vec<_>, sycl::SyclError>>()?;
        let out = q.alloc::<f32>(n / per_group)?;
        q.wait()?;
        let mut secs = Vec::with_capacity(RUNS);
        for run in 0..=RUNS {
            let mut s = 0.0;
            for b in &bufs {
                qp.trace_begin();
                qp.launch(&k, NdRange::d1(n / per, wg), &[Arg::buf(b), Arg::buf(&out)])?;
                s += qp.trace_end()?.iter().map(|kt| kt.seconds).sum::<f64>();
            }
            if run > 0 {
                secs.push(s / bufs.len() as f64); // run 0 warms up
            }
        }
        secs.sort_by(f64::total_cmp);
        let s = secs[RUNS / 2];
        let gbs = |(s, b): (f64, usize)| b as f64 / s;
        if best.is_none_or(|b| gbs((s, 4 * n)) > gbs(b)) {
            best = Some((s, 4 * n));
        }
    }
    // both geometries ran: best is set
    best.ok_or_else(|| anyhow::anyhow!("no read probe geometry ran"))
}

fn main() -> anyhow::Result<()> {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    // STRATA_BENCH_T=1,5,8 picks the column counts (default 1, 8, 64, 512); any of 1..=4096,
    // e.g. 5 for the verify window of `--spec 4` (T <= 8 runs mmvq, above it matmul)
    let ts: Vec<usize> = match std::env::var("STRATA_BENCH_T") {
        Ok(v) => {
            let mut ts = Vec::new();
            for part in v.split(',') {
                match part.trim().parse::<usize>() {
                    Ok(t) if (1..=4096).contains(&t) => ts.push(t),
                    _ => {
                        anyhow::bail!(
                            "STRATA_BENCH_T={v:?}: {part:?} is not a column count in 1..=4096"
                        )
                    }
                }
            }
            ts.sort_unstable();
            ts.dedup();
            ts
        }
        Err(_) => vec![1, 8, 64, 512],
    };
    let dev = sycl::default_device()?;
    let ctx = Context::new(std::slice::from_ref(&dev))?;
    let q = ctx.queue(&dev)?;
    // the same launches again on a profiling queue: device start/end timestamps per kernel
    let qp = ctx.profiling_queue(&dev)?;
    // as the engine does at load: this thread off the runtime's pinned worker (sycl/affinity.rs)
    let _ = sycl::affinity::pin_off_workers();
    // the device's matmul tile, or STRATA_MATMUL_TILE's (A/B runs)
    let k = MatrixKernels::with_matmul_tile(&ctx, MatmulTile::for_context_or_env(&ctx)?);
    let actq = ActQ::new(&ctx)?;
    println!("matmul tile: {}", k.matmul_tile().label());
    // the integer-dot kernel beside the default ones, where it can run
    let mut kv = MatrixKernels::with_matmul_tile(&ctx, k.matmul_tile());
    let vnni_ok = match kv.set_int_dot(true) {
        Ok(()) => true,
        Err(why) => {
            println!("no vnni rows: {why}");
            false
        }
    };
    if let Some(isa) = kv.int_dot_isa() {
        println!("vnni rows: the integer-dot kernel in {}", isa.label());
    }
    // its AVX2 form beside it on an AVX-512 VNNI machine ("avx2" rows)
    let mut k2 = MatrixKernels::with_matmul_tile(&ctx, k.matmul_tile());
    let avx2_ok = kv.int_dot_isa() == Some(vnni::Isa::Avx512Vnni)
        && k2.set_int_dot_isa(Some(vnni::Isa::Avx2)).is_ok();
    let (bw_med, bw_p90) = read_bandwidth(&q, &ctx)?;
    println!(
        "cold read bandwidth: median {bw_med:.1} GB/s, 90th percentile {bw_p90:.1} GB/s (% bw: the wall p90 GB/s over the 90th percentile; kern %: the kernel GB/s over the median)"
    );
    let mut rng = StdRng::seed_from_u64(1);
    println!(
        "{:24} {:>16} {:>3} {:>6} {:>10} {:>8} {:>8} {:>6} {:>8} {:>8} {:>6} {:>6} {:>8} {:>11} {:>7}",
        "case",
        "(n_out, n_in)",
        "T",
        "layout",
        "us/call",
        "GB/s",
        "p90 GB/s",
        "% bw",
        "kern us",
        "kern GB/s",
        "kern %",
        "size %",
        "GFLOP/s",
        "GFLOP/cpu-s",
        "copies"
    );
    for c in CASES {
        if !filter.is_empty() && !filter.iter().any(|f| c.label.contains(f.as_str())) {
            continue;
        }
        let vals: Vec<f32> = (0..c.n_out * c.n_in)
            .map(|_| rng.gen::<f32>() - 0.5)
            .collect();
        let bytes = match quant::quantize_by_type(c.tid, &vals) {
            // the grid i-quants have no quantizer (they need an importance matrix): random
            // blocks with sane f16 scales (d first), every one a valid block, time the same
            Err(quant::QuantError::NoQuantizer { .. }) => {
                let (elems, block_bytes) = quant::block_info(c.tid)?;
                let n_blocks = c.n_out * c.n_in / elems;
                quant::grids::random_blocks(&mut rng, n_blocks, block_bytes, 0)
            }
            r => r?,
        };
        // STRATA_BENCH_POOL_MB: weight copies' total (default 256 MiB: cold; 1: hot, 3 copies)
        let pool = std::env::var("STRATA_BENCH_POOL_MB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(POOL_BYTES, |mb| mb << 20);
        let copies = (pool / bytes.len()).clamp(3, 512);
        // in huge-page blocks, as the engine loads weights (sycl/arena.rs)
        let arena = sycl::Arena::new(&q);
        let mats = (0..copies)
            .map(|_| QuantMatrix::upload(&arena, c.label, c.tid, c.n_out, c.n_in, &bytes))
            .collect::<Result<Vec<_>, _>>()?;
        let (probe_s, probe_bytes) = same_bytes_read(&q, &qp, &ctx, bytes.len(), copies)?;
        let probe_gbs = probe_bytes as f64 / probe_s / 1e9;
        println!(
            "{:24} read probe over the same bytes: {:.1} us, {probe_gbs:.2} GB/s ({:.0}% of the median)",
            c.label,
            probe_s * 1e6,
            100.0 * probe_gbs / bw_med
        );
        for &t in &ts {
            if t > 8 && c.n_out > 10_000 {
                continue; // the head only ever sees the last prompt row
            }
            let xs: Vec<f32> = (0..t * c.n_in).map(|_| rng.gen::<f32>() - 0.5).collect();
            let x = q.upload(&xs)?;
            let mut y = q.alloc::<f32>(t * c.n_out)?;
            // mmvq: the tiled layout when the format has one, and the GGUF layout beside it;
            // "staged": the tiled kernel reading x's stage (xstage.rs) as the engine's decode
            // step does, x rounded and staged once beforehand by act_q8_32
            let tiled_ok = t <= 8 && mats[0].tiled.is_some();
            // (the integer-dot kernel takes any t: the prompt's rows in blocks of 8)
            let int_dot = mats[0].tiled.is_some() && vnni_ok && vnni::supported(c.tid);
            let mut layouts = Vec::new();
            if int_dot {
                layouts.push(Layout::Vnni);
                if avx2_ok {
                    layouts.push(Layout::Avx2);
                }
            }
            if tiled_ok && tiled::reads_stage(c.tid) {
                layouts.push(Layout::Staged);
            }
            // (t > 8: matmul on the tiled copy alone, the engine's tiled-only load)
            if mats[0].tiled.is_some() {
                layouts.push(Layout::Tiled);
            }
            layouts.push(Layout::Gguf);
            let (xq, stb) = (
                q.alloc::<f32>(t * c.n_in)?,
                q.alloc::<f32>(XStage::floats(t * c.n_in))?,
            );
            // x rounded as the engine rounds it for the format: blocks of 32, or of 256 (the
            // K-quants: their stage is the integer records only)
            let st = match vnni::stage_block(c.tid) {
                Some(256) => XStage::new_k(&stb, t * c.n_in)?,
                _ => XStage::with_records(&stb, t * c.n_in)?,
            };
            if layouts.contains(&Layout::Staged) || int_dot {
                actq.run_staged(&q, &x, &xq, t * c.n_in, st)?;
            }
            for &layout in &layouts {
                let call = |qq: &sycl::Queue, m: &QuantMatrix, y: &mut sycl::DeviceBuffer<f32>| {
                    let mut v = m.view();
                    match layout {
                        Layout::Vnni => kv.mul_staged(qq, &v, &xq, Some(st), y, t),
                        Layout::Avx2 => k2.mul_staged(qq, &v, &xq, Some(st), y, t),
                        Layout::Staged => k.mmvq_staged(qq, &v, &xq, Some(st), y, t),
                        Layout::Tiled => {
                            if t > 8 {
                                v.buf = None; // matmul decodes the tiled copy
                            }
                            k.mul(qq, &v, &x, y, t)
                        }
                        Layout::Gguf => {
                            v.tiled = None;
                            k.mul(qq, &v, &x, y, t)
                        }
                    }
                };
                call(&q, &mats[0], &mut y)?; // builds the module
                q.wait()?;
                // matmul is compute-bound: a few copies suffice and keep the run short
                let used = if t > 8 {
                    &mats[..mats.len().min(8)]
                } else {
                    &mats[..]
                };
                let mut per_call = Vec::with_capacity(RUNS);
                let mut cpu_per_call = Vec::with_capacity(RUNS);
                let mut kern_per_call = Vec::with_capacity(RUNS);
                for _ in 0..RUNS {
                    // kernel time: the same launches, one at a time, traced on the profiling
                    // queue (device end - start: no submit cost)
                    let mut secs = 0.0;
                    for m in used {
                        qp.trace_begin();
                        call(&qp, m, &mut y)?;
                        let s: f64 = qp.trace_end()?.iter().map(|kt| kt.seconds).sum();
                        secs += s;
                    }
                    kern_per_call.push(secs / used.len() as f64);
                    let c0 = cpu_seconds();
                    let t0 = Instant::now();
                    for m in used {
                        call(&q, m, &mut y)?;
                    }
                    q.wait()?;
                    per_call.push(t0.elapsed().as_secs_f64() / used.len() as f64);
                    cpu_per_call.push((cpu_seconds() - c0) / used.len() as f64);
                }
                per_call.sort_by(f64::total_cmp);
                cpu_per_call.sort_by(f64::total_cmp);
                kern_per_call.sort_by(f64::total_cmp);
                let ks = kern_per_call[RUNS / 2];
                let flop = 2.0 * (c.n_out * c.n_in * t) as f64;
                let s = per_call[RUNS / 2];
                let fast = per_call[RUNS / 10];
                let gbs = |s: f64| bytes.len() as f64 / s / 1e9;
                println!(
                    "{:24} {:>16} {:>3} {:>6} {:>10.1} {:>8.2} {:>8.2} {:>6.0} {:>8.1} {:>8.2} {:>6.0} {:>6.0} {:>8.1} {:>11.1} {:>7}",
                    c.label,
                    format!("({}, {})", c.n_out, c.n_in),
                    t,
                    layout.label(),
                    s * 1e6,
                    gbs(s),
                    gbs(fast),
                    100.0 * gbs(fast) / bw_p90,
                    ks * 1e6,
                    gbs(ks),
                    100.0 * gbs(ks) / bw_med,
                    100.0 * gbs(ks) / probe_gbs,
                    flop / s / 1e9,
                    flop / cpu_per_call[RUNS / 2] / 1e9,
                    used.len()
                );
            }
        }
    }
    Ok(())
}
