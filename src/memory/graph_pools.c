/* graph_pools.c — private pools for CUDA graph captures (PyTorch's graph memory pools).
 *
 * A captured graph replays the addresses its capture allocated, so those blocks must not serve
 * the rest of the program while the graph exists, even after the tensors that held them are
 * freed: PyTorch gives each capture a private pool (beginAllocateToPool / endAllocateToPool /
 * releasePool) and vram does the same. During a capture every allocation of the capture's
 * streams is adopted by the pool captured into (vram_graph_adopt: it may come from the
 * ordinary cache, which holds nothing in use); a block of a pool, freed, leaves the ordinary
 * structures for the pool's free list (vram_graph_keep: DEFER_GRAPH, still in the live map,
 * merged only with free pool neighbours of its stream, never unmapped), where only a later
 * allocation into the same pool on the same stream takes it (vram_graph_take, splitting a
 * larger block). When the last graph using a pool is released its free blocks return to the
 * allocator as fresh frees, and its live ones return when they are freed. The fast paths never
 * look at this: while a pool exists free_fast is off, and during a capture the `recent` slots
 * stay empty (graph_mode_update).
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
    a->free_fast = vram_frees_deferred(a) && !mode;
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

/* A pool's free list is doubly linked through fnext / fprev, newest first. */
static void graph_push(vram_graph_pool *g, vram_block *b) {
    b->fprev = NULL;
    b->fnext = g->free;
    if (g->free) g->free->fprev = b;
    g->free = b;
}

static void graph_unlink(vram_graph_pool *g, vram_block *b) {
    if (b->fprev) b->fprev->fnext = b->fnext;
    else g->free = b->fnext;
    if (b->fnext) b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

/* Whether free pool blocks x and y (x just before y) may be one: same pool, same stream, and
 * in the large pool (small blocks keep their class sizes, which held_take relies on). */
static int graph_mergeable(const vram_block *x, const vram_block *y) {
    return x->state == BLOCK_FREE && y->state == BLOCK_FREE && x->deferred == DEFER_GRAPH &&
           y->deferred == DEFER_GRAPH && x->graph == y->graph && x->stream == y->stream && x->pool == VRAM_POOL_LARGE;
}

/* A free block of pool `pool` (being captured into) that serves rsize on `stream`: the best fit among
 * the newest 64 of rsize's size pool freed on that stream, split when larger (large pool; the
 * rest stays in the pool); small-pool blocks are taken whole and only up to twice the size.
 * Taken out of the pool's free list, its live map entry kept. */
vram_block *vram_graph_take(vram_allocator *a, int pool, uint64_t rsize, vram_stream stream) {
    vram_graph_pool *g = &a->graph_pools[pool];
    vram_block *best = NULL;
    int n = 0;
    for (vram_block *b = g->free; b && n < 64; b = b->fnext, n++) {
        if (b->stream != stream || b->size < rsize || b->pool != vram_pool_of(rsize) ||
            (b->pool == VRAM_POOL_SMALL && b->size / 2 > rsize))
            continue;
        if (!best || b->size < best->size) {
            best = b;
            if (b->size == rsize) break;
        }
    }
    if (!best) return NULL;
    graph_unlink(g, best);
    best->deferred = DEFER_NONE;
    vram_block *rest = best->pool == VRAM_POOL_LARGE && best->size - rsize >= VRAM_BLOCK_ALIGN ? vram_block_new(a) : NULL;
    if (rest) {
        *rest = *best;
        rest->addr = best->addr + rsize;
        rest->size = best->size - rsize;
        rest->prev = best;
        rest->deferred = DEFER_GRAPH;
        if (live_put(&a->live, rest) != 0) { /* no room in the map: hand out the whole block */
            vram_block_release(a, rest);
            return best;
        }
        if (best->next) best->next->prev = rest;
        best->next = rest;
        best->size = rsize;
        g->blocks++;
        graph_push(g, rest);
    }
    return best;
}

/* Merges free pool block y into x, the block just before it; `listed`, the one of them on the
 * pool's free list, leaves it (the caller lists the result). Returns x. */
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
            g->id = 0;
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
    if (a->streams_seen != STREAMS_MANY) vram_streams_many(a); /* captures run on side streams */
    a->graph_pools[i].id = id;
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
        while (g->free) { /* back to the allocator, as frees made now on their streams */
            vram_block *b = g->free;
            graph_unlink(g, b);
            b->deferred = DEFER_NONE;
            b->graph = 0;
            g->blocks--;
            live_del(&a->live, b->addr);
            b->ready = !a->has_events;
            b->free_seq = ++a->free_seq;
            vram_free_insert(a, b, b->addr, b->size);
        }
        if (!g->blocks) g->id = 0;
        graph_mode_update(a, vram_capturing(a));
    }
    vram_allocator_unlock(a);
    return VRAM_OK;
}
