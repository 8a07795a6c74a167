/* block.h — the allocator's unit of memory: a block (a range of device addresses handed out,
 * waiting or free) and the region it tiles, with the vocabulary every src/memory file uses.
 *
 * A region is one address range (pages model: a pool's whole virtual range; segments model: one
 * device allocation) tiled by blocks in address order (prev/next). A block is in one state
 * (`state`, below), and a FREE block in at most one of the free structures (`deferred`). The
 * allocator's own state (vram_allocator, allocator_internal.h) indexes blocks; this file owns
 * only their layout, which is measured: see docs/allocator.md before reordering fields.
 */
#ifndef VRAM_BLOCK_H
#define VRAM_BLOCK_H

#include <stdint.h>

#include "vram/alloc.h"

/* The words used for blocks across src/memory, defined here once:
 *   LIVE      handed out by malloc, in the live map (address -> block).
 *   PENDING   freed, but used on other streams (record_stream): waits in the pending list for
 *             events recorded on them; still in the live map.
 *   FREE      free memory, in exactly one of:
 *     - the bins (deferred NONE): the pool's segregated free lists, coalesced with its free
 *       neighbours where they may merge;
 *     - a `recent` slot (DEFER_RECENT): freed just now, kept uncoalesced for a request of exactly
 *       its size (the allocate/free fast path); keeps its live-map entry;
 *     - a `held` stack (DEFER_HELD): a small block of a size class, behind the recent slots,
 *       kept uncoalesced for a request of its class; keeps its live-map entry;
 *     - a private pool's bins (DEFER_GRAPH): a CUDA graph pool's block, for that pool only.
 *   ready     (FREE) every stream may take it; otherwise only its owner `stream` may, until an
 *             event recorded on the owner after the free (`free_seq`) has completed. A not-ready
 *             block is also in its owner's not-ready list (sprev/snext).
 *   zombie    (pages) the old address of pages moved by aliasing, which a stream may still use:
 *             kept mapped until an event says it has passed (region->zombie, vi_zombie).
 *   mixed     (allocator) a ready and a not-ready block were merged while one stream alone
 *             allocated (one-stream merges, bins.c); a second stream then waits for it once.
 *   tag_solo  (allocator) the one tag every allocation so far used, whose per-tag statistics
 *             are then the pools' (stats.c), or -1 once a second tag appears.
 *   cached    (FREE) in the cached list: a free block that may contain whole mapped pages (or a
 *             wholly free segment), the candidates for page moves and releases.
 */
enum { BLOCK_FREE = 0, BLOCK_LIVE = 1, BLOCK_PENDING = 2 };
enum { DEFER_NONE = 0, DEFER_RECENT = 1, DEFER_HELD = 2, DEFER_GRAPH = 3 };

typedef struct vi_region vi_region;

typedef struct vi_block {
    /* first what malloc and free touch: a reuse pair reads nothing past `events` */
    uint64_t addr;
    uint64_t size;
    uint64_t requested;
    vram_stream stream;               /* allocation stream; for a FREE block its owner */
    uint64_t free_seq;                /* order of frees, for stream readiness */
    vram_stream *uses;                /* other streams recorded with record_stream */
    uint16_t tag;
    uint8_t graph;                    /* 1 + index in graph_pools of the private pool it belongs to, or 0 */
    uint16_t nuses, nevents;
    uint8_t state;
    uint8_t ready;
    uint8_t deferred;                 /* FREE, not yet coalesced: DEFER_RECENT (in a `recent` slot),
                                       * DEFER_HELD (in its small class's list) or DEFER_GRAPH (in
                                       * its private pool's bins, for that pool only) */
    uint8_t pool;                     /* region->pool, without the indirection */
    uint8_t in_cached;
    uint8_t mapped_all;               /* pages model, FREE: every page under the block is mapped
                                       * (set when a live block is freed, kept by merges of such
                                       * blocks and by splits, cleared when pages.c unmaps any of
                                       * its pages; 0 says nothing: then the bitmap answers) */
    uint16_t bin;
    void **events;                    /* PENDING: events still to complete */
    vi_region *region;
    struct vi_block *prev, *next;   /* address neighbours in the region (NULL at its ends) */
    struct vi_block *fprev, *fnext; /* bin list (FREE) or pending list (PENDING) */
    struct vi_block *sprev, *snext; /* owner stream's not-ready list (FREE, !ready) */
    struct vi_block *cprev, *cnext; /* the cached-pages list */
} vi_block;

struct vi_region {
    uint64_t base, size;
    uint64_t *mapped;      /* pages model: one bit per page */
    uint64_t *zombie;      /* pages model: unmapped for the allocator, still an alias source */
    uint64_t *chunk;       /* pages model: first page of each chunk (one physical allocation,
                            * mapped, moved and unmapped whole; it ends at the next chunk's
                            * first page or the first unmapped page) */
    uint64_t npages;
    vi_block *first;
    int pool;
    int expandable;
    vi_region *prev, *next; /* the pool's region list */
};

typedef struct vi_block_slab {
    struct vi_block_slab *next;
    vi_block blocks[1024];
} vi_block_slab;

#endif
