//! RMSNorm parity (plain, per-head, fused with the residual add) and multi-row bitwise checks.
mod kernels_common;
use kernels_common::*;
use strata::kernels::norm::{self, Norm};

#[test]
fn rms_norm_matches_reference() {
    let (ctx, q) = setup();
    let k = Norm::new(&ctx).unwrap();
    let mut rng = rng("rms_norm");
    // (rows, n, eps): model rows (T x 576 / 640), per-head rows (T*9 x 64, T*4 x 256, T*1 x 256),
    // and a width that is not a multiple of 16
    let cases = [
        (1, 576, 1e-5f32),
        (8, 576, 1e-5),
        (5, 640, 1e-6),
        (5 * 9, 64, 1e-5),
        (7 * 4, 256, 1e-6),
        (3, 256, 1e-6),
        (4, 100, 1e-6),
    ];
    for (rows, n, eps) in cases {
        let x = uniform(&mut rng, rows * n, -3.0, 3.0);
        let w = uniform(&mut rng, n, 0.5, 1.5);
        let (xd, wd) = (q.upload(&x).unwrap(), q.upload(&w).unwrap());
        let yd = q.alloc::<f32>(rows * n).unwrap();
        k.rms_norm(&q, &xd, &wd, &yd, rows, n, eps).unwrap();
        let y = q.to_vec(&yd).unwrap();
        check_nmse(
            &format!("rms_norm rows {rows} n {n}"),
            &y,
            &norm::reference(&x, &w, n, eps),
            1e-7,
        );
        // in place gives the same bits
        k.rms_norm(&q, &xd, &wd, &xd, rows, n, eps).unwrap();
        assert_bitwise("rms_norm in place", &q.to_vec(&xd).unwrap(), &y);
        // every row alone gives the same bits as the multi-row call
        for r in 0..rows {
            let xr = q.upload(&x[r * n..(r + 1) * n]).unwrap();
            let yr = q.alloc::<f32>(n).unwrap();
            k.rms_norm(&q, &xr, &wd, &yr, 1, n, eps).unwrap();
            assert_bitwise(
                "rms_norm one row",
                &q.to_vec(&yr).unwrap(),
                &y[r * n..(r + 1) * n],
            );
        }
    }
}

#[test]
fn fused_residual_norms_match_reference() {
    let (ctx, q) = setup();
    let k = Norm::new(&ctx).unwrap();
    let mut rng = rng("fused_norms");
    for (rows, n, eps) in [
        (1, 576, 1e-5f32),
        (6, 576, 1e-5),
        (4, 640, 1e-6),
        (3, 40, 1e-6),
    ] {
        let res = uniform(&mut rng, rows * n, -5.0, 5.0);
        let a = uniform(&mut rng, rows * n, -2.0, 2.0);
        let w = uniform(&mut rng, n, 0.5, 1.5);
        let (ad, wd) = (q.upload(&a).unwrap(), q.upload(&w).unwrap());

        let resd = q.upload(&res).unwrap();
        let yd = q.alloc::<f32>(rows * n).unwrap();
        k.add_rms_norm(&q, &resd, &ad, &wd, &yd, rows, n, eps)
            .unwrap();
        let (want_res, want_y) = norm::reference_add_norm(&res, &a, &w, n, eps);
        let label = format!("add_rms_norm rows {rows} n {n}");
        check_nmse(
            &format!("{label} (residual)"),
            &q.to_vec(&resd).unwrap(),
            &want_res,
            1e-7,
        );
        check_nmse(
            &format!("{label} (normed)"),
            &q.to_vec(&yd).unwrap(),
            &want_y,
            1e-7,
        );

        let resd = q.upload(&res).unwrap();
        k.rms_norm_add(&q, &ad, &wd, &resd, rows, n, eps).unwrap();
        let got = q.to_vec(&resd).unwrap();
        let want = norm::reference_norm_add(&a, &w, &res, n, eps);
        check_nmse(
            &format!("rms_norm_add rows {rows} n {n}"),
            &got,
            &want,
            1e-7,
        );
    }
}

#[test]
fn short_buffers_are_errors() {
    let (ctx, q) = setup();
    let k = Norm::new(&ctx).unwrap();
    let x = q.alloc::<f32>(100).unwrap();
    let w = q.alloc::<f32>(64).unwrap();
    let e = k
        .rms_norm(&q, &x, &w, &x, 2, 64, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x holds 100 elements, the launch needs 128"),
        "{e}"
    );
}
