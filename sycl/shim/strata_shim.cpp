// The one translation unit that includes <sycl/sycl.hpp> (it costs ~10+ s to compile, so the whole
// shim lives here). Every entry point runs its body inside guard(), which turns any exception into
// a status + thread-local message: nothing throws across the C boundary.
#include "strata_shim.h"

#include <sycl/sycl.hpp>
#include <sycl/backend/opencl.hpp>
#include <sycl/ext/oneapi/experimental/enqueue_functions.hpp>

#include <algorithm>
#include <cstdint>
#include <dlfcn.h>
#include <sys/mman.h>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace syclex = sycl::ext::oneapi::experimental;

struct StrataDevice { sycl::device d; };
struct StrataContext { sycl::context c; };
struct StrataQueue { sycl::queue q; };
struct StrataEvent { sycl::event e; };
struct NativeProgram; // an OpenCL program loaded from device binaries (below)
// A module built from source (kb) or loaded from device binaries (native); one of the two.
struct StrataModule {
  sycl::context ctx;
  std::vector<sycl::device> devs;
  std::optional<sycl::kernel_bundle<sycl::bundle_state::executable>> kb;
  std::shared_ptr<NativeProgram> native;
};
struct StrataKernel { sycl::kernel k; };
struct StrataGraph { syclex::command_graph<syclex::graph_state::modifiable> g; };
struct StrataExecGraph { syclex::command_graph<syclex::graph_state::executable> g; };

namespace {

thread_local std::string g_last_error;

struct ShimError {
  strata_status status;
  std::string msg;
};

[[noreturn]] void fail(strata_status s, std::string msg) { throw ShimError{s, std::move(msg)}; }

template <typename F> strata_status guard(const char *what, F &&f) {
  try {
    f();
    return STRATA_OK;
  } catch (const ShimError &e) {
    g_last_error = e.msg;
    return e.status;
  } catch (const sycl::exception &e) {
    g_last_error = std::string(what) + ": " + e.what();
    return e.code() == sycl::errc::build ? STRATA_ERR_BUILD : STRATA_ERR;
  } catch (const std::exception &e) {
    g_last_error = std::string(what) + ": " + e.what();
    return STRATA_ERR;
  } catch (...) {
    g_last_error = std::string(what) + ": unknown C++ exception";
    return STRATA_ERR;
  }
}

template <typename T> void need(const T *p, const char *name) {
  if (!p) fail(STRATA_ERR_INVALID, std::string("null ") + name);
}

void copy_str(char *dst, size_t cap, const std::string &s) {
  size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = 0;
}

const char *backend_name(sycl::backend b) {
  switch (b) {
  case sycl::backend::opencl: return "opencl";
  case sycl::backend::ext_oneapi_level_zero: return "level_zero";
  case sycl::backend::ext_oneapi_cuda: return "cuda";
  case sycl::backend::ext_oneapi_hip: return "hip";
  case sycl::backend::ext_oneapi_native_cpu: return "native_cpu";
  default: return "other";
  }
}

std::vector<sycl::platform> platforms() { return sycl::platform::get_platforms(); }

void hand_out(const std::vector<sycl::device> &devs, StrataDevice **out, size_t cap, size_t *n) {
  *n = devs.size();
  for (size_t i = 0; i < devs.size() && i < cap; i++) out[i] = new StrataDevice{devs[i]};
}

template <int D> sycl::nd_range<D> make_range(const size_t *g, const size_t *l) {
  if constexpr (D == 1) return {sycl::range<1>{g[0]}, sycl::range<1>{l[0]}};
  else if constexpr (D == 2) return {sycl::range<2>{g[0], g[1]}, sycl::range<2>{l[0], l[1]}};
  else return {sycl::range<3>{g[0], g[1], g[2]}, sycl::range<3>{l[0], l[1], l[2]}};
}

void give_event(StrataEvent **ev, const sycl::event &e) {
  if (ev) *ev = new StrataEvent{e};
}

// ---- OpenCL entry points, for the device binaries of the kernel binary cache ----
// The shim does not link libOpenCL: by the time a module exists on an OpenCL device the runtime's
// OpenCL adapter has loaded it (from the runtime's lib/), and dlopen(RTLD_NOLOAD) finds that copy.
// Looked up once; a process without it simply has no binary export (the source path stays).
struct OclApi {
  decltype(&clGetProgramInfo) GetProgramInfo = nullptr;
  decltype(&clGetProgramBuildInfo) GetProgramBuildInfo = nullptr;
  decltype(&clCreateProgramWithBinary) CreateProgramWithBinary = nullptr;
  decltype(&clBuildProgram) BuildProgram = nullptr;
  decltype(&clCreateKernel) CreateKernel = nullptr;
  decltype(&clGetKernelInfo) GetKernelInfo = nullptr;
  decltype(&clReleaseProgram) ReleaseProgram = nullptr;
  decltype(&clReleaseKernel) ReleaseKernel = nullptr;
  decltype(&clReleaseContext) ReleaseContext = nullptr;
  decltype(&clReleaseDevice) ReleaseDevice = nullptr;
  std::string missing; // empty when every entry point was found
};

const OclApi &ocl_api() {
  static const OclApi api = [] {
    OclApi a;
    void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libOpenCL.so.1", RTLD_NOW);
    if (!h) {
      const char *e = dlerror();
      a.missing = std::string("libOpenCL.so.1 cannot be loaded: ") + (e ? e : "?");
      return a;
    }
    auto get = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && a.missing.empty()) a.missing = std::string("libOpenCL.so.1 has no ") + name;
    };
    get(a.GetProgramInfo, "clGetProgramInfo");
    get(a.GetProgramBuildInfo, "clGetProgramBuildInfo");
    get(a.CreateProgramWithBinary, "clCreateProgramWithBinary");
    get(a.BuildProgram, "clBuildProgram");
    get(a.CreateKernel, "clCreateKernel");
    get(a.GetKernelInfo, "clGetKernelInfo");
    get(a.ReleaseProgram, "clReleaseProgram");
    get(a.ReleaseKernel, "clReleaseKernel");
    get(a.ReleaseContext, "clReleaseContext");
    get(a.ReleaseDevice, "clReleaseDevice");
    return a;
  }();
  return api;
}

// The OpenCL API of this process, or STRATA_ERR_UNSUPPORTED naming why there is none.
const OclApi &need_ocl(const char *what, const sycl::context &c) {
  if (c.get_backend() != sycl::backend::opencl)
    fail(STRATA_ERR_UNSUPPORTED, std::string(what) + ": device binaries are only taken from and " +
                                     "loaded into OpenCL devices, not " + backend_name(c.get_backend()));
  const OclApi &cl = ocl_api();
  if (!cl.missing.empty()) fail(STRATA_ERR_UNSUPPORTED, std::string(what) + ": " + cl.missing);
  return cl;
}

// Owners of the OpenCL handles get_native hands out (each retained for the caller).
template <typename H> struct ClRef {
  H h = nullptr;
  cl_int (*release)(H) = nullptr;
  ClRef() = default;
  ClRef(H handle, cl_int (*rel)(H)) : h(handle), release(rel) {}
  ClRef(ClRef &&o) noexcept : h(o.h), release(o.release) { o.h = nullptr; }
  ClRef(const ClRef &) = delete;
  ClRef &operator=(const ClRef &) = delete;
  ~ClRef() {
    if (h && release) release(h);
  }
};

std::string cl_error(const char *call, cl_int err) {
  return std::string(call) + " failed (OpenCL error " + std::to_string(err) + ")";
}

// The serialised module (strata_module_export). Host byte order: the cache it lives in is keyed
// by this machine's device and runtime anyway.
constexpr uint32_t kBlobMagic = 0x444f4d53; // "SMOD"
constexpr uint32_t kBlobVersion = 2; // also in strata_runtime_version()
constexpr uint32_t kBlobOpenCL = 1;

struct BlobWriter {
  std::vector<uint8_t> out;
  template <typename T> void num(T v) {
    const auto *p = reinterpret_cast<const uint8_t *>(&v);
    out.insert(out.end(), p, p + sizeof v);
  }
  void bytes(const void *p, size_t n) {
    num<uint64_t>(n);
    const auto *b = static_cast<const uint8_t *>(p);
    out.insert(out.end(), b, b + n);
  }
};

struct BlobReader {
  const uint8_t *p;
  size_t len, at = 0;
  void need_bytes(size_t n, const char *what) {
    if (n > len - at)
      fail(STRATA_ERR_INVALID, std::string("kernel binary: truncated (") + what + " at byte " +
                                   std::to_string(at) + " of " + std::to_string(len) + ")");
  }
  template <typename T> T num(const char *what) {
    need_bytes(sizeof(T), what);
    T v;
    std::memcpy(&v, p + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::pair<const uint8_t *, size_t> bytes(const char *what) {
    auto n = num<uint64_t>(what);
    need_bytes(n, what);
    auto r = std::make_pair(p + at, size_t(n));
    at += n;
    return r;
  }
  std::string str(const char *what) {
    auto [b, n] = bytes(what);
    return std::string(reinterpret_cast<const char *>(b), n);
  }
};

} // namespace

// The OpenCL programs of a module loaded from device binaries (the compiler may split a module's
// kernels over several device images: one program each), and where each kernel is.
struct NativeKernel {
  std::string name; // the extern "C" name
  std::string raw;  // its name in the binary
  size_t program;
};
struct NativeProgram {
  std::vector<cl_program> progs;
  std::vector<NativeKernel> kernels;
  NativeProgram() = default;
  NativeProgram(const NativeProgram &) = delete;
  NativeProgram &operator=(const NativeProgram &) = delete;
  ~NativeProgram() {
    for (auto p : progs) ocl_api().ReleaseProgram(p);
  }
};

extern "C" {

const char *strata_last_error(void) { return g_last_error.c_str(); }

strata_status strata_platform_count(size_t *n) {
  return guard("platform enumeration", [&] {
    need(n, "n");
    *n = platforms().size();
  });
}

strata_status strata_platform_info(size_t index, StrataPlatformInfo *out) {
  return guard("platform info", [&] {
    need(out, "out");
    auto ps = platforms();
    if (index >= ps.size()) fail(STRATA_ERR_INVALID, "platform index out of range");
    const auto &p = ps[index];
    std::memset(out, 0, sizeof *out);
    copy_str(out->name, sizeof out->name, p.get_info<sycl::info::platform::name>());
    copy_str(out->vendor, sizeof out->vendor, p.get_info<sycl::info::platform::vendor>());
    copy_str(out->version, sizeof out->version, p.get_info<sycl::info::platform::version>());
    copy_str(out->backend, sizeof out->backend, backend_name(p.get_backend()));
  });
}

strata_status strata_platform_devices(size_t platform, StrataDevice **out, size_t cap, size_t *n) {
  return guard("device enumeration", [&] {
    need(n, "n");
    auto ps = platforms();
    if (platform >= ps.size()) fail(STRATA_ERR_INVALID, "platform index out of range");
    hand_out(ps[platform].get_devices(), out, cap, n);
  });
}

strata_status strata_device_info(const StrataDevice *dev, StrataDeviceInfo *out) {
  return guard("device info", [&] {
    need(dev, "device");
    need(out, "out");
    const auto &d = dev->d;
    namespace di = sycl::info::device;
    std::memset(out, 0, sizeof *out);
    copy_str(out->name, sizeof out->name, d.get_info<di::name>());
    copy_str(out->vendor, sizeof out->vendor, d.get_info<di::vendor>());
    copy_str(out->platform, sizeof out->platform,
             d.get_platform().get_info<sycl::info::platform::name>());
    copy_str(out->backend, sizeof out->backend, backend_name(d.get_backend()));
    copy_str(out->driver_version, sizeof out->driver_version, d.get_info<di::driver_version>());
    copy_str(out->version, sizeof out->version, d.get_info<di::version>());
    out->device_type = d.is_cpu() ? 1 : d.is_gpu() ? 2 : d.is_accelerator() ? 3 : 0;
    out->compute_units = d.get_info<di::max_compute_units>();
    out->global_mem = d.get_info<di::global_mem_size>();
    out->local_mem = d.get_info<di::local_mem_size>();
    out->max_alloc = d.get_info<di::max_mem_alloc_size>();
    out->max_work_group = d.get_info<di::max_work_group_size>();
    auto sgs = d.get_info<di::sub_group_sizes>();
    for (size_t i = 0; i < sgs.size() && i < 16; i++) out->sub_group_sizes[i] = (uint32_t)sgs[i];
    out->n_sub_group_sizes = (uint32_t)std::min<size_t>(sgs.size(), 16);
    out->partition_max_sub_devices = d.get_info<di::partition_max_sub_devices>();
    out->native_vector_width_float = d.get_info<di::native_vector_width_float>();
    out->fp16 = d.has(sycl::aspect::fp16);
    out->fp64 = d.has(sycl::aspect::fp64);
    out->graph = d.has(sycl::aspect::ext_oneapi_graph)           ? 2
                 : d.has(sycl::aspect::ext_oneapi_limited_graph) ? 1
                                                                 : 0;
    // info::device::parent_device throws on a root device; ask the partition type instead.
    out->is_sub_device = d.get_info<di::partition_type_property>() !=
                         sycl::info::partition_property::no_partition;
    out->usm_device = d.has(sycl::aspect::usm_device_allocations);
    out->usm_host = d.has(sycl::aspect::usm_host_allocations);
    out->usm_shared = d.has(sycl::aspect::usm_shared_allocations);
    out->profiling = d.has(sycl::aspect::queue_profiling);
  });
}

strata_status strata_device_partition_equally(const StrataDevice *dev, uint32_t cus_per_sub,
                                              StrataDevice **out, size_t cap, size_t *n) {
  return guard("partition_equally", [&] {
    need(dev, "device");
    need(n, "n");
    if (cus_per_sub == 0) fail(STRATA_ERR_INVALID, "partition_equally: 0 compute units per sub-device");
    auto subs = dev->d.create_sub_devices<sycl::info::partition_property::partition_equally>(
        cus_per_sub);
    hand_out(subs, out, cap, n);
  });
}

int strata_device_equal(const StrataDevice *a, const StrataDevice *b) {
  return a && b && a->d == b->d;
}

void strata_device_free(StrataDevice *d) { delete d; }

strata_status strata_context_create(const StrataDevice *const *devs, size_t n, StrataContext **out) {
  return guard("context creation", [&] {
    need(out, "out");
    if (n == 0) fail(STRATA_ERR_INVALID, "context creation: no devices");
    std::vector<sycl::device> v;
    for (size_t i = 0; i < n; i++) {
      need(devs[i], "device");
      v.push_back(devs[i]->d);
    }
    *out = new StrataContext{sycl::context(v)};
  });
}

void strata_context_free(StrataContext *c) { delete c; }

strata_status strata_queue_create(const StrataContext *ctx, const StrataDevice *dev, int profiling,
                                  StrataQueue **out) {
  return guard("queue creation", [&] {
    need(ctx, "context");
    need(dev, "device");
    need(out, "out");
    sycl::property_list props =
        profiling ? sycl::property_list{sycl::property::queue::in_order{},
                                        sycl::property::queue::enable_profiling{}}
                  : sycl::property_list{sycl::property::queue::in_order{}};
    *out = new StrataQueue{sycl::queue(ctx->c, dev->d, props)};
  });
}

void strata_queue_free(StrataQueue *q) {
  if (!q) return;
  // Drain first so no command still references memory the caller frees next.
  try {
    q->q.wait();
  } catch (...) {
  }
  delete q;
}

strata_status strata_queue_wait(StrataQueue *q) {
  return guard("queue wait", [&] {
    need(q, "queue");
    q->q.wait_and_throw();
  });
}

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

namespace {
// The devices a module is for: devs, or all of the context's when none are given.
std::vector<sycl::device> module_devices(const StrataContext *ctx, const StrataDevice *const *devs,
                                         size_t n_devs) {
  std::vector<sycl::device> dv;
  if (n_devs && !devs) fail(STRATA_ERR_INVALID, "null device array");
  for (size_t i = 0; i < n_devs; i++) {
    need(devs[i], "device");
    dv.push_back(devs[i]->d);
  }
  if (dv.empty()) dv = ctx->c.get_devices();
  return dv;
}

std::vector<std::string> split_names(const std::string &list) {
  std::vector<std::string> v;
  size_t at = 0;
  while (at <= list.size()) {
    size_t end = list.find(';', at);
    if (end == std::string::npos) end = list.size();
    if (end > at) v.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return v;
}

// The extern "C" names of the kernels in `p` (a program of the source-built bundle kb), each with
// its name in the binary. The kernel compiler names a free-function kernel "__sycl_kernel_" +
// its name; each pair is confirmed by the bundle, and a kernel whose argument count differs
// between the bundle and the binary (an argument the compiler dropped, which the runtime would
// skip on the source path only) makes the module unexportable.
std::vector<std::pair<std::string, std::string>>
kernel_names(const OclApi &cl, cl_program p, sycl::kernel_bundle<sycl::bundle_state::executable> kb) {
  size_t n = 0;
  cl_int err = cl.GetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &n);
  if (err != CL_SUCCESS) fail(STRATA_ERR, cl_error("clGetProgramInfo(KERNEL_NAMES)", err));
  std::string list(n, '\0');
  err = cl.GetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, n, list.data(), nullptr);
  if (err != CL_SUCCESS) fail(STRATA_ERR, cl_error("clGetProgramInfo(KERNEL_NAMES)", err));
  list.resize(std::strlen(list.c_str()));
  const std::string prefix = "__sycl_kernel_";
  std::vector<std::pair<std::string, std::string>> names;
  for (const auto &raw : split_names(list)) {
    if (raw.compare(0, prefix.size(), prefix) != 0) continue;
    std::string name = raw.substr(prefix.size());
    if (!kb.ext_oneapi_has_kernel(name) || kb.ext_oneapi_get_raw_kernel_name(name) != raw) continue;
    cl_kernel ck = cl.CreateKernel(p, raw.c_str(), &err);
    if (err != CL_SUCCESS) fail(STRATA_ERR, cl_error(("clCreateKernel(" + raw + ")").c_str(), err));
    ClRef<cl_kernel> owned(ck, cl.ReleaseKernel);
    cl_uint native_args = 0;
    err = cl.GetKernelInfo(ck, CL_KERNEL_NUM_ARGS, sizeof native_args, &native_args, nullptr);
    if (err != CL_SUCCESS) fail(STRATA_ERR, cl_error("clGetKernelInfo(NUM_ARGS)", err));
    auto sycl_args = kb.ext_oneapi_get_kernel(name).get_info<sycl::info::kernel::num_args>();
    if (sycl_args != native_args)
      fail(STRATA_ERR_UNSUPPORTED, "binary export: kernel '" + name + "' takes " +
                                       std::to_string(sycl_args) + " arguments in SYCL but " +
                                       std::to_string(native_args) + " in its binary");
    names.emplace_back(std::move(name), raw);
  }
  return names;
}
} // namespace

strata_status strata_module_build(const StrataContext *ctx, const StrataDevice *const *devs,
                                  size_t n_devs, const char *source, const char *const *options,
                                  size_t n_options, StrataModule **out, char **log) {
  return guard("kernel build", [&] {
    need(ctx, "context");
    need(source, "source");
    need(out, "out");
    std::vector<sycl::device> dv = module_devices(ctx, devs, n_devs);
    std::vector<std::string> opts;
    for (size_t i = 0; i < n_options; i++) {
      need(options[i], "option");
      opts.emplace_back(options[i]);
    }
    std::string text(source);
    auto src = syclex::create_kernel_bundle_from_source(ctx->c, syclex::source_language::sycl, text);
    std::string blog;
    try {
      auto exe = syclex::build(src, dv,
                               syclex::properties{syclex::build_options{opts}, syclex::save_log{&blog}});
      *out = new StrataModule{ctx->c, dv, exe, nullptr};
    } catch (const sycl::exception &e) {
      // The diagnostics are in what(); save_log stays empty on a failed build.
      std::string msg = e.what();
      if (!blog.empty()) msg += "\n" + blog;
      fail(e.code() == sycl::errc::build ? STRATA_ERR_BUILD : STRATA_ERR, msg);
    }
    if (log) {
      *log = static_cast<char *>(std::malloc(blog.size() + 1));
      if (*log) std::memcpy(*log, blog.c_str(), blog.size() + 1);
    }
  });
}

void strata_module_free(StrataModule *m) { delete m; }
void strata_string_free(char *s) { std::free(s); }
void strata_bytes_free(uint8_t *p) { std::free(p); }

const char *strata_runtime_version(void) {
#define STRATA_STR2(x) #x
#define STRATA_STR(x) STRATA_STR2(x)
  // + the layout of strata_module_export's bytes, so that another shim's entries are misses
  return "libsycl " STRATA_STR(__LIBSYCL_MAJOR_VERSION) "." STRATA_STR(__LIBSYCL_MINOR_VERSION) "." STRATA_STR(
      __LIBSYCL_PATCH_VERSION) " compiler " STRATA_STR(__SYCL_COMPILER_VERSION) " export 2";
#undef STRATA_STR
#undef STRATA_STR2
}

strata_status strata_module_export(const StrataModule *m, uint8_t **blob, size_t *len) {
  return guard("kernel binary export", [&] {
    need(m, "module");
    need(blob, "blob");
    need(len, "len");
    if (!m->kb) fail(STRATA_ERR_INVALID, "binary export: the module was loaded from binaries, not built");
    const OclApi &cl = need_ocl("binary export", m->ctx);
    auto programs = sycl::get_native<sycl::backend::opencl>(*m->kb);
    std::vector<ClRef<cl_program>> owned;
    for (auto p : programs) owned.emplace_back(p, cl.ReleaseProgram);
    std::vector<ClRef<cl_device_id>> ids; // the module's devices, in its order
    for (const auto &d : m->devs) ids.emplace_back(sycl::get_native<sycl::backend::opencl>(d), cl.ReleaseDevice);
    BlobWriter w;
    w.num<uint32_t>(kBlobMagic);
    w.num<uint32_t>(kBlobVersion);
    w.num<uint32_t>(kBlobOpenCL);
    w.num<uint32_t>(uint32_t(programs.size()));
    size_t n_kernels = 0;
    for (cl_program p : programs) {
      cl_uint n_prog_devs = 0;
      cl_int err = cl.GetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof n_prog_devs, &n_prog_devs, nullptr);
      if (err != CL_SUCCESS) fail(STRATA_ERR, cl_error("clGetProgramInfo(NUM_DEVICES)", err));
      std::vector<cl_device_id> prog_devs(n_prog_devs);
      std::vector<size_t> sizes(n_prog_devs);
      err = cl.GetProgramInfo(p, CL_PROGRAM_DEVICES, sizeof(cl_device_id) * n_prog_devs, prog_devs.data(), nullptr);
      if (err == CL_SUCCESS)
        err = cl.GetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof(size_t) * n_prog_devs, sizes.data(), nullptr);
      if (err != CL_SUCCESS) fail(STRATA_ERR, cl_error("clGetProgramInfo(DEVICES/BINARY_SIZES)", err));
      std::vector<std::vector<uint8_t>> bins(n_prog_devs);
      std::vector<uint8_t *> ptrs(n_prog_devs);
      for (cl_uint i = 0; i < n_prog_devs; i++) {
        bins[i].resize(sizes[i]);
        ptrs[i] = bins[i].data();
      }
      err = cl.GetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof(uint8_t *) * n_prog_devs, ptrs.data(), nullptr);
      if (err != CL_SUCCESS) fail(STRATA_ERR, cl_error("clGetProgramInfo(BINARIES)", err));
      auto names = kernel_names(cl, p, *m->kb);
      n_kernels += names.size();
      w.num<uint32_t>(uint32_t(names.size()));
      for (const auto &[name, raw] : names) {
        w.bytes(name.data(), name.size());
        w.bytes(raw.data(), raw.size());
      }
      // one binary per module device, in the module's device order
      w.num<uint32_t>(uint32_t(ids.size()));
      for (size_t i = 0; i < ids.size(); i++) {
        auto at = std::find(prog_devs.begin(), prog_devs.end(), ids[i].h);
        if (at == prog_devs.end())
          fail(STRATA_ERR_UNSUPPORTED, "binary export: device " + std::to_string(i) + " is not one of the program's");
        const auto &b = bins[at - prog_devs.begin()];
        if (b.empty()) fail(STRATA_ERR_UNSUPPORTED, "binary export: no binary for device " + std::to_string(i));
        w.bytes(b.data(), b.size());
      }
    }
    if (n_kernels == 0) fail(STRATA_ERR_UNSUPPORTED, "binary export: no kernel of the module found in its binaries");
    auto *mem = static_cast<uint8_t *>(std::malloc(w.out.size()));
    if (!mem) fail(STRATA_ERR, "binary export: out of memory");
    std::memcpy(mem, w.out.data(), w.out.size());
    *blob = mem;
    *len = w.out.size();
  });
}

strata_status strata_module_load(const StrataContext *ctx, const StrataDevice *const *devs,
                                 size_t n_devs, const uint8_t *blob, size_t len,
                                 StrataModule **out) {
  return guard("kernel binary load", [&] {
    need(ctx, "context");
    need(blob, "blob");
    need(out, "out");
    std::vector<sycl::device> dv = module_devices(ctx, devs, n_devs);
    BlobReader r{blob, len};
    if (r.num<uint32_t>("magic") != kBlobMagic) fail(STRATA_ERR_INVALID, "kernel binary: bad magic");
    auto version = r.num<uint32_t>("version");
    if (version != kBlobVersion)
      fail(STRATA_ERR_INVALID, "kernel binary: format " + std::to_string(version) + ", this shim reads " +
                                   std::to_string(kBlobVersion));
    if (r.num<uint32_t>("backend") != kBlobOpenCL) fail(STRATA_ERR_INVALID, "kernel binary: not an OpenCL binary");
    const OclApi &cl = need_ocl("binary load", ctx->c);
    auto native = std::make_shared<NativeProgram>();
    struct Image {
      std::vector<const unsigned char *> ptrs;
      std::vector<size_t> sizes;
    };
    std::vector<Image> images;
    auto n_progs = r.num<uint32_t>("program count");
    if (n_progs == 0 || n_progs > len) fail(STRATA_ERR_INVALID, "kernel binary: " + std::to_string(n_progs) + " programs");
    for (uint32_t pi = 0; pi < n_progs; pi++) {
      auto n_names = r.num<uint32_t>("kernel count");
      if (n_names > len) fail(STRATA_ERR_INVALID, "kernel binary: " + std::to_string(n_names) + " kernels");
      for (uint32_t i = 0; i < n_names; i++) {
        std::string name = r.str("kernel name");
        std::string raw = r.str("kernel binary name");
        native->kernels.push_back({std::move(name), std::move(raw), pi});
      }
      auto n_bins = r.num<uint32_t>("device count");
      if (n_bins != dv.size())
        fail(STRATA_ERR_INVALID, "kernel binary: holds code for " + std::to_string(n_bins) +
                                     " devices, the module is for " + std::to_string(dv.size()));
      Image img;
      for (uint32_t i = 0; i < n_bins; i++) {
        auto [b, n] = r.bytes("device binary");
        if (n == 0) fail(STRATA_ERR_INVALID, "kernel binary: empty device binary");
        img.ptrs.push_back(b);
        img.sizes.push_back(n);
      }
      images.push_back(std::move(img));
    }
    if (r.at != len) fail(STRATA_ERR_INVALID, "kernel binary: " + std::to_string(len - r.at) + " bytes past the end");
    ClRef<cl_context> cctx(sycl::get_native<sycl::backend::opencl>(ctx->c), cl.ReleaseContext);
    std::vector<ClRef<cl_device_id>> ids;
    std::vector<cl_device_id> raw_ids;
    for (const auto &d : dv) {
      ids.emplace_back(sycl::get_native<sycl::backend::opencl>(d), cl.ReleaseDevice);
      raw_ids.push_back(ids.back().h);
    }
    const cl_uint n_devs_cl = cl_uint(raw_ids.size());
    for (auto &img : images) {
      std::vector<cl_int> status(n_devs_cl, CL_SUCCESS);
      cl_int err = CL_SUCCESS;
      cl_program p = cl.CreateProgramWithBinary(cctx.h, n_devs_cl, raw_ids.data(), img.sizes.data(),
                                                img.ptrs.data(), status.data(), &err);
      if (p) native->progs.push_back(p); // released with `native`, whatever happens next
      for (cl_uint i = 0; err == CL_SUCCESS && i < n_devs_cl; i++) err = status[i];
      if (err != CL_SUCCESS || !p)
        fail(STRATA_ERR_INVALID, "kernel binary: " + cl_error("clCreateProgramWithBinary", err));
      err = cl.BuildProgram(p, n_devs_cl, raw_ids.data(), "", nullptr, nullptr);
      if (err != CL_SUCCESS) {
        // the first 4 KiB of the log (a longer one makes the call fail and leaves it empty)
        std::string blog(4096, '\0');
        cl.GetProgramBuildInfo(p, raw_ids[0], CL_PROGRAM_BUILD_LOG, blog.size() - 1, blog.data(), nullptr);
        blog.resize(std::strlen(blog.c_str()));
        fail(STRATA_ERR_INVALID, "kernel binary: " + cl_error("clBuildProgram", err) +
                                     (blog.empty() ? "" : ": " + blog));
      }
    }
    *out = new StrataModule{ctx->c, dv, std::nullopt, std::move(native)};
  });
}

strata_status strata_kernel_get(const StrataModule *m, const char *name, StrataKernel **out) {
  return guard("kernel lookup", [&] {
    need(m, "module");
    need(name, "name");
    need(out, "out");
    auto not_found = [&] {
      fail(STRATA_ERR_NOT_FOUND, std::string("no kernel named '") + name +
                                     "' in the module (is it extern \"C\" with a kernel property?)");
    };
    if (m->kb) {
      auto kb = *m->kb; // the lookups are non-const; a bundle copy is a cheap handle copy
      if (!kb.ext_oneapi_has_kernel(name)) not_found();
      *out = new StrataKernel{kb.ext_oneapi_get_kernel(name)};
      return;
    }
    need(m->native.get(), "module program");
    const auto &ks = m->native->kernels;
    auto at = std::find_if(ks.begin(), ks.end(), [&](const NativeKernel &k) { return k.name == name; });
    if (at == ks.end()) not_found();
    const OclApi &cl = need_ocl("kernel lookup", m->ctx);
    cl_int err = CL_SUCCESS;
    cl_kernel ck = cl.CreateKernel(m->native->progs.at(at->program), at->raw.c_str(), &err);
    if (err != CL_SUCCESS || !ck) fail(STRATA_ERR, cl_error(("clCreateKernel(" + at->raw + ")").c_str(), err));
    // make_kernel retains the OpenCL kernel; ours goes when this scope ends
    ClRef<cl_kernel> owned(ck, cl.ReleaseKernel);
    *out = new StrataKernel{sycl::make_kernel<sycl::backend::opencl>(ck, m->ctx)};
  });
}

strata_status strata_kernel_info(const StrataKernel *k, const StrataDevice *dev,
                                 uint32_t *compile_sub_group_size, uint64_t *max_work_group) {
  return guard("kernel info", [&] {
    need(k, "kernel");
    need(dev, "device");
    if (compile_sub_group_size)
      *compile_sub_group_size =
          k->k.get_info<sycl::info::kernel_device_specific::compile_sub_group_size>(dev->d);
    if (max_work_group)
      *max_work_group = k->k.get_info<sycl::info::kernel_device_specific::work_group_size>(dev->d);
  });
}

void strata_kernel_free(StrataKernel *k) { delete k; }

strata_status strata_launch(StrataQueue *q, const StrataKernel *k, uint32_t dims,
                            const size_t *global, const size_t *local, const StrataArg *args,
                            size_t n_args, StrataEvent **ev) {
  return guard("kernel launch", [&] {
    need(q, "queue");
    need(k, "kernel");
    need(global, "global range");
    need(local, "local range");
    if (dims < 1 || dims > 3) fail(STRATA_ERR_INVALID, "launch: dims must be 1, 2 or 3");
    for (uint32_t i = 0; i < dims; i++) {
      if (local[i] == 0 || global[i] % local[i] != 0)
        fail(STRATA_ERR_INVALID, "launch: global range " + std::to_string(global[i]) +
                                     " is not a multiple of local range " + std::to_string(local[i]) +
                                     " in dimension " + std::to_string(i));
    }
    if (n_args && !args) fail(STRATA_ERR_INVALID, "launch: null argument array");
    auto cgf = [&](sycl::handler &h) {
      for (size_t i = 0; i < n_args; i++) {
        const StrataArg &a = args[i];
        if (a.kind == STRATA_ARG_POINTER) {
          h.set_arg(int(i), const_cast<void *>(a.data));
        } else {
          if (!a.data || a.size == 0)
            fail(STRATA_ERR_INVALID, "launch: argument " + std::to_string(i) + " has no bytes");
          h.set_arg(int(i), syclex::raw_kernel_arg(a.data, a.size));
        }
      }
      switch (dims) {
      case 1: h.parallel_for(make_range<1>(global, local), k->k); break;
      case 2: h.parallel_for(make_range<2>(global, local), k->k); break;
      default: h.parallel_for(make_range<3>(global, local), k->k); break;
      }
    };
    // Nobody asked for the event: submit without one (the enqueue-functions extension), which
    // spares the runtime creating and tracking an event per launch on the in-order queue.
    if (ev)
      give_event(ev, q->q.submit(cgf));
    else
      syclex::submit(q->q, cgf);
  });
}

strata_status strata_graph_begin(StrataQueue *q, StrataGraph **out) {
  return guard("graph recording", [&] {
    need(q, "queue");
    need(out, "out");
    auto d = q->q.get_device();
    if (!d.has(sycl::aspect::ext_oneapi_graph) && !d.has(sycl::aspect::ext_oneapi_limited_graph))
      fail(STRATA_ERR_UNSUPPORTED, "graphs: the device '" + d.get_info<sycl::info::device::name>() +
                                       "' has neither ext_oneapi_graph nor ext_oneapi_limited_graph");
    auto *g = new StrataGraph{syclex::command_graph<syclex::graph_state::modifiable>(
        q->q.get_context(), d)};
    try {
      g->g.begin_recording(q->q);
    } catch (...) {
      delete g;
      throw;
    }
    *out = g;
  });
}

strata_status strata_graph_end(StrataGraph *g, StrataQueue *q) {
  return guard("graph end_recording", [&] {
    need(g, "graph");
    need(q, "queue");
    g->g.end_recording(q->q);
  });
}

strata_status strata_graph_finalize(const StrataGraph *g, StrataExecGraph **out) {
  return guard("graph finalize", [&] {
    need(g, "graph");
    need(out, "out");
    *out = new StrataExecGraph{g->g.finalize()};
  });
}

strata_status strata_graph_replay(StrataQueue *q, const StrataExecGraph *g, StrataEvent **ev) {
  return guard("graph replay", [&] {
    need(q, "queue");
    need(g, "graph");
    give_event(ev, q->q.ext_oneapi_graph(g->g));
  });
}

void strata_graph_free(StrataGraph *g) { delete g; }
void strata_exec_graph_free(StrataExecGraph *g) { delete g; }

} // extern "C"
