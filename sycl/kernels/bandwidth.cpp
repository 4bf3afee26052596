// Device read bandwidth probe: each work-group sums a contiguous slice of a float buffer and writes
// its one partial, so the compiler cannot drop the loads.
//   x:   (n) f32, n a multiple of CFG_BW_WG * CFG_BW_PER
//   out: (n / (CFG_BW_WG * CFG_BW_PER)) f32, one sum per work-group
// Launch nd_range<1>{n / CFG_BW_PER, CFG_BW_WG}. Work-group g reads [g * WG * PER, (g+1) * WG * PER);
// sub-group s its contiguous part [s * 16 * PER, (s+1) * 16 * PER) in steps of 16 floats: lane l
// reads base + i * 16 + l, the `uniform_ptr[uniform_expr + lane]` shape that compiles to one
// 64-byte vector load per step (see docs/performance.md).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

#ifndef CFG_BW_WG
#define CFG_BW_WG 64 // work-group size: 4 sub-groups of 16
#endif
#ifndef CFG_BW_PER
#define CFG_BW_PER 1024 // floats per work-item
#endif
#define CFG_BW_NSG (CFG_BW_WG / 16)

STRATA_KERNEL void bw_read_sum(const float *x, // (n)
                               float *out) {   // (n / (CFG_BW_WG * CFG_BW_PER))
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  static syclexp::work_group_static<float[CFG_BW_NSG]> red_mem;
  float(&red)[CFG_BW_NSG] = red_mem;
  const int lane = (int)sg.get_local_id()[0];
  const int sgi = (int)sg.get_group_id()[0];
  const size_t g = it.get_group(0);
  // sub-group s reads its own contiguous quarter of the group's slice: the CPU device runs a
  // group's sub-groups one after the other on one thread, and interleaved 64-byte steps (every
  // 4th cache line per sub-group) measured 16.6 GB/s where a contiguous stream reads ~2x that
  const float *base = x + g * (size_t)(CFG_BW_WG * CFG_BW_PER) + sgi * (size_t)(16 * CFG_BW_PER);
  // four independent accumulators: the adds are not the bottleneck then
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  for (int i = 0; i < CFG_BW_PER; i += 4) {
    a0 += base[(size_t)(i + 0) * 16 + lane];
    a1 += base[(size_t)(i + 1) * 16 + lane];
    a2 += base[(size_t)(i + 2) * 16 + lane];
    a3 += base[(size_t)(i + 3) * 16 + lane];
  }
  const float s = sycl::reduce_over_group(sg, (a0 + a1) + (a2 + a3), sycl::plus<float>());
  if (lane == 0) red[sgi] = s;
  sycl::group_barrier(it.get_group());
  if (it.get_local_id(0) == 0) {
    float t = 0.0f;
    for (int i = 0; i < CFG_BW_NSG; i++) t += red[i];
    out[g] = t;
  }
}
