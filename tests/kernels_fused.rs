//! The fused small kernels of the decode step (norm_q8, glu_q8, rope_kv) against the unfused
//! sequences they replace, bitwise, on fresh random inputs for T = 1, 2, 5, 8, 37 at both
//! models' shapes (SmolLM2: n_embd 576, 9 / 3 heads of 64, n_ff 1536; Gemma 3: n_embd 640, 4 / 1
//! heads of 256, n_ff 2048), and each against its f64 reference (errors printed). With blocks of
//! 32 the rounding kernels also stage their output for the decode products (xstage.rs): the
//! stage must be bitwise what `ActQ::run_staged` stages from the unfused output, and match its
//! reference.
mod kernels_common;
use half::f16;
use kernels_common::*;
use rand::rngs::StdRng;
use strata::kernels::act::{self, Elementwise};
use strata::kernels::actq::ActQ;
use strata::kernels::glu_q8::{self, Glu, GluQ8};
use strata::kernels::kv::KvStore;
use strata::kernels::norm::{self, Norm};
use strata::kernels::norm_q8::{reference_round, NormQ8};
use strata::kernels::rope::{rope_freqs, Rope, RopeMode, RopeTable};
use strata::kernels::rope_kv::{self, QkNorm, RopeKv, RopeKvShape};
use strata::kernels::xstage::{self, XStage};
use strata::sycl::{DeviceBuffer, Queue};

const TS: [usize; 5] = [1, 2, 5, 8, 37];

/// Activations like a residual stream: mostly small, a few large outliers per row.
fn activations(rng: &mut StdRng, n: usize) -> Vec<f32> {
    let mut x = uniform(rng, n, -2.0, 2.0);
    for i in (0..n).step_by(97) {
        x[i] *= 20.0;
    }
    x
}

/// A rounded kernel output against the f64 reference of the fused operation: equal to the
/// reference's step except where an f32-vs-f64 difference flips a rounding (at most one step,
/// rare). Prints the flips and the rounding's own error against the unrounded f64 values.
fn check_rounded(label: &str, got: &[f32], want: &[f64], unrounded: &[f64], block: usize) {
    assert_eq!(got.len(), want.len());
    let (mut flips, mut worst) = (0usize, 0f64);
    for (bi, b) in unrounded.chunks(block).enumerate() {
        let amax = b.iter().fold(0f64, |m, v| m.max(v.abs()));
        let step = amax / 127.0;
        for j in 0..b.len() {
            let i = bi * block + j;
            assert!(got[i].is_finite(), "{label}: element {i} = {}", got[i]);
            let d = (got[i] as f64 - want[i]).abs();
            if d > 1e-6 * amax {
                flips += 1;
                worst = worst.max(d / step);
                assert!(
                    d <= step * 1.01,
                    "{label}: element {i}: {} vs reference {} (step {step})",
                    got[i],
                    want[i]
                );
            }
        }
    }
    let e = nmse(got, unrounded);
    println!(
        "{label}: {flips} of {} values one rounding step off the f64 reference (largest {worst:.3} \
         steps), rounding NMSE vs unrounded {e:.2e}",
        got.len()
    );
    assert!(
        flips <= got.len() / 500 + 2 * block,
        "{label}: {flips} flips"
    );
    // the rounding noise itself: half a step, a step being 1/127 of the block's largest value
    assert!(e < 3e-2, "{label}: NMSE {e}");
}

fn f32s(q: &Queue, v: &[f32]) -> strata::sycl::DeviceBuffer<f32> {
    q.upload(v).unwrap()
}

/// A fused kernel's stage buffer and the unfused sequence's (ActQ::run_staged), for `n`
/// elements; NaN-filled, so anything left unwritten shows. `records`: blocks of 32 staged with
/// the integer records (`XStage::with_records`, STRATA_VNNI=1) or without (`XStage::new`, the
/// default path, which must leave them unwritten).
struct Stages {
    fused: DeviceBuffer<f32>,
    plain: DeviceBuffer<f32>,
    n: usize,
    records: bool,
}

impl Stages {
    fn new(q: &Queue, n: usize, records: bool) -> Stages {
        let nan = vec![f32::NAN; XStage::floats(n)];
        Stages {
            fused: f32s(q, &nan),
            plain: f32s(q, &nan),
            n,
            records,
        }
    }

    /// The fused kernel's stage argument: blocks of 32 stage x (xstage.rs), blocks of 256 its
    /// integer records.
    fn fused(&self, block: usize) -> Option<XStage<'_>> {
        Some(stage(&self.fused, block, self.n, self.records))
    }

    /// The unfused rounding of `h` into `yu`, staged with blocks of 32.
    fn round(
        &self,
        q: &Queue,
        aq: &ActQ,
        block: usize,
        h: &DeviceBuffer<f32>,
        yu: &DeviceBuffer<f32>,
    ) {
        let st = stage(&self.plain, block, self.n, self.records);
        aq.run_staged(q, h, yu, self.n, st).unwrap();
    }

    /// Blocks of 32: both stages bitwise equal, and equal to the reference stage of the rounded
    /// output `y` (the scaled copy exactly, the block sums within f32 summation error).
    fn check(&self, label: &str, q: &Queue, block: usize, y: &[f32]) {
        let (f, p) = (
            q.to_vec(&self.fused).unwrap(),
            q.to_vec(&self.plain).unwrap(),
        );
        if block == 256 {
            check_records_k(label, &f, &p, y, self.n);
            return;
        }
        assert_bitwise(&format!("{label} stage"), &f, &p);
        let (scaled, sums) = xstage::reference(y);
        assert_bitwise(&format!("{label} staged copy"), &f[..self.n], &scaled);
        let mut worst = 0f64;
        for (b, (&s, &r)) in f[self.n..].iter().zip(&sums).enumerate() {
            let mag: f64 = y[b * 32..b * 32 + 32].iter().map(|v| v.abs() as f64).sum();
            let e = (s as f64 - r).abs() / mag.max(f64::MIN_POSITIVE);
            assert!(e < 1e-6, "{label}: block {b} sum {s} vs reference {r}");
            worst = worst.max(e);
        }
        if !self.records {
            // the default path's stage: the records' floats untouched by either kernel
            let untouched = f[self.n + self.n / 32..].iter().all(|v| v.is_nan());
            assert!(
                untouched,
                "{label}: records written into a stage made without them"
            );
            println!(
                "{label}: stage bitwise the unfused one; block sums within {worst:.1e} of \
                 sum|x|; no integer records written"
            );
            return;
        }
        // the integer records: x = q * d exactly, d = max |x| / 127
        for (b, (q, d)) in xstage::records(&f, self.n).into_iter().enumerate() {
            let yb = &y[b * 32..b * 32 + 32];
            let (rq, rd) = xstage::record_reference(yb);
            assert!(
                q == rq && d.to_bits() == rd.to_bits(),
                "{label}: block {b} record ({q:?}, {d}) vs reference ({rq:?}, {rd})"
            );
            for (e, (&qi, &v)) in q.iter().zip(yb).enumerate() {
                // (== rather than bits: q = 0 stands for -0 as well)
                assert!(
                    qi as f32 * d == v,
                    "{label}: block {b} x[{e}] = {v}, q {qi} d {d}"
                );
            }
        }
        println!(
            "{label}: stage bitwise the unfused one; block sums within {worst:.1e} of sum|x|; \
             integer records exact"
        );
    }
}

/// The stage of `n` elements rounded in blocks of `block` in `b` (blocks of 32: with the
/// integer records or not).
fn stage(b: &DeviceBuffer<f32>, block: usize, n: usize, records: bool) -> XStage<'_> {
    if block == 32 && records {
        XStage::with_records(b, n).unwrap()
    } else if block == 32 {
        XStage::new(b, n).unwrap()
    } else {
        XStage::new_k(b, n).unwrap()
    }
}

/// Blocks of 256: the fused kernel's integer records bitwise the unfused rounding's, and true to
/// the rounded output `y`: y = q * d (the f32 product), |q| <= 127 reached, the sums of 16 exact.
fn check_records_k(label: &str, f: &[f32], p: &[f32], y: &[f32], n: usize) {
    let len = XStage::floats_k(n);
    assert_bitwise(&format!("{label} records"), &f[..len], &p[..len]);
    for (b, (qs, d, sums)) in xstage::records_k(f, n).into_iter().enumerate() {
        let yb = &y[b * 256..b * 256 + 256];
        for (e, (&qi, &v)) in qs.iter().zip(yb).enumerate() {
            assert!(
                qi as f32 * d == v,
                "{label}: block {b} x[{e}] = {v}, q {qi} d {d}"
            );
        }
        let top = qs.iter().map(|&v| (v as i32).abs()).max().unwrap_or(0);
        assert!(
            top == 127 || d == 0.0,
            "{label}: block {b} largest |q| {top}"
        );
        for (g, &s) in sums.iter().enumerate() {
            let want: i32 = qs[16 * g..16 * g + 16].iter().map(|&v| v as i32).sum();
            assert_eq!(s as i32, want, "{label}: block {b} sum {g}");
        }
    }
    println!("{label}: integer records bitwise the unfused ones, x = q * d, sums exact");
}

#[test]
fn norm_q8_is_bitwise_norm_then_round() {
    let (ctx, q) = setup();
    let (nq8, nrm, aq) = (
        NormQ8::new(&ctx).unwrap(),
        Norm::new(&ctx).unwrap(),
        ActQ::new(&ctx).unwrap(),
    );
    let mut rng = rng("norm_q8");
    // (n, eps, block): SmolLM2, Gemma 3 (blocks of 32: their q/k/v, gate/up weights), and rows
    // holding blocks of 256 (the K-quant rounding; no norm of these models feeds one)
    for (n, eps, block) in [
        (576, 1e-5f32, 32),
        (640, 1e-6, 32),
        (768, 1e-6, 256),
        (2048, 1e-6, 256),
    ] {
        for t in TS {
            let tot = t * n;
            let x = activations(&mut rng, tot);
            let a = activations(&mut rng, tot);
            let w1 = uniform(&mut rng, n, 0.2, 2.0);
            let w2 = uniform(&mut rng, n, 0.2, 2.0);
            let (xd, ad, w1d, w2d) = (f32s(&q, &x), f32s(&q, &a), f32s(&q, &w1), f32s(&q, &w2));
            let h = q.alloc::<f32>(tot).unwrap();
            let (yf, yu) = (q.alloc::<f32>(tot).unwrap(), q.alloc::<f32>(tot).unwrap());
            let tag = format!("n {n} T {t} block {block}");

            // rms_norm
            let st = Stages::new(&q, tot, t % 2 == 1);
            nq8.rms_norm(&q, &xd, &w1d, &yf, t, n, eps, block, st.fused(block))
                .unwrap();
            nrm.rms_norm(&q, &xd, &w1d, &h, t, n, eps).unwrap();
            st.round(&q, &aq, block, &h, &yu);
            let got = q.to_vec(&yf).unwrap();
            assert_bitwise(&format!("rms_norm_q8 {tag}"), &got, &q.to_vec(&yu).unwrap());
            st.check(&format!("rms_norm_q8 {tag}"), &q, block, &got);
            let un = norm::reference(&x, &w1, n, eps);
            let want = reference_round(block, &un);
            check_rounded(&format!("rms_norm_q8 {tag}"), &got, &want, &un, block);

            // add_rms_norm: res += a; round(norm(res))
            let (rf, ru) = (f32s(&q, &x), f32s(&q, &x));
            let st = Stages::new(&q, tot, t % 2 == 1);
            nq8.add_rms_norm(&q, &rf, &ad, &w1d, &yf, t, n, eps, block, st.fused(block))
                .unwrap();
            nrm.add_rms_norm(&q, &ru, &ad, &w1d, &h, t, n, eps).unwrap();
            st.round(&q, &aq, block, &h, &yu);
            let got = q.to_vec(&yf).unwrap();
            st.check(&format!("add_rms_norm_q8 {tag}"), &q, block, &got);
            assert_bitwise(
                &format!("add_rms_norm_q8 {tag}"),
                &got,
                &q.to_vec(&yu).unwrap(),
            );
            let res = q.to_vec(&rf).unwrap();
            assert_bitwise("add_rms_norm_q8 residual", &res, &q.to_vec(&ru).unwrap());
            let (sum, un) = norm::reference_add_norm(&x, &a, &w1, n, eps);
            check_nmse(
                &format!("add_rms_norm_q8 residual {tag}"),
                &res,
                &sum,
                1e-12,
            );
            let want = reference_round(block, &un);
            check_rounded(&format!("add_rms_norm_q8 {tag}"), &got, &want, &un, block);

            // norm_add_norm: res += norm(a) * w1; round(norm(res) * w2)
            let (rf, ru) = (f32s(&q, &x), f32s(&q, &x));
            let st = Stages::new(&q, tot, t % 2 == 1);
            let sf = st.fused(block);
            nq8.norm_add_norm(&q, &ad, &w1d, &rf, &w2d, &yf, t, n, eps, block, sf)
                .unwrap();
            nrm.rms_norm_add(&q, &ad, &w1d, &ru, t, n, eps).unwrap();
            nrm.rms_norm(&q, &ru, &w2d, &h, t, n, eps).unwrap();
            st.round(&q, &aq, block, &h, &yu);
            let got = q.to_vec(&yf).unwrap();
            st.check(&format!("norm_add_norm_q8 {tag}"), &q, block, &got);
            assert_bitwise(
                &format!("norm_add_norm_q8 {tag}"),
                &got,
                &q.to_vec(&yu).unwrap(),
            );
            let res = q.to_vec(&rf).unwrap();
            assert_bitwise("norm_add_norm_q8 residual", &res, &q.to_vec(&ru).unwrap());
            let sum = norm::reference_norm_add(&a, &w1, &x, n, eps);
            check_nmse(
                &format!("norm_add_norm_q8 residual {tag}"),
                &res,
                &sum,
                1e-12,
            );
            // the second norm is taken of the f32 residual the kernel stored
            let un = norm::reference(&res, &w2, n, eps);
            let want = reference_round(block, &un);
            check_rounded(&format!("norm_add_norm_q8 {tag}"), &got, &want, &un, block);
        }
    }
}

#[test]
fn glu_q8_is_bitwise_act_then_round() {
    let (ctx, q) = setup();
    let (g8, el, aq) = (
        GluQ8::new(&ctx).unwrap(),
        Elementwise::new(&ctx).unwrap(),
        ActQ::new(&ctx).unwrap(),
    );
    let mut rng = rng("glu_q8");
    // SmolLM2 n_ff 1536 (Q4_1 down: blocks of 32), Gemma 3 n_ff 2048 (Q4_K / Q6_K down: 256)
    for (act, n_ff) in [(Glu::Silu, 1536), (Glu::GeluTanh, 2048)] {
        for block in [32, 256] {
            for t in TS {
                let n = t * n_ff;
                let mut gate = uniform(&mut rng, n, -6.0, 6.0);
                gate[0] = -100.0; // exp / tanh saturate
                gate[1] = 100.0;
                let up = activations(&mut rng, n);
                let (gd, ud) = (f32s(&q, &gate), f32s(&q, &up));
                let (yf, yu) = (q.alloc::<f32>(n).unwrap(), q.alloc::<f32>(n).unwrap());
                let h = q.alloc::<f32>(n).unwrap();
                let st = Stages::new(&q, n, t % 2 == 1);
                g8.run(&q, act, &gd, &ud, &yf, n, block, st.fused(block))
                    .unwrap();
                match act {
                    Glu::Silu => el.silu_mul(&q, &gd, &ud, &h, n).unwrap(),
                    Glu::GeluTanh => el.gelu_mul(&q, &gd, &ud, &h, n).unwrap(),
                }
                st.round(&q, &aq, block, &h, &yu);
                let tag = format!("{act:?} n_ff {n_ff} T {t} block {block}");
                let got = q.to_vec(&yf).unwrap();
                assert_bitwise(&tag, &got, &q.to_vec(&yu).unwrap());
                st.check(&tag, &q, block, &got);
                let un = match act {
                    Glu::Silu => act::reference_silu_mul(&gate, &up),
                    Glu::GeluTanh => act::reference_gelu_mul(&gate, &up),
                };
                let want = glu_q8::reference(act, &gate, &up, block);
                check_rounded(&tag, &got, &want, &un, block);
            }
        }
    }
}

struct RopeCase {
    name: &'static str,
    mode: RopeMode,
    qk_norm: bool,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    n_rot: usize,
    base: f64,
    eps: f32,
}

#[test]
fn rope_kv_is_bitwise_rope_then_store() {
    let (ctx, q) = setup();
    let (fused, rope, kv, nrm) = (
        RopeKv::new(&ctx).unwrap(),
        Rope::new(&ctx).unwrap(),
        KvStore::new(&ctx).unwrap(),
        Norm::new(&ctx).unwrap(),
    );
    let mut rng = rng("rope_kv");
    let cases = [
        RopeCase {
            name: "smollm2",
            mode: RopeMode::Norm,
            qk_norm: false,
            n_head: 9,
            n_kv_head: 3,
            head_dim: 64,
            n_rot: 64,
            base: 100000.0,
            eps: 1e-5,
        },
        RopeCase {
            name: "gemma3",
            mode: RopeMode::Neox,
            qk_norm: true,
            n_head: 4,
            n_kv_head: 1,
            head_dim: 256,
            n_rot: 256,
            base: 1e6,
            eps: 1e-6,
        },
        // the other two kernels, and rotated dims short of head_dim
        RopeCase {
            name: "norm+qknorm n_rot 32",
            mode: RopeMode::Norm,
            qk_norm: true,
            n_head: 4,
            n_kv_head: 2,
            head_dim: 64,
            n_rot: 32,
            base: 10000.0,
            eps: 1e-6,
        },
        RopeCase {
            name: "neox n_rot 96",
            mode: RopeMode::Neox,
            qk_norm: false,
            n_head: 2,
            n_kv_head: 2,
            head_dim: 128,
            n_rot: 96,
            base: 10000.0,
            eps: 1e-6,
        },
    ];
    let n_ctx = 512;
    for c in &cases {
        let table = RopeTable::new(&q, c.base, c.n_rot).unwrap();
        let freq = rope_freqs(c.base, c.n_rot);
        for t in TS {
            let hd = c.head_dim;
            let (qn, kvn) = (t * c.n_head * hd, t * c.n_kv_head * hd);
            let qx = uniform(&mut rng, qn, -3.0, 3.0);
            let kx = uniform(&mut rng, kvn, -3.0, 3.0);
            let vx = uniform(&mut rng, kvn, -3.0, 3.0);
            let qw = uniform(&mut rng, hd, 0.5, 1.5);
            let kw = uniform(&mut rng, hd, 0.5, 1.5);
            // consecutive positions from a random start; for T = 5 the last one past the cache
            // (not stored, its q row still rotated)
            let p0 = rand::Rng::gen_range(&mut rng, 0..n_ctx - 40) as i32;
            let mut pos: Vec<i32> = (0..t as i32).map(|i| p0 + i).collect();
            if t == 5 {
                pos[4] = n_ctx as i32;
            }
            let init: Vec<f16> = (0..c.n_kv_head * n_ctx * hd)
                .map(|i| f16::from_f32((i % 97) as f32 - 48.0))
                .collect();
            let (qf, qu) = (f32s(&q, &qx), f32s(&q, &qx));
            let (kf, ku) = (f32s(&q, &kx), f32s(&q, &kx));
            let vd = f32s(&q, &vx);
            let (qwd, kwd) = (f32s(&q, &qw), f32s(&q, &kw));
            let pd = q.upload(&pos).unwrap();
            let (kcf, vcf) = (q.upload(&init).unwrap(), q.upload(&init).unwrap());
            let (kcu, vcu) = (q.upload(&init).unwrap(), q.upload(&init).unwrap());
            let shape = RopeKvShape {
                t,
                n_head: c.n_head,
                n_kv_head: c.n_kv_head,
                head_dim: hd,
                n_ctx,
            };
            let nq = QkNorm {
                q_w: &qwd,
                k_w: &kwd,
                eps: c.eps,
            };
            let nq = c.qk_norm.then_some(&nq);
            fused
                .run(
                    &q, c.mode, nq, &qf, &kf, &vd, &kcf, &vcf, &pd, &table, shape,
                )
                .unwrap();
            // the unfused sequence of LayerCtx::rope_store_attend
            if c.qk_norm {
                nrm.rms_norm(&q, &qu, &qwd, &qu, t * c.n_head, hd, c.eps)
                    .unwrap();
                nrm.rms_norm(&q, &ku, &kwd, &ku, t * c.n_kv_head, hd, c.eps)
                    .unwrap();
            }
            rope.run(&q, c.mode, &qu, &pd, &table, t, c.n_head, hd)
                .unwrap();
            rope.run(&q, c.mode, &ku, &pd, &table, t, c.n_kv_head, hd)
                .unwrap();
            kv.run(&q, &ku, &vd, &kcu, &vcu, &pd, t, c.n_kv_head, hd, n_ctx)
                .unwrap();
            let tag = format!("rope_kv {} T {t}", c.name);
            let got_q = q.to_vec(&qf).unwrap();
            assert_bitwise(&format!("{tag} q"), &got_q, &q.to_vec(&qu).unwrap());
            let bits = |b: &strata::sycl::DeviceBuffer<f16>| -> Vec<u16> {
                q.to_vec(b).unwrap().iter().map(|h| h.to_bits()).collect()
            };
            assert_eq!(bits(&kcf), bits(&kcu), "{tag}: K cache differs");
            assert_eq!(bits(&vcf), bits(&vcu), "{tag}: V cache differs");
            // the k rows are read only
            assert_bitwise(&format!("{tag} k rows"), &q.to_vec(&kf).unwrap(), &kx);

            // f64 reference
            let mut kc64: Vec<f64> = init.iter().map(|h| h.to_f32() as f64).collect();
            let mut vc64 = kc64.clone();
            let norms = c.qk_norm.then_some((&qw[..], &kw[..], c.eps));
            let want_q = rope_kv::reference(
                c.mode, norms, &qx, &kx, &vx, &pos, &freq, shape, &mut kc64, &mut vc64,
            );
            check_nmse(&format!("{tag} q"), &got_q, &want_q, 1e-10);
            let f = |b: &strata::sycl::DeviceBuffer<f16>| -> Vec<f32> {
                q.to_vec(b).unwrap().iter().map(|h| h.to_f32()).collect()
            };
            // over the stored rows only; f16 storage: relative error up to 2^-11
            let stored = |c64: &[f64], got: &[f32]| -> (Vec<f32>, Vec<f64>) {
                let (mut g, mut w) = (Vec::new(), Vec::new());
                for &p in pos.iter().filter(|&&p| (p as usize) < n_ctx) {
                    for h in 0..c.n_kv_head {
                        let r = (h * n_ctx + p as usize) * hd..(h * n_ctx + p as usize + 1) * hd;
                        g.extend_from_slice(&got[r.clone()]);
                        w.extend_from_slice(&c64[r]);
                    }
                }
                (g, w)
            };
            let (g, w) = stored(&kc64, &f(&kcf));
            check_nmse(&format!("{tag} K cache rows"), &g, &w, 1e-6);
            let (g, w) = stored(&vc64, &f(&vcf));
            check_nmse(&format!("{tag} V cache rows"), &g, &w, 1e-6);
        }
    }
}
