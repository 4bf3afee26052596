//! Attention parity over the f16 KV cache (the reference reads the same f16 values), the sliding
//! window, long KV (positions 4000+ and the end of an 8192 context), and the bitwise guarantee:
//! a T-row call equals T one-row calls; and the output rounded for the next product inside the
//! combine launch is bitwise attention then `ActQ`.
mod kernels_common;
use half::f16;
use kernels_common::attn::AttnCase;
use kernels_common::*;
use strata::kernels::attn::{self, Attention, AttnCall};
use strata::kernels::XStage;
use strata::sycl::{DeviceBuffer, Queue};

fn run(
    q: &Queue,
    k: &Attention,
    c: &AttnCase,
    qrows: &[f32],
    kc: &DeviceBuffer<f16>,
    vc: &DeviceBuffer<f16>,
    pos: &[i32],
) -> Vec<f32> {
    c.run_rows(q, qrows, kc, vc, pos, |a| k.run(q, a))
}

const SMOL: AttnCase = AttnCase {
    name: "SmolLM2",
    n_head: 9,
    n_kv: 3,
    hd: 64,
    n_ctx: 8192,
    window: 0,
};
const GEMMA_LOCAL: AttnCase = AttnCase {
    name: "Gemma local",
    n_head: 4,
    n_kv: 1,
    hd: 256,
    n_ctx: 6000,
    window: 512,
};
const GEMMA_GLOBAL: AttnCase = AttnCase {
    name: "Gemma global",
    n_head: 4,
    n_kv: 1,
    hd: 256,
    n_ctx: 6000,
    window: 0,
};

#[test]
fn attention_matches_reference() {
    let (ctx, q) = setup();
    let mut rng = rng("attention");
    for (c, name, starts, t) in [
        (&SMOL, "SmolLM2", vec![0, 37, 4000, 8184], 8),
        (&GEMMA_LOCAL, "Gemma local", vec![0, 300, 509, 4990], 8),
        (&GEMMA_GLOBAL, "Gemma global", vec![5, 4990], 6),
        // one row (the decode step)
        (&SMOL, "SmolLM2", vec![0, 130, 8191], 1),
        (&GEMMA_LOCAL, "Gemma local", vec![4990], 1),
    ] {
        let k = Attention::new(&ctx, c.hd).unwrap();
        let (kh, vh) = (c.cache(&mut rng), c.cache(&mut rng));
        let (kc, vc) = (q.upload(&kh).unwrap(), q.upload(&vh).unwrap());
        for p0 in starts {
            let pos: Vec<i32> = (p0..p0 + t as i32).collect();
            // q in [-4, 4]: scores of several units, so the softmax is far from uniform
            let qrows = uniform(&mut rng, t * c.n_head * c.hd, -4.0, 4.0);
            let got = run(&q, &k, c, &qrows, &kc, &vc, &pos);
            let want = c.reference(&qrows, &kh, &vh, &pos);
            let label = format!(
                "attention {name} (heads {}/{}, hd {}, window {}) T {t} pos {p0}..{}",
                c.n_head,
                c.n_kv,
                c.hd,
                c.window,
                p0 + t as i32 - 1
            );
            check_nmse(&label, &got, &want, 1e-7);
        }
    }
}

#[test]
fn attention_rows_are_bitwise_one_row_calls() {
    let (ctx, q) = setup();
    let mut rng = rng("attention_bitwise");
    for (c, p0) in [
        (&SMOL, 4093),
        (&SMOL, 0),
        (&GEMMA_LOCAL, 700),
        (&GEMMA_GLOBAL, 2500),
    ] {
        let k = Attention::new(&ctx, c.hd).unwrap();
        let (kc, vc) = (
            q.upload(&c.cache(&mut rng)).unwrap(),
            q.upload(&c.cache(&mut rng)).unwrap(),
        );
        let t = 8;
        let row = c.n_head * c.hd;
        let qrows = uniform(&mut rng, t * row, -4.0, 4.0);
        let pos: Vec<i32> = (p0..p0 + t as i32).collect();
        let all = run(&q, &k, c, &qrows, &kc, &vc, &pos);
        for i in 0..t {
            let one = run(
                &q,
                &k,
                c,
                &qrows[i * row..(i + 1) * row],
                &kc,
                &vc,
                &pos[i..i + 1],
            );
            assert_bitwise(
                &format!("hd {} pos {}", c.hd, pos[i]),
                &one,
                &all[i * row..(i + 1) * row],
            );
        }
        // and any sub-window (T = 3 rows starting at row 2) too
        let mid = run(&q, &k, c, &qrows[2 * row..5 * row], &kc, &vc, &pos[2..5]);
        assert_bitwise("T = 3 window", &mid, &all[2 * row..5 * row]);
        println!(
            "attention hd {} window {} pos {p0}..: T = 8 rows == one-row calls, bitwise",
            c.hd, c.window
        );
    }
}

#[test]
fn sliding_window_masks_old_keys() {
    let (ctx, q) = setup();
    let mut rng = rng("sliding_window");
    let c = &GEMMA_LOCAL;
    let k = Attention::new(&ctx, c.hd).unwrap();
    let (mut kh, mut vh) = (c.cache(&mut rng), c.cache(&mut rng));
    let pos: Vec<i32> = (1000..1004).collect();
    let qrows = uniform(&mut rng, pos.len() * c.n_head * c.hd, -4.0, 4.0);
    let (kc, vc) = (q.upload(&kh).unwrap(), q.upload(&vh).unwrap());
    let before = run(&q, &k, c, &qrows, &kc, &vc, &pos);
    // the windowed result differs from full attention (masking matters in this case) ...
    let full = attn::reference(
        &qrows,
        &kh,
        &vh,
        &pos,
        c.n_head,
        c.n_kv,
        c.hd,
        c.n_ctx,
        0,
        c.scale(),
    );
    let e_full = nmse(&before, &full);
    println!("window 512 vs full attention at pos 1000: NMSE {e_full:.3e}");
    assert!(
        e_full > 1e-3,
        "the test must be one where the window changes the result"
    );
    // ... and keys outside every row's window (pos_q - pos_k >= 512: keys < 489) have no effect
    // at all, even huge ones
    let lo = 1000 + 1 - 512; // first key in the window of the first row (pos 1000)
    for j in 0..lo as usize {
        for d in 0..c.hd {
            kh[j * c.hd + d] = f16::from_f32(30.0);
            vh[j * c.hd + d] = f16::from_f32(-1000.0);
        }
    }
    let (kc2, vc2) = (q.upload(&kh).unwrap(), q.upload(&vh).unwrap());
    let after = run(&q, &k, c, &qrows, &kc2, &vc2, &pos);
    assert_bitwise("keys outside the window", &after, &before);
    let want = c.reference(&qrows, &kh, &vh, &pos);
    check_nmse(
        "sliding window after poisoning old keys",
        &after,
        &want,
        1e-7,
    );
    // key 489 is the oldest key of position 1000's window (1000 - 489 = 511) and just outside
    // the windows of positions 1001..1003
    for d in 0..c.hd {
        vh[489 * c.hd + d] = f16::from_f32(-1000.0);
    }
    let vc3 = q.upload(&vh).unwrap();
    let edge = run(&q, &k, c, &qrows, &kc2, &vc3, &pos);
    let row = c.n_head * c.hd;
    assert_ne!(
        edge[..row],
        after[..row],
        "key 489 is inside the window of position 1000"
    );
    assert_bitwise(
        "key 489 is outside the windows of positions 1001..1003",
        &edge[row..],
        &after[row..],
    );
}

#[test]
fn attention_argument_errors() {
    let (ctx, q) = setup();
    assert!(Attention::new(&ctx, 72).is_err());
    let k = Attention::new(&ctx, 64).unwrap();
    let qd = q.alloc::<f32>(9 * 64).unwrap();
    let kc = q.alloc::<f16>(3 * 16 * 64).unwrap();
    let pd = q.upload(&[0i32]).unwrap();
    let call = |n_kv_head, n_ctx| AttnCall {
        qrows: &qd,
        kc: &kc,
        vc: &kc,
        pos: &pd,
        out: &qd,
        t: 1,
        n_head: 9,
        n_kv_head,
        n_ctx,
        window: 0,
        scale: 0.125,
    };
    let e = k.run(&q, &call(4, 16)).unwrap_err().to_string();
    assert!(e.contains("not a multiple of n_kv_head"), "{e}");
    let e = k.run(&q, &call(3, 32)).unwrap_err().to_string();
    assert!(e.contains("k cache"), "{e}");
}

#[test]
fn rounded_output_is_bitwise_attention_then_actq() {
    use strata::kernels::actq::{ActQ, ActRound};
    let (ctx, q) = setup();
    let mut rng = rng("attention_rounded");
    let actq = ActQ::new(&ctx).unwrap();
    let mut cases = 0;
    for (c, mode, ts) in [
        (&SMOL, ActRound::Q8Block32, vec![1usize, 8]),
        (&GEMMA_LOCAL, ActRound::Q8Block256, vec![1, 2, 8]),
        (&GEMMA_GLOBAL, ActRound::Q8Block32, vec![1, 3]),
    ] {
        let k = Attention::new(&ctx, c.hd).unwrap();
        let (kc, vc) = (
            q.upload(&c.cache(&mut rng)).unwrap(),
            q.upload(&c.cache(&mut rng)).unwrap(),
        );
        let block = mode.block();
        // blocks of 256 need whole 256-element heads
        assert_eq!(k.can_round(1, c.n_head, 256), c.hd % 256 == 0);
        for t in ts {
            for p0 in [0i32, 700, 4000] {
                assert!(k.can_round(t, c.n_head, block), "hd {} t {t}", c.hd);
                let n = t * c.n_head * c.hd;
                let qrows = q.upload(&uniform(&mut rng, n, -4.0, 4.0)).unwrap();
                let pos = q.upload(&(p0..p0 + t as i32).collect::<Vec<_>>()).unwrap();
                let (plain, rounded, want) = (
                    q.alloc::<f32>(n).unwrap(),
                    q.alloc::<f32>(n).unwrap(),
                    q.alloc::<f32>(n).unwrap(),
                );
                k.run(&q, &c.call(&qrows, &kc, &vc, &pos, &plain, t))
                    .unwrap();
                // the output also staged for Wo (xstage.rs; blocks of 256: the integer
                // records): bitwise act_q8_32's / act_q8_256's
                let nan = vec![f32::NAN; XStage::floats(n)];
                let (sa, sw) = (q.upload(&nan).unwrap(), q.upload(&nan).unwrap());
                // blocks of 32 with the integer records (STRATA_VNNI=1) at one position, without
                // (the default path: left unwritten) at the others
                let records = p0 == 700;
                let stage = |b| match block {
                    32 if records => XStage::with_records(b, n).unwrap(),
                    32 => XStage::new(b, n).unwrap(),
                    _ => XStage::new_k(b, n).unwrap(),
                };
                let st = (block != 0).then(|| stage(&sa));
                if block != 0 {
                    actq.run_staged(&q, &plain, &want, n, stage(&sw)).unwrap();
                } else {
                    actq.run(&q, mode, &plain, &want, n).unwrap();
                }
                let call = c.call(&qrows, &kc, &vc, &pos, &rounded, t);
                k.run_rounded(&q, &call, block, st).unwrap();
                let label = format!("hd {} block {block} t {t} pos {p0}", c.hd);
                let (got, want) = (q.to_vec(&rounded).unwrap(), q.to_vec(&want).unwrap());
                assert_bitwise(&label, &got, &want);
                if block != 0 {
                    let (a, b) = (q.to_vec(&sa).unwrap(), q.to_vec(&sw).unwrap());
                    let len = if block == 32 {
                        XStage::floats(n)
                    } else {
                        XStage::floats_k(n)
                    };
                    assert_bitwise(&format!("{label} stage"), &a[..len], &b[..len]);
                    if block == 32 {
                        let recs = &a[n + n / 32..len];
                        let untouched = recs.iter().all(|v| v.is_nan());
                        assert_eq!(untouched, !records, "{label}: records written: {records}");
                    }
                }
                // the rounding did something: not every value survives it unchanged
                let plain = q.to_vec(&plain).unwrap();
                assert!(plain.iter().zip(&got).any(|(a, b)| a != b), "{label}");
                cases += 1;
            }
        }
    }
    println!(
        "attention + 8-bit rounding in one launch == attention then actq, bitwise ({cases} cases)"
    );
}
