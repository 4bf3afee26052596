// USM memory (allocate, free, copy, fill, copy across contexts) and events: the shim's memory side.
#include "strata_shim_internal.hpp"

using namespace strata_shim;

extern "C" {

strata_status strata_malloc(StrataQueue *q, strata_usm_kind kind, size_t bytes, size_t align,
                            void **out) {
  return guard("USM allocation", [&] {
    need(q, "queue");
    need(out, "out");
    auto k = kind == STRATA_USM_DEVICE ? sycl::usm::alloc::device
             : kind == STRATA_USM_HOST ? sycl::usm::alloc::host
                                       : sycl::usm::alloc::shared;
    size_t a = align ? align : 64;
    // On the CPU device, device memory is host memory: large blocks start on a 2 MiB boundary and
    // ask for transparent huge pages before the first touch (the hardware prefetcher stops at
    // 4 KiB page edges; a cold streaming GEMV measured 21.6 -> 24.3 GB/s, docs/performance.md).
    const size_t huge = size_t(2) << 20;
    const bool thp = k != sycl::usm::alloc::host && bytes >= huge && q->q.get_device().is_cpu();
    if (thp) a = std::max(a, huge);
    void *p = sycl::aligned_alloc(a, std::max<size_t>(bytes, 1), q->q, k);
    if (!p)
      fail(STRATA_ERR, "USM allocation of " + std::to_string(bytes) + " bytes failed (out of memory?)");
    // advice only: a kernel without THP support refuses it and the memory works as before
    if (thp && reinterpret_cast<uintptr_t>(p) % huge == 0) (void)madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
    *out = p;
  });
}

void strata_free(const StrataContext *ctx, void *ptr) {
  if (!ctx || !ptr) return;
  try {
    sycl::free(ptr, ctx->c);
  } catch (...) {
  }
}

strata_status strata_memcpy(StrataQueue *q, void *dst, const void *src, size_t bytes,
                            StrataEvent **ev) {
  return guard("memcpy", [&] {
    need(q, "queue");
    if (bytes && (!dst || !src)) fail(STRATA_ERR_INVALID, "memcpy: null pointer");
    give_event(ev, q->q.memcpy(dst, src, bytes));
  });
}

strata_status strata_fill(StrataQueue *q, void *dst, const void *pattern, size_t pattern_size,
                          size_t count, StrataEvent **ev) {
  return guard("fill", [&] {
    need(q, "queue");
    need(pattern, "pattern");
    if (count && !dst) fail(STRATA_ERR_INVALID, "fill: null destination");
    sycl::event e;
    switch (pattern_size) {
    case 1: e = q->q.memset(dst, *static_cast<const uint8_t *>(pattern), count); break;
    case 2: e = q->q.fill(static_cast<uint16_t *>(dst), *static_cast<const uint16_t *>(pattern), count); break;
    case 4: e = q->q.fill(static_cast<uint32_t *>(dst), *static_cast<const uint32_t *>(pattern), count); break;
    case 8: e = q->q.fill(static_cast<uint64_t *>(dst), *static_cast<const uint64_t *>(pattern), count); break;
    default: fail(STRATA_ERR_INVALID, "fill: pattern size must be 1, 2, 4 or 8 bytes");
    }
    give_event(ev, e);
  });
}

strata_status strata_copy_across(StrataQueue *q_src, const void *src, StrataQueue *q_dst, void *dst,
                                 size_t bytes, void *staging, size_t staging_bytes) {
  return guard("cross-device copy", [&] {
    need(q_src, "source queue");
    need(q_dst, "destination queue");
    if (bytes == 0) return;
    if (!src || !dst) fail(STRATA_ERR_INVALID, "cross-device copy: null pointer");
    void *tmp = staging;
    size_t chunk = staging_bytes;
    if (!tmp) {
      chunk = std::min<size_t>(bytes, size_t(64) << 20);
      tmp = sycl::malloc_host(chunk, q_src->q);
      if (!tmp) fail(STRATA_ERR, "cross-device copy: malloc_host of staging memory failed");
    } else if (chunk == 0) {
      fail(STRATA_ERR_INVALID, "cross-device copy: staging buffer of 0 bytes");
    }
    struct Free {
      void *p;
      const sycl::context &c;
      ~Free() {
        if (p) sycl::free(p, c);
      }
    } owned{staging ? nullptr : tmp, q_src->q.get_context()};
    // The destination queue may still be running kernels that read the old contents.
    q_dst->q.wait_and_throw();
    for (size_t off = 0; off < bytes; off += chunk) {
      size_t n = std::min(chunk, bytes - off);
      q_src->q.memcpy(tmp, static_cast<const char *>(src) + off, n).wait_and_throw();
      q_dst->q.memcpy(static_cast<char *>(dst) + off, tmp, n).wait_and_throw();
    }
  });
}

strata_status strata_event_wait(StrataEvent *e) {
  return guard("event wait", [&] {
    need(e, "event");
    e->e.wait_and_throw();
  });
}

strata_status strata_event_profiling(StrataEvent *e, uint64_t *submit, uint64_t *start,
                                     uint64_t *end) {
  return guard("event profiling", [&] {
    need(e, "event");
    e->e.wait_and_throw();
    namespace ep = sycl::info::event_profiling;
    if (submit) *submit = e->e.get_profiling_info<ep::command_submit>();
    if (start) *start = e->e.get_profiling_info<ep::command_start>();
    if (end) *end = e->e.get_profiling_info<ep::command_end>();
  });
}

void strata_event_free(StrataEvent *e) { delete e; }

} // extern "C"
