//! Shared by the float-kernel parity tests (tests/kernels_*.rs): the real CPU device, fresh
//! random inputs (the seed is printed so a failure can be replayed with STRATA_TEST_SEED), and the
//! error measure of llama.cpp's test-backend-ops: NMSE = sum((a-b)^2) / sum(b^2).
#![allow(dead_code)]

pub mod attn;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::sycl::{Card, Context, Queue};

pub fn setup() -> (Context, Queue) {
    let card = Card::cpu().expect("the SYCL CPU device (run `make setup`)");
    (card.context, card.queue)
}

/// A fresh generator; STRATA_TEST_SEED=<n> replays a run.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("STRATA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen::<u64>());
    println!("{test}: seed {seed}");
    StdRng::seed_from_u64(seed)
}

pub fn uniform(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(lo..hi)).collect()
}

/// NMSE of `got` against the f64 reference `want`.
pub fn nmse(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "output length");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        let d = g as f64 - w;
        num += d * d;
        den += w * w;
    }
    if den == 0.0 {
        num
    } else {
        num / den
    }
}

/// Prints and checks the NMSE of one case (NaN fails too).
pub fn check_nmse(label: &str, got: &[f32], want: &[f64], limit: f64) -> f64 {
    let e = nmse(got, want);
    println!("{label}: NMSE {e:.3e}");
    assert!(e < limit, "{label}: NMSE {e:.3e} >= {limit:.0e}");
    e
}

/// Bitwise equality of two f32 slices, reporting the first difference.
pub fn assert_bitwise(label: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{label}: lengths");
    if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
        panic!("{label}: element {i} differs: {} vs {}", a[i], b[i]);
    }
}
