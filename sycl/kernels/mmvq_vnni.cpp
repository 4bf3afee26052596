// mmvq_vnni: the tiled decode product (mmvq_tiled.cpp's weights, tiled.rs's layout) with 8-bit
// integer dot products, x taken as the 8-bit integers its rounding made (xstage.hpp's records):
//   y[t, o] = sum_b d_w[o, b] * d_x[t, b] * (sum_e q_w[o, b, e] * q_x[t, b, e]) + m[o, b] * sx[t, b]
// the unsigned q of the 4/5-bit formats, m their min (Q4_1, Q5_1) or -8 d / -16 d (Q4_0 / Q5_0),
// sx the block sums of x. One -DCFG_FMT_<type> of Q4_0, Q4_1, Q5_0, Q5_1.
//
// x86 only: `vpdpbusd` (AVX-512 VNNI) through inline assembly, four u8 x s8 products summed into
// each 32-bit lane per instruction, where mmvq_tiled's float loop does one fma per product. The
// SPIR-V integer-dot extension is not open to the run-time compiler and plain C++ products did not
// become vpdpbusd (docs/performance.md, sessions 7-9); inline assembly did. So this kernel builds
// only for the CPU device (the engine selects it only there, STRATA_VNNI=1), and a GPU keeps
// mmvq_tiled, which the CPU device checks too.
//
// Not bitwise mmvq_tiled: the block's integer sum is exact and rounded once, mmvq_tiled rounds
// along its fma chains. Parity against the f64 reference: tests/kernels_mmvq.rs.
//
// One work-item = one tile of 16 rows (a 512-bit vector of 16 lanes = 16 rows), every column;
// no sub-groups: the work-item's code is written in 16-wide vectors, so the run-time vectorizer
// has nothing to widen. The weights of a block are loaded once for all TT columns.
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
#else
// Q5_1 (also what a tool building every source with no options gets)
#define CFG_FMT_Q5_1
#define BLOCK_BYTES 24
#define HAS_M 1
#define HAS_QH 1
#endif

#define REC (TILE * BLOCK_BYTES)
#define OFF_M (2 * TILE)
#define OFF_QH ((2 + 2 * HAS_M) * TILE)
#define OFF_QS ((2 + 2 * HAS_M + 4 * HAS_QH) * TILE)
// xstage.hpp's integer record of a block: q[32] int8, then d f32
#define XREC 36

typedef int v16i __attribute__((ext_vector_type(16)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef _Float16 v16h __attribute__((ext_vector_type(16)));
// the same vectors at the alignment of their elements (the records are 64-byte aligned only
// for some formats, the outputs at any row)
typedef int v16i_u __attribute__((ext_vector_type(16), aligned(4)));
typedef float v16f_u __attribute__((ext_vector_type(16), aligned(4)));
typedef short v16s_u __attribute__((ext_vector_type(16), aligned(2)));

// acc + per lane the sum of the four products (unsigned byte k of w) * (signed byte k of *x).
// Early-clobber output tied to acc by "0": a plain "+v" came out of the SPIR-V round trip untied
// (the compiler gave acc and w one register).
static inline v16i dpbusd(v16i acc, v16i w, const int *x) {
  v16i r;
  asm("vpdpbusd (%3)%{1to16%}, %2, %0" : "=&v"(r) : "0"(acc), "v"(w), "r"(x));
  return r;
}

static inline v16f load_f16(const uint8_t *p) {
  return __builtin_convertvector(__builtin_bit_cast(v16h, *(const v16s_u *)p), v16f);
}

// The product for a compile-time column count TT on one tile (row0 = its first row).
// xr: the integer records (TT rows of nb), sx: the block sums (TT, nb).
template <int TT>
static inline void kv_run(const uint8_t *w, size_t row0, const uint8_t *xr, const float *sx,
                          float *y, const float *res, int nb, int n_out) {
  v16f acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;
  const v16i lo_mask = 0x0F0F0F0F;
  for (int ib = 0; ib < nb; ++ib, w += REC) {
    // the 32 unsigned q of the block, as 8 vectors of 4 bytes per row: words j (elements
    // 4j .. 4j+3, low nibbles) and 4 + j (elements 16+4j .., high nibbles)
    v16i q[8];
#if HAS_QH
    const v16i qh = *(const v16i_u *)(w + OFF_QH);
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const v16i wq = *(const v16i_u *)(w + OFF_QS + 64 * j);
      q[j] = wq & lo_mask;
      q[4 + j] = (wq >> 4) & lo_mask;
#if HAS_QH
      // tiled.rs's qh permutation: word j's high bits at bit 4 of each byte
      q[j] |= (qh >> j) & 0x10101010;
      q[4 + j] |= (qh << (4 - j)) & 0x10101010;
#endif
    }
    const v16f d = load_f16(w);
#if HAS_M
    const v16f m = load_f16(w + OFF_M);
#elif HAS_QH
    const v16f m = -16.0f * d;
#else
    const v16f m = -8.0f * d;
#endif
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const uint8_t *xb = xr + ((size_t)t * nb + ib) * XREC;
      const int *xq = (const int *)xb;
      // two chains (low and high halves) for the instruction's latency
      v16i s0 = 0, s1 = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s0 = dpbusd(s0, q[j], xq + j);
        s1 = dpbusd(s1, q[4 + j], xq + 4 + j);
      }
      const float dx = *(const float *)(xb + 32);
      const v16f s = __builtin_convertvector(s0 + s1, v16f);
      acc[t] += (d * dx) * s + m * sx[(size_t)t * nb + ib];
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t) {
    float *yt = y + (size_t)t * n_out + row0;
    v16f v = acc[t];
    if (res != nullptr) {
      const float *rt = res + (size_t)t * n_out + row0;
      if (row0 + TILE <= (size_t)n_out) {
        v += *(const v16f_u *)rt;
      } else {
        for (int l = 0; row0 + l < (size_t)n_out; ++l) v[l] += rt[l];
      }
    }
    if (row0 + TILE <= (size_t)n_out) {
      *(v16f_u *)yt = v;
    } else {
      for (int l = 0; row0 + l < (size_t)n_out; ++l) yt[l] = v[l];
    }
  }
}

// One kernel per column count (mmvq_vnni_t1 .. _t8), mmvq_tiled's arguments: up to three
// matrices with the same x and n_in, work-item g < tiles(n_out0) doing tile g of matrix 0, the
// next tiles(n_out1) matrix 1, the rest matrix 2; work-items past the last tile do nothing.
// r (nullable, matrix 0 only): y0 = r + W0 x (r may be y0 itself).
#define KV_KERNEL(TT)                                                                           \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                   \
  void mmvq_vnni_t##TT(uint64_t a_w0, /* tiles: (ceil(n_out0/16), n_in/32) records */          \
                       uint64_t a_w1, /* (ceil(n_out1/16), n_in/32) records, or 0 */            \
                       uint64_t a_w2, /* (ceil(n_out2/16), n_in/32) records, or 0 */            \
                       uint64_t a_x,  /* (TT, n_in) f32: unused, the records hold x */          \
                       uint64_t a_y0, /* (TT, n_out0) f32 */                                    \
                       uint64_t a_y1, /* (TT, n_out1) f32, or 0 */                              \
                       uint64_t a_y2, /* (TT, n_out2) f32, or 0 */                              \
                       uint64_t a_r,  /* (TT, n_out0) f32 residual, or 0 */                     \
                       uint64_t a_xr, /* (TT, n_in / 32) integer records, xstage.hpp */         \
                       uint64_t a_sx, /* (TT, n_in / 32) block sums, xstage.hpp */              \
                       int n_in, int n_out0, int n_out1, int n_out2) {                          \
    (void)a_x;                                                                                  \
    const size_t g = syclext::this_work_item::get_nd_item<1>().get_global_id(0);                \
    const size_t t0 = (size_t)(n_out0 + TILE - 1) / TILE;                                       \
    const size_t t1 = (size_t)(n_out1 + TILE - 1) / TILE;                                       \
    const size_t t2 = (size_t)(n_out2 + TILE - 1) / TILE;                                       \
    if (g >= t0 + t1 + t2) return;                                                              \
    const int m = g < t0 ? 0 : (g < t0 + t1 ? 1 : 2);                                           \
    const size_t tile = m == 0 ? g : (m == 1 ? g - t0 : g - t0 - t1);                           \
    const uint64_t aw = m == 0 ? a_w0 : (m == 1 ? a_w1 : a_w2);                                 \
    const uint64_t ay = m == 0 ? a_y0 : (m == 1 ? a_y1 : a_y2);                                 \
    const int n_out = m == 0 ? n_out0 : (m == 1 ? n_out1 : n_out2);                             \
    const int nb = n_in / 32;                                                                   \
    kv_run<TT>(STRATA_ADDR(const uint8_t, aw) + tile * (size_t)nb * REC, tile * TILE,           \
               STRATA_ADDR(const uint8_t, a_xr), STRATA_ADDR(const float, a_sx),                \
               STRATA_ADDR(float, ay), m == 0 ? STRATA_ADDR(const float, a_r) : nullptr, nb,    \
               n_out);                                                                          \
  }
KV_KERNEL(1)
KV_KERNEL(2)
KV_KERNEL(3)
KV_KERNEL(4)
KV_KERNEL(5)
KV_KERNEL(6)
KV_KERNEL(7)
KV_KERNEL(8)
