// mmvq_tiled: quantized matrix x (1..8 columns) product on weights repacked "one lane = one row"
// (engine/kernels/tiled.rs), the decode path of the 32-element-block formats.
// y[t, o] = sum_i W[o, i] * x[t, i] for o < n_out, t < T <= 8.   One -DCFG_FMT_<type>.
//
// Tiles of 16 rows: for tile g and block ib, one record of 16 * BLOCK_BYTES bytes (the same bytes
// as the 16 GGUF blocks, structure of arrays):
//   d[16] f16 | m[16] f16 (Q4_1, Q5_1) | qh[16] u32 (Q5_0, Q5_1) | qs
// 4-bit formats: qs = words [4][16] u32, word j of lane l = GGUF qs bytes 4j..4j+3 of row l's
// block (byte b: element 4j+b in the low nibble, 16+4j+b in the high one). Q5: qh's bits
// permuted (see kt_decode). Q8_0: qs = byte planes [32][16] i8, plane e = element e of the rows.
// Every weight load is `uniform + lane` (vector loads); x is uniform (broadcast); no cross-lane
// reduction. The 4-bit formats leave each q at its bit offset in the word (one AND instead of
// shift + AND) and multiply by x scaled by the inverse power of two (xs_scale, xstage.hpp), staged per block in
// work-group memory: the same products, bit for bit (unless |x| < 2^-98, where the scaled x would
// be subnormal). The 5-bit formats read q as the float 1 + q / 128 (kt_mag) and subtract sum(x)
// per block: not bitwise the exact products (nmse ~1e-11 against the f64 reference, ~1e-14
// before). Per column: two fma chains per block, restarted each block, then one fma/add into
// the column's accumulator: the same sequence whatever T is, so a T-column call is bitwise T
// one-column calls. -ffast-math is not used (it could re-associate the chains).
// One launch may do up to three matrices sharing x (q/k/v, gate/up) and may add a residual to
// the output (y = r + W x): see KT_KERNEL.
// -DCFG_XS_PRE: x's per-block sums and its 4-bit scaled copy come staged by the kernel that
// rounded x (xstage.hpp) instead of being computed here by every work-group: the same values,
// so the same bits, and no sub-group reduce, work-group memory or barrier in the block loop.
#include <sycl/sycl.hpp>
#include <cstdint>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define TILE 16

#if defined(CFG_FMT_Q4_0)
#define BLOCK_BYTES 18
#define HAS_M 0
#define HAS_QH 0
#elif defined(CFG_FMT_Q4_1)
#define BLOCK_BYTES 20
#define HAS_M 1
#define HAS_QH 0
#elif defined(CFG_FMT_Q5_0)
#define BLOCK_BYTES 22
#define HAS_M 0
#define HAS_QH 1
#elif defined(CFG_FMT_Q5_1)
#define BLOCK_BYTES 24
#define HAS_M 1
#define HAS_QH 1
#elif defined(CFG_FMT_Q8_0)
#define BLOCK_BYTES 34
#define HAS_M 0
#define HAS_QH 0
#else
// no format given (a tool building every source with no options): the output head's
#define CFG_FMT_Q8_0
#define BLOCK_BYTES 34
#define HAS_M 0
#define HAS_QH 0
#endif

#define REC (TILE * BLOCK_BYTES)
// The block sum needs sum x (a min or an offset): every format but Q8_0.
#if defined(CFG_FMT_Q8_0)
#define SUM_X 0
#else
#define SUM_X 1
#endif
// The 4-bit formats stage x times 2^-(bit offset) per block (kt_scale); the 5-bit ones read
// their q as 1 + q / 128 (kt_mag) and use x as it is.
#define STAGE_X (SUM_X && !HAS_QH)
#define OFF_M (2 * TILE)
#define OFF_QH ((2 + 2 * HAS_M) * TILE)
#define OFF_QS ((2 + 2 * HAS_M + 4 * HAS_QH) * TILE)

// Rows per lane (tiles per work-group) at TT columns: R tiles would share each x load and give
// R independent chains. Measured at T = 1 with R = 1, 2, 4 (Q4_1, Q5_0, Q8_0 at the models'
// shapes, hot and cold): no difference above the run-to-run noise of the loaded machine, R = 4
// spills in the Q4_1 loop and the head's fastest launches were R = 1's. The x broadcasts are load
// uops, not ALU work, so R stays 1. Re-measured on a quiet machine with the weights on huge pages
// (R = 2 at T = 1): 1.2-1.6x slower everywhere (SmolLM2 head 842 -> 1348 us, gate/up 27 -> 37 us).
// Must match `tiled::tiles_per_group` (engine/kernels/tiled.rs).
#define KT_R(TT) 1

// The 8 values of qs word j of one row, in element order e(k): k < 4 -> 4j+k, k >= 4 ->
// 16+4j+k-4 (4-bit formats) or k -> 8j+k (Q8_0: 32 byte planes, plane e holding element e of the
// 16 rows). The 4/5-bit formats give the raw unsigned q: the block applies d * sum q x + m * sum x,
// m the min (Q4_1, Q5_1) or -8 d / -16 d (Q4_0 / Q5_0), one operation per weight fewer than
// forming d*q+m or q-8 per weight. Q8_0 gives its signed q, the block sum scaled by d.
#if HAS_QH
// 1 + q / 128 for the 5-bit value at bits 16..20 of b: q ORed into 1.0f's mantissa (exact).
static inline float kt_mag(uint32_t b) {
  return sycl::bit_cast<float>((b & 0x001F0000u) | 0x3F800000u);
}
#endif

static inline void kt_decode(const uint8_t *rec, int lane, int j, float v[8]) {
#if defined(CFG_FMT_Q8_0)
  const int8_t *qb = (const int8_t *)(rec + OFF_QS);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = (float)qb[(8 * j + k) * TILE + lane];
#else
  const uint32_t wq = ((const uint32_t *)(rec + OFF_QS))[j * TILE + lane];
#if HAS_QH
  // qh repacked (tiled.rs): bit 8k+4+j = high bit of element 4j+k, bit 8k+j = that of 16+4j+k,
  // so one mask puts the four high bits of word j's low (high) nibbles at bit 4 of each byte
  const uint32_t qh = ((const uint32_t *)(rec + OFF_QH))[lane];
  const uint32_t lo4 = (wq & 0x0F0F0F0Fu) | ((qh >> j) & 0x10101010u);
  const uint32_t hi4 = ((wq >> 4) & 0x0F0F0F0Fu) | ((qh << (4 - j)) & 0x10101010u);
#endif
#if HAS_QH
  // q at bits 16..20 of a float whose other bits are 1.0f's: the float is 1 + q / 128, exact,
  // from one shift and one and-or (vpternlogd) per value, no int-to-float convert. The caller
  // takes the 1s out with the block's sum(x): sum v x = sum x + sum q x / 128. Measured against
  // the bit-offset scheme below: Q5_0 kernels 8-10% faster, Q4_1 no faster (there shift + and-or
  // is no cheaper than and + convert), so the 4-bit formats keep theirs, which is exact.
  v[0] = kt_mag(lo4 << 16);
  v[1] = kt_mag(lo4 << 8);
  v[2] = kt_mag(lo4);
  v[3] = kt_mag(lo4 >> 8);
  v[4] = kt_mag(hi4 << 16);
  v[5] = kt_mag(hi4 << 8);
  v[6] = kt_mag(hi4);
  v[7] = kt_mag(hi4 >> 8);
#else
  // q in place, i.e. times 2^(its bit offset): one AND (no shift) and an exact unsigned convert
  // per value; x_s holds x times 2^-(that offset) (kt_scale), so v * x_s = q * x exactly. The
  // raw q: the caller applies d and the min or offset once per block (d * sum q x + m * sum x,
  // m = -8 d for Q4_0).
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[k] = (float)(wq & (0x0Fu << (8 * k)));
    v[k + 4] = (float)(wq & (0xF0u << (8 * k)));
  }
#endif
#endif
}

// Element index of value k of word j (see kt_decode).
static inline int kt_elem(int j, int k) {
#if defined(CFG_FMT_Q8_0)
  return 8 * j + k;
#else
  return k < 4 ? 4 * j + k : 16 + 4 * j + k - 4;
#endif
}

// The product for a compile-time column count TT over R tiles tile0 .. tile0+R-1 of one matrix
// (tiles past `ntiles` re-read tile0 and store nothing: uniform control flow). No `t < T` test
// inside the loops (a run-time bound made the compiler mask every column's code and spill).
// Each (row, column)'s sequence of operations depends on neither TT nor R: per block two fma
// chains (even / odd k), then one fma (d) or add into the accumulator, blocks in order.
// xsp, sxp (CFG_XS_PRE): the staged x of xstage.hpp, (TT, n_in) and (TT, nb).
template <int TT, int R>
static inline void kt_run(const uint8_t *w, size_t tile0, int ntiles, const float *x, float *y,
                          const float *res, int n_in, int n_out, int nb, int lane,
                          float *xs /* work-group memory: (2, TT, 32) */,
                          [[maybe_unused]] const float *xsp, [[maybe_unused]] const float *sxp) {
  [[maybe_unused]] auto sg = syclext::this_work_item::get_nd_item<1>().get_sub_group();
  const size_t tbytes = (size_t)nb * REC; // one tile's records
  float acc[R][TT];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[i][t] = 0.0f;

#if STAGE_X && !defined(CFG_XS_PRE)
  const float sc_lo = xs_scale(lane), sc_hi = xs_scale(16 + lane);
#endif
  for (int ib = 0; ib < nb; ++ib) {
    const float *xb = x + (size_t)ib * 32;
    float s0[R][TT], s1[R][TT], d[R], m[R];
#if SUM_X
    // Per column, from the same two vector loads of the block's 32 x: their sum (one sub-group
    // sum, the same whatever T is, so T columns stay bitwise T one-column calls) and, for the
    // 4-bit formats, their xs_scale copy in work-group memory (read as broadcasts like x
    // itself). Two copies by block parity, so one barrier per block orders the writes after the
    // previous block's reads. With CFG_XS_PRE both come staged (xstage.hpp).
    float sx[TT];
#if defined(CFG_XS_PRE)
#pragma unroll
    for (int t = 0; t < TT; ++t) sx[t] = sxp[(size_t)t * nb + ib];
#else
#if STAGE_X
    float *xsb = xs + (ib & 1) * TT * 32;
#endif
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const float *xt = xb + (size_t)t * n_in;
      const float x0 = xt[lane], x1 = xt[16 + lane];
      sx[t] = sycl::reduce_over_group(sg, x0 + x1, sycl::plus<float>());
#if STAGE_X
      xsb[t * 32 + lane] = x0 * sc_lo;
      xsb[t * 32 + 16 + lane] = x1 * sc_hi;
#endif
    }
#if STAGE_X
    sycl::group_barrier(sg);
#endif
#endif // CFG_XS_PRE
#endif
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const uint8_t *rec = w + (tile0 + (i < ntiles ? i : 0)) * tbytes + (size_t)ib * REC;
      d[i] = (float)sycl::bit_cast<sycl::half>(((const uint16_t *)rec)[lane]);
#if HAS_M
      m[i] = (float)sycl::bit_cast<sycl::half>(((const uint16_t *)(rec + OFF_M))[lane]);
#elif HAS_QH
      m[i] = -16.0f * d[i];  // exact: a power-of-two multiple
#elif SUM_X
      m[i] = -8.0f * d[i];
#else
      m[i] = 0.0f;
#endif
#pragma unroll
      for (int t = 0; t < TT; ++t) s0[i][t] = s1[i][t] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const uint8_t *rec = w + (tile0 + (i < ntiles ? i : 0)) * tbytes + (size_t)ib * REC;
        float v[8];
        kt_decode(rec, lane, j, v);
#pragma unroll
        for (int t = 0; t < TT; ++t) {
#if STAGE_X && defined(CFG_XS_PRE)
          const float *xt = xsp + (size_t)t * n_in + (size_t)ib * 32;
#elif STAGE_X
          const float *xt = xs + (ib & 1) * TT * 32 + t * 32;
#else
          const float *xt = xb + (size_t)t * n_in;
#endif
          float a = s0[i][t], b = s1[i][t];
#pragma unroll
          for (int k = 0; k < 8; k += 2) {
            a = sycl::fma(v[k], xt[kt_elem(j, k)], a);
            b = sycl::fma(v[k + 1], xt[kt_elem(j, k + 1)], b);
          }
          s0[i][t] = a;
          s1[i][t] = b;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int t = 0; t < TT; ++t) {
#if HAS_QH
        // sum v x = sum x + sum q x / 128 (kt_mag), d * 128 exact
        acc[i][t] += sycl::fma(128.0f * d[i], (s0[i][t] + s1[i][t]) - sx[t], m[i] * sx[t]);
#elif SUM_X
        acc[i][t] += sycl::fma(d[i], s0[i][t] + s1[i][t], m[i] * sx[t]);
#else
        acc[i][t] = sycl::fma(d[i], s0[i][t] + s1[i][t], acc[i][t]);
#endif
      }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    if (i < ntiles) {
      // uniform row base + lane (an index computed as (tile0 + i) * TILE + lane became
      // scatters/gathers)
      const size_t base = (tile0 + i) * TILE;
      float *yi = y + base;
      if (base + (size_t)lane < (size_t)n_out) {
        // residual epilogue: res + dot, the f32 add the separate add_f32 launch would do on the
        // stored dot (res may be y itself: each output is read and written by its own lane)
        if (res != nullptr) {
          const float *ri = res + base;
#pragma unroll
          for (int t = 0; t < TT; ++t)
            yi[(size_t)t * n_out + lane] = ri[(size_t)t * n_out + lane] + acc[i][t];
        } else {
#pragma unroll
          for (int t = 0; t < TT; ++t) yi[(size_t)t * n_out + lane] = acc[i][t];
        }
      }
    }
  }
}

// kt_run's scaled x: work-group memory for the formats that stage it (STAGE_X: the 4-bit ones).
#if STAGE_X && !defined(CFG_XS_PRE)
#define KT_XS_DECL(TT)                                                                          \
  static syclexp::work_group_static<float[2 * TT * 32]> xs_mem;                                 \
  float(&xs_buf)[2 * TT * 32] = xs_mem;
#define KT_XS xs_buf
#else
#define KT_XS_DECL(TT)
#define KT_XS nullptr
#endif

// One kernel per column count (mmvq_tiled_t1 .. _t8): a switch on a run-time T inside one kernel
// was linearised by the vectoriser into masked code with gathers (10x slower).
// Up to three matrices with the same input x and n_in in one launch (q/k/v, gate/up): the first
// ceil(tiles(n_out0) / R) work-groups do matrix 0, the next ceil(tiles(n_out1) / R) matrix 1, the
// rest matrix 2 (n_out1 = n_out2 = 0 for one matrix; their pointers are then unused). The choice
// is per work-group (uniform), and each row's arithmetic is the single-matrix one: outputs are
// bitwise those of separate launches. r (nullable, used for matrix 0 only): y0 = r + W0 x.
#define KT_KERNEL(TT)                                                                           \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                   \
  SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<TILE>))                            \
  void mmvq_tiled_t##TT(uint64_t a_w0, /* tiles: (ceil(n_out0/16), n_in/32) records */         \
                        uint64_t a_w1, /* (ceil(n_out1/16), n_in/32) records, or 0 */           \
                        uint64_t a_w2, /* (ceil(n_out2/16), n_in/32) records, or 0 */           \
                        uint64_t a_x,  /* (TT, n_in) f32 */                                     \
                        uint64_t a_y0, /* (TT, n_out0) f32 */                                   \
                        uint64_t a_y1, /* (TT, n_out1) f32, or 0 */                             \
                        uint64_t a_y2, /* (TT, n_out2) f32, or 0 */                             \
                        uint64_t a_r,  /* (TT, n_out0) f32 residual, or 0 */                    \
                        uint64_t a_xs, /* CFG_XS_PRE: (TT, n_in) staged x (xstage.hpp) */       \
                        uint64_t a_sx, /* CFG_XS_PRE: (TT, n_in / 32) block sums */             \
                        int n_in, int n_out0, int n_out1, int n_out2) {                         \
    /* the buffers as addresses: addr.hpp */                                                       \
    const uint8_t *w0 = STRATA_ADDR(const uint8_t, a_w0);                                          \
    const uint8_t *w1 = STRATA_ADDR(const uint8_t, a_w1);                                          \
    const uint8_t *w2 = STRATA_ADDR(const uint8_t, a_w2);                                          \
    const float *x = STRATA_ADDR(const float, a_x);                                                \
    const float *r = STRATA_ADDR(const float, a_r);                                                \
    const float *xsp = STRATA_ADDR(const float, a_xs);                                             \
    const float *sxp = STRATA_ADDR(const float, a_sx);                                             \
    float *y0 = STRATA_ADDR(float, a_y0), *y1 = STRATA_ADDR(float, a_y1);                          \
    float *y2 = STRATA_ADDR(float, a_y2);                                                          \
    constexpr int R = KT_R(TT);                                                                 \
    KT_XS_DECL(TT)                                                                              \
    auto it = syclext::this_work_item::get_nd_item<1>();                                        \
    const int lane = (int)it.get_sub_group().get_local_linear_id();                             \
    const size_t g = it.get_group(0); /* one 16-lane work-group per R tiles */                  \
    const size_t t0 = (size_t)(n_out0 + TILE - 1) / TILE;                                       \
    const size_t t1 = (size_t)(n_out1 + TILE - 1) / TILE;                                       \
    const size_t t2 = (size_t)(n_out2 + TILE - 1) / TILE;                                       \
    const size_t g0 = (t0 + R - 1) / R, g1 = (t1 + R - 1) / R;                                  \
    const int nb = n_in / 32;                                                                   \
    /* plain ternaries (uniform selects; sycl::min-style builtins turned indices varying) */    \
    const int m = g < g0 ? 0 : (g < g0 + g1 ? 1 : 2);                                           \
    const size_t gl = m == 0 ? g : (m == 1 ? g - g0 : g - g0 - g1);                             \
    const size_t tiles = m == 0 ? t0 : (m == 1 ? t1 : t2);                                      \
    const uint8_t *w = m == 0 ? w0 : (m == 1 ? w1 : w2);                                        \
    float *y = m == 0 ? y0 : (m == 1 ? y1 : y2);                                                \
    const int n_out = m == 0 ? n_out0 : (m == 1 ? n_out1 : n_out2);                             \
    const size_t tile0 = gl * R;                                                                \
    kt_run<TT, R>(w, tile0, (int)(tiles - tile0), x, y, m == 0 ? r : nullptr, n_in, n_out, nb,  \
                  lane, KT_XS, xsp, sxp);                                                       \
  }
#if defined(CFG_NORM_TAIL)
// -DCFG_NORM_TAIL (with norm.hpp, actq.hpp, xstage.hpp, norm_q8.hpp): the norm that follows a
// projection folded into the projection's launch. y = y + W x (one matrix, the residual
// epilogue), then the work-group that finishes last (an arrival counter: reduce.cpp's pattern)
// writes yq = round_32(rms_norm(y) * nw) for the TT rows, one row after the other, with
// norm_q8.cpp's very code (norm_q8.hpp), so the same bits as the rms_norm_q8_32 launch it
// replaces; nst / nrec its stage for the products after it (xstage.hpp). The tail runs after
// every work-group has read x and its stage, so yq and the stage may be the buffers x and its
// stage came in. The last work-group resets the counter: zero before the first launch, zero
// after each.
static inline void norm_tail(unsigned *cnt, const float *y, const float *nw, float *yq, XSt st,
                             int n, float eps, int rows) {
  auto sg = syclext::this_work_item::get_nd_item<1>().get_sub_group();
  const int lane = (int)sg.get_local_linear_id();
  // (a work-group here is one 16-lane sub-group: launched with local size TILE)
  if (!arrived_last(cnt, sg, lane)) return;
  for (int row = 0; row < rows; ++row)
    rms_norm_q8_row<32>(sg, lane, y, nw, yq, st, n, eps, (size_t)row, (size_t)rows);
  arrival_reset(cnt, lane);
}

// One matrix, residual always: KT_KERNEL's matrix-0 path, then norm_tail.
#define KT_NORM_KERNEL(TT)                                                                      \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                   \
  SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<TILE>))                            \
  void mmvq_tiled_norm_t##TT(uint64_t a_w,   /* tiles: (ceil(n_out/16), n_in/32) records */   \
                             uint64_t a_x,   /* (TT, n_in) f32 */                              \
                             uint64_t a_y,   /* (TT, n_out) f32: residual in, y + W x out */   \
                             uint64_t a_xs,  /* CFG_XS_PRE: (TT, n_in) staged x, or 0 */       \
                             uint64_t a_sx,  /* CFG_XS_PRE: (TT, n_in / 32) block sums */      \
                             uint64_t a_cnt, /* (1) u32 arrival counter, 0 between launches */ \
                             uint64_t a_nw,  /* (n_out) norm weight */                         \
                             uint64_t a_yq,  /* (TT, n_out) rounded normed output */           \
                             uint64_t a_nst, /* yq's stage (xstage.hpp), or 0 */               \
                             uint64_t a_nrec, /* its integer records, or 0 */                  \
                             int n_in, int n_out, float eps) {                                 \
    const uint8_t *w = STRATA_ADDR(const uint8_t, a_w);                                            \
    const float *x = STRATA_ADDR(const float, a_x);                                                \
    const float *xsp = STRATA_ADDR(const float, a_xs);                                             \
    const float *sxp = STRATA_ADDR(const float, a_sx);                                             \
    float *y = STRATA_ADDR(float, a_y);                                                            \
    KT_XS_DECL(TT)                                                                              \
    auto it = syclext::this_work_item::get_nd_item<1>();                                        \
    const int lane = (int)it.get_sub_group().get_local_linear_id();                             \
    const size_t g = it.get_group(0); /* one 16-lane work-group per tile */                     \
    const size_t tiles = (size_t)(n_out + TILE - 1) / TILE;                                     \
    kt_run<TT, 1>(w, g, (int)(tiles - g), x, y, y, n_in, n_out, n_in / 32, lane, KT_XS, xsp,    \
                  sxp);                                                                         \
    norm_tail(STRATA_ADDR(unsigned, a_cnt), y, STRATA_ADDR(const float, a_nw),                  \
              STRATA_ADDR(float, a_yq), XST_ARGS(a_nst, a_nrec), n_out, eps, TT);               \
  }
KT_NORM_KERNEL(1)
KT_NORM_KERNEL(2)
KT_NORM_KERNEL(3)
KT_NORM_KERNEL(4)
KT_NORM_KERNEL(5)
KT_NORM_KERNEL(6)
KT_NORM_KERNEL(7)
KT_NORM_KERNEL(8)
#else
KT_KERNEL(1)
KT_KERNEL(2)
KT_KERNEL(3)
KT_KERNEL(4)
KT_KERNEL(5)
KT_KERNEL(6)
KT_KERNEL(7)
KT_KERNEL(8)
#endif
