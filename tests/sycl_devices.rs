//! Sub-devices of the real CPU device, compile errors of run-time kernel builds, and a missing
//! OpenCL device at run time (in child processes).

use std::process::Command;
use strata::sycl::reduce_ref::{partials_ref, sum_ref};
use strata::sycl::{self, copy_across, kernels, Arg, Card, Context, NdRange, Status, SyclError};

const WG: usize = 256;

#[test]
fn two_sub_devices_round_trip() {
    // Two "cards" on the split CPU device, sharing one context; one build serves both.
    let cards = Card::split_cpu(2).expect("the CPU SYCL device split in 2 (run `make setup`)");
    assert_eq!(cards.len(), 2);
    let subs: Vec<_> = cards.iter().map(|c| c.device.clone()).collect();
    for s in &subs {
        let i = s.info().unwrap();
        assert!(i.is_sub_device, "{i:?}");
        assert!(i.compute_units >= 1);
    }
    assert_eq!(cards[0].context.id(), cards[1].context.id());
    let (q0, q1) = (&cards[0].queue, &cards[1].queue);
    let k = cards[0]
        .kernel(&kernels::REDUCE, &["-DCFG_WG=256"], "reduce_sg_sum")
        .unwrap();
    assert_eq!(k.info(&subs[1]).unwrap().sub_group_size, 16);

    let mut rng_state = rand::random::<u64>() | 1;
    let x: Vec<f32> = (0..300_000)
        .map(|_| {
            rng_state ^= rng_state << 13;
            rng_state ^= rng_state >> 7;
            rng_state ^= rng_state << 17;
            (rng_state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let groups = 24;
    // Sub-device 0: upload, per-group partials.
    let x0 = q0.upload(&x).unwrap(); // (n,)
    let p0 = q0.alloc::<f32>(groups).unwrap(); // (groups,)
    q0.launch(
        &k,
        NdRange::groups(groups, WG),
        &[Arg::buf(&x0), Arg::buf(&p0), Arg::i32(x.len() as i32)],
    )
    .unwrap();
    // Partials to sub-device 1 through pinned host memory (a direct copy hangs the runtime).
    let p1 = q1.alloc::<f32>(groups).unwrap();
    let staging = q0.alloc_host::<u8>(40).unwrap(); // smaller than the data: chunked copy
    copy_across(&p0, &p1, Some(&staging)).unwrap();
    // A direct same-device copy API refuses the cross-device case instead of hanging.
    assert!(matches!(q1.copy(&p0, &p1), Err(SyclError::Invalid { .. })));
    // Sub-device 1: reduce the partials, download.
    let t1 = q1.alloc::<f32>(1).unwrap();
    q1.launch(
        &k,
        NdRange::groups(1, WG),
        &[Arg::buf(&p1), Arg::buf(&t1), Arg::i32(groups as i32)],
    )
    .unwrap();
    let got_p = q1.to_vec(&p1).unwrap();
    let total = q1.to_vec(&t1).unwrap()[0] as f64;
    let pref = partials_ref(&x, groups, WG);
    let r = sum_ref(&x, 1.0);
    let abs: f64 = x.iter().map(|v| v.abs() as f64).sum();
    let bound = 200.0 * f32::EPSILON as f64 * abs;
    let max_p = got_p
        .iter()
        .zip(&pref)
        .map(|(&a, &b)| (a as f64 - b).abs())
        .fold(0.0, f64::max);
    println!(
        "sub-device round trip: sum {total:.6} ref {r:.6} err {:.3e}, max partial err {max_p:.3e} (bound {bound:.3e})",
        (total - r).abs()
    );
    assert!((total - r).abs() <= bound);
    assert!(max_p <= bound);
    // Without a caller staging buffer the shim uses a temporary one.
    let back = q0.alloc::<f32>(groups).unwrap();
    copy_across(&p1, &back, None).unwrap();
    assert_eq!(q0.to_vec(&back).unwrap(), got_p);
}

const BAD_SOURCE: &str = r#"
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void broken(float *y) {
  y[0] = strata_no_such_identifier + 1.0f;
}
"#;

#[test]
fn compile_error_returns_diagnostics_and_process_survives() {
    let cpu = sycl::cpu_device().unwrap();
    let ctx = Context::new(std::slice::from_ref(&cpu)).unwrap();
    let err = ctx.build("broken", BAD_SOURCE, &["-DCFG_X=1"]).unwrap_err();
    println!("{err}");
    match &err {
        SyclError::Build {
            source_name,
            diagnostics,
            options,
        } => {
            assert_eq!(source_name, "broken");
            assert_eq!(options, &["-DCFG_X=1".to_string()]);
            assert!(
                diagnostics.contains("strata_no_such_identifier"),
                "diagnostics lack the identifier: {diagnostics}"
            );
        }
        other => panic!("expected a Build error, got {other:?}"),
    }
    assert_eq!(err.status(), Some(Status::Build));
    // The process and the context still work: a good build and a launch afterwards.
    let m = ctx.module(&kernels::REDUCE, &["-DCFG_WG=64"]).unwrap();
    let k = m.kernel("reduce_sg_sum").unwrap();
    let q = ctx.queue(&cpu).unwrap();
    let x = q.upload(&[1.5f32; 100]).unwrap();
    let out = q.alloc::<f32>(1).unwrap();
    q.launch(
        &k,
        NdRange::groups(1, 64),
        &[Arg::buf(&x), Arg::buf(&out), Arg::i32(100)],
    )
    .unwrap();
    assert_eq!(q.to_vec(&out).unwrap()[0], 150.0);
    // An unknown kernel name is a NotFound error naming it.
    let e = m.kernel("no_such_kernel").unwrap_err();
    assert_eq!(e.status(), Some(Status::NotFound));
    assert!(e.to_string().contains("no_such_kernel"), "{e}");
    // A launch with a bad range is an error, not an abort.
    let e = q
        .launch(
            &k,
            NdRange::d1(100, 64),
            &[Arg::buf(&x), Arg::buf(&out), Arg::i32(100)],
        )
        .unwrap_err();
    assert!(e.to_string().contains("multiple"), "{e}");
}

fn assert_clean_failure(out: &std::process::Output, what: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!(
        "{what}: status {:?}\nstderr: {stderr}\nstdout: {stdout}",
        out.status
    );
    assert_eq!(out.status.signal(), None, "{what} died of a signal");
    assert!(!out.status.success(), "{what} succeeded without a device");
    stderr + &stdout
}

#[test]
fn missing_opencl_device_gives_clear_error() {
    // The app: `strata devices` with the ICD variable pointing nowhere.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("devices")
        .env("OCL_ICD_FILENAMES", "/nonexistent/libintelocl.so")
        .output()
        .unwrap();
    let text = assert_clean_failure(&out, "strata devices");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text.contains("OCL_ICD_FILENAMES=/nonexistent/libintelocl.so"),
        "{text}"
    );
    assert!(
        text.contains("libintelocl.so") && text.contains("unset"),
        "{text}"
    );

    // The library: this test binary re-run as a child that asks for the CPU device.
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_reports_missing_device",
            "--ignored",
            "--nocapture",
        ])
        .env("OCL_ICD_FILENAMES", "/nonexistent/libintelocl.so")
        .env("STRATA_TEST_CHILD", "1")
        .output()
        .unwrap();
    let text = assert_clean_failure(&out, "library child");
    assert!(
        text.contains("CHILD-ERROR: no SYCL CPU device found"),
        "{text}"
    );
    assert!(text.contains("OCL_ICD_FILENAMES"), "{text}");
}

/// Run only as the child of `missing_opencl_device_gives_clear_error`.
#[test]
#[ignore = "child process of missing_opencl_device_gives_clear_error"]
fn child_reports_missing_device() {
    assert_eq!(std::env::var("STRATA_TEST_CHILD").as_deref(), Ok("1"));
    match sycl::cpu_device() {
        Ok(d) => println!("CHILD-UNEXPECTED: found {d:?}"),
        Err(e) => {
            println!("CHILD-ERROR: {e}");
            std::process::exit(3);
        }
    }
}

#[test]
fn devices_command_lists_cpu_and_split_as_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["devices", "--json", "--split-cpu", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let devices: Vec<&serde_json::Value> = v["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["devices"].as_array().unwrap())
        .collect();
    let cpu = devices
        .iter()
        .find(|d| d["device_type"] == "cpu")
        .expect("a CPU device in the listing");
    let cus = cpu["compute_units"].as_u64().unwrap();
    assert!(cpu["sub_group_sizes"]
        .as_array()
        .unwrap()
        .contains(&16.into()));
    let split = v["cpu_split"].as_array().expect("cpu_split present");
    assert_eq!(split.len(), 2);
    for s in split {
        assert_eq!(s["is_sub_device"], true);
        assert_eq!(s["compute_units"].as_u64().unwrap(), cus / 2);
    }
    // Asking for more cards than compute units is a clear error, not a crash.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["devices", "--split-cpu", "999"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("999"), "{err}");
}
