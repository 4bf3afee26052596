//! Float-kernel timings on the default card, median of several runs each, at the real models'
//! shapes: `cargo bench --bench float_kernels` (or `cargo run --release --bench ...`).
//! Attention is reported with the KV bytes it reads; the rest are small next to the matmuls.

use half::f16;
use std::time::Instant;
use strata::kernels::act::Elementwise;
use strata::kernels::attn::Attention;
use strata::kernels::kv::KvStore;
use strata::kernels::norm::Norm;
use strata::kernels::rope::{Rope, RopeMode, RopeTable};
use strata::kernels::softmax::Softmax;
use strata::sycl::{Card, Queue, Result};

const RUNS: usize = 15;

/// Median wall time in microseconds of `f` followed by a queue wait (one warm-up run first).
fn median_us(q: &Queue, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    q.wait()?;
    let mut t: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t0 = Instant::now();
            f()?;
            q.wait()?;
            Ok(t0.elapsed().as_secs_f64() * 1e6)
        })
        .collect::<Result<_>>()?;
    t.sort_by(|a, b| a.total_cmp(b));
    Ok(t[RUNS / 2])
}

fn main() -> Result<()> {
    strata::sycl::runtime::init();
    let card = Card::default_card()?;
    let (ctx, q) = (&card.context, &card.queue);
    println!("device: {}", card.device.info()?.name);
    let filled = |n: usize, v: f32| q.upload(&vec![v; n]);
    let cache = |n: usize| {
        q.upload(
            &(0..n)
                .map(|i| f16::from_f32(((i % 13) as f32 - 6.0) / 8.0))
                .collect::<Vec<_>>(),
        )
    };

    // attention: (name, n_head, n_kv, head_dim, n_ctx, window)
    for (name, nh, nkv, hd, n_ctx, window) in [
        ("SmolLM2", 9usize, 3usize, 64usize, 8192usize, 0usize),
        ("Gemma global", 4, 1, 256, 8192, 0),
        ("Gemma local", 4, 1, 256, 8192, 512),
    ] {
        let attn = Attention::new(ctx, hd)?;
        let (kc, vc) = (cache(nkv * n_ctx * hd)?, cache(nkv * n_ctx * hd)?);
        for (p0, t) in [100, 1000, 4000, 8000]
            .into_iter()
            .flat_map(|p| [(p, 1usize), (p, 5)])
        {
            let pos: Vec<i32> = (p0..p0 + t as i32).collect();
            let pd = q.upload(&pos)?;
            let qd = filled(t * nh * hd, 0.1)?;
            let out = q.alloc::<f32>(t * nh * hd)?;
            let us = median_us(q, || {
                attn.run(
                    q, &qd, &kc, &vc, &pd, &out, t, nh, nkv, n_ctx, window, 0.125,
                )
            })?;
            let keys = if window > 0 {
                (p0 as usize + 1).min(window)
            } else {
                p0 as usize + 1
            };
            let bytes = (t * nh * keys * hd * 2 * 2) as f64; // K + V f16, per query head
            println!(
                "attention {name:13} T {t} pos {p0:5}: {us:8.1} us  ({:.1} GB/s of K/V reads per head)",
                bytes / us / 1e3
            );
        }
    }

    let norm = Norm::new(ctx)?;
    let rope = Rope::new(ctx)?;
    let kv = KvStore::new(ctx)?;
    let sm = Softmax::new(ctx)?;
    let ew = Elementwise::new(ctx)?;
    for t in [1usize, 8] {
        let x = filled(t * 640, 0.5)?;
        let w = filled(640, 1.0)?;
        let us = median_us(q, || norm.rms_norm(q, &x, &w, &x, t, 640, 1e-6))?;
        println!("rms_norm T {t} x 640: {us:.1} us");
        let qr = filled(t * 4 * 256, 0.5)?;
        let pd = q.upload(&vec![4000i32; t])?;
        let table = RopeTable::new(q, 1e6, 256)?;
        let us = median_us(q, || {
            rope.run(q, RopeMode::Neox, &qr, &pd, &table, t, 4, 256)
        })?;
        println!("rope neox T {t} x 4 x 256: {us:.1} us");
        let (kc, vc) = (cache(8192 * 256)?, cache(8192 * 256)?);
        let k = filled(t * 256, 0.25)?;
        let us = median_us(q, || kv.run(q, &k, &k, &kc, &vc, &pd, t, 1, 256, 8192))?;
        println!("kv_store T {t} x 1 x 256: {us:.1} us");
        let g = filled(t * 2048, 0.3)?;
        let us = median_us(q, || ew.gelu_mul(q, &g, &g, &g, t * 2048))?;
        println!("gelu_mul T {t} x 2048: {us:.1} us");
    }
    let logits = filled(262144, 0.01)?;
    let us = median_us(q, || sm.run(q, &logits, &logits, 1, 262144, 1.0))?;
    println!("softmax 1 x 262144: {us:.1} us");
    Ok(())
}
