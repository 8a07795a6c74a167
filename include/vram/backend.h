/* backend.h — devices: where the allocator's memory comes from.
 *
 * A device is a small table of functions (vram_device_ops) plus its state. The allocator calls
 * it for two kinds of memory and for stream ordering:
 *
 *   segments  mem_alloc / mem_free: one device allocation per call (cudaMalloc-like). Every
 *             device has them.
 *   pages     va_reserve / va_release a virtual address range, page_map / page_unmap physical
 *             pages inside it (cuMemCreate+cuMemMap+cuMemSetAccess, or mprotect on the host,
 *             or pure bookkeeping on the sim device). Optional: NULL where the device lacks
 *             virtual memory management, and the allocator then falls back to segments.
 *   streams   event_record / event_query / event_sync / event_destroy. A device whose work is
 *             synchronous (sim, host) may set them to NULL: every event is then complete.
 *             stream_capturing (optional) says which streams a CUDA graph capture is recording.
 *
 * Addresses are uint64_t so that a simulated device can hand out addresses with no memory
 * behind them. Streams are opaque uintptr_t handles (a CUstream on CUDA, 0 = default stream).
 *
 * Devices are opened by a spec string, "NAME[:ARGS]": "sim", "sim:80GiB", "cudasim:141GiB" (the
 * sim device with stream events, page aliasing and CUDA's 64 MiB chunks: it places as a GPU
 * does; "cudasim:141GiB,lag=100" lets its simulated work trail the host by 100 replayed calls),
 * "host", "cuda:0", "cuda:1:segments". Adding a backend is one file with a `vram_device_open_fn` and
 * one line in the registry table (src/backends/registry.c).
 */
#ifndef VRAM_BACKEND_H
#define VRAM_BACKEND_H

#include "vram/vram.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uintptr_t vram_stream;
typedef struct vram_device vram_device;

#define VRAM_CAPTURE_UNNAMED UINT64_MAX /* stream_capture: capturing, into a capture the device cannot name */

typedef struct vram_device_ops {
    /* Segments: a device allocation of `size` bytes (size is a multiple of 512). */
    vram_status (*mem_alloc)(vram_device *dev, size_t size, uint64_t *addr);
    vram_status (*mem_free)(vram_device *dev, uint64_t addr, size_t size);

    /* Pages (optional). va_reserve takes no physical memory; page_map backs
     * [addr, addr+size) (a multiple of page_size, inside a reservation) with physical memory
     * readable and writable by the device; page_unmap returns it. page_map fails with
     * VRAM_ERR_OUT_OF_MEMORY when the device has no physical memory left. */
    vram_status (*va_reserve)(vram_device *dev, size_t size, uint64_t *addr);
    vram_status (*va_release)(vram_device *dev, uint64_t addr, size_t size);
    vram_status (*page_map)(vram_device *dev, uint64_t addr, size_t size);
    vram_status (*page_unmap)(vram_device *dev, uint64_t addr, size_t size);

    /* Page moves (optional; NULL where unsupported). page_alias maps at [dst, dst+size) the
     * physical pages that back [src, src+size) (src mapped, dst unmapped, page-aligned, inside
     * reservations), allocating nothing: both ranges then show the same memory. page_drop
     * unmaps [addr, addr+size), a range given earlier as a page_alias source, without returning
     * its physical pages, which the alias now holds. With them the allocator moves pages from a
     * block freed on a stream to a new block for the same stream at once, although work that
     * stream queued earlier may still use the old addresses: stream order keeps the old and the
     * new users apart, and the old range is dropped once an event shows the stream is past it. */
    vram_status (*page_alias)(vram_device *dev, uint64_t src, uint64_t dst, size_t size);
    vram_status (*page_drop)(vram_device *dev, uint64_t addr, size_t size);

    /* Streams and events (optional; NULL = all work is synchronous). event_query returns
     * VRAM_OK when complete, VRAM_ERR_STATE while pending, another status on error. */
    vram_status (*event_record)(vram_device *dev, vram_stream stream, void **event);
    vram_status (*event_query)(vram_device *dev, void *event);
    vram_status (*event_sync)(vram_device *dev, void *event);
    void (*event_destroy)(vram_device *dev, void *event);

    /* Which CUDA graph capture work queued on `stream` now goes into (optional): *capture is 0
     * when none, else the capture's id (unique per capture sequence, as the driver numbers
     * them), or VRAM_CAPTURE_UNNAMED where the device can tell that the stream is capturing but
     * not into which capture. While captures are under way (vram_allocator_begin_pool ..
     * end_pool) the allocator asks this for every allocation, and only those on a capture's
     * streams belong to the pool captured into, as PyTorch routes them; NULL, or an error, reads
     * as "capturing, into one unknown capture": the allocation is a pool's, which keeps graph
     * memory safe but holds more. */
    vram_status (*stream_capture)(vram_device *dev, vram_stream stream, uint64_t *capture);

    /* Simulated devices whose streams have work (cudasim with a lag; optional, NULL elsewhere):
     * a replay calls it before each event, the host having queued one more piece of work on
     * every stream, and with `sync` set where the program waited for the GPU (all work done). */
    void (*host_step)(vram_device *dev, int sync);

    /* Free and total physical memory of the device, as the driver reports it. */
    vram_status (*mem_info)(vram_device *dev, size_t *free_bytes, size_t *total_bytes);

    /* Releases everything the device holds (its reservations, its context references). */
    void (*close)(vram_device *dev);
} vram_device_ops;

struct vram_device {
    const vram_device_ops *ops;
    void *impl;            /* the backend's own state */
    char kind[16];         /* "sim", "cudasim", "host", "cuda" */
    char name[96];         /* e.g. "sim (80.00 GiB)", "NVIDIA H200" */
    int index;             /* device ordinal within its kind */
    size_t page_size;      /* granularity of page_map; 0 when pages are unsupported */
    size_t chunk_size;     /* the allocator's default chunk (memory one page_map maps): larger
                            * where the driver's cost goes by calls, not bytes; 0 = page_size */
    uint64_t capacity;     /* physical bytes the device can hold */
    int host_accessible;   /* addresses may be dereferenced by the CPU (host device) */
};

/* Opens a device from its spec (see above). Errors: VRAM_ERR_INVALID_ARG for an unknown kind
 * or bad arguments, VRAM_ERR_NO_DEVICE when the driver or device is absent. */
vram_status vram_device_open(const char *spec, vram_device **out);
void vram_device_close(vram_device *dev);

/* Whether `spec` gives the size of a device that takes one: "sim:SIZE", "cudasim:SIZE" or
 * "cudasim:SIZE,lag=N", "host:SIZE" (not "sim", "cudasim" or "cudasim:lag=N", which take their
 * size from elsewhere; nor any other kind). */
int vram_device_spec_sized(const char *spec);

/* Whether `spec` names a device of kind `kind` ("cudasim" for "cudasim" and "cudasim:...",
 * not for "cudasimx"). */
int vram_device_spec_is(const char *spec, const char *kind);

/* The constructor every backend provides: `args` is what follows "NAME:" (or ""). */
typedef vram_status (*vram_device_open_fn)(const char *args, vram_device **out);

/* Convenience: 1 if the device can reserve and map pages. */
static inline int vram_device_has_pages(const vram_device *dev) {
    return dev->ops->va_reserve && dev->ops->page_map && dev->page_size > 0;
}

#ifdef __cplusplus
}
#endif

#endif
