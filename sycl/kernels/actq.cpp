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

STRATA_KERNEL void act_q8_32(uint64_t a_x,  // (n_blocks * 32)
                             uint64_t a_y,  // (n_blocks * 32)
                             uint64_t a_st, // (n_blocks * 33) staged y (xstage.hpp), or 0
                             uint64_t a_rec, // (n_blocks * 9) its integer records, or 0
                             int n_blocks) {
  const float *x = STRATA_ADDR(const float, a_x);
  float *y = STRATA_ADDR(float, a_y);
  const XSt st = XST_ARGS(a_st, a_rec);
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t b = it.get_group(0);
  if (b >= (size_t)n_blocks) return;
  const float *xb = x + b * 32;
  const float a0 = xb[lane], a1 = xb[16 + lane];
  float y0, y1;
  const float dh = q8_32_round(sg, a0, a1, y0, y1); // actq.hpp
  y[b * 32 + lane] = y0;
  y[b * 32 + 16 + lane] = y1;
  xstage_block(sg, lane, st, (size_t)n_blocks * 32, b, y0, y1, dh); // xstage.hpp
}

STRATA_KERNEL void act_q8_256(uint64_t a_x,  // (n_blocks * 256)
                              uint64_t a_y,  // (n_blocks * 256)
                              uint64_t a_st, // integer records (xstage.hpp), or 0
                              int n_blocks) {
  const float *x = STRATA_ADDR(const float, a_x);
  float *y = STRATA_ADDR(float, a_y);
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t b = it.get_group(0);
  if (b >= (size_t)n_blocks) return;
  const float *xb = x + b * 256;
  float v[16];
  for (int k = 0; k < 16; k++) v[k] = xb[k * 16 + lane];
  const float d = q8_256_round(sg, lane, v); // actq.hpp
  float *yb = y + b * 256;
  for (int k = 0; k < 16; k++) yb[k * 16 + lane] = v[k];
  xstage_block256(sg, lane, XST_ARG256(a_st), b, v, d); // xstage.hpp
}
