/* allocator_internal.h — the allocator's state and every function its files share (the vi_
 * prefix: "vram internal"; nothing here is public). docs/allocator.md maps which file owns what.
 *
 * vram_allocator is a set of parts, one per owning file: the size pools with their regions and
 * bins (bins.c, segments.c, pages.c), the live map (live_map.h), the stream states and the
 * pending list (streams.c, allocator.c), the deferred slots and held stacks (deferred.c), the
 * private pools (graph_pools.c), the statistics, history and OOM report (stats.c). Blocks and
 * regions, and the words for their states, are block.h's. Below the struct: the cross-file
 * functions grouped by the file that defines them, then the small inline helpers the hot paths
 * share (the larger ones: deferred.h, search.h, pages.h, live_map.h).
 */
#ifndef VRAM_ALLOCATOR_INTERNAL_H
#define VRAM_ALLOCATOR_INTERNAL_H

#include <stdatomic.h>
#include <stdlib.h>

#include "vram/alloc.h"
#include "vram/snapshot.h"
#include "lock.h"

#define VRAM_BLOCK_ALIGN 512ull
#define VRAM_SMALL_LIMIT (1ull << 20)   /* rounded sizes up to this go to the small pool */
#define VRAM_SMALL_SEGMENT (2ull << 20) /* segments model: small-pool segment */
#define VRAM_LARGE_SEGMENT (20ull << 20)
#define VRAM_MIN_LARGE_ALLOC (10ull << 20)
#define VRAM_ROUND_LARGE (2ull << 20)

#define VRAM_NBINS 1664
#define VRAM_BIN_WORDS ((VRAM_NBINS + 63) / 64)
#define VRAM_MAX_STREAMS 64
#define VRAM_RECENT_SLOTS 16 /* freed blocks kept uncoalesced for an exact-size reuse */
#define VRAM_CLASS_BITS 2 /* small size classes: 2^VRAM_CLASS_BITS per power of two above 4 KiB */
#define VRAM_SMALL_CLASSES (8 + 8 * (1 << VRAM_CLASS_BITS)) /* 512 B ... 4 KiB, then 4 KiB ... 1 MiB */

#include "block.h"


/* Segregated free lists, each a doubly linked list through fnext / fprev (block->bin names
 * it), with a two-level bitmap of the non-empty ones: a size pool's free blocks (vi_pool) and
 * a private pool's (vi_graph_pool). The bins functions below. */
typedef struct vi_bins {
    vi_block *bins[VRAM_NBINS];
    uint64_t bitmap[VRAM_BIN_WORDS];
    uint64_t summary; /* bit w set when bitmap[w] != 0 */
} vi_bins;

typedef struct vi_pool {
    int index; /* VRAM_POOL_SMALL or VRAM_POOL_LARGE */
    uint32_t nfree; /* blocks in the bins (in index's padding: no field of the allocator moves) */
    vi_region *regions;
    vi_bins free;
} vi_pool;

typedef struct vi_stream_state {
    vram_stream stream;
    vi_block *head, *tail;    /* not-ready free blocks, by free_seq */
    uint64_t count;
    void *event;                /* in flight: recorded after frees up to event_seq */
    uint64_t event_seq;
} vi_stream_state;

/* Pages moved away (page_alias) whose old addresses a stream may still use: dropped once the
 * event, recorded on that stream after the move, completes. */
typedef struct vi_zombie_range {
    vi_region *region;
    uint64_t p0, p1;
} vi_zombie_range;

typedef struct vi_zombie {
    void *event;
    vi_zombie_range *ranges;
    size_t n, cap;
    struct vi_zombie *next;
} vi_zombie;

typedef struct vi_live_slot {
    uint64_t key;      /* the block's address; 0 marks an empty slot */
    vi_block *value;
} vi_live_slot;

typedef struct vi_live_map {
    vi_live_slot *slots; /* key and value side by side: a probe reads one cache line */
    uint64_t cap, count;   /* cap is a power of two */
} vi_live_map;

/* A private pool (PyTorch's graph memory pool): what CUDA graph captures into it allocated. */
#define VRAM_GRAPH_POOLS 16
typedef struct vi_graph_pool {
    uint64_t id;       /* the caller's pool id; 0: slot unused */
    uint32_t uses;     /* captures into it not yet released (a graph, until reset or destroyed) */
    uint64_t blocks;   /* its blocks, live and free */
    uint64_t nfree;    /* its free blocks */
    vi_bins *free[VRAM_POOL_COUNT]; /* its free blocks by size pool ([1] small, [2] large), in bins
                                       * as the allocator's; allocated while the slot is in use */
} vi_graph_pool;

/* A capture under way (begin_pool .. end_pool): the pool it allocates into and, once
 * vram_allocator_bind_pool has named it, the device's id of the capture, or, routed by
 * vram_allocator_route_pool, the one stream whose allocations it takes, captured or not
 * (graph_pools.c). */
#define VRAM_CAPTURES 8
typedef struct vi_capture {
    unsigned pool;      /* index in graph_pools */
    uint64_t id;        /* the device's capture id (backend.h, stream_capture); 0: not named yet */
    int by_stream;      /* routed: every allocation on `stream` is the pool's, whatever the device says */
    vram_stream stream;
} vi_capture;

enum { GRAPH_CAPTURING = 1, GRAPH_BLOCKS = 2 }; /* vram_allocator.graph_mode bits */

/* The allocator's parts (vram_allocator below), each the state of the file named. Their sizes
 * and alignments keep every field of vram_allocator at the offset it had as separate fields
 * (docs/allocator-evidence.md §8). */
typedef struct vi_structs {
    vi_block *free;          /* cleared structs to reuse, linked through fnext */
    vi_block_slab *slabs;
} vi_structs;

typedef struct vi_cached {
    vi_block *head, *tail;   /* oldest first */
} vi_cached;

typedef struct vi_recent {
    vi_block *slot[VRAM_RECENT_SLOTS];
    uint32_t mask;           /* bit k set when slot[k] holds a block */
} vi_recent;

typedef struct vi_pending {
    vi_block *head, *tail;   /* oldest first, linked through fnext/fprev */
    int64_t blocks[VRAM_POOL_COUNT], bytes[VRAM_POOL_COUNT]; /* per pool; [0] all */
} vi_pending;

typedef struct vi_zombies {
    vi_zombie *head, *tail;  /* oldest first */
} vi_zombies;

typedef struct vi_streams {
    vi_stream_state state[VRAM_MAX_STREAMS];
    int n;                   /* states in use */
    uint64_t not_ready;      /* not-ready free blocks, all streams */
    unsigned poll_countdown; /* mallocs until the fast path next asks in-flight events */
    uint64_t free_seq;       /* the last free's number (block.h: free_seq) */
} vi_streams;

typedef struct vi_history {
    vram_event *ring;        /* cfg.history_entries events, or NULL */
    uint64_t next;           /* total events recorded; ring index = next % entries */
} vi_history;

typedef struct vi_held {
    vi_block *stack[VRAM_SMALL_CLASSES]; /* per class, newest first, linked through fnext */
    uint64_t count;
} vi_held;

struct vram_allocator {
    vram_lock lock;          /* lock.h: biased to a thread that allocates alone */
    vram_device *dev;
    vram_alloc_config cfg;   /* its size moves every field below: see the note at the struct's end */
    int pages_model;
    int has_events;
    uint64_t page_size;
    uint64_t chunk_pages;    /* pages model: the most pages one chunk may have */
    unsigned page_shift;     /* log2(page_size): page arithmetic uses shifts, not divisions */
    int tag_solo;            /* block.h's tag_solo (in page_shift's padding: nothing moves) */
    uint64_t limit;          /* cap on reserved bytes */
    uint64_t allocated_high; /* the page budget's allocated peak (reserve_budget) from before the
                              * last reset of peak statistics, back to the last empty_cache */
    vi_pool pools[VRAM_POOL_COUNT]; /* [1] small, [2] large; [0] unused */
    vi_live_map live;
    vi_structs structs;      /* block.h's structs: slabs and the free list (allocator_internal.h) */
    vi_cached cached;        /* free blocks that may hold whole mapped pages (pages.c, segments.c) */
    vi_recent recent;        /* deferred frees, one per slot (deferred.h) */
    vi_pending pending;      /* frees waiting for other streams' events (allocator.c) */
    vi_zombies zombies;      /* aliased pages' old addresses (pages.c) */
    int can_alias;           /* the device moves pages without copying (page_alias/page_drop) */
    int free_fast;           /* frees go straight to `recent`: caching without a garbage collection
                              * threshold (frees_deferred) and no private pool in use */
    vi_streams streams;      /* stream states, readiness and the order of frees (streams.c) */
    vram_stats stats;
    char tag_names[VRAM_TAG_MAX][32];
    char oom_report[2048];
    vi_history history;      /* the event ring (stats.c) */
    /* Small size classes (deferred.h). Last, so that the fields above keep their offsets: the
     * pair path is sensitive to where the allocator's fields lie (docs/allocator-evidence.md §8,
     * which says what to rerun after changing this struct or vram_alloc_config). */
    int held_pool;           /* small_classes (and frees deferred): VRAM_POOL_SMALL, whose requests
                              * round to classes and whose frees are held; else -1 (no pool) */
    int graph_mode;          /* GRAPH_CAPTURING: captures are under way (`captures`);
                              * GRAPH_BLOCKS: some private pool is in use (in held_pool's padding,
                              * so that no field above moves; the fast paths never read it) */
    vi_held held;            /* small frees kept uncoalesced, per class (deferred.h) */
    vi_graph_pool graph_pools[VRAM_GRAPH_POOLS];
    vi_capture captures[VRAM_CAPTURES]; /* under way, oldest first */
    int ncaptures;
    /* One stream (streams.c; bins.c merges by it): while every malloc that searched came from
     * solo_stream and no page had to move for a request since the last empty_cache
     * (pages_moved), its not-ready free blocks merge with ready ones (block.h: mixed). */
    enum { STREAMS_NONE, STREAMS_SOLO, STREAMS_MANY } streams_seen;
    vram_stream solo_stream;
    int mixed, pages_moved;
    /* The peaks of allocated and reserved bytes (all pools) reached before the last empty_cache.
     * empty_cache restarts the statistics' own peaks from the current values, so that the page
     * budget (pages.c, reserve_budget) follows what the program has needed since it gave its
     * cache back, not what an earlier phase needed; the statistics a caller reads report the
     * larger value (vi_stats_export), as PyTorch's peaks, which only a reset lowers. */
    int64_t allocated_peak_before, reserved_peak_before;
    int64_t pending_requested; /* requested bytes of the pending blocks (a tag's counts leave them out) */
    int segments_too;        /* pages model: segments were made too (expandable_segments turned off at
                              * run time), so releases look at segments as well */
};

/* ---------------------------------------------------------------------------------------- */
/* Cross-file functions, by the file that defines them.                                      */

/* bins.c: the free-block index, coalescing and the best-fit search. */
/* Puts free block b (in its region's address list, in no index) into the free structures,
 * coalesced with the neighbours it may merge with; returns the block it is part of. `fresh` is
 * the range that just became free (for the cached list). */
vi_block *vi_free_insert(vram_allocator *a, vi_block *b, uint64_t fresh_addr, uint64_t fresh_size);
/* search.h's vi_find_free_inline out of line, for malloc's later searches. */
vi_block *vi_find_free(vram_allocator *a, vi_pool *p, uint64_t rsize, vram_stream s, int *place, int *mapped);

/* streams.c: stream states, their not-ready lists and events. */
vi_stream_state *vi_stream_find(vram_allocator *a, vram_stream s); /* vi_stream_of past the first entry */
void vi_stream_wait(vram_allocator *a, vram_stream s);              /* the host waits for s's queued work */
void vi_stream_list_remove(vram_allocator *a, vi_block *b);
int vi_stream_list_append(vram_allocator *a, vi_block *b);
void vi_stream_list_reseq(vram_allocator *a, vi_block *b, uint64_t seq);
vram_status vi_sync_all_streams(vram_allocator *a);        /* waits for every stream with not-ready blocks */
void vi_poll_streams(vram_allocator *a, int want_more);    /* makes blocks of finished stream work ready */
void vi_streams_note(vram_allocator *a, vram_stream stream); /* a searching malloc's stream (one-stream mode) */
void vi_streams_many(vram_allocator *a);                   /* leaves one-stream mode */

/* deferred.c: the recent slots and held stacks (the inline half: deferred.h). */
/* Sends every deferred block to the bins; with `than`, whether a search for rsize must run again. */
int vi_recent_flush(vram_allocator *a, int pool, uint64_t rsize, const vi_block *than);
void vi_deferred_flush(vram_allocator *a); /* coalesces every recent and held block */

/* segments.c: regions, and the segments model's device allocations. */
vi_region *vi_region_new(vram_allocator *a, int pool, uint64_t base, uint64_t size, int expandable);
void vi_region_destroy(vram_allocator *a, vi_region *r);
vi_block *vi_new_segment(vram_allocator *a, int pool, uint64_t rsize, int *retried, vram_status *err);
uint64_t vi_release_cache(vram_allocator *a, uint64_t want); /* pages unmapped and segments freed, in bytes */

/* pages.c: the pages model. */
/* Drops the old addresses of aliased pages whose streams have passed them (all, waiting for the
 * streams, with `wait`). */
void vi_pages_reap_zombies(vram_allocator *a, int wait);
/* The bytes the allocator may still reserve now: its limit less what it reserves, and no more
 * than the device says is free (not asked during a capture). Lock held. */
uint64_t vi_room(vram_allocator *a);
/* Unmaps whole free chunks of ready free blocks, outside pages [x0, x1) of region xr, until
 * `want` bytes are unmapped (UINT64_MAX: all); *blocked (if given) is set when blocks that are
 * not ready held some. Returns the bytes unmapped. */
uint64_t vi_pages_release(vram_allocator *a, uint64_t want, const vi_region *xr, uint64_t x0, uint64_t x1,
                          int *blocked);
/* Makes every page under [addr, addr+rsize) of r mapped for `stream`: by moving cached chunks
 * when reserved memory would exceed its budget, else by mapping new ones. */
vram_status vi_pages_ensure_mapped(vram_allocator *a, vi_region *r, uint64_t addr, uint64_t rsize, int *retried,
                                   int may_defer, vram_stream stream);

/* obtain.c: memory for a request that no cached block serves as it lies (malloc's retry ladder). */
vi_block *vi_obtain(vram_allocator *a, int pool, uint64_t rsize, vram_stream stream, vi_block *b, int *place,
                    int *mapped, int *retried, vram_status *err);

/* graph_pools.c: private pools, for malloc and free during and after captures. vi_graph_route
 * gives the index in graph_pools of the pool an allocation on `stream` belongs to, or -1. */
int vi_graph_route(vram_allocator *a, vram_stream stream);
vi_block *vi_graph_take(vram_allocator *a, int pool, uint64_t rsize, vram_stream stream);
void vi_graph_adopt(vram_allocator *a, int pool, vi_block *b);
int vi_graph_keep(vram_allocator *a, vi_block *b);
void vi_graph_pools_destroy(vram_allocator *a); /* frees the pools' bins */
/* ... and for graph_capture.c (the public begin/end/release API): slots, mode and the pools' bins */
int vi_graph_slot(vram_allocator *a, uint64_t id, int add);
int vi_graph_slot_open(vi_graph_pool *g, uint64_t id);
void vi_graph_slot_close(vi_graph_pool *g);
void vi_graph_mode_update(vram_allocator *a, int capturing);
void vi_graph_push(vi_graph_pool *g, vi_block *b);
void vi_graph_unlink(vi_graph_pool *g, vi_block *b);
vi_block *vi_graph_first(const vi_graph_pool *g);
vi_block *vi_graph_absorb(vram_allocator *a, vi_graph_pool *g, vi_block *x, vi_block *y, vi_block *listed);

/* allocator.c: the pending list, for graph_capture.c (begin and end of captures). */
void vi_process_pending(vram_allocator *a);        /* completes pending frees whose events are done */
void vi_pending_after_captures(vram_allocator *a); /* records the events of frees made during captures */

/* stats.c: statistics, history and the out-of-memory report. */
/* The statistics of `a` with PyTorch's meaning (the caller holds the lock). */
void vi_stats_export(const vram_allocator *a, vram_stats *out);
/* After an allocation in `pool` while blocks are pending: lifts the active peaks kept for that
 * case. */
void vi_stats_active_lift(vram_allocator *a, int pool);
/* Per-tag statistics of a block of a tag other than the solo one (a->tag_solo), allocated or
 * freed; the first such call writes the solo tag's statistics out. Out of line: the hot path
 * only compares tags. */
void vi_tag_stats_up(vram_allocator *a, vram_tag tag, uint64_t size, uint64_t requested);
void vi_tag_stats_down(vram_allocator *a, vram_tag tag, uint64_t size, uint64_t requested);
/* Records an event in the history ring (out of line: malloc and free only test a->history.ring). */
void vi_history_record(vram_allocator *a, vram_event_action action, uint64_t addr, uint64_t size, vram_stream stream,
                       vram_tag tag);
/* Puts history ring `ring` of `entries` events in place (lock held); returns the old ring. */
vram_event *vi_history_install(vram_allocator *a, vram_event *ring, uint32_t entries);
/* An out-of-memory answer (lock held): counted, in the history, the report written and set as the
 * error, `why` saying what failed. */
void vi_oom_fail(vram_allocator *a, size_t size, uint64_t rsize, vram_stream stream, vram_tag tag, const char *why);

/* While a CUDA graph is captured (begin_pool .. end_pool) the driver refuses event queries,
 * records and waits from the capturing thread (the capture breaks on them), and memory must not
 * go back to the device: the allocator then only allocates, as PyTorch's defers its event
 * processing during captures. Streams are polled and memory released again after end_pool. */
static inline int vi_capturing(const vram_allocator *a) { return a->graph_mode & GRAPH_CAPTURING; }

/* ---------------------------------------------------------------------------------------- */
/* Block structs come from slabs and are recycled through a free list (a cleared struct, or   */
/* NULL when the host is out of memory).                                                     */

static inline vi_block *vi_block_new(vram_allocator *a) {
    if (!a->structs.free) {
        vi_block_slab *slab = malloc(sizeof *slab);
        if (!slab) return NULL;
        slab->next = a->structs.slabs;
        a->structs.slabs = slab;
        for (int i = 1023; i >= 0; i--) {
            slab->blocks[i].fnext = a->structs.free;
            a->structs.free = &slab->blocks[i];
        }
    }
    vi_block *b = a->structs.free;
    a->structs.free = b->fnext;
    /* callers set addr, size, region and pool */
    b->prev = b->next = b->fprev = b->fnext = b->sprev = b->snext = b->cprev = b->cnext = NULL;
    b->uses = NULL;
    b->events = NULL;
    b->requested = b->free_seq = 0;
    b->stream = 0;
    b->tag = 0;
    b->graph = 0;
    b->nuses = b->nevents = 0;
    b->state = BLOCK_FREE;
    b->ready = b->in_cached = b->deferred = b->mapped_all = 0;
    b->bin = 0;
    return b;
}

static inline void vi_block_release(vram_allocator *a, vi_block *b) {
    if (b->uses) free(b->uses);
    if (b->events) free(b->events);
    b->fnext = a->structs.free;
    a->structs.free = b;
}

/* vi_block_release for a FREE block (merged away), which holds no uses or events: free_block
 * let them go (check.c verifies it), so none is asked for (6 instructions a large-pool pair). */
static inline void vi_block_release_free(vram_allocator *a, vi_block *b) {
    b->fnext = a->structs.free;
    a->structs.free = b;
}

/* Whether new memory comes by mapping pages (the pages model while expandable_segments is on),
 * rather than in new segments. */
static inline int vi_grows_pages(const vram_allocator *a) { return a->pages_model && a->cfg.expandable_segments; }

/* Whether a configuration defers frees (caching, no garbage collection threshold). */
static inline int vi_config_defers(const vram_alloc_config *cfg) {
    return cfg->caching && !(cfg->garbage_collection_threshold > 0);
}
static inline int vi_frees_deferred(const vram_allocator *a) { return vi_config_defers(&a->cfg); }

/* Derives the free path and the size classes from the caching options and graph_mode, whenever
 * either changes (creation, set_config and set_caching, graph_pools.c's mode updates): frees go
 * straight to `recent` while they are deferred and no private pool is in use; small requests
 * take size classes (held_pool) while frees are deferred. */
static inline void vi_free_path_update(vram_allocator *a) {
    a->free_fast = vi_frees_deferred(a) && !a->graph_mode;
    a->held_pool = vi_frees_deferred(a) && a->cfg.small_classes ? VRAM_POOL_SMALL : -1;
}

/* The pool of a rounded request size. */
static inline int vi_pool_of(uint64_t rsize) { return rsize <= VRAM_SMALL_LIMIT ? VRAM_POOL_SMALL : VRAM_POOL_LARGE; }

/* Bins: a request is rounded to 512 bytes and its bin found from the size's leading bits: one
 * bin per 512 bytes below 32 KiB, then 32 per power of two. */
static inline unsigned vi_bin_of(uint64_t size) {
    uint64_t u = size >> 9;
    if (u < 64) return (unsigned)u;
    unsigned fl = 63u - (unsigned)__builtin_clzll(u);
    unsigned sl = (unsigned)(u >> (fl - 5)) & 31u;
    unsigned bin = 64u + (fl - 6u) * 32u + sl;
    return bin < VRAM_NBINS ? bin : VRAM_NBINS - 1;
}

/* Puts free block b at the head of bin i, its size's (vi_bin_of: a caller that has the bin
 * passes it). The bitmaps change only when the bin was empty: a non-empty bin's bits are set. */
static inline void vi_bins_insert_at(vi_bins *f, vi_block *b, unsigned i) {
    vi_block *head = f->bins[i];
    b->bin = (uint16_t)i;
    b->fprev = NULL;
    b->fnext = head;
    f->bins[i] = b;
    if (head) {
        head->fprev = b;
    } else {
        f->bitmap[i >> 6] |= 1ull << (i & 63);
        f->summary |= 1ull << (i >> 6);
    }
}

static inline void vi_bins_insert(vi_bins *f, vi_block *b) { vi_bins_insert_at(f, b, vi_bin_of(b->size)); }

static inline void vi_bins_remove(vi_bins *f, vi_block *b) {
    unsigned i = b->bin;
    if (b->fprev) b->fprev->fnext = b->fnext;
    else f->bins[i] = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
    if (!f->bins[i]) {
        f->bitmap[i >> 6] &= ~(1ull << (i & 63));
        if (!f->bitmap[i >> 6]) f->summary &= ~(1ull << (i >> 6));
    }
}

/* The first non-empty bin at or after `i`, or VRAM_NBINS. */
static inline unsigned vi_bins_next(const vi_bins *f, unsigned i) {
    if (i >= VRAM_NBINS) return VRAM_NBINS;
    unsigned w = i >> 6;
    uint64_t bits = f->bitmap[w] & (~0ull << (i & 63));
    if (bits) return (w << 6) + (unsigned)__builtin_ctzll(bits);
    uint64_t sum = (w + 1 < 64) ? f->summary & (~0ull << (w + 1)) : 0;
    if (!sum) return VRAM_NBINS;
    w = (unsigned)__builtin_ctzll(sum);
    return (w << 6) + (unsigned)__builtin_ctzll(f->bitmap[w]);
}


/* Statistics in the hot path. Internally:
 *   - a vram_stat's `freed` holds the value `current` had at the last reset of accumulated
 *     counters, and the pool arrays' "all" entry does not keep `allocated` (it is the pools'
 *     sum);
 *   - `active` and `active_bytes` keep only that reset base and a `peak` lifted while blocks
 *     are pending: active is allocated plus pending (PENDING blocks: a->pending.blocks and
 *     a->pending.bytes), so its current value and its total follow from the allocation
 *     statistics, and its peak is the larger of allocation's peak and the peak kept here (active
 *     exceeds allocation only while blocks are pending, and rises only when a block is
 *     allocated).
 * vi_stats_export() turns this into PyTorch's meaning. A free then stores one value per
 * statistic it changes, and neither a malloc nor a free touches `active` unless blocks are
 * pending. */
static inline void vi_stat_up(vram_stat *s, int64_t x) {
    s->current += x;
    s->allocated += x;
    if (s->current > s->peak) s->peak = s->current;
}
static inline void vi_stat_down(vram_stat *s, int64_t x) { s->current -= x; }
static inline void vi_stat_pool_up(vram_stat *arr, int pool, int64_t x) {
    vi_stat_up(&arr[pool], x);
    arr[0].current += x;
    if (arr[0].current > arr[0].peak) arr[0].peak = arr[0].current;
}
static inline void vi_stat_pool_down(vram_stat *arr, int pool, int64_t x) {
    arr[pool].current -= x;
    arr[0].current -= x;
}

/* Page and region helpers shared with snapshot.c and check.c. */
static inline int vi_page_mapped(const vi_region *r, uint64_t page) {
    return (int)((r->mapped[page >> 6] >> (page & 63)) & 1);
}
static inline int vi_page_chunk(const vi_region *r, uint64_t page) {
    return (int)((r->chunk[page >> 6] >> (page & 63)) & 1);
}


/* The class of a small block size (see round_size in allocator.c): 512 B steps up to 4 KiB,
 * then four classes per power of two up to 1 MiB. With small_classes every small block's size is
 * its class's upper bound (requests round to it, and a split leaves no remainder under 512 B). */
static inline unsigned vi_small_class(uint64_t rsize) {
    if (rsize <= 4096) return (unsigned)(rsize >> 9) - 1;
    unsigned fl = 63u - (unsigned)__builtin_clzll(rsize - 1); /* 2^fl < rsize <= 2^(fl+1) */
    return 8u + (fl - 12u) * (1u << VRAM_CLASS_BITS) + (unsigned)((rsize - (1ull << fl) - 1) >> (fl - VRAM_CLASS_BITS));
}

static inline unsigned vi_recent_slot(uint64_t rsize) {
    return (unsigned)(((rsize >> 9) * 0x9E3779B97F4A7C15ull) >> 60) & (VRAM_RECENT_SLOTS - 1);
}

static inline void vi_history_add(vram_allocator *a, vram_event_action action, uint64_t addr, uint64_t size,
                               vram_stream stream, vram_tag tag) {
    if (__builtin_expect(a->history.ring != NULL, 0)) vi_history_record(a, action, addr, size, stream, tag);
}

/* ---------------------------------------------------------------------------------------- */
/* The cached-pages list: free blocks that may contain whole mapped pages.                   */

/* Blocks join the cached list at its tail and page moves take from its head: the pages freed
 * longest ago move first, while recently freed ones (which a periodic workload is likely to
 * need again where they are) stay. */
static inline void vi_cached_add(vram_allocator *a, vi_block *b) {
    if (b->in_cached) return;
    b->in_cached = 1;
    b->cnext = NULL;
    b->cprev = a->cached.tail;
    if (a->cached.tail) a->cached.tail->cnext = b;
    else a->cached.head = b;
    a->cached.tail = b;
}

static inline void vi_cached_remove(vram_allocator *a, vi_block *b) {
    if (!b->in_cached) return;
    if (b->cprev) b->cprev->cnext = b->cnext;
    else a->cached.head = b->cnext;
    if (b->cnext) b->cnext->cprev = b->cprev;
    else a->cached.tail = b->cprev;
    b->cprev = b->cnext = NULL;
    b->in_cached = 0;
}


/* The allocator's lock (lock.h): taken once per malloc and once per free; for a thread that
 * allocates alone, a plain store and load. */
static inline void vi_allocator_lock(vram_allocator *a) { vram_lock_acquire(&a->lock); }
static inline void vi_allocator_unlock(vram_allocator *a) { vram_lock_release(&a->lock); }

/* ---------------------------------------------------------------------------------------- */
/* Inline helpers over the indexes, shared by malloc, free and the files below them.         */

static inline void vi_bin_insert(vi_pool *p, vi_block *b) {
    vi_bins_insert(&p->free, b);
    p->nfree++;
}

static inline void vi_bin_remove(vi_pool *p, vi_block *b) {
    vi_bins_remove(&p->free, b);
    p->nfree--;
}

static inline unsigned vi_bin_next(const vi_pool *p, unsigned i) { return vi_bins_next(&p->free, i); }

/* The state of stream s, made if new (NULL when the table is full). The first stream seen is
 * asked first, inline: it is most programs' only one, and the free path asks on every merge. */
static inline vi_stream_state *vi_stream_of(vram_allocator *a, vram_stream s) {
    if (a->streams.n && a->streams.state[0].stream == s) return &a->streams.state[0];
    return vi_stream_find(a, s);
}

/* Takes b out of its owner's list st (its own links left as they were; no counts). */
static inline void vi_stream_list_unlink(vi_stream_state *st, vi_block *b) {
    if (b->sprev) b->sprev->snext = b->snext;
    else st->head = b->snext;
    if (b->snext) b->snext->sprev = b->sprev;
    else st->tail = b->sprev;
}

/* Links b into its owner's list st after the last block whose free_seq is at most b's, so the
 * list stays ordered by free_seq (almost always at the tail: a merged block can carry an older
 * free_seq). No counts. */
static inline void vi_stream_list_link(vi_stream_state *st, vi_block *b) {
    vi_block *after = st->tail;
    while (after && after->free_seq > b->free_seq) after = after->sprev;
    b->sprev = after;
    b->snext = after ? after->snext : st->head;
    if (b->snext) b->snext->sprev = b;
    else st->tail = b;
    if (after) after->snext = b;
    else st->head = b;
}

/* Puts free block b, which is in no index yet, in its owner's not-ready list. */
static inline void vi_stream_track(vram_allocator *a, vi_block *b) {
    if (b->ready || vi_stream_list_append(a, b) == 0) return;
    vi_stream_wait(a, b->stream); /* the stream table is full: wait for this stream's work instead */
    b->ready = 1;
}

/* Takes a free block out of every index it is in (bin, stream list, cached list). */
static inline void vi_free_unlink(vram_allocator *a, vi_block *b) {
    vi_bin_remove(&a->pools[b->pool], b);
    if (!b->ready) vi_stream_list_remove(a, b);
    vi_cached_remove(a, b);
}

/* Moves an indexed free block to the bin of its (changed) size. */
static inline __attribute__((always_inline)) void vi_rebin(vram_allocator *a, vi_block *b) {
    unsigned i = vi_bin_of(b->size);
    if (i == b->bin) return;
    vi_bins *f = &a->pools[b->pool].free;
    vi_bins_remove(f, b); /* the pool's count of free blocks stays */
    vi_bins_insert_at(f, b, i); /* the bin known: not computed again */
}

/* Makes b (out of the free structures, in the live map) a live block serving `size` bytes on
 * `stream` with `tag`, and counts it. Always inlined: it is most of malloc's fast path. */
static inline __attribute__((always_inline)) void vi_block_live(vram_allocator *a, vi_block *b, size_t size, vram_stream stream, vram_tag tag) {
    if (__builtin_expect((int)tag != a->tag_solo, 0)) vi_tag_stats_up(a, tag, b->size, size); /* first: may split */
    b->state = BLOCK_LIVE;
    b->ready = 0;
    b->stream = stream;
    b->requested = size;
    b->tag = tag;
    b->nuses = 0;
    int bpool = b->pool;
    vi_stat_pool_up(a->stats.allocation, bpool, 1);
    vi_stat_pool_up(a->stats.allocated_bytes, bpool, (int64_t)b->size);
    vi_stat_pool_up(a->stats.requested_bytes, bpool, (int64_t)size);
    if (__builtin_expect(a->pending.blocks[0] != 0, 0)) vi_stats_active_lift(a, bpool);
    if (b->size >= a->cfg.max_split_size) /* UINT64_MAX when unlimited: no block reaches it */
        vi_stat_up(&a->stats.oversize_allocations, 1);
    vi_history_add(a, VRAM_EVENT_ALLOC, b->addr, size, stream, tag);
}

#endif
