// mmvq_kreg: the opt-in KREG family (STRATA_MMVQ_KREG=1, engine/kernels/mmvq_kreg.rs) for the
// quantized matrix x (1..8 columns) product of Q4_K, Q5_K, Q6_K and IQ4_XS.
//   y[t, o] = sum_i W[o, i] * x[t, i]   for o < n_out, t < T <= 8
//
// Structure (the one made for Arc GPUs, kept as is on every device):
// - One work-group covers a row's whole K: sub-group s owns super-blocks [s*xb, (s+1)*xb) of
//   every row, lane l elements l + 16k of each of those blocks (the default kernels' lane split).
// - Each lane loads its slice of every column's activations ONCE into private storage (xr), then
//   the group streams CFG_TPW tiles of CFG_R consecutive rows against them.
// - Per tile: every (row, column) has its own fma chain over the lane's elements and a fixed xor
//   butterfly inside the sub-group; the sub-group partials wait in local memory and are summed
//   in index order after one barrier at the end (the Arc version sums them per tile through a
//   double-buffered array; on the CPU device a barrier inside the tile loop costs a save and
//   restore of every lane's activation registers, see below).
// Nothing in a (row, column) result depends on T or CFG_R: a T-column call is bitwise T
// one-column calls, and the rows-per-tile choice per column count is free.
// IQ4_XS decodes through a 256-entry local-memory table (one entry per quant byte: both nibbles'
// codebook values). K-quant scales are decoded branch-free from 32-bit words.
//
// Build options: exactly one -DCFG_FMT_{Q4_K,Q5_K,Q6_K,IQ4_XS} (Q4_K when none: lets
// `strata devices --build-kernels` build the file bare), CFG_NSG sub-groups per work-group,
// CFG_XB super-blocks per sub-group (ceil(n_in / 256 / CFG_NSG)), CFG_R rows per tile,
// CFG_TPW tiles per work-group.
#include <sycl/sycl.hpp>
#include <cstdint>

namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#if !defined(CFG_FMT_Q4_K) && !defined(CFG_FMT_Q5_K) && !defined(CFG_FMT_Q6_K) && \
    !defined(CFG_FMT_IQ4_XS)
#define CFG_FMT_Q4_K
#endif
#ifndef CFG_NSG
#define CFG_NSG 2
#endif
#ifndef CFG_XB
#define CFG_XB 8
#endif
#ifndef CFG_R
#define CFG_R 4
#endif
#define CFG_SG 16
#define CFG_TMAX 8
#define KR_QK 256
#define KR_EPL 16  // elements per lane per super-block

static inline float kr_h2f(const uint8_t *p) {
  return (float)sycl::bit_cast<sycl::half>(*(const uint16_t *)p);
}
static inline uint32_t kr_u32(const uint8_t *p) { return *(const uint32_t *)p; }  // 4-aligned
static inline int kr_byte(uint32_t w, int i) { return (int)((w >> (8 * i)) & 0xFFu); }

// Each format decodes a super-block in 4 chunks of 4 weights per lane (kr_chunk, c = 0..3 a
// compile-time constant): w4[m] is element 16 * KR_K(c, m) + lane. Chunks keep only 4 decoded
// weights per row live at a time (a whole block per row would not fit the registers).
#if defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K)
// d, dmin f16; scales[12]: 6-bit scale/min of 8 sub-blocks of 32; [Q5_K: qh[32]]; qs[128].
// w = d * sc[j] * q - dmin * m[j]
#if defined(CFG_FMT_Q4_K)
#define KR_BB 144
#else
#define KR_BB 176
#endif
#define KR_K(c, m) (4 * (c) + (m))
struct KrTable {};
static inline void kr_chunk(const uint8_t *blk, int lane, const KrTable &, int c, float *w4) {
  const float d = kr_h2f(blk), dmin = kr_h2f(blk + 2);
  // sub-block j < 4: sc = s[j] & 63, m = s[j+4] & 63; j >= 4: sc = s[j+4] & 15 | s[j-4] >> 6 << 4,
  // m = s[j+4] >> 4 | s[j] >> 6 << 4. As byte lanes of the three words: no branch on j.
  const uint32_t a0 = kr_u32(blk + 4), a1 = kr_u32(blk + 8), a2 = kr_u32(blk + 12);
  const uint32_t scw = c < 2 ? a0 & 0x3F3F3F3Fu : (a2 & 0x0F0F0F0Fu) | (((a0 >> 6) & 0x03030303u) << 4);
  const uint32_t mw = c < 2 ? a1 & 0x3F3F3F3Fu : ((a2 >> 4) & 0x0F0F0F0Fu) | (((a1 >> 6) & 0x03030303u) << 4);
  // 64-element chunk c: sub-blocks 2c (low nibbles) and 2c+1 (high nibbles)
  const int j0 = (2 * c) & 3, j1 = (2 * c + 1) & 3;
  const float d0 = d * (float)kr_byte(scw, j0), n0 = dmin * (float)kr_byte(mw, j0);
  const float d1 = d * (float)kr_byte(scw, j1), n1 = dmin * (float)kr_byte(mw, j1);
#if defined(CFG_FMT_Q4_K)
  const uint8_t *qs = blk + 16;
#else
  const uint8_t *qh = blk + 16;
  const uint8_t *qs = blk + 48;
#endif
  const int a = qs[32 * c + lane], b = qs[32 * c + 16 + lane];
  int qa0 = a & 0xF, qb0 = b & 0xF, qa1 = a >> 4, qb1 = b >> 4;
#if defined(CFG_FMT_Q5_K)
  const int h0 = qh[lane], h1 = qh[lane + 16];
  qa0 |= ((h0 >> (2 * c)) & 1) << 4;
  qb0 |= ((h1 >> (2 * c)) & 1) << 4;
  qa1 |= ((h0 >> (2 * c + 1)) & 1) << 4;
  qb1 |= ((h1 >> (2 * c + 1)) & 1) << 4;
#endif
  w4[0] = d0 * (float)qa0 - n0;  // element 64c + lane
  w4[1] = d0 * (float)qb0 - n0;  // 64c + 16 + lane
  w4[2] = d1 * (float)qa1 - n1;  // 64c + 32 + lane
  w4[3] = d1 * (float)qb1 - n1;  // 64c + 48 + lane
}

#elif defined(CFG_FMT_Q6_K)
// ql[128] low 4 bits, qh[64] high 2 bits, scales[16] int8 (one per 16), d f16 at 208.
// w = d * sc[i / 16] * (q - 32). Chunk c = (half n = c / 2, hh = c % 2): elements
// 128n + 16hh + lane + {0, 32, 64, 96}.
#define KR_BB 210
#define KR_K(c, m) (8 * ((c) >> 1) + ((c) & 1) + 2 * (m))
struct KrTable {};
static inline void kr_chunk(const uint8_t *blk, int lane, const KrTable &, int c, float *w4) {
  const float d = kr_h2f(blk + 208);
  const int n = c >> 1, hh = c & 1;
  const uint8_t *ql = blk + 64 * n, *qh = blk + 128 + 32 * n;
  const int8_t *sc = (const int8_t *)(blk + 192) + 8 * n + hh;
  const int l = lane + 16 * hh;
  const int a = ql[l], b = ql[l + 32], h = qh[l];
  const int q0 = ((a & 0xF) | ((h & 3) << 4)) - 32;
  const int q1 = ((b & 0xF) | (((h >> 2) & 3) << 4)) - 32;
  const int q2 = ((a >> 4) | (((h >> 4) & 3) << 4)) - 32;
  const int q3 = ((b >> 4) | (((h >> 6) & 3) << 4)) - 32;
  w4[0] = d * (float)sc[0] * (float)q0;
  w4[1] = d * (float)sc[2] * (float)q1;
  w4[2] = d * (float)sc[4] * (float)q2;
  w4[3] = d * (float)sc[6] * (float)q3;
}

#elif defined(CFG_FMT_IQ4_XS)
// d f16, scales_h u16, scales_l[4], qs[128]; 8 sub-blocks of 32 with 6-bit scale ls:
// w = d * (ls - 32) * kvalues[q], ggml's 16-entry non-linear codebook. Chunk c: sub-blocks
// 2c, 2c+1.
#define KR_BB 136
#define KR_TABLE 1
#define KR_K(c, m) (4 * (c) + (m))
// One entry per quant byte: codebook value of the low nibble in bits 0-7, high nibble in 8-15.
struct KrTable {
  const uint16_t *pair;  // (256,) in local memory
};
static inline int kr_iq4nl(int i) {
  const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return kv[i];
}
static inline void kr_chunk(const uint8_t *blk, int lane, const KrTable &tab, int c, float *w4) {
  const float d = kr_h2f(blk);
  const uint32_t sh = *(const uint16_t *)(blk + 2);
  const uint32_t sl = kr_u32(blk + 4);
  const uint8_t *qs = blk + 8;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int ib = 2 * c + h;
    const int ls = (int)((sl >> (4 * ib)) & 0xFu) | (int)(((sh >> (2 * ib)) & 3u) << 4);
    const float dl = d * (float)(ls - 32);
    const uint32_t p = tab.pair[qs[16 * ib + lane]];
    w4[2 * h + 0] = dl * (float)(int8_t)(uint8_t)(p & 0xFFu);  // element 32ib + lane
    w4[2 * h + 1] = dl * (float)(int8_t)(uint8_t)(p >> 8);     // 32ib + 16 + lane
  }
}
#endif

// Sum over the 16 lanes, the same xor tree for every value (all lanes get the result).
static inline float kr_sg_sum(sycl::sub_group sg, float v) {
  v += sycl::permute_group_by_xor(sg, v, 8);
  v += sycl::permute_group_by_xor(sg, v, 4);
  v += sycl::permute_group_by_xor(sg, v, 2);
  v += sycl::permute_group_by_xor(sg, v, 1);
  return v;
}

// Tiles per work-group: its partials (CFG_TPW * CFG_R rows x 8 columns x CFG_NSG sub-groups)
// stay in local memory until the one barrier at the end; the host picks CFG_TPW so that is
// 32 KiB at most.
#ifndef CFG_TPW
#define CFG_TPW 16
#endif

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<CFG_SG>))
// always_inline: the body is large (fully unrolled); called out of line from the runtime's kernel
// wrapper, the CPU vectorizer treats every argument as per-lane and every load becomes a gather.
__attribute__((always_inline)) void mmvq_kreg(const uint8_t *w,  // (n_out, n_in) GGUF blocks
                                              const float *x,    // (T, n_in)
                                              float *y,          // (T, n_out)
                                              int n_in, int n_out, int T) {
  // partial sums: (CFG_TPW * CFG_R rows, CFG_TMAX columns, CFG_NSG sub-groups)
  static syclexp::work_group_static<float[CFG_TPW * CFG_R * CFG_TMAX * CFG_NSG]> part;
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_linear_id();
  const int sgi = (int)sg.get_group_id()[0];
  const int nb = n_in / KR_QK;
  const int b0 = sgi * CFG_XB;  // the host sets CFG_XB = ceil(nb / CFG_NSG)
  // this sub-group's blocks. Plain ternaries, never sycl::min/max, in every index and guard:
  // the CPU vectorizer takes those as per-lane values, and loads they guard or address become
  // gathers (measured: KREG 20x slower than the default kernel)
  const int nbs = nb - b0 < CFG_XB ? (nb - b0 > 0 ? nb - b0 : 0) : CFG_XB;
  const size_t row_bytes = (size_t)nb * KR_BB;
  const int n_tiles = (n_out + CFG_R - 1) / CFG_R;
  const int tile0 = (int)it.get_group(0) * CFG_TPW;
  const int tiles = n_tiles - tile0 < CFG_TPW ? n_tiles - tile0 : CFG_TPW;

  KrTable tab;
#if defined(KR_TABLE)
  static syclexp::work_group_static<uint16_t[256]> pair;
  for (int i = (int)it.get_local_linear_id(); i < 256; i += CFG_NSG * CFG_SG)
    pair[i] = (uint16_t)((uint8_t)kr_iq4nl(i & 0xF) | ((uint16_t)(uint8_t)kr_iq4nl(i >> 4) << 8));
  sycl::group_barrier(it.get_group());
  tab.pair = pair;
#endif

  // This lane's slice of every column's activations, loaded once. Every index into xr is a
  // compile-time constant (loops fully unrolled, guards instead of bounds): the array lives in
  // (vector) registers and spill slots, never in per-lane memory addressed by gathers. No
  // barrier may sit inside the tile loop: the CPU compiler would save and restore all of xr
  // for every work-item at each one (measured 8x slower than the default kernel).
  float xr[CFG_TMAX][CFG_XB * KR_EPL];
#pragma unroll
  for (int t = 0; t < CFG_TMAX; ++t) {
    if (t < T) {
#pragma unroll
      for (int j = 0; j < CFG_XB; ++j) {
        if (j < nbs) {
          const size_t base = (size_t)t * n_in + (size_t)(b0 + j) * KR_QK;
#pragma unroll
          for (int k = 0; k < KR_EPL; ++k) xr[t][j * KR_EPL + k] = x[base + 16 * k + lane];
        }
      }
    }
  }

  for (int tl = 0; tl < tiles; ++tl) {
    const int r0 = (tile0 + tl) * CFG_R;
    float acc[CFG_R][CFG_TMAX];
#pragma unroll
    for (int r = 0; r < CFG_R; ++r)
#pragma unroll
      for (int t = 0; t < CFG_TMAX; ++t) acc[r][t] = 0.0f;

#pragma unroll
    for (int j = 0; j < CFG_XB; ++j) {
      if (j < nbs) {  // uniform; only the last sub-group can own fewer blocks
        const uint8_t *blk0 = w + (size_t)(b0 + j) * KR_BB;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float wv[CFG_R][4];
#pragma unroll
          for (int r = 0; r < CFG_R; ++r) {
            // rows past n_out decode the last row again (results dropped): keeps it uniform
            const int row = r0 + r < n_out ? r0 + r : n_out - 1;
            kr_chunk(blk0 + (size_t)row * row_bytes, lane, tab, c, wv[r]);
          }
          // the column guard outside the element loop: one uniform branch per 4 * CFG_R fmas
#pragma unroll
          for (int t = 0; t < CFG_TMAX; ++t) {
            if (t < T) {
#pragma unroll
              for (int m = 0; m < 4; ++m) {
                const float xv = xr[t][j * KR_EPL + KR_K(c, m)];
#pragma unroll
                for (int r = 0; r < CFG_R; ++r) acc[r][t] = sycl::fma(wv[r][m], xv, acc[r][t]);
              }
            }
          }
        }
      }
    }

    // 16-lane xor tree per (row, column); the sub-group's partial goes to local memory
#pragma unroll
    for (int r = 0; r < CFG_R; ++r)
#pragma unroll
      for (int t = 0; t < CFG_TMAX; ++t)
        if (t < T) {
          const float s = kr_sg_sum(sg, acc[r][t]);
          if (lane == 0) part[((tl * CFG_R + r) * CFG_TMAX + t) * CFG_NSG + sgi] = s;
        }
  }

  sycl::group_barrier(it.get_group());
  // sub-group partials of every (row, column) of the work-group, summed in index order
  const int r_base = tile0 * CFG_R;
  for (int i = (int)it.get_local_linear_id(); i < tiles * CFG_R * CFG_TMAX; i += CFG_NSG * CFG_SG) {
    const int r = i / CFG_TMAX, t = i % CFG_TMAX;
    if (t < T && r_base + r < n_out) {
      float s = part[i * CFG_NSG];
      for (int g = 1; g < CFG_NSG; ++g) s += part[i * CFG_NSG + g];
      y[(size_t)t * n_out + r_base + r] = s;
    }
  }
}
