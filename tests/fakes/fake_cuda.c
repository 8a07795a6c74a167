/* fake_cuda.c — a stand-in libcuda for testing vram's CUDA device (src/backends/cuda.c) and the
 * allocator over it on machines without a GPU. Loaded through VRAM_LIBCUDA. It keeps the
 * driver's rules that the backend must respect, and fails loudly (an error code, counted in
 * fake_cuda_violations) where a real driver would fail:
 *   - cuMemUnmap must cover exactly whole mappings (a sub-range of one mapping is refused);
 *   - cuMemSetAccess must cover only mapped memory;
 *   - cuMemMap must not overlap a mapping, and must be granularity-aligned inside a reservation;
 *     one handle may be mapped at several addresses, and cuMemRelease of a mapped handle frees
 *     its memory only when its last mapping is unmapped (as the driver documents);
 *   - physical memory (cuMemCreate + cuMemAlloc) is limited to FAKE_CUDA_MEMORY bytes per
 *     device (default 1 GiB), beyond which CUDA_ERROR_OUT_OF_MEMORY;
 *   - FAKE_CUDA_DEVICES devices (default 1), each with its own primary context and memory:
 *     cuMemCreate takes memory from the device its properties name, cuMemAlloc and
 *     cuMemGetInfo use the calling thread's current context (cuCtxSetCurrent);
 *   - an event stays pending for FAKE_CUDA_EVENT_LAG queries after its record (default 2), so
 *     the allocator's not-ready paths run; cuEventSynchronize / cuCtxSynchronize complete it.
 * FAKE_CUDA_NO_VMM=1 makes the device report no virtual memory management.
 * fake_cuda_set_capturing(stream) makes one stream report a graph capture, fake_cuda_capture
 * (stream, id) several (cuStreamIsCapturing, cuStreamGetCaptureInfo).
 * Device memory is never dereferenced, so addresses are plain numbers handed out from a
 * counter. fake_cuda_counts() reports what is still held, for leak checks, and
 * fake_cuda_used(d) one device's physical memory in use. Like the driver, it may be called from
 * several threads: each entry point that touches the shared state holds one lock
 * (cuX_locked is cuX's body).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define GRAN (2ull << 20)

typedef int CUresult;
enum { OK = 0, E_INVALID_VALUE = 1, E_OOM = 2, E_NOT_READY = 600, E_NOT_FOUND = 500, E_INVALID_DEVICE = 101 };

#define MAX_DEVICES 8

typedef struct handle {
    uint64_t size;
    int device;
    int mapped;   /* how many mappings use it: a handle may be mapped at several addresses */
    int released; /* cuMemRelease was called: freed once the last mapping goes */
} handle;
typedef struct mapping {
    uint64_t addr, size;
    handle *h;
    int access;
} mapping;
typedef struct range {
    uint64_t addr, size;
    int device; /* cuMemAlloc's segments */
} range;
typedef struct event {
    int pending;
} event;

static uint64_t capacity, used[MAX_DEVICES], next_addr = 0x7f0000000000ull;
static int ndevices = 1;
static int ctx_token[MAX_DEVICES];   /* primary context of device d: &ctx_token[d] */
static __thread int current = -1;    /* the calling thread's current device (cuCtxSetCurrent) */
static mapping maps[1 << 16];
static int nmaps;
static range reservations[256], allocs[1 << 14];
static int nres, nallocs, handles_live, events_live, violations;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the driver is thread-safe: one lock over the state */
/* The exported entry point `name`, running name_locked (its body) under the lock. */
#define LOCKED(name, params, args)           \
    EXPORT CUresult name params {            \
        pthread_mutex_lock(&lock);           \
        CUresult r = name##_locked args;     \
        pthread_mutex_unlock(&lock);         \
        return r;                            \
    }

static uint64_t env_u64(const char *name, uint64_t dflt) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : dflt;
}

EXPORT void fake_cuda_counts(int *mappings, int *handles, int *reserved_ranges, int *segments, uint64_t *used_bytes,
                             int *bad_calls) {
    uint64_t all = 0;
    pthread_mutex_lock(&lock);
    for (int d = 0; d < MAX_DEVICES; d++) all += used[d];
    *mappings = nmaps, *handles = handles_live, *reserved_ranges = nres, *segments = nallocs;
    *used_bytes = all, *bad_calls = violations;
    pthread_mutex_unlock(&lock);
}
EXPORT uint64_t fake_cuda_used(int device) {
    pthread_mutex_lock(&lock);
    uint64_t u = device >= 0 && device < MAX_DEVICES ? used[device] : 0;
    pthread_mutex_unlock(&lock);
    return u;
}

static CUresult bad(CUresult r) {
    __atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
    return r;
}

EXPORT CUresult cuInit(unsigned flags) {
    (void)flags;
    capacity = env_u64("FAKE_CUDA_MEMORY", 1ull << 30);
    ndevices = (int)env_u64("FAKE_CUDA_DEVICES", 1);
    if (ndevices < 1 || ndevices > MAX_DEVICES) ndevices = 1;
    return OK;
}
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
    *s = r == E_OOM ? "CUDA_ERROR_OUT_OF_MEMORY" : r == E_NOT_READY ? "CUDA_ERROR_NOT_READY" : "CUDA_ERROR_FAKE";
    return OK;
}
EXPORT CUresult cuDeviceGetCount(int *n) { *n = ndevices; return OK; }
EXPORT CUresult cuDeviceGet(int *d, int ordinal) {
    *d = ordinal;
    return ordinal >= 0 && ordinal < ndevices ? OK : E_INVALID_DEVICE;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, int d) {
    (void)d;
    strncpy(name, "Fake GPU", (size_t)len);
    return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = capacity; return OK; }
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d;
    *v = attr == 102 ? !env_u64("FAKE_CUDA_NO_VMM", 0) : 0;
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) {
    if (d < 0 || d >= ndevices) return bad(E_INVALID_DEVICE);
    *ctx = &ctx_token[d];
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int d) { return d >= 0 && d < ndevices ? OK : bad(E_INVALID_DEVICE); }
EXPORT CUresult cuCtxSetCurrent(void *ctx) {
    for (int d = 0; d < ndevices; d++)
        if (ctx == &ctx_token[d]) {
            current = d;
            return OK;
        }
    return bad(E_INVALID_VALUE);
}
EXPORT CUresult cuCtxSynchronize(void) { return OK; }

static CUresult cuMemAlloc_v2_locked(uint64_t *p, size_t size) {
    if (current < 0) return bad(E_INVALID_VALUE); /* no current context */
    if (size == 0 || nallocs == (int)(sizeof allocs / sizeof allocs[0])) return bad(E_INVALID_VALUE);
    if (used[current] + size > capacity) return E_OOM;
    used[current] += size;
    *p = next_addr;
    next_addr += (size + GRAN - 1) / GRAN * GRAN + GRAN;
    allocs[nallocs++] = (range){*p, size, current};
    return OK;
}
LOCKED(cuMemAlloc_v2, (uint64_t *p, size_t size), (p, size))
static CUresult cuMemFree_v2_locked(uint64_t p) {
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].addr == p) {
            used[allocs[i].device] -= allocs[i].size;
            allocs[i] = allocs[--nallocs];
            return OK;
        }
    return bad(E_INVALID_VALUE);
}
LOCKED(cuMemFree_v2, (uint64_t p), (p))
static CUresult cuMemGetInfo_v2_locked(size_t *f, size_t *t) {
    if (current < 0) return bad(E_INVALID_VALUE);
    *f = capacity - used[current];
    *t = capacity;
    return OK;
}
LOCKED(cuMemGetInfo_v2, (size_t *f, size_t *t), (f, t))

static CUresult cuMemAddressReserve_locked(uint64_t *p, size_t size, size_t align, uint64_t addr, unsigned long long fl) {
    (void)align, (void)addr, (void)fl;
    if (size == 0 || size % GRAN || nres == 256) return bad(E_INVALID_VALUE);
    *p = next_addr;
    next_addr += size + GRAN;
    reservations[nres++] = (range){*p, size, -1};
    return OK;
}
LOCKED(cuMemAddressReserve, (uint64_t *p, size_t size, size_t align, uint64_t addr, unsigned long long fl), (p, size, align, addr, fl))
static CUresult cuMemAddressFree_locked(uint64_t p, size_t size) {
    for (int i = 0; i < nres; i++)
        if (reservations[i].addr == p && reservations[i].size == size) {
            for (int m = 0; m < nmaps; m++)
                if (maps[m].addr >= p && maps[m].addr < p + size) return bad(E_INVALID_VALUE); /* still mapped */
            reservations[i] = reservations[--nres];
            return OK;
        }
    return bad(E_INVALID_VALUE);
}
LOCKED(cuMemAddressFree, (uint64_t p, size_t size), (p, size))
static CUresult cuMemCreate_locked(void **h, size_t size, const void *prop, unsigned long long fl) {
    (void)fl;
    /* CUmemAllocationProp: type, requestedHandleTypes, location {type, id}, ... */
    int d = prop ? ((const int *)prop)[3] : -1;
    if (size == 0 || size % GRAN || d < 0 || d >= ndevices) return bad(E_INVALID_VALUE);
    if (used[d] + size > capacity) return E_OOM;
    handle *x = calloc(1, sizeof *x);
    x->size = size;
    x->device = d;
    used[d] += size;
    handles_live++;
    *h = x;
    return OK;
}
LOCKED(cuMemCreate, (void **h, size_t size, const void *prop, unsigned long long fl), (h, size, prop, fl))
static void handle_free(handle *h) {
    used[h->device] -= h->size;
    handles_live--;
    free(h);
}
static CUresult cuMemRelease_locked(void *hv) {
    handle *h = hv;
    if (!h || h->released) return bad(E_INVALID_VALUE);
    h->released = 1; /* as the driver: the memory goes when its last mapping does */
    if (!h->mapped) handle_free(h);
    return OK;
}
LOCKED(cuMemRelease, (void *hv), (hv))
static CUresult cuMemMap_locked(uint64_t p, size_t size, size_t off, void *hv, unsigned long long fl) {
    (void)fl;
    handle *h = hv;
    if (!h || h->released || off || size != h->size || p % GRAN || nmaps == (int)(sizeof maps / sizeof maps[0]))
        return bad(E_INVALID_VALUE);
    int inside = 0;
    for (int i = 0; i < nres; i++)
        if (p >= reservations[i].addr && p + size <= reservations[i].addr + reservations[i].size) inside = 1;
    if (!inside) return bad(E_INVALID_VALUE);
    for (int m = 0; m < nmaps; m++)
        if (p < maps[m].addr + maps[m].size && maps[m].addr < p + size) return bad(E_INVALID_VALUE);
    maps[nmaps++] = (mapping){p, size, h, 0};
    h->mapped++;
    return OK;
}
LOCKED(cuMemMap, (uint64_t p, size_t size, size_t off, void *hv, unsigned long long fl), (p, size, off, hv, fl))
static CUresult cuMemUnmap_locked(uint64_t p, size_t size) {
    /* [p, p+size) must be a union of whole mappings */
    uint64_t covered = 0;
    for (int m = 0; m < nmaps; m++) {
        int in = maps[m].addr >= p && maps[m].addr + maps[m].size <= p + size;
        int touches = maps[m].addr < p + size && p < maps[m].addr + maps[m].size;
        if (touches && !in) return bad(E_INVALID_VALUE);
        if (in) covered += maps[m].size;
    }
    if (covered != size) return bad(E_INVALID_VALUE);
    for (int m = 0; m < nmaps;) {
        if (maps[m].addr >= p && maps[m].addr + maps[m].size <= p + size) {
            handle *h = maps[m].h;
            if (--h->mapped == 0 && h->released) handle_free(h);
            maps[m] = maps[--nmaps];
        } else {
            m++;
        }
    }
    return OK;
}
LOCKED(cuMemUnmap, (uint64_t p, size_t size), (p, size))
static CUresult cuMemSetAccess_locked(uint64_t p, size_t size, const void *desc, size_t count) {
    (void)desc;
    if (count != 1) return bad(E_INVALID_VALUE);
    uint64_t covered = 0;
    for (int m = 0; m < nmaps; m++)
        if (maps[m].addr >= p && maps[m].addr + maps[m].size <= p + size) covered += maps[m].size, maps[m].access = 1;
    return covered == size ? OK : bad(E_INVALID_VALUE);
}
LOCKED(cuMemSetAccess, (uint64_t p, size_t size, const void *desc, size_t count), (p, size, desc, count))
EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int flags) {
    (void)prop, (void)flags;
    *g = GRAN;
    return OK;
}

static CUresult cuEventCreate_locked(void **e, unsigned flags) {
    (void)flags;
    *e = calloc(1, sizeof(event));
    events_live++;
    return OK;
}
LOCKED(cuEventCreate, (void **e, unsigned flags), (e, flags))
EXPORT CUresult cuEventRecord(void *e, void *stream) {
    (void)stream;
    ((event *)e)->pending = (int)env_u64("FAKE_CUDA_EVENT_LAG", 2);
    return OK;
}
EXPORT CUresult cuEventQuery(void *e) {
    event *x = e;
    if (x->pending > 0) {
        x->pending--;
        return E_NOT_READY;
    }
    return OK;
}
EXPORT CUresult cuEventSynchronize(void *e) {
    ((event *)e)->pending = 0;
    return OK;
}
static CUresult cuEventDestroy_v2_locked(void *e) {
    free(e);
    events_live--;
    return OK;
}
LOCKED(cuEventDestroy_v2, (void *e), (e))

/* Stream capture, as far as the allocator asks: fake_cuda_capture(stream, id) makes that stream
 * (never 0) report an active capture with id `id` (the driver's capture sequence id), id 0 ends
 * it; up to 8 streams capture at once. fake_cuda_set_capturing(stream) starts a capture with a
 * new id on `stream`, ending every other; 0 ends them all. The legacy default stream cannot be
 * asked while another stream captures, as on the driver (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). */
static struct {
    uintptr_t stream;
    uint64_t id;
} captures[8];
static uint64_t capture_ids;
EXPORT void fake_cuda_capture(uintptr_t stream, uint64_t id) {
    pthread_mutex_lock(&lock);
    int slot = -1; /* the stream's entry, else a free one */
    for (int i = 0; i < 8 && slot < 0; i++)
        if (captures[i].stream == stream) slot = i;
    for (int i = 0; i < 8 && slot < 0; i++)
        if (!captures[i].stream) slot = i;
    if (slot >= 0 && stream) {
        captures[slot].stream = id ? stream : 0;
        captures[slot].id = id;
    }
    pthread_mutex_unlock(&lock);
}
EXPORT void fake_cuda_set_capturing(uintptr_t stream) {
    pthread_mutex_lock(&lock);
    memset(captures, 0, sizeof captures);
    if (stream) {
        captures[0].stream = stream;
        captures[0].id = ++capture_ids;
    }
    pthread_mutex_unlock(&lock);
}
/* the capture id of `stream` (0: none); -1 for the legacy stream while another captures */
static int64_t capture_of(void *stream) {
    pthread_mutex_lock(&lock);
    int64_t id = 0, any = 0;
    for (int i = 0; i < 8; i++) {
        any |= captures[i].stream != 0;
        if (captures[i].stream && captures[i].stream == (uintptr_t)stream) id = (int64_t)captures[i].id;
    }
    pthread_mutex_unlock(&lock);
    return !stream && any ? -1 : id;
}
EXPORT CUresult cuStreamIsCapturing(void *stream, int *status) {
    int64_t id = capture_of(stream);
    if (id < 0) return 906; /* CUDA_ERROR_STREAM_CAPTURE_IMPLICIT */
    *status = id != 0; /* CU_STREAM_CAPTURE_STATUS_ACTIVE or _NONE */
    return OK;
}
/* the unversioned symbol: CUDA 10.1's signature */
EXPORT CUresult cuStreamGetCaptureInfo(void *stream, int *status, uint64_t *id_out) {
    int64_t id = capture_of(stream);
    if (id < 0) return 906;
    *status = id != 0;
    if (id) *id_out = (uint64_t)id;
    return OK;
}
