// Causal grouped-query attention over the f16 KV cache, for T query rows (split-K, two kernels).
//   q:   (T, n_head * CFG_HD) f32, already roped (and QK-normed for Gemma)
//   kc, vc: (n_kv_head, n_ctx, CFG_HD) f16; the rows' own keys must already be stored
//   pos: (T) i32, the position of each query row
//   out: (T, n_head * CFG_HD) f32
// Row t, head h attends keys j of kv head h / (n_head / n_kv_head) with lo <= j <= pos[t],
// lo = window > 0 ? max(0, pos[t] - window + 1) : 0 (i.e. pos_q - pos_k < window).
// score_j = scale * dot(q, k_j); out = sum_j softmax(score)_j * v_j.
//
// The key axis is cut into fixed chunks of CFG_C keys at absolute positions [c*C, c*C + C)
// ("flash decoding"). attn_part computes, for every (row, head, chunk) that meets the row's key
// range, the chunk's max score m_c, sum l_c = sum exp(s - m_c) and unnormalised acc_c =
// sum exp(s - m_c) v; attn_combine folds the chunks of a (row, head) in chunk order. The chunk
// boundaries and every summation order depend only on (pos[t], window, q row, cache), never on
// T or on which work-group handled a chunk: a row's result is bitwise the same whatever T is.
//
// Vectorisation (see docs/kernels.md, "Attention speed"): lanes = head dims for the loads (a K or
// V row is `uniform_ptr + e*16 + lane`, one vector load + f16 widening per 16 elements); the 16
// per-key lane partials of a block of 16 keys are reduced by a transposing butterfly (15 xor
// permutes instead of 16 full sub-group reductions) that leaves key j0 + l's score in lane l.
// Not built with -ffast-math (exp of -inf must stay 0; the orders above must not be reassociated).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// head_dim, a multiple of 16; the launcher always sets it (the defaults only let tools that build
// every source without options compile this one)
#ifndef CFG_HD
#define CFG_HD 64
#endif
// keys per chunk, a multiple of 16 (the launcher sets it; part of the bitwise contract)
#ifndef CFG_C
#define CFG_C 128
#endif
static_assert(CFG_HD % 16 == 0, "CFG_HD must be a multiple of 16");
static_assert(CFG_C % 16 == 0, "CFG_C must be a multiple of 16");
#define CFG_E (CFG_HD / 16)
#define CFG_NB (CFG_C / 16)
// one partial record: acc (CFG_HD floats), then m and l; padded to keep records 64-byte aligned
#define CFG_R (CFG_HD + 16)

// Integer min/max as plain ternaries: the CPU vectoriser treats the result of a sycl::min/max/clamp
// call as varying across lanes, which turned the key loops into per-lane masked scalar loads.
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }
static inline float fmax_u(float a, float b) { return a > b ? a : b; }
static inline int row_lo(int p, int window) { return window > 0 ? imax(0, p - window + 1) : 0; }

// One butterfly stage: pairs (a, b) become one vector; lanes with `mask` set carry b's keys.
static inline float bfly(sycl::sub_group sg, int lane, int mask, float a, float b) {
  const bool hi = (lane & mask) != 0;
  const float keep = hi ? b : a, send = hi ? a : b;
  return keep + sycl::permute_group_by_xor(sg, send, mask);
}

// grid: n_kv_head * n_slices work-groups of 16; group (kvh, s) handles chunks s, s + n_slices, ...
// part: (T, n_head, n_chunks, CFG_R) f32, n_chunks = ceil(n_ctx / CFG_C)
static inline void part_body(sycl::nd_item<1> it, float (&pk)[16], const float *q,
                             const sycl::half *kc, const sycl::half *vc, const int32_t *pos,
                             float *part, int T, int n_head, int n_kv_head, int n_ctx, int window,
                             float scale, int n_slices) {
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const int g = (int)it.get_group(0);
  const int kvh = g / n_slices, slice = g % n_slices;
  const int group = n_head / n_kv_head;
  const int n_chunks = (n_ctx + CFG_C - 1) / CFG_C;
  const sycl::half *kh = kc + (size_t)kvh * n_ctx * CFG_HD;
  const sycl::half *vh = vc + (size_t)kvh * n_ctx * CFG_HD;
  const float ninf = -std::numeric_limits<float>::infinity();

  for (int c = slice; c < n_chunks; c += n_slices) {
    const int c0 = c * CFG_C;
    for (int t = 0; t < T; t++) {
      const int p = pos[t];
      if (p < 0 || p >= n_ctx) continue;
      const int lo = row_lo(p, window);
      if (c0 > p || c0 + CFG_C - 1 < lo) continue;
      for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        const float *qr = q + ((size_t)t * n_head + h) * CFG_HD;
        float qv[CFG_E];
#pragma unroll
        for (int e = 0; e < CFG_E; e++) qv[e] = qr[e * 16 + lane];
        // scores: lane l of s[b] holds key c0 + 16 b + l (-inf outside [lo, p])
        float s[CFG_NB];
        float mx = ninf;
        for (int b = 0; b < CFG_NB; b++) {
          const int j0 = c0 + b * 16;
          if (j0 > p || j0 + 15 < lo) {
            s[b] = ninf;
            continue;
          }
          float P[16];
#pragma unroll
          for (int k = 0; k < 16; k++) {
            // rows outside [lo, p] may be unwritten or past n_ctx: read a valid row, mask later
            const int row = imin(imax(j0 + k, lo), p);
            const sycl::half *kr = kh + (size_t)row * CFG_HD;
            float acc = 0.0f;
#pragma unroll
            for (int e = 0; e < CFG_E; e++) acc += qv[e] * (float)kr[e * 16 + lane];
            P[k] = acc;
          }
#pragma unroll
          for (int k = 0; k < 8; k++) P[k] = bfly(sg, lane, 8, P[k], P[k + 8]);
#pragma unroll
          for (int k = 0; k < 4; k++) P[k] = bfly(sg, lane, 4, P[k], P[k + 4]);
#pragma unroll
          for (int k = 0; k < 2; k++) P[k] = bfly(sg, lane, 2, P[k], P[k + 2]);
          const float dot = bfly(sg, lane, 1, P[0], P[1]);
          const int j = j0 + lane;
          const float sv = (j >= lo && j <= p) ? dot * scale : ninf;
          s[b] = sv;
          mx = sycl::max(mx, sv);
        }
        const float m = sycl::reduce_over_group(sg, mx, sycl::maximum<float>());
        float lsum = 0.0f, acc[CFG_E];
#pragma unroll
        for (int e = 0; e < CFG_E; e++) acc[e] = 0.0f;
        for (int b = 0; b < CFG_NB; b++) {
          const int j0 = c0 + b * 16;
          if (j0 > p || j0 + 15 < lo) continue;
          const float w = sycl::exp(s[b] - m); // 0 for masked keys
          lsum += w;
          sycl::group_barrier(sg); // pk is reused: the previous block's reads are done
          pk[lane] = w;
          sycl::group_barrier(sg);
          const int k0 = imax(lo - j0, 0), k1 = imin(p - j0, 15);
          for (int k = k0; k <= k1; k++) {
            const float wk = pk[k];
            const sycl::half *vr = vh + (size_t)(j0 + k) * CFG_HD;
#pragma unroll
            for (int e = 0; e < CFG_E; e++) acc[e] += wk * (float)vr[e * 16 + lane];
          }
        }
        const float l = sycl::reduce_over_group(sg, lsum, sycl::plus<float>());
        float *rec = part + (((size_t)t * n_head + h) * n_chunks + c) * CFG_R;
#pragma unroll
        for (int e = 0; e < CFG_E; e++) rec[e * 16 + lane] = acc[e];
        if (lane == 0) {
          rec[CFG_HD] = m;
          rec[CFG_HD + 1] = l;
        }
      }
    }
  }
}

STRATA_KERNEL void attn_part(uint64_t a_q,   // (T, n_head * CFG_HD) f32
                             uint64_t a_kc,  // (n_kv_head, n_ctx, CFG_HD) f16
                             uint64_t a_vc,  // (n_kv_head, n_ctx, CFG_HD) f16
                             uint64_t a_pos, // (T) i32
                             uint64_t a_part, // (T, n_head, n_chunks, CFG_R) f32
                             int T, int n_head, int n_kv_head, int n_ctx, int window, float scale,
                             int n_slices) {
  const float *q = STRATA_ADDR(const float, a_q);
  const sycl::half *kc = STRATA_ADDR(const sycl::half, a_kc);
  const sycl::half *vc = STRATA_ADDR(const sycl::half, a_vc);
  const int32_t *pos = STRATA_ADDR(const int32_t, a_pos);
  float *part = STRATA_ADDR(float, a_part);
  static syclexp::work_group_static<float[16]> pk_mem; // the 16 weights of a block, for broadcast
  part_body(syclext::this_work_item::get_nd_item<1>(), pk_mem, q, kc, vc, pos, part, T, n_head,
            n_kv_head, n_ctx, window, scale, n_slices);
}

// Folds the chunk records of (t, h) = (g / n_head, g % n_head) in chunk order into out's row.
// One sub-group of 16; lane l owns head elements l, l + 16, ...
// round_block 32 / 256: the row is written rounded through 8-bit blocks as act_q8_32 /
// act_q8_256 would round it (actq.hpp, same operations on the same values: the same bits), so
// the output projection needs no rounding launch. 0: plain.
// st (or nullptr): the staged output of xstage.hpp over all groups' rows (round_block 32: the
// stage of blocks of 32, 256: the integer records).
static inline void combine_one(sycl::sub_group sg, size_t g, const float *part,
                               const int32_t *pos, float *out, int n_head, int n_ctx,
                               int window, int round_block, XSt st, size_t n_out_total) {
  const int lane = (int)sg.get_local_id()[0];
  const int t = (int)(g / n_head);
  const int n_chunks = (n_ctx + CFG_C - 1) / CFG_C;
  float *orow = out + g * CFG_HD;
  const int p = pos[t];
  if (p < 0 || p >= n_ctx) {
    for (int e = 0; e < CFG_E; e++) orow[e * 16 + lane] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const int ca = row_lo(p, window) / CFG_C, cb = p / CFG_C;
  const float *recs = part + g * n_chunks * CFG_R;
  float m = -std::numeric_limits<float>::infinity();
  for (int c = ca; c <= cb; c++) m = fmax_u(m, recs[(size_t)c * CFG_R + CFG_HD]);
  float l = 0.0f, acc[CFG_E];
#pragma unroll
  for (int e = 0; e < CFG_E; e++) acc[e] = 0.0f;
  for (int c = ca; c <= cb; c++) {
    const float *rec = recs + (size_t)c * CFG_R;
    const float w = sycl::exp(rec[CFG_HD] - m);
    l += rec[CFG_HD + 1] * w;
#pragma unroll
    for (int e = 0; e < CFG_E; e++) acc[e] += rec[e * 16 + lane] * w;
  }
  const float inv = 1.0f / l;
  float y[CFG_E];
#pragma unroll
  for (int e = 0; e < CFG_E; e++) y[e] = acc[e] * inv;
#if CFG_E % 2 == 0
  // a block of 32 = elements (e, e + 1) of every lane: act_q8_32's (lane, 16 + lane)
  if (round_block == 32)
    for (int b = 0; b < CFG_E / 2; b++) {
      const float dh = q8_32_round(sg, y[2 * b], y[2 * b + 1], y[2 * b], y[2 * b + 1]);
      // block b of the row = flat block g * CFG_HD / 32 + b (xstage.hpp)
      xstage_block(sg, lane, st, n_out_total, g * (CFG_HD / 32) + b, y[2 * b], y[2 * b + 1],
                   dh);
    }
#endif
#if CFG_E % 16 == 0
  // a block of 256 = elements 16 b .. 16 b + 15: act_q8_256's v[k] = element k * 16 + lane
  if (round_block == 256)
    for (int b = 0; b < CFG_E / 16; b++) {
      const float d = q8_256_round(sg, lane, y + 16 * b);
      // block b of the row = flat block g * CFG_HD / 256 + b (xstage.hpp)
      xstage_block256(sg, lane, st, g * (CFG_HD / 256) + b, y + 16 * b, d);
    }
#endif
#pragma unroll
  for (int e = 0; e < CFG_E; e++) orow[e * 16 + lane] = y[e];
}

// grid: T * n_head work-groups of 16, one per (t, h). round_block 0 / 32 / 256: see combine_one
// (the output projection's 8-bit rounding done here saves its launch).
STRATA_KERNEL void attn_combine(uint64_t a_part,   // (T, n_head, n_chunks, CFG_R) f32
                                uint64_t a_pos,    // (T) i32
                                uint64_t a_out,    // (T, n_head * CFG_HD) f32
                                uint64_t a_st,     // staged out (xstage.hpp), or 0
                                uint64_t a_rec,    // round_block 32: its integer records, or 0
                                int n_head, int n_ctx, int window, int round_block) {
  const float *part = STRATA_ADDR(const float, a_part);
  const int32_t *pos = STRATA_ADDR(const int32_t, a_pos);
  float *out = STRATA_ADDR(float, a_out);
  auto it = syclext::this_work_item::get_nd_item<1>();
  combine_one(it.get_sub_group(), it.get_group(0), part, pos, out, n_head, n_ctx, window,
              round_block, XST_ARGS(a_st, a_rec), it.get_group_range(0) * CFG_HD);
}
