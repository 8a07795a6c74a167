/* snapshot.c — copies the allocator's state into a vram_snapshot (snapshot.h).
 *
 * Segments are what the device holds: in the segments model each region is one segment; in
 * the pages model each run of mapped pages of a pool's range is one segment (as PyTorch lists
 * one segment per mapped range of an expandable segment), and the blocks of a segment are the
 * region's blocks clipped to that run. The event ring is copied oldest first.
 */
#include <stdlib.h>
#include <string.h>

#include "allocator_internal.h"

typedef struct snap_builder {
    vram_snapshot *s;
    const vram_allocator *a;
    size_t cap_segments, cap_blocks;
} snap_builder;

static int grow(void **array, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*array, ncap * elem);
    if (!p) return -1;
    *array = p;
    *cap = ncap;
    return 0;
}

static vram_snapshot_segment *add_segment(snap_builder *sb, const vi_region *r, uint64_t addr, uint64_t size) {
    vram_snapshot *s = sb->s;
    if (grow((void **)&s->segments, &sb->cap_segments, s->num_segments + 1, sizeof *s->segments)) return NULL;
    vram_snapshot_segment *seg = &s->segments[s->num_segments++];
    memset(seg, 0, sizeof *seg);
    seg->address = addr;
    seg->total_size = size;
    seg->pool = r->pool;
    seg->is_expandable = r->expandable;
    seg->first_block = s->num_blocks;
    return seg;
}

static int add_block(snap_builder *sb, vram_snapshot_segment *seg, const vi_block *b, uint64_t addr, uint64_t size) {
    vram_snapshot *s = sb->s;
    if (grow((void **)&s->blocks, &sb->cap_blocks, s->num_blocks + 1, sizeof *s->blocks)) return -1;
    vram_snapshot_block *out = &s->blocks[s->num_blocks++];
    out->address = addr;
    out->size = size;
    out->requested_size = b->state == BLOCK_FREE ? 0 : b->requested;
    out->state = b->state == BLOCK_LIVE      ? VRAM_BLOCK_ACTIVE_ALLOCATED
                 : b->state == BLOCK_PENDING ? VRAM_BLOCK_ACTIVE_PENDING_FREE
                                             : VRAM_BLOCK_INACTIVE;
    out->tag = b->tag;
    out->graph_pool = b->graph ? sb->a->graph_pools[b->graph - 1].id : 0;
    seg->num_blocks++;
    if (b->state != BLOCK_FREE) {
        seg->active_size += size;
        seg->requested_size += out->requested_size;
        if (b->state == BLOCK_LIVE) seg->allocated_size += size;
        if (!seg->stream) seg->stream = b->stream;
    }
    return 0;
}

/* Adds the segment [lo, hi) of region r with the blocks that overlap it, clipped. */
static int add_range(snap_builder *sb, const vi_region *r, const vi_block **cursor, uint64_t lo, uint64_t hi) {
    vram_snapshot_segment *seg = add_segment(sb, r, lo, hi - lo);
    if (!seg) return -1;
    const vi_block *b = *cursor;
    while (b && b->addr + b->size <= lo) b = b->next;
    for (; b && b->addr < hi; b = b->next) {
        uint64_t s = b->addr > lo ? b->addr : lo, e = b->addr + b->size < hi ? b->addr + b->size : hi;
        if (add_block(sb, seg, b, s, e - s)) return -1;
        if (b->addr + b->size > hi) break; /* continues into the next range */
    }
    *cursor = b;
    return 0;
}

static int add_region(snap_builder *sb, const vram_allocator *a, const vi_region *r) {
    const vi_block *cursor = r->first;
    if (!r->expandable) return add_range(sb, r, &cursor, r->base, r->base + r->size);
    uint64_t q = 0;
    while (q < r->npages) {
        while (q < r->npages && !vi_page_mapped(r, q)) q++;
        if (q >= r->npages) break;
        uint64_t e = q;
        while (e < r->npages && vi_page_mapped(r, e)) e++;
        if (add_range(sb, r, &cursor, r->base + q * a->page_size, r->base + e * a->page_size)) return -1;
        q = e;
    }
    return 0;
}

static int by_address(const void *x, const void *y) {
    const vram_snapshot_segment *a = x, *b = y;
    return a->address < b->address ? -1 : a->address > b->address;
}

vram_status vram_allocator_snapshot(vram_allocator *a, vram_snapshot **out) {
    if (!a || !out) return vram_error(VRAM_ERR_INVALID_ARG, "snapshot: null argument");
    *out = NULL;
    vram_snapshot *s = calloc(1, sizeof *s);
    if (!s) return vram_error(VRAM_ERR_HOST_MEMORY, "snapshot: host out of memory");
    snap_builder sb = {s, a, 0, 0};
    vi_allocator_lock(a);
    int failed = 0;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE && !failed; p++)
        for (const vi_region *r = a->pools[p].regions; r && !failed; r = r->next) failed = add_region(&sb, a, r);
    if (!failed && a->history.ring) {
        uint64_t n = a->history.next < a->cfg.history_entries ? a->history.next : a->cfg.history_entries;
        s->events = calloc(n ? n : 1, sizeof *s->events);
        if (!s->events) failed = 1;
        for (uint64_t i = 0; !failed && i < n; i++)
            s->events[i] = a->history.ring[(a->history.next - n + i) % a->cfg.history_entries];
        s->num_events = failed ? 0 : n;
    }
    s->device_index = a->dev->index;
    vram_alloc_config_format(&a->cfg, s->settings, sizeof s->settings);
    for (uint32_t t = 0; t < a->stats.num_tags && t < VRAM_TAG_MAX; t++)
        memcpy(s->tag_names[t], a->tag_names[t], sizeof s->tag_names[t]);
    vi_allocator_unlock(a);
    if (failed) {
        vram_snapshot_free(s);
        return vram_error(VRAM_ERR_HOST_MEMORY, "snapshot: host out of memory");
    }
    /* segments in address order, each keeping its run of blocks */
    if (s->num_segments > 1) {
        vram_snapshot_block *blocks = malloc(s->num_blocks * sizeof *blocks);
        if (!blocks) {
            vram_snapshot_free(s);
            return vram_error(VRAM_ERR_HOST_MEMORY, "snapshot: host out of memory");
        }
        qsort(s->segments, s->num_segments, sizeof *s->segments, by_address);
        size_t k = 0;
        for (size_t i = 0; i < s->num_segments; i++) {
            memcpy(&blocks[k], &s->blocks[s->segments[i].first_block], s->segments[i].num_blocks * sizeof *blocks);
            s->segments[i].first_block = k;
            k += s->segments[i].num_blocks;
        }
        free(s->blocks);
        s->blocks = blocks;
    }
    *out = s;
    return VRAM_OK;
}

void vram_snapshot_free(vram_snapshot *s) {
    if (!s) return;
    free(s->segments);
    free(s->blocks);
    free(s->events);
    free(s);
}
