//! Parity of the mmvq kernel (T = 1..8) against the f64 reference for every format, on fresh
//! random weights and activations; and the bitwise T-row == T one-row-calls property.

mod support;
use strata::kernels::actq::ActQ;
use strata::kernels::{matrix_ref, QuantMatrix, XStage};
use strata::quant::type_id;
use support::matrix::*;

/// (n_out, n_in): the models' real shapes, a 256-multiple square-ish one, and small odd ones
/// (n_out not a multiple of the 4 rows per work-group; n_in not a multiple of 256).
const SHAPES: &[(usize, usize)] = &[
    (576, 1536),
    (1536, 576),
    (640, 2048),
    (2048, 640),
    (640, 1024),
    (37, 96),
    (45, 512),
];

/// f32 activations and f32 weights decoded exactly: the only error left is f32 summation order,
/// so every format gets the float bound (far tighter than the 5e-4 quantized-product convention).
const BOUND: f64 = 1e-7;

#[test]
fn mmvq_matches_reference_and_rows_are_bitwise_independent_of_t() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x6d6d7671);
    let mut worst = 0f64;
    for &(name, tid) in FORMATS {
        for &(n_out, n_in) in SHAPES {
            if !fits(tid, n_in) {
                continue;
            }
            let wb = weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let x = values(&mut rng, 8 * n_in);
            worst = worst.max(mmvq_parity(&q, &k, name, &w, &wb, &x, BOUND));
        }
    }
    println!("worst nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn mmvq_sees_a_single_wrong_scale() {
    // Power check: corrupting one value (float types) or one block's scale in one row must
    // break the bound.
    let (_ctx, q, k) = setup();
    let mut rng = rng(7);
    for &(name, tid) in FORMATS {
        let (n_out, n_in) = (64, 512);
        let mut wb = weights(&mut rng, tid, n_out, n_in);
        let x = values(&mut rng, n_in);
        let reference = matrix_ref(tid, &wb, n_out, n_in, &x, 1).unwrap();
        let row5 = 5 * (wb.len() / n_out);
        match name {
            // float types: flip the sign of row 5's first value (its top byte)
            "F32" => wb[row5 + 3] ^= 0x80,
            "F16" | "BF16" => wb[row5 + 1] ^= 0x80,
            // the f16 scale d of row 5's first block (Q6_K keeps it at the block end)
            _ => {
                let at = row5 + if name == "Q6_K" { 208 } else { 0 };
                wb[at] ^= 0x5a;
                wb[at + 1] ^= 0x11;
            }
        }
        let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
        let xd = q.upload(&x).unwrap();
        let mut yd = q.alloc::<f32>(n_out).unwrap();
        k.mmvq(&q, &w.view(), &xd, &mut yd, 1).unwrap();
        let y = q.to_vec(&yd).unwrap();
        let e = nmse(&y, &reference);
        println!("mmvq {name:6} corrupted row 5: nmse vs the clean reference {e:.2e}");
        assert!(
            e > BOUND,
            "{name}: corrupting row 5 went unnoticed (nmse {e:e})"
        );
    }
}

#[test]
fn mmvq_rejects_bad_shapes_with_a_clear_error() {
    let (_ctx, q, k) = setup();
    let wb = vec![0u8; 4 * 18 * 3]; // Q4_0 (4, 96)
    let w = QuantMatrix::upload(&q, "w", type_id::Q4_0, 4, 96, &wb).unwrap();
    let x = q.alloc::<f32>(9 * 96).unwrap();
    let mut y = q.alloc::<f32>(9 * 4).unwrap();
    let e = k
        .mmvq(&q, &w.view(), &x, &mut y, 9)
        .unwrap_err()
        .to_string();
    assert!(e.contains("t = 9"), "{e}");
    let mut small = q.alloc::<f32>(3).unwrap();
    let e = k
        .mmvq(&q, &w.view(), &x, &mut small, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("y holds 3"), "{e}");
    let e = QuantMatrix::upload(&q, "blk.0.ffn_up.weight", 12, 4, 96, &wb)
        .err()
        .expect("Q4_K with n_in 96 must fail")
        .to_string();
    assert!(e.contains("Q4_K") || e.contains("256"), "{e}");
}

#[test]
fn huge_n_out_the_gemma3_output_head() {
    // The tied head: Q8_0 (262144, 640). Random Q8_0 bytes (f16 scale 0.001..0.02, any int8),
    // every row distinct; the reference is computed on a sample of rows including the last ones.
    use rand::Rng;
    let (_ctx, q, k) = setup();
    let mut rng = rng(262144);
    let (n_out, n_in) = (262144usize, 640usize);
    let tid = type_id::Q8_0;
    let mut wb = vec![0u8; n_out * n_in / 32 * 34];
    for blk in wb.chunks_exact_mut(34) {
        let d = half::f16::from_f32(rng.gen_range(0.001f32..0.02));
        blk[..2].copy_from_slice(&d.to_le_bytes());
        rng.fill(&mut blk[2..]);
    }
    let w = QuantMatrix::upload(&q, "token_embd.weight", tid, n_out, n_in, &wb).unwrap();
    let rows: Vec<usize> = (0..n_out).step_by(997).chain(n_out - 5..n_out).collect();
    let row_bytes = n_in / 32 * 34;
    for t in [1usize, 3, 9] {
        let x = values(&mut rng, t * n_in);
        let xd = q.upload(&x).unwrap();
        let mut yd = q.alloc::<f32>(t * n_out).unwrap();
        k.mul(&q, &w.view(), &xd, &mut yd, t).unwrap();
        let y = q.to_vec(&yd).unwrap();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for &r in &rows {
            let wr = &wb[r * row_bytes..(r + 1) * row_bytes];
            let yr = matrix_ref(tid, wr, 1, n_in, &x, t).unwrap();
            for ti in 0..t {
                got.push(y[ti * n_out + r]);
                want.push(yr[ti]);
            }
        }
        let e = nmse(&got, &want);
        println!(
            "head Q8_0 ({n_out}, {n_in}) T={t} ({}): nmse {e:.2e} over {} sampled rows",
            if t <= 8 { "mmvq" } else { "matmul" },
            rows.len()
        );
        assert!(e < BOUND, "head T={t}: nmse {e:e}");
    }
}

/// The formats with a tiled layout (`engine/kernels/tiled.rs`).
const TILED: &[(&str, u32)] = &[
    ("Q4_0", type_id::Q4_0),
    ("Q4_1", type_id::Q4_1),
    ("Q5_0", type_id::Q5_0),
    ("Q5_1", type_id::Q5_1),
    ("Q8_0", type_id::Q8_0),
];

/// Groups of matrices sharing an input, (n_out) per matrix at one n_in: the models' q/k/v and
/// gate/up, and odd sizes (n_out not a multiple of the 16-row tile).
const GROUPS: &[(usize, &[usize])] = &[
    (576, &[576, 192, 192]),
    (576, &[1536, 1536]),
    (640, &[1024, 256, 256]),
    (640, &[2048, 2048]),
    (96, &[37, 45, 20]),
    (96, &[5]),
];

/// Residual products (n_out, n_in): the models' attention output and FFN down projections.
const RESIDUAL: &[(usize, usize)] = &[(576, 576), (576, 1536), (640, 1024), (640, 2048), (37, 96)];

#[test]
fn grouped_launch_is_bitwise_separate_launches() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x67727570);
    let mut worst = 0f64;
    for &(name, tid) in TILED {
        for &(n_in, n_outs) in GROUPS {
            let wbs: Vec<Vec<u8>> = n_outs
                .iter()
                .map(|&n| weights(&mut rng, tid, n, n_in))
                .collect();
            let ws: Vec<QuantMatrix> = wbs
                .iter()
                .zip(n_outs)
                .map(|(b, &n)| QuantMatrix::upload(&q, name, tid, n, n_in, b).unwrap())
                .collect();
            let views: Vec<_> = ws.iter().map(|m| m.view()).collect();
            let x = values(&mut rng, 8 * n_in);
            let xd = q.upload(&x).unwrap();
            let mut line = format!("group {name:5} n_in {n_in:4} n_out {n_outs:?} nmse T=1..8:");
            for t in 1..=8 {
                let mut sep = Vec::new();
                for v in &views {
                    let mut y = q.alloc::<f32>(8 * v.n_out).unwrap();
                    k.mmvq(&q, v, &xd, &mut y, t).unwrap();
                    sep.push(q.to_vec(&y).unwrap()[..t * v.n_out].to_vec());
                }
                let mut ys: Vec<_> = views
                    .iter()
                    .map(|v| q.upload(&vec![f32::NAN; 8 * v.n_out]).unwrap())
                    .collect();
                let mut outs: Vec<_> = views.iter().zip(ys.iter_mut()).collect();
                let took = k.mmvq_group(&q, &xd, None, &mut outs, t).unwrap();
                assert!(took, "{name}: mmvq_group declined tiled matrices");
                let mut e_t = 0f64;
                for (i, v) in views.iter().enumerate() {
                    let y = q.to_vec(&ys[i]).unwrap();
                    assert!(
                        bits_differ(&y[..t * v.n_out], &sep[i]) == 0,
                        "{name} n_in {n_in} matrix {i} ({}) T={t}: grouped differs from its own launch",
                        v.n_out
                    );
                    assert!(
                        y[t * v.n_out..].iter().all(|v| v.is_nan()),
                        "wrote past row {t}"
                    );
                    let r = matrix_ref(tid, &wbs[i], v.n_out, n_in, &x[..t * n_in], t).unwrap();
                    let e = nmse(&y[..t * v.n_out], &r);
                    assert!(e < BOUND, "{name} matrix {i} T={t}: nmse {e:e}");
                    e_t = e_t.max(e);
                }
                worst = worst.max(e_t);
                line += &format!(" {e_t:.1e}");
            }
            println!("{line}  bitwise vs separate launches: ok");
        }
    }
    // more than 3 matrices, mixed formats or n_in: declined, nothing written
    let (a, b) = (
        weights(&mut rng, type_id::Q4_1, 32, 64),
        weights(&mut rng, type_id::Q8_0, 32, 64),
    );
    let ma = QuantMatrix::upload(&q, "a", type_id::Q4_1, 32, 64, &a).unwrap();
    let mb = QuantMatrix::upload(&q, "b", type_id::Q8_0, 32, 64, &b).unwrap();
    let xd = q.upload(&values(&mut rng, 64)).unwrap();
    let (va, vb) = (ma.view(), mb.view());
    let mut y1 = q.alloc::<f32>(32).unwrap();
    let mut y2 = q.alloc::<f32>(32).unwrap();
    assert!(!k
        .mmvq_group(&q, &xd, None, &mut [(&va, &mut y1), (&vb, &mut y2)], 1)
        .unwrap());
    println!("worst nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn residual_epilogue_is_bitwise_product_then_add() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x72657369);
    for &(name, tid) in TILED {
        for &(n_out, n_in) in RESIDUAL {
            let wb = weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let x = values(&mut rng, 8 * n_in);
            let xd = q.upload(&x).unwrap();
            let res = values(&mut rng, 8 * n_out);
            let mut line = format!("residual {name:5} ({n_out:4}, {n_in:4}) nmse T=1..8:");
            for t in 1..=8 {
                let mut o = q.alloc::<f32>(8 * n_out).unwrap();
                k.mmvq(&q, &w.view(), &xd, &mut o, t).unwrap();
                let o = q.to_vec(&o).unwrap();
                // product then the f32 add, as the unfused path does (IEEE add: same bits)
                let want: Vec<f32> = (0..t * n_out).map(|i| res[i] + o[i]).collect();
                let mut y = q.upload(&res).unwrap();
                assert!(k
                    .mmvq_residual(&q, &w.view(), &xd, None, &mut y, t)
                    .unwrap());
                let y = q.to_vec(&y).unwrap();
                assert!(
                    bits_differ(&y[..t * n_out], &want) == 0,
                    "{name} ({n_out}, {n_in}) T={t}: fused residual differs from product + add"
                );
                assert!(
                    bits_differ(&y[t * n_out..], &res[t * n_out..]) == 0,
                    "{name} T={t}: rows past {t} changed"
                );
                let r = matrix_ref(tid, &wb, n_out, n_in, &x[..t * n_in], t).unwrap();
                let r: Vec<f64> = r.iter().zip(&res).map(|(p, &s)| p + s as f64).collect();
                let e = nmse(&y[..t * n_out], &r);
                assert!(e < BOUND, "{name} T={t}: nmse {e:e}");
                line += &format!(" {e:.1e}");
            }
            println!("{line}  bitwise vs product + add: ok");
        }
    }
}

/// The tiled kernel reading x's stage (xstage.rs, written here by `ActQ::run_staged`, as the
/// engine's fused rounding kernels do) gives bitwise the outputs of the kernel that stages x
/// itself: single products, grouped launches and the residual epilogue, T = 1..8, every tiled
/// format (Q8_0 has no block sum and ignores the stage). A stage of another size is an error.
#[test]
fn staged_x_is_bitwise_unstaged() {
    let (ctx, q, k) = setup();
    let aq = ActQ::new(&ctx).unwrap();
    let mut rng = rng(0x78737467);
    for &(name, tid) in TILED {
        for &(n_in, n_outs) in GROUPS {
            let mats: Vec<_> = n_outs
                .iter()
                .map(|&n_out| {
                    let wb = weights(&mut rng, tid, n_out, n_in);
                    QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap()
                })
                .collect();
            let views: Vec<_> = mats.iter().map(|m| m.view()).collect();
            let xd = q.upload(&values(&mut rng, 8 * n_in)).unwrap();
            let xq = q.alloc::<f32>(8 * n_in).unwrap();
            let stb = q.alloc::<f32>(XStage::floats(8 * n_in)).unwrap();
            let res: Vec<f32> = values(&mut rng, 8 * n_outs[0]);
            for t in 1..=8 {
                let st = XStage::new(&stb, t * n_in).unwrap();
                aq.run_staged(&q, &xd, &xq, t * n_in, st).unwrap();
                let mut differ = 0;
                let mut plain = Vec::new();
                for v in &views {
                    let mut a = q.alloc::<f32>(t * v.n_out).unwrap();
                    let mut b = q.alloc::<f32>(t * v.n_out).unwrap();
                    k.mmvq(&q, v, &xq, &mut a, t).unwrap();
                    k.mmvq_staged(&q, v, &xq, Some(st), &mut b, t).unwrap();
                    let a = q.to_vec(&a).unwrap();
                    differ += bits_differ(&a, &q.to_vec(&b).unwrap());
                    plain.push(a);
                }
                let mut ys: Vec<_> = views
                    .iter()
                    .map(|v| q.alloc::<f32>(t * v.n_out).unwrap())
                    .collect();
                let mut outs: Vec<_> = views.iter().zip(ys.iter_mut()).collect();
                assert!(k.mmvq_group(&q, &xq, Some(st), &mut outs, t).unwrap());
                for (y, a) in ys.iter().zip(&plain) {
                    differ += bits_differ(&q.to_vec(y).unwrap(), a);
                }
                let n0 = views[0].n_out;
                let mut r1 = q.upload(&res[..t * n0]).unwrap();
                let mut r2 = q.upload(&res[..t * n0]).unwrap();
                assert!(k
                    .mmvq_residual(&q, &views[0], &xq, None, &mut r1, t)
                    .unwrap());
                assert!(k
                    .mmvq_residual(&q, &views[0], &xq, Some(st), &mut r2, t)
                    .unwrap());
                differ += bits_differ(&q.to_vec(&r1).unwrap(), &q.to_vec(&r2).unwrap());
                assert_eq!(
                    differ, 0,
                    "{name} n_in {n_in} {n_outs:?} T={t}: staged x changed {differ} outputs"
                );
                if t > 1 {
                    // a stage of t - 1 rows read as t rows: refused, naming the stage
                    let short = XStage::new(&stb, (t - 1) * n_in).unwrap();
                    let mut y = q.alloc::<f32>(t * n0).unwrap();
                    let e = k.mmvq_staged(&q, &views[0], &xq, Some(short), &mut y, t);
                    if tid != type_id::Q8_0 {
                        let msg = e.expect_err("a stage of the wrong size").to_string();
                        assert!(msg.contains("staged activation"), "{msg}");
                    }
                }
            }
            println!("{name} n_in {n_in} n_out {n_outs:?}: staged x bitwise unstaged, T = 1..8");
        }
    }
    let b = q.alloc::<f32>(40).unwrap();
    let e = XStage::new(&b, 48)
        .err()
        .expect("48 elements: not whole blocks");
    assert!(e.to_string().contains("blocks of 32"), "{e}");
    let e = XStage::new(&b, 64)
        .err()
        .expect("64 elements need 84 floats");
    // 64 scaled + 2 block sums + 2 integer records of 9 floats
    assert!(e.to_string().contains("84"), "{e}");
}

/// The norm folded into a projection's launch (`mmvq_residual_norm`, the decode step's o and down
/// projections followed by the next RMSNorm): y = y + W x and yq = round_32(rms_norm(y) * w),
/// with yq's stage, bitwise `mmvq_residual` then `NormQ8::rms_norm`, for every tiled format,
/// T = 1, 2, 5, 8, launches of 4 to 128 work-groups. yq and its stage are written over x and
/// x's stage (as the engine does): the norm must run after every work-group's reads. Run twice
/// in a row, so the second launch shows the arrival counter was left at zero.
#[test]
fn residual_norm_fold_is_bitwise_residual_then_norm() {
    use strata::kernels::norm_q8::NormQ8;
    use strata::kernels::NormTail;
    let (ctx, q, k) = setup();
    let aq = ActQ::new(&ctx).unwrap();
    let nq8 = NormQ8::new(&ctx).unwrap();
    let mut rng = rng(0x6e6f726d);
    let counter = q.upload(&[0u32]).unwrap();
    let eps = 1e-5f32;
    let mut compared = 0usize;
    for &(name, tid) in TILED {
        for &(n_out, n_in) in &[(64, 96), (576, 576), (576, 1536), (2048, 640)] {
            let wb = weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let v = w.view();
            let nw = q.upload(&values(&mut rng, n_out)).unwrap();
            for t in [1, 2, 5, 8] {
                let xd = q.upload(&values(&mut rng, t * n_in)).unwrap();
                let res = values(&mut rng, t * n_out);
                // the unfused pair: product + residual, then the norm into its own buffers
                let xq = q.alloc::<f32>(t * n_in).unwrap();
                let stb = q.alloc::<f32>(XStage::floats(t * n_in.max(n_out))).unwrap();
                let st = XStage::new(&stb, t * n_in).unwrap();
                aq.run_staged(&q, &xd, &xq, t * n_in, st).unwrap();
                let mut r1 = q.upload(&res).unwrap();
                assert!(k.mmvq_residual(&q, &v, &xq, Some(st), &mut r1, t).unwrap());
                let yq1 = q.alloc::<f32>(t * n_out).unwrap();
                let nstb = q.alloc::<f32>(XStage::floats(t * n_out)).unwrap();
                let nst = XStage::new(&nstb, t * n_out).unwrap();
                nq8.rms_norm(&q, &r1, &nw, &yq1, t, n_out, eps, 32, Some(nst))
                    .unwrap();
                let want_r = q.to_vec(&r1).unwrap();
                let want_yq = q.to_vec(&yq1).unwrap();
                let staged = t * n_out + t * n_out / 32; // the stage without records
                let want_st = q.to_vec_prefix(&nstb, staged).unwrap();
                for round in 0..2 {
                    // x rounded again into xq and stb, which the fold then overwrites
                    let xq2 = q.alloc::<f32>(t * n_in.max(n_out)).unwrap();
                    aq.run_staged(&q, &xd, &xq2, t * n_in, st).unwrap();
                    let mut r2 = q.upload(&res).unwrap();
                    let tail = NormTail {
                        counter: &counter,
                        w: &nw,
                        yq: &xq2,
                        st: Some(XStage::new(&stb, t * n_out).unwrap()),
                        eps,
                    };
                    let took = k
                        .mmvq_residual_norm(&q, &v, &xq2, Some(st), &mut r2, &tail, t)
                        .unwrap();
                    assert!(took, "{name}: the fold takes a tiled format");
                    let tag = format!("{name} ({n_out}, {n_in}) T={t} launch {round}");
                    let y2 = q.to_vec(&r2).unwrap();
                    let yq2 = q.to_vec_prefix(&xq2, t * n_out).unwrap();
                    let st2 = q.to_vec_prefix(&stb, staged).unwrap();
                    let d = [
                        bits_differ(&y2, &want_r),
                        bits_differ(&yq2, &want_yq),
                        bits_differ(&st2, &want_st),
                    ];
                    assert_eq!(
                        d,
                        [0, 0, 0],
                        "{tag}: values differing in (y, yq, yq's stage)"
                    );
                    compared += want_r.len() + want_yq.len() + staged;
                }
                assert_eq!(q.to_vec(&counter).unwrap(), vec![0], "counter left at zero");
            }
        }
    }
    println!("residual + norm folded: {compared} values bitwise the unfused pair's");
    // a K-quant (no tiled 32-block layout) is not taken: Ok(false), nothing launched
    let wb = weights(&mut rng, type_id::Q4_K, 256, 256);
    let w = QuantMatrix::upload(&q, "Q4_K", type_id::Q4_K, 256, 256, &wb).unwrap();
    let x = q.alloc::<f32>(256).unwrap();
    let mut y = q.alloc::<f32>(256).unwrap();
    let nw = q.alloc::<f32>(256).unwrap();
    let tail = NormTail {
        counter: &counter,
        w: &nw,
        yq: &x,
        st: None,
        eps,
    };
    assert!(!k
        .mmvq_residual_norm(&q, &w.view(), &x, None, &mut y, &tail, 1)
        .unwrap());
}
