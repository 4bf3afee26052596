// matmul: quantized weight x many activation rows (the prompt path, T > 8, chunks up to 512
// rows).  y[t, o] = sum_i W[o, i] * x[t, i].
// Needs qformats.hpp prepended (the Rust side does it) and one -DCFG_FMT_<type>.
//
// A work-group is one 16-lane sub-group and owns 16 weight rows (lane = row) for ALL T tokens:
// it decodes a chunk of CFG_KC columns of its rows once (the same decode() as mmvq, stored
// transposed in local memory: wt[k][row]), then sweeps the tokens 16 at a time with 16
// accumulators per lane: acc[j] += wt[k][lane] * x[t0 + j, k], the x value a broadcast load, the
// weight a vector load shared by 16 tokens. Decoding is paid once per weight when n_in <= CFG_KC
// (every matrix of the two models); longer rows re-decode their chunks per token tile.
// Summation order per output is sequential over i (mmvq's is lane partials + a tree): rows agree
// with mmvq to rounding (NMSE ~1e-13), not bitwise.
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#ifndef CFG_KC
#define CFG_KC 2048  // columns decoded per pass: 16 x 2048 x 4 B = 128 KiB of the 256 KiB local
#endif
#define CFG_TT 16  // tokens per sweep (accumulators per lane)

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<CFG_SG>))
void matmul(const uint8_t *w,  // (n_out, n_in) GGUF blocks, row-major
            const float *x,    // (T, n_in)
            float *y,          // (T, n_out)
            int n_in, int n_out, int T) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  // the work-group IS one sub-group: a sub-group barrier orders the local-memory exchange, and
  // unlike a work-group barrier it does not make the CPU compiler split the kernel (which stores
  // every live value per work-item and turns the broadcast x loads into gathers)
  auto grp = it.get_sub_group();
  const int lane = (int)it.get_local_linear_id();
  const size_t row0 = it.get_group(0) * (size_t)CFG_SG;
  const size_t row_bytes = (size_t)(n_in / QK) * BLOCK_BYTES;
  const int n_chunks = (n_in + CFG_KC - 1) / CFG_KC;

  syclexp::work_group_static<float[CFG_KC * CFG_SG]> wt_mem;  // (CFG_KC, 16) decoded, transposed
  float *wt = wt_mem;

  for (int t0 = 0; t0 < T; t0 += CFG_TT) {
    float acc[CFG_TT];
#pragma unroll
    for (int j = 0; j < CFG_TT; ++j) acc[j] = 0.0f;

    for (int c = 0; c < n_chunks; ++c) {
      const int k0 = c * CFG_KC;
      const int kn = n_in - k0 < CFG_KC ? n_in - k0 : CFG_KC;
      if (t0 == 0 || n_chunks > 1) {
        if (n_chunks > 1) sycl::group_barrier(grp);  // previous sweep done with wt
        for (int r = 0; r < CFG_SG; ++r) {
          const size_t row = row0 + r;
          for (int b = 0; b < kn / QK; ++b) {
            float wv[EPL];
            if (row < (size_t)n_out) {
              decode(w + row * row_bytes + (size_t)(k0 / QK + b) * BLOCK_BYTES, lane, wv);
            } else {
#pragma unroll
              for (int k = 0; k < EPL; ++k) wv[k] = 0.0f;
            }
#pragma unroll
            for (int k = 0; k < EPL; ++k) wt[(b * QK + 16 * k + lane) * CFG_SG + r] = wv[k];
          }
        }
        sycl::group_barrier(grp);
      }
      for (int k = 0; k < kn; ++k) {
        const float wk = wt[k * CFG_SG + lane];
#pragma unroll
        for (int j = 0; j < CFG_TT; ++j) {
          // tokens past T read row T-1 (never stored): keeps the loop branch-free. A ternary,
          // not sycl::min (the CPU compiler then loses uniformity: 16 gathers instead of
          // broadcasts), and no private index array (per-lane memory: gathers too).
          const size_t xr = (size_t)(t0 + j < T ? t0 + j : T - 1) * n_in;
          acc[j] = sycl::fma(wk, x[xr + k0 + k], acc[j]);
        }
      }
    }
    const size_t row = row0 + lane;
    if (row < (size_t)n_out) {
#pragma unroll
      for (int j = 0; j < CFG_TT; ++j)
        if (t0 + j < T) y[(size_t)(t0 + j) * n_out + row] = acc[j];
    }
  }
}
