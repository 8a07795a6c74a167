/* cuda_kernels.h — what the GPU tests need from the driver beyond libvram: streams, and two
 * kernels that write and check every word of a buffer.
 *
 * libvram never links the driver, and the tests cannot compile .cu files (CI has no nvcc), so
 * the kernels are PTX text loaded with cuModuleLoadData and JIT-compiled by the driver:
 *   vram_fill(p, nwords, seed, spin_cycles)   optionally spins spin_cycles clocks, then writes
 *                                             word i = (i * 0x9E3779B1) ^ seed
 *   vram_check(p, nwords, seed, errors)       counts words that differ from that pattern
 * A test helper opens the driver by itself (dlopen) and uses the primary context of the
 * device, the same context vram's cuda device uses, so addresses and streams are shared.
 * Tests make non-blocking streams (tcu_stream) so that nothing orders them behind each other.
 */
#ifndef VRAM_TESTS_CUDA_KERNELS_H
#define VRAM_TESTS_CUDA_KERNELS_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int tcu_result;
typedef void *tcu_ptr; /* opaque driver handles */

/* The two kernels' shared parts: a grid-stride loop over word indices %rd6 < n (%rd2) that
 * computes each word's pattern value (%r8, from the seed in %r1) and address (%rd8, from p in
 * %rd1), and the loop's end. */
#define TCU_PTX_WORDS_BEGIN \
    "  mov.u32 %r3, %ctaid.x;\n" \
    "  mov.u32 %r4, %ntid.x;\n" \
    "  mov.u32 %r5, %tid.x;\n" \
    "  mul.wide.u32 %rd3, %r3, %r4;\n" \
    "  cvt.u64.u32 %rd4, %r5;\n" \
    "  add.u64 %rd6, %rd3, %rd4;\n" \
    "  mov.u32 %r6, %nctaid.x;\n" \
    "  mul.wide.u32 %rd5, %r6, %r4;\n" \
    "LOOP:\n" \
    "  setp.ge.u64 %q1, %rd6, %rd2;\n" \
    "  @%q1 bra DONE;\n" \
    "  cvt.u32.u64 %r8, %rd6;\n" \
    "  mul.lo.s32 %r8, %r8, -1640531535;\n" \
    "  xor.b32 %r8, %r8, %r1;\n" \
    "  shl.b64 %rd7, %rd6, 2;\n" \
    "  add.u64 %rd8, %rd1, %rd7;\n"
#define TCU_PTX_WORDS_END \
    "  add.u64 %rd6, %rd6, %rd5;\n" \
    "  bra LOOP;\n" \
    "DONE:\n" \
    "  ret;\n" \
    "}\n"
/* Entry of a kernel (p, n, seed, LAST): registers and the first three parameters. */
#define TCU_PTX_ENTRY(name, last) \
    ".visible .entry " name "(.param .u64 p, .param .u64 n, .param .u32 seed, .param .u64 " last ")\n" \
    "{\n" \
    "  .reg .pred %q<4>;\n" \
    "  .reg .b32 %r<12>;\n" \
    "  .reg .b64 %rd<16>;\n" \
    "  ld.param.u64 %rd1, [p];\n" \
    "  ld.param.u64 %rd2, [n];\n" \
    "  ld.param.u32 %r1, [seed];\n" \
    "  ld.param.u64 %rd9, [" last "];\n" \
    "  cvta.to.global.u64 %rd1, %rd1;\n"

static const char tcu_ptx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    TCU_PTX_ENTRY("vram_fill", "spin")
    "  mov.u64 %rd10, %clock64;\n"
    "SPIN:\n"
    "  mov.u64 %rd11, %clock64;\n"
    "  sub.s64 %rd12, %rd11, %rd10;\n"
    "  setp.lt.s64 %q3, %rd12, %rd9;\n"
    "  @%q3 bra SPIN;\n"
    TCU_PTX_WORDS_BEGIN
    "  st.volatile.global.u32 [%rd8], %r8;\n"
    TCU_PTX_WORDS_END
    TCU_PTX_ENTRY("vram_check", "errs")
    "  cvta.to.global.u64 %rd9, %rd9;\n"
    TCU_PTX_WORDS_BEGIN
    "  ld.volatile.global.u32 %r9, [%rd8];\n"
    "  setp.ne.u32 %q2, %r9, %r8;\n"
    "  @%q2 atom.global.add.u32 %r10, [%rd9], 1;\n"
    TCU_PTX_WORDS_END;

typedef struct tcu {
    void *lib;
    tcu_ptr ctx, module, fill, check;
    int device;
    uint64_t errs; /* a 4-byte device counter for vram_check */
    tcu_result (*Init)(unsigned);
    tcu_result (*DeviceGet)(int *, int);
    tcu_result (*DeviceGetCount)(int *);
    tcu_result (*PrimaryCtxRetain)(tcu_ptr *, int);
    tcu_result (*CtxSetCurrent)(tcu_ptr);
    tcu_result (*CtxSynchronize)(void);
    tcu_result (*ModuleLoadData)(tcu_ptr *, const void *);
    tcu_result (*ModuleGetFunction)(tcu_ptr *, tcu_ptr, const char *);
    tcu_result (*LaunchKernel)(tcu_ptr, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               tcu_ptr, void **, void **);
    tcu_result (*StreamCreate)(tcu_ptr *, unsigned);
    tcu_result (*StreamDestroy)(tcu_ptr);
    tcu_result (*StreamSynchronize)(tcu_ptr);
    tcu_result (*EventCreate)(tcu_ptr *, unsigned);
    tcu_result (*EventRecord)(tcu_ptr, tcu_ptr);
    tcu_result (*EventQuery)(tcu_ptr);
    tcu_result (*MemAlloc)(uint64_t *, size_t);
    tcu_result (*MemFree)(uint64_t);
    tcu_result (*MemsetD32Async)(uint64_t, unsigned, size_t, tcu_ptr);
    tcu_result (*MemcpyDtoHAsync)(void *, uint64_t, size_t, tcu_ptr);
    tcu_result (*MemGetInfo)(size_t *, size_t *);
} tcu;

/* Opens the driver and loads the kernels; returns 0 on success, else prints why. */
/* Whether the GPU tests have something to run on, asked of the driver itself (not through
 * libvram, whose own failures must fail the tests, not skip them): 0 when there is no driver
 * library or the driver reports no device (fewer than min_devices), 1 when there are enough
 * devices, -1 when the driver is there but answers with another error (a broken setup: the test
 * goes on and fails). */
static inline int tcu_gpu_present(int min_devices) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    tcu_result (*init)(unsigned) = NULL;
    tcu_result (*count)(int *) = NULL;
    void *fi = dlsym(lib, "cuInit"), *fc = dlsym(lib, "cuDeviceGetCount");
    memcpy(&init, &fi, sizeof fi);
    memcpy(&count, &fc, sizeof fc);
    int n = 0, present = -1;
    if (init && count) {
        tcu_result r = init(0);
        if (r == 100) present = 0; /* CUDA_ERROR_NO_DEVICE */
        else if (r == 0 && count(&n) == 0) present = n >= min_devices;
    }
    dlclose(lib);
    return present;
}

static inline int tcu_open(tcu *t, int device) {
    memset(t, 0, sizeof *t);
    t->device = device;
    t->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!t->lib) return -1;
    struct {
        void *slot;
        const char *name;
    } syms[] = {
        {&t->Init, "cuInit"},
        {&t->DeviceGet, "cuDeviceGet"},
        {&t->DeviceGetCount, "cuDeviceGetCount"},
        {&t->PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
        {&t->CtxSetCurrent, "cuCtxSetCurrent"},
        {&t->CtxSynchronize, "cuCtxSynchronize"},
        {&t->ModuleLoadData, "cuModuleLoadData"},
        {&t->ModuleGetFunction, "cuModuleGetFunction"},
        {&t->LaunchKernel, "cuLaunchKernel"},
        {&t->StreamCreate, "cuStreamCreate"},
        {&t->StreamDestroy, "cuStreamDestroy_v2"},
        {&t->StreamSynchronize, "cuStreamSynchronize"},
        {&t->EventCreate, "cuEventCreate"},
        {&t->EventRecord, "cuEventRecord"},
        {&t->EventQuery, "cuEventQuery"},
        {&t->MemAlloc, "cuMemAlloc_v2"},
        {&t->MemFree, "cuMemFree_v2"},
        {&t->MemsetD32Async, "cuMemsetD32Async"},
        {&t->MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
        {&t->MemGetInfo, "cuMemGetInfo_v2"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *fn = dlsym(t->lib, syms[i].name);
        if (!fn) {
            fprintf(stderr, "tcu: driver lacks %s\n", syms[i].name);
            return -1;
        }
        memcpy(syms[i].slot, &fn, sizeof fn);
    }
    int dev = 0, r;
    if ((r = t->Init(0)) || (r = t->DeviceGet(&dev, device)) || (r = t->PrimaryCtxRetain(&t->ctx, dev)) ||
        (r = t->CtxSetCurrent(t->ctx))) {
        fprintf(stderr, "tcu: driver setup failed (%d)\n", r);
        return -1;
    }
    if ((r = t->ModuleLoadData(&t->module, tcu_ptx)) || (r = t->ModuleGetFunction(&t->fill, t->module, "vram_fill")) ||
        (r = t->ModuleGetFunction(&t->check, t->module, "vram_check")) || (r = t->MemAlloc(&t->errs, 4))) {
        fprintf(stderr, "tcu: loading the PTX kernels failed (%d)\n", r);
        return -1;
    }
    return 0;
}

static inline tcu_ptr tcu_stream(tcu *t) {
    tcu_ptr s = NULL;
    t->CtxSetCurrent(t->ctx);
    return t->StreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */) ? NULL : s;
}

/* Queues a fill of `bytes` (a multiple of 4) at p on stream s, after spinning `spin` clocks. */
static inline int tcu_fill(tcu *t, uint64_t p, size_t bytes, uint32_t seed, tcu_ptr s, uint64_t spin) {
    uint64_t n = bytes / 4;
    void *args[] = {&p, &n, &seed, &spin};
    unsigned grid = spin ? 132 : (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    if (grid == 0) grid = 1;
    t->CtxSetCurrent(t->ctx);
    return t->LaunchKernel(t->fill, grid, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

/* Checks the pattern on stream s and waits: returns the number of wrong words, or -1. */
static inline int64_t tcu_check(tcu *t, uint64_t p, size_t bytes, uint32_t seed, tcu_ptr s) {
    uint64_t n = bytes / 4, e = t->errs;
    void *args[] = {&p, &n, &seed, &e};
    unsigned grid = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    if (grid == 0) grid = 1;
    uint32_t count = 0;
    t->CtxSetCurrent(t->ctx);
    /* Everything on stream s (non-blocking streams in the tests), so a kernel spinning on
     * another stream is not waited for. */
    if (t->MemsetD32Async(t->errs, 0, 1, s) || t->LaunchKernel(t->check, grid, 1, 1, 256, 1, 1, 0, s, args, NULL) ||
        t->MemcpyDtoHAsync(&count, t->errs, 4, s) || t->StreamSynchronize(s))
        return -1;
    return count;
}

#endif
