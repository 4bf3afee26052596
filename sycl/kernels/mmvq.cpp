// mmvq: quantized matrix x (1..8 columns) product, the decode path and the speculative verify
// window.  y[t, o] = sum_i W[o, i] * x[t, i] for o < n_out, t < T <= 8.
// Needs qformats.hpp prepended (the Rust side does it) and one -DCFG_FMT_<type>.
//
// One 16-lane sub-group per weight row; lane l owns elements l + 16k of every block (see
// qformats.hpp), decodes them once per block and applies them to all T activation rows. Each
// column t has its own two fma chains (even / odd k), the same sequence whatever T is, then one
// reduce_over_group: a T-column call is bitwise T one-column calls.
// Activations stay f32 (no Q8_1 re-quantisation): the CPU device has no fast int8 dot, and the
// parity reference is then just the dequantized weights times the very same f32 inputs.
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#ifndef CFG_NSG
#define CFG_NSG 4  // sub-groups (= rows) per work-group
#endif
#define CFG_TMAX 8

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<CFG_SG>))
void mmvq(const uint8_t *w,  // (n_out, n_in) GGUF blocks, row-major
          const float *x,    // (T, n_in)
          float *y,          // (T, n_out)
          int n_in, int n_out, int T) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_linear_id();
  // uniform row index built from the group id (not global_id / SG): keeps loads vectorised
  const size_t row = it.get_group(0) * (size_t)CFG_NSG + sg.get_group_linear_id();
  if (row >= (size_t)n_out) return;  // uniform across the sub-group
  const int nb = n_in / QK;
  const uint8_t *wr = w + row * (size_t)nb * BLOCK_BYTES;

  // two independent fma chains per column (even / odd k): one chain would make T = 1 wait on
  // the fma latency; the chain structure is fixed, so results never depend on T
  float acc0[CFG_TMAX], acc1[CFG_TMAX];
#pragma unroll
  for (int t = 0; t < CFG_TMAX; ++t) acc0[t] = acc1[t] = 0.0f;

  for (int ib = 0; ib < nb; ++ib) {
    float wv[EPL];
    decode(wr + (size_t)ib * BLOCK_BYTES, lane, wv);
#pragma unroll
    for (int t = 0; t < CFG_TMAX; ++t) {
      if (t < T) {
        const size_t base = (size_t)t * n_in + (size_t)ib * QK;
        float a0 = acc0[t], a1 = acc1[t];
#pragma unroll
        for (int k = 0; k < EPL; k += 2) {
          a0 = sycl::fma(wv[k], x[base + 16 * k + lane], a0);
          a1 = sycl::fma(wv[k + 1], x[base + 16 * (k + 1) + lane], a1);
        }
        acc0[t] = a0;
        acc1[t] = a1;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < CFG_TMAX; ++t) {
    if (t < T) {
      const float s = sycl::reduce_over_group(sg, acc0[t] + acc1[t], sycl::plus<float>());
      if (lane == 0) y[(size_t)t * n_out + row] = s;
    }
  }
}
