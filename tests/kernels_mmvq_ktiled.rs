//! The K-tiled decode kernel (engine/kernels/ktiled.rs, sycl/kernels/mmvq_ktiled.cpp) on its own:
//! upload makes the repacked copy for Q4_K/Q5_K/Q6_K and it round-trips to the GGUF bytes; at
//! Gemma 3's shapes both layouts (tiled, GGUF) match the f64 reference on fresh random weights
//! and activations (nmse printed), and every column of a T-column tiled call is bitwise the
//! one-column call.

mod support;
use strata::kernels::{ktiled, matrix_ref, QuantMatrix, WeightView};
use strata::quant::type_id;
use support::matrix::*;

/// (n_out, n_in): Gemma 3 270M's attn_output (640, 1024) and ffn_down (640, 2048), a tall
/// head-like one, and an n_out that leaves a partial last tile.
const SHAPES: &[(usize, usize)] = &[(640, 1024), (640, 2048), (8192, 1024), (37, 512)];

/// As tests/kernels_mmvq.rs: f32 inputs, exactly decoded weights, only the summation order left.
const BOUND: f64 = 1e-7;

fn gguf_view(w: &QuantMatrix) -> WeightView<'_> {
    let mut v = w.view();
    v.tiled = None;
    v
}

#[test]
fn ktiled_matches_reference_and_columns_are_bitwise_independent_of_t() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x6b74696c);
    let mut worst = 0f64;
    let formats: Vec<_> = FORMATS.iter().filter(|f| ktiled::supported(f.1)).collect();
    assert_eq!(formats.len(), 3, "Q4_K, Q5_K, Q6_K");
    for &&(name, tid) in &formats {
        for &(n_out, n_in) in SHAPES {
            assert!(fits(tid, n_in));
            let wb = weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let tiled = w.tiled.as_ref().expect("upload makes the K-tiled copy");
            assert_eq!(
                ktiled::untile(tid, &q.to_vec(tiled).unwrap(), n_out, n_in).as_deref(),
                Some(&wb[..]),
                "{name} ({n_out}, {n_in}): the device copy does not untile to the GGUF bytes"
            );
            let x = values(&mut rng, 8 * n_in);
            let xd = q.upload(&x).unwrap();
            let mut yd = q.alloc::<f32>(8 * n_out).unwrap();
            let reference = matrix_ref(tid, &wb, n_out, n_in, &x, 8).unwrap();
            let mut single = Vec::new();
            for t in 0..8 {
                let xt = q.upload(&x[t * n_in..(t + 1) * n_in]).unwrap();
                let mut yt = q.alloc::<f32>(n_out).unwrap();
                k.mmvq(&q, &w.view(), &xt, &mut yt, 1).unwrap();
                single.push(q.to_vec(&yt).unwrap());
            }
            let mut line = format!("ktiled {name} ({n_out:5}, {n_in:4}) nmse T=1..8:");
            for t in 1..=8 {
                q.upload_to(&yd, &vec![f32::NAN; 8 * n_out]).unwrap();
                k.mmvq(&q, &w.view(), &xd, &mut yd, t).unwrap();
                let y = q.to_vec(&yd).unwrap();
                let e = nmse(&y[..t * n_out], &reference[..t * n_out]);
                line += &format!(" {e:.1e}");
                worst = worst.max(e);
                assert!(e < BOUND, "{name} ({n_out}, {n_in}) T={t}: nmse {e:e}");
                assert!(
                    y[t * n_out..].iter().all(|v| v.is_nan()),
                    "{name} T={t} wrote past column {t}"
                );
                for (r, s) in single.iter().enumerate().take(t) {
                    let got = &y[r * n_out..(r + 1) * n_out];
                    assert!(
                        got.iter().zip(s).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{name} ({n_out}, {n_in}): column {r} of a T={t} call differs from its one-column call"
                    );
                }
            }
            // the GGUF-layout kernel beside it, same inputs (T = 1 and 8)
            for t in [1, 8] {
                k.mmvq(&q, &gguf_view(&w), &xd, &mut yd, t).unwrap();
                let y = q.to_vec(&yd).unwrap();
                let e = nmse(&y[..t * n_out], &reference[..t * n_out]);
                line += &format!("  gguf T={t} {e:.1e}");
                assert!(e < BOUND, "{name} gguf ({n_out}, {n_in}) T={t}: nmse {e:e}");
            }
            println!("{line}  bitwise vs one-column calls: ok");
        }
    }
    println!("worst tiled nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn ktiled_sees_one_corrupted_scale_in_the_repacked_copy() {
    // Power check on the tiled bytes themselves: the f16 d of one row's block, found through
    // the layout (tile then untile of a marked GGUF byte), flipped in the device copy only.
    let (_ctx, q, k) = setup();
    let mut rng = rng(11);
    for (name, tid, d_at) in [
        ("Q4_K", type_id::Q4_K, 1usize),
        ("Q6_K", type_id::Q6_K, 209),
    ] {
        let (n_out, n_in) = (48, 512);
        let wb = weights(&mut rng, tid, n_out, n_in);
        let x = values(&mut rng, n_in);
        let reference = matrix_ref(tid, &wb, n_out, n_in, &x, 1).unwrap();
        // where GGUF byte d_at of row 21, block 1 lands: mark it in a zero matrix
        let bb = wb.len() / n_out / (n_in / 256);
        let mut marked = vec![0u8; wb.len()];
        marked[(21 * 2 + 1) * bb + d_at] = 1;
        let at = ktiled::tile(tid, &marked, n_out, n_in)
            .unwrap()
            .iter()
            .position(|&b| b == 1)
            .unwrap();
        let mut t = ktiled::tile(tid, &wb, n_out, n_in).unwrap();
        t[at] ^= 0x40; // the exponent of the f16 d (its high byte)
        let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
        let tiled = q.upload(&t).unwrap();
        let mut v = w.view();
        v.tiled = Some(&tiled);
        let xd = q.upload(&x).unwrap();
        let mut yd = q.alloc::<f32>(n_out).unwrap();
        k.mmvq(&q, &v, &xd, &mut yd, 1).unwrap();
        let y = q.to_vec(&yd).unwrap();
        let e = nmse(&y, &reference);
        let rest = nmse(
            &[&y[..21], &y[22..]].concat(),
            &[&reference[..21], &reference[22..]].concat(),
        );
        println!("ktiled {name} corrupted d of row 21: nmse {e:.2e}, other rows {rest:.2e}");
        assert!(
            e > BOUND,
            "{name}: the corrupted scale went unnoticed ({e:e})"
        );
        assert!(
            rest < BOUND,
            "{name}: rows other than 21 changed ({rest:e})"
        );
    }
}
