/* cuda.c — the CUDA device: real GPU memory behind the allocator, through the driver API.
 *
 * The driver (libcuda.so.1) is opened with dlopen at run time and never linked, so libvram and
 * `vram` build wherever the toolkit's <cuda.h> is (only its types are used) and run on machines
 * without a GPU, where opening "cuda" fails with VRAM_ERR_NO_DEVICE and says what was tried.
 * Without <cuda.h> at build time (VRAM_HAVE_CUDA_H unset) the backend says so the same way.
 *
 * Spec: "cuda[:N][:segments|:pages]". N is the device ordinal (default 0). The pages model is
 * used where the device supports virtual memory management, unless ":segments" asks for the
 * segments model; ":pages" insists on pages and fails where they are missing.
 *
 * Each open device holds a reference to device N's primary context (the one the CUDA runtime
 * and PyTorch use, so addresses, streams and events are shared with them) and makes it current
 * on the calling thread at the start of every call that talks to the driver: the allocator may
 * be called from any thread, PyTorch's included, and cuCtxSetCurrent is a thread-local store.
 *
 *   segments  mem_alloc / mem_free are cuMemAlloc / cuMemFree.
 *   pages     va_reserve is cuMemAddressReserve. Each page_map is one unit: one physical
 *             allocation (cuMemCreate of the whole range), one cuMemMap, one cuMemSetAccess;
 *             the driver's cost goes by allocations, not bytes (docs/allocator-evidence.md §18).
 *             page_unmap, page_alias and page_drop take whole units, as cuMemUnmap must. The
 *             reservation keeps a slot per page of the granularity: the unit's handle
 *             (0 = unmapped) and, on a unit's first page, its length in pages.
 *   events    timing-disabled CUevents, created on demand and kept in a free list for reuse,
 *             because cuEventCreate costs far more than a record.
 *   captures  cuStreamGetCaptureInfo, else cuStreamIsCapturing (both optional) tell the
 *             allocator which CUDA graph capture, if any, an allocation's stream records
 *             (backend.h, stream_capture).
 *
 * One mutex per device guards the page table and the event free list: the allocator serialises
 * its own calls, but two allocators (or a test) may share a device.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/backend.h"

#ifndef VRAM_HAVE_CUDA_H

vram_status vram_cuda_device_open(const char *args, vram_device **out) {
    (void)args;
    *out = NULL;
    return vram_error(VRAM_ERR_NO_DEVICE,
                      "no CUDA device: vram was built without CUDA headers (cuda.h was not found "
                      "at configure time; set CUDAToolkit_ROOT or CUDA_HOME and rebuild)");
}

#else

#include <cuda.h>

/* The driver entry points vram uses, resolved once per process. Versioned names are those the
 * toolkit's macros map to, so the ABI matches the types from <cuda.h>. */
typedef struct cuda_driver {
    CUresult (*Init)(unsigned int);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*MemAddressFree)(CUdeviceptr, size_t);
    CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                          unsigned long long);
    CUresult (*MemRelease)(CUmemGenericAllocationHandle);
    CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*MemUnmap)(CUdeviceptr, size_t);
    CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *,
                                            CUmemAllocationGranularity_flags);
    CUresult (*EventCreate)(CUevent *, unsigned int);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus *); /* optional: NULL if absent */
    /* optional; the unversioned symbol keeps CUDA 10.1's ABI (status and capture id only) */
    CUresult (*StreamGetCaptureInfo)(CUstream, CUstreamCaptureStatus *, cuuint64_t *);
} cuda_driver;

static cuda_driver drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static vram_status drv_status = VRAM_ERR_NO_DEVICE;
static char drv_error[512];

static const char *cuda_error_name(CUresult r) {
    const char *name = NULL;
    if (drv.GetErrorName && drv.GetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
    return "unknown CUDA error";
}

/* Loads libcuda and every symbol; records why it failed for every later open to report. */
static void cuda_driver_load(void) {
    const char *path = getenv("VRAM_LIBCUDA");
    if (!path || !*path) path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(drv_error, sizeof drv_error,
                 "no CUDA driver: dlopen(\"%s\") failed: %s (is the NVIDIA driver installed?)", path,
                 why ? why : "unknown reason");
        return;
    }
    static const struct {
        const char *name;
        size_t offset;
    } syms[] = {
#define SYM(field, name) {name, offsetof(cuda_driver, field)}
        SYM(Init, "cuInit"),
        SYM(DriverGetVersion, "cuDriverGetVersion"),
        SYM(GetErrorName, "cuGetErrorName"),
        SYM(DeviceGetCount, "cuDeviceGetCount"),
        SYM(DeviceGet, "cuDeviceGet"),
        SYM(DeviceGetName, "cuDeviceGetName"),
        SYM(DeviceTotalMem, "cuDeviceTotalMem_v2"),
        SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
        SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
        SYM(CtxSetCurrent, "cuCtxSetCurrent"),
        SYM(CtxSynchronize, "cuCtxSynchronize"),
        SYM(MemAlloc, "cuMemAlloc_v2"),
        SYM(MemFree, "cuMemFree_v2"),
        SYM(MemGetInfo, "cuMemGetInfo_v2"),
        SYM(MemAddressReserve, "cuMemAddressReserve"),
        SYM(MemAddressFree, "cuMemAddressFree"),
        SYM(MemCreate, "cuMemCreate"),
        SYM(MemRelease, "cuMemRelease"),
        SYM(MemMap, "cuMemMap"),
        SYM(MemUnmap, "cuMemUnmap"),
        SYM(MemSetAccess, "cuMemSetAccess"),
        SYM(MemGetAllocationGranularity, "cuMemGetAllocationGranularity"),
        SYM(EventCreate, "cuEventCreate"),
        SYM(EventRecord, "cuEventRecord"),
        SYM(EventQuery, "cuEventQuery"),
        SYM(EventSynchronize, "cuEventSynchronize"),
        SYM(EventDestroy, "cuEventDestroy_v2"),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *fn = dlsym(lib, syms[i].name);
        if (!fn) {
            snprintf(drv_error, sizeof drv_error,
                     "CUDA driver %s lacks %s (driver too old for vram; CUDA 11.2 or newer needed)",
                     path, syms[i].name);
            memset(&drv, 0, sizeof drv);
            dlclose(lib);
            return;
        }
        memcpy((char *)&drv + syms[i].offset, &fn, sizeof fn);
    }
    /* optional: without them every allocation during a capture is a capture's (backend.h) */
    void *is_capturing = dlsym(lib, "cuStreamIsCapturing"), *capture_info = dlsym(lib, "cuStreamGetCaptureInfo");
    memcpy(&drv.StreamIsCapturing, &is_capturing, sizeof is_capturing);
    memcpy(&drv.StreamGetCaptureInfo, &capture_info, sizeof capture_info);
    CUresult r = drv.Init(0);
    if (r != CUDA_SUCCESS) {
        snprintf(drv_error, sizeof drv_error, "no CUDA device: cuInit failed: %s (%d)", cuda_error_name(r),
                 (int)r);
        return; /* the library stays loaded: GetErrorName keeps working for the message */
    }
    drv_status = VRAM_OK;
}

typedef struct cuda_reservation {
    CUdeviceptr base;
    size_t size;
    size_t num_pages;
    CUmemGenericAllocationHandle *pages; /* one slot per page: its unit's handle; 0 = not mapped */
    size_t *units;                       /* on a unit's first page its length in pages, else 0 */
} cuda_reservation;

typedef struct cuda_state {
    CUdevice device;
    CUcontext ctx;
    int ordinal;
    size_t granularity;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    pthread_mutex_t lock;
    cuda_reservation *res;
    size_t num_res, cap_res;
    CUevent *free_events;
    size_t num_free_events, cap_free_events;
} cuda_state;

static vram_status cuda_fail(CUresult r, const char *what) {
    vram_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? VRAM_ERR_OUT_OF_MEMORY : VRAM_ERR_DRIVER;
    return vram_error(st, "CUDA %s failed: %s (%d)", what, cuda_error_name(r), (int)r);
}

static vram_status cuda_enter(cuda_state *s) {
    CUresult r = drv.CtxSetCurrent(s->ctx);
    return r == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r, "cuCtxSetCurrent");
}

static vram_status cuda_mem_alloc(vram_device *dev, size_t size, uint64_t *addr) {
    cuda_state *s = dev->impl;
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    CUdeviceptr p = 0;
    CUresult r = drv.MemAlloc(&p, size);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemAlloc");
    *addr = (uint64_t)p;
    return VRAM_OK;
}

static vram_status cuda_mem_free(vram_device *dev, uint64_t addr, size_t size) {
    (void)size;
    cuda_state *s = dev->impl;
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    CUresult r = drv.MemFree((CUdeviceptr)addr);
    return r == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r, "cuMemFree");
}

static vram_status cuda_va_reserve(vram_device *dev, size_t size, uint64_t *addr) {
    cuda_state *s = dev->impl;
    if (size == 0 || size % s->granularity)
        return vram_error(VRAM_ERR_INVALID_ARG, "cuda: reservation of %zu bytes is not a multiple of the %zu-byte page",
                          size, s->granularity);
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    size_t num_pages = size / s->granularity;
    CUmemGenericAllocationHandle *pages = calloc(num_pages, sizeof *pages);
    size_t *units = calloc(num_pages, sizeof *units);
    if (!pages || !units) {
        free(pages);
        free(units);
        return vram_error(VRAM_ERR_HOST_MEMORY, "cuda: no host memory for a page table of %zu pages", num_pages);
    }
    CUdeviceptr base = 0;
    CUresult r = drv.MemAddressReserve(&base, size, s->granularity, 0, 0);
    if (r != CUDA_SUCCESS) {
        free(pages);
        free(units);
        return cuda_fail(r, "cuMemAddressReserve");
    }
    pthread_mutex_lock(&s->lock);
    if (s->num_res == s->cap_res) {
        size_t cap = s->cap_res ? 2 * s->cap_res : 4;
        cuda_reservation *grown = realloc(s->res, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&s->lock);
            drv.MemAddressFree(base, size);
            free(pages);
            free(units);
            return vram_error(VRAM_ERR_HOST_MEMORY, "cuda: no host memory for the reservation table");
        }
        s->res = grown;
        s->cap_res = cap;
    }
    s->res[s->num_res++] = (cuda_reservation){base, size, num_pages, pages, units};
    pthread_mutex_unlock(&s->lock);
    *addr = (uint64_t)base;
    return VRAM_OK;
}

/* The reservation holding [addr, addr+size), or NULL. Caller holds the lock. */
static cuda_reservation *cuda_find(cuda_state *s, uint64_t addr, size_t size) {
    for (size_t i = 0; i < s->num_res; i++) {
        cuda_reservation *r = &s->res[i];
        if (addr >= r->base && size <= r->size && addr - r->base <= r->size - size) return r;
    }
    return NULL;
}

/* A page slot whose mapping is an alias source (page_alias): its handle belongs to the alias. */
#define CUDA_ALIAS_SOURCE (~(CUmemGenericAllocationHandle)0)

/* Unmaps (and, unless they are alias sources, releases) the units that start in pages
 * [first, first+count) of res; callers pass whole units (cuda_whole_units). */
static CUresult cuda_unmap_pages(cuda_state *s, cuda_reservation *res, size_t first, size_t count) {
    CUresult worst = CUDA_SUCCESS;
    for (size_t i = first; i < first + count;) {
        size_t n = res->units[i];
        if (!res->pages[i] || !n) {
            i++;
            continue;
        }
        CUresult r = drv.MemUnmap(res->base + i * s->granularity, n * s->granularity);
        if (r == CUDA_SUCCESS && res->pages[i] != CUDA_ALIAS_SOURCE) r = drv.MemRelease(res->pages[i]);
        if (r != CUDA_SUCCESS && worst == CUDA_SUCCESS) worst = r;
        memset(&res->pages[i], 0, n * sizeof res->pages[0]);
        res->units[i] = 0;
        i += n;
    }
    return worst;
}

/* Whether pages [first, first+count) of res are whole units, all alias sources (`alias`) or
 * all not. */
static int cuda_whole_units(const cuda_reservation *res, size_t first, size_t count, int alias) {
    for (size_t i = first; i < first + count;) {
        size_t n = res->units[i];
        if (!n || i + n > first + count || !res->pages[i] || (res->pages[i] == CUDA_ALIAS_SOURCE) != alias) return 0;
        i += n;
    }
    return 1;
}

static vram_status cuda_va_release(vram_device *dev, uint64_t addr, size_t size) {
    cuda_state *s = dev->impl;
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    pthread_mutex_lock(&s->lock);
    size_t i = 0;
    while (i < s->num_res && !(s->res[i].base == addr && s->res[i].size == size)) i++;
    if (i == s->num_res) {
        pthread_mutex_unlock(&s->lock);
        return vram_error(VRAM_ERR_NOT_FOUND, "cuda: no reservation at 0x%llx of %zu bytes", (unsigned long long)addr, size);
    }
    cuda_reservation res = s->res[i];
    s->res[i] = s->res[--s->num_res];
    pthread_mutex_unlock(&s->lock);
    /* Pages still mapped are the allocator's to have unmapped; release them rather than leak. */
    drv.CtxSynchronize();
    CUresult r = cuda_unmap_pages(s, &res, 0, res.num_pages);
    CUresult r2 = drv.MemAddressFree(res.base, res.size);
    free(res.pages);
    free(res.units);
    if (r != CUDA_SUCCESS) return cuda_fail(r, "cuMemUnmap");
    return r2 == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r2, "cuMemAddressFree");
}

/* Checks that [addr, addr+size) is page aligned, inside one reservation, and that every page
 * in it is mapped (`mapped`) or unmapped (!`mapped`); on success returns with the device
 * current and the lock held, the reservation and the first page index set. */
static vram_status cuda_lock_pages(cuda_state *s, uint64_t addr, size_t size, int mapped, const char *what,
                                   cuda_reservation **res_out, size_t *first_out) {
    if (size == 0 || size % s->granularity || addr % s->granularity)
        return vram_error(VRAM_ERR_INVALID_ARG, "cuda: %s of [0x%llx, +%zu) is not page aligned (page %zu)", what,
                          (unsigned long long)addr, size, s->granularity);
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    pthread_mutex_lock(&s->lock);
    cuda_reservation *res = cuda_find(s, addr, size);
    if (!res) {
        pthread_mutex_unlock(&s->lock);
        return vram_error(VRAM_ERR_INVALID_ARG, "cuda: %s of [0x%llx, +%zu) is outside every reservation", what,
                          (unsigned long long)addr, size);
    }
    size_t first = (addr - res->base) / s->granularity, count = size / s->granularity;
    for (size_t i = first; i < first + count; i++) {
        if ((res->pages[i] != 0) != (mapped != 0)) {
            pthread_mutex_unlock(&s->lock);
            return vram_error(VRAM_ERR_STATE, "cuda: page at 0x%llx is %s", (unsigned long long)(res->base + i * s->granularity),
                              mapped ? "not mapped" : "already mapped");
        }
    }
    *res_out = res;
    *first_out = first;
    return VRAM_OK;
}

static vram_status cuda_page_map(vram_device *dev, uint64_t addr, size_t size) {
    cuda_state *s = dev->impl;
    cuda_reservation *res = NULL;
    size_t first = 0, count = size / s->granularity;
    vram_status st = cuda_lock_pages(s, addr, size, 0, "map", &res, &first);
    if (st != VRAM_OK) return st;
    CUmemGenericAllocationHandle h = 0;
    const char *what = "cuMemCreate";
    CUresult r = drv.MemCreate(&h, size, &s->prop, 0);
    if (r == CUDA_SUCCESS) {
        what = "cuMemMap";
        r = drv.MemMap(addr, size, 0, h, 0);
        if (r == CUDA_SUCCESS) {
            what = "cuMemSetAccess";
            r = drv.MemSetAccess((CUdeviceptr)addr, size, &s->access, 1);
            if (r != CUDA_SUCCESS) drv.MemUnmap(addr, size); /* all or nothing */
        }
        if (r != CUDA_SUCCESS) drv.MemRelease(h);
    }
    if (r == CUDA_SUCCESS) {
        for (size_t i = first; i < first + count; i++) res->pages[i] = h;
        res->units[first] = count;
    }
    pthread_mutex_unlock(&s->lock);
    return r == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r, what);
}

/* Unmaps [addr, addr+size), which must be whole units: mapped ones (page_unmap) or alias
 * sources (page_drop). */
static vram_status cuda_unmap_units(vram_device *dev, uint64_t addr, size_t size, int alias_sources) {
    cuda_state *s = dev->impl;
    cuda_reservation *res = NULL;
    size_t first = 0, count = size / s->granularity;
    const char *op = alias_sources ? "drop" : "unmap";
    vram_status st = cuda_lock_pages(s, addr, size, 1, op, &res, &first); /* alias sources count as mapped */
    if (st != VRAM_OK) return st;
    if (!cuda_whole_units(res, first, count, alias_sources)) {
        pthread_mutex_unlock(&s->lock);
        return vram_error(VRAM_ERR_STATE, "cuda: %s of [0x%llx, +%zu): %s", op, (unsigned long long)addr, size,
                          alias_sources ? "not whole alias sources" : "splits a mapping");
    }
    CUresult r = cuda_unmap_pages(s, res, first, count);
    pthread_mutex_unlock(&s->lock);
    return r == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r, "cuMemUnmap");
}

/* No device-wide synchronize here: the allocator unmaps only pages whose blocks are "ready", i.e.
 * an event recorded after their last free has completed (alloc.h), so no queued kernel can still
 * touch them; a cuCtxSynchronize would also wait for unrelated streams' work and stall training on
 * every page move. */
static vram_status cuda_page_unmap(vram_device *dev, uint64_t addr, size_t size) {
    return cuda_unmap_units(dev, addr, size, 0);
}

/* page_alias: each unit of src (whole units) is mapped at the same offset from dst as well; dst
 * owns the handles from now on and src's slots are marked as alias sources until page_drop
 * unmaps them. */
static vram_status cuda_page_alias(vram_device *dev, uint64_t src, uint64_t dst, size_t size) {
    cuda_state *s = dev->impl;
    if (size == 0 || size % s->granularity || src % s->granularity || dst % s->granularity)
        return vram_error(VRAM_ERR_INVALID_ARG, "cuda: alias of [0x%llx, +%zu) is not page aligned",
                          (unsigned long long)src, size);
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    pthread_mutex_lock(&s->lock);
    cuda_reservation *rs = cuda_find(s, src, size), *rd = cuda_find(s, dst, size);
    size_t fs = rs ? (src - rs->base) / s->granularity : 0, fd = rd ? (dst - rd->base) / s->granularity : 0;
    size_t count = size / s->granularity;
    if (rs && !cuda_whole_units(rs, fs, count, 0)) rs = NULL;
    for (size_t i = 0; rs && rd && i < count; i++)
        if (rd->pages[fd + i]) rs = NULL;
    if (!rs || !rd) {
        pthread_mutex_unlock(&s->lock);
        return vram_error(VRAM_ERR_STATE, "cuda: alias of [0x%llx, +%zu) to 0x%llx: source not whole mapped units or "
                          "target not free", (unsigned long long)src, size, (unsigned long long)dst);
    }
    CUresult r = CUDA_SUCCESS;
    size_t done = 0; /* pages of src whose units are mapped at dst */
    while (done < count) {
        size_t n = rs->units[fs + done];
        r = drv.MemMap(dst + done * s->granularity, n * s->granularity, 0, rs->pages[fs + done], 0);
        if (r != CUDA_SUCCESS) break;
        done += n;
    }
    if (r == CUDA_SUCCESS) r = drv.MemSetAccess((CUdeviceptr)dst, size, &s->access, 1);
    if (r != CUDA_SUCCESS) { /* all or nothing: take the new mappings away again */
        for (size_t i = 0; i < done; i += rs->units[fs + i])
            drv.MemUnmap(dst + i * s->granularity, rs->units[fs + i] * s->granularity);
    } else {
        for (size_t i = 0; i < count; i++) {
            rd->pages[fd + i] = rs->pages[fs + i];
            rd->units[fd + i] = rs->units[fs + i];
            rs->pages[fs + i] = CUDA_ALIAS_SOURCE;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return r == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r, done < count ? "cuMemMap" : "cuMemSetAccess");
}

static vram_status cuda_page_drop(vram_device *dev, uint64_t addr, size_t size) {
    return cuda_unmap_units(dev, addr, size, 1);
}

static vram_status cuda_event_record(vram_device *dev, vram_stream stream, void **event) {
    cuda_state *s = dev->impl;
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    CUevent ev = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->num_free_events) ev = s->free_events[--s->num_free_events];
    pthread_mutex_unlock(&s->lock);
    CUresult r;
    if (!ev) {
        r = drv.EventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) return cuda_fail(r, "cuEventCreate");
    }
    r = drv.EventRecord(ev, (CUstream)stream);
    if (r != CUDA_SUCCESS) {
        drv.EventDestroy(ev);
        return cuda_fail(r, "cuEventRecord");
    }
    *event = ev;
    return VRAM_OK;
}

static vram_status cuda_event_query(vram_device *dev, void *event) {
    cuda_state *s = dev->impl;
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    CUresult r = drv.EventQuery((CUevent)event);
    if (r == CUDA_SUCCESS) return VRAM_OK;
    if (r == CUDA_ERROR_NOT_READY) return VRAM_ERR_STATE;
    return cuda_fail(r, "cuEventQuery");
}

static vram_status cuda_event_sync(vram_device *dev, void *event) {
    cuda_state *s = dev->impl;
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    CUresult r = drv.EventSynchronize((CUevent)event);
    return r == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r, "cuEventSynchronize");
}

/* Which CUDA graph capture `stream` is being captured into (its capture active, or invalidated
 * and not yet ended): the driver's capture id, 0 for none, VRAM_CAPTURE_UNNAMED with a driver
 * that has only cuStreamIsCapturing. The legacy default stream (0, CU_STREAM_LEGACY) is not
 * asked: during another stream's capture the driver answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
 * and touching the legacy stream then may break the capture. That, and a driver with neither
 * call, is an error, which the allocator reads as "capturing". No message is set: it is an
 * answer, not a failure. */
static vram_status cuda_stream_capture(vram_device *dev, vram_stream stream, uint64_t *capture) {
    if ((!drv.StreamGetCaptureInfo && !drv.StreamIsCapturing) || (CUstream)stream == NULL ||
        (CUstream)stream == CU_STREAM_LEGACY || drv.CtxSetCurrent(((cuda_state *)dev->impl)->ctx) != CUDA_SUCCESS)
        return VRAM_ERR_STATE;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    if (drv.StreamGetCaptureInfo) {
        if (drv.StreamGetCaptureInfo((CUstream)stream, &status, &id) != CUDA_SUCCESS) return VRAM_ERR_STATE;
    } else if (drv.StreamIsCapturing((CUstream)stream, &status) != CUDA_SUCCESS) {
        return VRAM_ERR_STATE;
    }
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) *capture = 0;
    else *capture = drv.StreamGetCaptureInfo && id && id != VRAM_CAPTURE_UNNAMED ? (uint64_t)id : VRAM_CAPTURE_UNNAMED;
    return VRAM_OK;
}

static void cuda_event_destroy(vram_device *dev, void *event) {
    cuda_state *s = dev->impl;
    if (!event) return;
    pthread_mutex_lock(&s->lock);
    if (s->num_free_events == s->cap_free_events) {
        size_t cap = s->cap_free_events ? 2 * s->cap_free_events : 64;
        CUevent *grown = realloc(s->free_events, cap * sizeof *grown);
        if (grown) {
            s->free_events = grown;
            s->cap_free_events = cap;
        }
    }
    if (s->num_free_events < s->cap_free_events) {
        s->free_events[s->num_free_events++] = (CUevent)event;
        event = NULL;
    }
    pthread_mutex_unlock(&s->lock);
    if (event && cuda_enter(s) == VRAM_OK) drv.EventDestroy((CUevent)event);
}

static vram_status cuda_mem_info(vram_device *dev, size_t *free_bytes, size_t *total_bytes) {
    cuda_state *s = dev->impl;
    vram_status st = cuda_enter(s);
    if (st != VRAM_OK) return st;
    CUresult r = drv.MemGetInfo(free_bytes, total_bytes);
    return r == CUDA_SUCCESS ? VRAM_OK : cuda_fail(r, "cuMemGetInfo");
}

static void cuda_close(vram_device *dev) {
    cuda_state *s = dev->impl;
    if (cuda_enter(s) == VRAM_OK) {
        drv.CtxSynchronize();
        for (size_t i = 0; i < s->num_res; i++) {
            cuda_unmap_pages(s, &s->res[i], 0, s->res[i].num_pages);
            drv.MemAddressFree(s->res[i].base, s->res[i].size);
            free(s->res[i].pages);
            free(s->res[i].units);
        }
        for (size_t i = 0; i < s->num_free_events; i++) drv.EventDestroy(s->free_events[i]);
        drv.DevicePrimaryCtxRelease(s->device);
    }
    free(s->res);
    free(s->free_events);
    pthread_mutex_destroy(&s->lock);
    free(s);
    free(dev);
}

static const vram_device_ops cuda_page_ops = {
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .va_reserve = cuda_va_reserve,
    .va_release = cuda_va_release,
    .page_map = cuda_page_map,
    .page_unmap = cuda_page_unmap,
    .page_alias = cuda_page_alias,
    .page_drop = cuda_page_drop,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_destroy = cuda_event_destroy,
    .stream_capture = cuda_stream_capture,
    .mem_info = cuda_mem_info,
    .close = cuda_close,
};

static const vram_device_ops cuda_segment_ops = {
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_destroy = cuda_event_destroy,
    .stream_capture = cuda_stream_capture,
    .mem_info = cuda_mem_info,
    .close = cuda_close,
};

enum { CUDA_MODEL_AUTO, CUDA_MODEL_PAGES, CUDA_MODEL_SEGMENTS };

/* Parses "[N][:segments|:pages]" (or "segments" alone). */
static vram_status cuda_parse_spec(const char *args, int *ordinal, int *model) {
    *ordinal = 0;
    *model = CUDA_MODEL_AUTO;
    char buf[64];
    if (strlen(args) >= sizeof buf) return vram_error(VRAM_ERR_INVALID_ARG, "cuda device: spec arguments '%s' too long", args);
    strcpy(buf, args);
    int field = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save), field++) {
        if (strcmp(tok, "segments") == 0 && *model == CUDA_MODEL_AUTO) {
            *model = CUDA_MODEL_SEGMENTS;
        } else if (strcmp(tok, "pages") == 0 && *model == CUDA_MODEL_AUTO) {
            *model = CUDA_MODEL_PAGES;
        } else if (field == 0 && tok[0] >= '0' && tok[0] <= '9') {
            char *end = NULL;
            long n = strtol(tok, &end, 10);
            if (*end || n < 0 || n > 1024)
                return vram_error(VRAM_ERR_INVALID_ARG, "cuda device: bad ordinal '%s' (want cuda[:N][:segments|:pages])", tok);
            *ordinal = (int)n;
        } else {
            return vram_error(VRAM_ERR_INVALID_ARG, "cuda device: unknown argument '%s' in 'cuda:%s' (want cuda[:N][:segments|:pages])",
                              tok, args);
        }
    }
    if (args[0] && (args[strlen(args) - 1] == ':' || args[0] == ':' || strstr(args, "::")))
        return vram_error(VRAM_ERR_INVALID_ARG, "cuda device: empty field in 'cuda:%s'", args);
    return VRAM_OK;
}

vram_status vram_cuda_device_open(const char *args, vram_device **out) {
    *out = NULL;
    int ordinal, model;
    vram_status st = cuda_parse_spec(args ? args : "", &ordinal, &model);
    if (st != VRAM_OK) return st;
    pthread_once(&drv_once, cuda_driver_load);
    if (drv_status != VRAM_OK) return vram_error(drv_status, "%s", drv_error);

    int count = 0;
    CUresult r = drv.DeviceGetCount(&count);
    if (r != CUDA_SUCCESS) return vram_error(VRAM_ERR_NO_DEVICE, "no CUDA device: cuDeviceGetCount failed: %s", cuda_error_name(r));
    if (ordinal >= count)
        return vram_error(VRAM_ERR_NO_DEVICE, "no CUDA device %d: the driver reports %d device%s", ordinal, count,
                          count == 1 ? "" : "s");
    CUdevice device;
    if ((r = drv.DeviceGet(&device, ordinal)) != CUDA_SUCCESS) return cuda_fail(r, "cuDeviceGet");
    int vmm = 0;
    if (drv.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != CUDA_SUCCESS) vmm = 0;
    if (model == CUDA_MODEL_PAGES && !vmm)
        return vram_error(VRAM_ERR_UNSUPPORTED, "cuda:%d lacks virtual memory management: use cuda:%d:segments", ordinal, ordinal);

    cuda_state *s = calloc(1, sizeof *s);
    vram_device *dev = calloc(1, sizeof *dev);
    if (!s || !dev) {
        free(s);
        free(dev);
        return vram_error(VRAM_ERR_HOST_MEMORY, "cuda device: out of host memory");
    }
    s->device = device;
    s->ordinal = ordinal;
    pthread_mutex_init(&s->lock, NULL);
    if ((r = drv.DevicePrimaryCtxRetain(&s->ctx, device)) != CUDA_SUCCESS) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        free(dev);
        return cuda_fail(r, "cuDevicePrimaryCtxRetain");
    }
    s->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    s->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    s->prop.location.id = ordinal;
    s->access.location = s->prop.location;
    s->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t total = 0;
    char name[sizeof dev->name] = "";
    r = drv.DeviceTotalMem(&total, device);
    if (r == CUDA_SUCCESS) r = drv.DeviceGetName(name, (int)sizeof name - 1, device);
    int use_pages = vmm && model != CUDA_MODEL_SEGMENTS;
    if (r == CUDA_SUCCESS && use_pages) {
        r = drv.MemGetAllocationGranularity(&s->granularity, &s->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (r == CUDA_SUCCESS && s->granularity == 0) r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) {
        st = cuda_fail(r, "device query");
        drv.DevicePrimaryCtxRelease(device);
        pthread_mutex_destroy(&s->lock);
        free(s);
        free(dev);
        return st;
    }
    /* Page sizes below 2 MiB would only multiply driver calls: use whole multiples of 2 MiB. */
    if (use_pages && s->granularity < (2u << 20) && (2u << 20) % s->granularity == 0) s->granularity = 2u << 20;
    dev->ops = use_pages ? &cuda_page_ops : &cuda_segment_ops;
    dev->impl = s;
    snprintf(dev->kind, sizeof dev->kind, "cuda");
    snprintf(dev->name, sizeof dev->name, "%s", name);
    dev->index = ordinal;
    dev->page_size = use_pages ? s->granularity : 0;
    /* A page_map costs the same whatever its size, and the cost lands in the step time of
     * training that moves or grows memory: map 64 MiB at once (docs/allocator-evidence.md §18). */
    dev->chunk_size = use_pages ? 64u << 20 : 0;
    dev->capacity = total;
    dev->host_accessible = 0;
    *out = dev;
    return VRAM_OK;
}

#endif /* VRAM_HAVE_CUDA_H */
