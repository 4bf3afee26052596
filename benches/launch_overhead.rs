//! `cargo bench --bench launch_overhead`: what one kernel launch costs on the device, apart from
//! the kernel's own work — the floor under every decode step's ~300-600 launches. A kernel that
//! does (almost) nothing is launched back to back, 400 times per run, for several work-group
//! counts, submitted one by one and replayed from a recorded graph (`Queue::record` /
//! `replay`), median of 7 runs of wall time per launch, side by side in one run. "device us" is
//! the launch's own device time (end - start profiling timestamps, one launch at a time, median
//! of 200): what the runtime spends running work-groups that do nothing, a floor inside every
//! kernel's "kern us" (benches/matrix.rs).

use std::time::Instant;
use strata::sycl::{kernels::KernelSource, Arg, Card, DeviceBuffer, Kernel, NdRange, Queue};

const NOOP: KernelSource = KernelSource {
    name: "bench_noop",
    file: "benches/launch_overhead.rs",
    text: r#"
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;
// one store per work-group, so the launch cannot be optimised away
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))
void noop(float *y, int n) { // y: (n)
  auto it = syclext::this_work_item::get_nd_item<1>();
  if (it.get_local_id(0) == 0 && (int)it.get_group(0) < n) y[it.get_group(0)] = 1.0f;
}
"#,
};

const LAUNCHES: usize = 400;
const RUNS: usize = 7;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn launch(q: &Queue, k: &Kernel, y: &DeviceBuffer<f32>, groups: usize) -> strata::sycl::Result<()> {
    q.launch(
        k,
        NdRange::groups(groups, 16),
        &[Arg::buf(y), Arg::i32(groups as i32)],
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let card = Card::cpu()?;
    let q = card.queue.clone();
    let k = card.context.module(&NOOP, &[])?.kernel("noop")?;
    let y = q.alloc::<f32>(1 << 12)?;
    let qp = card.context.profiling_queue(&card.device)?;
    // as the engine does at load: this thread off the runtime's pinned worker (sycl/affinity.rs)
    let _ = strata::sycl::affinity::pin_off_workers();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "launch cost, us per launch (wall, median of {RUNS} runs of {LAUNCHES} back-to-back launches); load {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("| work-groups of 16 | submitted one by one | graph replay | ratio | device us |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for groups in [1usize, 4, 16, 64, 256, 1024] {
        let device = median(
            (0..200)
                .map(|_| {
                    qp.trace_begin();
                    launch(&qp, &k, &y, groups)?;
                    Ok(qp.trace_end()?.iter().map(|t| t.seconds).sum::<f64>() * 1e6)
                })
                .collect::<strata::sycl::Result<Vec<_>>>()?,
        );
        let direct = median(
            (0..RUNS)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..LAUNCHES {
                        launch(&q, &k, &y, groups)?;
                    }
                    q.wait()?;
                    Ok(t.elapsed().as_secs_f64() * 1e6 / LAUNCHES as f64)
                })
                .collect::<strata::sycl::Result<Vec<_>>>()?,
        );
        let g = q.record(|q| (0..LAUNCHES).try_for_each(|_| launch(q, &k, &y, groups)))?;
        let replay = median(
            (0..RUNS)
                .map(|_| {
                    let t = Instant::now();
                    q.replay(&g)?;
                    q.wait()?;
                    Ok(t.elapsed().as_secs_f64() * 1e6 / LAUNCHES as f64)
                })
                .collect::<strata::sycl::Result<Vec<_>>>()?,
        );
        println!(
            "| {groups} | {direct:.1} | {replay:.1} | {:.2} | {device:.2} |",
            direct / replay
        );
    }
    Ok(())
}
