// The staged activation of the decode products (mmvq_tiled.cpp built with -DCFG_XS_PRE): what
// every work-group of a product used to compute from x for each block of 32, before its first
// weight, computed once by the kernel that wrote x (the 8-bit rounding kernels: actq, norm_q8,
// glu_q8, attn's combine). Every work-group of a product reads the same x, so this was repeated
// n_out / 16 times per block; it cost a quarter of the 4-bit loop (docs/performance.md, session 8).
//
// For an activation of n elements (rows of the product's n_in, flat) in blocks of 32, st holds
// n + n / 32 + 9 n / 32 floats:
//   st[i]       = x[i] * xs_scale(i % 32)   x times 2^-(the bit offset at which the 4-bit formats
//                                           leave that element's q in its word): exact
//   st[n + b]   = the sum of block b, as reduce_over_group(sg, x[32b + lane] + x[32b + 16 + lane])
//   st[n + n/32 + 9b ..] = block b's integer record for the integer-dot products (mmvq_vnni.cpp):
//                 36 bytes, q[32] int8 then d f32, with x[32b + e] = q[e] * d exactly (the
//                 rounding's own q and f16 scale, actq.hpp); written only when the kernel is
//                 given the records' address (XSt::rec: the engine passes it with
//                 STRATA_VNNI=1 only, so the default path does not pay for them)
// Same operations on the same values as the product's own staging: the same bits.
//
// Blocks of 256 (the K-quants' Q8_K rounding) stage only integer records, for the integer-dot
// products: record b at st + 73 b floats, 292 bytes: q[256] int8 (element e of the block), d f32
// (y = q * d rounded to f32), then bsum[16] int16, the sums of q over elements 16g .. 16g + 15.
#include <sycl/sycl.hpp>

// The factor that undoes mmvq_tiled's 4-bit bit offset for element e of a block (an exact power
// of two): element 4j+b sits at bit 8b of its word, element 16+4j+b at bit 8b+4.
static inline float xs_scale(int e) {
  const int sh = 8 * (e & 3) + (e >= 16 ? 4 : 0);
  return sycl::bit_cast<float>((uint32_t)(127 - sh) << 23);
}

// A rounding kernel's stage arguments: st (the stage, or nullptr: nothing staged) and, for
// blocks of 32, rec (the stage's records, st + n + n / 32, or nullptr: no integer records).
struct XSt {
  float *st;
  float *rec;
};

// Stages block b = elements (32b + lane, 32b + 16 + lane) = (y0, y1) of an n-element activation
// into x.st (nullptr: nothing), its integer record into x.rec (nullptr: none); dh = the block's
// scale (q8_32_round's return: y = q * dh). Sub-group uniform: every lane calls it with the same
// x, n, b.
static inline void xstage_block(sycl::sub_group sg, int lane, XSt x, size_t n, size_t b,
                                float y0, float y1, float dh) {
  float *st = x.st;
  if (st == nullptr) return;
  const float s = sycl::reduce_over_group(sg, y0 + y1, sycl::plus<float>());
  st[b * 32 + lane] = y0 * xs_scale(lane);
  st[b * 32 + 16 + lane] = y1 * xs_scale(16 + lane);
  if (lane == 0) st[n + b] = s;
  if (x.rec == nullptr) return;
  float *rec = x.rec + 9 * b;
  // y = q * dh exactly, so the quotient is q exactly (dh = 0: the block is all 0)
  int8_t *q = (int8_t *)rec;
  q[lane] = (int8_t)(dh != 0.0f ? sycl::rint(y0 / dh) : 0.0f);
  q[16 + lane] = (int8_t)(dh != 0.0f ? sycl::rint(y1 / dh) : 0.0f);
  if (lane == 0) rec[8] = dh;
}

// The XSt of a blocks-of-32 kernel's two address arguments.
#define XST_ARGS(a_st, a_rec) (XSt{STRATA_ADDR(float, a_st), STRATA_ADDR(float, a_rec)})
// The XSt of a blocks-of-256 kernel's one (records only).
#define XST_ARG256(a_st) (XSt{STRATA_ADDR(float, a_st), nullptr})

// Stages block b of 256 = v[k] = element k * 16 + lane (after q8_256_round, which returned d)
// into x.st (nullptr: nothing): its integer record, the whole of a stage of 256. Sub-group uniform.
static inline void xstage_block256(sycl::sub_group sg, int lane, XSt x, size_t b,
                                   const float v[16], float d) {
  float *st = x.st;
  if (st == nullptr) return;
  uint8_t *rec = (uint8_t *)(st + 73 * b);
  int16_t *bsum = (int16_t *)(rec + 260);
  for (int k = 0; k < 16; k++) {
    // y = q * d rounded: the quotient is within 2^-23 |q| of q, so rint gives q back
    const int q = d != 0.0f ? (int)sycl::rint(v[k] / d) : 0;
    ((int8_t *)rec)[k * 16 + lane] = (int8_t)q;
    const int s = sycl::reduce_over_group(sg, q, sycl::plus<int>());
    if (lane == 0) bsum[k] = (int16_t)s;
  }
  if (lane == 0) *(float *)(rec + 256) = d;
}
