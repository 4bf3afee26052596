// RMSNorm pieces shared by norm.cpp and the fused kernels (norm_q8.cpp, rope_kv.cpp), so every
// kernel computes a row's scale with the very same f32 operations in the same order.
#include <sycl/sycl.hpp>

// 1 / sqrt(mean(x^2) + eps) of one row of n, for a 16-lane sub-group working on the row: lane-
// strided partial sums then a fixed sub-group tree, so it depends only on n.
static inline float row_inv_rms(const float *xr, int n, float eps, int lane, sycl::sub_group sg) {
  float ss = 0.0f;
  for (int c = 0; c * 16 < n; c++) {
    const int i = c * 16 + lane;
    if (i < n) ss += xr[i] * xr[i];
  }
  ss = sycl::reduce_over_group(sg, ss, sycl::plus<float>());
  return 1.0f / sycl::sqrt(ss / (float)n + eps);
}
