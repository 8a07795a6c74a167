/* bench_cuda_pages.c — what one page map and unmap cost on a real GPU, to size the pages
 * model's policy (how often the allocator may move pages before step time suffers).
 *
 *   bench_cuda_pages [DEVICE_SPEC]          (default cuda:0)
 *
 * Times vram's cuda device page_map / page_unmap for ranges of 1, 10 and 100 pages, then the
 * driver calls under them one by one for one page (cuMemCreate, cuMemMap, cuMemSetAccess,
 * cuMemUnmap, cuMemRelease) through its own dlopen of libcuda, and cuEventRecord+Query.
 *
 * Then the question that decides how often the allocator may change mappings while a program
 * runs: does a call wait for the GPU? A kernel spins for ~50 ms on a stream (a non-blocking one,
 * then the legacy default stream PyTorch uses), and each mapping call is timed while it runs:
 * a call that returns in microseconds with the kernel still running leaves the host's lead
 * over the GPU intact; one that takes ~50 ms waited for the kernel (it drains the GPU's queue).
 *
 * Last, what a call costs the GPU: 200 kernels of ~0.2 ms are queued on the legacy default
 * stream with 20 calls of one kind between them, against the same kernels with no calls; the
 * difference over 20 is the step time one such call costs a program whose host runs ahead.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/gpu/cuda_kernels.h"
#include "vram/backend.h"

#ifdef VRAM_BENCH_HAVE_CUDA_H
#include <cuda.h>
#endif

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* The mapping calls of the stall test, each with what it needs set up first (untimed). */
enum { OP_MAP1, OP_MAP10, OP_UNMAP1, OP_ALIAS1, OP_DROP1, OP_EVENT, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"page_map 1 page", "page_map 10 pages", "page_unmap 1 page",
                                               "page_alias 1 page", "page_drop 1 page", "event record+query"};

/* Runs op (pages at base: [0, 10) targets of maps and aliases, [20] an idle mapped page),
 * returns its host time in microseconds, or -1 on error. Leaves the pages as it found them. */
static double timed_op(vram_device *dev, uint64_t base, size_t pg, int op) {
    const vram_device_ops *o = dev->ops;
    uint64_t idle = base + 20 * pg;
    vram_status st = VRAM_OK;
    if (op == OP_UNMAP1 || op == OP_ALIAS1 || op == OP_DROP1) st = o->page_map(dev, idle, pg);
    if (st == VRAM_OK && op == OP_DROP1) st = o->page_alias(dev, idle, base, pg);
    if (st != VRAM_OK) return -1;
    void *ev = NULL;
    double t0 = now_us();
    switch (op) {
    case OP_MAP1: st = o->page_map(dev, base, pg); break;
    case OP_MAP10: st = o->page_map(dev, base, 10 * pg); break;
    case OP_UNMAP1: st = o->page_unmap(dev, idle, pg); break;
    case OP_ALIAS1: st = o->page_alias(dev, idle, base, pg); break;
    case OP_DROP1: st = o->page_drop(dev, idle, pg); break;
    case OP_EVENT:
        st = o->event_record(dev, 0, &ev);
        if (st == VRAM_OK) o->event_query(dev, ev);
        break;
    }
    double us = now_us() - t0;
    if (st != VRAM_OK) return -1;
    /* undo, untimed */
    if (op == OP_MAP1 || op == OP_ALIAS1 || op == OP_DROP1) o->page_unmap(dev, base, pg);
    if (op == OP_MAP10) o->page_unmap(dev, base, 10 * pg);
    if (op == OP_ALIAS1) o->page_drop(dev, idle, pg);
    if (op == OP_EVENT) o->event_destroy(dev, ev);
    return us;
}

static void pipeline_test(vram_device *dev, tcu *t, uint64_t base, size_t pg);

static void stall_test(vram_device *dev, uint64_t base, size_t pg) {
    tcu t;
    if (tcu_open(&t, dev->index) != 0) {
        printf("stall test: skipped (no driver kernels)\n");
        return;
    }
    tcu_ptr streams[2] = {tcu_stream(&t), NULL}, done = NULL;
    const char *stream_names[2] = {"non-blocking stream", "legacy default stream"};
    if (!streams[0] || t.EventCreate(&done, 0)) {
        printf("stall test: skipped (no stream or event)\n");
        return;
    }
    const uint64_t spin = 100000000; /* clocks: ~50 ms at the H200's ~2 GHz */
    printf("\nmapping calls while a kernel spins (~50 ms); median of 5:\n");
    printf("| call | stream of the kernel | host us | kernel still running after the call |\n|---|---|---|---|\n");
    for (int s = 0; s < 2; s++) {
        for (int op = 0; op < OP_COUNT; op++) {
            double us[5];
            int running = 0, n = 0;
            for (int r = 0; r < 5; r++) {
                t.CtxSynchronize();
                if (tcu_fill(&t, t.errs, 4, 0, streams[s], spin) || t.EventRecord(done, streams[s])) break;
                double x = timed_op(dev, base, pg, op);
                if (x < 0) {
                    printf("| %s | %s | failed: %s | |\n", op_names[op], stream_names[s], vram_last_error());
                    break;
                }
                running += t.EventQuery(done) != 0;
                us[n++] = x;
            }
            t.CtxSynchronize();
            if (n < 5) continue;
            for (int i = 1; i < n; i++) /* insertion sort for the median */
                for (int j = i; j > 0 && us[j] < us[j - 1]; j--) {
                    double x = us[j];
                    us[j] = us[j - 1];
                    us[j - 1] = x;
                }
            printf("| %s | %s | %.1f | %d of 5 |\n", op_names[op], stream_names[s], us[2], running);
        }
    }
    t.StreamDestroy(streams[0]);
    pipeline_test(dev, &t, base, pg);
}

/* The calls of the pipeline test; each acts on page k (0..19) of its own set, prepared
 * before the timed queue: fresh = never mapped, used = mapped once and unmapped. */
enum { PL_NONE, PL_MAP_FRESH, PL_MAP_USED, PL_UNMAP, PL_ALIAS_FRESH, PL_DROP, PL_EVENT, PL_COUNT };
static const char *const pl_names[PL_COUNT] = {
    "(no calls)", "page_map at a never-mapped address", "page_map at an address mapped before",
    "page_unmap of an idle page", "page_alias to a never-mapped address", "page_drop of an alias source",
    "event record+query"};

static void pipeline_test(vram_device *dev, tcu *t, uint64_t base, size_t pg) {
    const vram_device_ops *o = dev->ops;
    const uint64_t spin = 400000; /* ~0.2 ms a kernel */
    double base_ms = 0;
    uint64_t va = base + 32 * pg; /* pages [32, 256) of the reservation: 20 per test, never reused */
    printf("\nGPU cost of a call between queued kernels (legacy default stream; 200 kernels, 20 calls):\n");
    printf("| call | queue ms | step time per call, ms |\n|---|---|---|\n");
    for (int op = 0; op < PL_COUNT; op++) {
        uint64_t set = va, src = va + 20 * pg; /* the op's pages, and alias sources */
        if (op != PL_NONE) va += 40 * pg;
        if (va > base + 256 * pg) break;
        int ok = 1;
        for (int k = 0; k < 20 && ok; k++) { /* set up, untimed */
            if (op == PL_MAP_USED) ok = o->page_map(dev, set + k * pg, pg) == VRAM_OK &&
                                        o->page_unmap(dev, set + k * pg, pg) == VRAM_OK;
            if (op == PL_UNMAP) ok = o->page_map(dev, set + k * pg, pg) == VRAM_OK;
            if (op == PL_ALIAS_FRESH) ok = o->page_map(dev, src + k * pg, pg) == VRAM_OK;
            if (op == PL_DROP) ok = o->page_map(dev, src + k * pg, pg) == VRAM_OK &&
                                    o->page_alias(dev, src + k * pg, set + k * pg, pg) == VRAM_OK;
        }
        t->CtxSynchronize();
        void *ev[20] = {0};
        double t0 = now_us();
        for (int i = 0, k = 0; i < 200 && ok; i++) {
            if (tcu_fill(t, t->errs, 4, 0, NULL, spin)) ok = 0;
            if (i % 10 != 5 || op == PL_NONE) continue;
            uint64_t p = set + k * pg;
            switch (op) {
            case PL_MAP_FRESH:
            case PL_MAP_USED: ok = o->page_map(dev, p, pg) == VRAM_OK; break;
            case PL_UNMAP: ok = o->page_unmap(dev, p, pg) == VRAM_OK; break;
            case PL_ALIAS_FRESH: ok = o->page_alias(dev, src + k * pg, p, pg) == VRAM_OK; break;
            case PL_DROP: ok = o->page_drop(dev, src + k * pg, pg) == VRAM_OK; break;
            case PL_EVENT: ok = o->event_record(dev, 0, &ev[k]) == VRAM_OK; if (ok) o->event_query(dev, ev[k]); break;
            }
            k++;
        }
        t->CtxSynchronize();
        double ms = (now_us() - t0) / 1000;
        if (!ok) {
            printf("| %s | failed: %s | |\n", pl_names[op], vram_last_error());
            continue;
        }
        if (op == PL_NONE) base_ms = ms;
        printf("| %s | %.2f | %.3f |\n", pl_names[op], ms, op == PL_NONE ? 0.0 : (ms - base_ms) / 20);
        for (int k = 0; k < 20; k++) { /* clean up */
            if (op == PL_MAP_FRESH || op == PL_MAP_USED || op == PL_ALIAS_FRESH || op == PL_DROP)
                o->page_unmap(dev, set + k * pg, pg);
            if (op == PL_ALIAS_FRESH) o->page_drop(dev, src + k * pg, pg);
            if (ev[k]) o->event_destroy(dev, ev[k]);
        }
    }
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "cuda:0";
    vram_device *dev = NULL;
    if (vram_device_open(spec, &dev) != VRAM_OK) {
        fprintf(stderr, "bench_cuda_pages: %s: %s\n", spec, vram_last_error());
        return 1;
    }
    if (!vram_device_has_pages(dev)) {
        fprintf(stderr, "bench_cuda_pages: %s has no pages\n", spec);
        return 1;
    }
    size_t pg = dev->page_size;
    printf("device: %s (%s), page %zu bytes\n", spec, dev->name, pg);
    uint64_t base = 0;
    if (dev->ops->va_reserve(dev, 256 * pg, &base) != VRAM_OK) {
        fprintf(stderr, "bench_cuda_pages: reserve: %s\n", vram_last_error());
        return 1;
    }
    const int counts[] = {1, 10, 100};
    for (int c = 0; c < 3; c++) {
        int reps = counts[c] == 100 ? 10 : 100;
        double tm = 0, tu = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now_us();
            if (dev->ops->page_map(dev, base, counts[c] * pg) != VRAM_OK) {
                fprintf(stderr, "map: %s\n", vram_last_error());
                return 1;
            }
            double t1 = now_us();
            dev->ops->page_unmap(dev, base, counts[c] * pg);
            double t2 = now_us();
            tm += t1 - t0;
            tu += t2 - t1;
        }
        printf("vram page_map %3d pages: %8.1f us (%6.1f us/page); page_unmap: %8.1f us (%6.1f us/page)\n", counts[c],
               tm / reps, tm / reps / counts[c], tu / reps, tu / reps / counts[c]);
    }
    if (dev->ops->event_record) {
        void *ev = NULL;
        double t0 = now_us();
        for (int i = 0; i < 1000; i++) {
            dev->ops->event_record(dev, 0, &ev);
            dev->ops->event_query(dev, ev);
            dev->ops->event_destroy(dev, ev);
        }
        printf("event record+query+destroy (pooled): %.2f us\n", (now_us() - t0) / 1000);
    }
#ifdef VRAM_BENCH_HAVE_CUDA_H
    void *lib = strcmp(dev->kind, "cuda") == 0 ? dlopen("libcuda.so.1", RTLD_NOW) : NULL;
    if (!lib) goto done;
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long) =
        (CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))dlsym(lib, "cuMemCreate");
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) =
        (CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))dlsym(lib, "cuMemMap");
    CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t) =
        (CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))dlsym(lib, "cuMemSetAccess");
    CUresult (*unmap)(CUdeviceptr, size_t) = (CUresult(*)(CUdeviceptr, size_t))dlsym(lib, "cuMemUnmap");
    CUresult (*release)(CUmemGenericAllocationHandle) = (CUresult(*)(CUmemGenericAllocationHandle))dlsym(lib, "cuMemRelease");
    if (create && map && access && unmap && release) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev->index;
        CUmemAccessDesc desc = {prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        double t[6] = {0};
        const int reps = 200;
        for (int r = 0; r < reps; r++) {
            CUmemGenericAllocationHandle h;
            double a = now_us();
            create(&h, pg, &prop, 0);
            double b = now_us();
            map((CUdeviceptr)base, pg, 0, h, 0);
            double c = now_us();
            access((CUdeviceptr)base, pg, &desc, 1);
            double d = now_us();
            unmap((CUdeviceptr)base, pg);
            double e = now_us();
            map((CUdeviceptr)base + pg, pg, 0, h, 0); /* the same handle at another address */
            access((CUdeviceptr)base + pg, pg, &desc, 1);
            double f = now_us();
            unmap((CUdeviceptr)base + pg, pg);
            double g = now_us();
            release(h);
            double hh = now_us();
            t[0] += b - a, t[1] += c - b, t[2] += d - c, t[3] += e - d, t[4] += f - e, t[5] += hh - g;
        }
        printf("driver, one page: cuMemCreate %.1f us, cuMemMap %.1f us, cuMemSetAccess %.1f us, cuMemUnmap %.1f us, "
               "remap of a kept handle (map+access) %.1f us, cuMemRelease %.1f us\n",
               t[0] / reps, t[1] / reps, t[2] / reps, t[3] / reps, t[4] / reps, t[5] / reps);
    }
done:
#endif
    if (strcmp(dev->kind, "cuda") == 0) stall_test(dev, base, pg);
    dev->ops->va_release(dev, base, 256 * pg);
    vram_device_close(dev);
    return 0;
}
