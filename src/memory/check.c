/* check.c — the allocator's invariant checker (vram_allocator_check), for tests and debugging.
 *
 * One walk over every region, block, bin, list and the live map, recounting every statistic
 * from the blocks and comparing; the first violation is returned as VRAM_ERR_INTERNAL with a
 * detail. The invariants (tiling, merging, indexes, the live map, private pools, mapped pages,
 * statistics) are listed in docs/allocator.md, "Invariants".
 */
#include <stdio.h>
#include <string.h>

#include "allocator_internal.h"
#include "live_map.h"

#define FAIL(...) return vram_error(VRAM_ERR_INTERNAL, __VA_ARGS__)

static int in_bin(const vi_pool *p, const vi_block *b) {
    for (const vi_block *x = p->free.bins[b->bin]; x; x = x->fnext)
        if (x == b) return 1;
    return 0;
}

/* One function of ~260 lines on purpose: every check below reads the counts of the one walk
 * above it (a dozen accumulators per pool and per tag), and the checker is the reference the
 * allocator's refactors are held to, so it changes as little as they do. */
static vram_status check_locked(vram_allocator *a) {
    int64_t allocated[VRAM_POOL_COUNT] = {0}, active[VRAM_POOL_COUNT] = {0}, requested[VRAM_POOL_COUNT] = {0};
    int64_t nalloc[VRAM_POOL_COUNT] = {0}, nactive[VRAM_POOL_COUNT] = {0};
    int64_t reserved[VRAM_POOL_COUNT] = {0}, segments[VRAM_POOL_COUNT] = {0};
    int64_t tag_bytes[VRAM_TAG_MAX] = {0}, tag_count[VRAM_TAG_MAX] = {0}, tag_req[VRAM_TAG_MAX] = {0};
    uint64_t live_blocks = 0, not_ready = 0, free_blocks = 0, ndeferred = 0, nheld = 0, ngraph_free = 0;
    uint64_t graph_blocks[VRAM_GRAPH_POOLS] = {0};
    int64_t oversize_blocks = 0, oversize_segments = 0; /* at or above max_split_size */
    uint64_t P = a->page_size;

    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        for (const vi_region *r = a->pools[p].regions; r; r = r->next) {
            if (r->pool != p) FAIL("region %#llx is in pool %d but says %d", (unsigned long long)r->base, p, r->pool);
            uint64_t addr = r->base;
            const vi_block *prev = NULL;
            for (const vi_block *b = r->first; b; prev = b, b = b->next) {
                if (b->prev != prev) FAIL("block %#llx: prev link broken", (unsigned long long)b->addr);
                if (b->region != r || b->pool != r->pool) FAIL("block %#llx: wrong region or pool", (unsigned long long)b->addr);
                if (b->addr != addr) FAIL("block %#llx: gap or overlap, expected %#llx", (unsigned long long)b->addr,
                                          (unsigned long long)addr);
                if (!b->size || b->size % VRAM_BLOCK_ALIGN) FAIL("block %#llx: bad size %llu", (unsigned long long)b->addr,
                                                                 (unsigned long long)b->size);
                addr += b->size;
                if (b->graph) {
                    if (b->graph > VRAM_GRAPH_POOLS || !a->graph_pools[b->graph - 1].id)
                        FAIL("block %#llx belongs to unused private pool slot %u", (unsigned long long)b->addr, b->graph);
                    graph_blocks[b->graph - 1]++;
                }
                if (b->state == BLOCK_FREE && (b->uses || b->events)) /* see vi_block_release_free */
                    FAIL("free block %#llx holds uses or events", (unsigned long long)b->addr);
                if (b->state == BLOCK_FREE && b->deferred == DEFER_GRAPH) {
                    /* in its pool's bins: the walk of the bins below counts them */
                    if (!b->graph) FAIL("private-pool block %#llx belongs to no pool", (unsigned long long)b->addr);
                    if (in_bin(&a->pools[p], b) || b->in_cached)
                        FAIL("private-pool block %#llx is also in a bin or the cached list", (unsigned long long)b->addr);
                    if (vi_live_get(&a->live, b->addr) != b)
                        FAIL("private-pool block %#llx missing from the live map", (unsigned long long)b->addr);
                    ngraph_free++;
                } else if (b->state == BLOCK_FREE && b->deferred == DEFER_HELD) {
                    const vi_block *x = a->held.stack[vi_small_class(b->size)];
                    while (x && x != b) x = x->fnext;
                    if (!x) FAIL("held block %#llx is not in its class's list", (unsigned long long)b->addr);
                    if (p != VRAM_POOL_SMALL) FAIL("held block %#llx is not in the small pool", (unsigned long long)b->addr);
                    if (in_bin(&a->pools[p], b)) FAIL("held block %#llx is also in a bin", (unsigned long long)b->addr);
                    if (vi_live_get(&a->live, b->addr) != b)
                        FAIL("held block %#llx missing from the live map", (unsigned long long)b->addr);
                    nheld++;
                } else if (b->state == BLOCK_FREE && b->deferred) {
                    if (a->recent.slot[vi_recent_slot(b->size)] != b)
                        FAIL("deferred block %#llx is not in its slot", (unsigned long long)b->addr);
                    if (in_bin(&a->pools[p], b)) FAIL("deferred block %#llx is also in a bin", (unsigned long long)b->addr);
                    if (vi_live_get(&a->live, b->addr) != b)
                        FAIL("deferred block %#llx missing from the live map", (unsigned long long)b->addr);
                    ndeferred++;
                } else if (b->state == BLOCK_FREE) {
                    free_blocks++;
                    if (!in_bin(&a->pools[p], b)) FAIL("free block %#llx missing from its bin", (unsigned long long)b->addr);
                    if (vi_live_get(&a->live, b->addr)) FAIL("free block %#llx is in the live map", (unsigned long long)b->addr);
                    if (!b->ready) not_ready++;
                    if (prev && prev->state == BLOCK_FREE && !prev->deferred &&
                        ((prev->ready && b->ready) || (!prev->ready && !b->ready && prev->stream == b->stream)))
                        FAIL("free blocks %#llx and %#llx were not coalesced", (unsigned long long)prev->addr,
                             (unsigned long long)b->addr);
                } else {
                    live_blocks++;
                    if (vi_live_get(&a->live, b->addr) != b) FAIL("live block %#llx missing from the live map", (unsigned long long)b->addr);
                    if (b->requested > b->size) FAIL("block %#llx: requested %llu > size %llu", (unsigned long long)b->addr,
                                                     (unsigned long long)b->requested, (unsigned long long)b->size);
                    active[p] += (int64_t)b->size;
                    nactive[p]++;
                    requested[p] += (int64_t)b->requested;
                    if (b->state == BLOCK_LIVE) {
                        allocated[p] += (int64_t)b->size;
                        nalloc[p]++;
                        tag_bytes[b->tag] += (int64_t)b->size;
                        tag_count[b->tag]++;
                        tag_req[b->tag] += (int64_t)b->requested;
                        if (b->size >= a->cfg.max_split_size) oversize_blocks++;
                    }
                }
                if (r->expandable && (b->state != BLOCK_FREE || b->mapped_all)) {
                    uint64_t q0 = (b->addr - r->base) / P, q1 = (b->addr + b->size - r->base + P - 1) / P;
                    for (uint64_t q = q0; q < q1; q++)
                        if (!vi_page_mapped(r, q))
                            FAIL("%s block %#llx lies on an unmapped page", b->state == BLOCK_FREE ? "free (all mapped)" : "live",
                                 (unsigned long long)b->addr);
                }
            }
            if (addr != r->base + r->size) FAIL("region %#llx: blocks do not reach its end", (unsigned long long)r->base);
            if (!r->expandable && r->size >= a->cfg.max_split_size) oversize_segments++;
            if (r->expandable) {
                for (uint64_t w = 0; w < (r->npages + 63) / 64; w++)
                    if (r->mapped[w] & r->zombie[w]) FAIL("region %#llx: a page is both mapped and a zombie", (unsigned long long)r->base);
                int in_run = 0;
                uint64_t chunk_len = 0;
                for (uint64_t q = 0; q < r->npages; q++) {
                    int m = vi_page_mapped(r, q), c = vi_page_chunk(r, q);
                    if (m) reserved[p] += (int64_t)P;
                    if (m && !in_run) segments[p]++;
                    if (c && !m) FAIL("region %#llx: page %llu starts a chunk but is not mapped", (unsigned long long)r->base,
                                      (unsigned long long)q);
                    if (m && !in_run && !c)
                        FAIL("region %#llx: mapped page %llu belongs to no chunk", (unsigned long long)r->base,
                             (unsigned long long)q);
                    chunk_len = c ? 1 : chunk_len + 1;
                    if (m && chunk_len > a->chunk_pages)
                        FAIL("region %#llx: the chunk ending at page %llu has more than %llu pages",
                             (unsigned long long)r->base, (unsigned long long)q, (unsigned long long)a->chunk_pages);
                    in_run = m;
                }
            } else {
                reserved[p] += (int64_t)r->size;
                segments[p]++;
            }
        }
        /* every bin entry is a free block of this pool in the right bin */
        uint64_t in_bins = 0;
        for (unsigned i = 0; i < VRAM_NBINS; i++) {
            int nonempty = a->pools[p].free.bins[i] != NULL;
            int bit = (int)((a->pools[p].free.bitmap[i >> 6] >> (i & 63)) & 1);
            if (nonempty != bit) FAIL("pool %d bin %u: bitmap says %d", p, i, bit);
            if (!(i & 63) && !!a->pools[p].free.bitmap[i >> 6] != (int)((a->pools[p].free.summary >> (i >> 6)) & 1))
                FAIL("pool %d: summary bit %u is wrong", p, i >> 6);
            for (const vi_block *b = a->pools[p].free.bins[i]; b; b = b->fnext) {
                in_bins++;
                if (b->state != BLOCK_FREE || b->bin != i || b->region->pool != p)
                    FAIL("pool %d bin %u holds a block that does not belong there", p, i);
            }
        }
        if (in_bins != a->pools[p].nfree)
            FAIL("pool %d counts %u blocks in its bins, holds %llu", p, a->pools[p].nfree, (unsigned long long)in_bins);
    }
    uint64_t listed = 0;
    for (int i = 0; i < a->streams.n; i++) {
        uint64_t n = 0, seq = 0;
        for (const vi_block *b = a->streams.state[i].head; b; b = b->snext, n++) {
            if (b->state != BLOCK_FREE || b->ready || b->stream != a->streams.state[i].stream)
                FAIL("stream list %d holds a block that is not a not-ready free block of that stream", i);
            if (b->free_seq < seq) FAIL("stream list %d is out of order", i);
            seq = b->free_seq;
        }
        if (n != a->streams.state[i].count) FAIL("stream list %d counts %llu, holds %llu", i,
                                           (unsigned long long)a->streams.state[i].count, (unsigned long long)n);
        listed += n;
    }
    if (listed != not_ready || not_ready != a->streams.not_ready)
        FAIL("not-ready blocks: %llu in regions, %llu listed, counter %llu", (unsigned long long)not_ready,
             (unsigned long long)listed, (unsigned long long)a->streams.not_ready);
    if (a->stats.oversize_allocations.current != oversize_blocks || a->stats.oversize_segments.current != oversize_segments)
        FAIL("oversize statistics %lld blocks, %lld segments; regions hold %lld, %lld at or above max_split_size",
             (long long)a->stats.oversize_allocations.current, (long long)a->stats.oversize_segments.current,
             (long long)oversize_blocks, (long long)oversize_segments);
    if (live_blocks + ndeferred + nheld + ngraph_free != a->live.count)
        FAIL("live map holds %llu entries for %llu live and deferred blocks", (unsigned long long)a->live.count,
             (unsigned long long)(live_blocks + ndeferred + nheld + ngraph_free));
    uint64_t listed_graph = 0;
    int any_pool = 0;
    for (int i = 0; i < VRAM_GRAPH_POOLS; i++) {
        const vi_graph_pool *g = &a->graph_pools[i];
        if (g->blocks != graph_blocks[i])
            FAIL("private pool slot %d counts %llu blocks, regions hold %llu", i, (unsigned long long)g->blocks,
                 (unsigned long long)graph_blocks[i]);
        if (g->id && !g->uses && !g->blocks) FAIL("private pool slot %d is empty and unused but kept", i);
        if (!g->id && (g->uses || g->nfree || g->free[VRAM_POOL_SMALL] || g->free[VRAM_POOL_LARGE]))
            FAIL("private pool slot %d is unused but has uses, blocks or bins", i);
        if (g->id && (!g->free[VRAM_POOL_SMALL] || !g->free[VRAM_POOL_LARGE]))
            FAIL("private pool slot %d is in use without its bins", i);
        /* the bins the bitmaps name (a block in a bin they do not name is missed by the count) */
        uint64_t listed = 0;
        for (int p = VRAM_POOL_SMALL; g->id && p <= VRAM_POOL_LARGE; p++) {
            const vi_bins *f = g->free[p];
            for (unsigned w = 0; w < VRAM_BIN_WORDS; w++)
                if (!!f->bitmap[w] != (int)((f->summary >> w) & 1))
                    FAIL("private pool slot %d, pool %d: summary bit %u is wrong", i, p, w);
            for (unsigned k = vi_bins_next(f, 0); k < VRAM_NBINS; k = vi_bins_next(f, k + 1)) {
                if (!f->bins[k]) FAIL("private pool slot %d, pool %d, bin %u: empty, its bit set", i, p, k);
                for (const vi_block *b = f->bins[k], *before = NULL; b; before = b, b = b->fnext, listed++) {
                    if (b->state != BLOCK_FREE || b->deferred != DEFER_GRAPH || b->graph != i + 1 || b->pool != p ||
                        b->bin != k)
                        FAIL("private pool slot %d lists a block that is not one of its free blocks there", i);
                    if (b->fprev != before) FAIL("private pool slot %d: free list back link broken", i);
                }
            }
        }
        if (listed != g->nfree) FAIL("private pool slot %d counts %llu free blocks, its bins hold %llu", i,
                                     (unsigned long long)g->nfree, (unsigned long long)listed);
        listed_graph += listed;
        any_pool |= g->id != 0;
    }
    if (listed_graph != ngraph_free) FAIL("%llu private-pool free blocks, the pools list %llu",
                                          (unsigned long long)ngraph_free, (unsigned long long)listed_graph);
    if (!!(a->graph_mode & GRAPH_BLOCKS) != any_pool) FAIL("graph_mode says %d, the pool slots disagree", a->graph_mode);
    if (a->ncaptures < 0 || a->ncaptures > VRAM_CAPTURES || !!vi_capturing(a) != (a->ncaptures > 0))
        FAIL("%d captures under way, graph_mode says %d", a->ncaptures, a->graph_mode);
    for (int k = 0; k < a->ncaptures && k < VRAM_CAPTURES; k++) {
        const vi_capture *c = &a->captures[k];
        if (c->pool >= VRAM_GRAPH_POOLS || !a->graph_pools[c->pool].id || !a->graph_pools[c->pool].uses)
            FAIL("capture %d allocates into pool slot %u, which is not in use", k, c->pool);
        unsigned into = 0; /* captures into the same pool: each counts a use of it */
        for (int j = 0; j < a->ncaptures && j < VRAM_CAPTURES; j++) {
            into += a->captures[j].pool == c->pool;
            if (j < k && c->id && a->captures[j].id == c->id) FAIL("captures %d and %d have the same id", j, k);
            if (j < k && c->by_stream && a->captures[j].by_stream && a->captures[j].stream == c->stream)
                FAIL("entries %d and %d route the same stream", j, k);
        }
        if (c->by_stream && c->id) FAIL("capture %d is both routed to a stream and named", k);
        if (c->pool < VRAM_GRAPH_POOLS && into > a->graph_pools[c->pool].uses)
            FAIL("%u captures into pool slot %u, which counts %u uses", into, c->pool, a->graph_pools[c->pool].uses);
    }
    for (const vi_block *b = a->cached.head; b; b = b->cnext)
        if (b->state != BLOCK_FREE || !b->in_cached) FAIL("cached list holds a block that is not free");

    vram_stats exported;
    vi_stats_export(a, &exported);
    const vram_stats *st = &exported;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        if (st->allocated_bytes[p].current != allocated[p]) FAIL("pool %d allocated_bytes %lld, blocks say %lld", p,
                                                                 (long long)st->allocated_bytes[p].current, (long long)allocated[p]);
        if (st->allocation[p].current != nalloc[p]) FAIL("pool %d allocation %lld, blocks say %lld", p,
                                                         (long long)st->allocation[p].current, (long long)nalloc[p]);
        if (st->active_bytes[p].current != active[p]) FAIL("pool %d active_bytes %lld, blocks say %lld", p,
                                                           (long long)st->active_bytes[p].current, (long long)active[p]);
        if (st->active[p].current != nactive[p]) FAIL("pool %d active %lld, blocks say %lld", p,
                                                      (long long)st->active[p].current, (long long)nactive[p]);
        if (st->requested_bytes[p].current != requested[p]) FAIL("pool %d requested_bytes %lld, blocks say %lld", p,
                                                                 (long long)st->requested_bytes[p].current, (long long)requested[p]);
        if (st->reserved_bytes[p].current != reserved[p]) FAIL("pool %d reserved_bytes %lld, pages/segments say %lld", p,
                                                               (long long)st->reserved_bytes[p].current, (long long)reserved[p]);
        if (st->segment[p].current != segments[p]) FAIL("pool %d segment %lld, ranges say %lld", p,
                                                         (long long)st->segment[p].current, (long long)segments[p]);
    }
    vram_stat *arrays[] = {(vram_stat *)st->allocation, (vram_stat *)st->allocated_bytes, (vram_stat *)st->active,
                           (vram_stat *)st->active_bytes, (vram_stat *)st->requested_bytes,
                           (vram_stat *)st->reserved_bytes, (vram_stat *)st->segment};
    /* the internal statistics, whose `freed` is `current` at the last reset of accumulated
     * counters (allocator_internal.h): allocated and freed count from there */
    const vram_stat *bases[] = {a->stats.allocation, a->stats.allocated_bytes, a->stats.active, a->stats.active_bytes,
                                a->stats.requested_bytes, a->stats.reserved_bytes, a->stats.segment};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        if (arrays[i][0].current != arrays[i][1].current + arrays[i][2].current)
            FAIL("statistic %zu: all != small + large", i);
        for (int p = 0; p < VRAM_POOL_COUNT; p++) {
            if (arrays[i][p].peak < arrays[i][p].current) FAIL("statistic %zu pool %d: peak below current", i, p);
            if (arrays[i][p].allocated - arrays[i][p].freed != arrays[i][p].current - bases[i][p].freed)
                FAIL("statistic %zu pool %d: allocated - freed != current - current at the last reset", i, p);
        }
    }
    if (st->reserved_bytes[0].current < st->allocated_bytes[0].current) FAIL("reserved below allocated");
    for (uint32_t t = 0; t < VRAM_TAG_MAX; t++) {
        if (st->tags[t].allocated_bytes.current != tag_bytes[t] || st->tags[t].allocation.current != tag_count[t] ||
            st->tags[t].requested_bytes.current != tag_req[t])
            FAIL("tag %u statistics disagree with its blocks", t);
    }
    (void)free_blocks;
    if (ndeferred != (uint64_t)__builtin_popcount(a->recent.mask))
        FAIL("%llu deferred blocks, slot mask says %d", (unsigned long long)ndeferred, __builtin_popcount(a->recent.mask));
    if (nheld != a->held.count) FAIL("%llu held blocks, the count says %llu", (unsigned long long)nheld,
                                     (unsigned long long)a->held.count);
    return VRAM_OK;
}

vram_status vram_allocator_check(vram_allocator *a) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "check: null allocator");
    vi_allocator_lock(a);
    vram_status st = check_locked(a);
    vi_allocator_unlock(a);
    return st;
}
