// Rotary position embedding, in place on Q or K rows (T, n_head, head_dim).
// Pair i (i < n_rot/2) of a head rotates by angle pos[t] * freq[i]:
//   rope_norm (llama):  elements (2i, 2i+1)
//   rope_neox (neox, Gemma): elements (i, i + n_rot/2)
// Elements at n_rot..head_dim pass through. freq is a host-made table (f64 math rounded to f32:
// base^(-2i/n_rot)), because the device pow is only 16-ulp accurate.
// The angle is kept exact as a_hi + a_lo (two-product with fma), then cos/sin(a_hi) are corrected
// to first order in a_lo: at position 5000 the f32 product alone is off by up to 2.4e-4 rad.
// Launch: nd_range<1>{ceil(T * n_head * n_rot/2, 64), 64}; one work-item per pair.
// Not built with -ffast-math: it could fold fma(p, f, -p*f) to 0.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// rope_rot: rope.hpp (prepended by engine/sycl/kernels.rs)
static inline void rotate(float *a, float *b, float p, float f) {
  float y0, y1;
  rope_rot(*a, *b, p, f, y0, y1);
  *a = y0;
  *b = y1;
}

// One work-item per (t, h, i).
template <bool NEOX>
static inline void rope_one(float *x, const int32_t *pos, const float *freq, int T, int n_head,
                            int head_dim, int n_rot) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  const int half = n_rot / 2;
  const size_t idx = it.get_global_id(0);
  if (idx >= (size_t)T * n_head * half) return;
  const int i = (int)(idx % half);
  const size_t r = idx / half; // row (t, h)
  const int t = (int)(r / n_head);
  float *xr = x + r * head_dim;
  const float p = (float)pos[t]; // exact below 2^24
  if (NEOX)
    rotate(xr + i, xr + i + half, p, freq[i]);
  else
    rotate(xr + 2 * i, xr + 2 * i + 1, p, freq[i]);
}

STRATA_KERNEL void rope_norm(float *x,           // (T, n_head, head_dim), in place
                             const int32_t *pos, // (T)
                             const float *freq,  // (n_rot / 2)
                             int T, int n_head, int head_dim, int n_rot) {
  rope_one<false>(x, pos, freq, T, n_head, head_dim, n_rot);
}

STRATA_KERNEL void rope_neox(float *x,           // (T, n_head, head_dim), in place
                             const int32_t *pos, // (T)
                             const float *freq,  // (n_rot / 2)
                             int T, int n_head, int head_dim, int n_rot) {
  rope_one<true>(x, pos, freq, T, n_head, head_dim, n_rot);
}
