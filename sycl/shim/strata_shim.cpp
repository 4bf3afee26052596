// Every entry point runs its body inside guard(), which turns any exception into a status +
// thread-local message: nothing throws across the C boundary. This file: the last error,
// platforms, devices, contexts and queues; memory and events, modules, kernels and graphs are in
// the other strata_shim_*.cpp files (each includes <sycl/sycl.hpp> through strata_shim_internal.hpp).
#include "strata_shim_internal.hpp"

using namespace strata_shim;

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

} // extern "C"
