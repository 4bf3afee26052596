// mmvq_vnni: the tiled decode products (mmvq_tiled.cpp's and mmvq_ktiled.cpp's weights, tiled.rs's
// and ktiled.rs's layouts) with 8-bit integer dot products, x taken as the 8-bit integers its
// rounding made (xstage.hpp's records). One -DCFG_FMT_<type> of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (x
// rounded in blocks of 32, Q8_0) or Q4_K, Q5_K, Q6_K (blocks of 256, Q8_K):
//   blocks of 32:  y[t, o] = sum_b d_w[o, b] d_x[t, b] (sum_e q_w q_x) + m[o, b] sx[t, b]
//     the unsigned q of the 4/5-bit formats, m their min (Q4_1, Q5_1) or -8 d / -16 d (Q4_0 /
//     Q5_0), sx the block sums of x; Q8_0: its signed q, m = 0;
//   K-quants:      y[t, o] = sum_b d_x[t, b] (d (sum_s sc_s sum_e q_w q_x) - dmin sum_s m_s bsum_s)
//     (Q4_K, Q5_K: 8 sub-blocks s of 32, 6-bit scale and min) or
//                  y[t, o] = sum_b d_x[t, b] d sum_g sc_g (sum_e q_w q_x - 32 bsum_g)
//     (Q6_K: 16 groups g of 16, int8 scale, q - 32), bsum the integer sums of x's q: the same
//     integer arithmetic as llama.cpp's CPU dot products, one f32 rounding per block.
//
// x86 only: `vpdpbusd` (AVX-512 VNNI) through inline assembly, four u8 x s8 products summed into
// each 32-bit lane per instruction, where mmvq_tiled's float loop does one fma per product. The
// SPIR-V integer-dot extension is not open to the run-time compiler and plain C++ products did not
// become vpdpbusd (docs/performance.md, sessions 7-9); inline assembly did. So this kernel builds
// only for the CPU device (the engine selects it only there, STRATA_VNNI=1), and a GPU keeps
// mmvq_tiled, which the CPU device checks too.
//
// Not bitwise mmvq_tiled / mmvq_ktiled: the block's integer sum is exact and rounded once, they
// round along their fma chains. Parity against the f64 reference: tests/kernels_vnni.rs.
//
// One work-item = one tile of 16 rows (a 512-bit vector of 16 lanes = 16 rows), every column;
// no sub-groups: the work-item's code is written in 16-wide vectors, so the run-time vectorizer
// has nothing to widen. The weights of a block are loaded once for all TT columns.
#include <sycl/sycl.hpp>
#include <cstdint>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define TILE 16

#if defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K) || defined(CFG_FMT_Q6_K)
#define KQ 1
#define BLOCK 256
// ktiled.rs's records; Q6_K's d of every block in a header before the tile's records
#if defined(CFG_FMT_Q4_K)
#define REC (TILE * 144)
#define HDR 0
#define HAS_QH 0
#elif defined(CFG_FMT_Q5_K)
#define REC (TILE * 176)
#define HDR 0
#define HAS_QH 1
#else
#define REC (TILE * 208)
#define HDR (TILE * 2)
#endif
// xstage.hpp's record of a block of 256: q[256] int8, d f32, bsum[16] int16
#define XREC 292
#else
#define KQ 0
#define BLOCK 32
#define HDR 0
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
#elif defined(CFG_FMT_Q8_0)
// signed q in byte planes (tiled.rs): plane e = element e of the 16 rows
#define BLOCK_BYTES 34
#define HAS_M 0
#define HAS_QH 0
#define Q8 1
#else
// Q5_1 (also what a tool building every source with no options gets)
#define CFG_FMT_Q5_1
#define BLOCK_BYTES 24
#define HAS_M 1
#define HAS_QH 1
#endif
#ifndef Q8
#define Q8 0
#endif
#define REC (TILE * BLOCK_BYTES)
#define OFF_M (2 * TILE)
#define OFF_QH ((2 + 2 * HAS_M) * TILE)
#define OFF_QS ((2 + 2 * HAS_M + 4 * HAS_QH) * TILE)
// xstage.hpp's integer record of a block of 32: q[32] int8, then d f32
#define XREC 36
#endif

typedef int v16i __attribute__((ext_vector_type(16)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef _Float16 v16h __attribute__((ext_vector_type(16)));
typedef short v16s __attribute__((ext_vector_type(16)));
typedef char v64c __attribute__((ext_vector_type(64)));
typedef char v64c_u __attribute__((ext_vector_type(64), aligned(1)));
// the same vectors at the alignment of their elements (the records are 64-byte aligned only
// for some formats, the outputs at any row)
typedef int v16i_u __attribute__((ext_vector_type(16), aligned(4)));
typedef float v16f_u __attribute__((ext_vector_type(16), aligned(4)));
typedef short v16s_u __attribute__((ext_vector_type(16), aligned(2)));

#if defined(CFG_VNNI_AVX2)
// AVX2, no VNNI (-DCFG_VNNI_AVX2, vnni::Isa::Avx2): the same sums, two words at a time, per
// 8 lanes. vpmaddubsw multiplies the unsigned bytes of w by the signed bytes of x and adds
// adjacent pairs into int16 (saturating, never reached: the largest weight q is Q6_K's 63 and
// |x q| <= 127, so the two words' pair sums added before the one vpmaddwd stay within
// |4 * 63 * 127| = 32004 < 32767), vpmaddwd by 1 adds the int16 pairs into the int32 lanes:
// 2.5 instructions a word. The 512-bit vectors of the code around it are two ymm halves on an
// AVX2 target.
typedef int v8i __attribute__((ext_vector_type(8)));
static inline v8i dp8x2(v8i acc, v8i w0, v8i x0, v8i w1, v8i x1) {
  const v8i ones = 0x00010001; // int16 lanes of 1
  v8i r, p, p1;
  asm("vpmaddubsw %4, %5, %1\n\t"
      "vpmaddubsw %6, %7, %2\n\t"
      "vpaddw %2, %1, %1\n\t"
      "vpmaddwd %8, %1, %1\n\t"
      "vpaddd %1, %3, %0"
      : "=&v"(r), "=&v"(p), "=&v"(p1)
      : "v"(acc), "v"(x0), "v"(w0), "v"(x1), "v"(w1), "v"(ones));
  return r;
}
static inline v16i join(v8i lo, v8i hi) {
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
static inline v16i dpbusd2(v16i acc, v16i w0, const int *x0, v16i w1, const int *x1) {
  const v8i a = *x0, b = *x1; // x's 4 bytes in every lane
  return join(dp8x2(acc.lo, w0.lo, a, w1.lo, b), dp8x2(acc.hi, w0.hi, a, w1.hi, b));
}
// Q8_0's signed weights: |w| times x with w's sign (vpsignb), so the int16 pair sums stay
// within |2 * 128 * 127| = 32512 (q + 128 would reach 2 * 255 * 127); one word at a time.
// "x", not "v": vpsignb has no EVEX form, so its registers must be xmm/ymm 0-15 (with "v" an
// AVX-512 machine gave it ymm16+ and the results were garbage).
static inline v8i dps8(v8i acc, v8i w, v8i xb) {
  const v8i ones = 0x00010001;
  v8i r, p, sx;
  asm("vpsignb %5, %4, %2\n\t"
      "vpabsb %5, %1\n\t"
      "vpmaddubsw %2, %1, %1\n\t"
      "vpmaddwd %6, %1, %1\n\t"
      "vpaddd %1, %3, %0"
      : "=&x"(r), "=&x"(p), "=&x"(sx)
      : "x"(acc), "x"(xb), "x"(w), "x"(ones));
  return r;
}
// sum of the signed products (signed byte k of w) * (signed byte k of *x), two words
static inline v16i dpbssd2(v16i acc, v16i w0, const int *x0, v16i w1, const int *x1) {
  const v8i a = *x0, b = *x1;
  return join(dps8(dps8(acc.lo, w0.lo, a), w1.lo, b), dps8(dps8(acc.hi, w0.hi, a), w1.hi, b));
}
#else
// acc + per lane the sum of the four products (unsigned byte k of w) * (signed byte k of *x).
// Early-clobber output tied to acc by "0": a plain "+v" came out of the SPIR-V round trip untied
// (the compiler gave acc and w one register).
static inline v16i dpbusd(v16i acc, v16i w, const int *x) {
  v16i r;
  asm("vpdpbusd (%3)%{1to16%}, %2, %0" : "=&v"(r) : "0"(acc), "v"(w), "r"(x));
  return r;
}
static inline v16i dpbusd2(v16i acc, v16i w0, const int *x0, v16i w1, const int *x1) {
  return dpbusd(dpbusd(acc, w0, x0), w1, x1);
}
#endif

static inline v16f load_f16(const uint8_t *p) {
  return __builtin_convertvector(__builtin_bit_cast(v16h, *(const v16s_u *)p), v16f);
}

static inline v16i load_i(const uint8_t *p) { return *(const v16i_u *)p; }

// The low 16 bits of each lane as an f16, to f32.
static inline v16f f16_lo(v16i w) {
  return __builtin_convertvector(__builtin_bit_cast(v16h, __builtin_convertvector(w, v16s)), v16f);
}

// The column's output store: y = v (+ r), 16 rows from row0, the last tile's rows < n_out only.
static inline void kv_store(float *y, const float *res, v16f v, size_t row0, int n_out) {
  if (row0 + TILE <= (size_t)n_out) {
    if (res != nullptr) v += *(const v16f_u *)res;
    *(v16f_u *)y = v;
  } else {
    for (int l = 0; row0 + l < (size_t)n_out; ++l) y[l] = (res != nullptr ? res[l] : 0.0f) + v[l];
  }
}

#if !KQ
// the block's dot product of two words at a time
#if Q8 && defined(CFG_VNNI_AVX2)
#define DOT2 dpbssd2
#else
#define DOT2 dpbusd2
#endif

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
#if Q8
    // Q8_0: word j = elements 4j .. 4j+3 = byte planes 4j .. 4j+3 transposed (a constant byte
    // shuffle: one vpermb where the CPU has AVX-512 VBMI); for vpdpbusd made unsigned by q + 128
    // (xor 0x80), taken off the integer sum below; the AVX2 form keeps them signed (dpbssd2)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const v64c p = *(const v64c_u *)(w + OFF_QS + 64 * j);
      const v64c tq = __builtin_shufflevector(
          p, p, 0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51, 4, 20, 36, 52, 5, 21,
          37, 53, 6, 22, 38, 54, 7, 23, 39, 55, 8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11,
          27, 43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63);
#if defined(CFG_VNNI_AVX2)
      q[j] = __builtin_bit_cast(v16i, tq); // signed: dpbssd2
#else
      q[j] = __builtin_bit_cast(v16i, tq) ^ (int)0x80808080;
#endif
    }
#else
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
#endif
    const v16f d = load_f16(w);
#if HAS_M
    const v16f m = load_f16(w + OFF_M);
#elif HAS_QH
    const v16f m = -16.0f * d;
#elif !Q8
    const v16f m = -8.0f * d; // (Q8_0 has no offset: its integer sum is the signed one)
#endif
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const uint8_t *xb = xr + ((size_t)t * nb + ib) * XREC;
      const int *xq = (const int *)xb;
      // two chains (low and high halves) for the instruction's latency
      v16i s0 = 0, s1 = 0;
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        s0 = DOT2(s0, q[j], xq + j, q[j + 1], xq + j + 1);
        s1 = DOT2(s1, q[4 + j], xq + 4 + j, q[5 + j], xq + 5 + j);
      }
      const float dx = *(const float *)(xb + 32);
#if Q8 && !defined(CFG_VNNI_AVX2)
      // q + 128 in the sum: take 128 sum_e q_x off, exactly. The stage's block sum is
      // dx * sum_e q_x, exact in f32 (32 multiples of dx below 2^12 dx), so the quotient is that
      // integer (dx = 0: an all-zero block, sum 0). Branch-free: with a branch on dx the
      // verify window's head ran 1.3-2x slower.
      const float sxb = sx[(size_t)t * nb + ib];
      const int sq = (int)sycl::rint(sxb / (dx != 0.0f ? dx : 1.0f));
      const v16f s = __builtin_convertvector(s0 + s1 - 128 * sq, v16f);
#else
      // (Q8_0's AVX2 form: the signed sum itself, the same integer)
      const v16f s = __builtin_convertvector(s0 + s1, v16f);
#endif
#if Q8
      acc[t] += (d * dx) * s;
#else
      acc[t] += (d * dx) * s + m * sx[(size_t)t * nb + ib];
#endif
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t)
    kv_store(y + (size_t)t * n_out + row0,
             res != nullptr ? res + (size_t)t * n_out + row0 : nullptr, acc[t], row0, n_out);
}

#elif !defined(CFG_FMT_Q6_K)
// Q4_K / Q5_K (ktiled.rs): record = dm[16] u32 (d | dmin << 16) | sc[3][16] u32 | (Q5_K:
// qh[8][16] u32) | qs[32][16] u32. 64-element chunk j = qs words 8j .. 8j+7: byte b of word 8j+i
// is element 64j+4i+b (low nibble, sub-block 2j) and 64j+32+4i+b (high nibble, sub-block 2j+1);
// Q5_K's 5th bits: qh word i, bit 2j (low) and 2j+1 (high) of byte b.
#define OFF_SC (4 * TILE)
#define OFF_QH (16 * TILE)
#define OFF_QS ((16 + 32 * HAS_QH) * TILE)
template <int TT>
static inline void kv_run(const uint8_t *w, size_t row0, const uint8_t *xr, const float *sx,
                          float *y, const float *res, int nb, int n_out) {
  (void)sx;
  v16f acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;
  const v16i nib = 0x0F0F0F0F;
  for (int ib = 0; ib < nb; ++ib, w += REC) {
    const v16i dm = load_i(w);
    const v16f d = f16_lo(dm), dmin = f16_lo(dm >> 16);
    const v16i s0 = load_i(w + OFF_SC), s1 = load_i(w + OFF_SC + 64),
               s2 = load_i(w + OFF_SC + 128);
    // byte j of sc[0] / mn[0]: scale / min of sub-block j; of sc[1] / mn[1]: of sub-block 4 + j
    const v16i sc[2] = {s0 & 0x3F3F3F3F, (s2 & 0x0F0F0F0F) | ((s0 >> 2) & 0x30303030)};
    const v16i mn[2] = {s1 & 0x3F3F3F3F, ((s2 >> 4) & 0x0F0F0F0F) | ((s1 >> 2) & 0x30303030)};
    v16i isum[TT], msum[TT];
#pragma unroll
    for (int t = 0; t < TT; ++t) isum[t] = msum[t] = 0;
    // the chunk loop stays rolled: unrolled, the 8 kernels took the run-time compiler minutes
#pragma unroll 1
    for (int j = 0; j < 4; ++j) {
      v16i slo[TT], shi[TT];
#pragma unroll
      for (int t = 0; t < TT; ++t) slo[t] = shi[t] = 0;
      // words i and i + 1 of the chunk at a time (dpbusd2)
#pragma unroll
      for (int i = 0; i < 8; i += 2) {
        v16i lo[2], hi[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const v16i wq = load_i(w + OFF_QS + 64 * (8 * j + i + u));
          lo[u] = wq & nib;
          hi[u] = (wq >> 4) & nib;
#if HAS_QH
          const v16i h = load_i(w + OFF_QH + 64 * (i + u));
          lo[u] |= ((h >> (2 * j)) & 0x01010101) << 4;
          hi[u] |= ((h >> (2 * j + 1)) & 0x01010101) << 4;
#endif
        }
#pragma unroll
        for (int t = 0; t < TT; ++t) {
          const int *xq = (const int *)(xr + ((size_t)t * nb + ib) * XREC) + 16 * j + i;
          slo[t] = dpbusd2(slo[t], lo[0], xq, lo[1], xq + 1);
          shi[t] = dpbusd2(shi[t], hi[0], xq + 8, hi[1], xq + 9);
        }
      }
      const int sh0 = 8 * ((2 * j) % 4), sh1 = 8 * ((2 * j + 1) % 4);
      const v16i sc0 = (sc[j / 2] >> sh0) & 0xFF, sc1 = (sc[j / 2] >> sh1) & 0xFF;
      const v16i m0 = (mn[j / 2] >> sh0) & 0xFF, m1 = (mn[j / 2] >> sh1) & 0xFF;
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        const int16_t *bs = (const int16_t *)(xr + ((size_t)t * nb + ib) * XREC + 260);
        isum[t] += sc0 * slo[t] + sc1 * shi[t];
        msum[t] += m0 * (bs[4 * j] + bs[4 * j + 1]) + m1 * (bs[4 * j + 2] + bs[4 * j + 3]);
      }
    }
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const float dx = *(const float *)(xr + ((size_t)t * nb + ib) * XREC + 256);
      acc[t] += dx * (d * __builtin_convertvector(isum[t], v16f) -
                      dmin * __builtin_convertvector(msum[t], v16f));
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t)
    kv_store(y + (size_t)t * n_out + row0,
             res != nullptr ? res + (size_t)t * n_out + row0 : nullptr, acc[t], row0, n_out);
}
#else
// Q6_K (ktiled.rs): the tile's header d[nb][16] f16, then per block the record sc[4][16] u32
// (int8 scale 4w+k in byte k of word w), then for chunk c = 2n + h and i < 4 the words a = ql
// 16n+4h+i, b = ql 16n+8+4h+i, qh 8n+4h+i; byte k of them holds elements 128n+32g+16h+4i+k:
// g = 0: a low nibble | qh bits 0-1, 1: b low | bits 2-3, 2: a high | bits 4-5, 3: b high |
// bits 6-7, of group (scale) 8n+2g+h.
template <int TT>
static inline void kv_run(const uint8_t *w, size_t row0, const uint8_t *xr, const float *sx,
                          float *y, const float *res, int nb, int n_out) {
  (void)sx;
  const uint8_t *hdr = w, *recs = w + (size_t)nb * HDR;
  v16f acc[TT];
#pragma unroll
  for (int t = 0; t < TT; ++t) acc[t] = 0.0f;
  const v16i nib = 0x0F0F0F0F, two = 0x03030303;
  for (int ib = 0; ib < nb; ++ib) {
    const uint8_t *r = recs + (size_t)ib * REC;
    const v16f d = load_f16(hdr + (size_t)ib * HDR);
    const v16i sw[4] = {load_i(r), load_i(r + 64), load_i(r + 128), load_i(r + 192)};
    v16i isum[TT];
#pragma unroll
    for (int t = 0; t < TT; ++t) isum[t] = 0;
    // the chunk loop stays rolled: unrolled, the 8 kernels took the run-time compiler minutes
#pragma unroll 1
    for (int c = 0; c < 4; ++c) {
      const int n = c >> 1, h = c & 1;
      const uint8_t *ch = r + 4 * 64 + c * 12 * 64;
      v16i s[TT][4];
#pragma unroll
      for (int t = 0; t < TT; ++t)
#pragma unroll
        for (int g = 0; g < 4; ++g) s[t][g] = 0;
      // words i and i + 1 at a time (dpbusd2)
#pragma unroll
      for (int i = 0; i < 4; i += 2) {
        v16i q[2][4];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int k = i + u;
          const v16i a = load_i(ch + 3 * k * 64), b = load_i(ch + (3 * k + 1) * 64);
          const v16i hw = load_i(ch + (3 * k + 2) * 64);
          q[u][0] = (a & nib) | ((hw & two) << 4);
          q[u][1] = (b & nib) | (((hw >> 2) & two) << 4);
          q[u][2] = ((a >> 4) & nib) | (((hw >> 4) & two) << 4);
          q[u][3] = ((b >> 4) & nib) | (((hw >> 6) & two) << 4);
        }
#pragma unroll
        for (int t = 0; t < TT; ++t) {
          const int *xq = (const int *)(xr + ((size_t)t * nb + ib) * XREC);
#pragma unroll
          for (int g = 0; g < 4; ++g) {
            const int *xg = xq + 32 * n + 8 * g + 4 * h + i;
            s[t][g] = dpbusd2(s[t][g], q[0][g], xg, q[1][g], xg + 1);
          }
        }
      }
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const int is = 8 * n + 2 * g + h;
        const v16i scg = (sw[is >> 2] << (24 - 8 * (is & 3))) >> 24; // the signed byte
#pragma unroll
        for (int t = 0; t < TT; ++t) {
          const int16_t *bs = (const int16_t *)(xr + ((size_t)t * nb + ib) * XREC + 260);
          isum[t] += scg * (s[t][g] - 32 * bs[is]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const float dx = *(const float *)(xr + ((size_t)t * nb + ib) * XREC + 256);
      acc[t] += (dx * d) * __builtin_convertvector(isum[t], v16f);
    }
  }
#pragma unroll
  for (int t = 0; t < TT; ++t)
    kv_store(y + (size_t)t * n_out + row0,
             res != nullptr ? res + (size_t)t * n_out + row0 : nullptr, acc[t], row0, n_out);
}
#endif

// One kernel per column count (mmvq_vnni_t1 .. _t8), mmvq_tiled's arguments and n_cb, the
// number of blocks of TT columns (more than one: the prompt's rows, STRATA_VNNI only): up to three
// matrices with the same x and n_in, work-item g < tiles(n_out0) doing tile g of matrix 0, the
// next tiles(n_out1) matrix 1, the rest matrix 2; work-items past the last tile do nothing.
// r (nullable, matrix 0 only): y0 = r + W0 x (r may be y0 itself).
#define KV_KERNEL(TT)                                                                           \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                   \
  void mmvq_vnni_t##TT(uint64_t a_w0, /* tiles: (ceil(n_out0/16), n_in/BLOCK) records */       \
                       uint64_t a_w1, /* (ceil(n_out1/16), n_in/BLOCK) records, or 0 */         \
                       uint64_t a_w2, /* (ceil(n_out2/16), n_in/BLOCK) records, or 0 */         \
                       uint64_t a_x,  /* (TT, n_in) f32: unused, the records hold x */          \
                       uint64_t a_y0, /* (TT, n_out0) f32 */                                    \
                       uint64_t a_y1, /* (TT, n_out1) f32, or 0 */                              \
                       uint64_t a_y2, /* (TT, n_out2) f32, or 0 */                              \
                       uint64_t a_r,  /* (TT, n_out0) f32 residual, or 0 */                     \
                       uint64_t a_xr, /* (TT, n_in / BLOCK) integer records, xstage.hpp */      \
                       uint64_t a_sx, /* (TT, n_in / 32) block sums (xstage.hpp); K: unused */ \
                       int n_in, int n_out0, int n_out1, int n_out2,                            \
                       int n_cb /* column blocks of TT: the launch does n_cb * TT columns */) { \
    (void)a_x;                                                                                  \
    const size_t gid = syclext::this_work_item::get_nd_item<1>().get_global_id(0);              \
    const size_t t0 = (size_t)(n_out0 + TILE - 1) / TILE;                                       \
    const size_t t1 = (size_t)(n_out1 + TILE - 1) / TILE;                                       \
    const size_t t2 = (size_t)(n_out2 + TILE - 1) / TILE;                                       \
    const size_t tiles = t0 + t1 + t2;                                                          \
    if (gid >= tiles * (size_t)n_cb) return;                                                    \
    /* work-item = (column block cb, tile g): the column block's rows of x, y and r */          \
    const size_t cb = gid / tiles, g = gid % tiles;                                             \
    const int m = g < t0 ? 0 : (g < t0 + t1 ? 1 : 2);                                           \
    const size_t tile = m == 0 ? g : (m == 1 ? g - t0 : g - t0 - t1);                           \
    const uint64_t aw = m == 0 ? a_w0 : (m == 1 ? a_w1 : a_w2);                                 \
    const uint64_t ay = m == 0 ? a_y0 : (m == 1 ? a_y1 : a_y2);                                 \
    const int n_out = m == 0 ? n_out0 : (m == 1 ? n_out1 : n_out2);                             \
    const int nb = n_in / BLOCK;                                                                \
    const size_t c0 = cb * TT; /* first column */                                               \
    const float *r = m == 0 ? STRATA_ADDR(const float, a_r) : nullptr;                          \
    const float *sx = STRATA_ADDR(const float, a_sx);                                           \
    kv_run<TT>(STRATA_ADDR(const uint8_t, aw) + tile * (size_t)nb * (HDR + REC), tile * TILE,   \
               STRATA_ADDR(const uint8_t, a_xr) + c0 * nb * XREC,                               \
               sx != nullptr ? sx + c0 * (size_t)(n_in / 32) : nullptr,                         \
               STRATA_ADDR(float, ay) + c0 * n_out, r != nullptr ? r + c0 * n_out : nullptr,    \
               nb, n_out);                                                                      \
  }
KV_KERNEL(1)
KV_KERNEL(2)
KV_KERNEL(3)
KV_KERNEL(4)
KV_KERNEL(5)
KV_KERNEL(6)
KV_KERNEL(7)
KV_KERNEL(8)
