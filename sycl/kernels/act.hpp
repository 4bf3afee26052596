// The gated activations of act.cpp, shared with glu_q8.cpp (same f32 expression, same results).
#include <sycl/sycl.hpp>

// silu(g) * u
static inline float silu_mul1(float g, float u) { return g / (1.0f + sycl::exp(-g)) * u; }

// gelu_tanh(g) * u
static inline float gelu_mul1(float g, float u) {
  const float k = 0.7978845608028654f; // sqrt(2 / pi)
  return 0.5f * g * (1.0f + sycl::tanh(k * (g + 0.044715f * g * g * g))) * u;
}
