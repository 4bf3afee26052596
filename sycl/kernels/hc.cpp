// The default hyper-connection read (qwen4exp; docs/hyper-connections.md): four launches per
// read site, over T rows of S streams of n (x: (T, S, n), K = S * n columns per row).
//   hc_norm:   the pending write x[t,s,:] += a[t,s] * y[t,:] (in place: R_out), the stream's
//              1 / rms into rs[t,s], and H' * gamma (unscaled) into the stage xg for hc_down.
//   hc_down:   partial[c][t][j] = sum over the column slice c of W[j,k] * xg[t,k], for the r rows
//              of W_down and then the n_inj injection rows of W_inj (one launch, J = r + n_inj
//              rows). A slice is `slice` columns of one stream (the launcher's choice, a function
//              of n alone; a stream's last slice may be shorter), so rs, which is per stream, can
//              be applied at the reduce.
//   hc_reduce: per (t, j): each stream's slices summed in slice order, times rs[t,s], the
//              streams summed in stream order: lo (j < r) and u = silu(lo / S) for hc_up; the
//              injection 2 * sigmoid(z / S) (j >= r).
//   hc_up:     gate[t, s*n+k] = sigmoid(W_up[s*n+k, :] . u[t, :]), then the gated stream mean
//              mixed[t,k] = (sum over s in stream order of gate * (rs[t,s] * xg[t,s*n+k])) / S.
// Weights are the GGUF bytes, one compile-time type per matrix: -DHC_DOWN / -DHC_INJ / -DHC_UP
// = the ggml type id (0 F32, 1 F16, 30 BF16, 8 Q8_0; BF16 when not given). Every sum has an
// order fixed by n, S and r alone: a T-row call is bitwise T one-row calls. addr.hpp and norm.hpp
// (row_inv_rms, the one RMS of every norm kernel) are prepended by engine/sycl/kernels.rs.
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>))

#define HC_F32 0
#define HC_F16 1
#define HC_Q8_0 8
#define HC_BF16 30
#ifndef HC_DOWN
#define HC_DOWN HC_BF16
#endif
#ifndef HC_INJ
#define HC_INJ HC_BF16
#endif
#ifndef HC_UP
#define HC_UP HC_BF16
#endif

// (the launcher, engine/kernels/hc.rs, uses the same constants)
#define HC_NSG 4     // sub-groups (= weight rows, or columns in hc_up) per work-group
#define HC_TMAX 8    // activation rows per sub-group pass; more rows = more passes

// Element e of a weight row of format F (e counted from the row's start).
// (always_inline here and below: a helper the CPU compiler leaves out of line gets every argument
// as a per-lane vector, and each load through it becomes a gather)
template <int F>
__attribute__((always_inline)) static inline float hc_w(const uint8_t *row, size_t e) {
  if constexpr (F == HC_F32) {
    return ((const float *)row)[e];
  } else if constexpr (F == HC_F16) {
    return (float)((const sycl::half *)row)[e];
  } else if constexpr (F == HC_BF16) {
    // uint16_t, never sycl bfloat16 (crashes build() with the persistent cache: qformats.hpp)
    return sycl::bit_cast<float>((uint32_t)((const uint16_t *)row)[e] << 16);
  } else if constexpr (F == HC_Q8_0) {
    // 34-byte blocks: d (f16) then 32 int8 quants; w = d * q
    const uint8_t *blk = row + (e / 32) * 34;
    const float d = (float)sycl::bit_cast<sycl::half>(*(const uint16_t *)blk);
    return d * (float)((const int8_t *)(blk + 2))[e % 32];
  } else {
    static_assert(F == HC_F32, "hc.cpp: HC_DOWN / HC_INJ / HC_UP must be 0, 1, 8 or 30");
    return 0.0f;
  }
}

// Elements e + lane and e + 16 + lane of a weight row (e uniform across the sub-group). For Q8_0
// with e on a block start (always, when n is a multiple of 32) the block's scale is one uniform
// load and the quants two consecutive ones; per-element block indices would be per-lane inserts.
template <int F>
__attribute__((always_inline)) static inline void hc_w2(const uint8_t *row, size_t e, int lane,
                                                        float &w0, float &w1) {
  if constexpr (F == HC_Q8_0) {
    if (e % 32 == 0) {
      const uint8_t *blk = row + (e / 32) * 34;
      const float d = (float)sycl::bit_cast<sycl::half>(*(const uint16_t *)blk);
      const int8_t *q = (const int8_t *)(blk + 2);
      w0 = d * (float)q[lane];
      w1 = d * (float)q[16 + lane];
      return;
    }
  }
  w0 = hc_w<F>(row, e + lane);
  w1 = hc_w<F>(row, e + 16 + lane);
}

// Bytes of a weight row of `len` elements of format F (Q8_0: len is a multiple of 32).
template <int F> static inline size_t hc_row_bytes(size_t len) {
  if constexpr (F == HC_F32) {
    return len * 4;
  } else if constexpr (F == HC_Q8_0) {
    return len / 32 * 34;
  } else {
    return len * 2;
  }
}

// out[t] = sum over i < len of row[e0 + i] * x[t * xs + i], for t < tn, by one 16-lane
// sub-group: lane l takes i = l + 16 m, even m into one fma chain and odd m into another (one
// chain would make a single row wait on the fma latency), then lane sums and a fixed sub-group
// tree. The order depends on len alone, never on tn or t.
template <int F>
__attribute__((always_inline)) static inline void hc_dot(const uint8_t *row, size_t e0, const float *x, size_t xs, int len,
                          int tn, int lane, sycl::sub_group sg, float *out) {
  float a0[HC_TMAX], a1[HC_TMAX];
#pragma unroll
  for (int t = 0; t < HC_TMAX; ++t) a0[t] = a1[t] = 0.0f;
  int b = 0;
  for (; b + 32 <= len; b += 32) {
    const int i0 = b + lane, i1 = b + 16 + lane;
    float w0, w1;
    hc_w2<F>(row, e0 + b, lane, w0, w1);
#pragma unroll
    for (int t = 0; t < HC_TMAX; ++t) {
      if (t < tn) {
        a0[t] = sycl::fma(w0, x[t * xs + i0], a0[t]);
        a1[t] = sycl::fma(w1, x[t * xs + i1], a1[t]);
      }
    }
  }
  if (b < len) { // the tail: a masked element adds 0 * 0, the same chains and order
    const int i0 = b + lane, i1 = b + 16 + lane;
    const bool m0 = i0 < len, m1 = i1 < len;
    const float w0 = m0 ? hc_w<F>(row, e0 + i0) : 0.0f;
    const float w1 = m1 ? hc_w<F>(row, e0 + i1) : 0.0f;
#pragma unroll
    for (int t = 0; t < HC_TMAX; ++t) {
      if (t < tn) {
        a0[t] = sycl::fma(w0, m0 ? x[t * xs + i0] : 0.0f, a0[t]);
        a1[t] = sycl::fma(w1, m1 ? x[t * xs + i1] : 0.0f, a1[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < HC_TMAX; ++t) {
    if (t < tn) out[t] = sycl::reduce_over_group(sg, a0[t] + a1[t], sycl::plus<float>());
  }
}

// One 16-lane sub-group (= one work-group) per (t, s) stream row: launch T * S groups of 16.
// With a_xg = 0 (and a_g = 0) it is the pending write alone (engine: the card's last write).
STRATA_KERNEL void hc_norm(uint64_t a_x,  // (T, S, n) H in, H' = R_out out (in place)
                           uint64_t a_y,  // (T, n) pending write: the sublayer output, or 0
                           uint64_t a_a,  // (T, S) pending write: its injection, or 0
                           uint64_t a_g,  // (S, n) gamma (ggml [n, S]), or 0 when a_xg = 0
                           uint64_t a_rs, // (T, S) 1 / sqrt(mean(H'^2) + eps)
                           uint64_t a_xg, // (T, S, n) H' * gamma for hc_down, or 0
                           int n, int S, float eps) {
  // H' must be the plain f32 h + a * y (a product rounded before its add, as ggml's
  // ggml_mul + ggml_add, and as the Rust reference): no fma contraction here
#pragma clang fp contract(off)
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_id()[0];
  const size_t row = it.get_group(0); // t * S + s
  const size_t t = row / (size_t)S, s = row % (size_t)S;
  float *xr = STRATA_ADDR(float, a_x) + row * n;
  if (a_y != 0) {
    const float *yr = STRATA_ADDR(const float, a_y) + t * n;
    const float a = STRATA_ADDR(const float, a_a)[row];
    for (int c = 0; c * 16 < n; c++) {
      const int i = c * 16 + lane;
      if (i < n) xr[i] = xr[i] + a * yr[i];
    }
  }
  // each lane re-reads only the elements it wrote itself: no barrier needed
  const float inv = row_inv_rms(xr, n, eps, lane, sg);
  if (lane == 0) STRATA_ADDR(float, a_rs)[row] = inv;
  if (a_xg != 0) {
    const float *g = STRATA_ADDR(const float, a_g) + s * n;
    float *xg = STRATA_ADDR(float, a_xg) + row * n;
    for (int c = 0; c * 16 < n; c++) {
      const int i = c * 16 + lane;
      if (i < n) xg[i] = xr[i] * g[i];
    }
  }
}

// One sub-group per (weight row j, slice c, pass of HC_TMAX rows): launch
// passes * C * ceil(J / HC_NSG) groups of HC_NSG * 16, C = S * ceil(n / slice).
STRATA_KERNEL void hc_down(uint64_t a_xg,   // (T, S * n) H' * gamma
                           uint64_t a_wd,   // (r, S * n) W_down, GGUF bytes of type HC_DOWN
                           uint64_t a_wi,   // (n_inj, S * n) W_inj of type HC_INJ, or 0
                           uint64_t a_part, // (C, T, r + n_inj) slice partials, unscaled
                           int n, int S, int r, int n_inj, int T, int slice) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_linear_id();
  const size_t K = (size_t)S * n;
  const int cps = (n + slice - 1) / slice, C = S * cps;
  const int J = r + n_inj, RG = (J + HC_NSG - 1) / HC_NSG;
  const size_t g = it.get_group(0);
  const int rg = (int)(g % RG), c = (int)((g / RG) % C), pass = (int)(g / RG / C);
  const int j = rg * HC_NSG + (int)sg.get_group_linear_id();
  if (j >= J) return; // uniform across the sub-group
  const int s = c / cps, ci = c % cps;
  const size_t k0 = (size_t)s * n + (size_t)ci * slice;
  const int rest = n - ci * slice;
  const int len = rest < slice ? rest : slice; // (a ternary: sycl::min looks varying)
  const int t0 = pass * HC_TMAX;
  const int tn = T - t0 < HC_TMAX ? T - t0 : HC_TMAX;
  const float *x = STRATA_ADDR(const float, a_xg) + (size_t)t0 * K + k0;
  float out[HC_TMAX];
  if (j < r) {
    const uint8_t *row = STRATA_ADDR(const uint8_t, a_wd) + (size_t)j * hc_row_bytes<HC_DOWN>(K);
    hc_dot<HC_DOWN>(row, k0, x, K, len, tn, lane, sg, out);
  } else {
    const uint8_t *row =
        STRATA_ADDR(const uint8_t, a_wi) + (size_t)(j - r) * hc_row_bytes<HC_INJ>(K);
    hc_dot<HC_INJ>(row, k0, x, K, len, tn, lane, sg, out);
  }
  float *part = STRATA_ADDR(float, a_part);
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < HC_TMAX; ++t) {
      if (t < tn) part[((size_t)c * T + t0 + t) * J + j] = out[t];
    }
  }
}

// One work-item per (t, j): launch ceil(T * J, 64) items in groups of 64.
STRATA_KERNEL void hc_reduce(uint64_t a_part, // (C, T, J) from hc_down, J = r + n_inj
                             uint64_t a_rs,   // (T, S)
                             uint64_t a_lo,   // (T, r) lo = W_down . (rs * H' * gamma)
                             uint64_t a_u,    // (T, r) silu(lo / S), hc_up's input
                             uint64_t a_inj,  // (T, n_inj) 2 * sigmoid(z / S), or 0
                             int n, int S, int r, int n_inj, int T, int slice) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  const int J = r + n_inj;
  const size_t id = it.get_global_id(0);
  if (id >= (size_t)T * J) return;
  const size_t t = id / J;
  const int j = (int)(id % J);
  const int cps = (n + slice - 1) / slice;
  const float *part = STRATA_ADDR(const float, a_part);
  const float *rs = STRATA_ADDR(const float, a_rs) + t * S;
  float v = 0.0f;
  for (int s = 0; s < S; ++s) {
    float ps = 0.0f;
    for (int ci = 0; ci < cps; ++ci) ps += part[((size_t)(s * cps + ci) * T + t) * J + j];
    v = sycl::fma(rs[s], ps, v);
  }
  const float h = v / (float)S;
  if (j < r) {
    STRATA_ADDR(float, a_lo)[t * r + j] = v;
    STRATA_ADDR(float, a_u)[t * r + j] = h / (1.0f + sycl::exp(-h));
  } else {
    STRATA_ADDR(float, a_inj)[t * n_inj + (j - r)] = 2.0f / (1.0f + sycl::exp(-h));
  }
}

// One sub-group per (column k, pass of HC_TMAX rows), over the S rows s * n + k of W_up: launch
// passes * ceil(n / HC_NSG) groups of HC_NSG * 16.
STRATA_KERNEL void hc_up(uint64_t a_u,     // (T, r) silu(lo / S)
                         uint64_t a_wu,    // (S * n, r) W_up, GGUF bytes of type HC_UP
                         uint64_t a_rs,    // (T, S)
                         uint64_t a_xg,    // (T, S * n) H' * gamma
                         uint64_t a_mixed, // (T, n) the gated stream mean
                         int n, int S, int r, int T) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_linear_id();
  const size_t K = (size_t)S * n;
  const int CG = (n + HC_NSG - 1) / HC_NSG;
  const size_t g = it.get_group(0);
  const int k = (int)(g % CG) * HC_NSG + (int)sg.get_group_linear_id();
  const int t0 = (int)(g / CG) * HC_TMAX;
  if (k >= n) return; // uniform across the sub-group
  const int tn = T - t0 < HC_TMAX ? T - t0 : HC_TMAX;
  const float *u = STRATA_ADDR(const float, a_u) + (size_t)t0 * r;
  const float *rs = STRATA_ADDR(const float, a_rs) + (size_t)t0 * S;
  const float *xg = STRATA_ADDR(const float, a_xg) + (size_t)t0 * K;
  const uint8_t *wu = STRATA_ADDR(const uint8_t, a_wu);
  const size_t rb = hc_row_bytes<HC_UP>((size_t)r);
  float m[HC_TMAX];
#pragma unroll
  for (int t = 0; t < HC_TMAX; ++t) m[t] = 0.0f;
  for (int s = 0; s < S; ++s) {
    const size_t col = (size_t)s * n + k;
    float p[HC_TMAX];
    hc_dot<HC_UP>(wu + col * rb, 0, u, (size_t)r, r, tn, lane, sg, p);
#pragma unroll
    for (int t = 0; t < HC_TMAX; ++t) {
      if (t < tn) {
        const float gate = 1.0f / (1.0f + sycl::exp(-p[t]));
        m[t] = sycl::fma(gate, rs[t * S + s] * xg[t * K + col], m[t]);
      }
    }
  }
  if (lane == 0) {
    float *mixed = STRATA_ADDR(float, a_mixed);
#pragma unroll
    for (int t = 0; t < HC_TMAX; ++t) {
      if (t < tn) mixed[(size_t)(t0 + t) * n + k] = m[t] / (float)S;
    }
  }
}
