//! MoE kernel parity (qwen4exp's MoE FFN): routing (softmax, top-k, renormalised weights) against
//! the f64 reference, the host grouping, the grouped-row gather (exact), and the recombination
//! (bitwise llama.cpp's f32 order without the shared expert; within a bound relative to
//! sum |w x| with it). Each check is also run on a corrupted result, which it must reject.
mod kernels_common;
use kernels_common::*;
use rand::rngs::StdRng;
use strata::kernels::moe::{
    self, group_by_expert, MoeKernels, RouteRef, SharedExpert, WEIGHT_SUM_MIN,
};
use strata::sycl::Queue;

const U: f64 = 1.0 / (1u64 << 24) as f64; // f32 unit roundoff

/// Route results checked against the reference: ids equal (a difference only between near-tied
/// probabilities), probabilities and weights within `rel`. Returns (max prob rel, max weight
/// rel, near ties) or what failed.
fn check_route(
    got_ids: &[i32],
    got_w: &[f32],
    got_p: &[f32],
    r: &RouteRef,
    n_expert: usize,
    k: usize,
    rel: f64,
) -> Result<(f64, f64, usize), String> {
    let (mut pmax, mut wmax, mut ties) = (0f64, 0f64, 0);
    for (i, (&g, &w)) in got_p.iter().zip(&r.probs).enumerate() {
        let e = (g as f64 - w).abs() / w;
        if e.is_nan() || e > rel {
            return Err(format!("prob {i}: {g} vs {w} (rel {e:.2e})"));
        }
        pmax = pmax.max(e);
    }
    for tok in 0..got_ids.len() / k {
        let p = &r.probs[tok * n_expert..(tok + 1) * n_expert];
        let ids = &got_ids[tok * k..(tok + 1) * k];
        let want = &r.ids[tok * k..(tok + 1) * k];
        for j in 0..k {
            let (g, w) = (ids[j], want[j]);
            if g < 0 || g as usize >= n_expert || ids[..j].contains(&g) {
                return Err(format!(
                    "token {tok} slot {j}: id {g} out of range or repeated"
                ));
            }
            if g != w {
                // a different pick is fine only between probabilities the f32 error can swap
                let (pg, pw) = (p[g as usize], p[w as usize]);
                if (pg - pw).abs() > 2.0 * rel * pw {
                    return Err(format!(
                        "token {tok} slot {j}: id {g} (p {pg:.9}) vs {w} (p {pw:.9})"
                    ));
                }
                ties += 1;
            }
        }
        // the weights the reference gives the ids picked
        let sum = ids
            .iter()
            .map(|&i| p[i as usize])
            .sum::<f64>()
            .max(WEIGHT_SUM_MIN as f64);
        for j in 0..k {
            let want = p[ids[j] as usize] / sum;
            let got = got_w[tok * k + j] as f64;
            let e = (got - want).abs() / want;
            if e.is_nan() || e > rel {
                return Err(format!(
                    "token {tok} slot {j}: weight {got} vs {want} (rel {e:.2e})"
                ));
            }
            wmax = wmax.max(e);
        }
    }
    Ok((pmax, wmax, ties))
}

/// llama.cpp's combine without the shared expert in f32, operation for operation (ggml_mul per
/// slot, ggml_add in slot order): what the kernel must equal bit for bit.
fn combine_f32(e_out: &[f32], map: &[i32], w: &[f32], n: usize, k: usize) -> Vec<f32> {
    let t = map.len() / k;
    let mut y = vec![0f32; t * n];
    for tok in 0..t {
        for c in 0..n {
            let mut acc = 0f32;
            for j in 0..k {
                let p = e_out[map[tok * k + j] as usize * n + c] * w[tok * k + j];
                acc = if j == 0 { p } else { acc + p };
            }
            y[tok * n + c] = acc;
        }
    }
    y
}

/// max |got - want| / (sum |w x|) in units of U, or what failed the bound `limit` (in U).
fn check_combine(got: &[f32], want: &[f64], mag: &[f64], limit: f64) -> Result<f64, String> {
    let mut worst = 0f64;
    for (i, ((&g, &w), &m)) in got.iter().zip(want).zip(mag).enumerate() {
        let e = (g as f64 - w).abs() / (m * U).max(f64::MIN_POSITIVE);
        if e.is_nan() || e > limit {
            return Err(format!(
                "element {i}: {g} vs {w} ({e:.1} U of sum |w x| {m:.3e})"
            ));
        }
        worst = worst.max(e);
    }
    Ok(worst)
}

struct Routed {
    probs: Vec<f32>,
    ids: Vec<i32>,
    w: Vec<f32>,
}

fn route(k_moe: &MoeKernels, q: &Queue, logits: &[f32], t: usize, ne: usize, k: usize) -> Routed {
    let ld = q.upload(logits).unwrap();
    let ids = q.alloc::<i32>(t * k).unwrap();
    let w = q.alloc::<f32>(t * k).unwrap();
    // in place: the probabilities replace the logits
    k_moe.route(q, &ld, &ld, &ids, &w, t, ne, k, 0.0).unwrap();
    Routed {
        probs: q.to_vec(&ld).unwrap(),
        ids: q.to_vec(&ids).unwrap(),
        w: q.to_vec(&w).unwrap(),
    }
}

fn cases() -> Vec<(usize, usize, usize, usize)> {
    // (t, n_expert, k, n): the brief's grid, rotated over the widths, + qwen4exp's 512 / 10
    let mut v = Vec::new();
    let widths = [64, 256, 2560];
    let mut wi = 0;
    for t in [1, 4, 8, 33] {
        for (ne, k) in [(8, 1), (8, 2), (8, 8), (64, 1), (64, 2), (64, 8), (512, 10)] {
            v.push((t, ne, k, widths[wi % 3]));
            wi += 1;
        }
    }
    v
}

fn logits(rng: &mut StdRng, t: usize, ne: usize) -> Vec<f32> {
    uniform(rng, t * ne, -4.0, 4.0)
}

#[test]
fn route_matches_reference() {
    let (ctx, q) = setup();
    let km = MoeKernels::new(&ctx).unwrap();
    let mut rng = rng("moe_route");
    let rel = 1e-6; // measured up to ~2e-7 over logits in [-4, 4]
    let (mut pw, mut ww, mut tw) = (0f64, 0f64, 0);
    for (t, ne, k, _) in cases() {
        let l = logits(&mut rng, t, ne);
        let got = route(&km, &q, &l, t, ne, k);
        let r = moe::reference_route(&l, ne, k, 0.0);
        let label = format!("route t {t} n_expert {ne} k {k}");
        let (p, w, ties) = check_route(&got.ids, &got.w, &got.probs, &r, ne, k, rel)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        println!("{label}: probs max rel {p:.2e}, weights max rel {w:.2e}, near ties {ties}");
        (pw, ww, tw) = (pw.max(p), ww.max(w), tw + ties);

        // power: the check rejects a swapped selection order (first and last pick: the widest
        // gap) and a weight 1e-4 off
        if k >= 2 {
            let mut bad = got.ids.clone();
            bad.swap(0, k - 1);
            assert!(check_route(&bad, &got.w, &got.probs, &r, ne, k, rel).is_err());
        }
        let mut bad = got.w.clone();
        bad[t * k / 2] *= 1.0001;
        assert!(check_route(&got.ids, &bad, &got.probs, &r, ne, k, rel).is_err());

        // multi-token call = the one-token calls, bit for bit
        let last = route(&km, &q, &l[(t - 1) * ne..], 1, ne, k);
        assert_eq!(last.ids, got.ids[(t - 1) * k..]);
        assert_bitwise("route one token", &last.w, &got.w[(t - 1) * k..]);
    }
    println!("route overall: probs {pw:.2e}, weights {ww:.2e} (bound {rel:.0e}), near ties {tw}");

    // a separate probs buffer leaves the logits alone; w_scale multiplies the weights (not 1)
    let (t, ne, k) = (4, 64, 8);
    let l = logits(&mut rng, t, ne);
    let ld = q.upload(&l).unwrap();
    let pd = q.alloc::<f32>(t * ne).unwrap();
    let (ids, w) = (
        q.alloc::<i32>(t * k).unwrap(),
        q.alloc::<f32>(t * k).unwrap(),
    );
    km.route(&q, &ld, &pd, &ids, &w, t, ne, k, 2.5).unwrap();
    assert_bitwise("route logits kept", &q.to_vec(&ld).unwrap(), &l);
    let plain = route(&km, &q, &l, t, ne, k);
    assert_bitwise("route probs", &q.to_vec(&pd).unwrap(), &plain.probs);
    assert_eq!(q.to_vec(&ids).unwrap(), plain.ids);
    let want: Vec<f32> = plain.w.iter().map(|&v| v * 2.5).collect();
    assert_bitwise("route w_scale 2.5", &q.to_vec(&w).unwrap(), &want);
    let r = moe::reference_route(&l, ne, k, 2.5);
    let e = (0..t * k)
        .map(|i| (want[i] as f64 - r.weights[i]).abs() / r.weights[i])
        .fold(0f64, f64::max);
    assert!(e < rel, "scaled weights rel {e:.2e}");
}

#[test]
fn route_ties_and_nan() {
    let (ctx, q) = setup();
    let km = MoeKernels::new(&ctx).unwrap();
    // equal logits give equal probabilities: the lower id first (ggml's argsort on 8 experts)
    let l = [1.0f32, 3.0, 3.0, 0.0, 3.0, -1.0, 2.0, 2.0];
    let got = route(&km, &q, &l, 1, 8, 4);
    assert_eq!(got.ids, [1, 2, 4, 6]);
    assert_eq!(got.w[0].to_bits(), got.w[1].to_bits());
    assert_eq!(got.w[1].to_bits(), got.w[2].to_bits());
    // a uniform row of 64: the first k ids, weights exactly 1 / k
    let got = route(&km, &q, &[0.5f32; 64], 1, 64, 8);
    assert_eq!(got.ids, (0..8).collect::<Vec<i32>>());
    assert!(got.w.iter().all(|&w| w == 0.125), "{:?}", got.w);
    // a NaN logit poisons its token only: ids -1 there, the next token routed normally
    let mut l = vec![0.0f32; 16];
    l[3] = f32::NAN;
    l[8 + 5] = 1.0;
    let got = route(&km, &q, &l, 2, 8, 2);
    assert_eq!(got.ids, [-1, -1, 5, 0]);
    // ... which the host grouping refuses, naming the token
    let err = group_by_expert(&got.ids, 2, 2, 8).unwrap_err().to_string();
    assert!(err.contains("expert id -1 of token 0 slot 0"), "{err}");
    // the launcher's checks
    let ld = q.upload(&[0.0f32; 8]).unwrap();
    let (ids, w) = (q.alloc::<i32>(2).unwrap(), q.alloc::<f32>(2).unwrap());
    let err = km
        .route(&q, &ld, &ld, &ids, &w, 1, 8, 9, 0.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("k = 9"), "{err}");
    let err = km
        .route(&q, &ld, &ld, &ids, &w, 2, 8, 1, 0.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("route logits holds 8"), "{err}");
    let err = km
        .route(&q, &ld, &ld, &ids, &ld, 1, 8, 2, 0.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("must not share"), "{err}");
}

#[test]
fn grouping_orders_rows_by_expert_then_token() {
    // 3 tokens, k = 2: token 0 -> (2, 0), token 1 -> (0, 1), token 2 -> (2, 1)
    let g = group_by_expert(&[2, 0, 0, 1, 2, 1], 3, 2, 4).unwrap();
    assert_eq!(g.rows, [0, 1, 1, 2, 0, 2]); // expert 0: tokens 0, 1; 1: 1, 2; 2: 0, 2
    assert_eq!(g.offsets, [0, 2, 4, 6, 6]);
    assert_eq!(g.map, [4, 0, 1, 2, 5, 3]);
    // every (token, slot) pair maps to a row holding that token
    for (i, &r) in g.map.iter().enumerate() {
        assert_eq!(g.rows[r as usize], (i / 2) as i32);
    }
    assert!(group_by_expert(&[0, 4], 1, 2, 4).is_err());
    assert!(group_by_expert(&[0, 1, 2], 1, 2, 4).is_err());
}

#[test]
fn gather_and_combine_match_reference() {
    let (ctx, q) = setup();
    let km = MoeKernels::new(&ctx).unwrap();
    let mut rng = rng("moe_gather_combine");
    let (mut worst_gated, mut worst_plain) = (0f64, 0f64);
    for (t, ne, k, n) in cases() {
        let routed = route(&km, &q, &logits(&mut rng, t, ne), t, ne, k);
        let g = group_by_expert(&routed.ids, t, k, ne).unwrap();
        let (rows, map) = (g.rows, g.map);
        let label = format!("t {t} n_expert {ne} k {k} n {n}");

        // the tokens' rows in expert order: exact copies
        let x = uniform(&mut rng, t * n, -3.0, 3.0);
        let (xd, rd) = (q.upload(&x).unwrap(), q.upload(&rows).unwrap());
        let xg = q.alloc::<f32>(rows.len() * n).unwrap();
        km.gather_rows(&q, &xd, &rd, &xg, rows.len(), n, t).unwrap();
        assert_bitwise(
            &format!("gather {label}"),
            &q.to_vec(&xg).unwrap(),
            &moe::reference_gather(&x, &rows, n),
        );

        // stand-in expert outputs (the products are other kernels' business)
        let n_rows = t * k;
        let e_out = uniform(&mut rng, n_rows * n, -2.0, 2.0);
        let sh = uniform(&mut rng, t * n, -2.0, 2.0);
        let sg = uniform(&mut rng, t, -6.0, 6.0);
        let (ed, md, wd) = (
            q.upload(&e_out).unwrap(),
            q.upload(&map).unwrap(),
            q.upload(&routed.w).unwrap(),
        );
        let (shd, sgd) = (q.upload(&sh).unwrap(), q.upload(&sg).unwrap());
        let y = q.alloc::<f32>(t * n).unwrap();

        // without the shared expert: llama.cpp's f32 order, bit for bit
        km.combine(&q, &ed, &md, &wd, None, &y, t, k, n, n_rows)
            .unwrap();
        let plain = q.to_vec(&y).unwrap();
        let f32_order = combine_f32(&e_out, &map, &routed.w, n, k);
        assert_bitwise(&format!("combine {label}"), &plain, &f32_order);
        let (want, mag) = moe::reference_combine(&e_out, &map, &routed.w, None, n, k);
        let ep = check_combine(&plain, &want, &mag, k as f64 + 1.0)
            .unwrap_or_else(|e| panic!("combine {label}: {e}"));
        worst_plain = worst_plain.max(ep);

        // with the gated shared expert, into its own buffer (y may be sh)
        let shared = SharedExpert {
            out: &shd,
            gate: &sgd,
        };
        km.combine(&q, &ed, &md, &wd, Some(shared), &shd, t, k, n, n_rows)
            .unwrap();
        let got = q.to_vec(&shd).unwrap();
        let (want, mag) = moe::reference_combine(&e_out, &map, &routed.w, Some((&sh, &sg)), n, k);
        // k + 1 adds and products, the sigmoid (a few U of its own) scaling one term
        let limit = k as f64 + 8.0;
        let e = check_combine(&got, &want, &mag, limit)
            .unwrap_or_else(|e| panic!("combine shared {label}: {e}"));
        println!(
            "combine {label}: plain max {ep:.2} U (bound {} U), gated shared max {e:.2} U \
             (bound {limit} U) of sum |w x|",
            k + 1
        );
        worst_gated = worst_gated.max(e);

        // power: one weight 1e-3 off in the reference's input must break the bound
        let mut w_bad = routed.w.clone();
        w_bad[0] *= 1.001;
        let (bad, bmag) = moe::reference_combine(&e_out, &map, &w_bad, Some((&sh, &sg)), n, k);
        assert!(
            check_combine(&got, &bad, &bmag, limit).is_err(),
            "{label}: a wrong weight passed"
        );
    }
    println!("combine overall: plain {worst_plain:.2} U, gated shared {worst_gated:.2} U");
}

#[test]
fn gather_and_combine_reject_bad_input() {
    let (ctx, q) = setup();
    let km = MoeKernels::new(&ctx).unwrap();
    // rows outside the source give NaN rows, the valid one its copy
    let x = q.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap(); // (2, 2)
    let rows = q.upload(&[1i32, 2, -1]).unwrap();
    let out = q.alloc::<f32>(6).unwrap();
    km.gather_rows(&q, &x, &rows, &out, 3, 2, 2).unwrap();
    let got = q.to_vec(&out).unwrap();
    assert_eq!(&got[..2], &[3.0, 4.0]);
    assert!(got[2..].iter().all(|v| v.is_nan()), "{got:?}");
    // a map entry outside e_out: NaN
    let w = q.upload(&[0.5f32, 0.5]).unwrap();
    let map = q.upload(&[0i32, 7]).unwrap();
    let y = q.alloc::<f32>(2).unwrap();
    km.combine(&q, &x, &map, &w, None, &y, 1, 2, 2, 2).unwrap();
    assert!(q.to_vec(&y).unwrap().iter().all(|v| v.is_nan()));
    // short buffers and aliasing are errors, not launches
    let err = km
        .gather_rows(&q, &x, &rows, &out, 4, 2, 2)
        .unwrap_err()
        .to_string();
    assert!(err.contains("gather rows holds 3"), "{err}");
    let err = km
        .gather_rows(&q, &x, &rows, &out, 3, 2, 3)
        .unwrap_err()
        .to_string();
    assert!(err.contains("gather x holds 4"), "{err}");
    let err = km
        .combine(&q, &x, &map, &w, None, &y, 2, 1, 2, 2)
        .unwrap_err()
        .to_string();
    assert!(err.contains("combine y holds 2"), "{err}");
    let err = km
        .combine(&q, &x, &map, &w, None, &x, 1, 2, 2, 2)
        .unwrap_err()
        .to_string();
    assert!(err.contains("must not be e_out"), "{err}");
    let short = q.alloc::<f32>(1).unwrap();
    let shared = SharedExpert {
        out: &short,
        gate: &short,
    };
    let err = km
        .combine(&q, &x, &map, &w, Some(shared), &y, 1, 2, 2, 2)
        .unwrap_err()
        .to_string();
    assert!(err.contains("shared output holds 1"), "{err}");
}
