/* cuda_context.c — the runtime's CUDA state (cuda_rt.h): the driver entry points it needs,
 * the primary context, the compute stream, the kernels' module, launches, copies and the sticky
 * error.
 *
 * The driver is opened with dlopen as the allocator's cuda backend does (the same library, so
 * the same context); the module comes from the fatbin that the build compiled with nvcc and
 * embedded as the array vram_cuda_fatbin (sm_90 code plus PTX that newer GPUs compile at load).
 * A build without the toolkit's headers, or without nvcc, still links: opening a CUDA runtime
 * then says which of the two was missing.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h"
#include "cuda_infer.h"
#include "cuda_rt.h"

vram_cuda vram_cuda_state;
int64_t vram_cuda_copies, vram_cuda_copy_bytes, vram_cuda_zeros, vram_cuda_zero_bytes;

void vram_cuda_fail(vram_status s, const char *fmt, ...) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error != VRAM_OK) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->error_msg, sizeof g->error_msg, fmt, ap);
    va_end(ap);
    g->error = s;
}

const char *vram_cuda_resolve(void *lib, const vram_cuda_sym *syms, size_t n, void *table) {
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p) return syms[i].name;
        memcpy((char *)table + syms[i].off, &p, sizeof p);
    }
    return NULL;
}

int64_t vram_cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads, cap = (int64_t)(vram_cuda_state.sm_count > 0 ? vram_cuda_state.sm_count : 132) * 32;
    return b < 1 ? 1 : b > cap ? cap : b;
}

#if !defined(VRAM_HAVE_CUDA_H) || !defined(VRAM_HAVE_CUDA_KERNELS)

vram_status vram_cuda_runtime_open(vram_runtime *rt, int ordinal) {
    (void)rt;
    (void)ordinal;
#ifndef VRAM_HAVE_CUDA_H
    return vram_error(VRAM_ERR_UNSUPPORTED, "runtime: no GPU kernels: vram was built without the CUDA toolkit's "
                      "headers (cuda.h was not found at configure time; set CUDA_HOME and rebuild)");
#else
    return vram_error(VRAM_ERR_UNSUPPORTED, "runtime: no GPU kernels: vram was built without nvcc (the CUDA "
                      "compiler was not found at configure time; put it on PATH or set CUDA_HOME and rebuild)");
#endif
}
void vram_cuda_runtime_close(vram_runtime *rt) { (void)rt; }
void vram_cuda_launch(int k, int64_t blocks, int threads, void **args) {
    (void)k, (void)blocks, (void)threads, (void)args;
    vram_cuda_fail(VRAM_ERR_UNSUPPORTED, "no GPU kernels in this build");
}
void vram_cuda_upload(void *d, const void *s, size_t n) { (void)d, (void)s, (void)n; }
void vram_cuda_download(void *d, const void *s, size_t n) { (void)d, (void)s, (void)n; }
void vram_cuda_copy_d2d(void *d, const void *s, size_t n) { (void)d, (void)s, (void)n; }
void vram_cuda_zero(void *d, size_t n) { (void)d, (void)n; }
vram_status vram_cuda_sync(void) { return vram_cuda_state.error; }
int vram_cuda_prof_begin(void) { return -1; }
void vram_cuda_timer_start(void) {}
double vram_cuda_timer_stop(void) { return -1; }
int vram_cuda_profiling(void) { return 0; }
void vram_cuda_prof_end(int token, int row) { (void)token, (void)row; }

#else

#include <cuda.h>

extern const unsigned char vram_cuda_fatbin[];

static const char *const kernel_names[CK_COUNT] = {
    [CK_COPY] = "vk_copy", [CK_FILL] = "vk_fill", [CK_BINARY] = "vk_binary", [CK_ACCUMULATE] = "vk_accumulate",
    [CK_REDUCE_ADD] = "vk_reduce_add", [CK_UNARY] = "vk_unary", [CK_UNARY_BACKWARD] = "vk_unary_backward",
    [CK_MASK_SCALE] = "vk_mask_scale", [CK_SCALE_INPLACE] = "vk_scale_inplace", [CK_SOFTMAX] = "vk_softmax",
    [CK_SOFTMAX_BACKWARD] = "vk_softmax_backward", [CK_LAYER_NORM] = "vk_layer_norm",
    [CK_LAYER_NORM_BACKWARD_X] = "vk_layer_norm_backward_x", [CK_LAYER_NORM_BACKWARD_WB] = "vk_layer_norm_backward_wb",
    [CK_EMBEDDING] = "vk_embedding", [CK_EMBEDDING_BACKWARD] = "vk_embedding_backward",
    [CK_CROSS_ENTROPY] = "vk_cross_entropy", [CK_MEAN_ROWS] = "vk_mean_rows",
    [CK_CROSS_ENTROPY_BACKWARD] = "vk_cross_entropy_backward", [CK_IM2COL] = "vk_im2col", [CK_COL2IM] = "vk_col2im",
    [CK_POOL2D] = "vk_pool2d", [CK_POOL2D_BACKWARD] = "vk_pool2d_backward", [CK_SGD_UPDATE] = "vk_sgd_update",
    [CK_ADAM_UPDATE] = "vk_adam_update", [CK_ADAGRAD_UPDATE] = "vk_adagrad_update",
    [CK_SUM_SQUARES] = "vk_sum_squares", [CK_CHECK_IDS] = "vk_check_ids", [CK_COPY16] = "vk_copy16",
    [CK_FLASH_FORWARD] = "vk_flash_forward", [CK_FLASH_FORWARD32] = "vk_flash_forward32",
    [CK_FLASH_DOT] = "vk_flash_dot",
    [CK_FLASH_BACKWARD_KV] = "vk_flash_backward_kv", [CK_FLASH_BACKWARD_Q] = "vk_flash_backward_q",
    [CK_FLASH_BACKWARD] = "vk_flash_backward", [CK_FLASH_BACKWARD3] = "vk_flash_backward3",
    [CK_FLASH_BACKWARD128] = "vk_flash_backward128", [CK_FLASH_BACKWARD128_KV] = "vk_flash_backward128_kv",
    [CK_FLASH_BACKWARD128_Q] = "vk_flash_backward128_q", [CK_FLASH_BACKWARD128P] = "vk_flash_backward128p",
    [CK_FLASH_DQ] = "vk_flash_dq",
    [CK_UNSCALE] = "vk_unscale", [CK_SCALER_UPDATE] = "vk_scaler_update",
    [CK_ADAM_UPDATE_LIST] = "vk_adam_update_list", [CK_CROSS_ENTROPY_FUSED] = "vk_cross_entropy_fused",
    [CK_LIST_SUM_SQUARES] = "vk_list_sum_squares", [CK_LIST_SCALE] = "vk_list_scale",
    [CK_COLUMN_SUM_LOWP] = "vk_column_sum_lowp", [CK_LAYER_NORM_MIXED] = "vk_layer_norm_mixed",
    [CK_LAYER_NORM_MIXED_BACKWARD_X] = "vk_layer_norm_mixed_backward_x",
    [CK_LAYER_NORM_MIXED_BACKWARD_WB] = "vk_layer_norm_mixed_backward_wb", [CK_ADD_LAYER_NORM] = "vk_add_layer_norm",
    [CK_LAYER_NORM_BACKWARD_FUSED] = "vk_layer_norm_backward_fused",
    [CK_LAYER_NORM_MIXED_BACKWARD_FUSED] = "vk_layer_norm_mixed_backward_fused",
    [CK_ADAM_UPDATE_LIST_VEC] = "vk_adam_update_list_vec", [CK_LIST_SUM_SQUARES_VEC] = "vk_list_sum_squares_vec",
    [CK_CROSS_ENTROPY_ROWS] = "vk_cross_entropy_rows",
};

/* Dynamic shared memory a kernel is launched with (0 for the rest): past 48 KiB, granted to the
 * kernel at load (cuFuncSetAttribute). */
static const unsigned kernel_smem[CK_COUNT] = {
    [CK_FLASH_BACKWARD128] = VK_FLASH128_SMEM, [CK_FLASH_BACKWARD128_KV] = VK_FLASH128_SMEM,
    [CK_FLASH_BACKWARD128_Q] = VK_FLASH128_SMEM, [CK_FLASH_BACKWARD128P] = VK_FLASH128P_SMEM,
};

static struct {
    void *lib;
    CUresult (*Init)(unsigned);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
} cu;

/* The profiler: pairs of events around queued work, summed per row when drained. */
enum { PROF_PAIRS = 4096 };
static struct {
    int on, used;
    CUevent ev[PROF_PAIRS][2];
    int row[PROF_PAIRS];
    double ms[CK_PROF_SLOTS];
    long long calls[CK_PROF_SLOTS];
} prof;

static CUdevice cu_device;
static CUcontext cu_ctx;
static CUmodule cu_module;
static int cu_open;

static const char *cu_err(CUresult r) {
    const char *name = NULL, *what = NULL;
    if (cu.GetErrorName) cu.GetErrorName(r, &name);
    if (cu.GetErrorString) cu.GetErrorString(r, &what);
    static __thread char buf[256];
    snprintf(buf, sizeof buf, "%s: %s", name ? name : "CUDA error", what ? what : "no description");
    return buf;
}

static vram_status cu_load(void) {
    if (cu.lib) return VRAM_OK;
    const char *path = getenv("VRAM_LIBCUDA");
    if (!path || !*path) path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return vram_error(VRAM_ERR_NO_DEVICE, "runtime: no CUDA driver: dlopen(\"%s\") failed: %s", path, dlerror());
    static const vram_cuda_sym syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(cu), field)}
        SYM(Init, "cuInit"), SYM(GetErrorName, "cuGetErrorName"), SYM(GetErrorString, "cuGetErrorString"),
        SYM(DeviceGet, "cuDeviceGet"), SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
        SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"), SYM(CtxSetCurrent, "cuCtxSetCurrent"),
        SYM(ModuleLoadData, "cuModuleLoadData"), SYM(ModuleUnload, "cuModuleUnload"),
        SYM(ModuleGetFunction, "cuModuleGetFunction"), SYM(LaunchKernel, "cuLaunchKernel"),
        SYM(StreamCreate, "cuStreamCreate"), SYM(StreamDestroy, "cuStreamDestroy_v2"),
        SYM(StreamSynchronize, "cuStreamSynchronize"), SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
        SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"), SYM(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
        SYM(MemsetD8Async, "cuMemsetD8Async"), SYM(EventCreate, "cuEventCreate"), SYM(EventRecord, "cuEventRecord"),
        SYM(EventSynchronize, "cuEventSynchronize"), SYM(EventElapsedTime, "cuEventElapsedTime_v2"),
        SYM(EventDestroy, "cuEventDestroy_v2"),
#undef SYM
    };
    const char *missing = vram_cuda_resolve(lib, syms, sizeof syms / sizeof *syms, &cu);
    if (missing) {
        dlclose(lib);
        memset(&cu, 0, sizeof cu);
        return vram_error(VRAM_ERR_NO_DEVICE, "runtime: the CUDA driver '%s' lacks %s (too old?)", path, missing);
    }
    cu.lib = lib;
    return VRAM_OK;
}

#define CU_TRY(call, what)                                                                                            \
    do {                                                                                                              \
        CUresult r_ = (call);                                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                                     \
            s = vram_error(VRAM_ERR_DRIVER, "runtime: %s failed: %s", what, cu_err(r_));                             \
            goto fail;                                                                                                \
        }                                                                                                             \
    } while (0)

vram_status vram_cuda_runtime_open(vram_runtime *rt, int ordinal) {
    vram_cuda *g = &vram_cuda_state;
    if (cu_open)
        return vram_error(VRAM_ERR_STATE, "runtime: a CUDA runtime is already open in this process (one at a time)");
    vram_status s = cu_load();
    if (s != VRAM_OK) return s;
    memset(g, 0, sizeof *g);
    CU_TRY(cu.Init(0), "cuInit");
    CU_TRY(cu.DeviceGet(&cu_device, ordinal), "cuDeviceGet");
    CU_TRY(cu.DevicePrimaryCtxRetain(&cu_ctx, cu_device), "cuDevicePrimaryCtxRetain");
    CU_TRY(cu.CtxSetCurrent(cu_ctx), "cuCtxSetCurrent");
    cu.DeviceGetAttribute(&g->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cu_device);
    {
        CUresult r = cu.ModuleLoadData(&cu_module, vram_cuda_fatbin);
        if (r != CUDA_SUCCESS) {
            s = vram_error(VRAM_ERR_DRIVER, "runtime: loading the GPU kernels failed: %s (built for sm_90 with PTX "
                           "for newer GPUs; older GPUs are not supported)", cu_err(r));
            cu_module = NULL;
            goto fail;
        }
    }
    for (int k = 0; k < CK_COUNT; k++) {
        CUfunction f = NULL;
        CUresult r = cu.ModuleGetFunction(&f, cu_module, kernel_names[k]);
        if (r != CUDA_SUCCESS) {
            s = vram_error(VRAM_ERR_DRIVER, "runtime: kernel %s missing from the module: %s", kernel_names[k], cu_err(r));
            goto fail;
        }
        g->fn[k] = f;
        if (kernel_smem[k] > 48 * 1024) {
            /* looked up here alone: the table's other entries predate it in every driver we load */
            CUresult (*set)(CUfunction, CUfunction_attribute, int) =
                (CUresult(*)(CUfunction, CUfunction_attribute, int))dlsym(cu.lib, "cuFuncSetAttribute");
            r = set ? set(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)kernel_smem[k]) : CUDA_ERROR_NOT_FOUND;
            if (r != CUDA_SUCCESS) {
                s = vram_error(VRAM_ERR_DRIVER, "runtime: kernel %s: granting %u bytes of shared memory failed: %s",
                               kernel_names[k], kernel_smem[k], cu_err(r));
                goto fail;
            }
        }
    }
    {
        CUstream st = NULL;
        CU_TRY(cu.StreamCreate(&st, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        g->stream = st;
    }
    g->rt = rt;
    rt->stream = (vram_stream)g->stream;
    s = vram_allocator_malloc(rt->alloc, CUDA_SCRATCH_BYTES, rt->stream, VRAM_TAG_OTHER, &g->scratch);
    if (s != VRAM_OK) goto fail;
    {
        char why[256];
        s = vram_cuda_blas_open(why, sizeof why);
        if (s != VRAM_OK) {
            s = vram_error(s, "runtime: %s", why);
            goto fail;
        }
    }
    s = vram_cuda_infer_open(); /* the inference kernels' module (cuda_infer_ops.c) */
    if (s != VRAM_OK) {
        vram_cuda_blas_close();
        goto fail;
    }
    cu_open = 1;
    {
        const char *p = getenv("VRAM_CUDA_PROFILE");
        memset(&prof, 0, sizeof prof);
        prof.on = p && *p && strcmp(p, "0");
    }
    return VRAM_OK;
fail:
    if (g->scratch) vram_allocator_free(rt->alloc, g->scratch);
    if (g->stream) cu.StreamDestroy((CUstream)g->stream);
    if (cu_module) cu.ModuleUnload(cu_module);
    if (cu_ctx) cu.DevicePrimaryCtxRelease(cu_device);
    cu_module = NULL;
    cu_ctx = NULL;
    memset(g, 0, sizeof *g);
    rt->stream = 0;
    return s;
}

static void prof_drain(void) {
    if (!prof.used) return;
    cu.EventSynchronize(prof.ev[prof.used - 1][1]);
    for (int i = 0; i < prof.used; i++) {
        float ms = 0;
        if (cu.EventElapsedTime(&ms, prof.ev[i][0], prof.ev[i][1]) == CUDA_SUCCESS) prof.ms[prof.row[i]] += ms;
        prof.calls[prof.row[i]]++;
    }
    prof.used = 0;
}

static CUevent timer_ev[2];

void vram_cuda_timer_start(void) {
    for (int e = 0; e < 2; e++)
        if (!timer_ev[e] && cu.EventCreate(&timer_ev[e], CU_EVENT_DEFAULT) != CUDA_SUCCESS) return;
    cu.EventRecord(timer_ev[0], (CUstream)vram_cuda_state.stream);
}

double vram_cuda_timer_stop(void) {
    float ms = -1;
    if (!timer_ev[1] || cu.EventRecord(timer_ev[1], (CUstream)vram_cuda_state.stream) != CUDA_SUCCESS ||
        cu.EventSynchronize(timer_ev[1]) != CUDA_SUCCESS || cu.EventElapsedTime(&ms, timer_ev[0], timer_ev[1]) != CUDA_SUCCESS)
        return -1;
    return ms;
}

int vram_cuda_profiling(void) { return prof.on; }

int vram_cuda_prof_begin(void) {
    if (!prof.on || vram_cuda_state.error != VRAM_OK) return -1;
    if (prof.used == PROF_PAIRS) prof_drain();
    int i = prof.used;
    for (int e = 0; e < 2; e++)
        if (!prof.ev[i][e] && cu.EventCreate(&prof.ev[i][e], CU_EVENT_DEFAULT) != CUDA_SUCCESS) return -1;
    cu.EventRecord(prof.ev[i][0], (CUstream)vram_cuda_state.stream);
    return i;
}

void vram_cuda_prof_end(int token, int row) {
    if (token < 0) return;
    cu.EventRecord(prof.ev[token][1], (CUstream)vram_cuda_state.stream);
    prof.row[token] = row;
    prof.used = token + 1;
}

static void prof_report(void) {
    prof_drain();
    double total = 0;
    for (int r = 0; r < CK_PROF_SLOTS; r++) total += prof.ms[r];
    fprintf(stderr, "GPU time by kernel (VRAM_CUDA_PROFILE): %.1f ms in all\n  %-28s %9s %11s %9s %6s\n", total,
            "kernel", "calls", "total ms", "avg us", "share");
    for (int n = 0; n < CK_PROF_SLOTS; n++) { /* largest first: a selection over the few rows */
        int best = -1;
        for (int r = 0; r < CK_PROF_SLOTS; r++)
            if (prof.calls[r] >= 0 && (best < 0 || prof.ms[r] > prof.ms[best])) best = r;
        if (best < 0 || prof.calls[best] <= 0) break;
        const char *name = best == CK_PROF_MATMUL ? "cublasLt matmul" : best == CK_PROF_COPY ? "copy / memset"
                           : best == CK_PROF_CUDNN ? "cudnn attention"
                                                   : kernel_names[best];
        fprintf(stderr, "  %-28s %9lld %11.2f %9.1f %5.1f%%\n", name, prof.calls[best], prof.ms[best],
                1e3 * prof.ms[best] / (double)prof.calls[best], total > 0 ? 100 * prof.ms[best] / total : 0);
        prof.calls[best] = -1;
    }
    for (int i = 0; i < PROF_PAIRS; i++)
        for (int e = 0; e < 2; e++)
            if (prof.ev[i][e]) cu.EventDestroy(prof.ev[i][e]);
    memset(&prof, 0, sizeof prof);
}

void vram_cuda_runtime_close(vram_runtime *rt) {
    vram_cuda *g = &vram_cuda_state;
    if (!cu_open || g->rt != rt) return;
    cu.CtxSetCurrent(cu_ctx);
    cu.StreamSynchronize((CUstream)g->stream);
    if (prof.on) prof_report();
    vram_cuda_infer_close();
    vram_cudnn_close();
    vram_cuda_blas_close();
    for (int e = 0; e < 2; e++)
        if (timer_ev[e]) cu.EventDestroy(timer_ev[e]), timer_ev[e] = NULL;
    vram_allocator_free(rt->alloc, g->scratch);
    cu.StreamDestroy((CUstream)g->stream);
    cu.ModuleUnload(cu_module);
    cu.DevicePrimaryCtxRelease(cu_device);
    cu_module = NULL;
    cu_ctx = NULL;
    memset(g, 0, sizeof *g);
    cu_open = 0;
}

void vram_cuda_launch(int k, int64_t blocks, int threads, void **args) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error != VRAM_OK || blocks <= 0) return;
    if (blocks > 0x7fffffff) blocks = 0x7fffffff;
    int tok = vram_cuda_prof_begin();
    CUresult r = cu.LaunchKernel((CUfunction)g->fn[k], (unsigned)blocks, 1, 1, (unsigned)threads, 1, 1, kernel_smem[k],
                                 (CUstream)g->stream, args, NULL);
    vram_cuda_prof_end(tok, k);
    if (r != CUDA_SUCCESS)
        vram_cuda_fail(VRAM_ERR_DRIVER, "GPU kernel %s (%lld blocks of %d threads) failed to launch: %s", kernel_names[k],
                       (long long)blocks, threads, cu_err(r));
}

static void cu_check(CUresult r, const char *what, size_t n) {
    if (r != CUDA_SUCCESS) vram_cuda_fail(VRAM_ERR_DRIVER, "%s of %zu bytes failed: %s", what, n, cu_err(r));
}

void vram_cuda_upload(void *dst, const void *src, size_t n) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error != VRAM_OK || !n) return;
    cu_check(cu.MemcpyHtoDAsync((CUdeviceptr)dst, src, n, (CUstream)g->stream), "copy to the GPU", n);
    /* the source is pageable host memory the caller may reuse at once */
    cu_check(cu.StreamSynchronize((CUstream)g->stream), "copy to the GPU", n);
}

void vram_cuda_download(void *dst, const void *src, size_t n) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error != VRAM_OK) {
        memset(dst, 0, n);
        return;
    }
    if (!n) return;
    cu_check(cu.MemcpyDtoHAsync(dst, (CUdeviceptr)src, n, (CUstream)g->stream), "copy from the GPU", n);
    cu_check(cu.StreamSynchronize((CUstream)g->stream), "waiting for the GPU", n);
    if (g->error != VRAM_OK) memset(dst, 0, n);
}

void vram_cuda_copy_d2d(void *dst, const void *src, size_t n) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error != VRAM_OK || !n) return;
    int tok = vram_cuda_prof_begin();
    cu_check(cu.MemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, (CUstream)g->stream), "copy on the GPU", n);
    vram_cuda_copies++, vram_cuda_copy_bytes += (int64_t)n;
    vram_cuda_prof_end(tok, CK_PROF_COPY);
}

void vram_cuda_zero(void *dst, size_t n) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error != VRAM_OK || !n) return;
    int tok = vram_cuda_prof_begin();
    cu_check(cu.MemsetD8Async((CUdeviceptr)dst, 0, n, (CUstream)g->stream), "zeroing GPU memory", n);
    vram_cuda_zeros++, vram_cuda_zero_bytes += (int64_t)n;
    vram_cuda_prof_end(tok, CK_PROF_COPY);
}

/* ---- modules beside the main one (cuda_infer.h): loaded, unloaded, launched by handle ---- */

vram_status vram_cuda_module_load(const void *image, const char *const *names, int n, void **fns, void **module) {
    CUmodule mod = NULL;
    CUresult r = cu.ModuleLoadData(&mod, image);
    if (r != CUDA_SUCCESS)
        return vram_error(VRAM_ERR_DRIVER, "runtime: loading the GPU kernels of %s failed: %s", n > 0 ? names[0] : "?",
                          cu_err(r));
    for (int k = 0; k < n; k++) {
        CUfunction f = NULL;
        r = cu.ModuleGetFunction(&f, mod, names[k]);
        if (r != CUDA_SUCCESS) {
            cu.ModuleUnload(mod);
            return vram_error(VRAM_ERR_DRIVER, "runtime: kernel %s missing from its module: %s", names[k], cu_err(r));
        }
        fns[k] = f;
    }
    *module = mod;
    return VRAM_OK;
}

void vram_cuda_module_unload(void *module) { cu.ModuleUnload((CUmodule)module); }

void vram_cuda_launch_fn(void *fn, const char *name, int64_t blocks, int threads, void **args) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error != VRAM_OK || blocks <= 0) return;
    if (blocks > 0x7fffffff) blocks = 0x7fffffff;
    CUresult r = cu.LaunchKernel((CUfunction)fn, (unsigned)blocks, 1, 1, (unsigned)threads, 1, 1, 0, (CUstream)g->stream,
                                 args, NULL);
    if (r != CUDA_SUCCESS)
        vram_cuda_fail(VRAM_ERR_DRIVER, "GPU kernel %s (%lld blocks of %d threads) failed to launch: %s", name,
                       (long long)blocks, threads, cu_err(r));
}

vram_status vram_cuda_sync(void) {
    vram_cuda *g = &vram_cuda_state;
    if (g->error == VRAM_OK && g->stream) {
        CUresult r = cu.StreamSynchronize((CUstream)g->stream);
        if (r != CUDA_SUCCESS) vram_cuda_fail(VRAM_ERR_DRIVER, "GPU work failed: %s", cu_err(r));
    }
    if (g->error != VRAM_OK) return vram_error(g->error, "%s", g->error_msg);
    return VRAM_OK;
}

#endif
