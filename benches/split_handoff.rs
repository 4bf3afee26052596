//! The layer split's hand-off (`cargo bench --bench split_handoff`): the residual rows (T, n_embd)
//! of one card copied to the next through pinned host memory (`sycl::copy_across_n`), as
//! `Engine::forward` does after each card's layer range. The CPU device split into 2 sub-device
//! cards; n_embd of SmolLM2 (576) and Gemma 3 270M (640); T = 1 (decode), 5 (a --spec 4 window),
//! 256 (a prefill chunk). Prints the median and 10th percentile of many synchronous hand-offs,
//! and checks the copied rows.

use std::time::Instant;
use strata::sycl::{copy_across_n, Card, Result};

const ROWS: usize = 256;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<()> {
    strata::sycl::runtime::init();
    let cards = Card::split_cpu(2)?;
    println!(
        "cards: 2 x {} ({} compute unit(s) each)",
        cards[0].device.info()?.name,
        cards[0].device.info()?.compute_units
    );
    println!("| n_embd | T | bytes | median us | p10 us | median GB/s |");
    println!("| -----: | -: | ----: | --------: | -----: | ----------: |");
    for n_embd in [576usize, 640] {
        let host: Vec<f32> = (0..ROWS * n_embd).map(|i| i as f32 * 0.25).collect();
        let src = cards[0].queue.upload(&host)?; // (ROWS, n_embd) on card 0
        let dst = cards[1].queue.alloc::<f32>(ROWS * n_embd)?; // (ROWS, n_embd) on card 1
        let staging = cards[0].queue.alloc_host::<u8>(ROWS * n_embd * 4)?;
        for t in [1usize, 5, 256] {
            let n = t * n_embd;
            let reps = if t == 256 { 200 } else { 1000 };
            copy_across_n(&src, &dst, n, Some(&staging))?; // warm-up
            let mut us = Vec::with_capacity(reps);
            for _ in 0..reps {
                let t0 = Instant::now();
                copy_across_n(&src, &dst, n, Some(&staging))?;
                us.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            let back = cards[1].queue.to_vec(&dst)?;
            assert_eq!(&back[..n], &host[..n], "copied rows differ");
            let med = pct(&mut us, 0.5);
            let p10 = pct(&mut us, 0.1);
            println!(
                "| {n_embd} | {t} | {} | {med:.1} | {p10:.1} | {:.2} |",
                n * 4,
                (n * 4) as f64 / med / 1e3
            );
        }
    }
    Ok(())
}
