// Weight formats for the matrix-product kernels (mmvq.cpp, matmul.cpp): one "trait" per ggml
// type, selected by exactly one -DCFG_FMT_<NAME>. The Rust side prepends this text to the kernel
// file (engine/kernels/mod.rs), so both families decode weights with the very same code.
//
// Every format exposes, for a 16-lane sub-group working on one block of one weight row:
//   QK           elements per block
//   BLOCK_BYTES  bytes per block (GGUF layout, unchanged)
//   EPL          elements per lane per block (= QK / 16)
//   decode(blk, lane, w)  w[k] = dequantized weight of element (lane + 16 * k) of the block
// Lane l always owns elements l, l+16, l+32, ...: the activation loads x[base + 16k + lane] are
// then "uniform + lane" and vectorise on the CPU device (sycl-toolchain.md).
#include <sycl/sycl.hpp>
#include <cstdint>

#define CFG_SG 16

static inline float kq_h2f(const uint8_t *p) {
  // halves sit at even offsets of 2-byte-aligned blocks in every format below
  return (float)sycl::bit_cast<sycl::half>(*(const uint16_t *)p);
}
static inline uint32_t kq_u32(const uint8_t *p) {
  // Q5_0/Q5_1 qh is only 2-byte aligned
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

#if !defined(CFG_FMT_F32) && !defined(CFG_FMT_F16) && !defined(CFG_FMT_BF16) && \
    !defined(CFG_FMT_Q4_0) && !defined(CFG_FMT_Q4_1) && !defined(CFG_FMT_Q5_0) && \
    !defined(CFG_FMT_Q5_1) && !defined(CFG_FMT_Q8_0) && !defined(CFG_FMT_Q4_K) && \
    !defined(CFG_FMT_Q5_K) && !defined(CFG_FMT_Q6_K) && !defined(CFG_FMT_IQ4_XS) && \
    !defined(CFG_FMT_Q2_K) && !defined(CFG_FMT_Q3_K) && !defined(CFG_FMT_IQ4_NL)
// no format given (e.g. a tool building every source with no options): the output head's
#define CFG_FMT_Q8_0
#endif

#if defined(CFG_FMT_F32)
#define QK 32
#define BLOCK_BYTES 128
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float *f = (const float *)blk;
  w[0] = f[lane];
  w[1] = f[lane + 16];
}

#elif defined(CFG_FMT_F16)
#define QK 32
#define BLOCK_BYTES 64
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const sycl::half *h = (const sycl::half *)blk;
  w[0] = (float)h[lane];
  w[1] = (float)h[lane + 16];
}

#elif defined(CFG_FMT_BF16)
// uint16_t, never sycl bfloat16 (crashes build() with the persistent cache)
#define QK 32
#define BLOCK_BYTES 64
static inline float kq_bf2f(uint16_t u) { return sycl::bit_cast<float>((uint32_t)u << 16); }
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const uint16_t *h = (const uint16_t *)blk;
  w[0] = kq_bf2f(h[lane]);
  w[1] = kq_bf2f(h[lane + 16]);
}

#elif defined(CFG_FMT_Q4_0)
// d: f16, qs[16]: byte j = element j (low nibble) and j+16 (high); w = d * (q - 8)
#define QK 32
#define BLOCK_BYTES 18
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const int q = blk[2 + lane];
  w[0] = d * (float)((q & 0xF) - 8);
  w[1] = d * (float)((q >> 4) - 8);
}

#elif defined(CFG_FMT_Q4_1)
// d, m: f16, qs[16]; w = d * q + m
#define QK 32
#define BLOCK_BYTES 20
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk), m = kq_h2f(blk + 2);
  const int q = blk[4 + lane];
  w[0] = d * (float)(q & 0xF) + m;
  w[1] = d * (float)(q >> 4) + m;
}

#elif defined(CFG_FMT_Q5_0)
// d: f16, qh: u32 (bit j = 5th bit of element j), qs[16]; w = d * (q - 16)
#define QK 32
#define BLOCK_BYTES 22
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const uint32_t qh = kq_u32(blk + 2);
  const int q = blk[6 + lane];
  const int h0 = (int)((qh >> lane) & 1u) << 4, h1 = (int)((qh >> (lane + 16)) & 1u) << 4;
  w[0] = d * (float)(((q & 0xF) | h0) - 16);
  w[1] = d * (float)(((q >> 4) | h1) - 16);
}

#elif defined(CFG_FMT_Q5_1)
// d, m: f16, qh: u32, qs[16]; w = d * q + m
#define QK 32
#define BLOCK_BYTES 24
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk), m = kq_h2f(blk + 2);
  const uint32_t qh = kq_u32(blk + 4);
  const int q = blk[8 + lane];
  const int h0 = (int)((qh >> lane) & 1u) << 4, h1 = (int)((qh >> (lane + 16)) & 1u) << 4;
  w[0] = d * (float)((q & 0xF) | h0) + m;
  w[1] = d * (float)((q >> 4) | h1) + m;
}

#elif defined(CFG_FMT_Q8_0)
// d: f16, qs[32] int8; w = d * q
#define QK 32
#define BLOCK_BYTES 34
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const int8_t *q = (const int8_t *)(blk + 2);
  w[0] = d * (float)q[lane];
  w[1] = d * (float)q[lane + 16];
}

#elif defined(CFG_FMT_Q4_K) || defined(CFG_FMT_Q5_K)
// Super-block of 256 = 8 sub-blocks of 32 with 6-bit scale/min packed in 12 bytes.
// Q4_K: d, dmin f16, scales[12], qs[128].  Q5_K: + qh[32] before qs.
// w = d * sc[j] * q - dmin * m[j]
#define QK 256
#if defined(CFG_FMT_Q4_K)
#define BLOCK_BYTES 144
#else
#define BLOCK_BYTES 176
#endif
static inline void kq_scale_min(int j, const uint8_t *s, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk), dmin = kq_h2f(blk + 2);
  const uint8_t *sc = blk + 4;
#if defined(CFG_FMT_Q4_K)
  const uint8_t *qs = blk + 16;
#else
  const uint8_t *qh = blk + 16;
  const uint8_t *qs = blk + 48;
  const int h0 = qh[lane], h1 = qh[lane + 16];
#endif
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // 64-element chunk j: sub-blocks 2j (low nibbles), 2j+1 (high)
    int s0, m0, s1, m1;
    kq_scale_min(2 * j, sc, &s0, &m0);
    kq_scale_min(2 * j + 1, sc, &s1, &m1);
    const float d0 = d * (float)s0, n0 = dmin * (float)m0;
    const float d1 = d * (float)s1, n1 = dmin * (float)m1;
    const int a = qs[32 * j + lane], b = qs[32 * j + 16 + lane];
    int qa0 = a & 0xF, qb0 = b & 0xF, qa1 = a >> 4, qb1 = b >> 4;
#if defined(CFG_FMT_Q5_K)
    qa0 |= ((h0 >> (2 * j)) & 1) << 4;
    qb0 |= ((h1 >> (2 * j)) & 1) << 4;
    qa1 |= ((h0 >> (2 * j + 1)) & 1) << 4;
    qb1 |= ((h1 >> (2 * j + 1)) & 1) << 4;
#endif
    w[4 * j + 0] = d0 * (float)qa0 - n0;  // element 64j + lane
    w[4 * j + 1] = d0 * (float)qb0 - n0;  // 64j + 16 + lane
    w[4 * j + 2] = d1 * (float)qa1 - n1;  // 64j + 32 + lane
    w[4 * j + 3] = d1 * (float)qb1 - n1;  // 64j + 48 + lane
  }
}

#elif defined(CFG_FMT_Q6_K)
// ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] int8 (one per 16), d f16 at 208.
// w = d * sc[i/16] * (q - 32)
#define QK 256
#define BLOCK_BYTES 210
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk + 208);
  const int8_t *scs = (const int8_t *)(blk + 192);
#pragma unroll
  for (int n = 0; n < 2; ++n) {  // 128-element halves
    const uint8_t *ql = blk + 64 * n, *qh = blk + 128 + 32 * n;
    const int8_t *sc = scs + 8 * n;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {  // l = lane + 16 hh, scale index is = hh
      const int l = lane + 16 * hh;
      const int a = ql[l], b = ql[l + 32], h = qh[l];
      const int q1 = ((a & 0xF) | ((h & 3) << 4)) - 32;
      const int q2 = ((b & 0xF) | (((h >> 2) & 3) << 4)) - 32;
      const int q3 = ((a >> 4) | (((h >> 4) & 3) << 4)) - 32;
      const int q4 = ((b >> 4) | (((h >> 6) & 3) << 4)) - 32;
      // elements 128n + l + {0, 32, 64, 96} = lane + 16 * (8n + hh + {0, 2, 4, 6})
      w[8 * n + hh + 0] = d * (float)sc[hh + 0] * (float)q1;
      w[8 * n + hh + 2] = d * (float)sc[hh + 2] * (float)q2;
      w[8 * n + hh + 4] = d * (float)sc[hh + 4] * (float)q3;
      w[8 * n + hh + 6] = d * (float)sc[hh + 6] * (float)q4;
    }
  }
}

#elif defined(CFG_FMT_Q2_K)
// scales[16] (4-bit scale low, 4-bit min high, one per 16), qs[64] (2-bit), d, dmin f16 at 80.
// Element e = 128h + 32j + l: q = (qs[32h + l] >> 2j) & 3, sub-block e / 16;
// w = d * sc * q - dmin * m
#define QK 256
#define BLOCK_BYTES 84
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk + 80), dmin = kq_h2f(blk + 82);
  const uint8_t *qs = blk + 16;
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // element lane + 16k: half k/8, shift 2((k%8)/2), sub-block k
    const int sc = blk[k];
    const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
    const int q = (qs[32 * (k / 8) + 16 * (k % 2) + lane] >> (2 * ((k % 8) / 2))) & 3;
    w[k] = dl * (float)q - ml;
  }
}

#elif defined(CFG_FMT_Q3_K)
// hmask[32] (high bit), qs[64] (low 2 bits), scales[12] (sixteen 6-bit), d f16 at 108.
// Element e = 128h + 32j + l: q = ((qs[32h + l] >> 2j) & 3) - (hmask[l] bit 4h+j ? 0 : 4),
// sub-block e / 16 with ls: low 4 bits from scales[s] (s < 8, low nibble) or scales[s - 8]
// (high nibble), top 2 bits from scales[8 + s%4] >> 2(s/4); w = d * (ls - 32) * q
#define QK 256
#define BLOCK_BYTES 110
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk + 108);
  const uint8_t *hm = blk, *qs = blk + 32, *sc = blk + 96;
#pragma unroll
  for (int k = 0; k < 16; ++k) {  // element lane + 16k: half k/8, j = (k%8)/2, sub-block k
    const int h = k / 8, j = (k % 8) / 2, l = 16 * (k % 2) + lane;
    const int lo = k < 8 ? (sc[k] & 0xF) : (sc[k - 8] >> 4);
    const int ls = lo | (((sc[8 + k % 4] >> (2 * (k / 4))) & 3) << 4);
    const float dl = d * (float)(ls - 32);
    const int q = ((qs[32 * h + l] >> (2 * j)) & 3) - (((hm[l] >> (4 * h + j)) & 1) ? 0 : 4);
    w[k] = dl * (float)q;
  }
}

#elif defined(CFG_FMT_IQ4_XS) || defined(CFG_FMT_IQ4_NL)
// IQ4_XS: d f16, scales_h u16, scales_l[4], qs[128]; 8 sub-blocks of 32, 6-bit scale ls,
// w = d * (ls - 32) * kvalues[q] with ggml's non-linear 16-entry codebook.
// IQ4_NL: d f16, qs[16] (byte j = element j low nibble, j + 16 high); w = d * kvalues[q].
#if defined(CFG_FMT_IQ4_XS)
#define QK 256
#define BLOCK_BYTES 136
#else
#define QK 32
#define BLOCK_BYTES 18
#endif
static inline int kq_iq4nl(int i) {
  // codebook as four 32-bit words: two selects and a per-lane variable shift, not a table
  // gather (and 32-bit, not 64-bit, lanes: one vector register per op)
  const uint32_t w0 = 0xBFAD9881u;  // -127 -104 -83 -65
  const uint32_t w1 = 0xF6EADDCFu;  //  -49  -35 -22 -10
  const uint32_t w2 = 0x26190D01u;  //    1   13  25  38
  const uint32_t w3 = 0x71594535u;  //   53   69  89 113
  const uint32_t word = (i & 8) ? ((i & 4) ? w3 : w2) : ((i & 4) ? w1 : w0);
  return (int)(int8_t)(uint8_t)(word >> (8 * (i & 3)));
}
#if defined(CFG_FMT_IQ4_NL)
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const int q = blk[2 + lane];
  w[0] = d * (float)kq_iq4nl(q & 0xF);  // element lane
  w[1] = d * (float)kq_iq4nl(q >> 4);   // lane + 16
}
#else
static inline void decode(const uint8_t *blk, int lane, float *w) {
  const float d = kq_h2f(blk);
  const uint32_t sh = *(const uint16_t *)(blk + 2);
  const uint8_t *sl = blk + 4, *qs = blk + 8;
#pragma unroll
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    const float dl = d * (float)(ls - 32);
    const int q = qs[16 * ib + lane];
    w[2 * ib + 0] = dl * (float)kq_iq4nl(q & 0xF);  // element 32ib + lane
    w[2 * ib + 1] = dl * (float)kq_iq4nl(q >> 4);   // 32ib + 16 + lane
  }
}
#endif

#else
#error "matrix kernels: define exactly one CFG_FMT_<type>"
#endif

#define EPL (QK / CFG_SG)
