//! The kernel binary cache (engine/sycl/binary_cache.rs, docs/sycl.md "Kernel binary cache") on
//! the real CPU device: a module loaded from its cached device binary computes bitwise what the
//! source build computes (reduce.cpp with references; a whole SmolLM2 forward), option sets get
//! entries of their own, a damaged entry is rebuilt from source (in-process: the outcome names
//! the damage; the real binary: one stderr line, then the same output), and bytes that are not
//! a module are an error, not a crash. Every cache lives in a temporary directory.

mod support;

use rand::{Rng, SeedableRng};
use std::path::Path;
use std::process::Command;
use strata::sycl::reduce_ref::sum_ref;
use strata::sycl::{
    self, kernels, Arg, BinaryCache, CacheOutcome, Card, Context, Module, NdRange, Queue,
};

const WG: usize = 256;
const OPT: &[&str] = &["-DCFG_WG=256"];
const OPT_X2: &[&str] = &["-DCFG_WG=256", "-DCFG_SCALE=2.0f"];

fn setup() -> (Context, Queue) {
    sycl::runtime::init();
    let dev = sycl::cpu_device().expect("the CPU SYCL device (run `make setup`)");
    let ctx = Context::new(std::slice::from_ref(&dev)).expect("context");
    let q = ctx.queue(&dev).expect("queue");
    (ctx, q)
}

/// Both reduce kernels of `m` on `x`: the per-group partials and the one-launch arrival sum.
fn reduce(m: &Module, q: &Queue, x: &[f32], groups: usize) -> (Vec<f32>, f32) {
    let sg = m.kernel("reduce_sg_sum").expect("reduce_sg_sum");
    let arrival = m.kernel("reduce_arrival_sum").expect("reduce_arrival_sum");
    let xb = q.upload(x).unwrap();
    let partial = q.alloc::<f32>(groups).unwrap();
    let n = x.len() as i32;
    q.launch(
        &sg,
        NdRange::groups(groups, WG),
        &[Arg::buf(&xb), Arg::buf(&partial), Arg::i32(n)],
    )
    .unwrap();
    let partials = q.to_vec(&partial).unwrap();
    let partial2 = q.alloc::<f32>(groups).unwrap();
    let counter = q.upload(&[0u32]).unwrap();
    let out = q.alloc::<f32>(1).unwrap();
    q.launch(
        &arrival,
        NdRange::groups(groups, WG),
        &[
            Arg::buf(&xb),
            Arg::buf(&partial2),
            Arg::buf(&counter),
            Arg::buf(&out),
            Arg::i32(n),
        ],
    )
    .unwrap();
    (partials, q.to_vec(&out).unwrap()[0])
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn binary_modules_compute_what_source_builds_compute_and_options_have_own_entries() {
    let (ctx, q) = setup();
    let tmp = tempfile::tempdir().unwrap();
    let cache = BinaryCache::at(tmp.path());
    let x = random(100_003, 7);
    let groups = 16;

    let source = ctx.build("reduce", kernels::REDUCE.text, OPT).unwrap();
    let source_x2 = ctx.build("reduce", kernels::REDUCE.text, OPT_X2).unwrap();
    let (stored, outcome) = ctx.build_cached(&cache, &kernels::REDUCE, OPT).unwrap();
    assert_eq!(outcome, CacheOutcome::Stored);
    assert!(!stored.from_binary());
    let (stored_x2, outcome) = ctx.build_cached(&cache, &kernels::REDUCE, OPT_X2).unwrap();
    assert_eq!(outcome, CacheOutcome::Stored);
    // two option sets, two entries
    assert_eq!(entries(tmp.path()).len(), 2, "{:?}", entries(tmp.path()));
    let (hit, outcome) = ctx.build_cached(&cache, &kernels::REDUCE, OPT).unwrap();
    assert_eq!(outcome, CacheOutcome::Hit);
    assert!(hit.from_binary());
    let (hit_x2, outcome) = ctx.build_cached(&cache, &kernels::REDUCE, OPT_X2).unwrap();
    assert_eq!(outcome, CacheOutcome::Hit);
    println!(
        "reduce: source build {:.0} ms, binary load {:.1} ms",
        source.build_time().as_secs_f64() * 1e3,
        hit.build_time().as_secs_f64() * 1e3
    );

    let (p_src, s_src) = reduce(&source, &q, &x, groups);
    let (p_stored, s_stored) = reduce(&stored, &q, &x, groups);
    let (p_hit, s_hit) = reduce(&hit, &q, &x, groups);
    assert_eq!(bits(&p_hit), bits(&p_src));
    assert_eq!(bits(&p_stored), bits(&p_src));
    assert_eq!(s_hit.to_bits(), s_src.to_bits());
    assert_eq!(s_stored.to_bits(), s_src.to_bits());
    // and right: the f64 reference, within the summation tree's bound
    let want = sum_ref(&x, 1.0);
    let abs: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
    let bound =
        (x.len().div_ceil(groups * WG) + 16 + WG / 16 + groups) as f64 * f32::EPSILON as f64 * abs;
    assert!((s_hit as f64 - want).abs() <= bound, "{s_hit} vs {want}");

    // the scaled entry is the scaled module: its own results, not the other entry's
    let (p2_src, s2_src) = reduce(&source_x2, &q, &x, groups);
    let (p2_hit, s2_hit) = reduce(&hit_x2, &q, &x, groups);
    let (p2_stored, _) = reduce(&stored_x2, &q, &x, groups);
    assert_eq!(bits(&p2_hit), bits(&p2_src));
    assert_eq!(bits(&p2_stored), bits(&p2_src));
    assert_eq!(s2_hit.to_bits(), s2_src.to_bits());
    // times 2 is exact in binary floating point
    assert_eq!(s2_hit, 2.0 * s_hit);
    assert_ne!(s2_hit, s_hit);

    // the kernels' facts survive the round trip
    let dev = &ctx.devices()[0];
    for name in ["reduce_sg_sum", "reduce_arrival_sum"] {
        let a = source.kernel(name).unwrap().info(dev).unwrap();
        let b = hit.kernel(name).unwrap().info(dev).unwrap();
        assert_eq!(a.sub_group_size, 16);
        assert_eq!(
            (a.sub_group_size, a.max_work_group),
            (b.sub_group_size, b.max_work_group)
        );
    }
    assert!(hit.kernel("no_such_kernel").is_err());
}

#[test]
fn a_damaged_entry_is_rebuilt_and_bad_bytes_are_an_error() {
    let (ctx, q) = setup();
    let tmp = tempfile::tempdir().unwrap();
    let cache = BinaryCache::at(tmp.path());
    let x = random(40_000, 11);
    let (source, outcome) = ctx.build_cached(&cache, &kernels::REDUCE, OPT).unwrap();
    assert_eq!(outcome, CacheOutcome::Stored);
    let want = reduce(&source, &q, &x, 8);
    let [name] = entries(tmp.path()).try_into().expect("one entry");
    let path = tmp.path().join(&name);
    let whole = std::fs::read(&path).unwrap();

    let mut flipped = whole.clone();
    let mid = flipped.len() / 2 + 3;
    flipped[mid] ^= 0x40;
    let damages: [(&str, Vec<u8>); 4] = [
        (
            "magic",
            b"this is not a cache entry, just garbage bytes".to_vec(),
        ),
        ("truncated", whole[..whole.len() - 100].to_vec()),
        ("checksum", flipped),
        ("no whole header", whole[..7].to_vec()),
    ];
    for (why, bytes) in damages {
        std::fs::write(&path, &bytes).unwrap();
        let (m, outcome) = ctx.build_cached(&cache, &kernels::REDUCE, OPT).unwrap();
        match &outcome {
            CacheOutcome::Rebuilt(reason) => assert!(reason.contains(why), "{why}: {reason}"),
            other => panic!("{why}: {other:?}"),
        }
        assert!(!m.from_binary());
        let got = reduce(&m, &q, &x, 8);
        assert_eq!(bits(&got.0), bits(&want.0), "{why}");
        assert_eq!(got.1.to_bits(), want.1.to_bits(), "{why}");
        // stored again, whole: the next build is a hit
        let (m, outcome) = ctx.build_cached(&cache, &kernels::REDUCE, OPT).unwrap();
        assert_eq!(outcome, CacheOutcome::Hit, "{why}");
        assert_eq!(reduce(&m, &q, &x, 8).1.to_bits(), want.1.to_bits());
        assert_eq!(
            entries(tmp.path()),
            std::slice::from_ref(&name),
            "no temporary file left"
        );
    }

    // bytes that are not an exported module: an error naming why, never a crash
    let exported = source.export().unwrap();
    for bad in [
        &b""[..],
        &b"garbage"[..],
        &exported[..exported.len() / 2],
        &exported[..exported.len() - 1],
    ] {
        let e = ctx
            .load_binary("reduce", OPT, bad)
            .expect_err("not a module");
        assert!(e.to_string().contains("kernel binary"), "{e}");
    }
    let mut extra = exported.clone();
    extra.push(0);
    let e = ctx
        .load_binary("reduce", OPT, &extra)
        .expect_err("trailing byte");
    assert!(e.to_string().contains("past the end"), "{e}");
    // the payload as the cache stores it loads back
    let m = ctx.load_binary("reduce", OPT, &exported).unwrap();
    assert_eq!(reduce(&m, &q, &x, 8).1.to_bits(), want.1.to_bits());
}

/// All logits of SmolLM2 over a prompt and decode steps (tests/support/model.rs `run`) on a card
/// whose context builds through `cache`.
fn logits(cache: Option<BinaryCache>) -> (Vec<Vec<f32>>, Vec<std::sync::Arc<Module>>) {
    sycl::runtime::init();
    let p = strata::paths::model_path("STRATA_MODEL_SMOLLM2").unwrap_or_else(|e| panic!("{e}"));
    let g = strata::gguf::Gguf::open(&p).unwrap();
    let card = Card::cpu().expect("the CPU SYCL device");
    card.context.set_binary_cache(cache);
    let ctx = card.context.clone();
    let mut e = strata::model::Engine::from_gguf(&g, card, &support::model::opts(true))
        .expect("engine load");
    (support::model::run(&mut e), ctx.modules())
}

#[test]
fn smollm2_from_cached_binaries_gives_the_source_builds_logits_bitwise() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = BinaryCache::at(tmp.path());
    let (source, _) = logits(None);
    let (stored, modules) = logits(Some(cache.clone()));
    assert!(modules.iter().all(|m| !m.from_binary()));
    let (hit, modules) = logits(Some(cache));
    println!(
        "{} modules, {} entries; from binaries: {:.0} ms in all",
        modules.len(),
        entries(tmp.path()).len(),
        modules
            .iter()
            .map(|m| m.build_time().as_secs_f64() * 1e3)
            .sum::<f64>()
    );
    assert!(modules.len() >= 10, "{} modules", modules.len());
    assert_eq!(entries(tmp.path()).len(), modules.len());
    for m in &modules {
        assert!(
            m.from_binary(),
            "{} {:?} was built from source",
            m.name(),
            m.options()
        );
    }
    let flat = |l: &Vec<Vec<f32>>| l.iter().flat_map(|r| bits(r)).collect::<Vec<_>>();
    assert_eq!(flat(&stored), flat(&source));
    assert_eq!(flat(&hit), flat(&source));
}

/// The real binary: `strata run` stores, a damaged entry costs one stderr line and a rebuild
/// with the same output, the next run is quiet; `STRATA_KERNEL_CACHE=0` stores nothing.
#[test]
fn strata_run_rebuilds_a_garbage_entry_with_one_log_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kc");
    let run = |extra: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
        cmd.args([
            "run",
            "-p",
            "The capital of France is",
            "-n",
            "12",
            "--temp",
            "0",
        ])
        .env("STRATA_KERNEL_CACHE_DIR", &dir);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run strata");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let notes = |stderr: &str| {
        stderr
            .lines()
            .filter(|l| l.contains("kernel cache entry"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (first, err) = run(&[]);
    assert_eq!(notes(&err), Vec::<String>::new());
    let names = entries(&dir);
    assert!(names.len() >= 10, "{names:?}");
    let victim = names
        .iter()
        .find(|n| n.starts_with("mmvq_tiled"))
        .expect("an mmvq_tiled entry");
    std::fs::write(dir.join(victim), b"garbage").unwrap();

    let (second, err) = run(&[]);
    let n = notes(&err);
    assert_eq!(n.len(), 1, "{err}");
    assert!(
        n[0].contains(victim.as_str()) && n[0].contains("rebuilding"),
        "{}",
        n[0]
    );
    assert_eq!(second, first);
    let (third, err) = run(&[]);
    assert_eq!(notes(&err), Vec::<String>::new());
    assert_eq!(third, first);
    assert_eq!(entries(&dir), names);

    // off: nothing read, nothing written
    std::fs::remove_dir_all(&dir).unwrap();
    let (off, err) = run(&[("STRATA_KERNEL_CACHE", "0")]);
    assert_eq!(notes(&err), Vec::<String>::new());
    assert_eq!(off, first);
    assert!(entries(&dir).is_empty());
}
