// Gated FFN activation fused with the 8-bit block rounding of its output (the down product's
// input): yq = round_B(act(gate) * up), act = SiLU (llama) or GELU-tanh (Gemma). One launch
// instead of silu_mul/gelu_mul + act_q8; bitwise the unfused pair (act.hpp's expression, then
// actq.hpp's rounding). n % B == 0 (B = 32 or 256; the down weight's n_in is a multiple of it).
// One 16-lane sub-group per block, lane l owning elements l + 16k: launch
// nd_range<1>{n / B * 16, 16}.
// Not built with -ffast-math: silu/gelu at large |gate| rely on exp/tanh saturating exactly,
// and the rounding's division and rint must stay exact.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// st: the staged yq of xstage.hpp (B = 32 only), or nullptr.
template <int B, bool GELU>
static inline void glu_q8(const float *gate, const float *up, float *yq, XSt st,
                          int n_blocks) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t b = it.get_group(0);
  if (b >= (size_t)n_blocks) return;
  // uniform pointers + int lane offsets keep the loads "uniform + lane" vector loads
  const float *gb = gate + b * B, *ub = up + b * B;
  float *yb = yq + b * B;
  auto act = [&](int i) { return GELU ? gelu_mul1(gb[i], ub[i]) : silu_mul1(gb[i], ub[i]); };
  if (B == 32) {
    float y0, y1;
    const float dh = q8_32_round(sg, act(lane), act(16 + lane), y0, y1);
    yb[lane] = y0;
    yb[16 + lane] = y1;
    xstage_block(sg, lane, st, (size_t)n_blocks * 32, b, y0, y1, dh); // xstage.hpp
  } else {
    float v[16];
    for (int k = 0; k < 16; k++) v[k] = act(k * 16 + lane);
    const float d = q8_256_round(sg, lane, v);
    for (int k = 0; k < 16; k++) yb[k * 16 + lane] = v[k];
    xstage_block256(sg, lane, st, b, v, d); // xstage.hpp
  }
}

STRATA_KERNEL void silu_mul_q8_32(uint64_t a_gate, // (n)
                                  uint64_t a_up,   // (n)
                                  uint64_t a_yq,   // (n) rounded; may alias gate or up
                                  uint64_t a_st,   // staged yq (xstage.hpp), or 0
                                  uint64_t a_rec,  // its integer records, or 0
                                  int n_blocks) {
  const float *gate = STRATA_ADDR(const float, a_gate);
  const float *up = STRATA_ADDR(const float, a_up);
  float *yq = STRATA_ADDR(float, a_yq);
  glu_q8<32, false>(gate, up, yq, XST_ARGS(a_st, a_rec), n_blocks);
}
STRATA_KERNEL void silu_mul_q8_256(uint64_t a_gate, // (n)
                                   uint64_t a_up,   // (n)
                                   uint64_t a_yq,   // (n) rounded; may alias gate or up
                                   uint64_t a_st,   // integer records (xstage.hpp), or 0
                                   int n_blocks) {
  const float *gate = STRATA_ADDR(const float, a_gate);
  const float *up = STRATA_ADDR(const float, a_up);
  float *yq = STRATA_ADDR(float, a_yq);
  glu_q8<256, false>(gate, up, yq, XST_ARG256(a_st), n_blocks);
}
STRATA_KERNEL void gelu_mul_q8_32(uint64_t a_gate, // (n)
                                  uint64_t a_up,   // (n)
                                  uint64_t a_yq,   // (n) rounded; may alias gate or up
                                  uint64_t a_st,   // staged yq (xstage.hpp), or 0
                                  uint64_t a_rec,  // its integer records, or 0
                                  int n_blocks) {
  const float *gate = STRATA_ADDR(const float, a_gate);
  const float *up = STRATA_ADDR(const float, a_up);
  float *yq = STRATA_ADDR(float, a_yq);
  glu_q8<32, true>(gate, up, yq, XST_ARGS(a_st, a_rec), n_blocks);
}
STRATA_KERNEL void gelu_mul_q8_256(uint64_t a_gate, // (n)
                                   uint64_t a_up,   // (n)
                                   uint64_t a_yq,   // (n) rounded; may alias gate or up
                                   uint64_t a_st,   // integer records (xstage.hpp), or 0
                                   int n_blocks) {
  const float *gate = STRATA_ADDR(const float, a_gate);
  const float *up = STRATA_ADDR(const float, a_up);
  float *yq = STRATA_ADDR(float, a_yq);
  glu_q8<256, true>(gate, up, yq, XST_ARG256(a_st), n_blocks);
}
