//! Buffers passed as addresses (`Arg::addr` / `Arg::addr_at`, a `uint64_t` kernel parameter) on
//! the real CPU device, cast back by `STRATA_ADDR` (sycl/kernels/addr.hpp): the kernel reads and
//! writes the right elements, offsets count elements, and a launch mixing addresses with pointer
//! and value arguments keeps them in place.

use strata::sycl::{self, kernels::KernelSource, Arg, Context, NdRange};

/// The engine's own cast (`sycl/kernels/addr.hpp`) in front of a small test kernel.
const SRC: KernelSource = KernelSource {
    name: "test_addr",
    file: "tests/sycl_addr_args.rs (+ addr.hpp)",
    text: concat!(
        include_str!("../sycl/kernels/addr.hpp"),
        r#"
#include <sycl/sycl.hpp>
#include <cstdint>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;
// y[i] = x[i] * s + z[i] for i < n; x and y come as addresses, z as a pointer
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))
void axpz(uint64_t a_x, // (n) f32
          const float *z, // (n)
          uint64_t a_y, // (n) f32
          float s, int n) {
  const float *x = STRATA_ADDR(const float, a_x);
  float *y = STRATA_ADDR(float, a_y);
  const int i = (int)syclext::this_work_item::get_nd_item<1>().get_global_id(0);
  if (i < n) y[i] = x[i] * s + z[i];
}
"#
    ),
};

#[test]
fn address_arguments_reach_the_kernel_at_their_offsets() {
    let dev = sycl::cpu_device().expect("the CPU SYCL device (run `make setup`)");
    let ctx = Context::new(std::slice::from_ref(&dev)).expect("context");
    let q = ctx.queue(&dev).expect("queue");
    let k = ctx
        .module(&SRC, &[])
        .expect("the test kernel builds")
        .kernel("axpz")
        .expect("kernel");
    let n = 100usize;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let zs: Vec<f32> = (0..n).map(|i| 1000.0 + i as f32).collect();
    let x = q.upload(&xs).expect("upload x");
    let z = q.upload(&zs).expect("upload z");
    let y = q.upload(&vec![-1.0f32; n]).expect("upload y");
    // x from element 7, y from element 3, 80 elements: y[3 + i] = 2 * x[7 + i] + z[i]
    let m = 80usize;
    q.launch(
        &k,
        NdRange::d1(96, 16),
        &[
            Arg::addr_at(&x, 7),
            Arg::buf(&z),
            Arg::addr_at(&y, 3),
            Arg::f32(2.0),
            Arg::i32(m as i32),
        ],
    )
    .expect("launch");
    let got = q.to_vec(&y).expect("read y");
    for (i, &g) in got.iter().enumerate() {
        let want = if (3..3 + m).contains(&i) {
            2.0 * xs[7 + i - 3] + zs[i - 3]
        } else {
            -1.0 // outside the window: untouched
        };
        assert_eq!(g, want, "y[{i}]");
    }
    // Arg::addr is addr_at(.., 0)
    q.launch(
        &k,
        NdRange::d1(112, 16),
        &[
            Arg::addr(&x),
            Arg::buf(&z),
            Arg::addr(&y),
            Arg::f32(-1.0),
            Arg::i32(n as i32),
        ],
    )
    .expect("launch");
    let got = q.to_vec(&y).expect("read y");
    for i in 0..n {
        assert_eq!(
            got[i],
            -xs[i] + zs[i],
            "y[{i}] after the whole-buffer launch"
        );
    }
}
