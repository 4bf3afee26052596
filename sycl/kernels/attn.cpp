// Causal grouped-query attention over the f16 KV cache, for T query rows.
//   q:   (T, n_head * CFG_HD) f32, already roped (and QK-normed for Gemma)
//   kc, vc: (n_kv_head, n_ctx, CFG_HD) f16; the rows' own keys must already be stored
//   pos: (T) i32, the position of each query row
//   out: (T, n_head * CFG_HD) f32
// Row t, head h attends keys j of kv head h / (n_head / n_kv_head) with lo <= j <= pos[t],
// lo = window > 0 ? max(0, pos[t] - window + 1) : 0 (i.e. pos_q - pos_k < window).
// score_j = scale * dot(q, k_j); out = sum_j softmax(score)_j * v_j.
//
// One 16-lane sub-group (= one work-group) per (t, h): launch nd_range<1>{T * n_head * 16, 16}.
// Lane l owns head elements l, l+16, ... (CFG_HD / 16 of them). Keys go in blocks of 16 starting
// at lo; per block: 16 scores (lane partial dots + a fixed sub-group tree), an online-softmax
// update (running max m, running sum l), then the V accumulation in key order. Everything depends
// only on (pos[t], window, q row, cache): a row's result is bitwise the same whatever T is.
// Not built with -ffast-math (exp of -inf must stay 0; the order above must not be reassociated).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// head_dim, a multiple of 16; the launcher always sets it (the default only lets tools that build
// every source without options compile this one)
#ifndef CFG_HD
#define CFG_HD 64
#endif
static_assert(CFG_HD % 16 == 0, "CFG_HD must be a multiple of 16");
#define CFG_E (CFG_HD / 16)

STRATA_KERNEL void attn_f16kv(const float *q,          // (T, n_head * CFG_HD)
                        const sycl::half *kc,    // (n_kv_head, n_ctx, CFG_HD)
                        const sycl::half *vc,    // (n_kv_head, n_ctx, CFG_HD)
                        const int32_t *pos,      // (T)
                        float *out,              // (T, n_head * CFG_HD)
                        int n_head, int n_kv_head, int n_ctx, int window, float scale) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t g = it.get_group(0); // (t, h)
  const int t = (int)(g / n_head), h = (int)(g % n_head);
  const int kvh = h / (n_head / n_kv_head);
  const float *qr = q + g * CFG_HD;
  float *orow = out + g * CFG_HD;
  const int p = pos[t];
  if (p < 0 || p >= n_ctx) {
    for (int e = 0; e < CFG_E; e++) orow[e * 16 + lane] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const int lo = window > 0 ? sycl::max(0, p - window + 1) : 0;
  const sycl::half *kh = kc + (size_t)kvh * n_ctx * CFG_HD;
  const sycl::half *vh = vc + (size_t)kvh * n_ctx * CFG_HD;

  float qv[CFG_E], acc[CFG_E];
#pragma unroll
  for (int e = 0; e < CFG_E; e++) {
    qv[e] = qr[e * 16 + lane];
    acc[e] = 0.0f;
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  float m = ninf, l = 0.0f;
  for (int j0 = lo; j0 <= p; j0 += 16) {
    const int nk = sycl::min(16, p - j0 + 1);
    // lane kk ends up holding the score of key j0 + kk
    float s_mine = ninf;
    for (int kk = 0; kk < nk; kk++) {
      const sycl::half *kr = kh + (size_t)(j0 + kk) * CFG_HD;
      float part = 0.0f;
#pragma unroll
      for (int e = 0; e < CFG_E; e++) part += qv[e] * (float)kr[e * 16 + lane];
      const float s = sycl::reduce_over_group(sg, part, sycl::plus<float>()) * scale;
      if (lane == kk) s_mine = s;
    }
    const float bm = sycl::reduce_over_group(sg, s_mine, sycl::maximum<float>());
    const float m_new = sycl::max(m, bm);
    const float corr = sycl::exp(m - m_new); // 0 on the first block (m = -inf)
    const float pr = sycl::exp(s_mine - m_new); // 0 for lanes past the last key
    l = l * corr + sycl::reduce_over_group(sg, pr, sycl::plus<float>());
#pragma unroll
    for (int e = 0; e < CFG_E; e++) acc[e] *= corr;
    for (int kk = 0; kk < nk; kk++) {
      const float pk = sycl::group_broadcast(sg, pr, kk);
      const sycl::half *vr = vh + (size_t)(j0 + kk) * CFG_HD;
#pragma unroll
      for (int e = 0; e < CFG_E; e++) acc[e] += pk * (float)vr[e * 16 + lane];
    }
    m = m_new;
  }
  const float inv = 1.0f / l;
#pragma unroll
  for (int e = 0; e < CFG_E; e++) orow[e * 16 + lane] = acc[e] * inv;
}
