// Element-wise kernels over n elements (any shape, e.g. (T, n_ff)):
//   silu_mul:  out = silu(gate) * up            (llama FFN)
//   gelu_mul:  out = gelu_tanh(gate) * up       (Gemma FFN, GELU with the tanh approximation)
//   add_f32:   out = a + b                      (residual)
//   scale_f32: out = x * s
//   repeat_rows: out[r, s, :] = x[r, :] for s < S (the hyper-connection streams' start)
// out may alias any input. Launch: nd_range<1>{ceil(n, 256), 256}.
// Not built with -ffast-math: silu/gelu at large |gate| rely on exp/tanh saturating exactly.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// uniform base + lane, so loads and stores vectorise on the CPU device
static inline size_t elem_index() {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  return (it.get_group(0) * (it.get_local_range(0) / 16) + sg.get_group_id()[0]) * 16 +
         sg.get_local_id()[0];
}

STRATA_KERNEL void silu_mul(uint64_t a_gate, // (n)
                            uint64_t a_up,   // (n)
                            uint64_t a_out,  // (n)
                            int n) {
  const float *gate = STRATA_ADDR(const float, a_gate);
  const float *up = STRATA_ADDR(const float, a_up);
  float *out = STRATA_ADDR(float, a_out);
  const size_t i = elem_index();
  if (i >= (size_t)n) return;
  out[i] = silu_mul1(gate[i], up[i]); // act.hpp
}

STRATA_KERNEL void gelu_mul(uint64_t a_gate, // (n)
                            uint64_t a_up,   // (n)
                            uint64_t a_out,  // (n)
                            int n) {
  const float *gate = STRATA_ADDR(const float, a_gate);
  const float *up = STRATA_ADDR(const float, a_up);
  float *out = STRATA_ADDR(float, a_out);
  const size_t i = elem_index();
  if (i >= (size_t)n) return;
  out[i] = gelu_mul1(gate[i], up[i]); // act.hpp
}

STRATA_KERNEL void add_f32(uint64_t a_a, // (n)
                       uint64_t a_b,     // (n)
                       uint64_t a_out,   // (n)
                       int n) {
  const float *a = STRATA_ADDR(const float, a_a);
  const float *b = STRATA_ADDR(const float, a_b);
  float *out = STRATA_ADDR(float, a_out);
  const size_t i = elem_index();
  if (i >= (size_t)n) return;
  out[i] = a[i] + b[i];
}

STRATA_KERNEL void scale_f32(uint64_t a_x, // (n)
                         uint64_t a_out,   // (n)
                         int n, float s) {
  const float *x = STRATA_ADDR(const float, a_x);
  float *out = STRATA_ADDR(float, a_out);
  const size_t i = elem_index();
  if (i >= (size_t)n) return;
  out[i] = x[i] * s;
}

STRATA_KERNEL void repeat_rows(uint64_t a_x,   // (rows, n)
                               uint64_t a_out, // (rows, S, n); not x
                               int total,      // rows * S * n
                               int n, int streams) {
  const float *x = STRATA_ADDR(const float, a_x);
  float *out = STRATA_ADDR(float, a_out);
  const size_t i = elem_index();
  if (i >= (size_t)total) return;
  const size_t row = i / ((size_t)n * streams);
  out[i] = x[row * n + i % n];
}
