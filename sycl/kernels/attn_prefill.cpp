// Causal grouped-query attention for many query rows at once (the prompt path, T > 8): the same
// maths and arguments as attn.cpp's attn_f16kv, organised for throughput instead of per-row
// bitwise stability (the decode kernel keeps that guarantee for T <= 8).
//   q:   (T, n_head * CFG_HD) f32, already roped (and QK-normed for Gemma)
//   kc, vc: (n_kv_head, n_ctx, CFG_HD) f16; the rows' own keys must already be stored
//   pos: (T) i32, the position of each query row
//   out: (T, n_head * CFG_HD) f32
// Row t, head h attends keys j with lo <= j <= pos[t], lo = window > 0 ? max(0, pos[t]-window+1) : 0.
//
// One 16-lane sub-group (= one work-group) per (tile of 16 query rows, head): launch
// nd_range<1>{ceil(T/16) * n_head * 16, 16}; lane = query row. The tile's q rows sit transposed
// in local memory (qT[e][lane]); keys go in blocks of 16, each block's K (then V) converted once
// from f16 to f32 into local memory and shared by the 16 rows. Per block and lane: 16 scores
// (s[kk] += qT[e][lane] * K[kk][e]: a vector load and 16 broadcast FMAs per e, no cross-lane
// reduction), an online-softmax update, then acc[e] += p[kk] * V[kk][e] with acc transposed in
// local memory. Keys past the tile's last position are clamped to it (finite cache rows: a
// masked key has p = 0, and 0 * a never-written row could be NaN).
// Not built with -ffast-math (exp of -inf must stay 0).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#ifndef CFG_HD
#define CFG_HD 64
#endif
static_assert(CFG_HD % 16 == 0, "CFG_HD must be a multiple of 16");
#define CFG_NK 16  // keys per block (= score registers per lane)

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))
void attn_prefill(const float *q,         // (T, n_head * CFG_HD)
                  const sycl::half *kc,   // (n_kv_head, n_ctx, CFG_HD)
                  const sycl::half *vc,   // (n_kv_head, n_ctx, CFG_HD)
                  const int32_t *pos,     // (T)
                  float *out,             // (T, n_head * CFG_HD)
                  int T, int n_head, int n_kv_head, int n_ctx, int window, float scale) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  // the work-group IS one sub-group: sub-group barriers order the local-memory exchange without
  // making the CPU compiler split the kernel at work-group barriers
  auto sg = it.get_sub_group();
  const int lane = (int)it.get_local_linear_id();
  const size_t g = it.get_group(0);
  const int h = (int)(g % n_head), tile = (int)(g / n_head);
  const int kvh = h / (n_head / n_kv_head);
  const int row = tile * 16 + lane;
  const int rowc = row < T ? row : T - 1;  // lanes past T recompute row T-1, never store
  const size_t stride = (size_t)n_head * CFG_HD;

  syclexp::work_group_static<float[CFG_HD * 16]> qt_mem;      // (CFG_HD, 16) q, transposed
  syclexp::work_group_static<float[CFG_HD * 16]> acc_mem;     // (CFG_HD, 16) output, transposed
  syclexp::work_group_static<float[CFG_NK * CFG_HD]> kv_mem;  // (CFG_NK, CFG_HD) K or V block
  float *qt = qt_mem, *acc = acc_mem, *kvb = kv_mem;

  const int p = pos[rowc];
  const bool ok = p >= 0 && p < n_ctx;
  const int lo = !ok ? n_ctx : (window > 0 ? (p - window + 1 > 0 ? p - window + 1 : 0) : 0);
  const int hi = ok ? p : -1;
  const int jlo = sycl::reduce_over_group(sg, lo, sycl::minimum<int>());
  const int jhi = sycl::reduce_over_group(sg, hi, sycl::maximum<int>());

  const float *qr = q + (size_t)rowc * stride + (size_t)h * CFG_HD;
  for (int e = 0; e < CFG_HD; ++e) {
    qt[e * 16 + lane] = qr[e];
    acc[e * 16 + lane] = 0.0f;
  }
  const sycl::half *kh = kc + (size_t)kvh * n_ctx * CFG_HD;
  const sycl::half *vh = vc + (size_t)kvh * n_ctx * CFG_HD;
  const float ninf = -std::numeric_limits<float>::infinity();
  float m = ninf, l = 0.0f;

  for (int j0 = jlo; j0 <= jhi; j0 += CFG_NK) {
    sycl::group_barrier(sg);  // previous block's V reads done
    for (int kk = 0; kk < CFG_NK; ++kk) {
      const int j = j0 + kk <= jhi ? j0 + kk : jhi;
      const sycl::half *kr = kh + (size_t)j * CFG_HD;
      for (int e0 = 0; e0 < CFG_HD; e0 += 16) kvb[kk * CFG_HD + e0 + lane] = (float)kr[e0 + lane];
    }
    sycl::group_barrier(sg);
    float s[CFG_NK];
#pragma unroll
    for (int kk = 0; kk < CFG_NK; ++kk) s[kk] = 0.0f;
    for (int e = 0; e < CFG_HD; ++e) {
      const float qv = qt[e * 16 + lane];
#pragma unroll
      for (int kk = 0; kk < CFG_NK; ++kk) s[kk] = sycl::fma(qv, kvb[kk * CFG_HD + e], s[kk]);
    }
    float bm = ninf;
#pragma unroll
    for (int kk = 0; kk < CFG_NK; ++kk) {
      const int j = j0 + kk;
      s[kk] = (j >= lo && j <= hi) ? s[kk] * scale : ninf;
      bm = s[kk] > bm ? s[kk] : bm;
    }
    const float m_new = m > bm ? m : bm;
    // a lane with no key yet keeps m = -inf: subtract 0 instead (exp(-inf) = 0, never NaN)
    const float mref = m_new == ninf ? 0.0f : m_new;
    const float corr = sycl::exp(m - mref);
    float psum = 0.0f;
#pragma unroll
    for (int kk = 0; kk < CFG_NK; ++kk) {
      s[kk] = sycl::exp(s[kk] - mref);
      psum += s[kk];
    }
    l = l * corr + psum;
    m = m_new;
    sycl::group_barrier(sg);  // K reads done
    for (int kk = 0; kk < CFG_NK; ++kk) {
      const int j = j0 + kk <= jhi ? j0 + kk : jhi;
      const sycl::half *vr = vh + (size_t)j * CFG_HD;
      for (int e0 = 0; e0 < CFG_HD; e0 += 16) kvb[kk * CFG_HD + e0 + lane] = (float)vr[e0 + lane];
    }
    sycl::group_barrier(sg);
    for (int e = 0; e < CFG_HD; ++e) {
      float a = acc[e * 16 + lane] * corr;
#pragma unroll
      for (int kk = 0; kk < CFG_NK; ++kk) a = sycl::fma(s[kk], kvb[kk * CFG_HD + e], a);
      acc[e * 16 + lane] = a;
    }
  }
  if (row < T) {
    float *orow = out + (size_t)row * stride + (size_t)h * CFG_HD;
    const float inv = 1.0f / l;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int e = 0; e < CFG_HD; ++e) orow[e] = ok ? acc[e * 16 + lane] * inv : nan;
  }
}
