// Internal to the shim: the handle types behind strata_shim.h and the helpers every shim
// translation unit shares (guard() and the error it leaves, argument checks, the OpenCL API).
#pragma once

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

// Inline: each shim translation unit includes these; g_last_error and ocl_api()'s table are
// one per process.
namespace strata_shim {

inline thread_local std::string g_last_error;

struct ShimError {
  strata_status status;
  std::string msg;
};

[[noreturn]] inline void fail(strata_status s, std::string msg) { throw ShimError{s, std::move(msg)}; }

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

inline void copy_str(char *dst, size_t cap, const std::string &s) {
  size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = 0;
}

inline const char *backend_name(sycl::backend b) {
  switch (b) {
  case sycl::backend::opencl: return "opencl";
  case sycl::backend::ext_oneapi_level_zero: return "level_zero";
  case sycl::backend::ext_oneapi_cuda: return "cuda";
  case sycl::backend::ext_oneapi_hip: return "hip";
  case sycl::backend::ext_oneapi_native_cpu: return "native_cpu";
  default: return "other";
  }
}

inline std::vector<sycl::platform> platforms() { return sycl::platform::get_platforms(); }

inline void hand_out(const std::vector<sycl::device> &devs, StrataDevice **out, size_t cap, size_t *n) {
  *n = devs.size();
  for (size_t i = 0; i < devs.size() && i < cap; i++) out[i] = new StrataDevice{devs[i]};
}

template <int D> sycl::nd_range<D> make_range(const size_t *g, const size_t *l) {
  if constexpr (D == 1) return {sycl::range<1>{g[0]}, sycl::range<1>{l[0]}};
  else if constexpr (D == 2) return {sycl::range<2>{g[0], g[1]}, sycl::range<2>{l[0], l[1]}};
  else return {sycl::range<3>{g[0], g[1], g[2]}, sycl::range<3>{l[0], l[1], l[2]}};
}

inline void give_event(StrataEvent **ev, const sycl::event &e) {
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

inline const OclApi &ocl_api() {
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
inline const OclApi &need_ocl(const char *what, const sycl::context &c) {
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

inline std::string cl_error(const char *call, cl_int err) {
  return std::string(call) + " failed (OpenCL error " + std::to_string(err) + ")";
}

} // namespace strata_shim

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
    for (auto p : progs) strata_shim::ocl_api().ReleaseProgram(p);
  }
};
