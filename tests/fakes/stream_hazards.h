/* stream_hazards.h — a shadow of the memory that the streams of the event device
 * (event_device.h) may still use, for tests that check the allocator never hands it out early.
 *
 * A block freed while its stream has work in flight is a hazard until the stream completes that
 * work: by address (the range freed) and, in the pages model, by physical page (the bytes of
 * each page under it, from the device's page model, phys_pages.h), so that memory moved to
 * another address (page_alias) is still recognised. A new block for another stream must touch
 * neither; a range whose pages leave their address (page_unmap, page_drop) must hold no
 * unfinished hazard. Physical hazards sit in a chained hash by page id.
 *
 *   hazards_init / hazards_free / hazards_prune (drops finished ones)
 *   hazards_add(h, dev, addr, size, stream)        before the free
 *   hazards_check_block(h, dev, p, size, stream, &by_address, &by_page)
 *   hazards_in_use(h, dev, addr, size)             unfinished hazards over a range
 */
#ifndef VRAM_TESTS_STREAM_HAZARDS_H
#define VRAM_TESTS_STREAM_HAZARDS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "event_device.h"

#define HAZARD_BUCKETS 4096

typedef struct hazard_range {
    uint64_t addr, size, target; /* target: the stream's submitted work at the free */
    unsigned stream;
} hazard_range;

typedef struct hazard_page {
    uint64_t id, lo, hi, target; /* bytes [lo, hi) of physical page id */
    unsigned stream;
    int next; /* the next entry of its bucket, -1 at the end */
} hazard_page;

typedef struct stream_hazards {
    hazard_range *ranges;
    size_t nranges, cap_ranges;
    hazard_page *pages;
    size_t npages, cap_pages;
    int bucket[HAZARD_BUCKETS];
} stream_hazards;

static inline int hazard_done(vram_device *dev, unsigned stream, uint64_t target) {
    return event_device_state(dev)->completed[stream % EVDEV_STREAMS] >= target;
}

static inline void hazards_rehash(stream_hazards *h) {
    for (int b = 0; b < HAZARD_BUCKETS; b++) h->bucket[b] = -1;
    for (size_t i = 0; i < h->npages; i++) {
        int b = (int)(h->pages[i].id % HAZARD_BUCKETS);
        h->pages[i].next = h->bucket[b];
        h->bucket[b] = (int)i;
    }
}

static inline void hazards_init(stream_hazards *h) {
    memset(h, 0, sizeof *h);
    hazards_rehash(h);
}

static inline void hazards_free(stream_hazards *h) {
    free(h->ranges);
    free(h->pages);
    hazards_init(h);
}

static inline void hazards_prune(stream_hazards *h, vram_device *dev) {
    size_t k = 0;
    for (size_t i = 0; i < h->nranges; i++)
        if (!hazard_done(dev, h->ranges[i].stream, h->ranges[i].target)) h->ranges[k++] = h->ranges[i];
    h->nranges = k;
    size_t m = 0;
    for (size_t i = 0; i < h->npages; i++)
        if (!hazard_done(dev, h->pages[i].stream, h->pages[i].target)) h->pages[m++] = h->pages[i];
    h->npages = m;
    hazards_rehash(h);
}

/* Grows an array of n elements of `size` bytes to hold one more; 0 when the host has no memory
 * (the hazard is then not kept: the check can only miss, never fail wrongly). */
static inline int hazards_room(void **array, size_t n, size_t *cap, size_t size) {
    if (n < *cap) return 1;
    size_t ncap = *cap ? *cap * 2 : 4096;
    void *grown = realloc(*array, ncap * size);
    if (!grown) return 0;
    *array = grown;
    *cap = ncap;
    return 1;
}

/* [addr, addr+size) is about to be freed on `stream`: whatever the stream has queued so far may
 * still use it. */
static inline void hazards_add(stream_hazards *h, vram_device *dev, uint64_t addr, uint64_t size, unsigned stream) {
    evdev_state *e = event_device_state(dev);
    uint64_t target = e->submitted[stream % EVDEV_STREAMS];
    if (hazard_done(dev, stream, target)) return; /* nothing in flight */
    if (h->nranges >= 65536) hazards_prune(h, dev);
    if (hazards_room((void **)&h->ranges, h->nranges, &h->cap_ranges, sizeof *h->ranges))
        h->ranges[h->nranges++] = (hazard_range){addr, size, target, stream};
    for (uint64_t pg = addr / PHYS_PAGE * PHYS_PAGE; pg < addr + size; pg += PHYS_PAGE) {
        uint64_t id = phys_pages_id(&e->phys, pg);
        if (id == UINT64_MAX) return; /* a segment: its memory never moves */
        if (id == 0) continue;        /* unmapped under a live block: hazards_check_block counted it */
        if (!hazards_room((void **)&h->pages, h->npages, &h->cap_pages, sizeof *h->pages)) return;
        uint64_t lo = addr > pg ? addr - pg : 0, hi = addr + size < pg + PHYS_PAGE ? addr + size - pg : PHYS_PAGE;
        int b = (int)(id % HAZARD_BUCKETS);
        h->pages[h->npages] = (hazard_page){id, lo, hi, target, stream, h->bucket[b]};
        h->bucket[b] = (int)h->npages++;
    }
}

/* A block [p, p+size) just handed to stream s: adds to *by_address the unfinished hazards of
 * other streams over its range, and to *by_page those over its physical bytes, and the pages
 * under it that are not mapped at all. */
static inline void hazards_check_block(const stream_hazards *h, vram_device *dev, uint64_t p, uint64_t size,
                                       unsigned s, uint64_t *by_address, uint64_t *by_page) {
    for (size_t i = 0; i < h->nranges; i++) {
        const hazard_range *z = &h->ranges[i];
        if (z->stream != s && p < z->addr + z->size && z->addr < p + size && !hazard_done(dev, z->stream, z->target))
            (*by_address)++;
    }
    evdev_state *e = event_device_state(dev);
    for (uint64_t pg = p / PHYS_PAGE * PHYS_PAGE; pg < p + size; pg += PHYS_PAGE) {
        uint64_t id = phys_pages_id(&e->phys, pg);
        if (id == UINT64_MAX) return;
        if (id == 0) {
            (*by_page)++;
            continue;
        }
        uint64_t lo = p > pg ? p - pg : 0, hi = p + size < pg + PHYS_PAGE ? p + size - pg : PHYS_PAGE;
        for (int i = h->bucket[id % HAZARD_BUCKETS]; i >= 0; i = h->pages[i].next) {
            const hazard_page *z = &h->pages[i];
            if (z->id == id && z->stream != s && lo < z->hi && z->lo < hi && !hazard_done(dev, z->stream, z->target))
                (*by_page)++;
        }
    }
}

/* The unfinished hazards over [addr, addr+size), by address. */
static inline uint64_t hazards_in_use(const stream_hazards *h, vram_device *dev, uint64_t addr, uint64_t size) {
    uint64_t n = 0;
    for (size_t i = 0; i < h->nranges; i++) {
        const hazard_range *z = &h->ranges[i];
        if (z->addr < addr + size && addr < z->addr + z->size && !hazard_done(dev, z->stream, z->target)) n++;
    }
    return n;
}

#endif
