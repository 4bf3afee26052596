//! Element-wise parity: SiLU- and GELU-tanh-gated FFN activations, residual add, scale.
mod kernels_common;
use kernels_common::*;
use strata::kernels::act::{self, Elementwise};

#[test]
fn elementwise_matches_reference() {
    let (ctx, q) = setup();
    let k = Elementwise::new(&ctx).unwrap();
    let mut rng = rng("elementwise");
    // (T x n_ff): SmolLM2 1536, Gemma 2048, and an odd size for the tail
    for n in [1536, 8 * 1536, 5 * 2048, 1001] {
        let gate = uniform(&mut rng, n, -12.0, 12.0);
        let up = uniform(&mut rng, n, -3.0, 3.0);
        let (gd, ud) = (q.upload(&gate).unwrap(), q.upload(&up).unwrap());
        let out = q.alloc::<f32>(n).unwrap();
        k.silu_mul(&q, &gd, &ud, &out, n).unwrap();
        check_nmse(
            &format!("silu_mul n {n}"),
            &q.to_vec(&out).unwrap(),
            &act::reference_silu_mul(&gate, &up),
            1e-7,
        );
        k.gelu_mul(&q, &gd, &ud, &out, n).unwrap();
        check_nmse(
            &format!("gelu_mul n {n}"),
            &q.to_vec(&out).unwrap(),
            &act::reference_gelu_mul(&gate, &up),
            1e-7,
        );
        k.add(&q, &gd, &ud, &out, n).unwrap();
        check_nmse(
            &format!("add n {n}"),
            &q.to_vec(&out).unwrap(),
            &act::reference_add(&gate, &up),
            1e-7,
        );
        k.scale(&q, &gd, &gd, n, 25.298221).unwrap(); // in place
        check_nmse(
            &format!("scale n {n}"),
            &q.to_vec(&gd).unwrap(),
            &act::reference_scale(&gate, 25.298221),
            1e-7,
        );
    }
}
