// Gated attention (qwen4exp full-attention layers, llama.cpp build_layer_attn):
//   split_q_gate: the q projection's rows (T, n_head * 2 * head_dim) hold per head
//                 [q (head_dim) | gate (head_dim)]; q and gate come out as (T, n_head * head_dim)
//                 (llama.cpp's two Qcur_full views, the gate made contiguous).
//   sigmoid_mul:  att[i] = att[i] * sigmoid(gate[i]), sigmoid = 1 / (1 + exp(-x)) in f32 as
//                 ggml_vec_sigmoid_f32, then ggml_mul (in place).
// Launch: nd_range<1>{ceil(n, 256), 256}, one work-item per output element.
// Not built with -ffast-math: the sigmoid at large |gate| relies on exp saturating exactly.
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

// n = T * n_head * head_dim output elements; element i = (row r, head h, d).
STRATA_KERNEL void split_q_gate(uint64_t a_qg,   // (T, n_head * 2 * head_dim)
                                uint64_t a_q,    // (T, n_head * head_dim)
                                uint64_t a_gate, // (T, n_head * head_dim)
                                int n, int head_dim) {
  const float *qg = STRATA_ADDR(const float, a_qg);
  float *q = STRATA_ADDR(float, a_q);
  float *gate = STRATA_ADDR(float, a_gate);
  const size_t i = elem_index();
  if (i >= (size_t)n) return;
  // rows and heads are both runs of head_dim: (r * n_head + h) is one index over them
  const size_t rh = i / head_dim, d = i % head_dim;
  const size_t src = rh * 2 * head_dim + d;
  q[i] = qg[src];
  gate[i] = qg[src + head_dim];
}

STRATA_KERNEL void sigmoid_mul(uint64_t a_att,  // (n), in place
                               uint64_t a_gate, // (n)
                               int n) {
  float *att = STRATA_ADDR(float, a_att);
  const float *gate = STRATA_ADDR(const float, a_gate);
  const size_t i = elem_index();
  if (i >= (size_t)n) return;
  const float s = 1.0f / (1.0f + sycl::exp(-gate[i]));
  att[i] = att[i] * s;
}
