//! The activation-rounding kernel (sycl/kernels/actq.cpp) against its Rust reference on fresh
//! random inputs, both block sizes. Each output is one rounding of one f32 product, so the two
//! agree bitwise unless the device's reciprocal differs in the last bit; the test prints the
//! count of differing values and their largest difference (at most one quantization step).

use rand::{Rng, SeedableRng};
use strata::kernels::actq::{reference, ActQ, ActRound};

#[test]
fn actq_kernel_matches_reference() {
    strata::sycl::runtime::init();
    let card = strata::sycl::Card::cpu().expect("the CPU SYCL device (run `make setup`)");
    let k = ActQ::new(&card.context).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::random());
    for mode in [ActRound::Q8Block32, ActRound::Q8Block256] {
        let n = 256 * 64;
        let mut x: Vec<f32> = (0..n)
            .map(|_| rng.gen_range(-1.0f32..1.0) * rng.gen_range(0.0f32..8.0))
            .collect();
        // an all-zero block and a block whose largest element is negative
        x[..256].fill(0.0);
        x[256] = -50.0;
        let xd = card.queue.upload(&x).unwrap();
        let yd = card.queue.alloc::<f32>(n).unwrap();
        k.run(&card.queue, mode, &xd, &yd, n).unwrap();
        let got = card.queue.to_vec(&yd).unwrap();
        let want = reference(mode, &x);
        let diffs: Vec<(usize, f32)> = got
            .iter()
            .zip(&want)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| (i, (a - b).abs()))
            .collect();
        let worst = diffs.iter().map(|d| d.1).fold(0f32, f32::max);
        println!(
            "{mode:?}: {} of {n} values differ, largest difference {worst:e}",
            diffs.len()
        );
        assert!(got[..256].iter().all(|&v| v == 0.0), "{:?}", &got[..8]);
        // -50 is its block's largest value: it comes back as -127 steps (f16 scale: within 2^-11).
        assert!((got[256] + 50.0).abs() <= 50.0 / 2048.0, "{}", got[256]);
        // At most a handful of last-bit reciprocal differences, never more than one step.
        assert!(diffs.len() <= n / 1000, "{} values differ", diffs.len());
        for (i, d) in diffs {
            let b = mode.block();
            let amax = x[i / b * b..][..b].iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(
                d <= amax / 127.0 * 1.001,
                "value {i}: difference {d} above one step"
            );
        }
        // Rounding is idempotent up to the f16 scale: the output has at most 255 levels a block.
        for blk in got.chunks(mode.block()) {
            let mut lv: Vec<u32> = blk.iter().map(|v| v.to_bits()).collect();
            lv.sort_unstable();
            lv.dedup();
            assert!(lv.len() <= 255);
        }
    }
}
