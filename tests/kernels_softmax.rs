//! Softmax parity on vocabulary-sized rows, and multi-row bitwise checks.
mod kernels_common;
use kernels_common::*;
use strata::kernels::softmax::{self, Softmax};

#[test]
fn softmax_matches_reference() {
    let (ctx, q) = setup();
    let k = Softmax::new(&ctx).unwrap();
    let mut rng = rng("softmax");
    // (rows, n, scale): SmolLM2 / Gemma vocabularies, a temperature, small and odd widths
    for (rows, n, scale) in [
        (3, 49152, 1.0f32),
        (1, 262144, 1.0 / 0.7),
        (5, 1000, 2.0),
        (2, 7, 1.0),
    ] {
        let x = uniform(&mut rng, rows * n, -15.0, 15.0);
        let xd = q.upload(&x).unwrap();
        let yd = q.alloc::<f32>(rows * n).unwrap();
        k.run(&q, &xd, &yd, rows, n, scale).unwrap();
        let y = q.to_vec(&yd).unwrap();
        check_nmse(
            &format!("softmax rows {rows} n {n} scale {scale}"),
            &y,
            &softmax::reference(&x, n, scale),
            1e-7,
        );
        for r in 0..rows {
            let xr = q.upload(&x[r * n..(r + 1) * n]).unwrap();
            k.run(&q, &xr, &xr, 1, n, scale).unwrap();
            assert_bitwise(
                "softmax one row, in place",
                &q.to_vec(&xr).unwrap(),
                &y[r * n..(r + 1) * n],
            );
        }
    }
}
