// The attention prologue in one launch: RoPE on the q rows (in place), RoPE on the k rows stored
// straight into the f16 K cache, the v rows into the f16 V cache; optionally (Gemma 3) the per-head
// RMS norms of q and k first. Replaces [rms_norm(q), rms_norm(k),] rope(q), rope(k), kv_store
// with bitwise the same results: the normed values are norm.cpp's expression (row_inv_rms from
// norm.hpp), the rotation is rope.hpp's, the f16 conversion kv.cpp's (round to nearest even).
// The roped k is not written back to the k rows (only the cache reads it).
//   rope_kv_norm: llama pairs (2i, 2i+1);  rope_kv_neox: pairs (i, i + n_rot/2)
//   *_qknorm: x = rms_norm(x) * w per head first (q_w for q heads, k_w for k heads)
// Elements n_rot..head_dim pass through (normed when *_qknorm).
// One 16-lane sub-group (= work-group) per head row: groups 0 .. T*n_head-1 are the q heads
// (t, h), then T*n_kv_head groups for the (t, h) k/v heads. Launch
// nd_range<1>{T * (n_head + n_kv_head) * 16, 16}; head_dim % 16 == 0. A k/v row whose position
// is outside [0, n_ctx) is not stored (as kv.cpp); its q rows are still rotated.
// Not built with -ffast-math: it could fold fma(p, f, -p*f) to 0.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// Rotates one head row xr (normed first when QKNORM, weight nw, scale inv) and hands each
// output element to put(index, value). Pairs are spread over the lanes, pass-through elements
// too; every element of the row is put exactly once.
template <bool NEOX, bool QKNORM, typename P>
static inline void rope_row(const float *xr, const float *nw, float inv, float p,
                            const float *freq, int head_dim, int n_rot, int lane, P put) {
  const int half = n_rot / 2;
  auto in = [&](int j) { return QKNORM ? (xr[j] * inv) * nw[j] : xr[j]; };
  for (int c = 0; c * 16 < half; c++) {
    const int i = c * 16 + lane;
    if (i < half) {
      const int a = NEOX ? i : 2 * i, b = NEOX ? i + half : 2 * i + 1;
      float y0, y1;
      rope_rot(in(a), in(b), p, freq[i], y0, y1);
      put(a, y0);
      put(b, y1);
    }
  }
  for (int j = n_rot + lane; j < head_dim; j += 16) put(j, in(j));
}

template <bool NEOX, bool QKNORM>
static inline void rope_kv(float *q, const float *k, const float *v, sycl::half *kc,
                           sycl::half *vc, const int32_t *pos, const float *freq,
                           const float *q_w, const float *k_w, int T, int n_head,
                           int n_kv_head, int head_dim, int n_rot, int n_ctx, float eps) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t g = it.get_group(0);
  const size_t n_q = (size_t)T * n_head;
  if (g < n_q) {
    float *xr = q + g * head_dim;
    const float p = (float)pos[g / n_head]; // exact below 2^24
    const float inv = QKNORM ? row_inv_rms(xr, head_dim, eps, lane, sg) : 1.0f;
    // every lane has read the row for its sum before any lane overwrites a pair of it
    if (QKNORM) sycl::group_barrier(sg);
    rope_row<NEOX, QKNORM>(xr, q_w, inv, p, freq, head_dim, n_rot, lane,
                           [&](int j, float y) { xr[j] = y; });
    return;
  }
  const size_t r = g - n_q; // (t, h) of the k/v rows
  if (r >= (size_t)T * n_kv_head) return;
  const int t = (int)(r / n_kv_head), h = (int)(r % n_kv_head);
  const int pi = pos[t];
  if (pi < 0 || pi >= n_ctx) return;
  const size_t dst = ((size_t)h * n_ctx + pi) * head_dim;
  const float *kr = k + r * head_dim;
  const float *vr = v + r * head_dim;
  const float inv = QKNORM ? row_inv_rms(kr, head_dim, eps, lane, sg) : 1.0f;
  rope_row<NEOX, QKNORM>(kr, k_w, inv, (float)pi, freq, head_dim, n_rot, lane,
                         [&](int j, float y) { kc[dst + j] = (sycl::half)y; });
  for (int j = lane; j < head_dim; j += 16) vc[dst + j] = (sycl::half)vr[j];
}

#define ROPE_KV_ARGS                                                                               \
  uint64_t q,              /* (T, n_head * head_dim) f32, rotated in place */                     \
      uint64_t k,          /* (T, n_kv_head * head_dim) f32, read only */                         \
      uint64_t v,          /* (T, n_kv_head * head_dim) f32 */                                    \
      uint64_t kc,         /* (n_kv_head, n_ctx, head_dim) f16 */                                 \
      uint64_t vc,         /* (n_kv_head, n_ctx, head_dim) f16 */                                 \
      uint64_t pos,        /* (T) i32 */                                                          \
      uint64_t freq,       /* (n_rot / 2) f32 */                                                  \
      uint64_t q_w,        /* (head_dim) f32 q norm weight (qknorm kernels only) */               \
      uint64_t k_w,        /* (head_dim) f32 k norm weight (qknorm kernels only) */               \
      int T, int n_head, int n_kv_head, int head_dim, int n_rot, int n_ctx, float eps
#define ROPE_KV_PASS                                                                               \
  STRATA_ADDR(float, q), STRATA_ADDR(const float, k), STRATA_ADDR(const float, v),                 \
      STRATA_ADDR(sycl::half, kc), STRATA_ADDR(sycl::half, vc),                                    \
      STRATA_ADDR(const int32_t, pos), STRATA_ADDR(const float, freq),                             \
      STRATA_ADDR(const float, q_w), STRATA_ADDR(const float, k_w), T, n_head, n_kv_head,          \
      head_dim, n_rot, n_ctx, eps

STRATA_KERNEL void rope_kv_norm(ROPE_KV_ARGS) { rope_kv<false, false>(ROPE_KV_PASS); }
STRATA_KERNEL void rope_kv_neox(ROPE_KV_ARGS) { rope_kv<true, false>(ROPE_KV_PASS); }
STRATA_KERNEL void rope_kv_norm_qknorm(ROPE_KV_ARGS) { rope_kv<false, true>(ROPE_KV_PASS); }
STRATA_KERNEL void rope_kv_neox_qknorm(ROPE_KV_ARGS) { rope_kv<true, true>(ROPE_KV_PASS); }
