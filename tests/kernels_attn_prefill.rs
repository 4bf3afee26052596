//! Parity of the prompt-path attention kernel (T > 8 rows, tiles of 16 query rows) against the
//! f64 reference over the same f16 cache: both models' head shapes, full causal and Gemma's
//! 512-key sliding window, tiles that straddle the window edge, ragged T (not a multiple of 16),
//! non-consecutive positions, an invalid position (NaN row, others unaffected), and agreement
//! of `AttnDispatch` with the decode kernel for t <= 8.
mod kernels_common;
use half::f16;
use kernels_common::attn::AttnCase;
use kernels_common::*;
use strata::kernels::attn::Attention;
use strata::kernels::attn_prefill::AttnPrefill;
use strata::sycl::{DeviceBuffer, Queue};

const CASES: &[AttnCase] = &[
    AttnCase {
        name: "SmolLM2",
        n_head: 9,
        n_kv: 3,
        hd: 64,
        n_ctx: 2048,
        window: 0,
    },
    AttnCase {
        name: "Gemma local",
        n_head: 4,
        n_kv: 1,
        hd: 256,
        n_ctx: 2048,
        window: 512,
    },
    AttnCase {
        name: "Gemma global",
        n_head: 4,
        n_kv: 1,
        hd: 256,
        n_ctx: 2048,
        window: 0,
    },
];

fn run_prefill(
    q: &Queue,
    k: &AttnPrefill,
    c: &AttnCase,
    qrows: &[f32],
    kc: &DeviceBuffer<f16>,
    vc: &DeviceBuffer<f16>,
    pos: &[i32],
) -> Vec<f32> {
    c.run_rows(q, qrows, kc, vc, pos, |a| k.run(q, a))
}

#[test]
fn prefill_attention_matches_reference() {
    let (ctx, q) = setup();
    let mut rng = rng("prefill_attention");
    for c in CASES {
        let k = AttnPrefill::new(&ctx, c.hd).unwrap();
        let (kh, vh) = (c.cache(&mut rng), c.cache(&mut rng));
        let (kc, vc) = (q.upload(&kh).unwrap(), q.upload(&vh).unwrap());
        // (first position, T): a prompt from 0, ragged T, a chunk straddling the window edge,
        // a later chunk of a long prompt
        for (p0, t) in [(0, 256), (0, 9), (100, 37), (490, 45), (1500, 300)] {
            let pos: Vec<i32> = (p0..p0 + t as i32).collect();
            let qrows = uniform(&mut rng, t * c.n_head * c.hd, -4.0, 4.0);
            let got = run_prefill(&q, &k, c, &qrows, &kc, &vc, &pos);
            let want = c.reference(&qrows, &kh, &vh, &pos);
            check_nmse(
                &format!("prefill attention {} T {t} pos {p0}..", c.name),
                &got,
                &want,
                1e-7,
            );
        }
        // positions in no particular order with gaps (the kernel must not assume a run)
        let pos: Vec<i32> = (0..20).map(|i: i32| i * 97 % 1800).collect();
        let qrows = uniform(&mut rng, pos.len() * c.n_head * c.hd, -4.0, 4.0);
        let got = run_prefill(&q, &k, c, &qrows, &kc, &vc, &pos);
        let want = c.reference(&qrows, &kh, &vh, &pos);
        check_nmse(
            &format!("prefill attention {} scattered positions", c.name),
            &got,
            &want,
            1e-7,
        );
    }
}

#[test]
fn prefill_attention_invalid_position_is_nan_only_there() {
    let (ctx, q) = setup();
    let mut rng = rng("prefill_invalid_pos");
    let c = &CASES[0];
    let k = AttnPrefill::new(&ctx, c.hd).unwrap();
    let (kh, vh) = (c.cache(&mut rng), c.cache(&mut rng));
    let (kc, vc) = (q.upload(&kh).unwrap(), q.upload(&vh).unwrap());
    let mut pos: Vec<i32> = (50..70).collect();
    pos[5] = c.n_ctx as i32; // out of the cache
    let row = c.n_head * c.hd;
    let qrows = uniform(&mut rng, pos.len() * row, -4.0, 4.0);
    let got = run_prefill(&q, &k, c, &qrows, &kc, &vc, &pos);
    assert!(got[5 * row..6 * row].iter().all(|v| v.is_nan()));
    let mut good_pos = pos.clone();
    good_pos.remove(5);
    let mut good_q = qrows.clone();
    good_q.drain(5 * row..6 * row);
    let mut good_got = got.clone();
    good_got.drain(5 * row..6 * row);
    let want = c.reference(&good_q, &kh, &vh, &good_pos);
    check_nmse(
        "prefill attention, other rows of a tile with a bad position",
        &good_got,
        &want,
        1e-7,
    );
}

#[test]
fn prefill_agrees_with_decode_kernel() {
    let (ctx, q) = setup();
    let mut rng = rng("prefill_vs_decode");
    for c in CASES {
        let pk = AttnPrefill::new(&ctx, c.hd).unwrap();
        let dk = Attention::new(&ctx, c.hd).unwrap();
        let (kc, vc) = (
            q.upload(&c.cache(&mut rng)).unwrap(),
            q.upload(&c.cache(&mut rng)).unwrap(),
        );
        let t = 40;
        let pos: Vec<i32> = (700..700 + t as i32).collect();
        let qrows = uniform(&mut rng, t * c.n_head * c.hd, -4.0, 4.0);
        let got = run_prefill(&q, &pk, c, &qrows, &kc, &vc, &pos);
        let (qd, pd) = (q.upload(&qrows).unwrap(), q.upload(&pos).unwrap());
        let out = q.alloc::<f32>(t * c.n_head * c.hd).unwrap();
        dk.run(&q, &c.call(&qd, &kc, &vc, &pd, &out, t)).unwrap();
        let dec: Vec<f64> = q.to_vec(&out).unwrap().iter().map(|&v| v as f64).collect();
        check_nmse(
            &format!("prefill vs decode kernel {}", c.name),
            &got,
            &dec,
            1e-10,
        );
    }
}
