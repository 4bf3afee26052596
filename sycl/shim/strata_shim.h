/* Strata's C API over the SYCL runtime (see docs/sycl.md).
 *
 * Plain C on purpose: this header is what Rust binds (engine/sycl/ffi.rs), and it must stay free
 * of <sycl/sycl.hpp>, which takes seconds to parse. All handles are opaque and owned by the
 * caller, who releases each with its *_free function.
 *
 * Errors: every function returns a strata_status. On anything but STRATA_OK, the message is in a
 * thread-local string read with strata_last_error() (valid until the next shim call on the same
 * thread). No C++ exception ever crosses this boundary.
 */
#ifndef STRATA_SHIM_H
#define STRATA_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  STRATA_OK = 0,
  STRATA_ERR = 1,         /* a SYCL exception or runtime failure; see strata_last_error() */
  STRATA_ERR_BUILD = 2,   /* a kernel source failed to compile; the message holds the diagnostics */
  STRATA_ERR_UNSUPPORTED = 3, /* the device lacks the feature (e.g. graphs) */
  STRATA_ERR_INVALID = 4, /* a bad argument (null handle, unknown kernel name, bad size) */
  STRATA_ERR_NOT_FOUND = 5 /* e.g. a kernel name absent from a module */
} strata_status;

typedef struct StrataDevice StrataDevice;
typedef struct StrataContext StrataContext;
typedef struct StrataQueue StrataQueue;
typedef struct StrataEvent StrataEvent;
typedef struct StrataModule StrataModule;
typedef struct StrataKernel StrataKernel;
typedef struct StrataGraph StrataGraph;
typedef struct StrataExecGraph StrataExecGraph;

const char *strata_last_error(void);

/* ---- platforms and devices ---- */
typedef struct {
  char name[256];
  char vendor[128];
  char platform[256];
  char backend[32];         /* "opencl", "level_zero", "cuda", "hip", "native_cpu", "other" */
  char driver_version[128];
  char version[128];
  uint32_t device_type;     /* 1 cpu, 2 gpu, 3 accelerator, 0 other */
  uint32_t compute_units;
  uint64_t global_mem;      /* bytes */
  uint64_t local_mem;       /* bytes */
  uint64_t max_alloc;       /* bytes */
  uint64_t max_work_group;
  uint32_t sub_group_sizes[16];
  uint32_t n_sub_group_sizes;
  uint32_t partition_max_sub_devices;
  uint32_t native_vector_width_float; /* floats per native vector (CPU: 8 AVX2, 16 AVX-512) */
  uint8_t fp16;
  uint8_t fp64;
  uint8_t graph;            /* 2 full ext_oneapi_graph, 1 ext_oneapi_limited_graph, 0 none */
  uint8_t is_sub_device;
  uint8_t usm_device;
  uint8_t usm_host;
  uint8_t usm_shared;
  uint8_t profiling;
} StrataDeviceInfo;

typedef struct {
  char name[256];
  char vendor[128];
  char version[128];
  char backend[32];
} StrataPlatformInfo;

strata_status strata_platform_count(size_t *n);
strata_status strata_platform_info(size_t index, StrataPlatformInfo *out);
/* Devices of platform `platform`, written to out[0..min(cap, count)); *n = count. */
strata_status strata_platform_devices(size_t platform, StrataDevice **out, size_t cap, size_t *n);
strata_status strata_device_info(const StrataDevice *d, StrataDeviceInfo *out);
/* Sub-devices with `cus_per_sub` compute units each; same out/cap/n convention. */
strata_status strata_device_partition_equally(const StrataDevice *d, uint32_t cus_per_sub,
                                              StrataDevice **out, size_t cap, size_t *n);
int strata_device_equal(const StrataDevice *a, const StrataDevice *b);
void strata_device_free(StrataDevice *d);

/* ---- contexts and queues ---- */
strata_status strata_context_create(const StrataDevice *const *devs, size_t n, StrataContext **out);
void strata_context_free(StrataContext *c);
/* An in-order queue on `dev` (which must belong to `ctx`). */
strata_status strata_queue_create(const StrataContext *ctx, const StrataDevice *dev, int profiling,
                                  StrataQueue **out);
void strata_queue_free(StrataQueue *q);
strata_status strata_queue_wait(StrataQueue *q);

/* ---- USM ---- */
typedef enum { STRATA_USM_DEVICE = 0, STRATA_USM_HOST = 1, STRATA_USM_SHARED = 2 } strata_usm_kind;
/* Allocates on q's device in q's context; alignment 0 = default. */
strata_status strata_malloc(StrataQueue *q, strata_usm_kind kind, size_t bytes, size_t align,
                            void **out);
/* Frees memory allocated in ctx (any kind). Never fails visibly. */
void strata_free(const StrataContext *ctx, void *ptr);

/* Asynchronous copy on q (any USM or host memory q's device can reach; NOT between two devices:
 * use strata_copy_across). ev may be NULL. */
strata_status strata_memcpy(StrataQueue *q, void *dst, const void *src, size_t bytes,
                            StrataEvent **ev);
/* Fills `count` elements of `pattern_size` bytes (1, 2, 4 or 8). */
strata_status strata_fill(StrataQueue *q, void *dst, const void *pattern, size_t pattern_size,
                          size_t count, StrataEvent **ev);
/* Synchronous copy from src (on q_src's device) to dst (on q_dst's device) through host memory,
 * because a direct USM copy between two sub-devices hangs. `staging` may be NULL (a temporary
 * malloc_host buffer is used) or host USM of at least staging_bytes (> 0; copies in chunks). */
strata_status strata_copy_across(StrataQueue *q_src, const void *src, StrataQueue *q_dst, void *dst,
                                 size_t bytes, void *staging, size_t staging_bytes);

/* ---- events ---- */
strata_status strata_event_wait(StrataEvent *e);
/* Nanosecond timestamps; needs a profiling queue. */
strata_status strata_event_profiling(StrataEvent *e, uint64_t *submit, uint64_t *start,
                                     uint64_t *end);
void strata_event_free(StrataEvent *e);

/* ---- kernel modules built from source at run time ---- */
/* Builds `source` (SYCL C++) for devs (all in ctx) with the given options. On success *log is the
 * build log (warnings; maybe empty), to release with strata_string_free. On a compile error the
 * status is STRATA_ERR_BUILD and strata_last_error() holds the compiler diagnostics. */
strata_status strata_module_build(const StrataContext *ctx, const StrataDevice *const *devs,
                                  size_t n_devs, const char *source, const char *const *options,
                                  size_t n_options, StrataModule **out, char **log);
void strata_module_free(StrataModule *m);
void strata_string_free(char *s);

/* ---- device binaries of built modules (Strata's kernel binary cache, docs/sycl.md) ---- */
/* Serialises what strata_module_load needs to recreate `m` without the SYCL compiler: the
 * backend's device binary for each of the module's devices, and its kernels' names in them.
 * *blob is malloc'd (release with strata_bytes_free). STRATA_ERR_UNSUPPORTED where the shim
 * cannot take binaries out of this backend and load them back (only OpenCL so far, which is
 * what the CPU device runs on): the caller then keeps building from source. */
strata_status strata_module_export(const StrataModule *m, uint8_t **blob, size_t *len);
/* Recreates a module from strata_module_export's bytes, for devs (all in ctx; the exported
 * module's devices, in its order). STRATA_ERR_INVALID for bytes that do not parse, that name
 * another device count, or that the backend refuses; STRATA_ERR_UNSUPPORTED as above. */
strata_status strata_module_load(const StrataContext *ctx, const StrataDevice *const *devs,
                                 size_t n_devs, const uint8_t *blob, size_t len,
                                 StrataModule **out);
void strata_bytes_free(uint8_t *p);
/* The SYCL headers' version the shim was compiled against and the layout of its exported
 * bytes, e.g. "libsycl 9.0.0 compiler 20260724 export 2" (part of the binary cache's key).
 * Static storage; never NULL. */
const char *strata_runtime_version(void);
/* Works the same on a module built from source and one loaded with strata_module_load. */
strata_status strata_kernel_get(const StrataModule *m, const char *name, StrataKernel **out);
/* Kernel facts for dev: the required sub-group size (0 = none) and the max work-group size. */
strata_status strata_kernel_info(const StrataKernel *k, const StrataDevice *dev,
                                 uint32_t *compile_sub_group_size, uint64_t *max_work_group);
void strata_kernel_free(StrataKernel *k);

typedef enum { STRATA_ARG_POINTER = 0, STRATA_ARG_BYTES = 1 } strata_arg_kind;
/* POINTER: `data` is the USM pointer itself (size ignored). BYTES: `size` bytes at `data`, passed
 * by value (sizes 1, 2, 4, 8, or a multiple of 4 up to 256). */
typedef struct {
  uint32_t kind;
  uint32_t size;
  const void *data;
} StrataArg;

/* dims 1..3; global[i] must be a multiple of local[i]. ev may be NULL. */
strata_status strata_launch(StrataQueue *q, const StrataKernel *k, uint32_t dims,
                            const size_t *global, const size_t *local, const StrataArg *args,
                            size_t n_args, StrataEvent **ev);

/* ---- graphs (record on a queue, finalize, replay) ---- */
strata_status strata_graph_begin(StrataQueue *q, StrataGraph **out); /* STRATA_ERR_UNSUPPORTED if none */
strata_status strata_graph_end(StrataGraph *g, StrataQueue *q);
strata_status strata_graph_finalize(const StrataGraph *g, StrataExecGraph **out);
strata_status strata_graph_replay(StrataQueue *q, const StrataExecGraph *g, StrataEvent **ev);
void strata_graph_free(StrataGraph *g);
void strata_exec_graph_free(StrataExecGraph *g);

#ifdef __cplusplus
}
#endif
#endif
