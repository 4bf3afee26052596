//! The opt-in integer-dot decode products (`STRATA_VNNI=1`, engine/kernels/vnni.rs) against the
//! f64 reference on fresh random weights and activations: every format it takes, the models'
//! q/k/v and gate/up groups and small odd shapes, T = 1..8, single, grouped and residual launches.
//! x comes rounded and staged by `ActQ::run_staged`, as the engine's rounding kernels do.
//! Also: T columns are bitwise T one-column calls, a grouped launch is bitwise its single
//! launches, the residual form is bitwise product + add, and the default kernel is untouched.

mod support;
use strata::kernels::actq::ActQ;
use strata::kernels::vnni::{self, Isa};
use strata::kernels::{matrix_ref, MatrixKernels, QuantMatrix, XStage};
use strata::quant::type_id;
use strata::sycl::{DeviceBuffer, Queue};
use support::matrix::*;

const FORMATS_VNNI: &[(&str, u32)] = &[
    ("Q4_0", type_id::Q4_0),
    ("Q4_1", type_id::Q4_1),
    ("Q5_0", type_id::Q5_0),
    ("Q5_1", type_id::Q5_1),
    ("Q8_0", type_id::Q8_0),
    ("Q4_K", type_id::Q4_K),
    ("Q5_K", type_id::Q5_K),
    ("Q6_K", type_id::Q6_K),
];

/// (n_in, [n_out per matrix]): the models' q/k/v and gate/up, and odd small ones (a partial last
/// tile, one matrix); the K-quants (n_in a multiple of 256) take the single ones.
const GROUPS: &[(usize, &[usize])] = &[
    (1024, &[640]),
    (2048, &[640]),
    (512, &[37]),
    (576, &[576, 192, 192]),
    (576, &[1536, 1536]),
    (1536, &[576]),
    (640, &[1024, 256, 256]),
    (640, &[2048, 2048]),
    (96, &[37, 45, 20]),
    (96, &[5]),
];

/// nmse against the f64 reference: the block's integer sum is exact, so what is left is one f32
/// rounding per block and the f32 sum over blocks (measured: about 1e-15).
const BOUND: f64 = 1e-12;

// One test per ISA, each building that ISA's seven modules once (the decode rows' check, then
// the prompt rows' on the same kernels).
#[test]
fn int_dot_matches_reference_avx512_vnni() {
    if matches_reference(Isa::Avx512Vnni) {
        prompt_rows_match_reference(Isa::Avx512Vnni);
        extremes_do_not_overflow(Isa::Avx512Vnni);
    }
}

#[test]
fn int_dot_matches_reference_avx2() {
    if matches_reference(Isa::Avx2) {
        prompt_rows_match_reference(Isa::Avx2);
        extremes_do_not_overflow(Isa::Avx2);
        isas_agree_bitwise();
    }
}

/// Turns the integer-dot products on in `isa`, or where this machine cannot run it checks the
/// refusal (explicit and visible, not a silent pass) and returns false.
fn turn_on(ctx: &strata::sycl::Context, k: &mut MatrixKernels, isa: Isa) -> bool {
    if let Some(why) = vnni::unsupported_isa(ctx, isa) {
        let e = k
            .set_int_dot_isa(Some(isa))
            .expect_err("refused where unsupported");
        assert!(e.to_string().contains("STRATA_VNNI"), "{e}");
        println!(
            "{} kernel not runnable here ({why}); checked the refusal only",
            isa.label()
        );
        return false;
    }
    k.set_int_dot_isa(Some(isa)).unwrap();
    assert_eq!(k.int_dot_isa(), Some(isa));
    true
}

/// The decode rows' checks in `isa`; false where it cannot run here (the refusal checked).
fn matches_reference(isa: Isa) -> bool {
    let (ctx, q, mut k) = setup();
    if !turn_on(&ctx, &mut k, isa) {
        return false;
    }
    let aq = ActQ::new(&ctx).unwrap();
    let plain = MatrixKernels::new(&ctx);
    assert!(k.int_dot() && !plain.int_dot());
    let mut rng = rng(0x766e6e69);
    {
        // a stage made without the integer records (the default path's XStage::new) is refused
        // by name, not read as garbage
        let (n_out, n_in) = (64, 576);
        let wb = weights(&mut rng, type_id::Q4_1, n_out, n_in);
        let w = QuantMatrix::upload(&q, "Q4_1", type_id::Q4_1, n_out, n_in, &wb).unwrap();
        let xd = q.upload(&values(&mut rng, n_in)).unwrap();
        let xq = q.alloc::<f32>(n_in).unwrap();
        let stb = q.alloc::<f32>(XStage::floats(n_in)).unwrap();
        let st = XStage::new(&stb, n_in).unwrap();
        aq.run_staged(&q, &xd, &xq, n_in, st).unwrap();
        let mut y = q.alloc::<f32>(n_out).unwrap();
        let e = k
            .mmvq_staged(&q, &w.view(), &xq, Some(st), &mut y, 1)
            .expect_err("a stage without records refused");
        assert!(e.to_string().contains("no integer records"), "{e}");
        println!("stage without records: {e}");
    }
    for &(name, tid) in FORMATS_VNNI {
        let (mut worst, mut worst_default, mut differ_default) = (0f64, 0f64, 0usize);
        let block = vnni::stage_block(tid).unwrap();
        for &(n_in, n_outs) in GROUPS {
            if n_in % block != 0 || (block == 256 && n_outs.len() > 1) {
                continue; // (K-quant products are launched one matrix at a time)
            }
            let wbs: Vec<Vec<u8>> = n_outs
                .iter()
                .map(|&n_out| weights(&mut rng, tid, n_out, n_in))
                .collect();
            let mats: Vec<_> = n_outs
                .iter()
                .zip(&wbs)
                .map(|(&n_out, wb)| QuantMatrix::upload(&q, name, tid, n_out, n_in, wb).unwrap())
                .collect();
            let views: Vec<_> = mats.iter().map(|m| m.view()).collect();
            let xd = q.upload(&values(&mut rng, 8 * n_in)).unwrap();
            let xq = q.alloc::<f32>(8 * n_in).unwrap();
            let stb = q.alloc::<f32>(XStage::floats(8 * n_in)).unwrap();
            // x rounded as the engine rounds it for the format: Q8_0 or Q8_K blocks
            let stage = |n: usize| stage_of(&stb, block, n);
            let n0 = n_outs[0];
            let res = values(&mut rng, 8 * n0);
            // per matrix: the last column of each t-column call, t = 1..8
            let mut last_cols: Vec<Vec<f32>> = vec![Vec::new(); views.len()];
            let mut full = Vec::new(); // the 8-column call's outputs
            for t in 1..=8 {
                let st = stage(t * n_in);
                aq.run_staged(&q, &xd, &xq, t * n_in, st).unwrap();
                let xh = q.to_vec(&xq).unwrap();
                let mut single = Vec::new();
                for (i, v) in views.iter().enumerate() {
                    let mut y = q.alloc::<f32>(t * v.n_out).unwrap();
                    k.mmvq_staged(&q, v, &xq, Some(st), &mut y, t).unwrap();
                    let y = q.to_vec(&y).unwrap();
                    let want = matrix_ref(tid, &wbs[i], v.n_out, n_in, &xh[..t * n_in], t).unwrap();
                    let e = nmse(&y, &want);
                    assert!(
                        e < BOUND,
                        "{name} ({}, {n_in}) T={t}: nmse {e:.2e} against the f64 reference",
                        v.n_out
                    );
                    worst = worst.max(e);
                    // a MatrixKernels without the flag runs the default float kernel on the
                    // same stage: another rounding, so some outputs differ
                    let mut d = q.alloc::<f32>(t * v.n_out).unwrap();
                    plain.mmvq_staged(&q, v, &xq, Some(st), &mut d, t).unwrap();
                    let d = q.to_vec(&d).unwrap();
                    differ_default += bits_differ(&d, &y);
                    worst_default = worst_default.max(nmse(&d, &want));
                    last_cols[i].extend_from_slice(&y[(t - 1) * v.n_out..]);
                    single.push(y);
                }
                // grouped: bitwise the single launches
                let mut ys: Vec<_> = views
                    .iter()
                    .map(|v| q.alloc::<f32>(t * v.n_out).unwrap())
                    .collect();
                let mut outs: Vec<_> = views.iter().zip(ys.iter_mut()).collect();
                // (a K-quant is never grouped: mmvq_group declines, launching nothing)
                assert_eq!(
                    k.mmvq_group(&q, &xq, Some(st), &mut outs, t).unwrap(),
                    block == 32
                );
                for (y, s) in ys.iter().zip(&single).filter(|_| block == 32) {
                    assert_eq!(
                        bits_differ(&q.to_vec(y).unwrap(), s),
                        0,
                        "{name} grouped T={t}"
                    );
                }
                // residual: bitwise r + the product
                let mut r = q.upload(&res[..t * n0]).unwrap();
                assert!(k
                    .mmvq_residual(&q, &views[0], &xq, Some(st), &mut r, t)
                    .unwrap());
                let want: Vec<f32> = res[..t * n0]
                    .iter()
                    .zip(&single[0])
                    .map(|(a, b)| a + b)
                    .collect();
                assert_eq!(
                    bits_differ(&q.to_vec(&r).unwrap(), &want),
                    0,
                    "{name} residual T={t}"
                );
                full = single;
            }
            // column c of the 8-column call is bitwise column c of the (c+1)-column call: each
            // column's sequence of operations does not depend on T
            for (i, y) in full.iter().enumerate() {
                let d = bits_differ(&last_cols[i], y);
                assert_eq!(
                    d, 0,
                    "{name} ({}, {n_in}): {d} outputs depend on T",
                    views[i].n_out
                );
            }
        }
        assert!(
            differ_default > 0,
            "{name}: the flag did not change the kernel"
        );
        println!(
            "{name} {}: integer-dot products within nmse {worst:.2e} of the f64 reference (bound \
             {BOUND:.0e}; the default float kernel: {worst_default:.2e}), T = 1..8, \
             single/grouped/residual",
            isa.label()
        );
    }
    true
}

/// The prompt's rows (t > 8, `MatrixKernels::mul_staged` with x staged for all of them): blocks
/// of 8 columns in one launch and the rest in another, against the f64 reference, and the first
/// 8 rows bitwise the 8-row decode call's (each column's arithmetic does not depend on t).
fn prompt_rows_match_reference(isa: Isa) {
    let (ctx, q, mut k) = setup();
    assert!(turn_on(&ctx, &mut k, isa));
    let aq = ActQ::new(&ctx).unwrap();
    let mut rng = rng(0x77696465);
    for &(name, tid) in FORMATS_VNNI {
        let block = vnni::stage_block(tid).unwrap();
        let mut worst = 0f64;
        for (n_out, n_in) in [(1536, 576), (640, 1024), (37, 512), (256, 640)] {
            if n_in % block != 0 {
                continue;
            }
            let wb = weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let v = w.view();
            const T_MAX: usize = 37;
            let xd = q.upload(&values(&mut rng, T_MAX * n_in)).unwrap();
            let xq = q.alloc::<f32>(T_MAX * n_in).unwrap();
            let stb = q.alloc::<f32>(XStage::floats(T_MAX * n_in)).unwrap();
            let stage = |n: usize| stage_of(&stb, block, n);
            // the 8-row decode call on the first 8 rows
            let st8 = stage(8 * n_in);
            aq.run_staged(&q, &xd, &xq, 8 * n_in, st8).unwrap();
            let mut y8 = q.alloc::<f32>(8 * n_out).unwrap();
            k.mul_staged(&q, &v, &xq, Some(st8), &mut y8, 8).unwrap();
            let y8 = q.to_vec(&y8).unwrap();
            for t in [9, 16, 37] {
                let st = stage(t * n_in);
                aq.run_staged(&q, &xd, &xq, t * n_in, st).unwrap();
                let mut y = q.alloc::<f32>(t * n_out).unwrap();
                k.mul_staged(&q, &v, &xq, Some(st), &mut y, t).unwrap();
                let y = q.to_vec(&y).unwrap();
                let xh = q.to_vec(&xq).unwrap();
                let want = matrix_ref(tid, &wb, n_out, n_in, &xh[..t * n_in], t).unwrap();
                let e = nmse(&y, &want);
                assert!(e < BOUND, "{name} ({n_out}, {n_in}) t={t}: nmse {e:.2e}");
                worst = worst.max(e);
                let d = bits_differ(&y[..8 * n_out], &y8);
                assert_eq!(
                    d, 0,
                    "{name} ({n_out}, {n_in}) t={t}: {d} of the first 8 rows differ"
                );
            }
        }
        println!(
            "{name} {}: prompt rows t = 9, 16, 37 within nmse {worst:.2e}; first 8 rows bitwise \
             the decode call's",
            isa.label()
        );
    }
}

/// The two ISAs' kernels give the same bits: the integer sums are exact in both and everything
/// after them is the same code. Every format, decode and prompt row counts.
fn isas_agree_bitwise() {
    let (ctx, q, mut k2) = setup();
    let mut k512 = MatrixKernels::new(&ctx);
    if let Some(why) = vnni::unsupported_isa(&ctx, Isa::Avx512Vnni) {
        println!("AVX-512 VNNI not runnable here ({why}): no cross-ISA comparison");
        return;
    }
    k2.set_int_dot_isa(Some(Isa::Avx2)).unwrap();
    k512.set_int_dot_isa(Some(Isa::Avx512Vnni)).unwrap();
    let aq = ActQ::new(&ctx).unwrap();
    let mut rng = rng(0x69736173);
    let mut n = 0;
    for &(name, tid) in FORMATS_VNNI {
        let block = vnni::stage_block(tid).unwrap();
        let (n_out, n_in) = (200, 1024); // a partial last tile
        let wb = weights(&mut rng, tid, n_out, n_in);
        let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
        for t in [1, 5, 8, 21] {
            let (xq, stb) = round_staged(&q, &aq, &values(&mut rng, t * n_in), block);
            let st = stage_of(&stb, block, t * n_in);
            let (mut y2, mut y512) = (
                q.alloc::<f32>(t * n_out).unwrap(),
                q.alloc::<f32>(t * n_out).unwrap(),
            );
            k2.mul_staged(&q, &w.view(), &xq, Some(st), &mut y2, t)
                .unwrap();
            k512.mul_staged(&q, &w.view(), &xq, Some(st), &mut y512, t)
                .unwrap();
            let (a, b) = (q.to_vec(&y2).unwrap(), q.to_vec(&y512).unwrap());
            let differ = a.iter().zip(&b).filter(|(x, y)| x.to_bits() != y.to_bits());
            assert_eq!(
                differ.count(),
                0,
                "{name} t {t}: avx2 and avx512-vnni differ"
            );
            n += a.len();
        }
    }
    println!("avx2 and avx512-vnni kernels: {n} outputs, 0 bits differ");
}

/// Every weight q of `w` (GGUF blocks of `tid`) set to its largest magnitude: the q bytes (and
/// the 5th / high bits) all ones, Q8_0's -128; the scales left as quantized.
fn saturate(tid: u32, w: &mut [u8]) {
    if tid == type_id::Q8_0 {
        for blk in w.chunks_exact_mut(34) {
            blk[2..].fill(0x80);
        }
        return;
    }
    // (block bytes, q byte range in the block)
    let (bytes, q) = match tid {
        type_id::Q4_0 => (18, 2..18),
        type_id::Q4_1 => (20, 4..20),
        type_id::Q5_0 => (22, 2..22),
        type_id::Q5_1 => (24, 4..24),
        type_id::Q4_K => (144, 16..144),
        type_id::Q5_K => (176, 16..176),
        type_id::Q6_K => (210, 0..192),
        _ => unreachable!("FORMATS_VNNI lists these only"),
    };
    for blk in w.chunks_exact_mut(bytes) {
        blk[q.clone()].fill(0xFF);
    }
}

/// The largest sums the kernels' integer arithmetic meets: every weight q at its maximum (Q6_K's
/// 63, the 5-bit formats' 31, Q8_0's -128) times x's q all +127 or all -127 (a constant x, each
/// sign). The AVX2 form adds two words' int16 pair sums before widening (|4 * 63 * 127| = 32004
/// < 32767; Q8_0 one word, |2 * 128 * 127| = 32512): a saturated int16 would show here as an
/// error far past the bound.
fn extremes_do_not_overflow(isa: Isa) {
    let (ctx, q, mut k) = setup();
    assert!(turn_on(&ctx, &mut k, isa));
    let aq = ActQ::new(&ctx).unwrap();
    let mut rng = rng(0x73617475);
    for &(name, tid) in FORMATS_VNNI {
        let block = vnni::stage_block(tid).unwrap();
        let (n_out, n_in) = (48, 1024);
        let mut wb = weights(&mut rng, tid, n_out, n_in);
        saturate(tid, &mut wb);
        let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
        let mut worst = 0f64;
        for (t, sign) in [(1, 1.0f32), (1, -1.0), (5, 1.0), (8, -1.0)] {
            let (xq, stb) = round_staged(&q, &aq, &vec![0.75 * sign; t * n_in], block);
            let st = stage_of(&stb, block, t * n_in);
            let mut y = q.alloc::<f32>(t * n_out).unwrap();
            k.mul_staged(&q, &w.view(), &xq, Some(st), &mut y, t)
                .unwrap();
            let xh = q.to_vec(&xq).unwrap();
            let want = matrix_ref(tid, &wb, n_out, n_in, &xh, t).unwrap();
            let e = nmse(&q.to_vec(&y).unwrap(), &want);
            assert!(
                e < BOUND,
                "{name} {} t {t} x {sign}: nmse {e:.3e}",
                isa.label()
            );
            worst = worst.max(e);
        }
        println!(
            "{name} {}: every q at its maximum, x at +-127: nmse {worst:.2e}",
            isa.label()
        );
    }
}

/// The stage in `stb` of `n` elements rounded in blocks of `block`, as the engine makes it with
/// the flag on: blocks of 32 with the integer records, blocks of 256 (records only).
fn stage_of(stb: &DeviceBuffer<f32>, block: usize, n: usize) -> XStage<'_> {
    match block {
        32 => XStage::with_records(stb, n).unwrap(),
        _ => XStage::new_k(stb, n).unwrap(),
    }
}

/// `x` rounded and staged for a format of rounding `block` (`ActQ::run_staged`): the rounded x
/// and the stage buffer (read with `stage_of`).
fn round_staged(
    q: &Queue,
    aq: &ActQ,
    x: &[f32],
    block: usize,
) -> (DeviceBuffer<f32>, DeviceBuffer<f32>) {
    let n = x.len();
    let xd = q.upload(x).unwrap();
    let xq = q.alloc::<f32>(n).unwrap();
    let stb = q.alloc::<f32>(XStage::floats(n)).unwrap();
    aq.run_staged(q, &xd, &xq, n, stage_of(&stb, block, n))
        .unwrap();
    (xq, stb)
}
