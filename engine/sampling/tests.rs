use super::*;

/// Logits whose softmax is exactly (1/2, 1/4, 1/8, 1/16, 1/16).
fn halves() -> Vec<f32> {
    [0.5f64, 0.25, 0.125, 0.0625, 0.0625]
        .iter()
        .map(|p| p.ln() as f32)
        .collect()
}

fn params() -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        seed: 1,
    }
}

fn probs_with(p: SamplingParams, logits: &[f32]) -> Vec<f32> {
    Sampler::new(p).unwrap().probs(logits).unwrap()
}

fn assert_close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (*g as f64 - w).abs() < 1e-6,
            "index {i}: got {g}, want {w} (all: {got:?})"
        );
    }
}

#[test]
fn unfiltered_probs_are_the_softmax() {
    assert_close(
        &probs_with(params(), &halves()),
        &[0.5, 0.25, 0.125, 0.0625, 0.0625],
    );
}

#[test]
fn top_k_keeps_k_and_renormalises() {
    let p = SamplingParams {
        top_k: 2,
        ..params()
    };
    assert_close(
        &probs_with(p, &halves()),
        &[2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0, 0.0],
    );
}

#[test]
fn top_k_breaks_ties_by_lower_id() {
    // Tokens 3 and 4 tie; k = 4 keeps 3.
    let p = SamplingParams {
        top_k: 4,
        ..params()
    };
    assert_close(
        &probs_with(p, &halves()),
        &[
            0.5 / 0.9375,
            0.25 / 0.9375,
            0.125 / 0.9375,
            0.0625 / 0.9375,
            0.0,
        ],
    );
}

#[test]
fn top_p_keeps_smallest_prefix_reaching_p() {
    let p = SamplingParams {
        top_p: 0.7,
        ..params()
    };
    assert_close(
        &probs_with(p, &halves()),
        &[2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0, 0.0],
    );
    let p = SamplingParams {
        top_p: 0.4,
        ..params()
    };
    assert_close(&probs_with(p, &halves()), &[1.0, 0.0, 0.0, 0.0, 0.0]);
    let p = SamplingParams {
        top_p: 0.8,
        ..params()
    };
    assert_close(
        &probs_with(p, &halves()),
        &[4.0 / 7.0, 2.0 / 7.0, 1.0 / 7.0, 0.0, 0.0],
    );
}

#[test]
fn min_p_drops_tokens_below_fraction_of_max() {
    // Floor 0.2 * 0.5 = 0.1: keeps 1/2, 1/4, 1/8.
    let p = SamplingParams {
        min_p: 0.2,
        ..params()
    };
    assert_close(
        &probs_with(p, &halves()),
        &[4.0 / 7.0, 2.0 / 7.0, 1.0 / 7.0, 0.0, 0.0],
    );
}

#[test]
fn temperature_sharpens_and_flattens() {
    let p = SamplingParams {
        temperature: 0.5,
        ..params()
    };
    let sq = [0.25, 0.0625, 0.015625, 0.00390625, 0.00390625];
    let s: f64 = sq.iter().sum();
    let want: Vec<f64> = sq.iter().map(|x| x / s).collect();
    assert_close(&probs_with(p, &halves()), &want);
    let p = SamplingParams {
        temperature: 2.0,
        ..params()
    };
    let rt: Vec<f64> = [0.5f64, 0.25, 0.125, 0.0625, 0.0625]
        .iter()
        .map(|x| x.sqrt())
        .collect();
    let s: f64 = rt.iter().sum();
    let want: Vec<f64> = rt.iter().map(|x| x / s).collect();
    assert_close(&probs_with(p, &halves()), &want);
}

#[test]
fn repetition_penalty_divides_positive_multiplies_negative() {
    // Token 0's logit ln(1/2) < 0 becomes 2 ln(1/2) = ln(1/4).
    let mut s = Sampler::new(SamplingParams {
        repeat_penalty: 2.0,
        ..params()
    })
    .unwrap();
    s.accept(0);
    s.accept(0); // counted once
    assert_close(
        &s.probs(&halves()).unwrap(),
        &[
            0.25 / 0.75,
            0.25 / 0.75,
            0.125 / 0.75,
            0.0625 / 0.75,
            0.0625 / 0.75,
        ],
    );
    // Positive logits: 2.0 / 2 = 1.0 ties token 1.
    let mut s = Sampler::new(SamplingParams {
        repeat_penalty: 2.0,
        ..params()
    })
    .unwrap();
    s.accept(0);
    assert_close(&s.probs(&[2.0, 1.0]).unwrap(), &[0.5, 0.5]);
}

#[test]
fn repetition_penalty_looks_only_at_last_n() {
    let mut s = Sampler::new(SamplingParams {
        repeat_penalty: 2.0,
        repeat_last_n: 2,
        ..params()
    })
    .unwrap();
    s.accept(0);
    s.accept(1);
    s.accept(2); // token 0 left the window
    let want_unnorm = [0.5, 0.0625, 0.015625, 0.0625, 0.0625];
    let sum: f64 = want_unnorm.iter().sum();
    let want: Vec<f64> = want_unnorm.iter().map(|x| x / sum).collect();
    assert_close(&s.probs(&halves()).unwrap(), &want);
}

#[test]
fn greedy_is_argmax_after_penalty_with_lowest_id_on_ties() {
    let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(s.sample(&halves()).unwrap(), 0);
    assert_eq!(s.sample(&[1.0, 3.0, 3.0, -1.0]).unwrap(), 1);
    assert_close(
        &s.probs(&[1.0, 3.0, 3.0, -1.0]).unwrap(),
        &[0.0, 1.0, 0.0, 0.0],
    );
    let mut s = Sampler::new(SamplingParams {
        repeat_penalty: 3.0,
        ..SamplingParams::greedy()
    })
    .unwrap();
    s.accept(1);
    assert_eq!(s.sample(&[1.0, 2.0, 0.5]).unwrap(), 0);
}

#[test]
fn non_finite_logits_are_an_error_naming_the_index() {
    let mut s = Sampler::new(params()).unwrap();
    let mut l = halves();
    l[3] = f32::NAN;
    match s.sample(&l) {
        Err(SampleError::NonFinite { index: 3, value }) => assert!(value.is_nan()),
        other => panic!("expected NonFinite at 3, got {other:?}"),
    }
    l[3] = 0.0;
    l[1] = f32::NEG_INFINITY;
    assert!(matches!(
        s.probs(&l),
        Err(SampleError::NonFinite { index: 1, .. })
    ));
    let msg = s.sample(&[f32::INFINITY]).unwrap_err().to_string();
    assert!(msg.contains("token index 0"), "{msg}");
    let mut g = Sampler::new(SamplingParams::greedy()).unwrap();
    assert!(g.sample(&[0.0, f32::NAN]).is_err());
}

#[test]
fn bad_params_are_rejected() {
    assert!(Sampler::new(SamplingParams {
        top_p: 0.0,
        ..params()
    })
    .is_err());
    assert!(Sampler::new(SamplingParams {
        min_p: 1.5,
        ..params()
    })
    .is_err());
    assert!(Sampler::new(SamplingParams {
        repeat_penalty: 0.0,
        ..params()
    })
    .is_err());
    assert!(Sampler::new(SamplingParams {
        temperature: f32::NAN,
        ..params()
    })
    .is_err());
}

#[test]
fn every_float_out_of_range_is_named_with_its_range() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    type Setter = fn(&mut SamplingParams, f32);
    let cases: [(Setter, f32, &str); 14] = [
        (
            |p, v| p.temperature = v,
            -1.0,
            "temperature = -1: must be in [0, 100]",
        ),
        (
            |p, v| p.temperature = v,
            1e30,
            "temperature = 1e30: must be in [0, 100]",
        ),
        (|p, v| p.temperature = v, nan, "temperature = NaN"),
        (|p, v| p.temperature = v, inf, "temperature = inf"),
        (|p, v| p.top_p = v, -0.5, "top_p = -0.5: must be in (0, 1]"),
        (|p, v| p.top_p = v, 1.5, "top_p = 1.5"),
        (|p, v| p.top_p = v, nan, "top_p = NaN"),
        (|p, v| p.min_p = v, 2.0, "min_p = 2: must be in [0, 1]"),
        (|p, v| p.min_p = v, -inf, "min_p = -inf"),
        (|p, v| p.min_p = v, nan, "min_p = NaN"),
        (
            |p, v| p.repeat_penalty = v,
            0.0,
            "repeat_penalty = 0: must be in (0, 10]",
        ),
        (|p, v| p.repeat_penalty = v, -1.0, "repeat_penalty = -1"),
        (|p, v| p.repeat_penalty = v, 1e30, "repeat_penalty = 1e30"),
        (|p, v| p.repeat_penalty = v, nan, "repeat_penalty = NaN"),
    ];
    for (set, v, want) in cases {
        let mut p = params();
        set(&mut p, v);
        let msg = p.validate().expect_err(want).to_string();
        assert!(msg.contains(want), "{msg} lacks {want}");
    }
    // the edges of each range are accepted
    for (t, top_p, min_p, rp) in [(0.0, 1.0, 0.0, 10.0), (100.0, 1e-6, 1.0, 1e-6)] {
        let p = SamplingParams {
            temperature: t,
            top_p,
            min_p,
            repeat_penalty: rp,
            ..params()
        };
        assert_eq!(p.validate(), Ok(()), "{p:?}");
    }
}

#[test]
fn a_seed_reproduces_the_draws_and_draws_follow_probs() {
    let l = halves();
    let draw = |seed| {
        let mut s = Sampler::new(SamplingParams { seed, ..params() }).unwrap();
        (0..20_000)
            .map(|_| s.sample(&l).unwrap())
            .collect::<Vec<u32>>()
    };
    let a = draw(5);
    assert_eq!(a, draw(5));
    assert_ne!(a, draw(6));
    let want = [0.5, 0.25, 0.125, 0.0625, 0.0625];
    for (t, w) in want.iter().enumerate() {
        let f = a.iter().filter(|&&x| x as usize == t).count() as f64 / a.len() as f64;
        // 20k draws: sd <= 0.0036, so 0.015 is > 4 sd.
        assert!((f - w).abs() < 0.015, "token {t}: frequency {f}, want {w}");
    }
}

#[test]
fn filtered_tokens_are_never_drawn() {
    let mut s = Sampler::new(SamplingParams {
        top_k: 2,
        seed: 9,
        ..params()
    })
    .unwrap();
    for _ in 0..2000 {
        assert!(s.sample(&halves()).unwrap() < 2);
    }
}

#[test]
fn ranked_top_k_is_the_full_sort_truncated() {
    // many ties (logits from a handful of values) so the id tie-break decides often
    let mut rng = SplitMix64::new(7);
    for n in [1usize, 2, 5, 100, 4097] {
        let logits: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 7) as f32 - 3.0).collect();
        let mut full: Vec<usize> = (0..n).collect();
        full.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        for k in [0usize, 1, 2, 3, 40, n - 1, n, n + 5] {
            let want = if k > 0 && k < n {
                &full[..k]
            } else {
                &full[..]
            };
            assert_eq!(ranked(&logits, k), want, "n {n} top_k {k}");
        }
    }
}
