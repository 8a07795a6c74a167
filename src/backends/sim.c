/* sim.c — the simulated device: an address space with no memory behind it.
 *
 * It hands out addresses and counts bytes against a capacity, so an allocation trace can be
 * replayed as if on a GPU of any size, on any machine, at the speed of the allocator's own
 * bookkeeping. Segments come from a bump pointer in one half of a 2^47 address space and
 * page reservations from the other; page_map only counts mapped bytes (page_alias and
 * page_drop, which move physical pages, change nothing). Its work is
 * synchronous, so it has no events. Spec: "sim" (80 GiB) or "sim:SIZE" ("sim:141GiB").
 *
 * "cudasim[:SIZE][,lag=N]" is the same device with what changes placement on a CUDA device:
 * stream events (so a freed block is another stream's, and its pages move freely, only once the
 * allocator has seen its stream's event complete), page aliasing (busy pages move by aliasing,
 * move_busy_pages:auto) and CUDA's 64 MiB chunks. Its simulated GPU keeps up with the host
 * (every event is complete when asked) unless given a lag: then a replay's host_step queues one
 * piece of work per replayed call, and the work of the last N calls is still running, so an
 * event recorded in that time is pending until N more calls have been made (or a sync line of
 * the trace says the program waited). Replayed on it, a trace needs about what it needs on a
 * GPU; on the plain sim, with 2 MiB chunks and no events, a little less
 * (docs/allocator-evidence.md §18).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/backend.h"

#define SIM_SEGMENT_BASE (1ull << 40)
#define SIM_VA_BASE (1ull << 46)
#define SIM_PAGE_SIZE (2ull << 20)

typedef struct sim_state {
    uint64_t used;       /* bytes held by segments and mapped pages */
    uint64_t next_seg;   /* bump pointer for segments (addresses are never reused) */
    uint64_t next_va;    /* bump pointer for reservations */
    /* cudasim's simulated GPU: pieces of work queued (host_step) and completed; `lag` of them
     * stay running. An event is complete once the work queued before it is. */
    uint64_t lag, queued, completed;
} sim_state;

static vram_status sim_take(vram_device *dev, size_t size) {
    sim_state *s = dev->impl;
    if (size > dev->capacity - s->used) return VRAM_ERR_OUT_OF_MEMORY;
    s->used += size;
    return VRAM_OK;
}

static vram_status sim_mem_alloc(vram_device *dev, size_t size, uint64_t *addr) {
    sim_state *s = dev->impl;
    vram_status st = sim_take(dev, size);
    if (st != VRAM_OK) return st;
    *addr = s->next_seg;
    s->next_seg += (size + SIM_PAGE_SIZE - 1) / SIM_PAGE_SIZE * SIM_PAGE_SIZE;
    return VRAM_OK;
}

static vram_status sim_mem_free(vram_device *dev, uint64_t addr, size_t size) {
    (void)addr;
    sim_state *s = dev->impl;
    s->used -= size;
    return VRAM_OK;
}

static vram_status sim_va_reserve(vram_device *dev, size_t size, uint64_t *addr) {
    sim_state *s = dev->impl;
    *addr = s->next_va;
    s->next_va += (size + SIM_PAGE_SIZE - 1) / SIM_PAGE_SIZE * SIM_PAGE_SIZE + SIM_PAGE_SIZE;
    return VRAM_OK;
}

static vram_status sim_va_release(vram_device *dev, uint64_t addr, size_t size) {
    (void)dev; (void)addr; (void)size;
    return VRAM_OK;
}

static vram_status sim_page_map(vram_device *dev, uint64_t addr, size_t size) {
    (void)addr;
    return sim_take(dev, size);
}

static vram_status sim_page_unmap(vram_device *dev, uint64_t addr, size_t size) {
    return sim_mem_free(dev, addr, size);
}

/* A move keeps the same physical bytes: nothing to count. */
static vram_status sim_page_alias(vram_device *dev, uint64_t src, uint64_t dst, size_t size) {
    (void)dev; (void)src; (void)dst; (void)size;
    return VRAM_OK;
}

static vram_status sim_page_drop(vram_device *dev, uint64_t addr, size_t size) {
    (void)dev; (void)addr; (void)size;
    return VRAM_OK;
}

static vram_status sim_mem_info(vram_device *dev, size_t *free_bytes, size_t *total_bytes) {
    sim_state *s = dev->impl;
    *free_bytes = dev->capacity - s->used;
    *total_bytes = dev->capacity;
    return VRAM_OK;
}

static void sim_close(vram_device *dev) {
    free(dev->impl);
    free(dev);
}

/* The operations both flavours share. */
#define SIM_MEMORY_OPS                                                                             \
    .mem_alloc = sim_mem_alloc, .mem_free = sim_mem_free, .va_reserve = sim_va_reserve,             \
    .va_release = sim_va_release, .page_map = sim_page_map, .page_unmap = sim_page_unmap,           \
    .page_alias = sim_page_alias, .page_drop = sim_page_drop, .mem_info = sim_mem_info, .close = sim_close

static const vram_device_ops sim_ops = {SIM_MEMORY_OPS};

/* cudasim's events: each holds how much work was queued when it was recorded (one work queue
 * for all streams, as a replay's calls come one after the other). */
static vram_status cudasim_event_record(vram_device *dev, vram_stream stream, void **event) {
    (void)stream;
    uint64_t *target = malloc(sizeof *target);
    if (!target) return vram_error(VRAM_ERR_HOST_MEMORY, "cudasim: host out of memory for an event");
    *target = ((sim_state *)dev->impl)->queued;
    *event = target;
    return VRAM_OK;
}
static vram_status cudasim_event_query(vram_device *dev, void *event) {
    return ((sim_state *)dev->impl)->completed >= *(uint64_t *)event ? VRAM_OK : VRAM_ERR_STATE;
}
static vram_status cudasim_event_sync(vram_device *dev, void *event) { /* the host waits: the work is done */
    sim_state *s = dev->impl;
    if (s->completed < *(uint64_t *)event) s->completed = *(uint64_t *)event;
    return VRAM_OK;
}
static void cudasim_event_destroy(vram_device *dev, void *event) {
    (void)dev;
    free(event);
}
static void cudasim_host_step(vram_device *dev, int sync) {
    sim_state *s = dev->impl;
    s->queued++;
    if (sync) s->completed = s->queued;
    else if (s->queued > s->lag && s->completed < s->queued - s->lag) s->completed = s->queued - s->lag;
}

static const vram_device_ops cudasim_ops = {
    SIM_MEMORY_OPS,
    .event_record = cudasim_event_record,
    .event_query = cudasim_event_query,
    .event_sync = cudasim_event_sync,
    .event_destroy = cudasim_event_destroy,
    .host_step = cudasim_host_step,
};

static vram_status open_sim(const char *what, const char *args, vram_device **out) {
    uint64_t capacity = 80ull << 30;
    if (args && *args) {
        vram_status st = vram_parse_size(args, &capacity);
        if (st != VRAM_OK) return vram_error(st, "%s device: %s", what, vram_last_error());
        if (capacity < SIM_PAGE_SIZE)
            return vram_error(VRAM_ERR_INVALID_ARG, "%s device: capacity '%s' is below one 2 MiB page", what, args);
        if (capacity > (1ull << 45))
            return vram_error(VRAM_ERR_INVALID_ARG, "%s device: capacity '%s' is above 32 TiB", what, args);
    }
    vram_device *dev = calloc(1, sizeof *dev);
    sim_state *s = calloc(1, sizeof *s);
    if (!dev || !s) {
        free(dev);
        free(s);
        return vram_error(VRAM_ERR_HOST_MEMORY, "%s device: host out of memory", what);
    }
    s->next_seg = SIM_SEGMENT_BASE;
    s->next_va = SIM_VA_BASE;
    dev->ops = &sim_ops;
    dev->impl = s;
    snprintf(dev->kind, sizeof dev->kind, "%s", what);
    char cap[32];
    snprintf(dev->name, sizeof dev->name, "%s (%s)", what, vram_format_size(capacity, cap, sizeof cap));
    dev->page_size = SIM_PAGE_SIZE;
    dev->capacity = capacity;
    *out = dev;
    return VRAM_OK;
}

vram_status vram_sim_device_open(const char *args, vram_device **out) { return open_sim("sim", args, out); }

/* "SIZE", "lag=N" or "SIZE,lag=N". */
vram_status vram_cudasim_device_open(const char *args, vram_device **out) {
    char size[64] = "";
    uint64_t lag = 0;
    const char *lagp = args ? strstr(args, "lag=") : NULL;
    if (lagp) {
        size_t n = (size_t)(lagp - args);
        if (n && args[n - 1] != ',')
            return vram_error(VRAM_ERR_INVALID_ARG, "cudasim device: '%s': expected SIZE, lag=N or SIZE,lag=N", args);
        if (n > sizeof size) return vram_error(VRAM_ERR_INVALID_ARG, "cudasim device: size '%.*s' is too long", (int)n, args);
        if (n) snprintf(size, sizeof size, "%.*s", (int)(n - 1), args);
        char *end;
        errno = 0;
        unsigned long long v = strtoull(lagp + 4, &end, 10);
        if (!isdigit((unsigned char)lagp[4]) || *end || errno == ERANGE || v > (1ull << 32))
            return vram_error(VRAM_ERR_INVALID_ARG, "cudasim device: lag '%s' is not a whole number of calls up to 2^32",
                              lagp + 4);
        lag = v;
    } else if (args) {
        snprintf(size, sizeof size, "%s", args);
        if (strlen(args) >= sizeof size) return vram_error(VRAM_ERR_INVALID_ARG, "cudasim device: size '%s' is too long", args);
    }
    vram_status st = open_sim("cudasim", size, out);
    if (st != VRAM_OK) return st;
    (*out)->ops = &cudasim_ops;
    (*out)->chunk_size = 64ull << 20; /* as the CUDA device's */
    ((sim_state *)(*out)->impl)->lag = lag;
    if (lag) {
        size_t len = strlen((*out)->name);
        snprintf((*out)->name + len, sizeof (*out)->name - len, ", lag %llu", (unsigned long long)lag);
    }
    return VRAM_OK;
}
