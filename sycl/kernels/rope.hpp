// The RoPE rotation of rope.cpp, shared with rope_kv.cpp (same f32 operations, same results).
// The angle p * f is kept exact as hi + lo (two-product with fma), then cos/sin(hi) are
// corrected to first order in lo. Not for -ffast-math: it could fold fma(p, f, -p*f) to 0.
#include <sycl/sycl.hpp>

static inline void rope_rot(float x0, float x1, float p, float f, float &y0, float &y1) {
  const float hi = p * f;
  const float lo = sycl::fma(p, f, -hi);
  const float c0 = sycl::cos(hi), s0 = sycl::sin(hi);
  const float c = c0 - s0 * lo, s = s0 + c0 * lo;
  y0 = x0 * c - x1 * s;
  y1 = x0 * s + x1 * c;
}
