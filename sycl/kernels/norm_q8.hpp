// RMSNorm + 8-bit block rounding of one row, shared by norm_q8.cpp's kernels and the norm tail
// of the decode products (mmvq_tiled.cpp -DCFG_NORM_TAIL): the same code, so the same bits.
// The caller names the row and the call's row count (the stage's layout needs the total);
// a 16-lane sub-group works on the row. Not built with -ffast-math (the rounding's division
// and rint must stay exact).
#include <sycl/sycl.hpp>

// Writes round_B(val(i)) for i < n into yr, block by block; val(i) is only asked for elements
// this lane owns (i % 16 == lane). st (st.st nullptr: none): the staged output of xstage.hpp,
// for all rows * n elements (this row's blocks from row * n / B).
template <int B, typename F>
static inline void store_rounded(sycl::sub_group sg, int lane, int n, size_t row, size_t rows,
                                 float *yr, XSt st, F val) {
  const size_t total = rows * (size_t)n;
  for (int b0 = 0; b0 < n; b0 += B) {
    if (B == 32) {
      float y0, y1;
      const float dh = q8_32_round(sg, val(b0 + lane), val(b0 + 16 + lane), y0, y1);
      yr[b0 + lane] = y0;
      yr[b0 + 16 + lane] = y1;
      xstage_block(sg, lane, st, total, (row * n + b0) / 32, y0, y1, dh); // xstage.hpp
    } else {
      float v[16];
      for (int k = 0; k < 16; k++) v[k] = val(b0 + k * 16 + lane);
      const float d = q8_256_round(sg, lane, v);
      for (int k = 0; k < 16; k++) yr[b0 + k * 16 + lane] = v[k];
      xstage_block256(sg, lane, st, (row * n + b0) / 256, v, d); // xstage.hpp
    }
  }
}

// yq[row] = round_B(rms_norm(x[row]) * w), row `row` of a call over `rows` rows.
template <int B>
static inline void rms_norm_q8_row(sycl::sub_group sg, int lane, const float *x, const float *w,
                                   float *yq, XSt st, int n, float eps, size_t row,
                                   size_t rows) {
  const float *xr = x + row * n;
  const float inv = row_inv_rms(xr, n, eps, lane, sg);
  store_rounded<B>(sg, lane, n, row, rows, yq + row * n, st,
                   [&](int i) { return (xr[i] * inv) * w[i]; });
}

// res[row] += rms_norm(a[row]) * w1; yq[row] = round_B(rms_norm(res[row]) * w2) (Gemma's
// post-norm into the residual, then the next norm), row `row` of a call over `rows` rows. A
// lane touches only elements lane + 16k of the row, so the in-place update needs no barrier.
template <int B>
static inline void norm_add_norm_q8_row(sycl::sub_group sg, int lane, const float *a,
                                        const float *w1, float *res, const float *w2, float *yq,
                                        XSt st, int n, float eps, size_t row, size_t rows) {
  const float *ar = a + row * n;
  float *rr = res + row * n;
  const float inv1 = row_inv_rms(ar, n, eps, lane, sg);
  for (int c = 0; c * 16 < n; c++) {
    const int i = c * 16 + lane;
    if (i < n) rr[i] = rr[i] + (ar[i] * inv1) * w1[i]; // as norm.cpp's rms_norm_add
  }
  const float inv2 = row_inv_rms(rr, n, eps, lane, sg);
  store_rounded<B>(sg, lane, n, row, rows, yq + row * n, st,
                   [&](int i) { return (rr[i] * inv2) * w2[i]; });
}

// The arrival counter of a launch whose last work-group does extra work after every other
// work-group's (reduce.cpp's pattern), for launches whose work-group is one sub-group (sg):
// true in the work-group that arrives last, which then sees every work-group's stores made
// before its arrival. That work-group calls arrival_reset when done (zero between launches).
static inline bool arrived_last(unsigned *cnt, sycl::sub_group sg, int lane) {
  auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  // this lane's stores, device-visible before the increment that publishes them
  sycl::atomic_fence(sycl::memory_order::release, sycl::memory_scope::device);
  sycl::group_barrier(sg);
  unsigned l = 0;
  if (lane == 0) {
    sycl::atomic_ref<unsigned, sycl::memory_order::acq_rel, sycl::memory_scope::device,
                     sycl::access::address_space::global_space>
        arrivals(*cnt);
    l = arrivals.fetch_add(1u) == (unsigned)it.get_group_range(0) - 1 ? 1u : 0u;
  }
  l = sycl::group_broadcast(sg, l, 0);
  if (l != 0u) {
    // every lane of the last group sees every group's stores
    sycl::atomic_fence(sycl::memory_order::acquire, sycl::memory_scope::device);
  }
  return l != 0u;
}

static inline void arrival_reset(unsigned *cnt, int lane) {
  if (lane == 0)
    sycl::atomic_ref<unsigned, sycl::memory_order::relaxed, sycl::memory_scope::device,
                     sycl::access::address_space::global_space>(*cnt)
        .store(0u);
}
