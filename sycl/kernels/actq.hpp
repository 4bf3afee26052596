// The 8-bit block rounding of actq.cpp as sub-group helpers, shared with the fused kernels
// (norm_q8.cpp, glu_q8.cpp) that round their own output: same f32 operations, same results.
// Lane l holds elements l, l+16, ... of the block (the layout of every kernel here).
#include <sycl/sycl.hpp>

// Block of 32: (a0, a1) = elements (lane, 16 + lane); d = amax / 127 rounded to f16,
// y = rint(x / d) * d. Returns that f16 d as a float: y = q * d exactly, q an integer in
// [-127, 127] (xstage.hpp stages q and d for the integer-dot products).
static inline float q8_32_round(sycl::sub_group sg, float a0, float a1, float &y0, float &y1) {
  const float amax = sycl::reduce_over_group(sg, sycl::fmax(sycl::fabs(a0), sycl::fabs(a1)),
                                             sycl::maximum<float>());
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float dh = (float)(sycl::half)d;
  y0 = sycl::rint(a0 * id) * dh;
  y1 = sycl::rint(a1 * id) * dh;
  return dh;
}

// Block of 256 (Q8_K), in place: v[k] = element k * 16 + lane. m = the element of largest |x|
// (the first one), iscale = -127 / m, y = min(127, rint(iscale * x)) / iscale. Returns
// d = 1 / iscale (0 for a block of zeros): y = q * d rounded to f32, q an integer in [-127, 127].
static inline float q8_256_round(sycl::sub_group sg, int lane, float v[16]) {
  float amax = 0.0f;
  for (int k = 0; k < 16; k++) amax = sycl::fmax(amax, sycl::fabs(v[k]));
  amax = sycl::reduce_over_group(sg, amax, sycl::maximum<float>());
  if (amax == 0.0f) {
    for (int k = 0; k < 16; k++) v[k] = 0.0f;
    return 0.0f;
  }
  // The first index holding amax decides the sign, as llama.cpp's scan does. Its value is
  // exactly +-amax, so (index, sign) packed in one int and a min over the sub-group give m
  // without reading it back from another lane.
  int first = 1 << 30;
  for (int k = 15; k >= 0; k--)
    if (sycl::fabs(v[k]) == amax) first = ((k * 16 + lane) << 1) | (v[k] < 0.0f ? 1 : 0);
  first = sycl::reduce_over_group(sg, first, sycl::minimum<int>());
  const float m = (first & 1) ? -amax : amax;
  const float iscale = -127.0f / m;
  const float d = 1.0f / iscale;
  for (int k = 0; k < 16; k++) v[k] = sycl::fmin(127.0f, sycl::rint(iscale * v[k])) * d;
  return d;
}
