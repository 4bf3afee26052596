// Mixture-of-experts routing and recombination (qwen4exp's MoE FFN, llama.cpp build_moe_ffn with
// SOFTMAX gating, norm_w = true):
//   moe_route:   probs = softmax(logits) per token; ids = the k most probable experts, in
//                descending probability (ties: the lower expert id first); weights = their
//                probabilities / max(sum of them, 6.103515625e-5) [* w_scale].
//   gather_rows: out[i, :] = x[rows[i], :] (a host-built list: a window's tokens grouped by expert).
//   moe_combine: y[t, :] = w[t,0]*e[map[t,0], :] + w[t,1]*e[map[t,1], :] + ... (slot order),
//                then + sh[t, :] * sigmoid(sg[t]) when the shared expert is given.
// Out-of-range row indices (rows, map) write NaN: visible, never a wild read.
// Not built with -ffast-math, and FP contraction is off in moe_combine: llama.cpp rounds every
// product (ggml_mul) before its add (ggml_add), and an fma would give other bits.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// Neumaier's compensated sum: s + c is the running sum to about one rounding overall. ggml sums
// the softmax terms (in f32 chunks) and the selected weights into a double; this is as close to
// that as f32 gets on a device that may lack doubles.
static inline void sum_comp(float &s, float &c, float v) {
  const float t = s + v;
  c += sycl::fabs(s) >= sycl::fabs(v) ? (s - t) + v : (v - t) + s;
  s = t;
}

// One work-item per token. Launch: nd_range<1>{ceil(T, 16), 16}.
// probs keeps the whole softmax row, so the k selection passes compare the very values stored
// (and the caller may read them, e.g. to compare against llama.cpp's ffn_moe_probs).
STRATA_KERNEL void moe_route(uint64_t a_logits, // (T, n_expert)
                             uint64_t a_probs,  // (T, n_expert); may be a_logits (in place)
                             uint64_t a_ids,    // (T, k) i32
                             uint64_t a_w,      // (T, k)
                             int T, int n_expert, int k, float w_scale) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  const size_t t = it.get_global_id(0);
  if (t >= (size_t)T) return;
  const float *l = STRATA_ADDR(const float, a_logits) + t * n_expert;
  float *p = STRATA_ADDR(float, a_probs) + t * n_expert;
  int32_t *ids = STRATA_ADDR(int32_t, a_ids) + t * k;
  float *w = STRATA_ADDR(float, a_w) + t * k;

  // ggml soft_max: max subtracted, f32 exp, the row scaled by 1 / sum
  float mx = -std::numeric_limits<float>::infinity();
  for (int e = 0; e < n_expert; e++) mx = l[e] > mx ? l[e] : mx; // ggml_vec_max_f32's MAX
  float s = 0.0f, c = 0.0f;
  for (int e = 0; e < n_expert; e++) {
    const float v = sycl::exp(l[e] - mx);
    p[e] = v;
    sum_comp(s, c, v);
  }
  const float inv = 1.0f / (s + c);
  for (int e = 0; e < n_expert; e++) p[e] = p[e] * inv;

  // top-k: pick j is the largest (prob, -id) strictly below pick j-1 in that order, i.e. the
  // descending sort with ties broken towards the lower id (what ggml's argsort gives for up to 16
  // experts: libstdc++ std::sort is an insertion sort there). A NaN never compares, so a row of
  // NaN logits gives id -1 and weight NaN (the caller's range check on the ids sees it).
  float prev_p = std::numeric_limits<float>::infinity();
  int prev_id = -1;
  float ws = 0.0f, wc = 0.0f;
  for (int j = 0; j < k; j++) {
    int best = -1;
    float bp = std::numeric_limits<float>::quiet_NaN();
    for (int e = 0; e < n_expert; e++) {
      const float v = p[e];
      const bool below = v < prev_p || (v == prev_p && e > prev_id);
      if (below && (best < 0 || v > bp)) {
        best = e;
        bp = v;
      }
    }
    ids[j] = best;
    w[j] = bp;
    sum_comp(ws, wc, bp);
    prev_p = bp;
    prev_id = best;
  }
  // ggml_sum_rows, ggml_clamp(sum, 6.103515625e-5, inf), ggml_div, then ggml_scale when w_scale
  // is neither 0 nor 1 (build_moe_ffn's condition; qwen4exp files leave it 0)
  const float sum = sycl::fmax(ws + wc, 6.103515625e-5f);
  const bool scaled = w_scale != 0.0f && w_scale != 1.0f;
  for (int j = 0; j < k; j++) {
    const float v = w[j] / sum;
    w[j] = scaled ? v * w_scale : v;
  }
}

// This work-item's element e of output row r: a work-group of 32 covers 32 consecutive elements
// of one row, so the row (and its index loads) are uniform across the work-group.
// Launch: nd_range<1>{rows * ceil32(n), 32}.
struct RowPos {
  int r, e;
};

static inline RowPos row_pos(int n) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int groups_per_row = (n + 31) / 32;
  const int g = (int)it.get_group(0);
  // uniform base + lane: the CPU compiler turns the loads into vector loads
  const int e = (g % groups_per_row) * 32 + (int)sg.get_group_id()[0] * 16 + (int)sg.get_local_id()[0];
  return RowPos{g / groups_per_row, e};
}

STRATA_KERNEL void gather_rows(uint64_t a_x,    // (n_src, n)
                               uint64_t a_rows, // (m) i32, each in [0, n_src)
                               uint64_t a_out,  // (m, n)
                               int n, int n_src) {
  const float *x = STRATA_ADDR(const float, a_x);
  const int32_t *rows = STRATA_ADDR(const int32_t, a_rows);
  float *out = STRATA_ADDR(float, a_out);
  const RowPos p = row_pos(n);
  if (p.e >= n) return;
  const int src = rows[p.r];
  float v = std::numeric_limits<float>::quiet_NaN();
  if (src >= 0 && src < n_src) v = x[(size_t)src * n + p.e];
  out[(size_t)p.r * n + p.e] = v;
}

// ggml: experts = ggml_mul(experts, weights) (each product rounded), moe_out = the views added
// left to right (ggml_add, slot order); shared: ggml_sigmoid(sg) (1 / (1 + exp(-x))), then
// ggml_mul(sh, gate), then ggml_add(moe_out, that). The same operations in the same order.
STRATA_KERNEL void moe_combine(uint64_t a_e,   // (n_rows, n) grouped expert outputs
                               uint64_t a_map, // (T, k) i32: row of e for token t's slot j
                               uint64_t a_w,   // (T, k)
                               uint64_t a_sh,  // (T, n) shared expert output, or 0
                               uint64_t a_sg,  // (T) shared expert gate logits, or 0 (with a_sh)
                               uint64_t a_y,   // (T, n); may be a_sh, not a_e
                               int n, int k, int n_rows) {
#pragma clang fp contract(off)
  const float *eo = STRATA_ADDR(const float, a_e);
  const int32_t *map = STRATA_ADDR(const int32_t, a_map);
  const float *w = STRATA_ADDR(const float, a_w);
  float *y = STRATA_ADDR(float, a_y);
  const RowPos p = row_pos(n);
  if (p.e >= n) return;
  const size_t t = (size_t)p.r;
  float acc = 0.0f;
  for (int j = 0; j < k; j++) {
    const int r = map[t * k + j];
    const float x = (r >= 0 && r < n_rows) ? eo[(size_t)r * n + p.e]
                                           : std::numeric_limits<float>::quiet_NaN();
    const float prod = x * w[t * k + j];
    acc = j == 0 ? prod : acc + prod;
  }
  if (a_sh != 0) {
    const float *sh = STRATA_ADDR(const float, a_sh);
    const float *sg = STRATA_ADDR(const float, a_sg);
    const float gate = 1.0f / (1.0f + sycl::exp(-sg[t]));
    const float gated = sh[t * n + p.e] * gate;
    acc = acc + gated;
  }
  y[t * n + p.e] = acc;
}
