//! The weights arena (engine/sycl/arena.rs) on the real CPU device: slices keep their bytes,
//! are aligned and disjoint, a large tensor gets a block of its own, and slices outlive the
//! arena that made them.

use rand::{Rng, SeedableRng};
use strata::sycl::{self, arena::BLOCK_BYTES, Arena, Context, Store};

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen()).collect()
}

#[test]
fn arena_slices_hold_their_data_and_outlive_the_arena() {
    let dev = sycl::cpu_device().expect("the CPU SYCL device (run `make setup`)");
    let ctx = Context::new(std::slice::from_ref(&dev)).expect("context");
    let q = ctx.queue(&dev).expect("queue");
    let arena = Arena::new(&q);
    // odd sizes (alignment padding between slices), two blocks' worth, one above half a block
    let sizes = [
        1usize,
        63,
        4097,
        300_000,
        BLOCK_BYTES / 3,
        BLOCK_BYTES / 3,
        BLOCK_BYTES / 2 + 1,
        17,
    ];
    let data: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| bytes(n, i as u64))
        .collect();
    let floats: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let mut slices = Vec::new();
    for d in &data {
        slices.push(arena.put(d).expect("arena upload"));
    }
    let fs = arena.put(&floats).expect("arena upload of f32");
    drop(arena); // the slices keep their blocks alive
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (s, d) in slices.iter().zip(&data) {
        let p = s.as_ptr() as usize;
        assert_eq!(
            p % 64,
            0,
            "slice of {} bytes at {p:#x} is not 64-byte aligned",
            d.len()
        );
        spans.push((p, p + d.len()));
        let mut back = vec![0u8; d.len()];
        q.download(s, &mut back).expect("download");
        assert!(back == *d, "slice of {} bytes came back different", d.len());
    }
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "slices overlap: {:x?} and {:x?}",
            w[0],
            w[1]
        );
    }
    let mut fback = vec![0f32; floats.len()];
    q.download(&fs, &mut fback).expect("download");
    assert_eq!(fback, floats);
    // dropping the slices frees the blocks (after waiting for the queue): no crash, no leak check
    drop(slices);
    drop(fs);
    q.wait().expect("queue still healthy");
}
