//! KV cache write: f32 rows -> f16 cache at positions, bitwise the host's f32 -> f16 rounding.
mod kernels_common;
use half::f16;
use kernels_common::*;
use strata::kernels::kv::{self, KvStore};

#[test]
fn kv_store_matches_reference_bitwise() {
    let (ctx, q) = setup();
    let k = KvStore::new(&ctx).unwrap();
    let mut rng = rng("kv_store");
    // (t, n_kv_head, head_dim, n_ctx): SmolLM2 (3 x 64, ctx 8192), Gemma (1 x 256)
    for (t, n_kv, hd, n_ctx) in [
        (1, 3, 64, 8192),
        (8, 3, 64, 8192),
        (5, 1, 256, 1024),
        (4, 2, 32, 16),
    ] {
        let krows = uniform(&mut rng, t * n_kv * hd, -70000.0, 70000.0); // includes f16 overflow
        let mut vrows = uniform(&mut rng, t * n_kv * hd, -1.0, 1.0);
        vrows[0] = 1e-6; // an f16 subnormal
                         // distinct positions (two rows at one position would race), the last one included
        let mut pos: Vec<i32> = rand::seq::index::sample(&mut rng, n_ctx - 1, t)
            .iter()
            .map(|p| p as i32)
            .collect();
        pos[0] = n_ctx as i32 - 1;
        let init: Vec<f16> = (0..n_kv * n_ctx * hd)
            .map(|i| f16::from_f32((i % 97) as f32))
            .collect();
        let (kc, vc) = (q.upload(&init).unwrap(), q.upload(&init).unwrap());
        let (kd, vd, pd) = (
            q.upload(&krows).unwrap(),
            q.upload(&vrows).unwrap(),
            q.upload(&pos).unwrap(),
        );
        k.run(&q, &kd, &vd, &kc, &vc, &pd, t, n_kv, hd, n_ctx)
            .unwrap();
        let (mut kw, mut vw) = (init.clone(), init.clone());
        kv::reference(&krows, &pos, &mut kw, n_kv, hd, n_ctx);
        kv::reference(&vrows, &pos, &mut vw, n_kv, hd, n_ctx);
        let (kg, vg) = (q.to_vec(&kc).unwrap(), q.to_vec(&vc).unwrap());
        let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&kg), bits(&kw), "K cache T {t} n_kv {n_kv} hd {hd}");
        assert_eq!(bits(&vg), bits(&vw), "V cache T {t} n_kv {n_kv} hd {hd}");
        println!("kv_store T {t} n_kv {n_kv} hd {hd} n_ctx {n_ctx}: caches bitwise equal");
    }
}

#[test]
fn kv_store_skips_out_of_range_positions() {
    let (ctx, q) = setup();
    let k = KvStore::new(&ctx).unwrap();
    let rows = vec![1.0f32; 2 * 16];
    let zero = vec![f16::ZERO; 4 * 16];
    let (kc, vc) = (q.upload(&zero).unwrap(), q.upload(&zero).unwrap());
    let (kd, pd) = (q.upload(&rows).unwrap(), q.upload(&[4i32, -1]).unwrap());
    k.run(&q, &kd, &kd, &kc, &vc, &pd, 2, 1, 16, 4).unwrap();
    assert!(q.to_vec(&kc).unwrap().iter().all(|h| *h == f16::ZERO));
    let e = k
        .run(&q, &kd, &kd, &kc, &vc, &pd, 2, 1, 24, 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("multiple of 16"), "{e}");
}
