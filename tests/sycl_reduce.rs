//! The foundation reductions (sycl/kernels/reduce.cpp) on the real CPU device against the f64
//! Rust references, plus -D build options, event profiling and graph replay.

use rand::{Rng, SeedableRng};
use std::sync::OnceLock;
use strata::sycl::reduce_ref::{partials_ref, sum_ref};
use strata::sycl::{self, kernels, Arg, Context, Device, Kernel, NdRange, Queue};

const WG: usize = 256;

struct Fixture {
    dev: Device,
    ctx: Context,
    q: Queue,
    sg_sum: Kernel,
    arrival: Kernel,
}

/// One built module per test binary: the build is the expensive part.
fn fx() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dev = sycl::cpu_device().expect("the CPU SYCL device (run `make setup`)");
        let ctx = Context::new(std::slice::from_ref(&dev)).expect("context");
        let q = ctx.profiling_queue(&dev).expect("queue");
        let m = ctx
            .module(&kernels::REDUCE, &["-DCFG_WG=256"])
            .expect("reduce.cpp builds");
        Fixture {
            sg_sum: m.kernel("reduce_sg_sum").expect("kernel"),
            arrival: m.kernel("reduce_arrival_sum").expect("kernel"),
            dev,
            ctx,
            q,
        }
    })
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

fn fresh_seed() -> u64 {
    // Fresh inputs each run (printed, so a failure can be replayed).
    let s = rand::random::<u64>();
    println!("seed {s}");
    s
}

/// The f32 error bound of the kernels' summation tree: per-lane sequential chain, the 16-lane
/// sub-group tree, the sub-group partials and the group partials, each step adding at most eps.
fn bound(x: &[f32], groups: usize) -> f64 {
    let depth = x.len().div_ceil(groups * WG) + 16 + WG / 16 + groups;
    let abs: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
    depth as f64 * f32::EPSILON as f64 * abs + f64::MIN_POSITIVE
}

/// Two launches of reduce_sg_sum: partials over `groups` groups, then one group over them.
fn sg_sum(f: &Fixture, x: &[f32], groups: usize) -> (Vec<f32>, f32) {
    let q = &f.q;
    let xb = q.upload(x).unwrap(); // (n,)
    let partial = q.alloc::<f32>(groups).unwrap(); // (groups,)
    let total = q.alloc::<f32>(1).unwrap(); // (1,)
    let n = x.len() as i32;
    q.launch(
        &f.sg_sum,
        NdRange::groups(groups, WG),
        &[Arg::buf(&xb), Arg::buf(&partial), Arg::i32(n)],
    )
    .unwrap();
    q.launch(
        &f.sg_sum,
        NdRange::groups(1, WG),
        &[
            Arg::buf(&partial),
            Arg::buf(&total),
            Arg::i32(groups as i32),
        ],
    )
    .unwrap();
    (q.to_vec(&partial).unwrap(), q.to_vec(&total).unwrap()[0])
}

#[test]
fn sub_group_sum_matches_reference() {
    let f = fx();
    let seed = fresh_seed();
    for (i, &(n, groups)) in [(1, 1), (1000, 1), (4097, 7), (100_003, 13), (1 << 20, 64)]
        .iter()
        .enumerate()
    {
        let x = random(n, seed + i as u64);
        let (partials, total) = sg_sum(f, &x, groups);
        let pref = partials_ref(&x, groups, WG);
        let max_p = partials
            .iter()
            .zip(&pref)
            .map(|(&a, &b)| (a as f64 - b).abs())
            .fold(0.0, f64::max);
        let r = sum_ref(&x, 1.0);
        let err = (total as f64 - r).abs();
        println!(
            "reduce_sg_sum n={n:>8} groups={groups:>3}: sum {total:.6} ref {r:.6} abs err {err:.3e} \
             (bound {:.3e}), max partial err {max_p:.3e}",
            bound(&x, groups)
        );
        assert!(err <= bound(&x, groups), "n={n}: error {err} over bound");
        assert!(max_p <= bound(&x, groups), "n={n}: partial error {max_p}");
    }
}

fn arrival_sum(f: &Fixture, xb: &sycl::DeviceBuffer<f32>, groups: usize, bufs: &ArrivalBufs) {
    f.q.launch(
        &f.arrival,
        NdRange::groups(groups, WG),
        &[
            Arg::buf(xb),
            Arg::buf(&bufs.partial),
            Arg::buf(&bufs.counter),
            Arg::buf(&bufs.out),
            Arg::i32(xb.len() as i32),
        ],
    )
    .unwrap();
}

struct ArrivalBufs {
    partial: sycl::DeviceBuffer<f32>, // (groups,)
    counter: sycl::DeviceBuffer<u32>, // (1,)
    out: sycl::DeviceBuffer<f32>,     // (1,)
}

fn arrival_bufs(q: &Queue, groups: usize) -> ArrivalBufs {
    let b = ArrivalBufs {
        partial: q.alloc(groups).unwrap(),
        counter: q.alloc(1).unwrap(),
        out: q.alloc(1).unwrap(),
    };
    q.fill(&b.counter, 0u32).unwrap();
    q.fill(&b.out, f32::NAN).unwrap();
    b
}

#[test]
fn arrival_counter_sum_matches_reference_and_repeats_bitwise() {
    let f = fx();
    let seed = fresh_seed();
    for (i, &(n, groups)) in [(777, 1), (50_000, 5), (262_147, 32), (1 << 20, 97)]
        .iter()
        .enumerate()
    {
        let x = random(n, seed ^ (i as u64 + 100));
        let xb = f.q.upload(&x).unwrap();
        let bufs = arrival_bufs(&f.q, groups);
        arrival_sum(f, &xb, groups, &bufs);
        let first = f.q.to_vec(&bufs.out).unwrap()[0];
        let r = sum_ref(&x, 1.0);
        let err = (first as f64 - r).abs();
        println!(
            "reduce_arrival_sum n={n:>8} groups={groups:>3}: sum {first:.6} ref {r:.6} abs err \
             {err:.3e} (bound {:.3e})",
            bound(&x, groups)
        );
        assert!(err <= bound(&x, groups), "n={n}: error {err} over bound");
        assert_eq!(f.q.to_vec(&bufs.counter).unwrap()[0], 0, "counter reset");

        // Many launches: every result bitwise equal, counter back to 0 after each batch.
        let launches = if n > 300_000 { 40 } else { 150 };
        let mut wrong = 0;
        for _ in 0..launches {
            f.q.fill(&bufs.out, f32::NAN).unwrap();
            arrival_sum(f, &xb, groups, &bufs);
            let v = f.q.to_vec(&bufs.out).unwrap()[0];
            if v.to_bits() != first.to_bits() {
                wrong += 1;
            }
        }
        let counter = f.q.to_vec(&bufs.counter).unwrap()[0];
        println!("  {launches} more launches: {wrong} differ bitwise, counter {counter}");
        assert_eq!(wrong, 0);
        assert_eq!(counter, 0);
    }
}

#[test]
fn build_option_changes_result() {
    let f = fx();
    let m = f
        .ctx
        .module(&kernels::REDUCE, &["-DCFG_WG=256", "-DCFG_SCALE=2.5f"])
        .expect("build with CFG_SCALE");
    let k = m.kernel("reduce_sg_sum").unwrap();
    let x = random(10_000, fresh_seed());
    let xb = f.q.upload(&x).unwrap();
    let out = f.q.alloc::<f32>(1).unwrap();
    f.q.launch(
        &k,
        NdRange::groups(1, WG),
        &[Arg::buf(&xb), Arg::buf(&out), Arg::i32(x.len() as i32)],
    )
    .unwrap();
    let got = f.q.to_vec(&out).unwrap()[0] as f64;
    let (r1, r25) = (sum_ref(&x, 1.0), sum_ref(&x, 2.5));
    let b = 2.5 * bound(&x, 1);
    println!(
        "CFG_SCALE=2.5: got {got:.6}, ref x2.5 {r25:.6} (err {:.3e}), ref x1 {r1:.6}",
        (got - r25).abs()
    );
    assert!((got - r25).abs() <= b);
    assert!((got - r1).abs() > b, "the -D option had no effect");
    // Same source + same options is one build per context: the cache hands back the same module.
    let again = f
        .ctx
        .module(&kernels::REDUCE, &["-DCFG_WG=256", "-DCFG_SCALE=2.5f"])
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(&m, &again));
}

#[test]
fn event_profiling_gives_plausible_durations() {
    let f = fx();
    assert!(f.dev.info().unwrap().profiling);
    let x = random(1 << 18, fresh_seed());
    let xb = f.q.upload(&x).unwrap();
    let partial = f.q.alloc::<f32>(16).unwrap();
    for _ in 0..3 {
        let ev =
            f.q.launch_event(
                &f.sg_sum,
                NdRange::groups(16, WG),
                &[Arg::buf(&xb), Arg::buf(&partial), Arg::i32(x.len() as i32)],
            )
            .unwrap();
        let p = ev.profile().unwrap();
        println!(
            "kernel: submit->start {} ns, run {:.1} us",
            p.start as i128 - p.submit as i128,
            p.seconds() * 1e6
        );
        assert!(p.end >= p.start, "end before start: {p:?}");
        assert!(p.start > 0, "no timestamp: {p:?}");
        assert!(p.seconds() < 60.0, "implausible duration {p:?}");
    }
}

#[test]
fn graph_replay_matches_direct_launches() {
    let f = fx();
    // Graph recording wants a queue without profiling on some runtimes: use a fresh plain queue.
    let q = f.ctx.queue(&f.dev).unwrap();
    let x = random(200_000, fresh_seed());
    let xb = q.upload(&x).unwrap();
    let bufs = arrival_bufs(&q, 8);
    let arrival = &f.arrival;
    let args = [
        Arg::buf(&xb),
        Arg::buf(&bufs.partial),
        Arg::buf(&bufs.counter),
        Arg::buf(&bufs.out),
        Arg::i32(x.len() as i32),
    ];
    q.launch(arrival, NdRange::groups(8, WG), &args).unwrap();
    let direct = q.to_vec(&bufs.out).unwrap()[0];
    let g = match q.record(|q| q.launch(arrival, NdRange::groups(8, WG), &args)) {
        Ok(g) => g,
        Err(e) if e.status() == Some(sycl::Status::Unsupported) => {
            panic!("graphs unsupported on the CPU device, which has ext_oneapi_limited_graph: {e}")
        }
        Err(e) => panic!("{e}"),
    };
    for _ in 0..20 {
        q.fill(&bufs.out, f32::NAN).unwrap();
        q.replay(&g).unwrap();
        let v = q.to_vec(&bufs.out).unwrap()[0];
        assert_eq!(v.to_bits(), direct.to_bits());
    }
    assert_eq!(q.to_vec(&bufs.counter).unwrap()[0], 0);
    println!("graph replay x20 == direct launch ({direct})");
}

#[test]
fn a_build_in_progress_is_visible_by_its_label() {
    use std::time::{Duration, Instant};
    use strata::sycl::build_activity::activity;
    let dev = sycl::cpu_device().expect("the CPU SYCL device (run `make setup`)");
    let ctx = Context::new(std::slice::from_ref(&dev)).expect("context");
    // options no earlier run used: a real compile, not a disk-cache hit
    let nonce = format!("-DCFG_NONCE={}", rand::random::<u32>());
    let label_part = nonce.trim_start_matches("-DCFG_").to_string();
    let before = activity().built;
    let opts = ["-DCFG_WG=64".to_string(), nonce.clone()];
    let t0 = Instant::now();
    let seen = std::thread::scope(|s| {
        let build = s.spawn(|| {
            let o: Vec<&str> = opts.iter().map(String::as_str).collect();
            ctx.module(&kernels::REDUCE, &o).map(|_| ())
        });
        let mut seen = None;
        while !build.is_finished() {
            if let Some(b) = activity()
                .building
                .into_iter()
                .find(|(l, _)| l.contains(&label_part))
            {
                seen = Some(b);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        build
            .join()
            .expect("build thread")
            .expect("reduce.cpp builds");
        seen
    });
    let took = t0.elapsed();
    let (label, age) = seen.unwrap_or_else(|| panic!("{nonce}: never seen building ({took:?})"));
    println!("seen {label:?} after {age:?}; the build took {took:?}");
    assert!(label.starts_with("reduce"), "{label}");
    assert!(label.contains("WG=64"), "{label}");
    let after = activity();
    assert!(after.built > before, "{} -> {}", before, after.built);
    assert!(
        after.building.iter().all(|(l, _)| !l.contains(&label_part)),
        "still listed as building: {:?}",
        after.building
    );
}
