// Weight formats that need ggml's lookup tables (the i-quants with grids: IQ2_XXS, IQ2_XS,
// IQ3_XXS, IQ3_S, and the IQ2_S / IQ1_S / IQ1_M of the same family): the same "trait" as
// qformats.hpp (QK, BLOCK_BYTES, EPL, decode(blk, lane, w): w[k] = element lane + 16k), selected
// by one -DCFG_FMT_<NAME>. engine/sycl/kernels.rs builds the `mmvq_grids` / `matmul_grids`
// sources as: the tables from engine/quant/grids.rs as `static const` C arrays (they define
// KQ_GRIDS), then this file in place of qformats.hpp, then the kernel. qformats.hpp itself is
// left byte-identical, so the default formats' kernel text and cached binaries do not change.
#include <sycl/sycl.hpp>
#include <cstdint>

#if !defined(KQ_GRIDS)
#error "qformats_iq.hpp: needs the grid tables first (engine/quant/grids.rs c_tables)"
#endif

#define CFG_SG 16

// (the same two helpers as qformats.hpp, which this file replaces for these formats)
static inline float kq_h2f(const uint8_t *p) {
  // d is the first field of every block below, at an even offset of 2-byte-aligned blocks
  return (float)sycl::bit_cast<sycl::half>(*(const uint16_t *)p);
}
static inline uint32_t kq_u32(const uint8_t *p) {
  // blocks are only 2-byte aligned (66, 74, 98, 110 bytes)
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

// Lane l owns elements e = l + 16k (k < 16): within an 8-weight group its position is l & 7
// for every k, and which of two neighbouring groups it sits in is l >> 3. The sign factor is
// multiplied in, as ggml's `(signs & kmask[j] ? -1.f : 1.f)`, so the products are ggml's bits.
static inline uint32_t kq_u32_2(const uint8_t *p) {
  // a little-endian u32 at a 2-byte-aligned address, as two u16 loads
  const uint16_t *h = (const uint16_t *)p;
  return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}
static inline float kq_sign(uint32_t signs, int j) { return ((signs >> j) & 1u) ? -1.0f : 1.0f; }

// Gathers avoided: a block's grid indices and sign words are the same for all 16 lanes (one
// row per sub-group), so the two (IQ2) or four (IQ3) table entries a step k needs are uniform
// loads, and each lane then selects its entry and byte (blends and shifts in 32-bit lanes).
// The same integers and the same float expression as before: the same bits.
// Byte j = 4 * hi + (sh / 8) of entry b (hb) or a, for the 8-byte IQ2 grids.
static inline uint32_t kq_pick8(uint64_t a, uint64_t b, bool hb, bool hi, int sh) {
  const uint32_t aw = hi ? (uint32_t)(a >> 32) : (uint32_t)a;
  const uint32_t bw = hi ? (uint32_t)(b >> 32) : (uint32_t)b;
  return ((hb ? bw : aw) >> sh) & 0xFFu;
}
// Byte sh / 8 of entry q (0..3) of four, for the 4-byte IQ3 grids.
static inline uint32_t kq_pick4(uint32_t e0, uint32_t e1, uint32_t e2, uint32_t e3, int q,
                                int sh) {
  const uint32_t lo = (q & 1) ? e1 : e0, hi = (q & 1) ? e3 : e2;
  return (((q & 2) ? hi : lo) >> sh) & 0xFFu;
}

#if defined(CFG_FMT_IQ2_XXS)
// d f16, then per sub-block s of 32: u32 of 4 grid indices (byte g = 8-group g), u32 of 4 x 7
// sign bits (ksigns index) + 4-bit scale at the top. w = (d * (0.5 + sc) * 0.25) * grid * sign.
#define QK 256
#define BLOCK_BYTES 66
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const int j = lane & 7, sh = 8 * (lane & 3);
  const bool hb = lane >= 8, hi = (lane & 4) != 0;
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const uint32_t idx = kq_u32_2(blk + 2 + 8 * s), sg = kq_u32_2(blk + 6 + 8 * s);
    const float db = d * (0.5f + (float)(sg >> 28)) * 0.25f;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {  // element 32s + 16kk + lane: 8-group 2kk + hb
      const uint64_t ga = iq2xxs_grid[(idx >> (16 * kk)) & 0xFFu];
      const uint64_t gb = iq2xxs_grid[(idx >> (16 * kk + 8)) & 0xFFu];
      const uint32_t sa = ksigns_iq2xs[(sg >> (14 * kk)) & 127u];
      const uint32_t sb = ksigns_iq2xs[(sg >> (14 * kk + 7)) & 127u];
      w[2 * s + kk] = db * (float)kq_pick8(ga, gb, hb, hi, sh) * kq_sign(hb ? sb : sa, j);
    }
  }
}

#elif defined(CFG_FMT_IQ2_XS)
// d f16, qs[32] u16 (per 8-group: 9-bit grid index | 7 sign bits << 9), scales[8] (4 bits per
// 16 weights). w = (d * (0.5 + sc) * 0.25) * grid * sign.
#define QK 256
#define BLOCK_BYTES 74
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const uint16_t *qs = (const uint16_t *)(blk + 2);
  const uint8_t *sc = blk + 66;
  const int j = lane & 7, sh = 8 * (lane & 3);
  const bool hb = lane >= 8, hi = (lane & 4) != 0;
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // element 16k + lane: 8-group 2k + hb, scale nibble of 16k
    const float db = d * (0.5f + (float)((sc[k >> 1] >> (4 * (k & 1))) & 0xF)) * 0.25f;
    const uint32_t qa = qs[2 * k], qb = qs[2 * k + 1];
    const uint64_t ga = iq2xs_grid[qa & 511u], gb = iq2xs_grid[qb & 511u];
    const uint32_t sa = ksigns_iq2xs[qa >> 9], sb = ksigns_iq2xs[qb >> 9];
    w[k] = db * (float)kq_pick8(ga, gb, hb, hi, sh) * kq_sign(hb ? sb : sa, j);
  }
}

#elif defined(CFG_FMT_IQ3_XXS)
// d f16, qs[64] (grid index per 4 weights), then per sub-block of 32 a u32 of 4 x 7 sign bits
// + 4-bit scale. w = (d * (0.5 + sc) * 0.5) * grid * sign.
#define QK 256
#define BLOCK_BYTES 98
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const uint8_t *qs = blk + 2;
  const int j = lane & 7, q = lane >> 2, sh = 8 * (lane & 3);
  const bool hb = lane >= 8;
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const uint32_t aux = kq_u32_2(blk + 66 + 4 * s);
    const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {  // element 32s + 16kk + lane: 4-group 4k + q
      const int k = 2 * s + kk;
      const uint8_t *qk = qs + 4 * k;
      const uint32_t e = kq_pick4(iq3xxs_grid[qk[0]], iq3xxs_grid[qk[1]], iq3xxs_grid[qk[2]],
                                  iq3xxs_grid[qk[3]], q, sh);
      const uint32_t sa = ksigns_iq2xs[(aux >> (14 * kk)) & 127u];
      const uint32_t sb = ksigns_iq2xs[(aux >> (14 * kk + 7)) & 127u];
      w[k] = db * (float)e * kq_sign(hb ? sb : sa, j);
    }
  }
}

#elif defined(CFG_FMT_IQ3_S)
// d f16, qs[64] (low 8 bits of a grid index per 4 weights), qh[8] (9th bits), signs[32] (one
// bit per weight), scales[4] (4 bits per 32). w = (d * (1 + 2 sc)) * grid * sign.
#define QK 256
#define BLOCK_BYTES 110
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const uint8_t *qh = blk + 66, *sc = blk + 106;
  const uint16_t *sg = (const uint16_t *)(blk + 74);  // sign bits of weights 16k..16k+15
  const int q = lane >> 2, sh = 8 * (lane & 3);
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // element 16k + lane: 4-group 4k + q, sign bit 16k + lane
    const int s = k >> 1;
    const float db = d * (float)(1 + 2 * ((sc[s >> 1] >> (4 * (s & 1))) & 0xF));
    const uint32_t q4 = kq_u32_2(blk + 2 + 4 * k);          // low index bytes of 4-groups 4k..
    const uint32_t h9 = (uint32_t)qh[s] >> (4 * (k & 1));  // their 9th bits
    const uint32_t e = kq_pick4(iq3s_grid[(q4 & 0xFFu) | ((h9 << 8) & 256u)],
                                iq3s_grid[((q4 >> 8) & 0xFFu) | ((h9 << 7) & 256u)],
                                iq3s_grid[((q4 >> 16) & 0xFFu) | ((h9 << 6) & 256u)],
                                iq3s_grid[(q4 >> 24) | ((h9 << 5) & 256u)], q, sh);
    w[k] = db * (float)e * kq_sign(sg[k], lane);
  }
}

#elif defined(CFG_FMT_IQ2_S)
// d f16, qs[32] (low 8 bits of a grid index per 8 weights), signs[32] (one bit per weight),
// qh[8] (2 high index bits per 8-group), scales[8] (4 bits per 16 weights).
// w = (d * (0.5 + sc) * 0.25) * grid * sign, grid = iq2s_grid (1024 entries of 8 bytes).
#define QK 256
#define BLOCK_BYTES 82
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const uint8_t *qs = blk + 2, *sg = blk + 34, *qh = blk + 66, *sc = blk + 74;
  const int j = lane & 7, h = lane >> 3;
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // element 16k + lane: sub-block k/2, 8-group g = 2(k&1) + h
    const int s = k >> 1, g = 2 * (k & 1) + h;
    const float db = d * (0.5f + (float)((sc[s] >> (4 * (k & 1))) & 0xF)) * 0.25f;
    const uint32_t idx = (uint32_t)qs[4 * s + g] | (((uint32_t)qh[s] >> (2 * g)) & 3u) << 8;
    const uint64_t grid = iq2s_grid[idx];
    w[k] = db * (float)(uint32_t)((grid >> (8 * j)) & 0xFFu) * kq_sign(sg[4 * s + g], j);
  }
}

#elif defined(CFG_FMT_IQ1_S)
// d f16, qs[32] (low 8 bits of a grid index per 8 weights), qh[8] u16 per sub-block of 32:
// 4 x 3 high index bits, 3-bit scale at 12, shift sign at 15.
// w = (d * (2 sc + 1)) * (grid + delta), grid = iq1s_grid (2048 entries of 8 signed bytes
// -1, 0, 1), delta = +-0.125 (ggml's IQ1S_DELTA).
#define QK 256
#define BLOCK_BYTES 50
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const uint8_t *qs = blk + 2;
  const uint16_t *qh = (const uint16_t *)(blk + 34);  // even offset of a 2-aligned block
  const int j = lane & 7, h = lane >> 3;
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // element 16k + lane: sub-block k/2, 8-group g = 2(k&1) + h
    const int s = k >> 1, g = 2 * (k & 1) + h;
    const uint32_t q = qh[s];
    const float dl = d * (float)(int)(2 * ((q >> 12) & 7u) + 1);
    const float delta = (q & 0x8000u) ? -0.125f : 0.125f;
    const uint32_t idx = (uint32_t)qs[4 * s + g] | ((q >> (3 * g)) & 7u) << 8;
    const float v = (float)(int8_t)(uint8_t)(iq1s_grid[idx] >> (8 * j));
    w[k] = dl * (v + delta);
  }
}

#elif defined(CFG_FMT_IQ1_M)
// qs[32] (low 8 bits of a grid index per 8 weights), qh[16] (a nibble per 8-group: 3 high
// index bits + shift sign), scales[8] = 4 u16: 3-bit scales per 16 weights, and the f16 d
// spread over the words' top nibbles. w = (d * (2 sc + 1)) * (grid + delta), as IQ1_S.
#define QK 256
#define BLOCK_BYTES 56
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const uint8_t *qs = blk, *qh = blk + 32;
  const uint16_t *sc = (const uint16_t *)(blk + 48);  // even offset of a 2-aligned block
  const uint16_t db = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                 ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  const float d = (float)sycl::bit_cast<sycl::half>(db);
  const int j = lane & 7, h = lane >> 3;
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // element 16k + lane: sub-block k/2, 8-group g = 2(k&1) + h
    const int s = k >> 1, g = 2 * (k & 1) + h;
    // the 16 weights of half (k&1) of sub-block s share one 3-bit scale
    const uint32_t ls = ((uint32_t)sc[s >> 1] >> (6 * (s & 1) + 3 * (k & 1))) & 7u;
    const float dl = d * (float)(int)(2 * ls + 1);
    const uint32_t n = ((uint32_t)qh[2 * s + (g >> 1)] >> (4 * (g & 1))) & 0xFu;
    const float delta = (n & 8u) ? -0.125f : 0.125f;
    const uint32_t idx = (uint32_t)qs[4 * s + g] | (n & 7u) << 8;
    const float v = (float)(int8_t)(uint8_t)(iq1s_grid[idx] >> (8 * j));
    w[k] = dl * (v + delta);
  }
}

#else
#error "qformats_iq.hpp: define exactly one CFG_FMT_<i-quant>"
#endif

#define EPL (QK / CFG_SG)
