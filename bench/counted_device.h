/* counted_device.h — a device whose calls are counted, for the benchmarks that ask how often the
 * allocator goes to the device (bench_replay_lag, bench_random_split).
 *
 * counted_device_attach copies the device's function table into a counted_device and points the
 * device at the copy, whose memory and event functions count and then forward to the device's own
 * (a function the device lacks stays NULL: the allocator reads NULL as "not supported" or "every
 * event complete"). The copy is the struct's first member, so a wrapper finds its counters from
 * the device it is called with. counted_device_detach points the device back at its own table.
 */
#ifndef VRAM_BENCH_COUNTED_DEVICE_H
#define VRAM_BENCH_COUNTED_DEVICE_H

#include "vram/backend.h"

typedef struct counted_device {
    vram_device_ops ops; /* first: the device's ops point here */
    const vram_device_ops *inner;
    uint64_t maps, unmaps, aliases, drops; /* page calls: one physical allocation (chunk) each */
    uint64_t allocs, frees;                /* segment calls (mem_alloc, mem_free) */
    uint64_t events;                       /* event_record, _query, _sync and _destroy */
} counted_device;

static inline counted_device *counted(vram_device *d) { return (counted_device *)(void *)d->ops; }

#define COUNTED_CALL(name, field, params, args) \
    static vram_status counted_##name params {  \
        counted(d)->field++;                    \
        return counted(d)->inner->name args;    \
    }
COUNTED_CALL(page_map, maps, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
COUNTED_CALL(page_unmap, unmaps, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
COUNTED_CALL(page_alias, aliases, (vram_device * d, uint64_t src, uint64_t dst, size_t size), (d, src, dst, size))
COUNTED_CALL(page_drop, drops, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
COUNTED_CALL(mem_alloc, allocs, (vram_device * d, size_t size, uint64_t *addr), (d, size, addr))
COUNTED_CALL(mem_free, frees, (vram_device * d, uint64_t addr, size_t size), (d, addr, size))
COUNTED_CALL(event_record, events, (vram_device * d, vram_stream s, void **event), (d, s, event))
COUNTED_CALL(event_query, events, (vram_device * d, void *event), (d, event))
COUNTED_CALL(event_sync, events, (vram_device * d, void *event), (d, event))
#undef COUNTED_CALL

static void counted_event_destroy(vram_device *d, void *event) {
    counted(d)->events++;
    counted(d)->inner->event_destroy(d, event);
}

/* Puts c's counters (zeroed) between the allocator and dev; c must outlive their use. */
static inline void counted_device_attach(counted_device *c, vram_device *dev) {
    *c = (counted_device){.ops = *dev->ops, .inner = dev->ops};
#define COUNT(fn) if (c->ops.fn) c->ops.fn = counted_##fn
    COUNT(page_map);
    COUNT(page_unmap);
    COUNT(page_alias);
    COUNT(page_drop);
    COUNT(mem_alloc);
    COUNT(mem_free);
    COUNT(event_record);
    COUNT(event_query);
    COUNT(event_sync);
    COUNT(event_destroy);
#undef COUNT
    dev->ops = &c->ops;
}

static inline void counted_device_detach(counted_device *c, vram_device *dev) { dev->ops = c->inner; }

/* The calls that map, unmap or move memory (pages or segments). */
static inline uint64_t counted_memory_calls(const counted_device *c) {
    return c->maps + c->unmaps + c->aliases + c->drops + c->allocs + c->frees;
}

#endif
