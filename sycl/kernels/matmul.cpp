// matmul: quantized weight x many activation rows (the prompt path, T > 8, chunks up to 512
// rows).  y[t, o] = sum_i W[o, i] * x[t, i].
// Needs qformats.hpp prepended (the Rust side does it) and one -DCFG_FMT_<type>.
//
// A work-group is one 16-lane sub-group and owns CFG_RG * 16 weight rows for ALL T tokens: lane l
// holds rows l, l + 16, ... (one per row group). Per chunk of CFG_KC columns it decodes its rows
// once (the same decode() as mmvq, stored transposed in local memory: wt[k][row]), then sweeps the
// tokens CFG_TT at a time with CFG_RG x CFG_TT accumulators per lane (a register tile):
// acc[g][j] += wt[k][g*16 + lane] * x[t0 + j, k] — per k, CFG_RG weight vector loads and CFG_TT
// broadcast loads of x feed CFG_RG * CFG_TT FMAs (2 x 8: 16 FMAs for 10 loads, no spilled
// pointers; 1 x 16 needed 26 loads, 9 of them spilled x pointers). That is with 16-float vector
// registers (AVX-512, GPUs); with AVX2 each 16-lane value takes two of 16 registers and 2 x 8
// spills, so the engine builds 1 x 6 there (-DCFG_RG=1 -DCFG_TT=6: engine/kernels/matmul_tile.rs,
// ~1.9x faster on Gemma 3's shapes). Neither tile changes a result. Rows longer than CFG_KC go
// chunk by chunk, the running sums parked in y between chunks: an exact f32 store/reload, so the
// sum per output stays one sequential chain over i and the decode is paid once per weight.
// Summation order per output is sequential over i (mmvq's is lane partials + a tree): rows agree
// with mmvq to rounding (NMSE ~1e-13), not bitwise.
// -DCFG_TILED: w is the tiled copy (tiled.rs / ktiled.rs) instead of the GGUF bytes, decoded
// lane = row by untile.hpp's decode_tiled (the same integers and float expressions as decode():
// the same weights, the same bits), so the GGUF bytes need not stay on the device. The work-group's
// rows are whole tiles (row0 is a multiple of 16 * CFG_RG).
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#ifndef CFG_RG
#define CFG_RG 2  // row groups of 16 per work-group (weight vectors per k)
#endif
#ifndef CFG_TT
#define CFG_TT 8  // tokens per sweep: CFG_RG * CFG_TT = 16 accumulators per lane
#endif
#ifndef CFG_KC
#define CFG_KC 1024  // columns decoded per chunk: 1024 x 32 x 4 B = 128 KiB of the 256 KiB local
#endif
#define MM_ROWS (CFG_SG * CFG_RG)

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<CFG_SG>))
void matmul(const uint8_t *w,  // (n_out, n_in) GGUF blocks, row-major; CFG_TILED: the tiled copy
            const float *x,    // (T, n_in)
            float *y,          // (T, n_out)
            int n_in, int n_out, int T) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  // the work-group IS one sub-group: a sub-group barrier orders the local-memory exchange, and
  // unlike a work-group barrier it does not make the CPU compiler split the kernel (which stores
  // every live value per work-item and turns the broadcast x loads into gathers)
  auto grp = it.get_sub_group();
  const int lane = (int)it.get_local_linear_id();
  const size_t row0 = it.get_group(0) * (size_t)MM_ROWS;
  const int n_chunks = (n_in + CFG_KC - 1) / CFG_KC;

  syclexp::work_group_static<float[CFG_KC * MM_ROWS]> wt_mem;  // (CFG_KC, MM_ROWS) transposed
  float *wt = wt_mem;
#if defined(CFG_TILED)
  const int nb = n_in / QK;
#endif

  for (int c = 0; c < n_chunks; ++c) {
    const int k0 = c * CFG_KC;
    const int kn = n_in - k0 < CFG_KC ? n_in - k0 : CFG_KC;
    if (c > 0) sycl::group_barrier(grp);  // previous chunk's sweeps done with wt
#if defined(CFG_TILED)
    for (int g = 0; g < CFG_RG; ++g) {
      const size_t trow0 = row0 + (size_t)g * UT_TILE;  // the tile's first row (uniform)
      float *wg = wt + g * CFG_SG;                       // the tile's rows in wt: wg[.. + lane]
      if (trow0 < (size_t)n_out) {
        // (a padded last tile's rows past n_out decode the copy's zero bytes; never stored)
        const uint8_t *tile = w + (trow0 / UT_TILE) * (size_t)nb * (UT_HDR + UT_REC);
        for (int b = 0; b < kn / QK; ++b) {
          float *wb = wg + (size_t)b * QK * MM_ROWS;
          decode_tiled(tile, lane, nb, k0 / QK + b,
                       [&](int e, float v) { wb[e * MM_ROWS + lane] = v; });
        }
      } else {
        for (int k = 0; k < kn; ++k) wg[k * MM_ROWS + lane] = 0.0f;
      }
    }
#else
    const size_t row_bytes = (size_t)(n_in / QK) * BLOCK_BYTES;
    for (int r = 0; r < MM_ROWS; ++r) {
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
        for (int k = 0; k < EPL; ++k) wt[(b * QK + 16 * k + lane) * MM_ROWS + r] = wv[k];
      }
    }
#endif
    sycl::group_barrier(grp);

    for (int t0 = 0; t0 < T; t0 += CFG_TT) {
      float acc[CFG_RG][CFG_TT];
#pragma unroll
      for (int g = 0; g < CFG_RG; ++g) {
        const size_t row = row0 + g * CFG_SG + lane;
#pragma unroll
        for (int j = 0; j < CFG_TT; ++j)
          acc[g][j] = (c > 0 && row < (size_t)n_out && t0 + j < T)
                          ? y[(size_t)(t0 + j) * n_out + row]
                          : 0.0f;
      }
      for (int k = 0; k < kn; ++k) {
        float wk[CFG_RG];
#pragma unroll
        for (int g = 0; g < CFG_RG; ++g) wk[g] = wt[k * MM_ROWS + g * CFG_SG + lane];
#pragma unroll
        for (int j = 0; j < CFG_TT; ++j) {
          // tokens past T read row T-1 (never stored): keeps the loop branch-free. A ternary,
          // not sycl::min (the CPU compiler then loses uniformity: gathers instead of
          // broadcasts), and no private index array (per-lane memory: gathers too).
          const float xv = x[(size_t)(t0 + j < T ? t0 + j : T - 1) * n_in + k0 + k];
#pragma unroll
          for (int g = 0; g < CFG_RG; ++g) acc[g][j] = sycl::fma(wk[g], xv, acc[g][j]);
        }
      }
#pragma unroll
      for (int g = 0; g < CFG_RG; ++g) {
        const size_t row = row0 + g * CFG_SG + lane;
        if (row < (size_t)n_out) {
#pragma unroll
          for (int j = 0; j < CFG_TT; ++j)
            if (t0 + j < T) y[(size_t)(t0 + j) * n_out + row] = acc[g][j];
        }
      }
    }
  }
}
