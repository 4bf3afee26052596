// Activation rounding through 8-bit blocks, the way llama.cpp quantizes the activations it feeds
// a quantized matrix (its results then agree with llama.cpp's, which the agreement tests check):
//   act_q8_32:  blocks of 32 (Q8_0 / Q8_1 for the legacy formats): d = amax / 127 rounded to f16,
//               q = rint(x / d), y = q * d
//   act_q8_256: blocks of 256 (Q8_K for the K-quants): m = the element of largest |x| (first one),
//               iscale = -127 / m, q = min(127, rint(iscale * x)), y = q / iscale
// y may alias x. One 16-lane sub-group per block: launch nd_range<1>{n_blocks * 16, 16}.
// Not built with -ffast-math (the division and rint must stay exact).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

STRATA_KERNEL void act_q8_32(const float *x, // (n_blocks * 32)
                             float *y,       // (n_blocks * 32)
                             int n_blocks) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t b = it.get_group(0);
  if (b >= (size_t)n_blocks) return;
  const float *xb = x + b * 32;
  const float a0 = xb[lane], a1 = xb[16 + lane];
  const float amax = sycl::reduce_over_group(sg, sycl::fmax(sycl::fabs(a0), sycl::fabs(a1)),
                                             sycl::maximum<float>());
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float dh = (float)(sycl::half)d;
  y[b * 32 + lane] = sycl::rint(a0 * id) * dh;
  y[b * 32 + 16 + lane] = sycl::rint(a1 * id) * dh;
}

STRATA_KERNEL void act_q8_256(const float *x, // (n_blocks * 256)
                              float *y,       // (n_blocks * 256)
                              int n_blocks) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t b = it.get_group(0);
  if (b >= (size_t)n_blocks) return;
  const float *xb = x + b * 256;
  float v[16];
  float amax = 0.0f;
  for (int k = 0; k < 16; k++) {
    v[k] = xb[k * 16 + lane];
    amax = sycl::fmax(amax, sycl::fabs(v[k]));
  }
  amax = sycl::reduce_over_group(sg, amax, sycl::maximum<float>());
  // the first index holding amax decides the sign, as llama.cpp's scan does
  int first = 1 << 30;
  for (int k = 15; k >= 0; k--)
    if (sycl::fabs(v[k]) == amax) first = k * 16 + lane;
  first = sycl::reduce_over_group(sg, first, sycl::minimum<int>());
  float *yb = y + b * 256;
  if (amax == 0.0f) {
    for (int k = 0; k < 16; k++) yb[k * 16 + lane] = 0.0f;
    return;
  }
  const float m = xb[first];
  const float iscale = -127.0f / m;
  const float d = 1.0f / iscale;
  for (int k = 0; k < 16; k++) yb[k * 16 + lane] = sycl::fmin(127.0f, sycl::rint(iscale * v[k])) * d;
}
