/* train_trace.c — `vram train --trace PATH`: the run's allocation stream as a memtrace v1 file
 * (docs/trace_format.md), for `vram replay`, `vram viz`, and for comparing a GPU run with what
 * `vram plan` or a replay at some lag would place.
 *
 * The allocator's event history (vram_allocator_set_history) is started before the runtime
 * allocates anything; it records every allocation with its requested size and every free as
 * requested. At the end of the run (or at its failure) the snapshot's events become the trace's
 * `a ID SIZE STREAM` and `f ID` lines: ids numbered in allocation order, a free matched to the
 * live allocation at its address through a small open-addressing table (addr_map). A request the allocator
 * refused (out of memory) is written where it came, after a `# oom:` line, as an allocation freed
 * at once, so that a replay under the run's capacity fails where the run did. A run with more
 * events than the history holds is refused rather than written short.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vram/alloc.h"
#include "vram/snapshot.h"

/* History entries: a GPT-2 124M step makes a few thousand allocations; 2^21 events (about 100
 * MiB of host memory, only while tracing) hold a few hundred such steps. */
#define TRACE_EVENTS (1u << 21)

int vram_train_trace_start(vram_allocator *a) {
    if (vram_allocator_set_history(a, TRACE_EVENTS) == VRAM_OK) return 0;
    fprintf(stderr, "vram train: --trace: the allocator's history could not start: %s\n", vram_last_error());
    return 1;
}

/* Allocation ids by address: open addressing, linear probing. One block lives at an address at a
 * time, so an allocation overwrites its address's entry and a free sets it to 0 (not live);
 * entries are never removed. */
typedef struct addr_map {
    uint64_t *addr, *id; /* addr 0: an empty slot (the allocator never returns address 0 here) */
    size_t mask;
} addr_map;

static size_t slot_of(const addr_map *m, uint64_t addr) {
    size_t i = (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 17) & m->mask;
    while (m->addr[i] && m->addr[i] != addr) i = (i + 1) & m->mask;
    return i;
}

/* Writes the events as memtrace lines; returns a message on failure (NULL: written). */
static const char *write_events(FILE *f, const vram_snapshot *snap, addr_map *m) {
    uint64_t next_id = 1;
    for (size_t k = 0; k < snap->num_events; k++) {
        const vram_event *e = &snap->events[k];
        if (e->action == VRAM_EVENT_ALLOC) {
            size_t i = slot_of(m, e->addr);
            if (m->id[i]) return "two live allocations at one address in the history";
            m->addr[i] = e->addr, m->id[i] = next_id;
            fprintf(f, "a %" PRIu64 " %" PRIu64 " %u\n", next_id++, e->size, (unsigned)e->stream);
        } else if (e->action == VRAM_EVENT_OOM) {
            fprintf(f, "# oom: the run's request (rounded: %" PRIu64 " bytes) failed here (%" PRIu64 " bytes free on the device)\n"
                       "a %" PRIu64 " %" PRIu64 " %u\nf %" PRIu64 "\n",
                    e->size, e->addr, next_id, e->size, (unsigned)e->stream, next_id);
            next_id++;
        } else if (e->action == VRAM_EVENT_FREE_REQUESTED) {
            size_t i = slot_of(m, e->addr);
            if (!m->id[i]) return "a free of an allocation the history did not see made";
            fprintf(f, "f %" PRIu64 "\n", m->id[i]);
            m->id[i] = 0;
        }
    }
    return NULL;
}

/* The most requested bytes live at once, as the format's peak_requested_bytes counts them. */
static uint64_t peak_requested(const vram_snapshot *snap) {
    int64_t live = 0, peak = 0;
    for (size_t k = 0; k < snap->num_events; k++) {
        const vram_event *e = &snap->events[k];
        if (e->action == VRAM_EVENT_ALLOC) live += (int64_t)e->size;
        else if (e->action == VRAM_EVENT_FREE_REQUESTED) live -= (int64_t)e->size;
        if (live > peak) peak = live;
        if (e->action == VRAM_EVENT_OOM && live + (int64_t)e->size > peak) peak = live + (int64_t)e->size; /* (written as a/f) */
    }
    return (uint64_t)peak;
}

int vram_train_trace_write(vram_allocator *a, const char *path, const char *source) {
    uint64_t count = vram_allocator_history_count(a);
    if (count > TRACE_EVENTS) {
        fprintf(stderr, "vram train: --trace: the run made %" PRIu64 " allocator events, more than the %u a trace "
                        "holds; nothing written to %s (fewer --steps)\n", count, TRACE_EVENTS, path);
        return 1;
    }
    vram_snapshot *snap = NULL;
    if (vram_allocator_snapshot(a, &snap) != VRAM_OK) {
        fprintf(stderr, "vram train: --trace: no snapshot of the allocator: %s\n", vram_last_error());
        return 1;
    }
    addr_map m = {0};
    size_t cap = 16;
    while (cap < 2 * snap->num_events + 16) cap *= 2;
    m.addr = calloc(cap, sizeof *m.addr);
    m.id = calloc(cap, sizeof *m.id);
    m.mask = cap - 1;
    const char *why = !m.addr || !m.id ? "out of host memory" : NULL;
    FILE *f = why ? NULL : fopen(path, "w");
    if (!why && !f) why = strerror(errno);
    if (!why) {
        fprintf(f, "# memtrace v1\n# source: %s\n# device: %s\n# peak_requested_bytes: %" PRIu64 "\n", source,
                vram_allocator_device(a)->name, peak_requested(snap));
        why = write_events(f, snap, &m);
        if (fclose(f) != 0 && !why) why = strerror(errno);
        if (why) remove(path); /* no half trace left behind */
    }
    if (why) fprintf(stderr, "vram train: --trace %s: %s\n", path, why);
    free(m.addr);
    free(m.id);
    vram_snapshot_free(snap);
    return why != NULL;
}
