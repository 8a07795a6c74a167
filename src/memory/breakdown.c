/* breakdown.c — where a pool's reserved memory lies at one moment: under blocks in use, or free,
 * and then whether a page move or release could take it (vram_allocator_cache_breakdown).
 *
 * The device moves and unmaps memory only by whole chunks (pages model: one physical allocation,
 * pages.h's chunk bitmap; segments model: one segment), so free memory comes in three kinds: in
 * chunks holding no block in use (movable), whole free pages in chunks that also hold a block in
 * use (pinned: they move only with that block's chunk), and the free bytes of pages that a block
 * in use shares (in-page). One walk over each region's blocks fills a per-page count of bytes in
 * use; a second walk over the chunks sorts the free pages. For analysis (bench_placement_waste,
 * docs/allocator.md): O(blocks + pages), under the allocator's lock.
 */
#include <stdlib.h>
#include <string.h>

#include "pages.h"

/* Whether block b holds memory no request may take: in use, freed but waiting for streams, or
 * kept by a CUDA graph's private pool. */
static int held(const vi_block *b) { return b->state != BLOCK_FREE || b->graph != 0; }

/* Pages model: adds region r's chunks to *out. `used` (npages entries) is scratch. */
static void pages_region(const vram_allocator *a, const vi_region *r, uint64_t *used, vram_cache_breakdown *out) {
    uint64_t P = a->page_size;
    memset(used, 0, r->npages * sizeof *used);
    for (const vi_block *b = r->first; b; b = b->next) {
        if (!held(b)) continue;
        out->held_bytes += b->size;
        for (uint64_t x = b->addr, end = b->addr + b->size; x < end;) { /* bytes in use per page */
            uint64_t pg = (x - r->base) >> a->page_shift, next = r->base + (pg + 1) * P;
            uint64_t e = next < end ? next : end;
            used[pg] += e - x;
            x = e;
        }
    }
    for (uint64_t c = vi_bits_find(r->mapped, 0, r->npages, 1); c < r->npages;) {
        /* the chunk from c: to the next chunk start or the first unmapped page */
        uint64_t gap = vi_bits_find(r->mapped, c + 1, r->npages, 0), next = vi_bits_find(r->chunk, c + 1, gap, 1);
        uint64_t e = next < gap ? next : gap, in_use = 0, free_pages = 0, shared = 0;
        for (uint64_t p = c; p < e; p++) {
            in_use += used[p];
            if (!used[p]) free_pages++;
            else shared += P - used[p];
        }
        out->reserved_bytes += (e - c) * P;
        out->chunks++;
        if (!in_use) {
            out->free_movable += (e - c) * P;
            out->chunks_free++;
        } else {
            out->free_pinned += free_pages * P;
            out->free_in_page += shared;
        }
        c = e < gap ? e : vi_bits_find(r->mapped, gap, r->npages, 1);
    }
}

/* Segments model (or a segment among pages): the segment is one chunk. */
static void segment_region(const vi_region *r, vram_cache_breakdown *out) {
    uint64_t in_use = 0;
    for (const vi_block *b = r->first; b; b = b->next)
        if (held(b)) in_use += b->size;
    out->held_bytes += in_use;
    out->reserved_bytes += r->size;
    out->chunks++;
    if (!in_use) {
        out->free_movable += r->size;
        out->chunks_free++;
    } else {
        out->free_pinned += r->size - in_use;
    }
}

vram_status vram_allocator_cache_breakdown(vram_allocator *a, int pool, vram_cache_breakdown *out) {
    if (!a || !out || pool < VRAM_POOL_ALL || pool >= VRAM_POOL_COUNT)
        return vram_error(VRAM_ERR_INVALID_ARG, "cache_breakdown: %s", !a || !out ? "null argument" : "no such pool");
    memset(out, 0, sizeof *out);
    vi_allocator_lock(a);
    uint64_t most = 0; /* the scratch per-page count: as many entries as the largest region has pages */
    for (int p = VRAM_POOL_SMALL; p < VRAM_POOL_COUNT; p++)
        for (const vi_region *r = a->pools[p].regions; r; r = r->next)
            if (r->expandable && r->npages > most) most = r->npages;
    uint64_t *used = most ? malloc(most * sizeof *used) : NULL;
    if (most && !used) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_OUT_OF_MEMORY, "cache_breakdown: no memory for %llu page counts",
                          (unsigned long long)most);
    }
    for (int p = VRAM_POOL_SMALL; p < VRAM_POOL_COUNT; p++) {
        if (pool != VRAM_POOL_ALL && pool != p) continue;
        for (const vi_region *r = a->pools[p].regions; r; r = r->next) {
            if (r->expandable) pages_region(a, r, used, out);
            else segment_region(r, out);
        }
    }
    vi_allocator_unlock(a);
    free(used);
    return VRAM_OK;
}
