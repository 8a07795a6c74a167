/* graph_pools.c — private pools for CUDA graph captures (PyTorch's graph memory pools): what
 * malloc and free do with them. A captured graph replays the addresses its capture allocated, so
 * those blocks must serve nothing else while the graph exists (docs/allocator.md, "Private pools").
 *
 * Up to VRAM_GRAPH_POOLS slots, each with its own bins per size pool. During a capture,
 * vi_graph_route names the pool an allocation's stream belongs to; vi_graph_take gives the best
 * fit among the pool's free blocks of that stream (split when larger), and vi_graph_adopt makes
 * any other block allocated then the pool's. A pool block, freed, goes to the pool's bins
 * (vi_graph_keep: DEFER_GRAPH, merged only with free pool neighbours of its stream), or back to
 * the allocator once the pool is released. graph_mode and free_fast keep all this off the fast
 * paths. The public begin/end/release API is graph_capture.c's, which uses this file and
 * allocator.c (one way: nothing here calls allocator.c).
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
void vi_graph_mode_update(vram_allocator *a, int capturing) {
    int mode = capturing ? GRAPH_CAPTURING : 0;
    for (unsigned i = 0; i < VRAM_GRAPH_POOLS; i++)
        if (a->graph_pools[i].id) mode |= GRAPH_BLOCKS;
    a->graph_mode = mode;
    vi_free_path_update(a);
    if (capturing && a->recent.mask) vi_recent_flush(a, 0, 0, NULL);
}

/* The slot of pool `id`, or (with `add`) a free slot for it; -1 when there is none. */
int vi_graph_slot(vram_allocator *a, uint64_t id, int add) {
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
int vi_graph_route(vram_allocator *a, vram_stream stream) {
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
void vi_graph_adopt(vram_allocator *a, int pool, vi_block *b) {
    b->graph = (uint8_t)(pool + 1);
    a->graph_pools[pool].blocks++;
}

/* A pool's free blocks are in bins per size pool (vi_bins, newest first in each bin). */
void vi_graph_push(vi_graph_pool *g, vi_block *b) {
    vi_bins_insert(g->free[b->pool], b);
    g->nfree++;
}

void vi_graph_unlink(vi_graph_pool *g, vi_block *b) {
    vi_bins_remove(g->free[b->pool], b);
    g->nfree--;
}

/* The first free block of the pool (in bin order), or NULL. */
vi_block *vi_graph_first(const vi_graph_pool *g) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        unsigned i = g->free[p] ? vi_bins_next(g->free[p], 0) : VRAM_NBINS;
        if (i < VRAM_NBINS) return g->free[p]->bins[i];
    }
    return NULL;
}

/* Gives back slot g, which holds no block. */
void vi_graph_slot_close(vi_graph_pool *g) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        free(g->free[p]);
        g->free[p] = NULL;
    }
    g->id = 0;
}

/* Takes unused slot g into use for pool id, with its bins (0), or leaves it unused (-1: no host
 * memory). */
int vi_graph_slot_open(vi_graph_pool *g, uint64_t id) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        if (!(g->free[p] = calloc(1, sizeof *g->free[p]))) {
            vi_graph_slot_close(g);
            return -1;
        }
    g->id = id;
    return 0;
}

void vi_graph_pools_destroy(vram_allocator *a) {
    for (int i = 0; i < VRAM_GRAPH_POOLS; i++) vi_graph_slot_close(&a->graph_pools[i]);
}

/* Whether free pool blocks x and y (x just before y) may be one: same pool, same stream. */
static int graph_mergeable(const vi_block *x, const vi_block *y) {
    return x->state == BLOCK_FREE && y->state == BLOCK_FREE && x->deferred == DEFER_GRAPH &&
           y->deferred == DEFER_GRAPH && x->graph == y->graph && x->stream == y->stream;
}

/* A free block of pool `pool` (being captured into) that serves rsize on `stream`: the best fit
 * among those of rsize's size pool freed on that stream (the smallest, the newest of equals;
 * bins, smallest first), split when larger (the rest stays in the pool: a live small block
 * has its class size, which vi_held_take relies on once the pool is gone). Taken out of the
 * pool's free blocks, its live map entry kept. (Taking small blocks whole, unsplit, held far
 * more memory: docs/allocator-evidence.md §16.) */
vi_block *vi_graph_take(vram_allocator *a, int pool, uint64_t rsize, vram_stream stream) {
    vi_graph_pool *g = &a->graph_pools[pool];
    const vi_bins *f = g->free[vi_pool_of(rsize)];
    vi_block *best = NULL;
    for (unsigned i = vi_bins_next(f, vi_bin_of(rsize)); !best && i < VRAM_NBINS; i = vi_bins_next(f, i + 1))
        for (vi_block *b = f->bins[i]; b; b = b->fnext)
            if (b->stream == stream && b->size >= rsize && (!best || b->size < best->size)) best = b;
    if (!best) return NULL;
    vi_block *rest = best->size - rsize >= VRAM_BLOCK_ALIGN ? vi_block_new(a) : NULL;
    if (rest) {
        *rest = *best;
        rest->addr = best->addr + rsize;
        rest->size = best->size - rsize;
        rest->prev = best;
        if (vi_live_put(&a->live, rest) != 0) {
            vi_block_release(a, rest);
            rest = NULL;
        }
    }
    if (!rest && best->size != rsize && best->pool == VRAM_POOL_SMALL)
        return NULL; /* no host memory to split it, and a small block must keep its class size */
    vi_graph_unlink(g, best);
    best->deferred = DEFER_NONE;
    if (rest) { /* (without room for it the large block is handed out whole) */
        if (best->next) best->next->prev = rest;
        best->next = rest;
        best->size = rsize;
        g->blocks++;
        vi_graph_push(g, rest);
    }
    return best;
}

/* Merges free pool block y into x, the block just before it; `listed`, the one of them in the
 * pool's bins, leaves them (the caller lists the result). Returns x. */
vi_block *vi_graph_absorb(vram_allocator *a, vi_graph_pool *g, vi_block *x, vi_block *y, vi_block *listed) {
    vi_graph_unlink(g, listed);
    vi_live_del(&a->live, y->addr);
    x->size += y->size;
    x->next = y->next;
    if (y->next) y->next->prev = x;
    g->blocks--;
    vi_block_release(a, y);
    return x;
}

/* Free block b of a private pool: kept in the pool, merged with free pool neighbours it may be
 * one with (returns 1), or, the pool released, let go back to the allocator (returns 0). */
int vi_graph_keep(vram_allocator *a, vi_block *b) {
    vi_graph_pool *g = &a->graph_pools[b->graph - 1];
    if (!g->uses) {
        b->graph = 0;
        if (!--g->blocks) {
            vi_graph_slot_close(g);
            vi_graph_mode_update(a, vi_capturing(a));
        }
        return 0;
    }
    b->deferred = DEFER_GRAPH;
    vi_block *n = b->next, *p = b->prev;
    if (n && graph_mergeable(b, n)) vi_graph_absorb(a, g, b, n, n);
    if (p && graph_mergeable(p, b)) b = vi_graph_absorb(a, g, p, b, p);
    vi_graph_push(g, b);
    return 1;
}
