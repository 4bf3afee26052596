// Kernel modules: built from source, exported as device binaries, loaded from them.
#include "strata_shim_internal.hpp"

using namespace strata_shim;

namespace {

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

extern "C" {

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

} // extern "C"
