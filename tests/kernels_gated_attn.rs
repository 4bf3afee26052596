//! qwen4exp's full-attention pieces: the q projection split into q and gate (exact), the output
//! gate att * sigmoid(gate) (within a few ulps of the f64 reference), and RoPE on an IMROPE
//! text-position table (identity pairs untouched, the rest as the NEOX reference). Each check is
//! also run on a wrong input, which it must reject.
mod kernels_common;
use kernels_common::*;
use strata::kernels::gated_attn::{self, GatedAttnKernels};
use strata::kernels::rope::{self, imrope_freqs, Rope, RopeMode, RopeTable};

/// The f32 spacing at |x|; below the normal range the smallest normal: a result there may be
/// flushed to 0 (and ggml's own expf overflows to a 0 sigmoid for x < -88.7 too).
fn ulp(x: f64) -> f64 {
    let a = x.abs() as f32;
    if a < f32::MIN_POSITIVE {
        return f32::MIN_POSITIVE as f64;
    }
    (f32::from_bits(a.to_bits() + 1) - a) as f64
}

/// max |got - want| in ulps of the reference value, or the first element past `limit`.
fn check_ulps(got: &[f32], want: &[f64], limit: f64) -> Result<f64, String> {
    let mut worst = 0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let e = (g as f64 - w).abs() / ulp(w);
        if e.is_nan() || e > limit {
            return Err(format!("element {i}: {g} vs {w} ({e:.2} ulp)"));
        }
        worst = worst.max(e);
    }
    Ok(worst)
}

#[test]
fn split_q_gate_is_exact() {
    let (ctx, q) = setup();
    let k = GatedAttnKernels::new(&ctx).unwrap();
    let mut rng = rng("split_q_gate");
    // (n_head, head_dim): qwen4exp-like 16 x 256, a small 2 x 64, an odd 3 x 100
    for t in [1, 4, 8, 33] {
        for (nh, hd) in [(16, 256), (2, 64), (3, 100)] {
            let n = t * nh * hd;
            let qg = uniform(&mut rng, 2 * n, -3.0, 3.0);
            let qgd = q.upload(&qg).unwrap();
            let (qd, gd) = (q.alloc::<f32>(n).unwrap(), q.alloc::<f32>(n).unwrap());
            k.split_q_gate(&q, &qgd, &qd, &gd, t, nh, hd).unwrap();
            let (wq, wg) = gated_attn::reference_split(&qg, hd);
            let (gq, gg) = (q.to_vec(&qd).unwrap(), q.to_vec(&gd).unwrap());
            let label = format!("split t {t} n_head {nh} head_dim {hd}");
            assert_bitwise(&format!("{label} q"), &gq, &wq);
            assert_bitwise(&format!("{label} gate"), &gg, &wg);
            println!("{label}: q and gate exact");
            // power: read as [all q | all gate] (the wrong layout) the reference differs
            if nh > 1 {
                let wrong = gated_attn::reference_split(&qg, n / t).0;
                assert!(gq
                    .iter()
                    .zip(&wrong)
                    .any(|(a, b)| a.to_bits() != b.to_bits()));
            }
        }
    }
    // short buffers are errors
    let small = q.alloc::<f32>(8).unwrap();
    let (a, b) = (q.alloc::<f32>(8).unwrap(), q.alloc::<f32>(8).unwrap());
    let err = k
        .split_q_gate(&q, &small, &a, &b, 1, 2, 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("input holds 8"), "{err}");
}

#[test]
fn sigmoid_mul_within_ulps() {
    let (ctx, q) = setup();
    let k = GatedAttnKernels::new(&ctx).unwrap();
    let mut rng = rng("sigmoid_mul");
    let limit = 4.0;
    let mut overall = 0f64;
    for t in [1, 4, 8, 33] {
        let n = t * 16 * 256 + 7; // + a tail past the work-group size
        let att = uniform(&mut rng, n, -3.0, 3.0);
        let mut gate = uniform(&mut rng, n, -20.0, 20.0);
        // saturation: e^-x overflows (x < -88.7) or vanishes
        gate[..6].copy_from_slice(&[0.0, -88.0, -100.0, 88.0, 100.0, -16.5]);
        let (ad, gd) = (q.upload(&att).unwrap(), q.upload(&gate).unwrap());
        k.sigmoid_mul(&q, &ad, &gd, n).unwrap();
        let got = q.to_vec(&ad).unwrap();
        let want = gated_attn::reference_sigmoid_mul(&att, &gate);
        let e = check_ulps(&got, &want, limit).unwrap_or_else(|e| panic!("sigmoid_mul t {t}: {e}"));
        println!("sigmoid_mul n {n}: max {e:.2} ulp (bound {limit})");
        overall = overall.max(e);
        // power: one gate 1e-4 off in the reference's input breaks the bound
        // (where the sigmoid is not flat: |gate| < 2)
        let mut bad = gate.clone();
        let i = (n / 2..n).find(|&i| gate[i].abs() < 2.0).unwrap_or(0); // gate[0] = 0
        bad[i] += 1e-4;
        let wrong = gated_attn::reference_sigmoid_mul(&att, &bad);
        assert!(
            check_ulps(&got, &wrong, limit).is_err(),
            "t {t}: a wrong gate passed"
        );
    }
    println!("sigmoid_mul overall: {overall:.2} ulp");
}

#[test]
fn imrope_table_on_the_neox_kernel() {
    let (ctx, q) = setup();
    let rope_k = Rope::new(&ctx).unwrap();
    let mut rng = rng("imrope");
    // qwen4exp's sections over 64 rotated dims: the plain NEOX table, bit for bit
    let real = RopeTable::with_sections(&q, 1e7, 64, [11, 11, 10, 0]).unwrap();
    let plain = RopeTable::new(&q, 1e7, 64).unwrap();
    assert_bitwise(
        "imrope [11, 11, 10, 0]",
        &q.to_vec(real.freq()).unwrap(),
        &q.to_vec(plain.freq()).unwrap(),
    );
    assert_eq!(real.sections(), Some([11, 11, 10, 0]));
    assert_eq!(plain.sections(), None);
    // sections with identity pairs (sectors 5-7 of 8), partial rotary (32 of 64 dims)
    let sections = [2, 2, 1, 3];
    let table = RopeTable::with_sections(&q, 1e4, 32, sections).unwrap();
    let freq = imrope_freqs(1e4, 32, sections);
    let (t, nh, hd) = (33, 4, 64);
    let x = uniform(&mut rng, t * nh * hd, -2.0, 2.0);
    let pos: Vec<i32> = (0..t as i32).map(|i| i * 97 + 3).collect();
    let (xd, pd) = (q.upload(&x).unwrap(), q.upload(&pos).unwrap());
    rope_k
        .run(&q, RopeMode::Neox, &xd, &pd, &table, t, nh, hd)
        .unwrap();
    let got = q.to_vec(&xd).unwrap();
    check_nmse(
        "imrope [2, 2, 1, 3] n_rot 32 head_dim 64",
        &got,
        &rope::reference(RopeMode::Neox, &x, &pos, &freq, nh, hd),
        1e-10,
    );
    // the identity pairs (i, i + 16) and the dims past n_rot come through bit for bit
    let mut untouched = 0;
    for r in 0..t * nh {
        for d in 0..hd {
            let pair = d % 16;
            if d >= 32 || freq[pair] == 0.0 {
                let i = r * hd + d;
                assert_eq!(got[i].to_bits(), x[i].to_bits(), "row {r} dim {d}");
                untouched += 1;
            }
        }
    }
    println!("imrope: {untouched} elements passed through unchanged");
    // power: the plain table would have turned those pairs
    let plain = rope::reference(RopeMode::Neox, &x, &pos, &rope::rope_freqs(1e4, 32), nh, hd);
    assert!(nmse(&got, &plain) > 1e-6);
    // all-zero sections are refused (ggml asserts one of the first three is positive)
    assert!(RopeTable::with_sections(&q, 1e4, 32, [0, 0, 0, 4]).is_err());
}
