// matmul: quantized weight x many activation rows (the prompt path, T > 8, up to a 512-row
// chunk).  y[t, o] = sum_i W[o, i] * x[t, i].
// Needs qformats.hpp prepended (the Rust side does it) and one -DCFG_FMT_<type>.
//
// A work-group is one 16-lane sub-group and computes a tile of CFG_RT weight rows x 16 tokens
// (lane = token). Per block, the lanes decode the tile's weights cooperatively (the same decode()
// as mmvq) into local memory, stage the 16 tokens' activations transposed, then every lane runs
// a plain f32 fma chain over the block: w[r][k] is a broadcast, x[k][lane] a vector load.
// Summation order per output is sequential over i (mmvq's is lane partials + a tree): rows
// agree with mmvq to rounding (NMSE ~1e-13), not bitwise.
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#ifndef CFG_RT
#define CFG_RT 16  // weight rows per tile
#endif

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<CFG_SG>))
void matmul(const uint8_t *w,  // (n_out, n_in) GGUF blocks, row-major
            const float *x,    // (T, n_in)
            float *y,          // (T, n_out)
            int n_in, int n_out, int T) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto grp = it.get_group();
  const int lane = (int)it.get_local_linear_id();
  const size_t n_rt = ((size_t)n_out + CFG_RT - 1) / CFG_RT;
  // row tiles vary fastest: neighbouring work-groups share the activation tile
  const size_t row0 = (it.get_group(0) % n_rt) * CFG_RT;
  const size_t tok0 = (it.get_group(0) / n_rt) * CFG_SG;
  const int nb = n_in / QK;
  const size_t row_bytes = (size_t)nb * BLOCK_BYTES;

  syclexp::work_group_static<float[CFG_RT * QK]> wt_mem;  // (CFG_RT, QK) decoded weights
  syclexp::work_group_static<float[QK * CFG_SG]> xt_mem;  // (QK, 16) activations, transposed
  float *wt = wt_mem;
  float *xt = xt_mem;

  float acc[CFG_RT];
#pragma unroll
  for (int r = 0; r < CFG_RT; ++r) acc[r] = 0.0f;

  for (int ib = 0; ib < nb; ++ib) {
    for (int r = 0; r < CFG_RT; ++r) {
      float wv[EPL];
      if (row0 + r < (size_t)n_out) {
        decode(w + (row0 + r) * row_bytes + (size_t)ib * BLOCK_BYTES, lane, wv);
      } else {
#pragma unroll
        for (int k = 0; k < EPL; ++k) wv[k] = 0.0f;
      }
#pragma unroll
      for (int k = 0; k < EPL; ++k) wt[r * QK + 16 * k + lane] = wv[k];
    }
    for (int j = 0; j < CFG_SG; ++j) {
      const size_t tok = tok0 + j;
      const bool ok = tok < (size_t)T;
      const size_t base = (ok ? tok : 0) * n_in + (size_t)ib * QK;
#pragma unroll
      for (int k = 0; k < EPL; ++k) xt[(16 * k + lane) * CFG_SG + j] = ok ? x[base + 16 * k + lane] : 0.0f;
    }
    sycl::group_barrier(grp);
    for (int kk = 0; kk < QK; ++kk) {
      const float xv = xt[kk * CFG_SG + lane];
#pragma unroll
      for (int r = 0; r < CFG_RT; ++r) acc[r] = sycl::fma(wt[r * QK + kk], xv, acc[r]);
    }
    sycl::group_barrier(grp);
  }
  const size_t tok = tok0 + lane;
  if (tok < (size_t)T) {
#pragma unroll
    for (int r = 0; r < CFG_RT; ++r)
      if (row0 + r < (size_t)n_out) y[tok * n_out + row0 + r] = acc[r];
  }
}
