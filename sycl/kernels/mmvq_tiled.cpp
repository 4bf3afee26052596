// mmvq_tiled: quantized matrix x (1..8 columns) product on weights repacked "one lane = one row"
// (engine/kernels/tiled.rs), the decode path of the 32-element-block formats.
// y[t, o] = sum_i W[o, i] * x[t, i] for o < n_out, t < T <= 8.   One -DCFG_FMT_<type>.
//
// Tiles of 16 rows: for tile g and block ib, one record of 16 * BLOCK_BYTES bytes (the same bytes
// as the 16 GGUF blocks, structure of arrays):
//   d[16] f16 | m[16] f16 (Q4_1, Q5_1) | qh[16] u32 (Q5_0, Q5_1) | qs[NW][16] u32
// qs word j of lane l holds GGUF qs bytes 4j..4j+3 of row l's block: for 4-bit formats byte b
// is element 4j+b (low nibble) and 16+4j+b (high nibble); for Q8_0 byte b is element 4j+b.
// Every weight load is `uniform + lane` (vector loads); x is uniform (broadcast); no cross-lane
// reduction. Per column: two fma chains per block, restarted each block, then one fma/add into
// the column's accumulator: the same sequence whatever T is, so a T-column call is bitwise T
// one-column calls. -ffast-math is not used (it could re-associate the chains).
#include <sycl/sycl.hpp>
#include <cstdint>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define TILE 16

#if defined(CFG_FMT_Q4_0)
#define BLOCK_BYTES 18
#define HAS_M 0
#define HAS_QH 0
#define NW 4
#elif defined(CFG_FMT_Q4_1)
#define BLOCK_BYTES 20
#define HAS_M 1
#define HAS_QH 0
#define NW 4
#elif defined(CFG_FMT_Q5_0)
#define BLOCK_BYTES 22
#define HAS_M 0
#define HAS_QH 1
#define NW 4
#elif defined(CFG_FMT_Q5_1)
#define BLOCK_BYTES 24
#define HAS_M 1
#define HAS_QH 1
#define NW 4
#elif defined(CFG_FMT_Q8_0)
#define BLOCK_BYTES 34
#define HAS_M 0
#define HAS_QH 0
#define NW 8
#else
// no format given (a tool building every source with no options): the output head's
#define CFG_FMT_Q8_0
#define BLOCK_BYTES 34
#define HAS_M 0
#define HAS_QH 0
#define NW 8
#endif

#define REC (TILE * BLOCK_BYTES)
#define OFF_M (2 * TILE)
#define OFF_QH ((2 + 2 * HAS_M) * TILE)
#define OFF_QS ((2 + 2 * HAS_M + 4 * HAS_QH) * TILE)

// bit e of qh moved to bit 4 (the 5th bit of a 5-bit value); e is a constant after unrolling
static inline int kt_hb(uint32_t qh, int e) {
  return (int)(e >= 4 ? (qh >> (e - 4)) & 16u : (qh << (4 - e)) & 16u);
}

// The 8 values held by qs word j, in element order e(k): k < 4 -> 4j+k, k >= 4 -> 16+4j+k-4
// (4-bit formats) or k -> 4j+k (Q8_0, NW = 8 words cover 32 elements, 4 values each: the upper
// four of the 8 outputs then come from word j + 1, see the caller).
// Formats with a min (Q4_1, Q5_1) return the full weight d*q+m (as ggml dequantizes); the others
// return the integer q (minus its offset) and the caller scales the block sum by d.

// The whole product for a compile-time column count TT: no `t < T` test inside the loops (a
// run-time bound made the compiler mask every column's code and spill). Each column's sequence
// of operations does not depend on TT.
template <int TT>
static inline void kt_run(const uint8_t *wt, const float *x, float *y, const float *r, int n_in,
                          int n_out, int nb, int lane, size_t tile) {
  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;

  for (int ib = 0; ib < nb; ++ib) {
    const uint8_t *r = wt + (size_t)ib * REC;
    const float d = (float)sycl::bit_cast<sycl::half>(((const uint16_t *)r)[lane]);
#if HAS_M
    const float m = (float)sycl::bit_cast<sycl::half>(((const uint16_t *)(r + OFF_M))[lane]);
#endif
#if HAS_QH
    const uint32_t qh = ((const uint32_t *)(r + OFF_QH))[lane];
#endif
    const uint32_t *qs = (const uint32_t *)(r + OFF_QS);
    const float *xb = x + (size_t)ib * 32;
    float s0[TT], s1[TT];
#pragma unroll
    for (int t = 0; t < TT; ++t) s0[t] = s1[t] = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v[8];
      int e[8];
#if defined(CFG_FMT_Q8_0)
      const uint32_t wa = qs[(2 * j) * TILE + lane], wb = qs[(2 * j + 1) * TILE + lane];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        v[k] = (float)((int)(wa << (24 - 8 * k)) >> 24);
        v[k + 4] = (float)((int)(wb << (24 - 8 * k)) >> 24);
        e[k] = 8 * j + k;
        e[k + 4] = 8 * j + 4 + k;
      }
#else
      const uint32_t wq = qs[j * TILE + lane];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        int lo = (int)((wq >> (8 * k)) & 15u), hi = (int)((wq >> (8 * k + 4)) & 15u);
        e[k] = 4 * j + k;
        e[k + 4] = 16 + 4 * j + k;
#if HAS_QH
        lo |= kt_hb(qh, e[k]);
        hi |= kt_hb(qh, e[k + 4]);
#endif
#if HAS_M
        v[k] = sycl::fma(d, (float)lo, m);
        v[k + 4] = sycl::fma(d, (float)hi, m);
#elif HAS_QH
        v[k] = (float)(lo - 16);
        v[k + 4] = (float)(hi - 16);
#else
        v[k] = (float)(lo - 8);
        v[k + 4] = (float)(hi - 8);
#endif
      }
#endif
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        const float *xt = xb + (size_t)t * n_in;
        float a = s0[t], b = s1[t];
#pragma unroll
        for (int k = 0; k < 8; k += 2) {
          a = sycl::fma(v[k], xt[e[k]], a);
          b = sycl::fma(v[k + 1], xt[e[k + 1]], b);
        }
        s0[t] = a;
        s1[t] = b;
      }
    }
#pragma unroll
    for (int t = 0; t < TT; ++t) {
#if HAS_M
      acc[t] += s0[t] + s1[t];
#else
      acc[t] = sycl::fma(d, s0[t] + s1[t], acc[t]);
#endif
    }
  }
  const size_t row = tile * TILE + (size_t)lane;
  if (row < (size_t)n_out) {
    // residual epilogue: r + dot, the f32 add the separate add_f32 launch would do on the stored
    // dot (r may be y itself: each output is read and written by its own lane only)
    if (r != nullptr) {
#pragma unroll
      for (int t = 0; t < TT; ++t) y[(size_t)t * n_out + row] = r[(size_t)t * n_out + row] + acc[t];
    } else {
#pragma unroll
      for (int t = 0; t < TT; ++t) y[(size_t)t * n_out + row] = acc[t];
    }
  }
}

// One kernel per column count (mmvq_tiled_t1 .. _t8): a switch on a run-time T inside one kernel
// was linearised by the vectoriser into masked code with gathers (10x slower).
// Up to three matrices with the same input x and n_in in one launch (q/k/v, gate/up): work-groups
// 0 .. tiles(n_out0)-1 do matrix 0, the next tiles(n_out1) matrix 1, then matrix 2 (n_out1 = n_out2
// = 0 for one matrix; their pointers are then unused). The choice is per work-group (uniform), and
// each row's arithmetic is the single-matrix one: outputs are bitwise those of separate launches.
// r (nullable, only with one matrix): y0 = r + W0 x.
#define KT_KERNEL(TT)                                                                           \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                   \
  SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<TILE>))                            \
  void mmvq_tiled_t##TT(const uint8_t *w0, /* tiles: (ceil(n_out0/16), n_in/32) records */      \
                        const uint8_t *w1, /* (ceil(n_out1/16), n_in/32) records, or unused */  \
                        const uint8_t *w2, /* (ceil(n_out2/16), n_in/32) records, or unused */  \
                        const float *x,    /* (TT, n_in) */                                     \
                        float *y0,         /* (TT, n_out0) */                                   \
                        float *y1,         /* (TT, n_out1) */                                   \
                        float *y2,         /* (TT, n_out2) */                                   \
                        const float *r,    /* (TT, n_out0) residual, or null */                 \
                        int n_in, int n_out0, int n_out1, int n_out2) {                         \
    auto it = syclext::this_work_item::get_nd_item<1>();                                        \
    const int lane = (int)it.get_sub_group().get_local_linear_id();                             \
    const size_t g = it.get_group(0); /* one 16-lane work-group per tile */                     \
    const size_t t0 = (size_t)(n_out0 + TILE - 1) / TILE;                                       \
    const size_t t1 = (size_t)(n_out1 + TILE - 1) / TILE;                                       \
    const int nb = n_in / 32;                                                                   \
    /* plain ternaries (uniform selects; sycl::min-style builtins turned indices varying) */  \
    const int m = g < t0 ? 0 : (g < t0 + t1 ? 1 : 2);                                         \
    const size_t tl = m == 0 ? g : (m == 1 ? g - t0 : g - t0 - t1);                             \
    const uint8_t *w = m == 0 ? w0 : (m == 1 ? w1 : w2);                                        \
    float *y = m == 0 ? y0 : (m == 1 ? y1 : y2);                                                \
    const int n_out = m == 0 ? n_out0 : (m == 1 ? n_out1 : n_out2);                             \
    kt_run<TT>(w + tl * (size_t)nb * REC, x, y, m == 0 ? r : nullptr, n_in, n_out, nb, lane, tl); \
  }
KT_KERNEL(1)
KT_KERNEL(2)
KT_KERNEL(3)
KT_KERNEL(4)
KT_KERNEL(5)
KT_KERNEL(6)
KT_KERNEL(7)
KT_KERNEL(8)
