// KV cache write: K and V rows (T, n_kv_head * head_dim) f32 -> f16 caches laid out
// (n_kv_head, n_ctx, head_dim), row t stored at position pos[t]. f32 -> f16 rounds to nearest even.
// Launch: nd_range<1>{T * n_kv_head * head_dim, 16}, head_dim % 16 == 0, so a work-group stays
// inside one (t, head) row. Positions outside [0, n_ctx) are skipped (never a wild write).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

STRATA_KERNEL void kv_store(const float *k,      // (T, n_kv_head * head_dim)
                            const float *v,      // (T, n_kv_head * head_dim)
                            sycl::half *kc,      // (n_kv_head, n_ctx, head_dim)
                            sycl::half *vc,      // (n_kv_head, n_ctx, head_dim)
                            const int32_t *pos,  // (T)
                            int n_kv_head, int head_dim, int n_ctx) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const size_t base = it.get_group(0) * 16; // uniform: first element of this work-group
  const int lane = (int)sg.get_local_id()[0];
  const size_t row = base / head_dim; // (t, h)
  const int d0 = (int)(base % head_dim);
  const int t = (int)(row / n_kv_head), h = (int)(row % n_kv_head);
  const int p = pos[t];
  if (p < 0 || p >= n_ctx) return;
  const size_t dst = ((size_t)h * n_ctx + p) * head_dim + d0;
  kc[dst + lane] = (sycl::half)k[base + lane];
  vc[dst + lane] = (sycl::half)v[base + lane];
}
