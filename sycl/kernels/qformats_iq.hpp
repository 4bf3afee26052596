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

#if 0

#else
#error "qformats_iq.hpp: define exactly one CFG_FMT_<i-quant>"
#endif

#define EPL (QK / CFG_SG)
