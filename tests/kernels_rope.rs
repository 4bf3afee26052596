//! RoPE parity: llama (adjacent pairs) and neox (halves) rotations vs an f64 reference, the real
//! models' shapes and bases, positions up to the 8192 context.
mod kernels_common;
use kernels_common::*;
use rand::Rng;
use strata::kernels::rope::{self, Rope, RopeMode, RopeTable};

#[test]
fn rope_matches_reference() {
    let (ctx, q) = setup();
    let k = Rope::new(&ctx).unwrap();
    let mut rng = rng("rope");
    // (mode, base, t, n_head, head_dim, n_rot, max position)
    let cases = [
        (RopeMode::Norm, 100000.0, 1, 9, 64, 64, 10), // SmolLM2 Q, decode near the start
        (RopeMode::Norm, 100000.0, 8, 9, 64, 64, 5000), // SmolLM2 Q
        (RopeMode::Norm, 100000.0, 8, 3, 64, 64, 8191), // SmolLM2 K, end of context
        (RopeMode::Neox, 1e6, 5, 4, 256, 256, 5000),  // Gemma Q, global layer
        (RopeMode::Neox, 10000.0, 5, 1, 256, 256, 5000), // Gemma K, local layer
        (RopeMode::Neox, 10000.0, 3, 2, 64, 32, 3000), // partial rotation
        (RopeMode::Norm, 10000.0, 3, 2, 64, 48, 3000),
    ];
    for (mode, base, t, n_head, hd, n_rot, max_pos) in cases {
        let table = RopeTable::new(&q, base, n_rot).unwrap();
        let x = uniform(&mut rng, t * n_head * hd, -2.0, 2.0);
        let mut pos: Vec<i32> = (0..t).map(|_| rng.gen_range(0..=max_pos)).collect();
        pos[0] = max_pos; // the largest angle always
        let (xd, pd) = (q.upload(&x).unwrap(), q.upload(&pos).unwrap());
        k.run(&q, mode, &xd, &pd, &table, t, n_head, hd).unwrap();
        let got = q.to_vec(&xd).unwrap();
        let want = rope::reference(mode, &x, &pos, &rope::rope_freqs(base, n_rot), n_head, hd);
        let label = format!(
            "rope {mode:?} base {base} T {t} heads {n_head} hd {hd} n_rot {n_rot} pos <= {max_pos}"
        );
        check_nmse(&label, &got, &want, 1e-7);
        // the unrotated tail passes through bit for bit
        for r in 0..t * n_head {
            let tail = r * hd + n_rot..(r + 1) * hd;
            assert_bitwise("rope tail", &got[tail.clone()], &x[tail]);
        }
    }
}

#[test]
fn rope_position_zero_is_identity_and_errors_are_clear() {
    let (ctx, q) = setup();
    let k = Rope::new(&ctx).unwrap();
    let mut rng = rng("rope_identity");
    let table = RopeTable::new(&q, 10000.0, 64).unwrap();
    let x = uniform(&mut rng, 2 * 64, -2.0, 2.0);
    let (xd, pd) = (q.upload(&x).unwrap(), q.upload(&[0i32, 0]).unwrap());
    k.run(&q, RopeMode::Neox, &xd, &pd, &table, 2, 1, 64)
        .unwrap();
    assert_bitwise("rope at position 0", &q.to_vec(&xd).unwrap(), &x);
    let e = k
        .run(&q, RopeMode::Neox, &xd, &pd, &table, 2, 1, 32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("n_rot 64 exceeds head_dim 32"), "{e}");
    assert!(RopeTable::new(&q, 10000.0, 7).is_err());
}
