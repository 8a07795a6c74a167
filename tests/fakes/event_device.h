/* event_device.h — a test device: the sim device plus streams whose work the test controls.
 *
 * Every event recorded on a stream waits for the stream's "work" so far: the test submits
 * work with event_device_submit(stream) and completes it with event_device_complete(stream).
 * event_query reports an event complete once its stream has completed everything that was
 * submitted before the event; event_sync completes it (as a host wait would). This lets tests
 * check that a block freed on one stream is not handed to another before the first stream's
 * work is done. With `capturing` set (a test's stand-in for a CUDA graph capture), every call
 * the driver refuses during a capture (event record, query, sync; unmapping or freeing memory)
 * is counted in capture_violations. `capture_of[s]` is the capture stream s records (0: none),
 * for stream_capture, which answers as `capture_tells` says: 2 with the capture's id, 1 only
 * whether the stream captures (VRAM_CAPTURE_UNNAMED), 0 with an error (the device cannot tell,
 * as the driver for the legacy default stream), so that the allocator counts every allocation
 * made during a capture as a capture's. `phys` models the physical pages under the reserved
 * ranges (phys_pages.h): page calls the driver would refuse are counted there (closing the
 * device fails the test, check.h, if there were any), and a test's hook sees every range
 * before its pages leave it.
 */
#ifndef VRAM_TESTS_EVENT_DEVICE_H
#define VRAM_TESTS_EVENT_DEVICE_H

#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "phys_pages.h"
#include "vram/backend.h"

#define EVDEV_STREAMS 16

typedef struct evdev_state {
    const vram_device_ops *sim_ops;
    uint64_t submitted[EVDEV_STREAMS], completed[EVDEV_STREAMS];
    uint64_t records, syncs, live_events;
    int capturing;
    uint64_t capture_of[EVDEV_STREAMS];
    int capture_tells;
    uint64_t capture_violations;
    /* device calls that change mappings, and the pages they touch */
    uint64_t map_calls, unmap_calls, alias_calls, drop_calls;
    uint64_t map_bytes, unmap_bytes, alias_bytes, drop_bytes;
    phys_pages phys;
} evdev_state;

typedef struct evdev_event {
    unsigned stream;
    uint64_t target;
} evdev_event;

static vram_device_ops evdev_ops;
static evdev_state *evdev_of(vram_device *d) { return (evdev_state *)((void **)d->impl)[1]; }

static inline vram_status evdev_record(vram_device *d, vram_stream s, void **out) {
    evdev_state *e = evdev_of(d);
    evdev_event *ev = malloc(sizeof *ev);
    if (!ev) return VRAM_ERR_OUT_OF_MEMORY;
    e->capture_violations += e->capturing != 0;
    ev->stream = (unsigned)(s % EVDEV_STREAMS);
    ev->target = e->submitted[ev->stream];
    e->records++;
    e->live_events++;
    *out = ev;
    return VRAM_OK;
}
static vram_status evdev_query(vram_device *d, void *p) {
    evdev_event *ev = p;
    evdev_of(d)->capture_violations += evdev_of(d)->capturing != 0;
    return evdev_of(d)->completed[ev->stream] >= ev->target ? VRAM_OK : VRAM_ERR_STATE;
}
static vram_status evdev_sync(vram_device *d, void *p) {
    evdev_event *ev = p;
    evdev_state *e = evdev_of(d);
    e->syncs++;
    e->capture_violations += e->capturing != 0;
    if (e->completed[ev->stream] < ev->target) e->completed[ev->stream] = ev->target;
    return VRAM_OK;
}
static vram_status evdev_stream_capture(vram_device *d, vram_stream s, uint64_t *capture) {
    evdev_state *e = evdev_of(d);
    if (!e->capture_tells) return VRAM_ERR_STATE;
    uint64_t c = s < EVDEV_STREAMS ? e->capture_of[s] : 0;
    *capture = c && e->capture_tells == 1 ? VRAM_CAPTURE_UNNAMED : c;
    return VRAM_OK;
}
static void evdev_destroy(vram_device *d, void *p) {
    evdev_of(d)->live_events--;
    free(p);
}

/* Each op forwards to the sim device, whose state sits in slot 0 of our impl pair. */
#define EVDEV_FWD_TO(fname, op, params, args)                                 \
    static vram_status fname params {                                         \
        void **pair = d->impl;                                                \
        d->impl = pair[0];                                                    \
        vram_status st = evdev_of_sim_ops->op args;                           \
        d->impl = pair;                                                       \
        return st;                                                            \
    }
static const vram_device_ops *evdev_of_sim_ops;
EVDEV_FWD_TO(evdev_mem_alloc, mem_alloc, (vram_device * d, size_t size, uint64_t *addr), (d, size, addr))
EVDEV_FWD_TO(evdev_mem_free, mem_free, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
EVDEV_FWD_TO(evdev_va_reserve, va_reserve, (vram_device * d, size_t size, uint64_t *addr), (d, size, addr))
EVDEV_FWD_TO(evdev_va_release, va_release, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
EVDEV_FWD_TO(evdev_sim_page_map, page_map, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
EVDEV_FWD_TO(evdev_sim_page_unmap, page_unmap, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
EVDEV_FWD_TO(evdev_mem_info, mem_info, (vram_device * d, size_t *f, size_t *t), (d, f, t))
EVDEV_FWD_TO(evdev_sim_page_alias, page_alias, (vram_device * d, uint64_t src, uint64_t dst, size_t size), (d, src, dst, size))
EVDEV_FWD_TO(evdev_sim_page_drop, page_drop, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))

/* The mapping calls, counted (calls and bytes) before they reach the sim device; `refused`:
 * the driver refuses it during a capture. */
#define EVDEV_COUNTED(name, params, args, calls, bytes, size, refused) \
    static vram_status evdev_counted_##name params {                   \
        evdev_state *e = evdev_of(d);                                  \
        e->calls++;                                                    \
        e->bytes += (size);                                            \
        e->capture_violations += (refused) && e->capturing;            \
        return evdev_sim_##name args;                                  \
    }
EVDEV_COUNTED(page_map, (vram_device * d, uint64_t addr, size_t size), (d, addr, size), map_calls, map_bytes,
              size, 0)
EVDEV_COUNTED(page_unmap, (vram_device * d, uint64_t addr, size_t size), (d, addr, size), unmap_calls,
              unmap_bytes, size, 1)
EVDEV_COUNTED(page_alias, (vram_device * d, uint64_t src, uint64_t dst, size_t size), (d, src, dst, size),
              alias_calls, alias_bytes, size, 0)
EVDEV_COUNTED(page_drop, (vram_device * d, uint64_t addr, size_t size), (d, addr, size), drop_calls,
              drop_bytes, size, 1)

/* The page calls through the physical model (phys_pages.h): a call it refuses fails as the
 * driver's would. */
static vram_status evdev_va_reserve_modelled(vram_device *d, size_t size, uint64_t *addr) {
    vram_status st = evdev_va_reserve(d, size, addr);
    if (st == VRAM_OK) phys_pages_reserve(&evdev_of(d)->phys, *addr, size);
    return st;
}
static vram_status evdev_va_release_modelled(vram_device *d, uint64_t addr, size_t size) {
    phys_pages_release(&evdev_of(d)->phys, addr);
    return evdev_va_release(d, addr, size);
}
static vram_status evdev_page_map(vram_device *d, uint64_t addr, size_t size) {
    vram_status st = evdev_counted_page_map(d, addr, size);
    if (st == VRAM_OK && phys_pages_map(&evdev_of(d)->phys, addr, size) != 0) return VRAM_ERR_INVALID_ARG;
    return st;
}
static vram_status evdev_page_unmap(vram_device *d, uint64_t addr, size_t size) {
    if (phys_pages_unmap(&evdev_of(d)->phys, addr, size, 0) != 0) return VRAM_ERR_INVALID_ARG;
    return evdev_counted_page_unmap(d, addr, size);
}
static vram_status evdev_page_alias(vram_device *d, uint64_t src, uint64_t dst, size_t size) {
    if (phys_pages_alias(&evdev_of(d)->phys, src, dst, size) != 0) return VRAM_ERR_INVALID_ARG;
    return evdev_counted_page_alias(d, src, dst, size);
}
static vram_status evdev_page_drop(vram_device *d, uint64_t addr, size_t size) {
    if (phys_pages_unmap(&evdev_of(d)->phys, addr, size, 1) != 0) return VRAM_ERR_INVALID_ARG;
    return evdev_counted_page_drop(d, addr, size);
}
static vram_status evdev_mem_free_checked(vram_device *d, uint64_t addr, size_t size) {
    evdev_of(d)->capture_violations += evdev_of(d)->capturing != 0;
    return evdev_mem_free(d, addr, size);
}

static void evdev_close(vram_device *d) {
    void **pair = d->impl;
    phys_pages *pp = &evdev_of(d)->phys;
    CHECK(pp->violations == 0, "%llu page calls the driver would refuse; the first: %s",
          (unsigned long long)pp->violations, pp->error);
    phys_pages_free(pp);
    free(pair[1]);
    d->impl = pair[0];
    d->ops = evdev_of_sim_ops;
    free(pair);
    vram_device_close(d);
}

/* Opens "sim:CAPACITY" with controllable streams. */
static inline vram_status event_device_open(const char *capacity, vram_device **out) {
    char spec[64] = "sim:";
    strncat(spec, capacity, sizeof spec - 5);
    vram_status st = vram_device_open(spec, out);
    if (st != VRAM_OK) return st;
    evdev_of_sim_ops = (*out)->ops;
    evdev_ops = *(*out)->ops;
    evdev_ops.mem_alloc = evdev_mem_alloc;
    evdev_ops.mem_free = evdev_mem_free_checked;
    evdev_ops.va_reserve = evdev_va_reserve_modelled;
    evdev_ops.va_release = evdev_va_release_modelled;
    evdev_ops.page_map = evdev_page_map;
    evdev_ops.page_unmap = evdev_page_unmap;
    evdev_ops.mem_info = evdev_mem_info;
    evdev_ops.page_alias = evdev_page_alias;
    evdev_ops.page_drop = evdev_page_drop;
    evdev_ops.event_record = evdev_record;
    evdev_ops.event_query = evdev_query;
    evdev_ops.event_sync = evdev_sync;
    evdev_ops.event_destroy = evdev_destroy;
    evdev_ops.stream_capture = evdev_stream_capture;
    evdev_ops.close = evdev_close;
    void **pair = malloc(2 * sizeof *pair);
    pair[0] = (*out)->impl;
    pair[1] = calloc(1, sizeof(evdev_state));
    (*out)->impl = pair;
    (*out)->ops = &evdev_ops;
    return VRAM_OK;
}

static inline evdev_state *event_device_state(vram_device *d) { return evdev_of(d); }
static inline void event_device_submit(vram_device *d, unsigned s) { evdev_of(d)->submitted[s % EVDEV_STREAMS]++; }
static inline void event_device_complete(vram_device *d, unsigned s) {
    evdev_state *e = evdev_of(d);
    e->completed[s % EVDEV_STREAMS] = e->submitted[s % EVDEV_STREAMS];
}

#endif
