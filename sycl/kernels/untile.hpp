// untile: where each byte of a row's GGUF block sits in the one-lane-per-row copies the decode
// kernels read (engine/kernels/tiled.rs for the blocks of 32, ktiled.rs for the K-quants), and
// decode_tiled, qformats.hpp's decode() read from there, lane = row: with it matmul.cpp
// (-DCFG_TILED) takes the tiled copy alone, and the GGUF bytes need not stay on the device. The
// weights are the same integers through the same float expressions: the same bits.
// Needs qformats.hpp before it (QK, BLOCK_BYTES, one CFG_FMT_<type>).
//
// A tile is 16 rows: for each block its header pieces (Q6_K's d only), then for each block its
// record; within a section, piece p of the 16 rows is 16 consecutive pieces (lane l at l * unit).
#if defined(CFG_TILED)

#define UT_TILE 16
#if defined(CFG_FMT_Q6_K)
#define UT_HDR (UT_TILE * 2)    // d: one f16 per row and block
#define UT_REC (UT_TILE * 208)  // the rest, as 52 words
#elif defined(CFG_FMT_Q4_0) || defined(CFG_FMT_Q4_1) || defined(CFG_FMT_Q5_0) || \
    defined(CFG_FMT_Q5_1) || defined(CFG_FMT_Q8_0) || defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K)
#define UT_HDR 0
#define UT_REC (UT_TILE * BLOCK_BYTES)
#else
#error "untile.hpp: this format has no tiled copy (tiled.rs, ktiled.rs)"
#endif

// The blocks of 32 (tiled.rs): GGUF d | m (Q4_1, Q5_1) | qh (Q5_0, Q5_1) | qs, tiled as
// d[16] f16 | m[16] f16 | qh[16] u32 | qs: words [4][16] (4-bit) or byte planes [32][16] (Q8_0).
#if defined(CFG_FMT_Q4_1) || defined(CFG_FMT_Q5_1)
#define UT_HAS_M 1
#else
#define UT_HAS_M 0
#endif
#if defined(CFG_FMT_Q5_0) || defined(CFG_FMT_Q5_1)
#define UT_HAS_QH 1
#else
#define UT_HAS_QH 0
#endif
#define UT_QS (2 + 2 * UT_HAS_M + 4 * UT_HAS_QH)                    // GGUF offset of qs
#define UT_QH_AT (UT_TILE * (2 + 2 * UT_HAS_M))                     // tiled offset of qh[16]
#define UT_QS_AT (UT_TILE * (2 + 2 * UT_HAS_M + 4 * UT_HAS_QH))     // tiled offset of qs

// The byte offset, from the tile's start (nb blocks a row), of byte i of block kb of the tile's
// row 0. Row l's copy of that byte is one piece further per row (the ut_* loads below index it).
static inline size_t untile_at(int i, int nb, int kb) {
  const size_t rec = (size_t)nb * UT_HDR + (size_t)kb * UT_REC;
#if defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K)
  // every piece a word, in GGUF order: dm | scales | (qh) | qs
  return rec + 64 * (i / 4) + (i % 4);
#elif defined(CFG_FMT_Q6_K)
  // GGUF: ql[128] | qh[64] | scales[16] | d; record: scales words 0..3, then for c < 4
  // (n = c / 2, h = c % 2), j < 4: ql word 16n+4h+j, ql word 16n+8+4h+j, qh word 8n+4h+j
  if (i >= 208) return (size_t)kb * UT_HDR + (i - 208);
  const int w = i / 4;
  int p;
  if (w >= 48) {
    p = w - 48;
  } else if (w < 32) {
    const int n = w / 16, r = w % 16, s = r / 8, h = (r % 8) / 4, j = r % 4;
    p = 4 + (2 * n + h) * 12 + 3 * j + s;
  } else {
    const int v = w - 32, n = v / 8, h = (v % 8) / 4, j = v % 4;
    p = 4 + (2 * n + h) * 12 + 3 * j + 2;
  }
  return rec + 64 * p + (i % 4);
#elif defined(CFG_FMT_Q8_0)
  return rec + (i < 2 ? i : UT_QS_AT + UT_TILE * (i - 2));
#else
  if (i < 2) return rec + i;
#if UT_HAS_M
  if (i < 4) return rec + UT_TILE * 2 + (i - 2);
#endif
#if UT_HAS_QH
  if (i < UT_QS) return rec + UT_QH_AT + (i - (UT_QS - 4));
#endif
  const int j = (i - UT_QS) / 4, k = (i - UT_QS) % 4;
  return rec + UT_QS_AT + j * UT_TILE * 4 + k;
#endif
}

static inline float ut_h2f(uint32_t bits) {
  return (float)sycl::bit_cast<sycl::half>((uint16_t)bits);
}
// Row l's word / half / byte whose row-0 copy is byte i: written `uniform_ptr[lane]`, the shape
// the CPU device's vectorizer turns into one vector load (sycl-toolchain.md).
static inline uint32_t ut_word(const uint8_t *tile, int i, int l, int nb, int kb) {
  return ((const uint32_t *)(tile + untile_at(i, nb, kb)))[l];
}
static inline float ut_half(const uint8_t *tile, int i, int l, int nb, int kb) {
  return ut_h2f(((const uint16_t *)(tile + untile_at(i, nb, kb)))[l]);
}
static inline int ut_i8(const uint8_t *tile, int i, int l, int nb, int kb) {
  return (int)((const int8_t *)(tile + untile_at(i, nb, kb)))[l];
}

#if defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K)
// qformats.hpp's kq_scale_min(j) on the 12 scale bytes held as the words s0, s1, s2.
static inline int ut_sbyte(int k, uint32_t s0, uint32_t s1, uint32_t s2) {
  return (int)(((k < 4 ? s0 : (k < 8 ? s1 : s2)) >> (8 * (k % 4))) & 0xFF);
}
// (returned as sc | m << 8: values, no private memory)
static inline int ut_scale_min(int j, uint32_t s0, uint32_t s1, uint32_t s2) {
  if (j < 4) return (ut_sbyte(j, s0, s1, s2) & 63) | ((ut_sbyte(j + 4, s0, s1, s2) & 63) << 8);
  return ((ut_sbyte(j + 4, s0, s1, s2) & 0xF) | ((ut_sbyte(j - 4, s0, s1, s2) >> 6) << 4)) |
         (((ut_sbyte(j + 4, s0, s1, s2) >> 4) | ((ut_sbyte(j, s0, s1, s2) >> 6) << 4)) << 8);
}
#endif

// decode_tiled(tile, l, nb, kb, put): put(e, w) for every element e < QK of block kb of lane l's
// row, w its weight computed from the same integers by the same float expression as decode() in
// qformats.hpp (so the same bits: tests/kernels_matmul.rs checks every format). Lane l = row l
// of the tile: every load is "uniform + lane", one vector load for the 16 rows.
template <class Put>
static inline void decode_tiled(const uint8_t *tile, int l, int nb, int kb, Put put) {
#if defined(CFG_FMT_Q8_0)
  const float d = ut_half(tile, 0, l, nb, kb);
#pragma unroll
  for (int e = 0; e < 32; ++e) put(e, d * (float)ut_i8(tile, 2 + e, l, nb, kb));
#elif defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K)
  const uint32_t dm = ut_word(tile, 0, l, nb, kb);
  const float d = ut_h2f(dm), dmin = ut_h2f(dm >> 16);
  const uint32_t s0 = ut_word(tile, 4, l, nb, kb), s1 = ut_word(tile, 8, l, nb, kb),
                 s2 = ut_word(tile, 12, l, nb, kb);
#if defined(CFG_FMT_Q4_K)
#define UT_KQS 16
#else
#define UT_KQS 48
#endif
  for (int j = 0; j < 4; ++j) {  // sub-blocks 2j (low nibbles), 2j + 1 (high) of qs[32j ..]
    const int p0 = ut_scale_min(2 * j, s0, s1, s2), p1 = ut_scale_min(2 * j + 1, s0, s1, s2);
    const float d0 = d * (float)(p0 & 0xFF), n0 = dmin * (float)(p0 >> 8);
    const float d1 = d * (float)(p1 & 0xFF), n1 = dmin * (float)(p1 >> 8);
#pragma unroll
    for (int i = 0; i < 32; i += 4) {
      const uint32_t qw = ut_word(tile, UT_KQS + 32 * j + i, l, nb, kb);
#if defined(CFG_FMT_Q5_K)
      const uint32_t hw = ut_word(tile, 16 + i, l, nb, kb);
#endif
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int a = (int)((qw >> (8 * b)) & 0xFF);
        int qa0 = a & 0xF, qa1 = a >> 4;
#if defined(CFG_FMT_Q5_K)
        const int h = (int)((hw >> (8 * b)) & 0xFF);
        qa0 |= ((h >> (2 * j)) & 1) << 4;
        qa1 |= ((h >> (2 * j + 1)) & 1) << 4;
#endif
        put(64 * j + i + b, d0 * (float)qa0 - n0);
        put(64 * j + 32 + i + b, d1 * (float)qa1 - n1);
      }
    }
  }
#elif defined(CFG_FMT_Q6_K)
  const float d = ut_half(tile, 208, l, nb, kb);
#pragma unroll
  for (int n = 0; n < 2; ++n) {  // 128-element halves: scales 8n .. 8n+7 (int8)
    const uint32_t sa = ut_word(tile, 192 + 8 * n, l, nb, kb);
    const uint32_t sb = ut_word(tile, 196 + 8 * n, l, nb, kb);
#define UT_S6(k) ((float)(int8_t)((((k) < 4 ? sa : sb) >> (8 * ((k) % 4))) & 0xFF))
#pragma unroll
    for (int i = 0; i < 32; i += 4) {  // ql[64n + i ..], ql[64n + 32 + i ..], qh[32n + i ..]
      const uint32_t wa = ut_word(tile, 64 * n + i, l, nb, kb);
      const uint32_t wb = ut_word(tile, 64 * n + 32 + i, l, nb, kb);
      const uint32_t wh = ut_word(tile, 128 + 32 * n + i, l, nb, kb);
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int e = i + b, hh = e / 16;  // decode()'s l = lane + 16 hh
        const int a = (int)((wa >> (8 * b)) & 0xFF), c = (int)((wb >> (8 * b)) & 0xFF),
                  h = (int)((wh >> (8 * b)) & 0xFF);
        const int q1 = ((a & 0xF) | ((h & 3) << 4)) - 32;
        const int q2 = ((c & 0xF) | (((h >> 2) & 3) << 4)) - 32;
        const int q3 = ((a >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const int q4 = ((c >> 4) | (((h >> 6) & 3) << 4)) - 32;
        put(128 * n + e, d * UT_S6(hh + 0) * (float)q1);
        put(128 * n + e + 32, d * UT_S6(hh + 2) * (float)q2);
        put(128 * n + e + 64, d * UT_S6(hh + 4) * (float)q3);
        put(128 * n + e + 96, d * UT_S6(hh + 6) * (float)q4);
      }
    }
#undef UT_S6
  }
#else
  // Q4_0, Q4_1, Q5_0, Q5_1: word j of qs = GGUF qs bytes 4j .. 4j+3; byte b: element 4j+b in
  // its low nibble, 16+4j+b in the high one; qh permuted (bit 8b+4+j: element 4j+b's fifth
  // bit, bit 8b+j: element 16+4j+b's)
  const float d = ut_half(tile, 0, l, nb, kb);
#if UT_HAS_M
  const float m = ut_half(tile, 2, l, nb, kb);
#endif
#if UT_HAS_QH
  const uint32_t qh = ut_word(tile, UT_QS - 4, l, nb, kb);
#endif
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t qw = ut_word(tile, UT_QS + 4 * j, l, nb, kb);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int q = (int)((qw >> (8 * b)) & 0xFF);
#if UT_HAS_QH
      const int h0 = (int)((qh >> (8 * b + 4 + j)) & 1u) << 4;
      const int h1 = (int)((qh >> (8 * b + j)) & 1u) << 4;
#endif
#if defined(CFG_FMT_Q4_0)
      put(4 * j + b, d * (float)((q & 0xF) - 8));
      put(16 + 4 * j + b, d * (float)((q >> 4) - 8));
#elif defined(CFG_FMT_Q4_1)
      put(4 * j + b, d * (float)(q & 0xF) + m);
      put(16 + 4 * j + b, d * (float)(q >> 4) + m);
#elif defined(CFG_FMT_Q5_0)
      put(4 * j + b, d * (float)(((q & 0xF) | h0) - 16));
      put(16 + 4 * j + b, d * (float)(((q >> 4) | h1) - 16));
#else
      put(4 * j + b, d * (float)((q & 0xF) | h0) + m);
      put(16 + 4 * j + b, d * (float)((q >> 4) | h1) + m);
#endif
    }
  }
#endif
}

#endif  // CFG_TILED
