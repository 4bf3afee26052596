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

/// Gemma's post-norm and the norm after it folded into a K-tiled product's launch
/// (`mmvq_post_norm`): y = W x, res += rms_norm(y) * w1, yq = round_32(rms_norm(res) * w2) with
/// yq's stage, bitwise the product followed by `NormQ8::norm_add_norm` (blocks of 32), for
/// Q4_K/Q5_K/Q6_K at Gemma 3's o and down shapes and a small one, T = 1, 2, 5, 8, yq written
/// over x (as the engine does), each twice so the second launch shows the arrival counter was
/// left at zero.
#[test]
fn post_norm_fold_is_bitwise_product_then_norm_add_norm() {
    use strata::kernels::norm_q8::NormQ8;
    use strata::kernels::{NormTail, XStage};
    let (ctx, q, k) = setup();
    let nq8 = NormQ8::new(&ctx).unwrap();
    let mut rng = rng(0x706f7374);
    let counter = q.upload(&[0u32]).unwrap();
    let eps = 1e-6f32;
    let mut compared = 0usize;
    let formats: Vec<_> = FORMATS.iter().filter(|f| ktiled::supported(f.1)).collect();
    for &&(name, tid) in &formats {
        for &(n_out, n_in) in &[(640, 1024), (640, 2048), (64, 256)] {
            let wb = weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let v = w.view();
            let w1 = q.upload(&values(&mut rng, n_out)).unwrap();
            let w2 = q.upload(&values(&mut rng, n_out)).unwrap();
            for t in [1, 2, 5, 8] {
                let x = values(&mut rng, t * n_in);
                let res = values(&mut rng, t * n_out);
                let xd = q.upload(&x).unwrap();
                // the unfused pair
                let mut o1 = q.alloc::<f32>(t * n_out).unwrap();
                k.mmvq(&q, &v, &xd, &mut o1, t).unwrap();
                let r1 = q.upload(&res).unwrap();
                let yq1 = q.alloc::<f32>(t * n_out).unwrap();
                let stb1 = q.alloc::<f32>(XStage::floats(t * n_out)).unwrap();
                let st1 = XStage::new(&stb1, t * n_out).unwrap();
                nq8.norm_add_norm(&q, &o1, &w1, &r1, &w2, &yq1, t, n_out, eps, 32, Some(st1))
                    .unwrap();
                let staged = t * n_out + t * n_out / 32; // the stage without records
                let want = [
                    q.to_vec(&o1).unwrap(),
                    q.to_vec(&r1).unwrap(),
                    q.to_vec(&yq1).unwrap(),
                    q.to_vec_prefix(&stb1, staged).unwrap(),
                ];
                for round in 0..2 {
                    let xq = q
                        .upload(&[x.clone(), vec![0.0; t * n_out]].concat())
                        .unwrap();
                    let mut o2 = q.alloc::<f32>(t * n_out).unwrap();
                    let mut r2 = q.upload(&res).unwrap();
                    let stb2 = q.alloc::<f32>(XStage::floats(t * n_out)).unwrap();
                    let tail = NormTail {
                        counter: &counter,
                        w: &w2,
                        yq: &xq,
                        st: Some(XStage::new(&stb2, t * n_out).unwrap()),
                        eps,
                    };
                    let took = k
                        .mmvq_post_norm(&q, &v, &xq, &mut o2, &w1, &mut r2, &tail, t)
                        .unwrap();
                    assert!(took, "{name}: the fold takes a K-tiled format");
                    let got = [
                        q.to_vec(&o2).unwrap(),
                        q.to_vec(&r2).unwrap(),
                        q.to_vec_prefix(&xq, t * n_out).unwrap(),
                        q.to_vec_prefix(&stb2, staged).unwrap(),
                    ];
                    let d: Vec<usize> = got
                        .iter()
                        .zip(&want)
                        .map(|(a, b)| bits_differ(a, b))
                        .collect();
                    assert_eq!(
                        d,
                        [0, 0, 0, 0],
                        "{name} ({n_out}, {n_in}) T={t} launch {round}: values differing in (y, res, yq, yq's stage)"
                    );
                    compared += want.iter().map(Vec::len).sum::<usize>();
                }
                assert_eq!(q.to_vec(&counter).unwrap(), vec![0], "counter left at zero");
            }
        }
    }
    println!("post-norm + norm folded: {compared} values bitwise the unfused pair's");
}
