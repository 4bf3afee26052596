// The fast hyper-connection reads (qwen4exp; docs/hyper-connections.md): two launches per read
// site where the default read (hc.cpp) takes four, with the same five outputs. One source, one
// -D variant per weight format of W_down / W_up:
//   STRATA_HC_Q8=1    -DHCF_W=1008: hc_fast's Q8_0 copy (engine/kernels/hc_fast.rs, q8_copy):
//                     a (rows, cols) matrix as its int8 quants row-major, then its f16 block
//                     scales (rows, cols / 32) row-major: ggml's 34-byte blocks, reordered.
//   STRATA_GR_FUSED=1 -DHCF_W=30 (BF16), 1 (F16) or 0 (F32): the stored GGUF bytes, row-major.
// The injection rows are read as stored: -DHCF_INJ = 0, 1, 30 or 8 (GGUF Q8_0 blocks).
//
//   hcf_down (launch 1): one work-group per (row group, column slab) (w columns of one stream and
//     rpg rows of W_down, the launcher's choice). The pending write H' = H + a * y over the slab
//     computed (not stored), H' * gamma UNSCALED into local memory for the T rows with the
//     slab's sums of squares; the group's W_down rows (and the last row group the injection
//     rows) times the staged slab, one sub-group per weight row, lanes along the columns; the
//     partials to scratch. The LAST work-group to arrive (an atomic arrival counter: no group
//     waits for another, so nothing assumes co-residency) sums every slab's partials in a fixed
//     order, applies rs per stream, writes rs, lo, u = silu(lo / S) (for hcf_up), a copy of the
//     pending a (for hcf_up) and the injection 2 sigmoid(z / S), and resets the counter (graph
//     replays see 0).
//   hcf_up (launch 2): one work-group per 16 columns k of `mixed`, each the S rows s*n + k of
//     W_up; K = rank split over the work-group's ks sub-groups (lanes along K inside a part),
//     each row's lanes folded by a transposed reduction into lane = column, the parts summed in
//     part order; then the default read's epilogue: the pending write x[t,s,:] += a[t,s] *
//     y[t,:] (R_out: this is the launch that covers every element once; the default read's
//     operations, so the same bits), gate = sigmoid(W_up . u), mixed = (sum over s in stream
//     order of gate * (rs * H' * gamma)) / S.
// Every sum has an order fixed by n, S, r, the slab width w and the rank split ks (never by T or
// the row groups): a T-row call is bitwise T one-row calls, a graph replay bitwise a direct
// launch. addr.hpp is prepended by the kernel table (engine/sycl/kernels.rs).
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

// (always_inline: a kernel body the CPU compiler leaves out of its wrapper is vectorised as a
// function of per-lane arguments: every load a gather)
#define STRATA_KERNEL                                                                              \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                      \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<16>)) __attribute__((always_inline))

#define HCF_F32 0
#define HCF_F16 1
#define HCF_Q8_0 8      // GGUF Q8_0 blocks (injection rows only)
#define HCF_BF16 30
#define HCF_Q8_COPY 1008 // hc_fast's Q8_0 copy: quants row-major, then the f16 scales
#ifndef HCF_W
#define HCF_W HCF_BF16
#endif
#ifndef HCF_INJ
#define HCF_INJ HCF_BF16
#endif
// (the launcher, engine/kernels/hc_fast.rs, uses the same constants)
#ifndef HCF_WMAX
#define HCF_WMAX 1280 // widest slab: local memory of HCF_TMAX * HCF_WMAX floats
#endif
#define HCF_KSMAX 8 // most parts of K = rank over the sub-groups of an hcf_up work-group
#define HCF_NSG 4  // sub-groups per hcf_down work-group
#define HCF_TMAX 8 // rows per read
#define HCF_SMAX 16 // streams (the injection rows are one sub-group's lanes at most)

// Elements e + lane and e + 16 + lane of row j of a (rows, cols) weight matrix of format F;
// e % 32 == 0 and cols % 32 == 0 (the launcher checks), so a Q8_0 step is one block: its scale
// one uniform load and its quants two 16-byte loads.
// (always_inline here and below: a helper the CPU compiler leaves out of line gets every argument
// as a per-lane vector, and each load through it becomes a gather; docs/hyper-connections.md)
template <int F>
__attribute__((always_inline)) static inline void hcf_w2(const uint8_t *m, size_t rows, size_t cols,
                                                         size_t j, size_t e, int lane, float &w0,
                                                         float &w1) {
  const size_t at = j * cols + e; // element index in the matrix
  if constexpr (F == HCF_F32) {
    const float *p = (const float *)m + at;
    w0 = p[lane];
    w1 = p[16 + lane];
  } else if constexpr (F == HCF_F16) {
    const sycl::half *p = (const sycl::half *)m + at;
    w0 = (float)p[lane];
    w1 = (float)p[16 + lane];
  } else if constexpr (F == HCF_BF16) {
    // uint16_t, never sycl bfloat16 (crashes build() with the persistent cache: qformats.hpp)
    const uint16_t *p = (const uint16_t *)m + at;
    w0 = sycl::bit_cast<float>((uint32_t)p[lane] << 16);
    w1 = sycl::bit_cast<float>((uint32_t)p[16 + lane] << 16);
  } else if constexpr (F == HCF_Q8_0) {
    const uint8_t *blk = m + at / 32 * 34;
    const float d = (float)sycl::bit_cast<sycl::half>(*(const uint16_t *)blk);
    const int8_t *q = (const int8_t *)(blk + 2);
    w0 = d * (float)q[lane]; // exact in f32: an f16 times an 8-bit integer
    w1 = d * (float)q[16 + lane];
  } else if constexpr (F == HCF_Q8_COPY) {
    const int8_t *q = (const int8_t *)m + at;
    const float d = (float)((const sycl::half *)(m + rows * cols))[at / 32];
    w0 = d * (float)q[lane];
    w1 = d * (float)q[16 + lane];
  } else {
    static_assert(F == HCF_F32, "hc_fast.cpp: HCF_W is 0, 1, 30 or 1008; HCF_INJ 0, 1, 8 or 30");
  }
}

// acc[k][t] (per lane) = sum over i < len of W[j0 + k * jstep, e0 + i] * x[t * xs + i], for the
// RPS rows k and the TN rows t, by one 16-lane sub-group: lane l takes i = l + 16 m, even m into
// one fma chain and odd m into another, added at the end. len % 32 == 0. Each row's order depends
// on len alone, never on TN, RPS or t: the RPS rows only run side by side (more loads in flight:
// one row at a time waits on memory), each x load serving all of them.
// TN is a template argument, not a runtime bound: a runtime `t < T` that lives across a barrier
// is per-lane storage on the CPU device, and every fma behind it became a masked blend.
template <int F, int TN, int RPS>
__attribute__((always_inline)) static inline void
hcf_rows(const uint8_t *m, size_t rows, size_t cols, size_t j0, size_t jstep, size_t e0,
         const float *x, size_t xs, int len, int lane, float (&acc)[RPS][TN]) {
  float a0[RPS][TN], a1[RPS][TN];
#pragma unroll
  for (int k = 0; k < RPS; ++k) {
#pragma unroll
    for (int t = 0; t < TN; ++t) a0[k][t] = a1[k][t] = 0.0f;
  }
  for (int b = 0; b < len; b += 32) {
    float w0[RPS], w1[RPS];
#pragma unroll
    for (int k = 0; k < RPS; ++k) hcf_w2<F>(m, rows, cols, j0 + k * jstep, e0 + b, lane, w0[k], w1[k]);
#pragma unroll
    for (int t = 0; t < TN; ++t) {
      const float x0 = x[t * xs + b + lane], x1 = x[t * xs + b + 16 + lane];
#pragma unroll
      for (int k = 0; k < RPS; ++k) {
        a0[k][t] = sycl::fma(w0[k], x0, a0[k][t]);
        a1[k][t] = sycl::fma(w1[k], x1, a1[k][t]);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < RPS; ++k) {
#pragma unroll
    for (int t = 0; t < TN; ++t) acc[k][t] = a0[k][t] + a1[k][t];
  }
}

// Rows side by side per step (hcf_down: W_down rows; hcf_up: W_up rows). Measured on the CPU
// device (us per read, Q8_0, n 2560 S 4 r 320): hcf_down at T = 1 with 4 rows 332, 8 rows 401;
// at T = 6 1 row 705, 2 rows 537; T = 7 / 8 read 1112 / 1219 with 1 row, 980 / 1101 with 2 (2
// * 2 * 8 accumulators spill a little and still win); hcf_up 2 rows (BF16 T = 1 361 us, 4 rows
// 430). The order of each row's sum does not depend on it.
template <int TN> static constexpr int hcf_rps() { return TN <= 2 ? 4 : 2; }
template <int TN> static constexpr int hcf_ru() { return 2; }

// One step of the transposed reduction (attn.cpp's butterfly): lanes with bit `m` clear get
// a[l] + a[l ^ m], lanes with it set b[l] + b[l ^ m]. Steps m = 8, 4, 2, 1 fold 16 rows' lane
// partials into one vector, the i-th row's total in lane bitrev4(i): 15 steps for 16 sums
// instead of 16 full reductions, and the epilogue then works on 16 columns per vector.
__attribute__((always_inline)) static inline float hcf_fold(float a, float b, int m, int lane,
                                                            sycl::sub_group sg) {
  const bool hi = (lane & m) != 0;
  const float keep = hi ? b : a, send = hi ? a : b;
  return keep + sycl::permute_group_by_xor(sg, send, m);
}

// The work-group-local memory of hcf_down.
struct HcfDownMem {
  float *xs;      // (TN, w) H' * gamma of the slab
  float *red;     // (HCF_NSG, HCF_TMAX) sub-group parts of the sums of squares
  float *rsl;     // (TN, S) the last group's rs
  unsigned *last; // whether this group arrived last
};

// Weight rows [j_lo, j_hi) of W_down over the staged slab, RPS rows side by side per sub-group
// (rows j_lo + sgi + NSG * (RPS * m + k)); j_hi - j_lo a multiple of NSG * RPS.
template <int TN, int RPS>
__attribute__((always_inline)) static inline void
hcf_down_rows(const uint8_t *wd, size_t r, size_t K, int j_lo, int j_hi, size_t k0,
              const float *xs, int w, float *part, int c, int J, int sgi, int lane,
              sycl::sub_group sg) {
  for (int j0 = j_lo + sgi; j0 < j_hi; j0 += HCF_NSG * RPS) {
    float acc[RPS][TN];
    hcf_rows<HCF_W, TN, RPS>(wd, r, K, (size_t)j0, HCF_NSG, k0, xs, (size_t)w, w, lane, acc);
#pragma unroll
    for (int k = 0; k < RPS; ++k) {
#pragma unroll
      for (int t = 0; t < TN; ++t) {
        const float v = sycl::reduce_over_group(sg, acc[k][t], sycl::plus<float>());
        if (lane == 0) part[((size_t)c * TN + t) * J + j0 + k * HCF_NSG] = v;
      }
    }
  }
}

template <int TN>
__attribute__((always_inline)) static inline void
hcf_down_t(HcfDownMem mem, uint64_t a_x, uint64_t a_y, uint64_t a_a, uint64_t a_g, uint64_t a_wd,
           uint64_t a_wi, uint64_t a_part, uint64_t a_ss, uint64_t a_cnt, uint64_t a_rs,
           uint64_t a_lo, uint64_t a_u, uint64_t a_aprev, uint64_t a_inj, int n, int S, int r,
           int n_inj, int w, int rpg, float eps) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto grp = it.get_group();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_linear_id();
  const int sgi = (int)sg.get_group_linear_id();
  const int li = (int)it.get_local_linear_id();
  const int NL = HCF_NSG * 16;
  const size_t K = (size_t)S * n;
  const int cps = n / w, C = S * cps, J = r + n_inj, RG = r / rpg;
  const int c = (int)it.get_group(0) % C, rg = (int)it.get_group(0) / C;
  const int s = c / cps, ci = c % cps;
  const size_t k0 = (size_t)s * n + (size_t)ci * w; // the slab's first column of a row
  float *xs = mem.xs;

  // 1. the slab's H' = H + a * y for the TN rows (not written: hcf_up writes R_out, the one
  // launch that covers every element once), staged times gamma, and its sums of squares
  float ss[TN];
#pragma unroll
  for (int t = 0; t < TN; ++t) {
    ss[t] = 0.0f;
    const float *xr = STRATA_ADDR(const float, a_x) + (size_t)t * K + k0;
    const float *g = STRATA_ADDR(const float, a_g) + k0;
    if (a_y != 0) {
      const float *yr = STRATA_ADDR(const float, a_y) + (size_t)t * n + (size_t)ci * w;
      const float av = STRATA_ADDR(const float, a_a)[t * S + s];
      for (int i = li; i < w; i += NL) {
        // H' must be the plain f32 h + a * y (a product rounded before its add, as hc_norm
        // and ggml's ggml_mul + ggml_add): no fma contraction
#pragma clang fp contract(off)
        const float h = xr[i] + av * yr[i];
        xs[t * w + i] = h * g[i];
        ss[t] = sycl::fma(h, h, ss[t]);
      }
    } else {
      for (int i = li; i < w; i += NL) {
        const float h = xr[i];
        xs[t * w + i] = h * g[i];
        ss[t] = sycl::fma(h, h, ss[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TN; ++t) {
    const float v = sycl::reduce_over_group(sg, ss[t], sycl::plus<float>());
    if (lane == 0) mem.red[sgi * HCF_TMAX + t] = v;
  }
  sycl::group_barrier(grp);
  if (rg == 0 && li < TN) { // (every row group computes the same sums; one writes them)
    float v = 0.0f;
    for (int q = 0; q < HCF_NSG; ++q) v += mem.red[q * HCF_TMAX + li];
    STRATA_ADDR(float, a_ss)[(size_t)c * TN + li] = v;
  }

  // 2. this row group's W_down rows over the slab, and the last row group the injection rows
  // (one sub-group per row, lanes along the columns)
  float *part = STRATA_ADDR(float, a_part);
  constexpr int RPS = hcf_rps<TN>();
  const uint8_t *wd = STRATA_ADDR(const uint8_t, a_wd);
  // (rpg is a multiple of 16 = NSG times the largest RPS: the launcher checks)
  hcf_down_rows<TN, RPS>(wd, r, K, rg * rpg, rg * rpg + rpg, k0, xs, w, part, c, J, sgi, lane, sg);
  for (int j = sgi; rg == RG - 1 && j < n_inj; j += HCF_NSG) {
    float acc[1][TN];
    hcf_rows<HCF_INJ, TN, 1>(STRATA_ADDR(const uint8_t, a_wi), (size_t)n_inj, K, (size_t)j, 1,
                             k0, xs, (size_t)w, w, lane, acc);
#pragma unroll
    for (int t = 0; t < TN; ++t) {
      const float v = sycl::reduce_over_group(sg, acc[0][t], sycl::plus<float>());
      if (lane == 0) part[((size_t)c * TN + t) * J + r + j] = v;
    }
  }

  // 3. arrival: every item's partials are published (device-scope barrier) before one acq_rel
  // increment; the group that makes it RG * C is the last and sees every group's partials
  sycl::group_barrier(grp, sycl::memory_scope::device);
  if (li == 0) {
    sycl::atomic_ref<unsigned, sycl::memory_order::acq_rel, sycl::memory_scope::device,
                     sycl::access::address_space::global_space>
        arrivals(*STRATA_ADDR(unsigned, a_cnt));
    *mem.last = arrivals.fetch_add(1u) == (unsigned)(RG * C) - 1 ? 1u : 0u;
  }
  sycl::group_barrier(grp, sycl::memory_scope::device);
  if (*mem.last == 0u) return;

  // 4. the last group: rs per (t, s) from the slabs' sums of squares in slab order; the pending
  // a copied for hcf_up (a_inj may be the same buffer: every group has read a by now); then per
  // (t, j) each stream's slabs in slab order, times rs, the streams in stream order
  const float *ssg = STRATA_ADDR(const float, a_ss);
  if (li < TN * S) {
    const int t = li / S, st = li % S;
    float tot = 0.0f;
    for (int q = 0; q < cps; ++q) tot += ssg[(size_t)(st * cps + q) * TN + t];
    const float v = 1.0f / sycl::sqrt(tot / (float)n + eps);
    mem.rsl[li] = v;
    STRATA_ADDR(float, a_rs)[li] = v;
    if (a_y != 0) STRATA_ADDR(float, a_aprev)[li] = STRATA_ADDR(const float, a_a)[li];
  }
  sycl::group_barrier(grp);
  // (j across the lanes, t unrolled: contiguous loads of the partials)
  for (int j = li; j < J; j += NL) {
#pragma unroll
    for (int t = 0; t < TN; ++t) {
      float v = 0.0f;
      for (int st = 0; st < S; ++st) {
        float ps = 0.0f;
        for (int q = 0; q < cps; ++q) ps += part[((size_t)(st * cps + q) * TN + t) * J + j];
        v = sycl::fma(mem.rsl[t * S + st], ps, v);
      }
      const float h = v / (float)S;
      if (j < r) {
        STRATA_ADDR(float, a_lo)[(size_t)t * r + j] = v;
        STRATA_ADDR(float, a_u)[(size_t)t * r + j] = h / (1.0f + sycl::exp(-h));
      } else {
        STRATA_ADDR(float, a_inj)[(size_t)t * n_inj + (j - r)] = 2.0f / (1.0f + sycl::exp(-h));
      }
    }
  }
  if (li == 0) {
    sycl::atomic_ref<unsigned, sycl::memory_order::relaxed, sycl::memory_scope::device,
                     sycl::access::address_space::global_space>(*STRATA_ADDR(unsigned, a_cnt))
        .store(0u);
  }
}

// One kernel per row count, hcf_down_1 .. hcf_down_8 (and hcf_up_1 .. hcf_up_8 below), where one
// kernel with a switch over T would do: the OpenCL CPU compiler of runtime 2026.1.2 aborts at
// random (`free(): invalid pointer` in its pass sycl-kernel-reduce-cross-barrier-values, a
// reference into a map that its own inserts can move) on a kernel holding eight copies of these
// barriers, and never on one holding one (docs/sycl.md; MALLOC_PERTURB_ makes it abort every
// time). T is still passed: the argument lists are those of the one kernel they replace.
//
// One work-group of HCF_NSG sub-groups per (row group, slab): launch (r / rpg) * S * (n / w)
// groups of HCF_NSG * 16. Arguments:
//   a_x     (T, S, n) H (read; hcf_up writes H')
//   a_y     (T, n) pending write: the sublayer output, or 0
//   a_a     (T, S) pending write: its injection, or 0
//   a_g     (S, n) gamma (ggml [n, S])
//   a_wd    (r, S * n) W_down, format HCF_W
//   a_wi    (n_inj, S * n) W_inj, format HCF_INJ, or 0
//   a_part  (C, T, r + n_inj) slab partials, unscaled
//   a_ss    (C, T) slab sums of squares of H'
//   a_cnt   (1) arrival counter, 0 between launches
//   a_rs    (T, S) 1 / sqrt(mean(H'^2) + eps)
//   a_lo    (T, r) lo = W_down . (rs * H' * gamma)
//   a_u     (T, r) silu(lo / S), hcf_up's input
//   a_aprev (T, S) the pending a, kept for hcf_up
//   a_inj   (T, n_inj) 2 * sigmoid(z / S), or 0
#define HCF_DOWN_KERNEL(TN)                                                                        \
  STRATA_KERNEL void hcf_down_##TN(                                                                \
      uint64_t a_x, uint64_t a_y, uint64_t a_a, uint64_t a_g, uint64_t a_wd, uint64_t a_wi,        \
      uint64_t a_part, uint64_t a_ss, uint64_t a_cnt, uint64_t a_rs, uint64_t a_lo, uint64_t a_u,  \
      uint64_t a_aprev, uint64_t a_inj, int n, int S, int r, int n_inj, int T, int w, int rpg,     \
      float eps) {                                                                                 \
    static syclexp::work_group_static<float[HCF_TMAX * HCF_WMAX]> xs_mem;                          \
    static syclexp::work_group_static<float[HCF_NSG * HCF_TMAX]> red_mem;                          \
    static syclexp::work_group_static<float[HCF_TMAX * HCF_SMAX]> rs_mem;                          \
    static syclexp::work_group_static<unsigned> last_mem;                                          \
    unsigned &last = last_mem;                                                                     \
    const HcfDownMem mem{xs_mem, red_mem, rs_mem, &last};                                          \
    (void)T;                                                                                       \
    hcf_down_t<TN>(mem, a_x, a_y, a_a, a_g, a_wd, a_wi, a_part, a_ss, a_cnt, a_rs, a_lo, a_u,      \
                   a_aprev, a_inj, n, S, r, n_inj, w, rpg, eps);                                   \
  }
HCF_DOWN_KERNEL(1)
HCF_DOWN_KERNEL(2)
HCF_DOWN_KERNEL(3)
HCF_DOWN_KERNEL(4)
HCF_DOWN_KERNEL(5)
HCF_DOWN_KERNEL(6)
HCF_DOWN_KERNEL(7)
HCF_DOWN_KERNEL(8)
#undef HCF_DOWN_KERNEL

// The gate logits of the 16 columns k0 + l (lane l) of stream s over the K-part [e0, e0 + len).
// The 16 rows are read in memory order, RU side by side (one contiguous run of RU * len
// weights), and fold as a binary counter: rows 2q, 2q + 1 at step 8, those pairs at step 4, ...
// (four levels live, never a private array indexed at run time: that is per-lane memory, every
// access a gather; the branches on the row index are uniform). Row i ends in lane bitrev4(i);
// one shuffle puts column k0 + l in lane l.
template <int TN>
__attribute__((always_inline)) static inline void
hcf_up_part(const uint8_t *wu, size_t K, size_t r, int n, int s, int k0, int e0, const float *u,
            int len, int lane, sycl::sub_group sg, float (&p)[TN]) {
  constexpr int RU = hcf_ru<TN>();
  float l0[TN], l1[TN], l2[TN], l3[TN];
  for (int i0 = 0; i0 < 16; i0 += RU) {
    float acc[RU][TN];
    hcf_rows<HCF_W, TN, RU>(wu, K, r, (size_t)s * n + k0 + i0, 1, (size_t)e0, u + e0, r, len,
                            lane, acc);
#pragma unroll
    for (int kk = 0; kk < RU; ++kk) {
      const int i = i0 + kk;
#pragma unroll
      for (int t = 0; t < TN; ++t) {
        if ((i & 1) == 0) {
          l0[t] = acc[kk][t];
          continue;
        }
        float c = hcf_fold(l0[t], acc[kk][t], 8, lane, sg);
        if ((i & 2) == 0) {
          l1[t] = c;
          continue;
        }
        c = hcf_fold(l1[t], c, 4, lane, sg);
        if ((i & 4) == 0) {
          l2[t] = c;
          continue;
        }
        c = hcf_fold(l2[t], c, 2, lane, sg);
        if ((i & 8) == 0) {
          l3[t] = c;
          continue;
        }
        p[t] = hcf_fold(l3[t], c, 1, lane, sg);
      }
    }
  }
  const int from = ((lane & 1) << 3) | ((lane & 2) << 1) | ((lane & 4) >> 1) | ((lane & 8) >> 3);
#pragma unroll
  for (int t = 0; t < TN; ++t) p[t] = sycl::select_from_group(sg, p[t], from);
}

// One work-group of ks sub-groups per 16 columns; sub-group q takes the K-part [q * r / ks,
// (q + 1) * r / ks) of every row. Per stream: the parts through local memory, summed in part
// order by sub-group 0, which then runs the default read's epilogue for the stream (the pending
// write of R_out, the gate, the gated mean).
template <int TN>
__attribute__((always_inline)) static inline void
hcf_up_t(float *pm, uint64_t a_x, uint64_t a_y, uint64_t a_aprev, uint64_t a_g, uint64_t a_rs,
         uint64_t a_u, uint64_t a_wu, uint64_t a_mixed, int n, int S, int r, int ks) {
  auto it = syclext::this_work_item::get_nd_item<1>();
  auto sg = it.get_sub_group();
  const int lane = (int)sg.get_local_linear_id();
  const int part = (int)sg.get_group_linear_id();
  const size_t K = (size_t)S * n;
  const int k0 = (int)it.get_group(0) * 16;
  const float *u = STRATA_ADDR(const float, a_u);
  const uint8_t *wu = STRATA_ADDR(const uint8_t, a_wu);
  const float *rs = STRATA_ADDR(const float, a_rs);
  float *x = STRATA_ADDR(float, a_x);
  const float *g = STRATA_ADDR(const float, a_g);
  const int plen = r / ks; // a multiple of 32 (the launcher checks)
  float m[TN];
#pragma unroll
  for (int t = 0; t < TN; ++t) m[t] = 0.0f;
  for (int s = 0; s < S; ++s) {
    float p[TN];
    hcf_up_part<TN>(wu, K, (size_t)r, n, s, k0, part * plen, u, plen, lane, sg, p);
    if (ks > 1) { // (uniform: a kernel argument)
#pragma unroll
      for (int t = 0; t < TN; ++t) pm[(part * HCF_TMAX + t) * 16 + lane] = p[t];
      sycl::group_barrier(it.get_group());
#pragma unroll
      for (int t = 0; t < TN; ++t) {
        float v = 0.0f;
        for (int q = 0; q < ks; ++q) v += pm[(q * HCF_TMAX + t) * 16 + lane];
        p[t] = v;
      }
      sycl::group_barrier(it.get_group()); // (every part read before the next stream's writes)
    }
    if (part == 0) {
      const size_t col = (size_t)s * n + k0 + lane;
      const float gl = g[col];
#pragma unroll
      for (int t = 0; t < TN; ++t) {
        // the pending write, R_out: this lane is the one work-item that owns x[t, s, k0 + lane]
        // (and reads y[t, k0 + lane] before it writes mixed there: mixed may be y)
        float h = x[t * K + col];
        if (a_y != 0) {
#pragma clang fp contract(off)
          h = h + STRATA_ADDR(const float, a_aprev)[t * S + s] *
                      STRATA_ADDR(const float, a_y)[(size_t)t * n + k0 + lane];
          x[t * K + col] = h;
        }
        const float gate = 1.0f / (1.0f + sycl::exp(-p[t]));
        const float xg = h * gl;
        m[t] = sycl::fma(gate, rs[t * S + s] * xg, m[t]);
      }
    }
  }
  if (part == 0) {
    float *mixed = STRATA_ADDR(float, a_mixed);
#pragma unroll
    for (int t = 0; t < TN; ++t) mixed[(size_t)t * n + k0 + lane] = m[t] / (float)S;
  }
}

// ks (1..HCF_KSMAX) sub-groups per 16 columns: launch n / 16 groups of ks * 16; one kernel
// per row count (hcf_down's comment says why). Arguments:
//   a_x     (T, S, n) H in, H' = R_out out (in place)
//   a_y     (T, n) pending write: the sublayer output, or 0
//   a_aprev (T, S) the pending a (hcf_down's copy)
//   a_g     (S, n) gamma
//   a_rs    (T, S)
//   a_u     (T, r) silu(lo / S)
//   a_wu    (S * n, r) W_up, format HCF_W
//   a_mixed (T, n) the gated stream mean
#define HCF_UP_KERNEL(TN)                                                                          \
  STRATA_KERNEL void hcf_up_##TN(uint64_t a_x, uint64_t a_y, uint64_t a_aprev, uint64_t a_g,       \
                                 uint64_t a_rs, uint64_t a_u, uint64_t a_wu, uint64_t a_mixed,     \
                                 int n, int S, int r, int T, int ks) {                             \
    /* (ks, T, 16) */                                                                              \
    static syclexp::work_group_static<float[HCF_KSMAX * HCF_TMAX * 16]> p_mem;                     \
    float *pm = p_mem;                                                                             \
    (void)T;                                                                                       \
    hcf_up_t<TN>(pm, a_x, a_y, a_aprev, a_g, a_rs, a_u, a_wu, a_mixed, n, S, r, ks);              \
  }
HCF_UP_KERNEL(1)
HCF_UP_KERNEL(2)
HCF_UP_KERNEL(3)
HCF_UP_KERNEL(4)
HCF_UP_KERNEL(5)
HCF_UP_KERNEL(6)
HCF_UP_KERNEL(7)
HCF_UP_KERNEL(8)
#undef HCF_UP_KERNEL
