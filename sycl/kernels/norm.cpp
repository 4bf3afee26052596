// RMSNorm over rows: y = x / sqrt(mean(x^2) + eps) * w.
// One 16-lane sub-group (= one work-group) per row: launch nd_range<1>{rows * 16, 16}.
// A row's sum of squares is lane-strided partial sums then a fixed sub-group tree, so it depends
// only on n, never on the number of rows (multi-row calls are bitwise one-row calls).
// The per-head variant (Gemma's QK norm) is the same kernel over rows = T * n_head, n = head_dim,
// the head_dim weight shared by every head.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// row_inv_rms: norm.hpp (prepended by engine/sycl/kernels.rs)

STRATA_KERNEL void rms_norm(uint64_t a_x, // (rows, n)
                            uint64_t a_w, // (n)
                            uint64_t a_y, // (rows, n); may alias x
                            int n, float eps) {
  const float *x = STRATA_ADDR(const float, a_x);
  const float *w = STRATA_ADDR(const float, a_w);
  float *y = STRATA_ADDR(float, a_y);
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t row = it.get_group(0);
  const float *xr = x + row * n;
  float *yr = y + row * n;
  const float inv = row_inv_rms(xr, n, eps, lane, sg);
  for (int c = 0; c * 16 < n; c++) {
    const int i = c * 16 + lane;
    if (i < n) yr[i] = (xr[i] * inv) * w[i];
  }
}

// Pre-norm with the residual add folded in (llama: x += attn_out; h = norm(x)):
// res = res + a; y = rms_norm(res) * w.
STRATA_KERNEL void add_rms_norm(uint64_t a_res, // (rows, n) residual, updated in place
                                uint64_t a_a,   // (rows, n) added to the residual
                                uint64_t a_w,   // (n)
                                uint64_t a_y,   // (rows, n) normed output
                                int n, float eps) {
  float *res = STRATA_ADDR(float, a_res);
  const float *a = STRATA_ADDR(const float, a_a);
  const float *w = STRATA_ADDR(const float, a_w);
  float *y = STRATA_ADDR(float, a_y);
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t row = it.get_group(0);
  float *rr = res + row * n;
  const float *ar = a + row * n;
  float *yr = y + row * n;
  for (int c = 0; c * 16 < n; c++) {
    const int i = c * 16 + lane;
    if (i < n) rr[i] = rr[i] + ar[i];
  }
  // each lane re-reads only the elements it wrote itself: no barrier needed
  const float inv = row_inv_rms(rr, n, eps, lane, sg);
  for (int c = 0; c * 16 < n; c++) {
    const int i = c * 16 + lane;
    if (i < n) yr[i] = (rr[i] * inv) * w[i];
  }
}

// Post-norm added to the residual (Gemma's post_attention_norm / post_ffw_norm):
// res = res + rms_norm(a) * w.
STRATA_KERNEL void rms_norm_add(uint64_t a_a,   // (rows, n)
                                uint64_t a_w,   // (n)
                                uint64_t a_res, // (rows, n) residual, updated in place
                                int n, float eps) {
  const float *a = STRATA_ADDR(const float, a_a);
  const float *w = STRATA_ADDR(const float, a_w);
  float *res = STRATA_ADDR(float, a_res);
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t row = it.get_group(0);
  const float *ar = a + row * n;
  float *rr = res + row * n;
  const float inv = row_inv_rms(ar, n, eps, lane, sg);
  for (int c = 0; c * 16 < n; c++) {
    const int i = c * 16 + lane;
    if (i < n) rr[i] = rr[i] + (ar[i] * inv) * w[i];
  }
}
