// Float-sum reductions: the foundation's test kernels, and the pattern later kernels reuse.
// Rust references: engine/sycl/reduce_ref.rs (f64 accumulation).
//
// Build options: -DCFG_WG=<work-group size> (multiple of 16, default 256),
//                -DCFG_SCALE=<float> (multiplies every input; default 1, a -D test hook).
// Sub-group size 16 everywhere. Every sum runs in a fixed order (per-lane sequential loop,
// reduce_over_group within a sub-group, then sub-group partials in index order), so a result is
// bitwise repeatable from launch to launch.
#include <sycl/sycl.hpp>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#ifndef CFG_WG
#define CFG_WG 256
#endif
#ifndef CFG_SCALE
#define CFG_SCALE 1.0f
#endif
#define CFG_SG 16
static_assert(CFG_WG % CFG_SG == 0, "CFG_WG must be a multiple of the sub-group size 16");

// Sum of scale * x[i] for i = gid, gid + stride, ... < n, then over the work-group; the result is valid in
// work-item 0. `scratch` holds one float per sub-group.
static inline float group_sum(sycl::nd_item<1> it, const float *x, size_t gid, size_t stride,
                              size_t n, float scale, float (&scratch)[CFG_WG / CFG_SG]) {
  auto sg = it.get_sub_group();
  float acc = 0.0f;
  for (size_t i = gid; i < n; i += stride) acc += x[i] * scale;
  float s = sycl::reduce_over_group(sg, acc, sycl::plus<float>());
  if (sg.get_local_linear_id() == 0) scratch[sg.get_group_linear_id()] = s;
  sycl::group_barrier(it.get_group());
  float total = 0.0f;
  if (it.get_local_linear_id() == 0)
    for (int j = 0; j < CFG_WG / CFG_SG; j++) total += scratch[j];
  return total;
}

// Per-work-group partial sums: partial[g] = sum of x over the items of group g (grid-stride).
// x: (n,)  partial: (groups,)  local size must be CFG_WG.
// A second launch with n = groups and one work-group reduces the partials to one value.
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<CFG_SG>))
void reduce_sg_sum(const float *x, float *partial, int n) {
  static syclexp::work_group_static<float[CFG_WG / CFG_SG]> scratch;
  auto it = syclext::this_work_item::get_nd_item<1>();
  float total = group_sum(it, x, it.get_global_id(0), it.get_global_range(0), (size_t)n, CFG_SCALE, scratch);
  if (it.get_local_linear_id() == 0) partial[it.get_group(0)] = total;
}

// One launch, one result: each group stores its partial, then the last group to arrive (an
// acq_rel device-scope fetch_add on `counter` returning groups-1) sums all partials in index
// order into out[0] and resets the counter to 0 for the next launch.
// x: (n,)  partial: (groups,)  counter: (1,) zero before the first launch  out: (1,)
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<CFG_SG>))
void reduce_arrival_sum(const float *x, float *partial, unsigned *counter, float *out, int n) {
  static syclexp::work_group_static<float[CFG_WG / CFG_SG]> scratch;
  static syclexp::work_group_static<unsigned> last;
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto g = it.get_group();
  const unsigned groups = (unsigned)it.get_group_range(0);
  float total = group_sum(it, x, it.get_global_id(0), it.get_global_range(0), (size_t)n, CFG_SCALE, scratch);
  if (it.get_local_linear_id() == 0) {
    partial[it.get_group(0)] = total;
    sycl::atomic_ref<unsigned, sycl::memory_order::acq_rel, sycl::memory_scope::device,
                     sycl::access::address_space::global_space>
        arrivals(*counter);
    // acq_rel: our partial is published before the increment; the last group sees all partials.
    unsigned &l = last;
    l = arrivals.fetch_add(1u) == groups - 1 ? 1u : 0u;
  }
  // Device-scope fence so the other items of the last group also see every group's partial.
  sycl::group_barrier(g, sycl::memory_scope::device);
  unsigned &l = last;
  if (!l) return;
  float sum = group_sum(it, partial, it.get_local_linear_id(), CFG_WG, groups, 1.0f, scratch);
  if (it.get_local_linear_id() == 0) {
    out[0] = sum;
    sycl::atomic_ref<unsigned, sycl::memory_order::relaxed, sycl::memory_scope::device,
                     sycl::access::address_space::global_space>(*counter)
        .store(0u);
  }
}
