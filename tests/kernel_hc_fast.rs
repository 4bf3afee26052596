//! The fast hyper-connection reads (engine/kernels/hc_fast.rs, sycl/kernels/hc_fast.cpp;
//! STRATA_HC_Q8 / STRATA_GR_FUSED) on the CPU device at small geometries, every stored type they
//! take, against the f64 reference (hc_ref.rs) over the very weights they read: R_out bitwise the
//! default read's, rs / lo / a / mixed within TOL of their Σ|w·x| scale (the largest error over
//! its scale printed), a T-row call bitwise its one-row calls; the Q8_0 copy is ggml's rounding;
//! aliasing, graph replay, `covers` and the fallback, argument errors. The seeds' geometry (33
//! cases per variant) runs in `strata parity hc-q8 | gr-fused --selftest` (tests/parity_hc_fast.rs).
mod kernels_common;
use kernels_common::*;
use rand::rngs::StdRng;
use strata::kernels::hc::{self, HcCall, HcHost, HcHostMat, HcMat, HcRead, HcRef, HcScratch};
use strata::kernels::hc_fast::{
    self, covers_shape, Geometry, HcFast, HcFastCall, HcFastScratch, HcQ8, Ran, Variant,
};
use strata::kernels::hc_ref::worst_error;
use strata::quant::{self, type_id as ty};
use strata::sycl::{DeviceBuffer, Queue};

/// The bound: |kernel - reference| <= TOL * the output's error scale (as tests/kernel_hc.rs).
const TOL: f64 = 4e-6;
const EPS: f32 = 1e-6;

#[derive(Clone, Copy, Debug)]
struct Geo {
    n: usize,
    s: usize,
    r: usize,
}

/// One read site's weights as stored (down, inject, up types) and, for the Q8 read, the copies.
struct Site {
    geo: Geo,
    v: Variant,
    types: (u32, u32, u32),
    down: Vec<u8>,
    up: Vec<u8>,
    inj: Vec<u8>,
    gamma: Vec<f32>,
    q8_down: Vec<u8>,
    q8_up: Vec<u8>,
}

impl Site {
    fn new(rng: &mut StdRng, geo: Geo, v: Variant, types: (u32, u32, u32)) -> Site {
        let k = geo.s * geo.n;
        let mat = |rng: &mut StdRng, t: u32, rows: usize, cols: usize| {
            let a = (3.0 / cols as f32).sqrt();
            quant::quantize_by_type(t, &uniform(rng, rows * cols, -a, a)).unwrap()
        };
        let down = mat(rng, types.0, geo.r, k);
        let inj = mat(rng, types.1, geo.s, k);
        let up = mat(rng, types.2, k, geo.r);
        let (q8_down, q8_up) = match v {
            Variant::Q8 => (
                hc_fast::q8_copy(types.0, &down, geo.r, k).unwrap(),
                hc_fast::q8_copy(types.2, &up, k, geo.r).unwrap(),
            ),
            Variant::Fused => (Vec::new(), Vec::new()),
        };
        Site {
            geo,
            v,
            types,
            down,
            up,
            inj,
            gamma: uniform(rng, k, 0.5, 1.5),
            q8_down,
            q8_up,
        }
    }

    fn label(&self) -> String {
        let Geo { n, s, r } = self.geo;
        let t = |x| quant::type_name(x).unwrap();
        format!(
            "{:?} n {n} S {s} r {r} stored down/inj/up {}/{}/{}",
            self.v,
            t(self.types.0),
            t(self.types.1),
            t(self.types.2)
        )
    }

    /// The reference over the weights the read takes (the Q8 read: its copies' values).
    fn reference(&self, inp: &Inputs, t: usize, pending: bool, inject: bool) -> HcRef {
        let k = self.geo.s * self.geo.n;
        let q8 = self.v == Variant::Q8;
        let (qd, qu) = if q8 {
            (
                hc_fast::q8_blocks(&self.q8_down, self.geo.r, k).unwrap(),
                hc_fast::q8_blocks(&self.q8_up, k, self.geo.r).unwrap(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let m = |bytes, type_id| HcHostMat { bytes, type_id };
        let host = HcHost {
            n: self.geo.n,
            streams: self.geo.s,
            rank: self.geo.r,
            gamma: &self.gamma,
            down: if q8 {
                m(&qd, ty::Q8_0)
            } else {
                m(&self.down, self.types.0)
            },
            up: if q8 {
                m(&qu, ty::Q8_0)
            } else {
                m(&self.up, self.types.2)
            },
            inject: inject.then_some(m(&self.inj, self.types.1)),
        };
        hc::reference(
            &host,
            &inp.x,
            pending.then_some((&inp.y[..], &inp.a[..])),
            t,
            EPS,
        )
        .unwrap()
    }
}

struct Dev {
    down: DeviceBuffer<u8>,
    up: DeviceBuffer<u8>,
    inj: DeviceBuffer<u8>,
    q8_down: DeviceBuffer<u8>,
    q8_up: DeviceBuffer<u8>,
    gamma: DeviceBuffer<f32>,
}

impl Dev {
    fn new(q: &Queue, h: &Site) -> Dev {
        // (an empty copy still gets one byte: the Fused read never touches it)
        let up = |b: &[u8]| q.upload(if b.is_empty() { &[0u8][..] } else { b }).unwrap();
        Dev {
            down: up(&h.down),
            up: up(&h.up),
            inj: up(&h.inj),
            q8_down: up(&h.q8_down),
            q8_up: up(&h.q8_up),
            gamma: q.upload(&h.gamma).unwrap(),
        }
    }

    fn call<'a>(&'a self, h: &Site, t: usize, inject: bool) -> HcFastCall<'a> {
        let m = |bytes, type_id| HcMat { bytes, type_id };
        HcFastCall {
            read: HcCall {
                n: h.geo.n,
                streams: h.geo.s,
                rank: h.geo.r,
                t,
                eps: EPS,
                gamma: &self.gamma,
                down: m(&self.down, h.types.0),
                up: m(&self.up, h.types.2),
                inject: inject.then_some(m(&self.inj, h.types.1)),
            },
            q8: (h.v == Variant::Q8).then_some(HcQ8 {
                down: &self.q8_down,
                up: &self.q8_up,
            }),
        }
    }
}

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
    fn row(&self, g: Geo, i: usize) -> Inputs {
        let k = g.s * g.n;
        Inputs {
            x: self.x[i * k..(i + 1) * k].to_vec(),
            y: self.y[i * g.n..(i + 1) * g.n].to_vec(),
            a: self.a[i * g.s..(i + 1) * g.s].to_vec(),
        }
    }
}

#[derive(Debug)]
struct Outs {
    r_out: Vec<f32>,
    rs: Vec<f32>,
    lo: Vec<f32>,
    a: Vec<f32>,
    mixed: Vec<f32>,
}

/// One read (`fast`: HcFast::run, else the default HcRead::run) into fresh buffers.
#[allow(clippy::too_many_arguments)]
fn read(
    fk: &HcFast,
    dk: &HcRead,
    q: &Queue,
    c: &HcFastCall,
    inp: &Inputs,
    pending: bool,
    inject: bool,
    fast: bool,
) -> Outs {
    read_at(fk, dk, q, c, inp, pending, inject, fast, None)
}

/// `read`, the fast read at `geo` (None: the device's own geometry).
#[allow(clippy::too_many_arguments)]
fn read_at(
    fk: &HcFast,
    dk: &HcRead,
    q: &Queue,
    c: &HcFastCall,
    inp: &Inputs,
    pending: bool,
    inject: bool,
    fast: bool,
    geo: Option<Geometry>,
) -> Outs {
    let (t, g) = (c.read.t, (c.read.n, c.read.streams, c.read.rank));
    let x = q.upload(&inp.x).unwrap();
    let (y, a) = (q.upload(&inp.y).unwrap(), q.upload(&inp.a).unwrap());
    let nan = |n: usize| q.upload(&vec![f32::NAN; n]).unwrap();
    let (rs, lo, a_out, mixed) = (nan(t * g.1), nan(t * g.2), nan(t * g.1), nan(t * g.0));
    if fast {
        let sc = HcFastScratch::new(q, g.0, g.1, g.2).unwrap();
        let p = pending.then_some((&y, &a));
        let geo = geo.unwrap_or_else(|| fk.geometry(g.0, g.2).unwrap());
        fk.run_with(
            q,
            c,
            &geo,
            &x,
            p,
            &rs,
            &lo,
            inject.then_some(&a_out),
            &mixed,
            &sc,
        )
        .unwrap();
    } else {
        let sc = HcScratch::new(q, t, g.0, g.1, g.2).unwrap();
        let p = pending.then_some((&y, &a));
        dk.run(
            q,
            &c.read,
            &x,
            p,
            &rs,
            &lo,
            inject.then_some(&a_out),
            &mixed,
            &sc,
        )
        .unwrap();
    }
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

/// [rs, lo, a, mixed]: the largest error over its scale.
fn errors(o: &Outs, w: &HcRef) -> [f64; 4] {
    [
        worst_error(&o.rs, &w.rs, &w.rs_mag),
        worst_error(&o.lo, &w.lo, &w.lo_mag),
        worst_error(&o.a, &w.a, &w.a_mag),
        worst_error(&o.mixed, &w.mixed, &w.mixed_mag),
    ]
}

const NAMES: [&str; 4] = ["rs", "lo", "a", "mixed"];
const ALL_MODES: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

/// Every (T, pending, inject) case of one site: parity, R_out bitwise the default read's, each
/// T-row call bitwise its one-row calls. Prints the largest errors.
fn cases(fk: &HcFast, dk: &HcRead, q: &Queue, rng: &mut StdRng, h: &Site, ts: &[usize]) {
    let d = Dev::new(q, h);
    let mut worst = [0f64; 4];
    let mut n_cases = 0;
    let Geo { n, s, r } = h.geo;
    for &t in ts {
        for (pending, inject) in ALL_MODES {
            let label = format!("{} T {t} pending {pending} inject {inject}", h.label());
            let inp = Inputs::new(rng, h.geo, t);
            let c = d.call(h, t, inject);
            covers_shape(
                h.v,
                n,
                s,
                r,
                t,
                h.types.0,
                inject.then_some(h.types.1),
                h.types.2,
            )
            .unwrap_or_else(|e| panic!("{label}: not covered: {e}"));
            let got = read(fk, dk, q, &c, &inp, pending, inject, true);
            let want = h.reference(&inp, t, pending, inject);
            assert_bitwise(&format!("{label}: R_out = ref"), &got.r_out, &want.r_out);
            let dflt = read(fk, dk, q, &c, &inp, pending, inject, false);
            assert_bitwise(
                &format!("{label}: R_out = default"),
                &got.r_out,
                &dflt.r_out,
            );
            // the other kind of device's geometry (a GPU's rank split on the CPU device)
            let other = Geometry::other(n, r, fk.on_gpu()).unwrap();
            let got2 = read_at(fk, dk, q, &c, &inp, pending, inject, true, Some(other));
            assert_bitwise(
                &format!("{label}: R_out at {other:?}"),
                &got2.r_out,
                &want.r_out,
            );
            for (o, at) in [(&got, "own geometry"), (&got2, "the other geometry")] {
                let e = errors(o, &want);
                for i in 0..4 {
                    assert!(
                        e[i] <= TOL,
                        "{label} ({at}): {} error {:.3e} of its scale > bound {TOL:.0e}",
                        NAMES[i],
                        e[i]
                    );
                    worst[i] = worst[i].max(e[i]);
                }
            }
            n_cases += 1;
            for i in (0..t).filter(|_| t > 1) {
                let c1 = d.call(h, 1, inject);
                let one = read(fk, dk, q, &c1, &inp.row(h.geo, i), pending, inject, true);
                let l = format!("{label}: row {i} alone");
                let k = s * n;
                assert_bitwise(&l, &one.r_out, &got.r_out[i * k..(i + 1) * k]);
                assert_bitwise(&l, &one.rs, &got.rs[i * s..(i + 1) * s]);
                assert_bitwise(&l, &one.lo, &got.lo[i * r..(i + 1) * r]);
                if inject {
                    assert_bitwise(&l, &one.a, &got.a[i * s..(i + 1) * s]);
                }
                assert_bitwise(&l, &one.mixed, &got.mixed[i * n..(i + 1) * n]);
            }
        }
    }
    println!(
        "{}: {n_cases} cases, max error / scale: rs {:.2e} lo {:.2e} a {:.2e} mixed {:.2e} \
         (bound {TOL:.0e}), both geometries; R_out = default read's; T-row calls bitwise the \
         one-row calls",
        h.label(),
        worst[0],
        worst[1],
        worst[2],
        worst[3]
    );
}

#[test]
fn fast_read_small_geometries() {
    let (ctx, q) = setup();
    let (fk, dk) = (HcFast::new(&ctx).unwrap(), HcRead::new(&ctx).unwrap());
    let mut rng = rng("hc_fast_small");
    let ts: Vec<usize> = (1..=8).collect();
    // one slab per stream (n 64, n 96 with 3 streams, n 128), and n 2592: three slabs of 864
    // columns per stream (the widest multiple of 32 dividing n under WMAX); the rank in 2 (r 64)
    // and 5 (r 160) parts at a GPU's geometry; 10 row groups of 32 at r 320
    let geos = [
        Geo { n: 64, s: 4, r: 32 },
        Geo { n: 96, s: 3, r: 64 },
        Geo {
            n: 128,
            s: 2,
            r: 160,
        },
        Geo {
            n: 64,
            s: 4,
            r: 320,
        },
        Geo {
            n: 2592,
            s: 2,
            r: 32,
        },
    ];
    for (gi, &geo) in geos.iter().enumerate() {
        let ts: &[usize] = if gi >= 2 { &[1, 3, 8] } else { &ts };
        // (four modules: the W_down / W_up format and the injection rows' type are -D options;
        // the injection rows of every type they take)
        for (v, types) in [
            (Variant::Fused, (ty::BF16, ty::BF16, ty::BF16)),
            (Variant::Fused, (ty::F16, ty::F32, ty::F16)),
            (Variant::Fused, (ty::F32, ty::Q8_0, ty::F32)),
            (Variant::Q8, (ty::BF16, ty::BF16, ty::BF16)),
            (Variant::Q8, (ty::F16, ty::BF16, ty::F16)),
            (Variant::Q8, (ty::Q8_0, ty::BF16, ty::Q8_0)),
        ] {
            let h = Site::new(&mut rng, geo, v, types);
            cases(&fk, &dk, &q, &mut rng, &h, ts);
        }
    }
}

/// q8_copy is engine/quant's Q8_0 (ggml's quantize_row_q8_0_ref) of the stored values, reordered
/// as quants then scales; the GGUF's own Q8_0 blocks are reordered, never requantized; q8_blocks
/// is its inverse.
#[test]
fn q8_copy_is_ggml_rounding_reordered() {
    let mut rng = rng("hc_fast_q8_copy");
    let (rows, cols) = (6, 96);
    let vals = uniform(&mut rng, rows * cols, -0.3, 0.3);
    for t in [ty::F32, ty::F16, ty::BF16] {
        let stored = quant::quantize_by_type(t, &vals).unwrap();
        let mut deq = vec![0f32; rows * cols];
        quant::dequantize_by_type(t, &stored, &mut deq).unwrap();
        let blocks = quant::quantize_by_type(ty::Q8_0, &deq).unwrap();
        let copy = hc_fast::q8_copy(t, &stored, rows, cols).unwrap();
        assert_eq!(copy.len(), hc_fast::q8_copy_bytes(rows, cols));
        assert_eq!(
            hc_fast::q8_blocks(&copy, rows, cols).unwrap(),
            blocks,
            "{t}"
        );
        // the layout: every quant row-major, then every scale
        for b in 0..rows * cols / 32 {
            assert_eq!(&copy[32 * b..32 * b + 32], &blocks[34 * b + 2..34 * b + 34]);
            let at = rows * cols + 2 * b;
            assert_eq!(&copy[at..at + 2], &blocks[34 * b..34 * b + 2]);
        }
    }
    // ggml's rounding by hand: amax 127 gives d = 1 (exact in f16), q = round half away from 0
    let mut row = vec![0f32; 32];
    row[0] = 127.0;
    row[1] = 2.5;
    row[2] = -2.5;
    row[3] = 0.49;
    let copy = hc_fast::q8_copy(
        ty::F32,
        &quant::quantize_by_type(ty::F32, &row).unwrap(),
        1,
        32,
    )
    .unwrap();
    assert_eq!(&copy[..4], &[127u8, 3, (-3i8) as u8, 0]);
    assert_eq!(half::f16::from_le_bytes([copy[32], copy[33]]).to_f32(), 1.0);
    // Q8_0 as stored: the same blocks back, bit for bit (a requantized -127 * d block would
    // round its f16 scale again)
    let q8 = quant::quantize_by_type(ty::Q8_0, &vals).unwrap();
    let copy = hc_fast::q8_copy(ty::Q8_0, &q8, rows, cols).unwrap();
    assert_eq!(hc_fast::q8_blocks(&copy, rows, cols).unwrap(), q8);
    assert!(hc_fast::q8_blocks(&copy[1..], rows, cols).is_err());
    // rows that are not whole blocks, bytes of the wrong length
    assert!(hc_fast::q8_copy(ty::F32, &[0u8; 4 * 40], 1, 40).is_err());
    assert!(hc_fast::q8_copy(ty::Q8_0, &q8[..34], rows, cols).is_err());
    assert!(hc_fast::q8_copy(ty::Q4_K, &[0u8; 144], 1, 256).is_err());
    println!("q8_copy: F32 / F16 / BF16 = ggml's Q8_0 reordered; Q8_0 kept bit for bit");
}

/// The read with a_out in the pending a's buffer and mixed in y's (as the engine calls it) is
/// bitwise the read with separate buffers; a recorded graph replayed three times is bitwise the
/// direct launches (the arrival counter is back at 0 after each).
#[test]
fn fast_read_aliasing_and_graph_replay() {
    let (ctx, q) = setup();
    let (fk, dk) = (HcFast::new(&ctx).unwrap(), HcRead::new(&ctx).unwrap());
    let mut rng = rng("hc_fast_alias");
    let geo = Geo {
        n: 320,
        s: 4,
        r: 64,
    };
    for v in [Variant::Fused, Variant::Q8] {
        let h = Site::new(&mut rng, geo, v, (ty::BF16, ty::BF16, ty::BF16));
        let d = Dev::new(&q, &h);
        let t = 5;
        let c = d.call(&h, t, true);
        let inp = Inputs::new(&mut rng, geo, t);
        let want = read(&fk, &dk, &q, &c, &inp, true, true, true);
        let sc = HcFastScratch::new(&q, geo.n, geo.s, geo.r).unwrap();
        let (x, y, a) = (
            q.upload(&inp.x).unwrap(),
            q.upload(&inp.y).unwrap(),
            q.upload(&inp.a).unwrap(),
        );
        let (rs, lo) = (
            q.alloc::<f32>(t * geo.s).unwrap(),
            q.alloc::<f32>(t * geo.r).unwrap(),
        );
        fk.run(&q, &c, &x, Some((&y, &a)), &rs, &lo, Some(&a), &y, &sc)
            .unwrap();
        let l = format!("{v:?} aliased");
        assert_bitwise(&format!("{l}: R_out"), &q.to_vec(&x).unwrap(), &want.r_out);
        assert_bitwise(&format!("{l}: rs"), &q.to_vec(&rs).unwrap(), &want.rs);
        assert_bitwise(&format!("{l}: lo"), &q.to_vec(&lo).unwrap(), &want.lo);
        assert_bitwise(&format!("{l}: a_out"), &q.to_vec(&a).unwrap(), &want.a);
        assert_bitwise(&format!("{l}: mixed"), &q.to_vec(&y).unwrap(), &want.mixed);

        // graph: x reset to the inputs before each replay
        let x0 = q.upload(&inp.x).unwrap();
        let (y, a) = (q.upload(&inp.y).unwrap(), q.upload(&inp.a).unwrap());
        let (a_out, mixed) = (
            q.alloc::<f32>(t * geo.s).unwrap(),
            q.alloc::<f32>(t * geo.n).unwrap(),
        );
        let g = q
            .record(|q| {
                fk.run(
                    q,
                    &c,
                    &x,
                    Some((&y, &a)),
                    &rs,
                    &lo,
                    Some(&a_out),
                    &mixed,
                    &sc,
                )
            })
            .unwrap();
        for i in 0..3 {
            q.copy(&x0, &x).unwrap();
            q.fill(&mixed, f32::NAN).unwrap();
            q.replay(&g).unwrap();
            let l = format!("{v:?} graph replay {i}");
            assert_bitwise(&format!("{l}: R_out"), &q.to_vec(&x).unwrap(), &want.r_out);
            assert_bitwise(&format!("{l}: lo"), &q.to_vec(&lo).unwrap(), &want.lo);
            assert_bitwise(&format!("{l}: a"), &q.to_vec(&a_out).unwrap(), &want.a);
            assert_bitwise(
                &format!("{l}: mixed"),
                &q.to_vec(&mixed).unwrap(),
                &want.mixed,
            );
        }
    }
    println!("aliased a_out / mixed and 3 graph replays: bitwise the direct read, both variants");
}

/// What the kernels do not take is named by `covers`, refused by `run` (nothing launched), and
/// run by the default read through `run_or_default`, bitwise.
#[test]
fn fast_read_covers_and_falls_back() {
    let ok = |v, n, s, r, t, d, i, u| covers_shape(v, n, s, r, t, d, i, u);
    let bf = ty::BF16;
    let fused = Variant::Fused;
    assert!(ok(fused, 2560, 4, 320, 8, bf, Some(bf), bf).is_ok());
    assert!(ok(
        Variant::Q8,
        2560,
        4,
        320,
        1,
        ty::Q8_0,
        Some(ty::Q8_0),
        ty::F16
    )
    .is_ok());
    for (e, want) in [
        (ok(fused, 2560, 4, 320, 9, bf, Some(bf), bf), "9 rows"),
        (ok(fused, 2560, 4, 320, 0, bf, Some(bf), bf), "0 rows"),
        (ok(fused, 2560, 17, 320, 1, bf, Some(bf), bf), "17 streams"),
        (ok(fused, 2576, 4, 320, 1, bf, Some(bf), bf), "n_embd 2576"),
        (ok(fused, 2560, 4, 300, 1, bf, Some(bf), bf), "rank 300"),
        (ok(fused, 2560, 4, 320, 1, ty::Q8_0, None, ty::Q8_0), "Q8_0"),
        (ok(fused, 2560, 4, 320, 1, bf, None, ty::F16), "one type"),
        (ok(Variant::Q8, 2560, 4, 320, 1, ty::Q4_K, None, bf), "Q4_K"),
        (
            ok(fused, 2560, 4, 320, 1, bf, Some(ty::Q4_K), bf),
            "injection",
        ),
    ] {
        let e = e.expect_err(want);
        assert!(e.contains(want), "{e:?} should name {want:?}");
    }

    let (ctx, q) = setup();
    let (fk, dk) = (HcFast::new(&ctx).unwrap(), HcRead::new(&ctx).unwrap());
    let mut rng = rng("hc_fast_fallback");
    // n 80: not a multiple of 32 (the default read takes it); T 9 at a covered geometry
    for (geo, t) in [
        (Geo { n: 80, s: 4, r: 32 }, 3),
        (Geo { n: 64, s: 2, r: 32 }, 9),
    ] {
        for v in [Variant::Fused, Variant::Q8] {
            let h = Site::new(&mut rng, geo, v, (bf, bf, bf));
            let d = Dev::new(&q, &h);
            let c = d.call(&h, t, true);
            let why = hc_fast::covers(&c).unwrap_err();
            let inp = Inputs::new(&mut rng, geo, t);
            let want = read(&fk, &dk, &q, &c, &inp, true, true, false);
            let sc = HcFastScratch::new(&q, geo.n, geo.s, geo.r).unwrap();
            let dsc = HcScratch::new(&q, t, geo.n, geo.s, geo.r).unwrap();
            let (x, y, a) = (
                q.upload(&inp.x).unwrap(),
                q.upload(&inp.y).unwrap(),
                q.upload(&inp.a).unwrap(),
            );
            let nan = |n: usize| q.upload(&vec![f32::NAN; n]).unwrap();
            let (rs, lo, ao, mx) = (
                nan(t * geo.s),
                nan(t * geo.r),
                nan(t * geo.s),
                nan(t * geo.n),
            );
            let e = fk
                .run(&q, &c, &x, Some((&y, &a)), &rs, &lo, Some(&ao), &mx, &sc)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&why), "{e} / {why}");
            assert!(q.to_vec(&x).unwrap() == inp.x, "run refused but wrote x");
            let ran = fk
                .run_or_default(
                    &dk,
                    &q,
                    &c,
                    &x,
                    Some((&y, &a)),
                    &rs,
                    &lo,
                    Some(&ao),
                    &mx,
                    &sc,
                    &dsc,
                )
                .unwrap();
            assert_eq!(ran, Ran::Default);
            let l = format!("{v:?} fallback ({why})");
            assert_bitwise(&format!("{l}: R_out"), &q.to_vec(&x).unwrap(), &want.r_out);
            assert_bitwise(&format!("{l}: rs"), &q.to_vec(&rs).unwrap(), &want.rs);
            assert_bitwise(&format!("{l}: lo"), &q.to_vec(&lo).unwrap(), &want.lo);
            assert_bitwise(&format!("{l}: a"), &q.to_vec(&ao).unwrap(), &want.a);
            assert_bitwise(&format!("{l}: mixed"), &q.to_vec(&mx).unwrap(), &want.mixed);
            println!("{l}: bitwise the default read");
        }
    }
}

/// The reference with one weight, scale or gamma changed must break the bound against the
/// kernel's outputs on the true weights (each matrix, both variants); and the Q8 read against the
/// reference of the unrounded weights must too (it reads the copies).
#[test]
fn fast_read_power_check() {
    let (ctx, q) = setup();
    let (fk, dk) = (HcFast::new(&ctx).unwrap(), HcRead::new(&ctx).unwrap());
    let mut rng = rng("hc_fast_power");
    let geo = Geo {
        n: 256,
        s: 4,
        r: 32,
    };
    let (t, k) = (3, geo.s * geo.n);
    for v in [Variant::Fused, Variant::Q8] {
        let h = Site::new(&mut rng, geo, v, (ty::BF16, ty::BF16, ty::BF16));
        let d = Dev::new(&q, &h);
        let inp = Inputs::new(&mut rng, geo, t);
        let got = read(&fk, &dk, &q, &d.call(&h, t, true), &inp, true, true, true);
        let base = errors(&got, &h.reference(&inp, t, true, true));
        assert!(base.iter().all(|&e| e <= TOL), "{v:?}: clean {base:?}");
        let mut seen = Vec::new();
        for (what, out) in [("down", 1), ("inject", 2), ("up", 3), ("gamma", 1)] {
            let mut hp = h.clone_site();
            let bump = |b: &mut Vec<u8>, e: usize, by: f32| {
                let w = half::bf16::from_le_bytes([b[2 * e], b[2 * e + 1]]).to_f32() + by;
                b[2 * e..2 * e + 2].copy_from_slice(&half::bf16::from_f32(w).to_le_bytes());
            };
            let scale4 = |b: &mut Vec<u8>, at: usize| {
                let d = half::f16::from_le_bytes([b[at], b[at + 1]]).to_f32() * 4.0;
                b[at..at + 2].copy_from_slice(&half::f16::from_f32(d).to_le_bytes());
            };
            let (ad, au) = (
                (3.0 / k as f32).sqrt() * 4.0,
                (3.0 / geo.r as f32).sqrt() * 8.0,
            );
            match (what, v) {
                ("down", Variant::Q8) => scale4(&mut hp.q8_down, geo.r * k + 2 * (5 * k / 32 + 3)),
                ("down", _) => bump(&mut hp.down, 5 * k + 77, ad),
                ("up", Variant::Q8) => scale4(&mut hp.q8_up, k * geo.r + 2 * (3 * geo.n + 7)),
                ("up", _) => bump(&mut hp.up, (3 * geo.n + 7) * geo.r + 5, au),
                ("inject", _) => bump(&mut hp.inj, 2 * k + 130, ad),
                _ => hp.gamma[100] += 0.5,
            }
            let e = errors(&got, &hp.reference(&inp, t, true, true));
            assert!(
                e[out] > TOL,
                "{v:?}: one {what} value changed and {} still within the bound ({:.3e})",
                NAMES[out],
                e[out]
            );
            seen.push(format!("{what} -> {} {:.1e}", NAMES[out], e[out]));
        }
        if v == Variant::Q8 {
            let exact = Site {
                v: Variant::Fused,
                ..h.clone_site()
            };
            let e = errors(&got, &exact.reference(&inp, t, true, true));
            assert!(
                e[1] > TOL,
                "the Q8 read within the bound of the unrounded weights: {e:?}"
            );
            seen.push(format!("unrounded weights -> lo {:.1e}", e[1]));
        }
        println!("power check {v:?} (bound {TOL:.0e}): {}", seen.join(", "));
    }
}

impl Site {
    fn clone_site(&self) -> Site {
        Site {
            geo: self.geo,
            v: self.v,
            types: self.types,
            down: self.down.clone(),
            up: self.up.clone(),
            inj: self.inj.clone(),
            gamma: self.gamma.clone(),
            q8_down: self.q8_down.clone(),
            q8_up: self.q8_up.clone(),
        }
    }
}

/// Shape errors name the argument and launch nothing.
#[test]
fn fast_read_argument_errors() {
    let (ctx, q) = setup();
    let fk = HcFast::new(&ctx).unwrap();
    let mut rng = rng("hc_fast_errors");
    let geo = Geo { n: 64, s: 4, r: 32 };
    let h = Site::new(&mut rng, geo, Variant::Q8, (ty::BF16, ty::BF16, ty::BF16));
    let d = Dev::new(&q, &h);
    let t = 2;
    let kc = geo.s * geo.n;
    let sc = HcFastScratch::new(&q, geo.n, geo.s, geo.r).unwrap();
    let other = HcFastScratch::new(&q, geo.n, geo.s, 64).unwrap();
    let (x, short) = (
        q.alloc::<f32>(t * kc).unwrap(),
        q.alloc::<f32>(t * kc - 1).unwrap(),
    );
    let (rs, lo, a, mixed) = (
        q.alloc::<f32>(t * geo.s).unwrap(),
        q.alloc::<f32>(t * geo.r).unwrap(),
        q.alloc::<f32>(t * geo.s).unwrap(),
        q.alloc::<f32>(t * geo.n).unwrap(),
    );
    let err = |c: &HcFastCall, x: &DeviceBuffer<f32>, ao: Option<&DeviceBuffer<f32>>, s| {
        fk.run(&q, c, x, None, &rs, &lo, ao, &mixed, s)
            .unwrap_err()
            .to_string()
    };
    let c = d.call(&h, t, true);
    let e = err(&c, &short, Some(&a), &sc);
    assert!(e.contains("x holds"), "{e}");
    let e = err(&c, &x, Some(&a), &other);
    assert!(e.contains("scratch"), "{e}");
    let head = d.call(&h, t, false);
    let e = err(&head, &x, Some(&a), &sc);
    assert!(e.contains("a_out"), "{e}");
    let tiny = q.upload(&[0u8; 64]).unwrap();
    let mut c2 = c;
    c2.q8 = Some(HcQ8 {
        down: &tiny,
        up: &d.q8_up,
    });
    let e = err(&c2, &x, Some(&a), &sc);
    assert!(e.contains("Q8_0 down"), "{e}");
    println!("argument errors: {e}");
}
