/* segments.c — regions, and the segments model: each region one device allocation sized as
 * PyTorch sizes its segments (2 MiB small, 20 MiB, or the request rounded to 2 MiB).
 *
 * vi_region_new makes a region holding one free, ready block (also the pages model's two
 * virtual ranges at creation). vi_new_segment asks the device for a segment within the limit,
 * releasing wholly free segments first when needed (all of them unless max_split_size is set,
 * as PyTorch does); vi_release_cache gives cached memory back:
 * pages (pages.c) and wholly free, ready segments, oldest free first.
 */
#include <stdlib.h>

#include "allocator_internal.h"

static void region_link(vi_pool *p, vi_region *r) {
    r->prev = NULL;
    r->next = p->regions;
    if (p->regions) p->regions->prev = r;
    p->regions = r;
}

static void region_unlink(vi_pool *p, vi_region *r) {
    if (r->prev) r->prev->next = r->next;
    else p->regions = r->next;
    if (r->next) r->next->prev = r->prev;
}

/* Creates a region over [base, base+size) holding one free, ready block. */
vi_region *vi_region_new(vram_allocator *a, int pool, uint64_t base, uint64_t size, int expandable) {
    vi_region *r = calloc(1, sizeof *r);
    vi_block *b = vi_block_new(a);
    if (!r || !b) {
        free(r);
        if (b) vi_block_release(a, b);
        return NULL;
    }
    r->base = base;
    r->size = size;
    r->pool = pool;
    r->expandable = expandable;
    if (expandable) {
        r->npages = size / a->page_size;
        r->mapped = calloc((r->npages + 63) / 64 + 1, sizeof(uint64_t));
        r->zombie = calloc((r->npages + 63) / 64 + 1, sizeof(uint64_t));
        r->chunk = calloc((r->npages + 63) / 64 + 1, sizeof(uint64_t));
        if (!r->mapped || !r->zombie || !r->chunk) {
            free(r->mapped);
            free(r->zombie);
            free(r->chunk);
            free(r);
            vi_block_release(a, b);
            return NULL;
        }
    }
    b->addr = base;
    b->size = size;
    b->region = r;
    b->pool = (uint8_t)pool;
    b->state = BLOCK_FREE;
    b->ready = 1;
    r->first = b;
    region_link(&a->pools[pool], r);
    vi_bin_insert(&a->pools[pool], b);
    return r;
}

void vi_region_destroy(vram_allocator *a, vi_region *r) {
    region_unlink(&a->pools[r->pool], r);
    free(r->mapped);
    free(r->zombie);
    free(r->chunk);
    free(r);
}

/* Segments model: the device allocation size for a request, as PyTorch sizes segments. */
static uint64_t segment_size(uint64_t rsize) {
    if (rsize <= VRAM_SMALL_LIMIT) return VRAM_SMALL_SEGMENT;
    if (rsize < VRAM_MIN_LARGE_ALLOC) return VRAM_LARGE_SEGMENT;
    return (rsize + VRAM_ROUND_LARGE - 1) / VRAM_ROUND_LARGE * VRAM_ROUND_LARGE;
}

/* Segments model: returns wholly free segments to the device until `want` bytes are released
 * (UINT64_MAX: all). Only ready segments are released. Returns the bytes released. */
static uint64_t release_segments(vram_allocator *a, uint64_t want) {
    uint64_t released = 0;
    vi_block *b = a->cached.head;
    while (b && released < want) {
        vi_block *next = b->cnext;
        vi_region *r = b->region;
        if (!r->expandable && b->ready && b->state == BLOCK_FREE && !b->prev && !b->next) {
            if (a->dev->ops->mem_free(a->dev, r->base, r->size) == VRAM_OK) {
                vi_free_unlink(a, b);
                vi_stat_pool_down(a->stats.reserved_bytes, r->pool, (int64_t)r->size);
                vi_stat_pool_down(a->stats.segment, r->pool, 1);
                if (a->cfg.max_split_size != UINT64_MAX && r->size >= a->cfg.max_split_size)
                    vi_stat_down(&a->stats.oversize_segments, 1);
                a->stats.num_device_free++;
                vi_history_add(a, VRAM_EVENT_SEGMENT_FREE, r->base, r->size, 0, 0);
                released += r->size;
                vi_block_release(a, b);
                vi_region_destroy(a, r);
            }
        } else if (!r->expandable && (b->prev || b->next)) {
            vi_cached_remove(a, b); /* a segment in use; pages' blocks stay for vi_pages_release */
        }
        b = next;
    }
    return released;
}

uint64_t vi_release_cache(vram_allocator *a, uint64_t want) {
    uint64_t released = a->pages_model ? vi_pages_release(a, want, NULL, 0, 0, NULL) : 0;
    if (released < want && (!a->pages_model || a->segments_too)) released += release_segments(a, want - released);
    return released;
}

/* Segments model: a new segment able to hold rsize, respecting the limit. */
vi_block *vi_new_segment(vram_allocator *a, int pool, uint64_t rsize, int *retried, vram_status *err) {
    uint64_t size = segment_size(rsize);
    uint64_t reserved = (uint64_t)a->stats.reserved_bytes[0].current;
    if (reserved + size > a->limit) {
        if (!vi_capturing(a)) { /* a capture waits for and releases nothing */
            *retried = 1;
            vi_sync_all_streams(a);
            /* as PyTorch at its limit: with max_split_size set, free segments only as needed
             * (release_available_cached_blocks); unset, that step does nothing and every wholly free
             * segment goes back (release_cached_blocks), which decides what later placements see */
            release_segments(a, a->cfg.max_split_size == UINT64_MAX ? UINT64_MAX : reserved + size - a->limit);
        }
        if ((uint64_t)a->stats.reserved_bytes[0].current + size > a->limit) {
            *err = VRAM_ERR_OUT_OF_MEMORY;
            return NULL;
        }
    }
    uint64_t base;
    vram_status st = a->dev->ops->mem_alloc(a->dev, size, &base);
    if (st == VRAM_ERR_OUT_OF_MEMORY && !vi_capturing(a)) {
        *retried = 1;
        vi_sync_all_streams(a);
        release_segments(a, UINT64_MAX);
        st = a->dev->ops->mem_alloc(a->dev, size, &base);
    }
    if (st != VRAM_OK) {
        *err = st;
        return NULL;
    }
    vi_region *r = vi_region_new(a, pool, base, size, 0);
    if (!r) {
        a->dev->ops->mem_free(a->dev, base, size);
        *err = VRAM_ERR_HOST_MEMORY; /* the region's struct: not the device's memory */
        return NULL;
    }
    a->segments_too |= a->pages_model;
    vi_stat_pool_up(a->stats.reserved_bytes, pool, (int64_t)size);
    vi_stat_pool_up(a->stats.segment, pool, 1);
    if (a->cfg.max_split_size != UINT64_MAX && size >= a->cfg.max_split_size)
        vi_stat_up(&a->stats.oversize_segments, 1);
    a->stats.num_device_alloc++;
    vi_history_add(a, VRAM_EVENT_SEGMENT_ALLOC, base, size, 0, 0);
    return r->first;
}
