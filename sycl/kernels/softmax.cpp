// Row softmax: y = softmax(x * scale) over rows (rows, n), max subtracted first.
// One work-group of 256 (16 sub-groups) per row: launch nd_range<1>{rows * 256, 256}.
// Reductions: lane-strided partials, a sub-group tree, then the 16 sub-group results folded in
// index order from local memory: fixed for a given n, independent of the number of rows.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

#define SM_WG 256
#define SM_NSG (SM_WG / 16)

// Sum (or max) of one value per work-item, folded in a fixed order; every item gets the result.
template <bool MAX>
static inline float wg_fold(float v, float *red, sycl::nd_item<1> it, sycl::sub_group sg) {
  const int sgid = (int)sg.get_group_id()[0];
  float r = MAX ? sycl::reduce_over_group(sg, v, sycl::maximum<float>())
                : sycl::reduce_over_group(sg, v, sycl::plus<float>());
  if (sg.get_local_id()[0] == 0) red[sgid] = r;
  sycl::group_barrier(it.get_group());
  float acc = red[0];
  for (int i = 1; i < SM_NSG; i++) acc = MAX ? sycl::max(acc, red[i]) : acc + red[i];
  sycl::group_barrier(it.get_group()); // red is reused by the next fold
  return acc;
}

STRATA_KERNEL void softmax_rows(const float *x, // (rows, n)
                           float *y,       // (rows, n); may alias x
                           int n, float scale) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  static syclexp::work_group_static<float[SM_NSG]> red_mem;
  float(&red_arr)[SM_NSG] = red_mem;
  float *red = red_arr;
  const int lid = (int)sg.get_group_id()[0] * 16 + (int)sg.get_local_id()[0];
  const size_t row = it.get_group(0);
  const float *xr = x + row * n;
  float *yr = y + row * n;
  float mx = -std::numeric_limits<float>::infinity();
  for (int c = 0; c * SM_WG < n; c++) {
    const int i = c * SM_WG + lid;
    if (i < n) mx = sycl::max(mx, xr[i] * scale);
  }
  mx = wg_fold<true>(mx, red, it, sg);
  float sum = 0.0f;
  for (int c = 0; c * SM_WG < n; c++) {
    const int i = c * SM_WG + lid;
    if (i < n) {
      const float e = sycl::exp(xr[i] * scale - mx);
      yr[i] = e;
      sum += e;
    }
  }
  sum = wg_fold<false>(sum, red, it, sg);
  const float inv = 1.0f / sum;
  for (int c = 0; c * SM_WG < n; c++) {
    const int i = c * SM_WG + lid;
    if (i < n) yr[i] = yr[i] * inv;
  }
}
