/* graph_pools.c — private pools for CUDA graph captures (PyTorch's graph memory pools).
 *
 * A captured graph replays the addresses its capture allocated, so those blocks must not serve
 * the rest of the program while the graph exists, even after the tensors that held them are
 * freed: PyTorch gives each capture a private pool (beginAllocateToPool / endAllocateToPool /
 * releasePool) and vram does the same. During a capture every allocation of the capture's
 * streams is adopted by the pool captured into (vram_graph_adopt: it may come from the
 * ordinary cache, which holds nothing in use); a block of a pool, freed, leaves the ordinary
 * structures for the pool's own bins (vram_graph_keep: DEFER_GRAPH, still in the live map,
 * merged only with free pool neighbours of its stream, never unmapped), where only a later
 * allocation into the same pool on the same stream takes it (vram_graph_take: best fit,
 * splitting a larger block). When the last graph using a pool is released its free blocks
 * return to the allocator as fresh frees, and its live ones return when they are freed. The
 * fast paths never look at this: while a pool exists free_fast is off, and during a capture the
 * `recent` slots stay empty (graph_mode_update).
 *
 * Which allocations a capture takes: those on streams the device says it records. Several
 * captures may be under way at once (other threads', as PyTorch allows): an allocation goes to
 * the capture its stream records, told apart by the device's capture id, which
 * vram_allocator_bind_pool learns once the capture has begun (PyTorch starts capturing only after
 * beginAllocateToPool); a stream of an unnamed capture goes to the newest capture not yet named,
 * and where the device cannot tell anything, to the newest capture (the safe side: memory a
 * graph may use is never handed to anything else). Allocations on other streams meanwhile come
 * from and return to the ordinary cache, as under PyTorch's allocator (vram_graph_route).
 * A begun pool may instead be routed to one stream (vram_allocator_route_pool: PyTorch's
 * beginAllocateCurrentStreamToPool, with which CUDA graph trees warm a graph up and copy its
 * inputs): every allocation on that stream is the pool's until end_pool, captured or not, and
 * the allocator behaves meanwhile as during a capture.
 *
 * Checkpoints (PyTorch's getCheckpointState / setCheckpointPoolState, with which CUDA graph trees
 * record again after their graphs replayed into blocks the allocator saw freed):
 * vram_allocator_pool_blocks lists a pool's allocated blocks, and vram_allocator_pool_recreate
 * makes a list of them allocated again, carving each freed one back out of the pool's free
 * blocks at its address (split before and after it, merged under it). It validates the whole
 * list and reserves what the splits need before it changes anything, so it does all or nothing.
 *
 * allocator.c's malloc_locked calls vram_graph_route, vram_graph_take and vram_graph_adopt
 * during a capture, and its free_block calls vram_graph_keep for a block of a pool; the rest of
 * this file is the public begin/end/release API. Block-level work (splitting, coalescing into
 * the bins, streams) stays allocator.c's.
 */
#include <string.h>

#include "allocator_internal.h"
#include "live_map.h"
#include "pages.h"

/* Sets graph_mode from `capturing` and the pool slots. While a pool is in use frees leave the
 * fast path (free_block looks for pool blocks); while a capture is under way the `recent` slots
 * are kept empty, so that malloc's fast path (which does not look at graph_mode) finds nothing
 * and every request reaches malloc_locked, which gives the pool's blocks first and adopts the
 * rest. */
static void graph_mode_update(vram_allocator *a, int capturing) {
    int mode = capturing ? GRAPH_CAPTURING : 0;
    for (unsigned i = 0; i < VRAM_GRAPH_POOLS; i++)
        if (a->graph_pools[i].id) mode |= GRAPH_BLOCKS;
    a->graph_mode = mode;
    vram_free_path_update(a);
    if (capturing && a->recent_mask) vram_recent_flush(a, 0, 0, NULL);
}

/* The slot of pool `id`, or (with `add`) a free slot for it; -1 when there is none. */
static int graph_slot(vram_allocator *a, uint64_t id, int add) {
    int empty = -1;
    for (int i = 0; i < VRAM_GRAPH_POOLS; i++) {
        if (a->graph_pools[i].id == id) return i;
        if (empty < 0 && !a->graph_pools[i].id) empty = i;
    }
    return add ? empty : -1;
}

/* The pool (index in graph_pools) an allocation on `stream`, made while captures are under way,
 * belongs to, or -1: the pool the stream is routed to (route_pool), whatever the device says;
 * else the capture the device says the stream records (the capture's own stream,
 * or a stream it forked onto), as PyTorch's allocator routes allocations by their stream's
 * capture. Not named by bind_pool, a capture takes the streams of captures no other was named
 * for, the newest first; where the device cannot tell (no stream_capture, or an error: the
 * legacy default stream cannot be asked during a capture), the allocation is the newest
 * capture's; a stream of a capture begun with no begin_pool allocates as usual. */
int vram_graph_route(vram_allocator *a, vram_stream stream) {
    int captures = 0; /* entries that are captures, not routed streams */
    for (int i = a->ncaptures - 1; i >= 0; i--) {
        if (a->captures[i].by_stream && a->captures[i].stream == stream) return (int)a->captures[i].pool;
        captures += !a->captures[i].by_stream;
    }
    if (!captures) return -1;
    uint64_t c = VRAM_CAPTURE_UNNAMED;
    const vram_device_ops *ops = a->dev->ops;
    if (!ops->stream_capture || ops->stream_capture(a->dev, stream, &c) != VRAM_OK) c = VRAM_CAPTURE_UNNAMED;
    if (!c) return -1;
    int unnamed = -1, newest = -1;
    for (int i = a->ncaptures - 1; i >= 0; i--) {
        if (a->captures[i].by_stream) continue;
        if (newest < 0) newest = i;
        if (c != VRAM_CAPTURE_UNNAMED && a->captures[i].id == c) return (int)a->captures[i].pool;
        if (!a->captures[i].id && unnamed < 0) unnamed = i;
    }
    if (unnamed >= 0) return (int)a->captures[unnamed].pool;
    return c == VRAM_CAPTURE_UNNAMED ? (int)a->captures[newest].pool : -1;
}

/* Counts live block b (not yet of any pool) into pool `pool`. */
void vram_graph_adopt(vram_allocator *a, int pool, vram_block *b) {
    b->graph = (uint8_t)(pool + 1);
    a->graph_pools[pool].blocks++;
}

/* A pool's free blocks are in bins per size pool (vram_bins, newest first in each bin). */
static void graph_push(vram_graph_pool *g, vram_block *b) {
    vram_bins_insert(g->free[b->pool], b);
    g->nfree++;
}

static void graph_unlink(vram_graph_pool *g, vram_block *b) {
    vram_bins_remove(g->free[b->pool], b);
    g->nfree--;
}

/* The first free block of the pool (in bin order), or NULL. */
static vram_block *graph_first(const vram_graph_pool *g) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        unsigned i = g->free[p] ? vram_bins_next(g->free[p], 0) : VRAM_NBINS;
        if (i < VRAM_NBINS) return g->free[p]->bins[i];
    }
    return NULL;
}

/* Gives back slot g, which holds no block. */
static void graph_slot_close(vram_graph_pool *g) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        free(g->free[p]);
        g->free[p] = NULL;
    }
    g->id = 0;
}

/* Takes unused slot g into use for pool id, with its bins (0), or leaves it unused (-1: no host
 * memory). */
static int graph_slot_open(vram_graph_pool *g, uint64_t id) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        if (!(g->free[p] = calloc(1, sizeof *g->free[p]))) {
            graph_slot_close(g);
            return -1;
        }
    g->id = id;
    return 0;
}

void vram_graph_pools_destroy(vram_allocator *a) {
    for (int i = 0; i < VRAM_GRAPH_POOLS; i++) graph_slot_close(&a->graph_pools[i]);
}

/* Whether free pool blocks x and y (x just before y) may be one: same pool, same stream. */
static int graph_mergeable(const vram_block *x, const vram_block *y) {
    return x->state == BLOCK_FREE && y->state == BLOCK_FREE && x->deferred == DEFER_GRAPH &&
           y->deferred == DEFER_GRAPH && x->graph == y->graph && x->stream == y->stream;
}

/* A free block of pool `pool` (being captured into) that serves rsize on `stream`: the best fit
 * among those of rsize's size pool freed on that stream (the smallest, the newest of equals;
 * bins, smallest first), split when larger (the rest stays in the pool: a live small block
 * has its class size, which held_take relies on once the pool is gone). Taken out of the
 * pool's free blocks, its live map entry kept. (Until 2026-12-04 only the newest 64 free blocks
 * were looked at and small ones were taken whole, up to twice the size, never split nor merged:
 * a workload replayed wholly in one pool, as reduce-overhead runs the warm-up of each of BERT's
 * new sequence lengths, reserved 1.56 x its peak requested memory, now 1.02; bench_pool_replay,
 * bench/results/2026-12-04-pool-placement.md.) */
vram_block *vram_graph_take(vram_allocator *a, int pool, uint64_t rsize, vram_stream stream) {
    vram_graph_pool *g = &a->graph_pools[pool];
    const vram_bins *f = g->free[vram_pool_of(rsize)];
    vram_block *best = NULL;
    for (unsigned i = vram_bins_next(f, vram_bin_of(rsize)); !best && i < VRAM_NBINS; i = vram_bins_next(f, i + 1))
        for (vram_block *b = f->bins[i]; b; b = b->fnext)
            if (b->stream == stream && b->size >= rsize && (!best || b->size < best->size)) best = b;
    if (!best) return NULL;
    vram_block *rest = best->size - rsize >= VRAM_BLOCK_ALIGN ? vram_block_new(a) : NULL;
    if (rest) {
        *rest = *best;
        rest->addr = best->addr + rsize;
        rest->size = best->size - rsize;
        rest->prev = best;
        if (live_put(&a->live, rest) != 0) {
            vram_block_release(a, rest);
            rest = NULL;
        }
    }
    if (!rest && best->size != rsize && best->pool == VRAM_POOL_SMALL)
        return NULL; /* no host memory to split it, and a small block must keep its class size */
    graph_unlink(g, best);
    best->deferred = DEFER_NONE;
    if (rest) { /* (without room for it the large block is handed out whole) */
        if (best->next) best->next->prev = rest;
        best->next = rest;
        best->size = rsize;
        g->blocks++;
        graph_push(g, rest);
    }
    return best;
}

/* Merges free pool block y into x, the block just before it; `listed`, the one of them in the
 * pool's bins, leaves them (the caller lists the result). Returns x. */
static vram_block *graph_absorb(vram_allocator *a, vram_graph_pool *g, vram_block *x, vram_block *y, vram_block *listed) {
    graph_unlink(g, listed);
    live_del(&a->live, y->addr);
    x->size += y->size;
    x->next = y->next;
    if (y->next) y->next->prev = x;
    g->blocks--;
    vram_block_release(a, y);
    return x;
}

/* Free block b of a private pool: kept in the pool, merged with free pool neighbours it may be
 * one with (returns 1), or, the pool released, let go back to the allocator (returns 0). */
int vram_graph_keep(vram_allocator *a, vram_block *b) {
    vram_graph_pool *g = &a->graph_pools[b->graph - 1];
    if (!g->uses) {
        b->graph = 0;
        if (!--g->blocks) {
            graph_slot_close(g);
            graph_mode_update(a, vram_capturing(a));
        }
        return 0;
    }
    b->deferred = DEFER_GRAPH;
    vram_block *n = b->next, *p = b->prev;
    if (n && graph_mergeable(b, n)) graph_absorb(a, g, b, n, n);
    if (p && graph_mergeable(p, b)) b = graph_absorb(a, g, p, b, p);
    graph_push(g, b);
    return 1;
}

vram_status vram_allocator_begin_pool(vram_allocator *a, uint64_t id) {
    if (!a || !id) return vram_error(VRAM_ERR_INVALID_ARG, "begin_pool: %s", a ? "pool id 0" : "null allocator");
    vram_allocator_lock(a);
    if (a->ncaptures == VRAM_CAPTURES) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "begin_pool %llu: %d captures are under way on %s (the most at once)",
                          (unsigned long long)id, VRAM_CAPTURES, a->dev->name);
    }
    int i = graph_slot(a, id, 1);
    if (i < 0) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "begin_pool %llu: %d private pools are in use on %s (release a graph first)",
                          (unsigned long long)id, VRAM_GRAPH_POOLS, a->dev->name);
    }
    if (!vram_capturing(a)) {
        /* what needs events is done now, before the capture starts (none may be used during it) */
        if (a->pending_head) vram_process_pending(a);
        if (a->not_ready_count) vram_poll_streams(a, 0);
        vram_pages_reap_zombies(a, 1);
    }
    if (!a->graph_pools[i].id && graph_slot_open(&a->graph_pools[i], id) != 0) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_HOST_MEMORY, "begin_pool %llu: no host memory for the pool's bins",
                          (unsigned long long)id);
    }
    if (a->streams_seen != STREAMS_MANY) vram_streams_many(a); /* captures run on side streams */
    a->graph_pools[i].uses++;
    a->captures[a->ncaptures++] = (vram_capture){.pool = (unsigned)i, .id = 0};
    graph_mode_update(a, 1);
    vram_allocator_unlock(a);
    return VRAM_OK;
}

/* The newest capture under way into pool `id` (with `unnamed`, the newest neither named nor
 * routed to a stream), or -1. */
static int capture_of(const vram_allocator *a, uint64_t id, int unnamed) {
    for (int k = a->ncaptures - 1; k >= 0; k--)
        if (a->graph_pools[a->captures[k].pool].id == id &&
            !(unnamed && (a->captures[k].id || a->captures[k].by_stream)))
            return k;
    return -1;
}

vram_status vram_allocator_bind_pool(vram_allocator *a, uint64_t id, vram_stream stream) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "bind_pool: null allocator");
    vram_allocator_lock(a);
    int k = id ? capture_of(a, id, 1) : -1;
    uint64_t c = 0;
    const vram_device_ops *ops = a->dev->ops;
    vram_status st = VRAM_OK;
    if (k < 0)
        st = vram_error(VRAM_ERR_STATE, "bind_pool %llu: no capture into that pool is under way%s", (unsigned long long)id,
                        id && capture_of(a, id, 0) >= 0 ? " that is not named already" : "");
    else if (!ops->stream_capture || ops->stream_capture(a->dev, stream, &c) != VRAM_OK || c == VRAM_CAPTURE_UNNAMED)
        st = vram_error(VRAM_ERR_UNSUPPORTED, "bind_pool %llu: %s cannot tell which capture a stream records",
                        (unsigned long long)id, a->dev->name);
    else if (!c)
        st = vram_error(VRAM_ERR_STATE, "bind_pool %llu: stream %#llx is not capturing", (unsigned long long)id,
                        (unsigned long long)stream);
    for (int j = 0; st == VRAM_OK && j < a->ncaptures; j++)
        if (a->captures[j].id == c)
            st = vram_error(VRAM_ERR_STATE, "bind_pool %llu: that capture allocates into pool %llu already",
                            (unsigned long long)id, (unsigned long long)a->graph_pools[a->captures[j].pool].id);
    if (st == VRAM_OK) a->captures[k].id = c;
    vram_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_route_pool(vram_allocator *a, uint64_t id, vram_stream stream) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "route_pool: null allocator");
    vram_allocator_lock(a);
    int k = id ? capture_of(a, id, 1) : -1;
    vram_status st = VRAM_OK;
    if (k < 0)
        st = vram_error(VRAM_ERR_STATE, "route_pool %llu: no begun allocation into that pool is left to route%s",
                        (unsigned long long)id, id && capture_of(a, id, 0) >= 0 ? " (named or routed already)" : "");
    for (int j = 0; st == VRAM_OK && j < a->ncaptures; j++)
        if (a->captures[j].by_stream && a->captures[j].stream == stream)
            st = vram_error(VRAM_ERR_STATE, "route_pool %llu: stream %#llx allocates into pool %llu already",
                            (unsigned long long)id, (unsigned long long)stream,
                            (unsigned long long)a->graph_pools[a->captures[j].pool].id);
    if (st == VRAM_OK) {
        a->captures[k].by_stream = 1;
        a->captures[k].stream = stream;
    }
    vram_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_end_pool(vram_allocator *a, uint64_t id) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "end_pool: null allocator");
    vram_allocator_lock(a);
    int k = -1; /* the oldest capture into the pool ends, as in PyTorch's endAllocateToPool */
    for (int j = a->ncaptures - 1; j >= 0; j--)
        if (a->graph_pools[a->captures[j].pool].id == id) k = j;
    if (!id || k < 0) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "end_pool %llu: no capture into that pool is under way", (unsigned long long)id);
    }
    memmove(&a->captures[k], &a->captures[k + 1], (size_t)(a->ncaptures - k - 1) * sizeof a->captures[0]);
    a->ncaptures--;
    graph_mode_update(a, a->ncaptures > 0);
    if (!a->ncaptures && a->pending_head) vram_pending_after_captures(a); /* frees made during the captures */
    vram_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_release_pool(vram_allocator *a, uint64_t id) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "release_pool: null allocator");
    vram_allocator_lock(a);
    int i = id ? graph_slot(a, id, 0) : -1;
    if (i < 0 || !a->graph_pools[i].uses) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "release_pool %llu: no graph uses that pool", (unsigned long long)id);
    }
    vram_graph_pool *g = &a->graph_pools[i];
    int capturing = 0; /* captures into it under way: their graphs are not released yet */
    for (int k = 0; k < a->ncaptures; k++) capturing += a->captures[k].pool == (unsigned)i;
    if ((int)g->uses <= capturing) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "release_pool %llu: its capture is under way", (unsigned long long)id);
    }
    if (!--g->uses) {
        for (vram_block *b; (b = graph_first(g)) != NULL;) { /* back to the allocator, as frees made now on their streams */
            graph_unlink(g, b);
            b->deferred = DEFER_NONE;
            b->graph = 0;
            g->blocks--;
            live_del(&a->live, b->addr);
            b->ready = !a->has_events;
            b->free_seq = ++a->free_seq;
            vram_free_insert(a, b, b->addr, b->size);
        }
        if (!g->blocks) graph_slot_close(g);
        graph_mode_update(a, vram_capturing(a));
    }
    vram_allocator_unlock(a);
    return VRAM_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Checkpoints: a pool's allocated blocks listed, and made so again.                          */

vram_status vram_allocator_pool_blocks(vram_allocator *a, uint64_t id, vram_pool_block *out, size_t cap, size_t *n) {
    if (!a || !n || (cap && !out)) return vram_error(VRAM_ERR_INVALID_ARG, "pool_blocks: null argument");
    *n = 0;
    vram_allocator_lock(a);
    int i = id ? graph_slot(a, id, 0) : -1; /* (a released pool is listed while it has blocks) */
    if (i < 0) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "pool_blocks %llu: no graph uses that pool", (unsigned long long)id);
    }
    size_t k = 0;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (const vram_region *r = a->pools[p].regions; r; r = r->next)
            for (const vram_block *b = r->first; b; b = b->next) {
                if (b->graph != i + 1 || b->state != BLOCK_LIVE) continue;
                if (k < cap)
                    out[k] = (vram_pool_block){b->addr, b->size, b->requested, b->stream, b->tag};
                k++;
            }
    *n = k;
    vram_allocator_unlock(a);
    return VRAM_OK;
}

/* A listed block's address and its index in the caller's list, to sort the list by address. */
typedef struct listed_block {
    uint64_t addr;
    size_t at;
} listed_block;

static int by_address(const void *x, const void *y) {
    uint64_t ax = ((const listed_block *)x)->addr, ay = ((const listed_block *)y)->addr;
    return ax < ay ? -1 : ax > ay;
}

/* The free block of pool slot i that holds address addr, or NULL (a walk of its bins). */
static vram_block *pool_free_at(vram_graph_pool *g, uint64_t addr) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (unsigned i = vram_bins_next(g->free[p], 0); i < VRAM_NBINS; i = vram_bins_next(g->free[p], i + 1))
            for (vram_block *b = g->free[p]->bins[i]; b; b = b->fnext)
                if (b->addr <= addr && addr - b->addr < b->size) return b;
    return NULL;
}

/* How many block structs carving [addr, addr + size) out of the pool's free blocks needs (0-2),
 * or -1 when the range is not wholly free memory of pool slot i. */
static int carve_needs(vram_graph_pool *g, int i, uint64_t addr, uint64_t size) {
    vram_block *b = pool_free_at(g, addr);
    if (!b) return -1;
    uint64_t end = b->addr + b->size;
    for (vram_block *x = b; end < addr + size; end += x->size) {
        x = x->next;
        if (!x || x->state != BLOCK_FREE || x->deferred != DEFER_GRAPH || x->graph != i + 1) return -1;
    }
    return (b->addr < addr) + (end > addr + size);
}

/* Splits free pool block b at `at` (inside it): the part from `at` on becomes block r (a struct
 * the caller reserved), free in the same pool. Returns r. */
static vram_block *pool_split(vram_allocator *a, vram_graph_pool *g, vram_block *b, uint64_t at, vram_block *r) {
    *r = *b;
    r->addr = at;
    r->size = b->addr + b->size - at;
    r->prev = b;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = at - b->addr;
    live_put(&a->live, r); /* room reserved by the caller */
    g->blocks++;
    graph_push(g, r);
    return r;
}

/* Carves listed block w out of pool slot i's free memory (carve_needs said how) and makes it
 * allocated; `spare` holds the structs reserved for splits. */
static void pool_carve(vram_allocator *a, int i, const vram_pool_block *w, vram_block **spare) {
    vram_graph_pool *g = &a->graph_pools[i];
    vram_block *b = pool_free_at(g, w->addr);
    if (b->addr < w->addr) {
        vram_block *r = *spare;
        *spare = r->fnext;
        b = pool_split(a, g, b, w->addr, r);
    }
    while (b->size < w->size) {
        uint8_t mapped = b->next->mapped_all;
        graph_absorb(a, g, b, b->next, b->next);
        b->mapped_all &= mapped;
    }
    if (b->size > w->size) {
        vram_block *r = *spare;
        *spare = r->fnext;
        pool_split(a, g, b, w->addr + w->size, r);
    }
    graph_unlink(g, b);
    b->deferred = DEFER_NONE;
    vram_block_live(a, b, w->requested, w->stream, w->tag);
}

vram_status vram_allocator_pool_recreate(vram_allocator *a, uint64_t id, const vram_pool_block *blocks, size_t n,
                                         unsigned char *created) {
    if (!a || (n && !blocks)) return vram_error(VRAM_ERR_INVALID_ARG, "pool_recreate: null argument");
    listed_block *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return vram_error(VRAM_ERR_HOST_MEMORY, "pool_recreate: no host memory for %zu blocks", n);
    for (size_t k = 0; k < n; k++) order[k] = (listed_block){blocks[k].addr, k};
    qsort(order, n, sizeof *order, by_address);
    vram_allocator_lock(a);
    vram_status st = VRAM_OK;
    int i = id ? graph_slot(a, id, 0) : -1;
    for (size_t k = 0; k < n && st == VRAM_OK; k++) {
        const vram_pool_block *w = &blocks[order[k].at];
        if (!w->size || w->addr % VRAM_BLOCK_ALIGN || w->size % VRAM_BLOCK_ALIGN || w->requested > w->size ||
            w->tag >= VRAM_TAG_MAX || w->addr + w->size < w->addr)
            st = vram_error(VRAM_ERR_INVALID_ARG, "pool_recreate %llu: block at %#llx (%llu bytes, %llu asked for) is "
                            "not a block", (unsigned long long)id, (unsigned long long)w->addr,
                            (unsigned long long)w->size, (unsigned long long)w->requested);
        else if (k + 1 < n && blocks[order[k + 1].at].addr < w->addr + w->size)
            st = vram_error(VRAM_ERR_INVALID_ARG, "pool_recreate %llu: blocks at %#llx and %#llx overlap",
                            (unsigned long long)id, (unsigned long long)w->addr,
                            (unsigned long long)blocks[order[k + 1].at].addr);
    }
    if (st == VRAM_OK && (i < 0 || !a->graph_pools[i].uses))
        st = vram_error(VRAM_ERR_NOT_FOUND, "pool_recreate %llu: no graph uses that pool", (unsigned long long)id);
    for (int c = 0; st == VRAM_OK && c < a->ncaptures; c++)
        if (a->captures[c].pool == (unsigned)i)
            st = vram_error(VRAM_ERR_STATE, "pool_recreate %llu: a capture or routed stream allocates into the pool",
                            (unsigned long long)id);
    if (st == VRAM_OK && a->pending_head && !vram_capturing(a)) vram_process_pending(a);
    /* every allocated (or pending) block of the pool must be listed as it is */
    for (int p = VRAM_POOL_SMALL; st == VRAM_OK && p <= VRAM_POOL_LARGE; p++)
        for (const vram_region *r = a->pools[p].regions; r && st == VRAM_OK; r = r->next)
            for (const vram_block *b = r->first; b && st == VRAM_OK; b = b->next) {
                if (b->graph != i + 1 || b->state == BLOCK_FREE) continue;
                size_t lo = 0, hi = n; /* the first listed block at or after b */
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (blocks[order[mid].at].addr < b->addr) lo = mid + 1;
                    else hi = mid;
                }
                if (b->state == BLOCK_PENDING)
                    st = vram_error(VRAM_ERR_STATE, "pool_recreate %llu: the pool's block at %#llx was freed and waits "
                                    "for other streams' work", (unsigned long long)id, (unsigned long long)b->addr);
                else if (lo == n || blocks[order[lo].at].addr != b->addr || blocks[order[lo].at].size != b->size)
                    st = vram_error(VRAM_ERR_STATE, "pool_recreate %llu: the pool's block at %#llx (%llu bytes) is "
                                    "allocated but not in the checkpoint (free it first)", (unsigned long long)id,
                                    (unsigned long long)b->addr, (unsigned long long)b->size);
            }
    /* every other listed block must lie in the pool's free memory */
    size_t structs = 0;
    for (size_t k = 0; k < n && st == VRAM_OK; k++) {
        const vram_pool_block *w = &blocks[order[k].at];
        vram_block *b = vram_live_get(&a->live, w->addr);
        if (b && b->state == BLOCK_LIVE && b->graph == i + 1) continue; /* kept (its size checked above) */
        int need = carve_needs(&a->graph_pools[i], i, w->addr, w->size);
        if (need < 0)
            st = vram_error(VRAM_ERR_STATE, "pool_recreate %llu: the block at %#llx (%llu bytes) is no longer free "
                            "memory of the pool", (unsigned long long)id, (unsigned long long)w->addr,
                            (unsigned long long)w->size);
        structs += (size_t)(need > 0 ? need : 0);
    }
    /* room for the splits, reserved first so that nothing below can fail half-way */
    vram_block *spare = NULL;
    size_t have = 0;
    while (st == VRAM_OK && have < structs) {
        vram_block *s = vram_block_new(a);
        if (!s) break;
        s->fnext = spare;
        spare = s;
        have++;
    }
    while (st == VRAM_OK && (a->live.count + structs + 1) * 2 > a->live.cap)
        if (live_grow(&a->live) != 0) break;
    if (st == VRAM_OK && (have < structs || (a->live.count + structs + 1) * 2 > a->live.cap))
        st = vram_error(VRAM_ERR_HOST_MEMORY, "pool_recreate %llu: no host memory for %zu blocks", (unsigned long long)id,
                        structs);
    for (size_t k = 0; k < n && st == VRAM_OK; k++) {
        const vram_pool_block *w = &blocks[order[k].at];
        vram_block *b = vram_live_get(&a->live, w->addr);
        int keep = b && b->state == BLOCK_LIVE && b->graph == i + 1;
        if (!keep) pool_carve(a, i, w, &spare);
        if (created) created[order[k].at] = (unsigned char)!keep;
    }
    while (spare) {
        vram_block *s = spare;
        spare = s->fnext;
        vram_block_release(a, s);
    }
    vram_allocator_unlock(a);
    free(order);
    return st;
}
