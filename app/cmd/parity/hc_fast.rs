//! `strata parity hc-q8 --selftest` / `strata parity gr-fused --selftest`: the fast
//! hyper-connection reads (engine/kernels/hc_fast.rs; STRATA_HC_Q8 / STRATA_GR_FUSED) at the
//! seeds' geometry (Flash-Next: n 2560, S 4, r 320, BF16 weights as stored) on the real device.
//!
//! 33 cases: T = 1..8 x pending write on / off x injection rows on / off, and the head mixer (its
//! own weights, no injection rows). Each case passes when
//! - rs, lo, the injection and mixed are within TOL of their error scale (hc_ref.rs: the Σ|w·x| of
//!   the sums behind them) of the f64 reference computed from the very weights the read takes
//!   (Q8_0: the copy's blocks; fused: the BF16 bytes), and R_out is bitwise the f32 H + a * y;
//! - R_out is bitwise the default read's (HcRead) on the same inputs;
//! - a recorded graph of the read, replayed twice, gives bitwise the direct launches' outputs.
//!
//! Then the checks that the test can fail: the fallback (shapes `covers` refuses run the default
//! read, bitwise) and the power checks (one changed scale or weight in the device's bytes must
//! break the bound; the Q8_0 read must differ from the reference of the unrounded BF16 weights).

use crate::cmd::common;
use anyhow::{bail, Context as _, Result};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::io::Write;
use strata::kernels::hc::{self, HcCall, HcHost, HcHostMat, HcMat, HcRead, HcRef, HcScratch};
use strata::kernels::hc_fast::{
    self, Geometry, HcFast, HcFastCall, HcFastScratch, HcQ8, Ran, Variant,
};
use strata::kernels::hc_ref;
use strata::quant::type_id as ty;
use strata::sycl::{self, Context, Device, DeviceBuffer, Queue};

const N: usize = 2560;
const S: usize = 4;
const R: usize = 320;
const EPS: f32 = 1e-6;
/// The bound: |kernel - reference| <= TOL * the output's error scale. The f32 sums are chains of
/// at most 40 fmas per lane, a 16-lane tree, <= 10 slabs, S streams: ~2^-24 * depth of Σ|w·x|,
/// far under TOL; one changed weight moves an output by ~1e-3 of its scale (the power checks).
const TOL: f64 = 4e-6;

/// The device, its queue and both reads' kernels.
pub struct Dev {
    pub dev: Device,
    pub ctx: Context,
    pub q: Queue,
    pub hc: HcRead,
    pub fast: HcFast,
}

impl Dev {
    pub fn new() -> Result<Dev> {
        let mut out = common::stdout();
        let dev = sycl::default_device().context("no SYCL device (see `strata devices`)")?;
        let ctx = Context::new(std::slice::from_ref(&dev))?;
        let q = ctx.queue(&dev)?;
        writeln!(out, "device: {}", dev.info()?.name)?;
        Ok(Dev {
            hc: HcRead::new(&ctx)?,
            fast: HcFast::new(&ctx)?,
            dev,
            ctx,
            q,
        })
    }
}

/// BF16 bytes of a (rows, cols) matrix of uniform values at unit-output scale.
pub fn rand_bf16(rng: &mut StdRng, rows: usize, cols: usize) -> Vec<u8> {
    let a = (3.0 / cols as f32).sqrt();
    (0..rows * cols)
        .flat_map(|_| half::bf16::from_f32(rng.gen_range(-a..a)).to_le_bytes())
        .collect()
}

/// One read site's weights: host bytes (BF16 as stored, and the Q8_0 copies) and their device
/// copies.
struct Site {
    down: Vec<u8>,
    up: Vec<u8>,
    inj: Vec<u8>,
    gamma: Vec<f32>,
    q8_down: Vec<u8>, // hc_fast::q8_copy of down
    q8_up: Vec<u8>,
    dev: [DeviceBuffer<u8>; 5], // down, up, inj, q8_down, q8_up
    d_gamma: DeviceBuffer<f32>,
}

impl Site {
    fn new(q: &Queue, rng: &mut StdRng) -> Result<Site> {
        let k = S * N;
        let down = rand_bf16(rng, R, k);
        let up = rand_bf16(rng, k, R);
        let inj = rand_bf16(rng, S, k);
        let gamma: Vec<f32> = (0..k).map(|_| rng.gen_range(0.5..1.5)).collect();
        let q8_down = hc_fast::q8_copy(ty::BF16, &down, R, k)?;
        let q8_up = hc_fast::q8_copy(ty::BF16, &up, k, R)?;
        let dev = [
            q.upload(&down)?,
            q.upload(&up)?,
            q.upload(&inj)?,
            q.upload(&q8_down)?,
            q.upload(&q8_up)?,
        ];
        Ok(Site {
            d_gamma: q.upload(&gamma)?,
            down,
            up,
            inj,
            gamma,
            q8_down,
            q8_up,
            dev,
        })
    }

    fn call(&self, t: usize, inject: bool, v: Variant) -> HcFastCall<'_> {
        let bf = |b| HcMat {
            bytes: b,
            type_id: ty::BF16,
        };
        HcFastCall {
            read: HcCall {
                n: N,
                streams: S,
                rank: R,
                t,
                eps: EPS,
                gamma: &self.d_gamma,
                down: bf(&self.dev[0]),
                up: bf(&self.dev[1]),
                inject: inject.then_some(bf(&self.dev[2])),
            },
            q8: (v == Variant::Q8).then_some(HcQ8 {
                down: &self.dev[3],
                up: &self.dev[4],
            }),
        }
    }

    /// The reference over the weights variant `v` reads (`exact`: the BF16 bytes whatever v).
    fn reference(&self, inp: &Inputs, inject: bool, v: Variant, exact: bool) -> Result<HcRef> {
        let k = S * N;
        let (qd, qu) = (
            hc_fast::q8_blocks(&self.q8_down, R, k)?,
            hc_fast::q8_blocks(&self.q8_up, k, R)?,
        );
        let m = |b, t| HcHostMat {
            bytes: b,
            type_id: t,
        };
        let q8 = v == Variant::Q8 && !exact;
        let host = HcHost {
            n: N,
            streams: S,
            rank: R,
            gamma: &self.gamma,
            down: if q8 {
                m(&qd, ty::Q8_0)
            } else {
                m(&self.down, ty::BF16)
            },
            up: if q8 {
                m(&qu, ty::Q8_0)
            } else {
                m(&self.up, ty::BF16)
            },
            inject: inject.then_some(m(&self.inj, ty::BF16)),
        };
        let p = inp.pending.then_some((&inp.y[..], &inp.a[..]));
        Ok(hc::reference(&host, &inp.x, p, inp.t, EPS)?)
    }
}

/// One case's inputs.
struct Inputs {
    t: usize,
    pending: bool,
    x: Vec<f32>, // (t, S, n)
    y: Vec<f32>, // (t, n)
    a: Vec<f32>, // (t, S)
}

impl Inputs {
    fn new(rng: &mut StdRng, t: usize, pending: bool) -> Inputs {
        let mut v = |n: usize, lo: f32, hi: f32| -> Vec<f32> {
            (0..n).map(|_| rng.gen_range(lo..hi)).collect()
        };
        Inputs {
            t,
            pending,
            x: v(t * S * N, -2.0, 2.0),
            y: v(t * N, -1.0, 1.0),
            a: v(t * S, 0.1, 1.9),
        }
    }
}

/// A read's device buffers (x holds the inputs until a read updates it) and its five outputs.
struct Bufs {
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    a: DeviceBuffer<f32>,
    rs: DeviceBuffer<f32>,
    lo: DeviceBuffer<f32>,
    a_out: DeviceBuffer<f32>,
    mixed: DeviceBuffer<f32>,
}

#[derive(Clone, PartialEq)]
struct Outs {
    r_out: Vec<f32>,
    rs: Vec<f32>,
    lo: Vec<f32>,
    a: Vec<f32>,
    mixed: Vec<f32>,
}

impl Bufs {
    fn new(q: &Queue, inp: &Inputs) -> Result<Bufs> {
        let t = inp.t;
        Ok(Bufs {
            x: q.upload(&inp.x)?,
            y: q.upload(&inp.y)?,
            a: q.upload(&inp.a)?,
            rs: q.upload(&vec![f32::NAN; t * S])?,
            lo: q.upload(&vec![f32::NAN; t * R])?,
            a_out: q.upload(&vec![f32::NAN; t * S])?,
            mixed: q.upload(&vec![f32::NAN; t * N])?,
        })
    }
    fn pending(&self, inp: &Inputs) -> Option<(&DeviceBuffer<f32>, &DeviceBuffer<f32>)> {
        inp.pending.then_some((&self.y, &self.a))
    }
    fn outs(&self, q: &Queue, inject: bool) -> Result<Outs> {
        Ok(Outs {
            r_out: q.to_vec(&self.x)?,
            rs: q.to_vec(&self.rs)?,
            lo: q.to_vec(&self.lo)?,
            a: if inject {
                q.to_vec(&self.a_out)?
            } else {
                Vec::new()
            },
            mixed: q.to_vec(&self.mixed)?,
        })
    }
}

/// Bitwise equality (NaN included).
fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn same_outs(a: &Outs, b: &Outs) -> bool {
    same(&a.r_out, &b.r_out)
        && same(&a.rs, &b.rs)
        && same(&a.lo, &b.lo)
        && same(&a.a, &b.a)
        && same(&a.mixed, &b.mixed)
}

/// [rs, lo, a, mixed]: the largest |got - ref| / scale of each (NaN: infinite).
fn errors(o: &Outs, w: &HcRef) -> [f64; 4] {
    let e = hc_ref::worst_error;
    [
        e(&o.rs, &w.rs, &w.rs_mag),
        e(&o.lo, &w.lo, &w.lo_mag),
        e(&o.a, &w.a, &w.a_mag),
        e(&o.mixed, &w.mixed, &w.mixed_mag),
    ]
}

const NAMES: [&str; 4] = ["rs", "lo", "a", "mixed"];

/// The fast read of one case into fresh buffers, at this device's geometry or `geo`.
fn run_fast(
    d: &Dev,
    c: &HcFastCall,
    inp: &Inputs,
    inject: bool,
    geo: Option<&Geometry>,
) -> Result<Outs> {
    let b = Bufs::new(&d.q, inp)?;
    let sc = HcFastScratch::new(&d.q, N, S, R)?;
    let g = match geo {
        Some(g) => *g,
        None => d.fast.geometry(N, R)?,
    };
    d.fast.run_with(
        &d.q,
        c,
        &g,
        &b.x,
        b.pending(inp),
        &b.rs,
        &b.lo,
        inject.then_some(&b.a_out),
        &b.mixed,
        &sc,
    )?;
    b.outs(&d.q, inject)
}

/// The default read of one case into fresh buffers.
fn run_default(d: &Dev, c: &HcCall, inp: &Inputs, inject: bool) -> Result<Outs> {
    let b = Bufs::new(&d.q, inp)?;
    let sc = HcScratch::new(&d.q, inp.t, c.n, c.streams, c.rank)?;
    d.hc.run(
        &d.q,
        c,
        &b.x,
        b.pending(inp),
        &b.rs,
        &b.lo,
        inject.then_some(&b.a_out),
        &b.mixed,
        &sc,
    )?;
    b.outs(&d.q, inject)
}

/// The fast read recorded once as a graph and replayed twice (x reset to the inputs before each
/// replay): both replays' outputs.
fn run_graph(
    d: &Dev,
    c: &HcFastCall,
    inp: &Inputs,
    inject: bool,
    geo: &Geometry,
) -> Result<[Outs; 2]> {
    let b = Bufs::new(&d.q, inp)?;
    let x0 = d.q.upload(&inp.x)?;
    let sc = HcFastScratch::new(&d.q, N, S, R)?;
    let g = d.q.record(|q| {
        d.fast.run_with(
            q,
            c,
            geo,
            &b.x,
            b.pending(inp),
            &b.rs,
            &b.lo,
            inject.then_some(&b.a_out),
            &b.mixed,
            &sc,
        )
    })?;
    let mut outs = Vec::new();
    for _ in 0..2 {
        d.q.copy(&x0, &b.x)?;
        d.q.fill(&b.mixed, f32::NAN)?;
        d.q.fill(&b.lo, f32::NAN)?;
        d.q.replay(&g)?;
        outs.push(b.outs(&d.q, inject)?);
    }
    let [a, b2]: [Outs; 2] = outs
        .try_into()
        .map_err(|_| anyhow::anyhow!("two replays"))?;
    Ok([a, b2])
}

/// One case at this device's geometry and at the other kind of device's (the CPU device's and a
/// GPU's differ in hcf_up's rank split: another summation order, both checked): (passed, line).
fn case(
    d: &Dev,
    site: &Site,
    v: Variant,
    inp: &Inputs,
    inject: bool,
    worst: &mut [f64; 4],
) -> Result<(bool, String)> {
    let c = site.call(inp.t, inject, v);
    let want = site.reference(inp, inject, v, false)?;
    let dflt = run_default(d, &c.read, inp, inject)?;
    let mut ok = true;
    let mut parts = Vec::new();
    let mine = d.fast.geometry(N, R)?;
    let other = Geometry::other(N, R, d.fast.on_gpu()).context("the other geometry")?;
    let other_name = if d.fast.on_gpu() { "CPU" } else { "GPU" };
    for (gi, geo) in [mine, other].iter().enumerate() {
        let got = run_fast(d, &c, inp, inject, Some(geo))?;
        let err = errors(&got, &want);
        let in_bound = err.iter().all(|&e| e <= TOL);
        for i in 0..4 {
            worst[i] = worst[i].max(err[i]);
        }
        let r_ref = same(&got.r_out, &want.r_out);
        let r_dflt = same(&got.r_out, &dflt.r_out);
        let [g1, g2] = run_graph(d, &c, inp, inject, geo)?;
        let graph = same_outs(&g1, &got) && same_outs(&g2, &got);
        ok &= in_bound && r_ref && r_dflt && graph;
        let errs: Vec<String> = (0..4)
            .filter(|&i| inject || i != 2)
            .map(|i| format!("{} {:.1e}", NAMES[i], err[i]))
            .collect();
        parts.push(format!(
            "{}{}; R_out = ref {} = default {}; graph x2 = direct {}",
            if gi == 0 {
                String::new()
            } else {
                format!(" | {other_name} geometry: ")
            },
            errs.join(" "),
            yn(r_ref),
            yn(r_dflt),
            yn(graph)
        ));
    }
    let line = format!(
        "{}: err/scale {}",
        if ok { "pass" } else { "FAIL" },
        parts.concat()
    );
    Ok((ok, line))
}

fn yn(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "NO"
    }
}

/// `--selftest` of one variant: the 33 cases, the fallback and the power checks; an error unless
/// every one passes.
pub fn selftest(v: Variant, family: &str) -> Result<()> {
    let mut out = common::stdout();
    let d = Dev::new()?;
    let mut rng = StdRng::seed_from_u64(match v {
        Variant::Q8 => 0x4c38,
        Variant::Fused => 0x4cf0,
    });
    let k = S * N;
    writeln!(
        out,
        "{family}: the {} read at n {N} S {S} r {R}, BF16 weights as stored{}",
        v.flag(),
        match v {
            Variant::Q8 => format!(
                ", read as their Q8_0 copies (+{:.2} MiB per read site: W_down {} + W_up {} bytes)",
                (hc_fast::q8_copy_bytes(R, k) + hc_fast::q8_copy_bytes(k, R)) as f64
                    / (1 << 20) as f64,
                hc_fast::q8_copy_bytes(R, k),
                hc_fast::q8_copy_bytes(k, R)
            ),
            Variant::Fused => String::new(),
        }
    )?;
    writeln!(
        out,
        "bound: |got - ref| <= {TOL:.0e} * the output's Σ|w·x| scale (ref: f64 over the weights \
         the read takes{})",
        if v == Variant::Q8 {
            ": the Q8_0 copy's values"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "geometry: {:?} on this device; every case again at the {} geometry {:?}",
        d.fast.geometry(N, R)?,
        if d.fast.on_gpu() {
            "CPU device's"
        } else {
            "GPU"
        },
        Geometry::other(N, R, d.fast.on_gpu()).context("the other geometry")?
    )?;
    let site = Site::new(&d.q, &mut rng)?;
    let head = Site::new(&d.q, &mut rng)?;
    let (mut passed, mut cases) = (0usize, 0usize);
    let mut worst = [0f64; 4];
    for t in 1..=8 {
        for pending in [false, true] {
            for inject in [false, true] {
                let inp = Inputs::new(&mut rng, t, pending);
                let (ok, line) = case(&d, &site, v, &inp, inject, &mut worst)?;
                cases += 1;
                passed += ok as usize;
                writeln!(
                    out,
                    "T {t} pending {:3} inject {:3}: {line}",
                    onoff(pending),
                    onoff(inject)
                )?;
            }
        }
    }
    let inp = Inputs::new(&mut rng, 4, true);
    let (ok, line) = case(&d, &head, v, &inp, false, &mut worst)?;
    cases += 1;
    passed += ok as usize;
    writeln!(
        out,
        "head mixer T 4 (own weights, pending on, no inject): {line}"
    )?;
    writeln!(
        out,
        "worst err/scale: rs {:.2e} lo {:.2e} a {:.2e} mixed {:.2e} (bound {TOL:.0e})",
        worst[0], worst[1], worst[2], worst[3]
    )?;
    writeln!(out, "{family} selftest: {passed} of {cases} cases pass")?;
    let fb = fallback(&d, &site, v, &mut rng)?;
    let pw = power(&d, &site, v, &mut rng)?;
    let checks = cases + fb.1 + pw.1;
    let ok = passed + fb.0 + pw.0;
    writeln!(
        out,
        "{family} selftest: fallback {} of {}, power checks {} of {}; {} {ok}/{checks}",
        fb.0,
        fb.1,
        pw.0,
        pw.1,
        if ok == checks { "PASS" } else { "FAIL" }
    )?;
    if ok != checks {
        bail!(
            "{family} selftest: {} of {checks} checks failed",
            checks - ok
        );
    }
    Ok(())
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Shapes `covers` refuses go to the default read through `run_or_default`, bitwise: T = 9 at the
/// seeds' geometry, and n 2576 (not a multiple of 32). Returns (passed, checks).
fn fallback(d: &Dev, site: &Site, v: Variant, rng: &mut StdRng) -> Result<(usize, usize)> {
    let mut out = common::stdout();
    let mut passed = 0;
    let sc = HcFastScratch::new(&d.q, N, S, R)?;
    // T = 9 at the seeds' geometry
    let inp = Inputs::new(rng, 9, true);
    let c = site.call(9, true, v);
    let want = run_default(d, &c.read, &inp, true)?;
    let dsc = HcScratch::new(&d.q, 9, N, S, R)?;
    let b = Bufs::new(&d.q, &inp)?;
    let ran = d.fast.run_or_default(
        &d.hc,
        &d.q,
        &c,
        &b.x,
        b.pending(&inp),
        &b.rs,
        &b.lo,
        Some(&b.a_out),
        &b.mixed,
        &sc,
        &dsc,
    )?;
    let ok = ran == Ran::Default && same_outs(&b.outs(&d.q, true)?, &want);
    passed += ok as usize;
    writeln!(
        out,
        "fallback T 9 ({}): ran {ran:?}, bitwise the default read: {}",
        hc_fast::covers(&c).err().unwrap_or_default(),
        yn(ok)
    )?;
    // n 2576: W_down (r, 4 n) and W_up (4 n, r) still whole Q8_0 rows, n not a multiple of 32
    let n2 = N + 16;
    let k2 = S * n2;
    let (down, up, inj) = (
        rand_bf16(rng, R, k2),
        rand_bf16(rng, k2, R),
        rand_bf16(rng, S, k2),
    );
    let gamma: Vec<f32> = (0..k2).map(|_| rng.gen_range(0.5..1.5)).collect();
    let (qd, qu) = (
        hc_fast::q8_copy(ty::BF16, &down, R, k2)?,
        hc_fast::q8_copy(ty::BF16, &up, k2, R)?,
    );
    let dv: Vec<DeviceBuffer<u8>> = [&down, &up, &inj, &qd, &qu]
        .iter()
        .map(|b| d.q.upload(b))
        .collect::<std::result::Result<_, _>>()?;
    let g = d.q.upload(&gamma)?;
    let t = 3;
    let bf = |b| HcMat {
        bytes: b,
        type_id: ty::BF16,
    };
    let c = HcFastCall {
        read: HcCall {
            n: n2,
            streams: S,
            rank: R,
            t,
            eps: EPS,
            gamma: &g,
            down: bf(&dv[0]),
            up: bf(&dv[1]),
            inject: Some(bf(&dv[2])),
        },
        q8: (v == Variant::Q8).then_some(HcQ8 {
            down: &dv[3],
            up: &dv[4],
        }),
    };
    let mut x = |n: usize, lo: f32, hi: f32| -> Vec<f32> {
        (0..n).map(|_| rng.gen_range(lo..hi)).collect()
    };
    let (hx, hy, ha) = (
        x(t * k2, -2.0, 2.0),
        x(t * n2, -1.0, 1.0),
        x(t * S, 0.1, 1.9),
    );
    let mut outs = Vec::new();
    for fast in [false, true] {
        let (bx, by, ba) = (d.q.upload(&hx)?, d.q.upload(&hy)?, d.q.upload(&ha)?);
        let (rs, lo, ao, mx) = (
            d.q.alloc::<f32>(t * S)?,
            d.q.alloc::<f32>(t * R)?,
            d.q.alloc::<f32>(t * S)?,
            d.q.alloc::<f32>(t * n2)?,
        );
        let dsc = HcScratch::new(&d.q, t, n2, S, R)?;
        let ran = if fast {
            let fsc = HcFastScratch::new(&d.q, n2, S, R)?;
            d.fast.run_or_default(
                &d.hc,
                &d.q,
                &c,
                &bx,
                Some((&by, &ba)),
                &rs,
                &lo,
                Some(&ao),
                &mx,
                &fsc,
                &dsc,
            )?
        } else {
            d.hc.run(
                &d.q,
                &c.read,
                &bx,
                Some((&by, &ba)),
                &rs,
                &lo,
                Some(&ao),
                &mx,
                &dsc,
            )?;
            Ran::Default
        };
        outs.push((
            ran,
            Outs {
                r_out: d.q.to_vec(&bx)?,
                rs: d.q.to_vec(&rs)?,
                lo: d.q.to_vec(&lo)?,
                a: d.q.to_vec(&ao)?,
                mixed: d.q.to_vec(&mx)?,
            },
        ));
    }
    let ok = outs[1].0 == Ran::Default && same_outs(&outs[0].1, &outs[1].1);
    passed += ok as usize;
    writeln!(
        out,
        "fallback n {n2} ({}): ran {:?}, bitwise the default read: {}",
        hc_fast::covers(&c).err().unwrap_or_default(),
        outs[1].0,
        yn(ok)
    )?;
    Ok((passed, 2))
}

/// One changed scale or weight in the bytes the device reads must break the bound against the
/// clean reference (and, Q8_0, the read against the unrounded BF16 weights' reference must be
/// out of bound: the copies are what it reads). Returns (passed, checks).
fn power(d: &Dev, site: &Site, v: Variant, rng: &mut StdRng) -> Result<(usize, usize)> {
    let mut out = common::stdout();
    let (t, k) = (2, S * N);
    let inp = Inputs::new(rng, t, true);
    let want = site.reference(&inp, true, v, false)?;
    let base = errors(
        &run_fast(d, &site.call(t, true, v), &inp, true, None)?,
        &want,
    );
    let mut passed = 0;
    let mut checks = 0;
    // (what, which buffer of site.dev, byte offset, new bytes, the output that must fail)
    let mut cases: Vec<(&str, usize, usize, Vec<u8>, usize)> = Vec::new();
    let bf = |bytes: &[u8], e: usize, by: f32| -> Vec<u8> {
        let w = half::bf16::from_le_bytes([bytes[2 * e], bytes[2 * e + 1]]).to_f32();
        half::bf16::from_f32(w + by).to_le_bytes().to_vec()
    };
    // (4 and 8 times the largest weight of the matrix)
    let (wd, wu) = ((3.0 / k as f32).sqrt() * 4.0, (3.0 / R as f32).sqrt() * 8.0);
    match v {
        Variant::Q8 => {
            // W_down row 5, block 7: its scale times 4 (the scales follow the r * k quants)
            let at = R * k + 2 * (5 * k / 32 + 7);
            let dsc = half::f16::from_le_bytes([site.q8_down[at], site.q8_down[at + 1]]);
            let x4 = half::f16::from_f32(dsc.to_f32() * 4.0)
                .to_le_bytes()
                .to_vec();
            cases.push(("W_down Q8_0 scale (row 5, block 7) x 4", 3, at, x4, 1));
            // W_up row 3 * n + 11 (column 11 of stream 3), block 4: its scale times 4
            let at = k * R + 2 * ((3 * N + 11) * R / 32 + 4);
            let dsc = half::f16::from_le_bytes([site.q8_up[at], site.q8_up[at + 1]]);
            let x4 = half::f16::from_f32(dsc.to_f32() * 4.0)
                .to_le_bytes()
                .to_vec();
            cases.push(("W_up Q8_0 scale (row 3n+11, block 4) x 4", 4, at, x4, 3));
        }
        Variant::Fused => {
            let e = 5 * k + 77;
            cases.push(("W_down BF16 weight", 0, 2 * e, bf(&site.down, e, wd), 1));
            let e = (3 * N + 11) * R + 7;
            cases.push(("W_up BF16 weight", 1, 2 * e, bf(&site.up, e, wu), 3));
        }
    }
    let e = 2 * k + 130;
    cases.push((
        "injection row BF16 weight",
        2,
        2 * e,
        bf(&site.inj, e, wd),
        2,
    ));
    for (what, buf, at, bytes, which) in cases {
        checks += 1;
        let host: &[u8] = match buf {
            0 => &site.down,
            1 => &site.up,
            2 => &site.inj,
            3 => &site.q8_down,
            _ => &site.q8_up,
        };
        let mut changed = host.to_vec();
        changed[at..at + bytes.len()].copy_from_slice(&bytes);
        d.q.upload_to(&site.dev[buf], &changed)?;
        let got = run_fast(d, &site.call(t, true, v), &inp, true, None);
        d.q.upload_to(&site.dev[buf], host)?; // restored before anything else can fail
        let err = errors(&got?, &want);
        let ok = err[which] > TOL;
        passed += ok as usize;
        writeln!(
            out,
            "power: {what}: {} err/scale {:.1e} (clean {:.1e}, bound {TOL:.0e}): {}",
            NAMES[which],
            err[which],
            base[which],
            if ok { "caught" } else { "MISSED" }
        )?;
    }
    if v == Variant::Q8 {
        checks += 1;
        let exact = site.reference(&inp, true, v, true)?;
        let err = errors(
            &run_fast(d, &site.call(t, true, v), &inp, true, None)?,
            &exact,
        );
        let ok = err[1] > TOL;
        passed += ok as usize;
        writeln!(
            out,
            "power: the Q8_0 read against the unrounded BF16 weights' reference: lo {:.1e} (must be \
             > {TOL:.0e}: the Q8_0 copies are read), mixed {:.1e}: {}",
            err[1],
            err[3],
            if ok { "yes" } else { "NO" }
        )?;
    }
    Ok((passed, checks))
}
