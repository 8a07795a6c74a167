/* pages.c — the pages model: physical memory mapped under a pool's virtual range on demand.
 *
 * A placement whose pages are not all mapped calls vi_pages_ensure_mapped, which maps the
 * missing pages in chunks (one physical allocation of up to chunk_pages pages, mapped and
 * unmapped whole; smaller near the limit, chunk_cap, and for smaller requests, request_chunk).
 * When that would raise reserved memory above its budget (reserve_budget) by at least move_min,
 * whole free chunks elsewhere move instead: those of ready free blocks are unmapped
 * (vi_pages_release) and new ones mapped; those the requesting stream may still use are aliased
 * to the new address (page_alias) with move_busy_pages, their old addresses kept as zombies
 * until the stream's event completes (vi_pages_reap_zombies). Candidates come from the cached
 * list, oldest free first. The region's bitmaps (pages.h) record what is mapped, where chunks
 * start and which addresses are zombies; mark_pages keeps reserved bytes, mapped ranges and
 * device-call counters with them.
 */
#include <stdlib.h>

#include "pages.h"

/* Records pages [p0, p1) of r as mapped (or unmapped): bits, reserved bytes, mapped ranges
 * ("segments": a map joins up to two neighbouring ranges, an unmap may split one), counters. */
static void mark_pages(vram_allocator *a, vi_region *r, uint64_t p0, uint64_t p1, int mapped) {
    uint64_t P = a->page_size;
    vi_bits_set(r->mapped, p0, p1, mapped);
    int left = p0 > 0 && vi_page_mapped(r, p0 - 1);
    int right = p1 < r->npages && vi_page_mapped(r, p1);
    int64_t bytes = (int64_t)((p1 - p0) * P);
    int delta = mapped ? 1 - left - right : left + right - 1;
    if (mapped) vi_stat_pool_up(a->stats.reserved_bytes, r->pool, bytes);
    else vi_stat_pool_down(a->stats.reserved_bytes, r->pool, bytes);
    if (delta > 0) vi_stat_pool_up(a->stats.segment, r->pool, delta);
    else if (delta < 0) vi_stat_pool_down(a->stats.segment, r->pool, -delta);
    if (mapped) a->stats.num_device_alloc++;
    else a->stats.num_device_free++;
    vi_history_add(a, mapped ? VRAM_EVENT_SEGMENT_MAP : VRAM_EVENT_SEGMENT_UNMAP, r->base + p0 * P, (uint64_t)bytes, 0, 0);
}

/* The end of the chunk that starts at mapped page c: the next chunk's first page or the first
 * unmapped page, whichever comes first. */
static uint64_t chunk_end(const vi_region *r, uint64_t c) {
    uint64_t next = vi_bits_find(r->chunk, c + 1, r->npages, 1), gap = vi_bits_find(r->mapped, c + 1, r->npages, 0);
    return next < gap ? next : gap;
}

static vram_status unmap_pages(vram_allocator *a, vi_region *r, uint64_t p0, uint64_t p1);

uint64_t vi_room(vram_allocator *a) {
    uint64_t reserved = (uint64_t)a->stats.reserved_bytes[0].current;
    uint64_t room = a->limit > reserved ? a->limit - reserved : 0;
    size_t dfree = 0, dtotal = 0;
    /* (not during a CUDA graph capture, which makes no call it need not) */
    if (a->dev->ops->mem_info && !vi_capturing(a) && a->dev->ops->mem_info(a->dev, &dfree, &dtotal) == VRAM_OK &&
        dfree < room)
        room = dfree;
    return room;
}

/* The most pages a chunk mapped now may hold: chunk_pages, but near the limit at most
 * 1/chunk_headroom of the memory left under the limit and free on the device. A chunk moves
 * only whole, so memory mapped in 64 MiB chunks keeps holes that no move can close; mapped in
 * pieces that shrink as the limit nears, the last memory before an out-of-memory can move where
 * a request needs it (docs/allocator-evidence.md §12). Far from the limit, chunks keep their
 * full size and the driver calls stay few. */
static uint64_t chunk_cap(vram_allocator *a) {
    uint64_t cap = a->chunk_pages;
    if (cap <= 1 || !a->cfg.chunk_headroom) return cap;
    uint64_t pages = (vi_room(a) >> a->page_shift) / a->cfg.chunk_headroom;
    return pages < 1 ? 1 : pages < cap ? pages : cap;
}

/* The most pages a chunk mapped for a request of rsize bytes may hold (chunk_divisor): a power of
 * two no larger than 1/chunk_divisor of the request, and no smaller than an eighth of chunk_pages
 * (or chunk_min, where set: finer chunks let more of a freed block's pages move when blocks of
 * other sizes take its place, for more driver calls).
 * A chunk moves and unmaps only whole: when a block is freed and a block of another size reuses
 * its memory, the free rest of each chunk the new block touches is pinned there (inference on
 * batches of changing shape kept most of its waste so). Chunks in proportion to the request keep
 * that rest in proportion too, and a training loop's large blocks still map in a few chunks. */
static uint64_t request_chunk(const vram_allocator *a, uint64_t rsize) {
    uint64_t cap = a->chunk_pages;
    if (!a->cfg.chunk_divisor || cap <= 1) return cap;
    uint64_t c = a->cfg.chunk_min ? a->cfg.chunk_min >> a->page_shift : cap / 8;
    if (c < 1) c = 1;
    if (c > cap) c = cap;
    uint64_t want = (rsize >> a->page_shift) / a->cfg.chunk_divisor;
    while (c * 2 <= want && c * 2 <= cap) c *= 2;
    return c;
}

/* Whether memory is far from the limit: chunks keep their full size (chunk_cap). large_moves acts
 * only there: near the limit, moving pages for the small needs of large requests, or mapping a
 * moved chunk's pages past the block, spent the room the last requests need (docs/allocator.md). */
static int far_from_limit(vram_allocator *a) { return chunk_cap(a) == a->chunk_pages; }

/* Maps pages [p0, p1) of r (all unmapped) for a request of rsize bytes, in chunks of at most
 * chunk_cap and request_chunk pages: each is one page_map, i.e. one physical allocation (the
 * driver's cost goes by allocations, not bytes). All or nothing: when the device refuses a chunk,
 * the chunks mapped before it are unmapped. */
static vram_status map_pages(vram_allocator *a, vi_region *r, uint64_t p0, uint64_t p1, uint64_t rsize) {
    uint64_t P = a->page_size, cap = chunk_cap(a), fit = request_chunk(a, rsize);
    if (fit < cap) cap = fit;
    for (uint64_t c = p0, n; c < p1; c += n) {
        n = p1 - c < cap ? p1 - c : cap;
        vram_status st = a->dev->ops->page_map(a->dev, r->base + c * P, n * P);
        if (st != VRAM_OK) {
            if (c > p0) unmap_pages(a, r, p0, c);
            return st;
        }
        mark_pages(a, r, c, c + n, 1);
        vi_bits_set(r->chunk, c, c + 1, 1);
    }
    return VRAM_OK;
}

/* Unmaps the whole chunks [p0, p1) of r (p0 starts a chunk, p1 ends one; no live block on them). */
static vram_status unmap_pages(vram_allocator *a, vi_region *r, uint64_t p0, uint64_t p1) {
    uint64_t P = a->page_size;
    for (uint64_t c = p0, e; c < p1; c = e) {
        e = chunk_end(r, c);
        vram_status st = a->dev->ops->page_unmap(a->dev, r->base + c * P, (e - c) * P);
        if (st != VRAM_OK) return st;
        vi_bits_set(r->chunk, c, c + 1, 0);
        mark_pages(a, r, c, e, 0);
    }
    return VRAM_OK;
}

/* The whole chunks inside pages [s, e) of r, all mapped: the first page of the first one (or e)
 * and the end of the last one (or that first page, when none fits). */
static void whole_chunks(const vi_region *r, uint64_t s, uint64_t e, uint64_t *c0, uint64_t *c1) {
    uint64_t c = vi_page_chunk(r, s) ? s : vi_bits_find(r->chunk, s, e, 1), end = c;
    *c0 = c;
    while (c < e) {
        uint64_t ce = chunk_end(r, c);
        if (ce > e) break;
        end = c = ce;
    }
    *c1 = end;
}

/* Drops the zombie batches whose events have completed (all of them, waiting, with `wait`). */
void vi_pages_reap_zombies(vram_allocator *a, int wait) {
    while (a->zombies.head) {
        vi_zombie *z = a->zombies.head;
        if (z->event) {
            if (wait) a->dev->ops->event_sync(a->dev, z->event);
            else if (a->dev->ops->event_query(a->dev, z->event) != VRAM_OK) return;
            a->dev->ops->event_destroy(a->dev, z->event);
        }
        for (size_t i = 0; i < z->n; i++) {
            vi_zombie_range *zr = &z->ranges[i];
            uint64_t P = a->page_size;
            a->dev->ops->page_drop(a->dev, zr->region->base + zr->p0 * P, (zr->p1 - zr->p0) * P);
            vi_bits_set(zr->region->zombie, zr->p0, zr->p1, 0);
            a->stats.num_device_free++;
        }
        a->zombies.head = z->next;
        if (!a->zombies.head) a->zombies.tail = NULL;
        free(z->ranges);
        free(z);
    }
}

/* The pages [p0, p1) of a block as two windows that leave out the pages [x0, x1) about to be
 * used (when `same_region`): [p0, min(p1, x0)) and [max(p0, x1), p1), possibly empty. */
static void page_windows(uint64_t p0, uint64_t p1, int same_region, uint64_t x0, uint64_t x1, uint64_t win[2][2]) {
    win[0][0] = p0;
    win[0][1] = p1;
    win[1][0] = win[1][1] = p1;
    if (same_region && x0 < p1 && x1 > p0) {
        win[0][1] = x0 > p0 ? x0 : p0;
        win[1][0] = x1 < p1 ? x1 : p1;
    }
}

/* Pages model: unmaps whole free mapped chunks of at least min_chunk pages of ready free blocks,
 * outside pages [x0, x1) of region xr, until `want` bytes are unmapped (UINT64_MAX: all). Blocks
 * not yet ready are skipped and reported through *blocked: their stream may still use the pages.
 * Returns the bytes unmapped. */
static uint64_t release_chunks(vram_allocator *a, uint64_t want, const vi_region *xr, uint64_t x0, uint64_t x1,
                               int *blocked, uint64_t min_chunk) {
    uint64_t released = 0, P = a->page_size;
    for (vi_block *b = a->cached.head, *next; b && released < want; b = next) {
        next = b->cnext;
        vi_region *r = b->region;
        if (!r->expandable) continue;
        if (!b->ready) {
            if (blocked) *blocked = 1;
            continue;
        }
        uint64_t p0, p1;
        vi_full_pages(a, r, b->addr, b->size, &p0, &p1);
        uint64_t win[2][2];
        page_windows(p0, p1, r == xr, x0, x1, win);
        int left = 0;
        b->mapped_all = 0; /* some of its pages may go */
        for (int w = 0; w < 2 && !left; w++) {
            for (uint64_t p = win[w][0]; p < win[w][1];) {
                uint64_t s = vi_bits_find(r->mapped, p, win[w][1], 1);
                if (s >= win[w][1]) break;
                uint64_t e = vi_bits_find(r->mapped, s, win[w][1], 0);
                if (released >= want) {
                    left = 1;
                    break;
                }
                uint64_t c, c1; /* only whole chunks can go */
                whole_chunks(r, s, e, &c, &c1);
                while (c < c1 && released < want) {
                    uint64_t ce = chunk_end(r, c);
                    if (ce - c < min_chunk) { /* too small to be worth its call: stays */
                        c = ce;
                        left = 1;
                        continue;
                    }
                    if (unmap_pages(a, r, c, ce) != VRAM_OK) break;
                    released += (ce - c) * P;
                    c = ce;
                }
                if (c < c1) left = 1;
                p = e;
            }
        }
        if (!left) vi_cached_remove(a, b);
    }
    return released;
}

uint64_t vi_pages_release(vram_allocator *a, uint64_t want, const vi_region *xr, uint64_t x0, uint64_t x1,
                          int *blocked) {
    return release_chunks(a, want, xr, x0, x1, blocked, 0);
}

/* Whether page p of r may take pages mapped now: unmapped and not an old address of moved pages. */
static int page_open(const vi_region *r, uint64_t p) {
    return !vi_page_mapped(r, p) && !vi_bits_count(r->zombie, p, p + 1);
}

/* Where in r a chunk of k pages moves to serve the unmapped pages of [f0, f1): the first page of
 * a run of k unmapped pages that is one of the gaps of [f0, f1) or, with `beyond`, a gap at
 * either end of [f0, f1) together with the unmapped pages past that end (the whole chunk then
 * covers the gap, and its pages past the block are free memory, mapped); r->npages when none.
 * Without `beyond` a chunk larger than every gap cannot move: a need that a request spanning
 * mapped pages leaves between them is mostly smaller than a chunk (docs/allocator.md). */
static uint64_t move_target(const vi_region *r, uint64_t f0, uint64_t f1, uint64_t k, int beyond) {
    for (uint64_t t = f0, te; t < f1; t = te) {
        t = vi_bits_find(r->mapped, t, f1, 0);
        te = vi_bits_find(r->mapped, t, f1, 1);
        if (t >= f1) break;
        if (te - t >= k) return t;
        if (!beyond || (t != f0 && te != f1)) continue;
        uint64_t lo = t, hi = te;
        if (te == f1)
            while (hi < r->npages && hi - lo < k && page_open(r, hi)) hi++;
        if (t == f0)
            while (lo > 0 && hi - lo < k && page_open(r, lo - 1)) lo--;
        if (hi - lo >= k) return t + k <= hi ? t : hi - k;
    }
    return r->npages;
}

/* Moves up to `want` pages from free blocks that `stream` freed (and may still be using) into
 * the unmapped pages of [f0, f1) of r, with page_alias: the old addresses stay mapped as
 * zombies until an event recorded on the stream now completes. Stream order keeps the old
 * work and the new block's work apart, so neither the host nor the device waits. [p0, p1) are
 * the pages the new block touches (no source is taken there), [f0, f1) those a moved page may
 * go to (see vi_pages_ensure_mapped); with allow_beyond, also past them (move_target). Chunks of
 * fewer than min_chunk pages stay. Returns the pages moved. */
static uint64_t alias_pages(vram_allocator *a, vi_region *r, uint64_t p0, uint64_t p1, uint64_t f0, uint64_t f1,
                            vram_stream stream, uint64_t want, int allow_beyond, uint64_t min_chunk) {
    uint64_t moved = 0, P = a->page_size;
    /* Past the block's edges (`allow_beyond`: moves under the budget, not under the limit, where
     * pages mapped past the block raised the smallest limit GPT-2 sampling fits in) only while
     * one stream alone allocates: the free memory moved there can serve only that stream, in its
     * order, and a second stream first waits for the moved pages' old work (vi_streams_many), as
     * for the block's edge pages (vi_pages_ensure_mapped). */
    int beyond = allow_beyond && a->cfg.large_moves && a->streams_seen == STREAMS_SOLO && stream == a->solo_stream &&
                 far_from_limit(a);
    vi_zombie *z = NULL;
    for (vi_block *b = a->cached.head, *next; b && moved < want; b = next) {
        next = b->cnext;
        vi_region *vr = b->region;
        if (!vr->expandable || b->ready || b->stream != stream) continue;
        uint64_t q0, q1;
        vi_full_pages(a, vr, b->addr, b->size, &q0, &q1);
        b->mapped_all = 0; /* some of its pages may move away */
        uint64_t win[2][2];
        page_windows(q0, q1, vr == r, p0, p1, win);
        for (int w = 0; w < 2 && moved < want; w++) {
            for (uint64_t q = win[w][0]; q < win[w][1] && moved < want;) {
                uint64_t s = vi_bits_find(vr->mapped, q, win[w][1], 1);
                if (s >= win[w][1]) break;
                uint64_t e = vi_bits_find(vr->mapped, s, win[w][1], 0), c, c1;
                whole_chunks(vr, s, e, &c, &c1);
                while (c < c1 && moved < want) { /* each whole chunk to a gap of the target it fits */
                    uint64_t ce = chunk_end(vr, c), k = ce - c;
                    uint64_t t = k < min_chunk ? r->npages : move_target(r, f0, f1, k, beyond);
                    if (t >= r->npages) { /* too small to be worth its call, or no gap takes it */
                        c = ce;
                        continue;
                    }
                    if (!z) { /* the event first: it covers the work that used the old pages */
                        z = calloc(1, sizeof *z);
                        if (!z) goto done;
                        if (a->dev->ops->event_record(a->dev, stream, &z->event) != VRAM_OK) {
                            free(z);
                            return moved;
                        }
                    }
                    if (z->n == z->cap) {
                        size_t ncap = z->cap ? 2 * z->cap : 8;
                        vi_zombie_range *nr = realloc(z->ranges, ncap * sizeof *nr);
                        if (!nr) goto done;
                        z->ranges = nr;
                        z->cap = ncap;
                    }
                    if (a->dev->ops->page_alias(a->dev, vr->base + c * P, r->base + t * P, k * P) != VRAM_OK) goto done;
                    z->ranges[z->n++] = (vi_zombie_range){vr, c, ce};
                    vi_bits_set(vr->chunk, c, c + 1, 0);
                    mark_pages(a, vr, c, ce, 0);
                    vi_bits_set(vr->zombie, c, ce, 1);
                    mark_pages(a, r, t, t + k, 1);
                    vi_bits_set(r->chunk, t, t + 1, 1);
                    moved += k;
                    c = ce;
                }
                q = e;
            }
        }
    }
done:
    if (z && z->n) {
        z->next = NULL;
        if (a->zombies.tail) a->zombies.tail->next = z;
        else a->zombies.head = z;
        a->zombies.tail = z;
    } else if (z) {
        a->dev->ops->event_destroy(a->dev, z->event);
        free(z->ranges);
        free(z);
    }
    return moved;
}

/* Pages model: how far reserved memory may grow before cached pages are moved instead: its
 * peak so far, or, with reserve_slack, the peak of allocated memory (never lowered by a reset
 * of peak statistics) plus that share, in whole pages. Both peaks count from the last
 * empty_cache: a program that gave its cache back between two phases (two models in one
 * process, training then evaluation) has the second phase's pages kept as close to what it
 * allocates as the first's were, where the first phase's larger peak would let them spread
 * (docs/allocator-evidence.md §13). */
static uint64_t reserve_budget(const vram_allocator *a) {
    if (a->cfg.reserve_slack <= 0) return (uint64_t)a->stats.reserved_bytes[0].peak;
    uint64_t high = (uint64_t)a->stats.allocated_bytes[0].peak;
    if (a->allocated_high > high) high = a->allocated_high;
    uint64_t budget = (uint64_t)((double)high * (1.0 + a->cfg.reserve_slack));
    return (budget + a->page_size - 1) & ~(a->page_size - 1);
}

/* Pages model: makes every page under [addr, addr+rsize) of r mapped, for `stream`. Cached
 * pages whose blocks may still be used by another stream cannot be moved: with `may_defer`
 * set, the call then returns VRAM_ERR_STATE so the caller can poll the streams' events and try
 * again; without it, pages `stream` itself may still use are aliased (move_busy_pages) and
 * otherwise reserved memory grows (the host never waits for a voluntary move). Under the
 * limit, VRAM_ERR_OUT_OF_MEMORY with such blocks present tells the caller that waiting for the
 * streams (as PyTorch does before giving up) may still help. */
vram_status vi_pages_ensure_mapped(vram_allocator *a, vi_region *r, uint64_t addr, uint64_t rsize, int *retried,
                                     int may_defer, vram_stream stream) {
    uint64_t P = a->page_size;
    uint64_t p0 = (addr - r->base) >> a->page_shift, p1 = (addr + rsize - r->base + P - 1) >> a->page_shift;
    if (vi_bits_find(r->mapped, p0, p1, 0) >= p1) return VRAM_OK; /* the common case: all mapped */
    /* The pages busy pages may move to. A moved page at the block's edge is partly free
     * memory, which any stream may take at once while the stream that freed the page's memory
     * may still write it (test_alloc_random found that, through fakes/phys_pages.h). So only
     * pages wholly inside the block take moved pages, unless one stream alone has allocated so
     * far: the edge's rest can then serve only that stream, in its order, and the second
     * stream waits for the moved pages' old work first (vi_streams_many). */
    uint64_t f0 = p0, f1 = p1;
    if (!(a->streams_seen == STREAMS_SOLO && stream == a->solo_stream)) vi_full_pages(a, r, addr, rsize, &f0, &f1);
    if (a->zombies.head && vi_bits_find(r->zombie, p0, p1, 1) < p1) {
        /* old addresses of moved pages lie here: they must be dropped before mapping again */
        vi_pages_reap_zombies(a, 0);
        if (vi_bits_find(r->zombie, p0, p1, 1) < p1) { /* still used by queued work: wait (rare) */
            a->stats.num_sync_all_streams++;
            vi_pages_reap_zombies(a, 1);
        }
    }
    uint64_t need = (p1 - p0 - vi_bits_count(r->mapped, p0, p1)) * P;
    int blocked = 0;
    uint64_t reserved = (uint64_t)a->stats.reserved_bytes[0].current;
    uint64_t peak = reserve_budget(a);
    /* Move cached pages rather than raise reserved memory above its budget, when the need is
     * worth a move: below one chunk, mapping costs one driver call where a move costs two, and
     * moving the pages of small holes that the next requests would reuse only churns the
     * placement (docs/allocator-evidence.md §14). With large_moves, a request of two chunks or
     * more moves pages for a need of a quarter chunk or more: it lies mostly on mapped pages,
     * and what it lacks between them, mapped afresh every time, is what inference on changing
     * shapes kept growing by; smaller needs still map, as moving them churned checkpointed
     * training, and so does all of it near the limit (far_from_limit; docs/allocator.md). */
    uint64_t room = peak > reserved ? peak - reserved : 0;
    uint64_t move_min = a->cfg.move_min ? a->cfg.move_min : a->chunk_pages * P;
    int large = a->cfg.large_moves && rsize >= 2 * move_min && 4 * need >= move_min;
    if (need > room && a->cached.head && (need >= move_min || (large && far_from_limit(a))) && !vi_capturing(a)) {
        /* With chunk_divisor, a move takes no chunk below 1/(4N) of the need: gathering a large
         * need from many small chunks cost a driver call each, and tore holes into memory that
         * the next small requests mapped again, step after step (checkpointed training). */
        uint64_t min_chunk = 0;
        if (a->cfg.chunk_divisor && a->chunk_pages > 1) /* (at most a quarter chunk: small chunk sizes keep moving) */
            min_chunk = (need >> a->page_shift) / (4ull * a->cfg.chunk_divisor);
        if (min_chunk > a->chunk_pages / 4) min_chunk = a->chunk_pages / 4;
        release_chunks(a, need - room, r, p0, p1, &blocked, min_chunk);
        reserved = (uint64_t)a->stats.reserved_bytes[0].current;
        /* Busy pages: first ask the streams (the caller polls their events and calls again
         * without may_defer), and alias only what is still in use then. Aliasing first moved
         * pages whose work had finished, and their old addresses stayed mapped as zombies
         * (docs/allocator-evidence.md §15). */
        if (blocked && may_defer && reserved + need > peak) return VRAM_ERR_STATE;
        if (blocked && a->can_alias && a->cfg.move_busy_pages && reserved + need > peak) {
            alias_pages(a, r, p0, p1, f0, f1, stream, (reserved + need - peak + P - 1) / P, 1, min_chunk);
            need = (p1 - p0 - vi_bits_count(r->mapped, p0, p1)) * P;
        }
    }
    if (reserved + need > a->limit) {
        if (vi_capturing(a)) return VRAM_ERR_OUT_OF_MEMORY; /* a capture releases nothing */
        *retried = 1;
        vi_pages_release(a, reserved + need - a->limit, r, p0, p1, &blocked);
        reserved = (uint64_t)a->stats.reserved_bytes[0].current;
        if (reserved + need > a->limit && blocked && a->can_alias) {
            alias_pages(a, r, p0, p1, f0, f1, stream, (reserved + need - a->limit + P - 1) / P, 0, 0);
            need = (p1 - p0 - vi_bits_count(r->mapped, p0, p1)) * P;
        }
        if (reserved + need > a->limit) return VRAM_ERR_OUT_OF_MEMORY;
    }
    for (uint64_t p = p0; p < p1;) {
        uint64_t s = vi_bits_find(r->mapped, p, p1, 0);
        if (s >= p1) break;
        uint64_t e = vi_bits_find(r->mapped, s, p1, 1);
        vram_status st = map_pages(a, r, s, e, rsize);
        if (st == VRAM_ERR_OUT_OF_MEMORY && !vi_capturing(a)) { /* the device is full: release cache, retry */
            *retried = 1;
            blocked = 0;
            vi_pages_reap_zombies(a, 1);
            vi_pages_release(a, UINT64_MAX, r, p0, p1, &blocked);
            st = map_pages(a, r, s, e, rsize);
        }
        if (st != VRAM_OK) return st;
        p = e;
    }
    return VRAM_OK;
}
