// RMSNorm fused with the 8-bit block rounding of its output, for norms whose output only feeds
// quantized matrix products (llama's attn/ffn pre-norms, Gemma's): writes the rounded matmul input
// directly, one launch instead of norm + act_q8. Bitwise the unfused pair: the normed value is the
// same f32 expression as norm.cpp's (row_inv_rms from norm.hpp), the rounding is actq.hpp's.
//   rms_norm_q8_B:          yq = round_B(rms_norm(x) * w)
//   add_rms_norm_q8_B:      res += a; yq = round_B(rms_norm(res) * w)           (llama)
//   norm_add_norm_q8_B:     res += rms_norm(a) * w1; yq = round_B(rms_norm(res) * w2)
//                           (Gemma: post_attention_norm into the residual, then ffn_norm)
// B = 32 (Q8_0-style blocks, f16 scale) or 256 (Q8_K). n % B == 0, so blocks never straddle rows.
// One 16-lane sub-group (= one work-group) per row: launch nd_range<1>{rows * 16, 16}. A lane
// touches only elements lane + 16k of its row (the layout of norm.cpp and actq.cpp), so the
// in-place residual update needs no barrier.
// Not built with -ffast-math (the rounding's division and rint must stay exact).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// One work-group (one 16-lane sub-group) per row: the row and the row count of the nd-range.
template <int B>
static inline void rms_norm_q8(const float *x, const float *w, float *yq, XSt st, int n,
                               float eps) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  rms_norm_q8_row<B>(sg, lane, x, w, yq, st, n, eps, it.get_group(0), it.get_group_range(0));
}

template <int B>
static inline void add_rms_norm_q8(float *res, const float *a, const float *w, float *yq,
                                   XSt st, int n, float eps) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t row = it.get_group(0);
  float *rr = res + row * n;
  const float *ar = a + row * n;
  for (int c = 0; c * 16 < n; c++) {
    const int i = c * 16 + lane;
    if (i < n) rr[i] = rr[i] + ar[i];
  }
  const float inv = row_inv_rms(rr, n, eps, lane, sg);
  store_rounded<B>(sg, lane, n, row, it.get_group_range(0), yq + row * n, st,
                   [&](int i) { return (rr[i] * inv) * w[i]; });
}

template <int B>
static inline void norm_add_norm_q8(const float *a, const float *w1, float *res, const float *w2,
                                    float *yq, XSt st, int n, float eps) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  norm_add_norm_q8_row<B>(sg, lane, a, w1, res, w2, yq, st, n, eps, it.get_group(0),
                          it.get_group_range(0));
}

STRATA_KERNEL void rms_norm_q8_32(uint64_t a_x,  // (rows, n)
                                  uint64_t a_w,  // (n)
                                  uint64_t a_yq, // (rows, n) rounded; may alias x
                                  uint64_t a_st, // staged yq (xstage.hpp), or 0
                                  uint64_t a_rec, // its integer records, or 0
                                  int n, float eps) {
  const float *x = STRATA_ADDR(const float, a_x);
  const float *w = STRATA_ADDR(const float, a_w);
  float *yq = STRATA_ADDR(float, a_yq);
  rms_norm_q8<32>(x, w, yq, XST_ARGS(a_st, a_rec), n, eps);
}
STRATA_KERNEL void rms_norm_q8_256(uint64_t a_x,  // (rows, n)
                                   uint64_t a_w,  // (n)
                                   uint64_t a_yq, // (rows, n) rounded; may alias x
                                   uint64_t a_st,  // integer records (xstage.hpp), or 0
                                   int n, float eps) {
  const float *x = STRATA_ADDR(const float, a_x);
  const float *w = STRATA_ADDR(const float, a_w);
  float *yq = STRATA_ADDR(float, a_yq);
  rms_norm_q8<256>(x, w, yq, XST_ARG256(a_st), n, eps);
}

STRATA_KERNEL void add_rms_norm_q8_32(uint64_t a_res, // (rows, n) residual, updated in place
                                      uint64_t a_a,   // (rows, n) added to the residual
                                      uint64_t a_w,   // (n)
                                      uint64_t a_yq,  // (rows, n) rounded normed output
                                      uint64_t a_st,  // staged yq (xstage.hpp), or 0
                                      uint64_t a_rec, // its integer records, or 0
                                      int n, float eps) {
  float *res = STRATA_ADDR(float, a_res);
  const float *a = STRATA_ADDR(const float, a_a);
  const float *w = STRATA_ADDR(const float, a_w);
  float *yq = STRATA_ADDR(float, a_yq);
  add_rms_norm_q8<32>(res, a, w, yq, XST_ARGS(a_st, a_rec), n, eps);
}
STRATA_KERNEL void add_rms_norm_q8_256(uint64_t a_res, // (rows, n) residual, updated in place
                                       uint64_t a_a,   // (rows, n) added to the residual
                                       uint64_t a_w,   // (n)
                                       uint64_t a_yq,  // (rows, n) rounded normed output
                                       uint64_t a_st,  // integer records (xstage.hpp), or 0
                                       int n, float eps) {
  float *res = STRATA_ADDR(float, a_res);
  const float *a = STRATA_ADDR(const float, a_a);
  const float *w = STRATA_ADDR(const float, a_w);
  float *yq = STRATA_ADDR(float, a_yq);
  add_rms_norm_q8<256>(res, a, w, yq, XST_ARG256(a_st), n, eps);
}

STRATA_KERNEL void norm_add_norm_q8_32(uint64_t a_a,   // (rows, n) normed, then added
                                       uint64_t a_w1,  // (n) norm weight of a
                                       uint64_t a_res, // (rows, n) residual, updated in place
                                       uint64_t a_w2,  // (n) norm weight of the new residual
                                       uint64_t a_yq,  // (rows, n) rounded normed output
                                       uint64_t a_st,  // staged yq (xstage.hpp), or 0
                                       uint64_t a_rec, // its integer records, or 0
                                       int n, float eps) {
  const float *a = STRATA_ADDR(const float, a_a);
  const float *w1 = STRATA_ADDR(const float, a_w1);
  float *res = STRATA_ADDR(float, a_res);
  const float *w2 = STRATA_ADDR(const float, a_w2);
  float *yq = STRATA_ADDR(float, a_yq);
  norm_add_norm_q8<32>(a, w1, res, w2, yq, XST_ARGS(a_st, a_rec), n, eps);
}
STRATA_KERNEL void norm_add_norm_q8_256(uint64_t a_a,   // (rows, n) normed, then added
                                        uint64_t a_w1,  // (n) norm weight of a
                                        uint64_t a_res, // (rows, n) residual, updated in place
                                        uint64_t a_w2,  // (n) norm weight of the new residual
                                        uint64_t a_yq,  // (rows, n) rounded normed output
                                        uint64_t a_st,  // integer records (xstage.hpp), or 0
                                        int n, float eps) {
  const float *a = STRATA_ADDR(const float, a_a);
  const float *w1 = STRATA_ADDR(const float, a_w1);
  float *res = STRATA_ADDR(float, a_res);
  const float *w2 = STRATA_ADDR(const float, a_w2);
  float *yq = STRATA_ADDR(float, a_yq);
  norm_add_norm_q8<256>(a, w1, res, w2, yq, XST_ARG256(a_st), n, eps);
}
