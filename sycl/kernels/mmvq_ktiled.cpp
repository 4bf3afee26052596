// mmvq_ktiled: quantized matrix x (1..8 columns) product on K-quant weights repacked "one lane =
// one row" (engine/kernels/ktiled.rs), the decode path of Q4_K, Q5_K and Q6_K.
// y[t, o] = sum_i W[o, i] * x[t, i] for o < n_out, t < T <= 8.   One -DCFG_FMT_<type>.
//
// Tiles of 16 rows; tile g = [header: HDR bytes per super-block][records: REC bytes per
// super-block], structure of arrays, every piece (u32 word or f16) [16] lanes, in the order the
// kernel reads them (ktiled.rs has the byte map):
//   Q4_K: dm[16] u32 (d | dmin << 16) | sc[3][16] u32 | qs[32][16] u32
//   Q5_K: dm[16] u32 | sc[3][16] u32 | qh[8][16] u32 | qs[32][16] u32
//   Q6_K: sc[4][16] u32 | 16 x (ql[16], ql[16], qh[16] u32);  d[16] f16 of every super-block
//         in a header before the tile's records
// A u32 word j of a field holds GGUF bytes 4j..4j+3 of that field of the lane's row.
// Every weight load is `uniform + lane` (a vector load); x is uniform (broadcast); no cross-lane
// reduction. Per column: two fma chains per 64 (Q4_K/Q5_K) or 16 (Q6_K) elements, restarted
// each time, then one add/fma into the column's accumulator: the same sequence whatever T is, so
// a T-column call is bitwise T one-column calls. -ffast-math is not used (it could re-associate).
#include <sycl/sycl.hpp>
#include <cstdint>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define TILE 16

#if defined(CFG_FMT_Q4_K)
#define REC (TILE * 144)
#define HAS_QH 0
#elif defined(CFG_FMT_Q5_K)
#define REC (TILE * 176)
#define HAS_QH 1
#elif defined(CFG_FMT_Q6_K)
#define REC (TILE * 208)
#else
// no format given (a tool building every source with no options): the common K-quant
#define CFG_FMT_Q4_K
#define REC (TILE * 144)
#define HAS_QH 0
#endif

static inline float kk_h2f(uint32_t bits16) {
  return (float)sycl::bit_cast<sycl::half>((uint16_t)bits16);
}

#if defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K)
#define OFF_SC (4 * TILE)
#define OFF_QH (16 * TILE)
#define OFF_QS ((16 + 32 * HAS_QH) * TILE)

// 8 sub-blocks of 32 with a 6-bit scale and min each; 64-element chunk j = qs words 8j..8j+7:
// byte b of word 8j+i is element 64j+4i+b (low nibble, sub-block 2j) and 64j+32+4i+b (high
// nibble, sub-block 2j+1). w = d*sc*q - dmin*m: per sub-block and column one fma chain of the raw
// q times x, then d*sc * sum q x - dmin*m * sum x (sum x by a sub-group reduce): one operation
// per weight fewer than forming each w.
template <int TT>
static inline void kk_run(const uint8_t *wt, const float *x, float *y, int n_in, int n_out,
                          int nb, int lane, size_t tile) {
  auto sg = syclext::this_work_item::get_nd_item<1>().get_sub_group();
  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;

  for (int ib = 0; ib < nb; ++ib) {
    const uint8_t *r = wt + (size_t)ib * REC;
    const uint32_t dm = ((const uint32_t *)r)[lane];
    const float d = kk_h2f(dm & 0xFFFFu), dmin = kk_h2f(dm >> 16);
    const uint32_t *sw = (const uint32_t *)(r + OFF_SC);
    const uint32_t s0 = sw[lane], s1 = sw[TILE + lane], s2 = sw[2 * TILE + lane];
    // byte j of sc_lo/m_lo: scale/min of sub-block j; of sc_hi/m_hi: of sub-block 4 + j
    const uint32_t sc_lo = s0 & 0x3F3F3F3Fu, m_lo = s1 & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
    const uint32_t m_hi = ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
#if HAS_QH
    const uint32_t *qh = (const uint32_t *)(r + OFF_QH);
#endif
    const uint32_t *qs = (const uint32_t *)(r + OFF_QS);
    const float *xb = x + (size_t)ib * 256;
#pragma unroll 1
    for (int j = 0; j < 4; ++j) {
      const uint32_t scw = j < 2 ? sc_lo : sc_hi, mw = j < 2 ? m_lo : m_hi;
      const int sh0 = 8 * (2 * j % 4), sh1 = 8 * ((2 * j + 1) % 4);
      const float d0 = d * (float)((scw >> sh0) & 63u), n0 = -(dmin * (float)((mw >> sh0) & 63u));
      const float d1 = d * (float)((scw >> sh1) & 63u), n1 = -(dmin * (float)((mw >> sh1) & 63u));
      float s_lo[TT], s_hi[TT], x_lo[TT], x_hi[TT];
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        s_lo[t] = s_hi[t] = 0.0f;
        // the two sub-blocks' sums of x: two vector loads and one sub-group sum each, the same
        // whatever T is (T columns stay bitwise T one-column calls)
        const float *xt = xb + (size_t)t * n_in + 64 * j;
        x_lo[t] = sycl::reduce_over_group(sg, xt[lane] + xt[16 + lane], sycl::plus<float>());
        x_hi[t] = sycl::reduce_over_group(sg, xt[32 + lane] + xt[48 + lane], sycl::plus<float>());
      }
#pragma unroll 2
      for (int i = 0; i < 8; ++i) {
        const uint32_t wq = qs[(8 * j + i) * TILE + lane];
        uint32_t lo = wq & 0x0F0F0F0Fu, hi = (wq >> 4) & 0x0F0F0F0Fu;
#if HAS_QH
        const uint32_t h = qh[i * TILE + lane];  // byte b: the 5th bits of element 4i+b
        lo |= ((h >> (2 * j)) & 0x01010101u) << 4;
        hi |= ((h >> (2 * j + 1)) & 0x01010101u) << 4;
#endif
        float v[8];
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          v[b] = (float)((lo >> (8 * b)) & 0xFFu);
          v[b + 4] = (float)((hi >> (8 * b)) & 0xFFu);
        }
#pragma unroll
        for (int t = 0; t < TT; ++t) {
          const float *xt = xb + (size_t)t * n_in + 64 * j + 4 * i;
          float a = s_lo[t], c = s_hi[t];
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            a = sycl::fma(v[b], xt[b], a);
            c = sycl::fma(v[b + 4], xt[32 + b], c);
          }
          s_lo[t] = a;
          s_hi[t] = c;
        }
      }
#pragma unroll
      for (int t = 0; t < TT; ++t)
        acc[t] += sycl::fma(d0, s_lo[t], n0 * x_lo[t]) + sycl::fma(d1, s_hi[t], n1 * x_hi[t]);
    }
  }
  const size_t row = tile * TILE + (size_t)lane;
  if (row < (size_t)n_out) {
#pragma unroll
    for (int t = 0; t < TT; ++t) y[(size_t)t * n_out + row] = acc[t];
  }
}

#else  // Q6_K
#define HDR (TILE * 2)
// 16 groups of 16 elements with an int8 scale each; w = d*sc*(q-32), q 6 bits: low 4 from ql,
// high 2 from qh. For half n (128 elements), h < 2 and i < 4, ql words a = 16n+4h+i,
// b = 16n+8+4h+i and qh word 8n+4h+i give, byte k, elements 128n + 32g + 16h + 4i + k:
//   g = 0: a low nibble | qh bits 0-1,  1: b low | bits 2-3,  2: a high | bits 4-5,
//   g = 3: b high | bits 6-7   (scale 8n + 2g + h).
// Record: scales words 0..3, then per chunk c = 2n + h and i the words a, b, qh: one rising
// stream. Pass p of a chunk takes groups 2p and 2p+1 (the second pass re-reads from L1).
// The 6-bit value with its top bit flipped, sign-extended, is q - 32 (exact integer floats); each
// group's 16 products form one fma chain, scaled once by d*sc into the column's accumulator.
template <int TT>
static inline void kk_run(const uint8_t *wt, const float *x, float *y, int n_in, int n_out,
                          int nb, int lane, size_t tile) {
  const uint16_t *dh = (const uint16_t *)wt;  // header: d[nb][16]
  const uint8_t *recs = wt + (size_t)nb * HDR;
  float acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;

  for (int ib = 0; ib < nb; ++ib) {
    const float d = kk_h2f(dh[ib * TILE + lane]);
    const uint32_t *sw = (const uint32_t *)(recs + (size_t)ib * REC);
    const float *xb = x + (size_t)ib * 256;
    // runtime loops over chunks and passes: a fully unrolled super-block is past the size at
    // which the vectoriser turns the weight loads into gathers
#pragma unroll 1
    for (int c = 0; c < 4; ++c) {
      const int n = c >> 1, h = c & 1;
      const uint32_t *ch = sw + 4 * TILE + c * 12 * TILE;
#pragma unroll 1
      for (int p = 0; p < 2; ++p) {
        const int g0 = 2 * p, is0 = 8 * n + 2 * g0 + h;  // group 2p + 1: scale is0 + 2
        const uint32_t scw = sw[(is0 >> 2) * TILE + lane];  // is0 and is0 + 2 share a word
        const float ds0 = d * (float)((int)(scw << (24 - 8 * (is0 & 3))) >> 24);
        const float ds1 = d * (float)((int)(scw << (8 - 8 * (is0 & 3))) >> 24);
        float s0[TT], s1[TT];
#pragma unroll
        for (int t = 0; t < TT; ++t) s0[t] = s1[t] = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t a = ch[3 * i * TILE + lane], b = ch[(3 * i + 1) * TILE + lane];
          const uint32_t hw = ch[(3 * i + 2) * TILE + lane];
          const uint32_t qa = (((a >> (4 * p)) & 0x0F0F0F0Fu) |
                               (((hw >> (2 * g0)) & 0x03030303u) << 4)) ^ 0x20202020u;
          const uint32_t qb = (((b >> (4 * p)) & 0x0F0F0F0Fu) |
                               (((hw >> (2 * g0 + 2)) & 0x03030303u) << 4)) ^ 0x20202020u;
          float va[4], vb[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            va[k] = (float)((int)(qa << (26 - 8 * k)) >> 26);
            vb[k] = (float)((int)(qb << (26 - 8 * k)) >> 26);
          }
#pragma unroll
          for (int t = 0; t < TT; ++t) {
            const float *xt = xb + (size_t)t * n_in + 128 * n + 32 * g0 + 16 * h + 4 * i;
            float u = s0[t], w = s1[t];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              u = sycl::fma(va[k], xt[k], u);
              w = sycl::fma(vb[k], xt[32 + k], w);
            }
            s0[t] = u;
            s1[t] = w;
          }
        }
#pragma unroll
        for (int t = 0; t < TT; ++t) acc[t] = sycl::fma(ds1, s1[t], sycl::fma(ds0, s0[t], acc[t]));
      }
    }
  }
  const size_t row = tile * TILE + (size_t)lane;
  if (row < (size_t)n_out) {
#pragma unroll
    for (int t = 0; t < TT; ++t) y[(size_t)t * n_out + row] = acc[t];
  }
}
#endif

#ifndef HDR
#define HDR 0
#endif

// One work-group's product (one 16-lane work-group per tile): the body of every kernel below.
template <int TT>
static inline void kk_tile(uint64_t a_w, uint64_t a_x, uint64_t a_y, int n_in, int n_out) {
  const uint8_t *w = STRATA_ADDR(const uint8_t, a_w);
  const float *x = STRATA_ADDR(const float, a_x);
  float *y = STRATA_ADDR(float, a_y);
  auto it = syclext::this_work_item::get_nd_item<1>();
  const int lane = (int)it.get_sub_group().get_local_linear_id();
  const size_t tile = it.get_group(0);
  const int nb = n_in / 256;
  kk_run<TT>(w + tile * (size_t)nb * (HDR + REC), x, y, n_in, n_out, nb, lane, tile);
}

// One kernel per column count (mmvq_ktiled_t1 .. _t8), as mmvq_tiled.cpp: a run-time T inside
// one kernel is linearised by the vectoriser into masked code. Buffers as addresses: addr.hpp.
#define KK_KERNEL(TT)                                                                           \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                   \
  SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<TILE>))                            \
  void mmvq_ktiled_t##TT(uint64_t a_w, /* ceil(n_out/16) tiles, ktiled.rs */                   \
                         uint64_t a_x, /* (TT, n_in) f32 */                                     \
                         uint64_t a_y, /* (TT, n_out) f32 */                                    \
                         int n_in, int n_out) {                                                 \
    kk_tile<TT>(a_w, a_x, a_y, n_in, n_out);                                                    \
  }
#if defined(CFG_NORM_TAIL)
// -DCFG_NORM_TAIL (with norm.hpp, actq.hpp, xstage.hpp, norm_q8.hpp): Gemma's post-norm into the
// residual and the norm after it, folded into the projection's launch. y = W x, then the
// work-group that finishes last (arrived_last, norm_q8.hpp) does norm_q8.cpp's
// norm_add_norm_q8_32 on the TT rows, one after the other, with its very code:
// res += rms_norm(y) * w1; yq = round_32(rms_norm(res) * w2), staged into nst / nrec. The same
// bits as the product then the norm_add_norm_q8_32 launch (or rms_norm_add + rms_norm_q8_32).
// The tail runs after every work-group has read x, so yq may be the buffer x came in.
#define KK_NORM_KERNEL(TT)                                                                      \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                   \
  SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<TILE>))                            \
  void mmvq_ktiled_norm_t##TT(uint64_t a_w,   /* ceil(n_out/16) tiles, ktiled.rs */            \
                              uint64_t a_x,   /* (TT, n_in) f32 */                             \
                              uint64_t a_y,   /* (TT, n_out) f32: W x */                       \
                              uint64_t a_w1,  /* (n_out) post-norm weight of y */              \
                              uint64_t a_res, /* (TT, n_out) residual, updated in place */     \
                              uint64_t a_cnt, /* (1) u32 arrival counter, 0 between launches */ \
                              uint64_t a_w2,  /* (n_out) norm weight of the new residual */    \
                              uint64_t a_yq,  /* (TT, n_out) rounded normed output */          \
                              uint64_t a_nst, /* yq's stage (xstage.hpp), or 0 */              \
                              uint64_t a_nrec, /* its integer records, or 0 */                 \
                              int n_in, int n_out, float eps) {                                \
    kk_tile<TT>(a_w, a_x, a_y, n_in, n_out);                                                    \
    auto sg = syclext::this_work_item::get_nd_item<1>().get_sub_group();                        \
    const int lane = (int)sg.get_local_linear_id();                                            \
    const float *y = STRATA_ADDR(const float, a_y);                                             \
    unsigned *cnt = STRATA_ADDR(unsigned, a_cnt);                                               \
    if (!arrived_last(cnt, sg, lane)) return;                                                   \
    for (int row = 0; row < TT; ++row)                                                          \
      norm_add_norm_q8_row<32>(sg, lane, y, STRATA_ADDR(const float, a_w1),                     \
                               STRATA_ADDR(float, a_res), STRATA_ADDR(const float, a_w2),       \
                               STRATA_ADDR(float, a_yq), XST_ARGS(a_nst, a_nrec), n_out, eps,   \
                               (size_t)row, (size_t)TT);                                        \
    arrival_reset(cnt, lane);                                                                   \
  }
KK_NORM_KERNEL(1)
KK_NORM_KERNEL(2)
KK_NORM_KERNEL(3)
KK_NORM_KERNEL(4)
KK_NORM_KERNEL(5)
KK_NORM_KERNEL(6)
KK_NORM_KERNEL(7)
KK_NORM_KERNEL(8)
#else
KK_KERNEL(1)
KK_KERNEL(2)
KK_KERNEL(3)
KK_KERNEL(4)
KK_KERNEL(5)
KK_KERNEL(6)
KK_KERNEL(7)
KK_KERNEL(8)
#endif
