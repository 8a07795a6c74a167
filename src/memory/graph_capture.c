/* graph_capture.c — the public API of private pools (include/vram/alloc.h): begin_pool,
 * bind_pool, route_pool, end_pool and release_pool around CUDA graph captures, and the
 * checkpoints pool_blocks / pool_recreate of CUDA graph trees.
 *
 * The pools' own state and what malloc and free do with it are graph_pools.c's; this file keeps
 * the list of captures under way (vram_allocator.captures) and does what must happen around
 * them: pending frees and stream events before a capture starts (none may be used during it)
 * and after the last one ends (allocator.c's pending list). A checkpoint's recreate validates
 * the whole list and reserves what its splits need before it changes anything.
 */
#include <stdlib.h>
#include <string.h>

#include "allocator_internal.h"
#include "live_map.h"

vram_status vram_allocator_begin_pool(vram_allocator *a, uint64_t id) {
    if (!a || !id) return vram_error(VRAM_ERR_INVALID_ARG, "begin_pool: %s", a ? "pool id 0" : "null allocator");
    vi_allocator_lock(a);
    if (a->ncaptures == VRAM_CAPTURES) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "begin_pool %llu: %d captures are under way on %s (the most at once)",
                          (unsigned long long)id, VRAM_CAPTURES, a->dev->name);
    }
    int i = vi_graph_slot(a, id, 1);
    if (i < 0) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "begin_pool %llu: %d private pools are in use on %s (release a graph first)",
                          (unsigned long long)id, VRAM_GRAPH_POOLS, a->dev->name);
    }
    if (!vi_capturing(a)) {
        /* what needs events is done now, before the capture starts (none may be used during it) */
        if (a->pending.head) vi_process_pending(a);
        if (a->streams.not_ready) vi_poll_streams(a, 0);
        vi_pages_reap_zombies(a, 1);
    }
    if (!a->graph_pools[i].id && vi_graph_slot_open(&a->graph_pools[i], id) != 0) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_HOST_MEMORY, "begin_pool %llu: no host memory for the pool's bins",
                          (unsigned long long)id);
    }
    if (a->streams_seen != STREAMS_MANY) vi_streams_many(a); /* captures run on side streams */
    a->graph_pools[i].uses++;
    a->captures[a->ncaptures++] = (vi_capture){.pool = (unsigned)i, .id = 0};
    vi_graph_mode_update(a, 1);
    vi_allocator_unlock(a);
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
    vi_allocator_lock(a);
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
    vi_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_route_pool(vram_allocator *a, uint64_t id, vram_stream stream) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "route_pool: null allocator");
    vi_allocator_lock(a);
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
    vi_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_end_pool(vram_allocator *a, uint64_t id) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "end_pool: null allocator");
    vi_allocator_lock(a);
    int k = -1; /* the oldest capture into the pool ends, as in PyTorch's endAllocateToPool */
    for (int j = a->ncaptures - 1; j >= 0; j--)
        if (a->graph_pools[a->captures[j].pool].id == id) k = j;
    if (!id || k < 0) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "end_pool %llu: no capture into that pool is under way", (unsigned long long)id);
    }
    memmove(&a->captures[k], &a->captures[k + 1], (size_t)(a->ncaptures - k - 1) * sizeof a->captures[0]);
    a->ncaptures--;
    vi_graph_mode_update(a, a->ncaptures > 0);
    if (!a->ncaptures && a->pending.head) vi_pending_after_captures(a); /* frees made during the captures */
    vi_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_release_pool(vram_allocator *a, uint64_t id) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "release_pool: null allocator");
    vi_allocator_lock(a);
    int i = id ? vi_graph_slot(a, id, 0) : -1;
    if (i < 0 || !a->graph_pools[i].uses) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "release_pool %llu: no graph uses that pool", (unsigned long long)id);
    }
    vi_graph_pool *g = &a->graph_pools[i];
    int capturing = 0; /* captures into it under way: their graphs are not released yet */
    for (int k = 0; k < a->ncaptures; k++) capturing += a->captures[k].pool == (unsigned)i;
    if ((int)g->uses <= capturing) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "release_pool %llu: its capture is under way", (unsigned long long)id);
    }
    if (!--g->uses) {
        for (vi_block *b; (b = vi_graph_first(g)) != NULL;) { /* back to the allocator, as frees made now on their streams */
            vi_graph_unlink(g, b);
            b->deferred = DEFER_NONE;
            b->graph = 0;
            g->blocks--;
            vi_live_del(&a->live, b->addr);
            b->ready = !a->has_events;
            b->free_seq = ++a->streams.free_seq;
            vi_free_insert(a, b, b->addr, b->size);
        }
        if (!g->blocks) vi_graph_slot_close(g);
        vi_graph_mode_update(a, vi_capturing(a));
    }
    vi_allocator_unlock(a);
    return VRAM_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Checkpoints: a pool's allocated blocks listed, and made so again.                          */

vram_status vram_allocator_pool_blocks(vram_allocator *a, uint64_t id, vram_pool_block *out, size_t cap, size_t *n) {
    if (!a || !n || (cap && !out)) return vram_error(VRAM_ERR_INVALID_ARG, "pool_blocks: null argument");
    *n = 0;
    vi_allocator_lock(a);
    int i = id ? vi_graph_slot(a, id, 0) : -1; /* (a released pool is listed while it has blocks) */
    if (i < 0) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "pool_blocks %llu: no graph uses that pool", (unsigned long long)id);
    }
    size_t k = 0;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (const vi_region *r = a->pools[p].regions; r; r = r->next)
            for (const vi_block *b = r->first; b; b = b->next) {
                if (b->graph != i + 1 || b->state != BLOCK_LIVE) continue;
                if (k < cap)
                    out[k] = (vram_pool_block){b->addr, b->size, b->requested, b->stream, b->tag};
                k++;
            }
    *n = k;
    vi_allocator_unlock(a);
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
static vi_block *pool_free_at(vi_graph_pool *g, uint64_t addr) {
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (unsigned i = vi_bins_next(g->free[p], 0); i < VRAM_NBINS; i = vi_bins_next(g->free[p], i + 1))
            for (vi_block *b = g->free[p]->bins[i]; b; b = b->fnext)
                if (b->addr <= addr && addr - b->addr < b->size) return b;
    return NULL;
}

/* How many block structs carving [addr, addr + size) out of the pool's free blocks needs (0-2),
 * or -1 when the range is not wholly free memory of pool slot i. */
static int carve_needs(vi_graph_pool *g, int i, uint64_t addr, uint64_t size) {
    vi_block *b = pool_free_at(g, addr);
    if (!b) return -1;
    uint64_t end = b->addr + b->size;
    for (vi_block *x = b; end < addr + size; end += x->size) {
        x = x->next;
        if (!x || x->state != BLOCK_FREE || x->deferred != DEFER_GRAPH || x->graph != i + 1) return -1;
    }
    return (b->addr < addr) + (end > addr + size);
}

/* Splits free pool block b at `at` (inside it): the part from `at` on becomes block r (a struct
 * the caller reserved), free in the same pool. Returns r. */
static vi_block *pool_split(vram_allocator *a, vi_graph_pool *g, vi_block *b, uint64_t at, vi_block *r) {
    *r = *b;
    r->addr = at;
    r->size = b->addr + b->size - at;
    r->prev = b;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = at - b->addr;
    vi_live_put(&a->live, r); /* room reserved by the caller */
    g->blocks++;
    vi_graph_push(g, r);
    return r;
}

/* Carves listed block w out of pool slot i's free memory (carve_needs said how) and makes it
 * allocated; `spare` holds the structs reserved for splits. */
static void pool_carve(vram_allocator *a, int i, const vram_pool_block *w, vi_block **spare) {
    vi_graph_pool *g = &a->graph_pools[i];
    vi_block *b = pool_free_at(g, w->addr);
    if (b->addr < w->addr) {
        vi_block *r = *spare;
        *spare = r->fnext;
        b = pool_split(a, g, b, w->addr, r);
    }
    while (b->size < w->size) {
        uint8_t mapped = b->next->mapped_all;
        vi_graph_absorb(a, g, b, b->next, b->next);
        b->mapped_all &= mapped;
    }
    if (b->size > w->size) {
        vi_block *r = *spare;
        *spare = r->fnext;
        pool_split(a, g, b, w->addr + w->size, r);
    }
    vi_graph_unlink(g, b);
    b->deferred = DEFER_NONE;
    vi_block_live(a, b, w->requested, w->stream, w->tag);
}

vram_status vram_allocator_pool_recreate(vram_allocator *a, uint64_t id, const vram_pool_block *blocks, size_t n,
                                         unsigned char *created) {
    if (!a || (n && !blocks)) return vram_error(VRAM_ERR_INVALID_ARG, "pool_recreate: null argument");
    listed_block *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return vram_error(VRAM_ERR_HOST_MEMORY, "pool_recreate: no host memory for %zu blocks", n);
    for (size_t k = 0; k < n; k++) order[k] = (listed_block){blocks[k].addr, k};
    qsort(order, n, sizeof *order, by_address);
    vi_allocator_lock(a);
    vram_status st = VRAM_OK;
    int i = id ? vi_graph_slot(a, id, 0) : -1;
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
    if (st == VRAM_OK && a->pending.head && !vi_capturing(a)) vi_process_pending(a);
    /* every allocated (or pending) block of the pool must be listed as it is */
    for (int p = VRAM_POOL_SMALL; st == VRAM_OK && p <= VRAM_POOL_LARGE; p++)
        for (const vi_region *r = a->pools[p].regions; r && st == VRAM_OK; r = r->next)
            for (const vi_block *b = r->first; b && st == VRAM_OK; b = b->next) {
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
        vi_block *b = vi_live_get(&a->live, w->addr);
        if (b && b->state == BLOCK_LIVE && b->graph == i + 1) continue; /* kept (its size checked above) */
        int need = carve_needs(&a->graph_pools[i], i, w->addr, w->size);
        if (need < 0)
            st = vram_error(VRAM_ERR_STATE, "pool_recreate %llu: the block at %#llx (%llu bytes) is no longer free "
                            "memory of the pool", (unsigned long long)id, (unsigned long long)w->addr,
                            (unsigned long long)w->size);
        structs += (size_t)(need > 0 ? need : 0);
    }
    /* room for the splits, reserved first so that nothing below can fail half-way */
    vi_block *spare = NULL;
    size_t have = 0;
    while (st == VRAM_OK && have < structs) {
        vi_block *s = vi_block_new(a);
        if (!s) break;
        s->fnext = spare;
        spare = s;
        have++;
    }
    while (st == VRAM_OK && (a->live.count + structs + 1) * 2 > a->live.cap)
        if (vi_live_grow(&a->live) != 0) break;
    if (st == VRAM_OK && (have < structs || (a->live.count + structs + 1) * 2 > a->live.cap))
        st = vram_error(VRAM_ERR_HOST_MEMORY, "pool_recreate %llu: no host memory for %zu blocks", (unsigned long long)id,
                        structs);
    for (size_t k = 0; k < n && st == VRAM_OK; k++) {
        const vram_pool_block *w = &blocks[order[k].at];
        vi_block *b = vi_live_get(&a->live, w->addr);
        int keep = b && b->state == BLOCK_LIVE && b->graph == i + 1;
        if (!keep) pool_carve(a, i, w, &spare);
        if (created) created[order[k].at] = (unsigned char)!keep;
    }
    while (spare) {
        vi_block *s = spare;
        spare = s->fnext;
        vi_block_release(a, s);
    }
    vi_allocator_unlock(a);
    free(order);
    return st;
}
