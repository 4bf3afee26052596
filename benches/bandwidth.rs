//! Cold device read bandwidth: `cargo bench --bench bandwidth`. The ceiling the memory-bound
//! kernels (the matrix-vector products, attention at long KV) are measured against.
//!
//! A read kernel (`sycl/kernels/bandwidth.cpp`: each work-group sums its slice, one float out)
//! goes round several 64 MiB device buffers in turn, so each read finds its buffer evicted from
//! the 32 MB L3 by the reads of the others. Every buffer is written first: never-written device
//! memory maps a shared zero page and "reads" at cache speed. Prints the median GB/s (and the
//! spread; on a shared machine the 90th percentile is the less-contended figure) of many
//! launch + wait timings, and checks the sums so a dropped load would show.

use std::time::Instant;
use strata::sycl::{kernels, Arg, Card, NdRange, Result};

const MIB: usize = 1 << 20;
const BUF_BYTES: usize = 64 * MIB;
const N_BUFS: usize = 6;
const ROUNDS: usize = 8;
const WG: usize = 64; // -DCFG_BW_WG (STRATA_BW_WG overrides)
const PER: usize = 1024; // -DCFG_BW_PER, floats per work-item (STRATA_BW_PER overrides)

fn env_or(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<()> {
    strata::sycl::runtime::init();
    let card = Card::default_card()?;
    let q = &card.queue;
    println!("device: {}", card.device.info()?.name);
    // as the engine does at load: this thread off the runtime's pinned worker (sycl/affinity.rs)
    let _ = strata::sycl::affinity::pin_off_workers();
    let (wg, per) = (env_or("STRATA_BW_WG", WG), env_or("STRATA_BW_PER", PER));
    let n = BUF_BYTES / 4; // floats per buffer
    let groups = n / (wg * per);
    let opts = [format!("-DCFG_BW_WG={wg}"), format!("-DCFG_BW_PER={per}")];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let k = card.kernel(&kernels::BANDWIDTH, &opts, "bw_read_sum")?;
    let bufs = (0..N_BUFS)
        .map(|i| {
            let b = q.alloc::<f32>(n)?;
            q.fill(&b, (i + 1) as f32)?; // written: real pages, not the zero page
            Ok(b)
        })
        .collect::<Result<Vec<_>>>()?;
    let out = q.alloc::<f32>(groups)?;
    q.wait()?;

    let mut secs = Vec::new();
    for round in 0..=ROUNDS {
        for (i, b) in bufs.iter().enumerate() {
            let t0 = Instant::now();
            q.launch(&k, NdRange::d1(n / per, wg), &[Arg::buf(b), Arg::buf(&out)])?;
            q.wait()?;
            let dt = t0.elapsed().as_secs_f64();
            if round > 0 {
                secs.push(dt); // round 0 warms up (first-touch, kernel launch path)
            }
            if round == ROUNDS {
                // every partial is WG * PER * (i + 1), exact in f32
                let want = (wg * per * (i + 1)) as f32;
                let got = q.to_vec(&out)?;
                if let Some(bad) = got.iter().position(|&v| v != want) {
                    panic!(
                        "buffer {i}: work-group {bad} summed {} not {want}",
                        got[bad]
                    );
                }
            }
        }
    }
    let mut gbs: Vec<f64> = secs.iter().map(|s| BUF_BYTES as f64 / s / 1e9).collect();
    gbs.sort_by(|a, b| a.total_cmp(b));
    let med = gbs[gbs.len() / 2];
    println!(
        "cold read, {N_BUFS} x 64 MiB rotating, work-group {wg}, {per} floats per item, {} reads: median {med:.1} GB/s (min {:.1}, 90th percentile {:.1}, max {:.1}); sums checked",
        gbs.len(),
        gbs[0],
        gbs[gbs.len() * 9 / 10],
        gbs[gbs.len() - 1]
    );
    Ok(())
}
