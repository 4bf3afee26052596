// Buffers as addresses. The decode-path kernels declare their buffers `uint64_t` and cast them
// back with STRATA_ADDR: the OpenCL CPU runtime does bookkeeping for every USM pointer argument
// of every launch (1.5-3 us each, docs/performance.md, session 4), an address is 8 plain bytes.
// Rust side: `Arg::addr` / `Arg::addr_at` (engine/sycl/module.rs). Prepended by the kernel table
// (engine/sycl/kernels.rs) to the files that use it.
#ifndef STRATA_ADDR_HPP
#define STRATA_ADDR_HPP
#include <cstdint>
#define STRATA_ADDR(T, a) reinterpret_cast<T *>(static_cast<uintptr_t>(a))
#endif
