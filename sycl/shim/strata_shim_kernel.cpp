// Kernels of a module: lookup, info, launch, and the command graphs that record and replay launches.
#include "strata_shim_internal.hpp"

using namespace strata_shim;

extern "C" {

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
