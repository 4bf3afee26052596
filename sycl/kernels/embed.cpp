// Embedding row fetch: out[t, :] = dequant(token_embd[ids[t], :]) * scale.
// token_embd is the GGUF tensor unchanged, shape (n_vocab, n_embd), one row per token, or (Q8_0)
// the tied head's tiled copy.
// Launch: nd_range<1>{T * ceil32(n_embd), 32}; a work-group covers 32 consecutive elements of one
// output row, so the row and (for Q8_0) the block are uniform across the work-group.
// Out-of-range ids write NaN (visible, never a wild read); the launcher's caller validates ids.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

// This work-item's element e of output row t.
struct EmbedPos {
  int t, e;
};

static inline EmbedPos embed_pos(int n_embd) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int groups_per_row = (n_embd + 31) / 32;
  const int g = (int)it.get_group(0);
  // uniform base + lane: the CPU compiler turns the loads into vector loads
  const int e = (g % groups_per_row) * 32 + (int)sg.get_group_id()[0] * 16 + (int)sg.get_local_id()[0];
  return EmbedPos{g / groups_per_row, e};
}

// The body every format shares: out[t, e] = value(id, e) * scale for this work-item's element,
// NaN for an id outside [0, n_vocab) (value is never called with it).
template <class Value>
static inline void embed_row(uint64_t a_ids, uint64_t a_out, int n_embd, int n_vocab, float scale,
                             Value value) {
  const int32_t *ids = STRATA_ADDR(const int32_t, a_ids);
  float *out = STRATA_ADDR(float, a_out);
  const EmbedPos p = embed_pos(n_embd);
  if (p.e >= n_embd) return;
  const int id = ids[p.t];
  float v = std::numeric_limits<float>::quiet_NaN();
  if (id >= 0 && id < n_vocab) v = value(id, p.e) * scale;
  out[(size_t)p.t * n_embd + p.e] = v;
}

// Q8_0 block: half d; int8 qs[32] (34 bytes, 8.5 bits per weight); value = d * qs[i].
STRATA_KERNEL void embed_q8_0(uint64_t a_w,   // (n_vocab, n_embd) Q8_0, n_embd % 32 == 0
                              uint64_t a_ids, // (T)
                              uint64_t a_out, // (T, n_embd)
                              int n_embd, int n_vocab, float scale) {
  const uint8_t *w = STRATA_ADDR(const uint8_t, a_w);
  embed_row(a_ids, a_out, n_embd, n_vocab, scale, [=](int id, int e) {
    const uint8_t *blk = w + (size_t)id * (size_t)(n_embd / 32) * 34 + (size_t)(e / 32) * 34;
    return (float)*(const sycl::half *)blk * (float)(int8_t)blk[2 + e % 32];
  });
}

// The same values from tiled.rs's copy (the tied output head's, so the GGUF bytes need not stay
// on the device): tile id / 16, lane id % 16; per block of 32 a record of d[16] f16, then byte
// planes [32][16] (plane e = element e of the 16 rows). The same d, q and products: the same bits.
STRATA_KERNEL void embed_q8_0_tiled(uint64_t a_w,   // tiles: (ceil(n_vocab / 16), n_embd / 32) records
                                    uint64_t a_ids, // (T)
                                    uint64_t a_out, // (T, n_embd)
                                    int n_embd, int n_vocab, float scale) {
  const uint8_t *w = STRATA_ADDR(const uint8_t, a_w);
  embed_row(a_ids, a_out, n_embd, n_vocab, scale, [=](int id, int e) {
    const int l = id % 16;
    const uint8_t *rec = w + ((size_t)(id / 16) * (n_embd / 32) + (size_t)(e / 32)) * (16 * 34);
    return (float)*(const sycl::half *)(rec + 2 * l) * (float)(int8_t)rec[32 + 16 * (e % 32) + l];
  });
}

STRATA_KERNEL void embed_f16(uint64_t a_w,   // (n_vocab, n_embd)
                             uint64_t a_ids, // (T)
                             uint64_t a_out, // (T, n_embd)
                             int n_embd, int n_vocab, float scale) {
  const sycl::half *w = STRATA_ADDR(const sycl::half, a_w);
  embed_row(a_ids, a_out, n_embd, n_vocab, scale,
            [=](int id, int e) { return (float)w[(size_t)id * n_embd + e]; });
}

STRATA_KERNEL void embed_f32(uint64_t a_w,   // (n_vocab, n_embd)
                             uint64_t a_ids, // (T)
                             uint64_t a_out, // (T, n_embd)
                             int n_embd, int n_vocab, float scale) {
  const float *w = STRATA_ADDR(const float, a_w);
  embed_row(a_ids, a_out, n_embd, n_vocab, scale,
            [=](int id, int e) { return w[(size_t)id * n_embd + e]; });
}
