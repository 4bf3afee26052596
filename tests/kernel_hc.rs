//! The default hyper-connection read (engine/kernels/hc.rs, sycl/kernels/hc.cpp) against its f64
//! reference (hc_ref.rs) on the CPU device: every weight type, with and without a pending write
//! and injection rows, T = 1..8 and 37, three geometries (the seeds' n 2560 S 4 r 320 among
//! them). All five outputs: R_out bitwise the f32 H + a * y, rs / lo / a / mixed within TOL of
//! their Σ|w·x| scale (printed: the largest measured error over that scale); a T-row call
//! bitwise T one-row calls; a perturbed weight or gamma must break the bound.
mod kernels_common;
use half::{bf16, f16};
use kernels_common::*;
use rand::rngs::StdRng;
use strata::kernels::hc::{self, HcCall, HcHost, HcHostMat, HcMat, HcRead, HcRef, HcScratch};
use strata::quant::{self, type_id as ty};
use strata::sycl::{DeviceBuffer, Queue};

/// The bound: |kernel - reference| <= TOL * the output's error scale (hc_ref.rs). f32 sums of a
/// few dozen levels (lane chains of 8, a 16-lane tree, <= 16 slices, S streams) stay near
/// 2^-24 * depth of Σ|w·x|; TOL leaves a wide margin over that and is still far below what a
/// perturbed weight does.
const TOL: f64 = 4e-6;

#[derive(Clone, Copy, Debug)]
struct Geo {
    n: usize,
    s: usize,
    r: usize,
}

/// (down, inject, up) ggml types.
type Types = (u32, u32, u32);

fn tname(t: u32) -> &'static str {
    quant::type_name(t).unwrap()
}

/// Host weights of one read site: GGUF bytes of random values at unit-output scales.
struct HostW {
    geo: Geo,
    types: Types,
    down: Vec<u8>,
    up: Vec<u8>,
    inj: Vec<u8>,
    gamma: Vec<f32>,
}

impl HostW {
    fn new(rng: &mut StdRng, geo: Geo, types: Types) -> HostW {
        let k = geo.s * geo.n;
        let mat = |rng: &mut StdRng, ty: u32, rows: usize, cols: usize| {
            let a = (3.0 / cols as f32).sqrt();
            quant::quantize_by_type(ty, &uniform(rng, rows * cols, -a, a)).unwrap()
        };
        HostW {
            geo,
            types,
            down: mat(rng, types.0, geo.r, k),
            inj: mat(rng, types.1, geo.s, k),
            up: mat(rng, types.2, k, geo.r),
            gamma: uniform(rng, k, 0.5, 1.5),
        }
    }
    fn host(&self, inject: bool) -> HcHost<'_> {
        HcHost {
            n: self.geo.n,
            streams: self.geo.s,
            rank: self.geo.r,
            gamma: &self.gamma,
            down: HcHostMat {
                bytes: &self.down,
                type_id: self.types.0,
            },
            up: HcHostMat {
                bytes: &self.up,
                type_id: self.types.2,
            },
            inject: inject.then_some(HcHostMat {
                bytes: &self.inj,
                type_id: self.types.1,
            }),
        }
    }
    fn label(&self) -> String {
        let Geo { n, s, r } = self.geo;
        let (d, i, u) = self.types;
        format!(
            "n {n} S {s} r {r} down/inj/up {}/{}/{}",
            tname(d),
            tname(i),
            tname(u)
        )
    }
}

struct DevW {
    down: DeviceBuffer<u8>,
    up: DeviceBuffer<u8>,
    inj: DeviceBuffer<u8>,
    gamma: DeviceBuffer<f32>,
}

impl DevW {
    fn new(q: &Queue, h: &HostW) -> DevW {
        DevW {
            down: q.upload(&h.down).unwrap(),
            up: q.upload(&h.up).unwrap(),
            inj: q.upload(&h.inj).unwrap(),
            gamma: q.upload(&h.gamma).unwrap(),
        }
    }
}

/// One read's inputs: x (t, S, n) and the pending write y (t, n), a (t, S).
struct Inputs {
    x: Vec<f32>,
    y: Vec<f32>,
    a: Vec<f32>,
}

impl Inputs {
    fn new(rng: &mut StdRng, g: Geo, t: usize) -> Inputs {
        Inputs {
            x: uniform(rng, t * g.s * g.n, -2.0, 2.0),
            y: uniform(rng, t * g.n, -1.0, 1.0),
            a: uniform(rng, t * g.s, 0.1, 1.9),
        }
    }
    /// Row i alone.
    fn row(&self, g: Geo, i: usize) -> Inputs {
        let (k, s) = (g.s * g.n, g.s);
        Inputs {
            x: self.x[i * k..(i + 1) * k].to_vec(),
            y: self.y[i * g.n..(i + 1) * g.n].to_vec(),
            a: self.a[i * s..(i + 1) * s].to_vec(),
        }
    }
}

/// The five outputs of a device read.
struct Outs {
    r_out: Vec<f32>,
    rs: Vec<f32>,
    lo: Vec<f32>,
    a: Vec<f32>,
    mixed: Vec<f32>,
}

#[allow(clippy::too_many_arguments)]
fn run_dev(
    k: &HcRead,
    q: &Queue,
    h: &HostW,
    d: &DevW,
    sc: &HcScratch,
    inp: &Inputs,
    t: usize,
    pending: bool,
    inject: bool,
) -> Outs {
    let Geo { n, s, r } = h.geo;
    let call = HcCall {
        n,
        streams: s,
        rank: r,
        t,
        eps: 1e-6,
        gamma: &d.gamma,
        down: HcMat {
            bytes: &d.down,
            type_id: h.types.0,
        },
        up: HcMat {
            bytes: &d.up,
            type_id: h.types.2,
        },
        inject: inject.then_some(HcMat {
            bytes: &d.inj,
            type_id: h.types.1,
        }),
    };
    let x = q.upload(&inp.x).unwrap();
    let (y, a) = (q.upload(&inp.y).unwrap(), q.upload(&inp.a).unwrap());
    let rs = q.alloc::<f32>(t * s).unwrap();
    let lo = q.alloc::<f32>(t * r).unwrap();
    let a_out = q.alloc::<f32>(t * s).unwrap();
    let mixed = q.alloc::<f32>(t * n).unwrap();
    k.run(
        q,
        &call,
        &x,
        pending.then_some((&y, &a)),
        &rs,
        &lo,
        inject.then_some(&a_out),
        &mixed,
        sc,
    )
    .unwrap();
    Outs {
        r_out: q.to_vec(&x).unwrap(),
        rs: q.to_vec(&rs).unwrap(),
        lo: q.to_vec(&lo).unwrap(),
        a: if inject {
            q.to_vec(&a_out).unwrap()
        } else {
            Vec::new()
        },
        mixed: q.to_vec(&mixed).unwrap(),
    }
}

fn reference(h: &HostW, inp: &Inputs, t: usize, pending: bool, inject: bool) -> HcRef {
    hc::reference(
        &h.host(inject),
        &inp.x,
        pending.then_some((&inp.y[..], &inp.a[..])),
        t,
        1e-6,
    )
    .unwrap()
}

/// The largest |got - want| / (TOL * scale) of one output (> 1: out of bound); NaN counts as out.
fn ratio(got: &[f32], want: &[f64], mag: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "output length");
    got.iter()
        .zip(want)
        .zip(mag)
        .map(|((&g, &w), &m)| {
            let e = (g as f64 - w).abs() / (TOL * m.max(f64::MIN_POSITIVE));
            if e.is_nan() {
                f64::INFINITY
            } else {
                e
            }
        })
        .fold(0.0, f64::max)
}

/// [rs, lo, a, mixed] ratios of a device read against the reference.
fn ratios(o: &Outs, w: &HcRef) -> [f64; 4] {
    [
        ratio(&o.rs, &w.rs, &w.rs_mag),
        ratio(&o.lo, &w.lo, &w.lo_mag),
        ratio(&o.a, &w.a, &w.a_mag),
        ratio(&o.mixed, &w.mixed, &w.mixed_mag),
    ]
}

const NAMES: [&str; 4] = ["rs", "lo", "a", "mixed"];

/// Runs every (T, pending, inject) case of one weight set: parity, R_out bitwise, and (`rows`)
/// each multi-row call against its one-row calls. Prints the largest error ratios seen.
fn cases(
    k: &HcRead,
    q: &Queue,
    rng: &mut StdRng,
    h: &HostW,
    ts: &[usize],
    modes: &[(bool, bool)],
    rows: bool,
) {
    let d = DevW::new(q, h);
    let tmax = ts.iter().copied().max().unwrap();
    let sc = HcScratch::new(q, tmax, h.geo.n, h.geo.s, h.geo.r).unwrap();
    let mut worst = [0.0f64; 4];
    let mut n_cases = 0;
    for &t in ts {
        for &(pending, inject) in modes {
            let label = format!("{} T {t} pending {pending} inject {inject}", h.label());
            let inp = Inputs::new(rng, h.geo, t);
            let got = run_dev(k, q, h, &d, &sc, &inp, t, pending, inject);
            let want = reference(h, &inp, t, pending, inject);
            assert_bitwise(&format!("{label}: R_out"), &got.r_out, &want.r_out);
            let rt = ratios(&got, &want);
            for i in 0..4 {
                assert!(
                    rt[i] <= 1.0,
                    "{label}: {} error {:.3e} of its scale > bound {TOL:.0e}",
                    NAMES[i],
                    rt[i] * TOL
                );
                worst[i] = worst[i].max(rt[i]);
            }
            n_cases += 1;
            if rows && t > 1 {
                let (g, s, r, n) = (h.geo, h.geo.s, h.geo.r, h.geo.n);
                for i in 0..t {
                    let one = run_dev(k, q, h, &d, &sc, &inp.row(g, i), 1, pending, inject);
                    let l = format!("{label}: row {i} alone");
                    let k_cols = s * n;
                    assert_bitwise(&l, &one.r_out, &got.r_out[i * k_cols..(i + 1) * k_cols]);
                    assert_bitwise(&l, &one.rs, &got.rs[i * s..(i + 1) * s]);
                    assert_bitwise(&l, &one.lo, &got.lo[i * r..(i + 1) * r]);
                    if inject {
                        assert_bitwise(&l, &one.a, &got.a[i * s..(i + 1) * s]);
                    }
                    assert_bitwise(&l, &one.mixed, &got.mixed[i * n..(i + 1) * n]);
                }
            }
        }
    }
    println!(
        "{}: {n_cases} cases, max error / scale: rs {:.2e} lo {:.2e} a {:.2e} mixed {:.2e} (bound {TOL:.0e}){}",
        h.label(),
        worst[0] * TOL,
        worst[1] * TOL,
        worst[2] * TOL,
        worst[3] * TOL,
        if rows { ", T-row calls bitwise the one-row calls" } else { "" }
    );
}

const ALL_MODES: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

/// The type triples tried at a geometry: each type for all three matrices, except that Q8_0 rows
/// must be whole 32-element blocks: with r % 32 != 0 W_up stays BF16 under Q8_0 down / inject.
fn triples(g: Geo) -> Vec<Types> {
    let mut v: Vec<Types> = vec![
        (ty::F32, ty::F32, ty::F32),
        (ty::F16, ty::F16, ty::F16),
        (ty::BF16, ty::BF16, ty::BF16),
    ];
    let up8 = if g.r % 32 == 0 { ty::Q8_0 } else { ty::BF16 };
    v.push((ty::Q8_0, ty::Q8_0, up8));
    v
}

#[test]
fn hc_read_small_geometries() {
    let (ctx, q) = setup();
    let k = HcRead::new(&ctx).unwrap();
    let mut rng = rng("hc_read_small");
    let ts: Vec<usize> = (1..=8).chain([37]).collect();
    for geo in [
        Geo { n: 64, s: 4, r: 16 },
        Geo {
            n: 320,
            s: 2,
            r: 40,
        },
    ] {
        for types in triples(geo) {
            let h = HostW::new(&mut rng, geo, types);
            cases(&k, &q, &mut rng, &h, &ts, &ALL_MODES, true);
        }
    }
    // n neither a multiple of 32 nor of the slice: uneven slices, Q8_0 blocks across slice and
    // stream boundaries; T = 9 takes two passes of 8 rows
    for types in triples(Geo {
        n: 1400,
        s: 4,
        r: 24,
    }) {
        let h = HostW::new(
            &mut rng,
            Geo {
                n: 1400,
                s: 4,
                r: 24,
            },
            types,
        );
        cases(&k, &q, &mut rng, &h, &[1, 3, 9], &ALL_MODES, true);
    }
    // a Q8_0 W_up too (its rows are whole blocks at r = 32), and inject rows of another type
    for types in [
        (ty::Q8_0, ty::Q8_0, ty::Q8_0),
        (ty::BF16, ty::F32, ty::Q8_0),
    ] {
        let h = HostW::new(&mut rng, Geo { n: 64, s: 4, r: 32 }, types);
        cases(&k, &q, &mut rng, &h, &[1, 5, 8, 37], &ALL_MODES, true);
    }
}

#[test]
fn hc_read_seed_geometry() {
    let (ctx, q) = setup();
    let k = HcRead::new(&ctx).unwrap();
    let mut rng = rng("hc_read_seed");
    let geo = Geo {
        n: 2560,
        s: 4,
        r: 320,
    };
    for types in triples(geo)
        .into_iter()
        .chain([(ty::BF16, ty::F32, ty::BF16)])
    {
        let h = HostW::new(&mut rng, geo, types);
        let bf16_all = types == (ty::BF16, ty::BF16, ty::BF16);
        // the engine's default (BF16) at every mode and with the one-row calls; the others at
        // the layers' mode (pending write and injection) and the head mixer's
        if bf16_all {
            cases(&k, &q, &mut rng, &h, &[1, 6], &ALL_MODES, true);
        } else {
            cases(
                &k,
                &q,
                &mut rng,
                &h,
                &[1, 4],
                &[(true, true), (false, false)],
                false,
            );
        }
    }
}

/// Adds `delta` times the matrix's value scale to element `e` of GGUF bytes (Q8_0: moves the quant
/// by 64 steps).
fn perturb(bytes: &mut [u8], type_id: u32, e: usize, delta: f32) {
    match type_id {
        ty::F32 => {
            let p = &mut bytes[4 * e..4 * e + 4];
            let v = f32::from_le_bytes([p[0], p[1], p[2], p[3]]) + delta;
            p.copy_from_slice(&v.to_le_bytes());
        }
        ty::F16 => {
            let p = &mut bytes[2 * e..2 * e + 2];
            let v = f16::from_le_bytes([p[0], p[1]]).to_f32() + delta;
            p.copy_from_slice(&f16::from_f32(v).to_le_bytes());
        }
        ty::BF16 => {
            let p = &mut bytes[2 * e..2 * e + 2];
            let v = bf16::from_le_bytes([p[0], p[1]]).to_f32() + delta;
            p.copy_from_slice(&bf16::from_f32(v).to_le_bytes());
        }
        ty::Q8_0 => {
            let i = 34 * (e / 32) + 2 + e % 32;
            let q = bytes[i] as i8;
            bytes[i] = (if q >= 0 { q - 64 } else { q + 64 }) as u8;
        }
        _ => unreachable!("the test's types"),
    }
}

/// Power check: the kernel's outputs on the true weights against the reference on weights with
/// one element changed must break the bound, for each matrix, gamma, and every type.
#[test]
fn hc_read_power_check() {
    let (ctx, q) = setup();
    let k = HcRead::new(&ctx).unwrap();
    let mut rng = rng("hc_read_power");
    let geo = Geo { n: 64, s: 4, r: 32 };
    let t = 3;
    for tyq in [ty::F32, ty::F16, ty::BF16, ty::Q8_0] {
        let h = HostW::new(&mut rng, geo, (tyq, tyq, tyq));
        let d = DevW::new(&q, &h);
        let sc = HcScratch::new(&q, t, geo.n, geo.s, geo.r).unwrap();
        let inp = Inputs::new(&mut rng, geo, t);
        let got = run_dev(&k, &q, &h, &d, &sc, &inp, t, true, true);
        let base = ratios(&got, &reference(&h, &inp, t, true, true));
        assert!(
            base.iter().all(|&v| v <= 1.0),
            "{}: unperturbed {base:?}",
            h.label()
        );
        let kc = geo.s * geo.n;
        // (what, which output must fail)
        let mut seen = Vec::new();
        for (what, out) in [("down", 1), ("inject", 2), ("up", 3), ("gamma", 1)] {
            let mut hp = HostW {
                geo,
                types: h.types,
                down: h.down.clone(),
                up: h.up.clone(),
                inj: h.inj.clone(),
                gamma: h.gamma.clone(),
            };
            let scale = (3.0 / kc as f32).sqrt() * 4.0;
            match what {
                "down" => perturb(&mut hp.down, tyq, 5 * kc + 77, scale),
                "inject" => perturb(&mut hp.inj, tyq, 2 * kc + 130, scale),
                "up" => perturb(
                    &mut hp.up,
                    tyq,
                    3 * geo.r + 7,
                    (3.0 / geo.r as f32).sqrt() * 4.0,
                ),
                _ => hp.gamma[100] += 0.5,
            }
            let rt = ratios(&got, &reference(&hp, &inp, t, true, true));
            assert!(
                rt[out] > 1.0,
                "{}: one {what} element changed and {} still within the bound ({:.3e})",
                h.label(),
                NAMES[out],
                rt[out] * TOL
            );
            seen.push(format!("{what} -> {} {:.1e}", NAMES[out], rt[out] * TOL));
        }
        println!("power check {}: {}", h.label(), seen.join(", "));
    }
}

/// Shape and type errors name the argument, and launch nothing.
#[test]
fn hc_read_argument_errors() {
    let (ctx, q) = setup();
    let k = HcRead::new(&ctx).unwrap();
    let mut rng = rng("hc_read_errors");
    let geo = Geo { n: 64, s: 4, r: 40 };
    let h = HostW::new(&mut rng, geo, (ty::BF16, ty::BF16, ty::BF16));
    let d = DevW::new(&q, &h);
    let sc = HcScratch::new(&q, 2, geo.n, geo.s, geo.r).unwrap();
    let (t, kc) = (2, geo.s * geo.n);
    let x = q.alloc::<f32>(t * kc).unwrap();
    let short = q.alloc::<f32>(t * kc - 1).unwrap();
    let (rs, lo, a, mixed) = (
        q.alloc::<f32>(t * geo.s).unwrap(),
        q.alloc::<f32>(t * geo.r).unwrap(),
        q.alloc::<f32>(t * geo.s).unwrap(),
        q.alloc::<f32>(t * geo.n).unwrap(),
    );
    let mat = |b, ty| HcMat {
        bytes: b,
        type_id: ty,
    };
    let call = |up_type: u32, inject: bool, t: usize| HcCall {
        n: geo.n,
        streams: geo.s,
        rank: geo.r,
        t,
        eps: 1e-6,
        gamma: &d.gamma,
        down: mat(&d.down, ty::BF16),
        up: mat(&d.up, up_type),
        inject: inject.then_some(mat(&d.inj, ty::BF16)),
    };
    let err = |c: &HcCall, x: &DeviceBuffer<f32>, a_out: Option<&DeviceBuffer<f32>>| {
        k.run(&q, c, x, None, &rs, &lo, a_out, &mixed, &sc)
            .unwrap_err()
            .to_string()
    };
    let up = ty::BF16;
    let e = err(&call(up, true, t), &short, Some(&a));
    assert!(e.contains("x holds"), "{e}");
    let e = err(&call(ty::Q8_0, true, t), &x, Some(&a));
    assert!(e.contains("up") && e.contains("Q8_0"), "{e}");
    let e = err(&call(ty::Q4_K, true, t), &x, Some(&a));
    assert!(e.contains("up") && e.contains("Q4_K"), "{e}");
    let e = err(&call(up, false, t), &x, Some(&a));
    assert!(e.contains("a_out"), "{e}");
    let e = err(&call(up, true, 3), &x, Some(&a));
    assert!(e.contains("scratch"), "{e}");
    println!("argument errors: {e}");
}

/// `write` (the pending write alone) is bitwise the read's R_out and rs; and the read with its
/// a_out in the pending a's buffer and its mixed in y's (as the engine calls it) gives the same
/// bits as with separate buffers.
#[test]
fn hc_read_write_and_aliasing() {
    let (ctx, q) = setup();
    let k = HcRead::new(&ctx).unwrap();
    let mut rng = rng("hc_read_write");
    let geo = Geo {
        n: 320,
        s: 4,
        r: 32,
    };
    let h = HostW::new(&mut rng, geo, (ty::BF16, ty::BF16, ty::BF16));
    let d = DevW::new(&q, &h);
    let t = 5;
    let sc = HcScratch::new(&q, t, geo.n, geo.s, geo.r).unwrap();
    let inp = Inputs::new(&mut rng, geo, t);
    let want = run_dev(&k, &q, &h, &d, &sc, &inp, t, true, true);

    let (x, y, a) = (
        q.upload(&inp.x).unwrap(),
        q.upload(&inp.y).unwrap(),
        q.upload(&inp.a).unwrap(),
    );
    let rs = q.alloc::<f32>(t * geo.s).unwrap();
    k.write(&q, &x, &y, &a, &rs, t, geo.n, geo.s, 1e-6).unwrap();
    assert_bitwise("write: R_out", &q.to_vec(&x).unwrap(), &want.r_out);
    assert_bitwise("write: rs", &q.to_vec(&rs).unwrap(), &want.rs);

    // aliased: a_out = the pending a, mixed = the pending y
    let (x, y, a) = (
        q.upload(&inp.x).unwrap(),
        q.upload(&inp.y).unwrap(),
        q.upload(&inp.a).unwrap(),
    );
    let lo = q.alloc::<f32>(t * geo.r).unwrap();
    let call = HcCall {
        n: geo.n,
        streams: geo.s,
        rank: geo.r,
        t,
        eps: 1e-6,
        gamma: &d.gamma,
        down: HcMat {
            bytes: &d.down,
            type_id: ty::BF16,
        },
        up: HcMat {
            bytes: &d.up,
            type_id: ty::BF16,
        },
        inject: Some(HcMat {
            bytes: &d.inj,
            type_id: ty::BF16,
        }),
    };
    k.run(&q, &call, &x, Some((&y, &a)), &rs, &lo, Some(&a), &y, &sc)
        .unwrap();
    assert_bitwise("aliased: R_out", &q.to_vec(&x).unwrap(), &want.r_out);
    assert_bitwise("aliased: lo", &q.to_vec(&lo).unwrap(), &want.lo);
    assert_bitwise("aliased: a_out", &q.to_vec(&a).unwrap(), &want.a);
    assert_bitwise("aliased: mixed", &q.to_vec(&y).unwrap(), &want.mixed);
    println!("write alone and the aliased read: bitwise the read's outputs");
}
