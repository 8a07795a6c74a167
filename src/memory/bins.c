/* bins.c — the free-block index: coalescing a freed block into the bins and the out-of-line
 * best-fit search (search.h holds the inline one).
 *
 * vi_free_insert puts a free block into its pool's bins, merged with the free neighbours it may
 * merge with: two ready blocks, two not ready of one stream, or (one-stream mode, no page moved
 * since the last empty_cache) a ready with a not-ready one of the solo stream. A neighbour already
 * indexed survives the merge and absorbs the freed block, so the common case touches no bin
 * unless the size class changes. The block's readiness (owner stream, free_seq) follows the
 * merge, and a not-ready result is kept in its owner's list (streams.c).
 */
#include "deferred.h"
#include "pages.h"
#include "search.h"

/* Whether free blocks x and y may merge: two ready blocks, or two not ready of one stream; and
 * a ready block with a not-ready one while
 *   - one stream alone has searched for memory (as in most PyTorch programs, which queue all
 *     their work on one stream): the merged block is that stream's, not ready (merge_ready),
 *     usable at once by it and by others after its event; when a second stream comes, such
 *     blocks are made ready first (streams_many), so it never waits for them; and
 *   - no page had to move to make room since the cache was last emptied (pages_moved): pages
 *     of a not-ready block move only by aliasing, whole chunks into gaps they fit, where a ready
 *     block's are unmapped; once memory must move, merging ready memory away costs more than the
 *     holes it closes.
 * Kept apart, a block freed beside never-used memory stays a hole of its own for good
 * (docs/allocator-evidence.md §1). */
static inline int readiness_mergeable(const vram_allocator *a, const vi_block *x, const vi_block *y) {
    if (x->ready && y->ready) return 1;
    if (!x->ready && !y->ready) return x->stream == y->stream;
    return a->streams_seen == STREAMS_SOLO && !a->pages_moved && (x->ready ? y : x)->stream == a->solo_stream;
}

/* Whether blocks x and y may merge: both free, neither held nor a private pool's, and their
 * readiness allows it (above). */
static inline int mergeable(const vram_allocator *a, const vi_block *x, const vi_block *y) {
    if (x->state != BLOCK_FREE || y->state != BLOCK_FREE || x->deferred >= DEFER_HELD || y->deferred >= DEFER_HELD)
        return 0; /* held and private-pool blocks never merge */
    return readiness_mergeable(a, x, y);
}

/* mergeable(x, b) or (b, x) for a block b that vi_free_insert inserts, which every caller
 * passes free and not deferred: only the neighbour x's state is asked. */
static inline int neighbour_mergeable(const vram_allocator *a, const vi_block *x, const vi_block *b) {
    return x && x->state == BLOCK_FREE && x->deferred < DEFER_HELD && readiness_mergeable(a, x, b);
}

/* The readiness of a free block: whether every stream may take it, its owner, its free_seq. */
typedef struct vi_owner {
    uint64_t free_seq;
    vram_stream stream;
    uint8_t ready;
} vi_owner;

static inline vi_owner owner_of(const vi_block *b) { return (vi_owner){b->free_seq, b->stream, b->ready}; }

/* A block owned as *keep absorbs free block part (the caller links and indexes): it stays ready
 * only if both were (else it belongs to the not-ready one's stream) and keeps the newer
 * free_seq. */
static inline void merge_ready(vram_allocator *a, vi_owner *keep, const vi_block *part) {
    if (keep->ready != part->ready) a->mixed = 1;
    if (keep->ready && !part->ready) {
        keep->ready = 0;
        keep->stream = part->stream;
    }
    if (part->free_seq > keep->free_seq) keep->free_seq = part->free_seq;
}

static inline void owner_set(vi_block *b, vi_owner o) {
    b->free_seq = o.free_seq;
    b->stream = o.stream;
    b->ready = o.ready;
}

/* merge_ready for a block in no index (a deferred one), whose fields may change at once. */
static inline void merge_ready_block(vram_allocator *a, vi_block *keep, const vi_block *part) {
    vi_owner o = owner_of(keep);
    merge_ready(a, &o, part);
    owner_set(keep, o);
}

/* Merges into the unindexed free block b its deferred neighbours that it may merge with
 * (repeatedly: deferred blocks can lie side by side). Returns the resulting block. Out of line:
 * vi_free_insert, its caller, rarely needs it and saves fewer registers without it. */
static __attribute__((noinline)) vi_block *absorb_deferred(vram_allocator *a, vi_block *b) {
    for (;;) {
        vi_block *p = b->prev, *n = b->next;
        if (p && p->deferred == DEFER_RECENT && mergeable(a, p, b)) {
            vi_recent_unslot(a, p);
            p->mapped_all &= b->mapped_all;
            p->size += b->size;
            p->next = n;
            if (n) n->prev = p;
            merge_ready_block(a, p, b);
            vi_block_release_free(a, b);
            b = p;
        } else if (n && n->deferred == DEFER_RECENT && mergeable(a, b, n)) {
            vi_recent_unslot(a, n);
            b->mapped_all &= n->mapped_all;
            b->size += n->size;
            b->next = n->next;
            if (n->next) n->next->prev = b;
            merge_ready_block(a, b, n);
            vi_block_release_free(a, n);
        } else {
            return b;
        }
    }
}

/* Inserts free block b (in its region's address list, in no index), merging it with
 * mergeable neighbours. A neighbour that is already indexed survives the merge and absorbs
 * b, so the common case (a block freed next to its free remainder) touches no bin unless the
 * size class changes. `fresh` is the range that just became free (for the cached test).
 * Returns the resulting block. */
vi_block *vi_free_insert(vram_allocator *a, vi_block *b, uint64_t fresh_addr, uint64_t fresh_size) {
    /* (no slot holds a block while recent.mask is 0: check.c counts them against it) */
    if (a->recent.mask && ((b->prev && b->prev->deferred == DEFER_RECENT) || (b->next && b->next->deferred == DEFER_RECENT))) {
        vi_block *merged = absorb_deferred(a, b);
        if (merged != b || merged->size != fresh_size) { /* all of it is newly free */
            fresh_addr = merged->addr;
            fresh_size = merged->size;
        }
        b = merged;
    }
    vi_block *prev = b->prev, *next = b->next, *keep;
    int merge_prev = neighbour_mergeable(a, prev, b), merge_next = neighbour_mergeable(a, next, b);
    /* the readiness, owner and free_seq of the block that results: b's, then what the
     * neighbours it absorbs bring (merge_ready) */
    vi_owner result = owner_of(b);
    if (merge_prev) merge_ready(a, &result, prev);
    if (merge_next) merge_ready(a, &result, next);
    if (merge_prev) {
        keep = prev;
        keep->mapped_all &= b->mapped_all;
        keep->size += b->size;
        keep->next = next;
        if (next) next->prev = keep;
        vi_block_release_free(a, b);
        if (merge_next) {
            if (next->in_cached) vi_cached_add(a, keep);
            vi_free_unlink(a, next);
            keep->mapped_all &= next->mapped_all;
            keep->size += next->size;
            keep->next = next->next;
            if (next->next) next->next->prev = keep;
            vi_block_release_free(a, next);
        }
    } else if (merge_next) {
        keep = next;
        keep->mapped_all &= b->mapped_all;
        keep->addr = b->addr;
        keep->size += b->size;
        keep->prev = prev;
        if (prev) prev->next = keep;
        else b->region->first = keep;
        vi_block_release_free(a, b);
    } else {
        keep = b;
        vi_bin_insert(&a->pools[b->pool], b);
        vi_stream_track(a, b);
    }
    if (keep != b) {
        vi_rebin(a, keep);
        if (!keep->ready && !result.ready && keep->stream == result.stream) {
            /* the same owner before and after, only a newer free_seq: the block moves within
             * its owner's list, if at all */
            if (keep->free_seq != result.free_seq) vi_stream_list_reseq(a, keep, result.free_seq);
        } else if (keep->ready != result.ready || keep->free_seq != result.free_seq) {
            /* the owner's list stays ordered by free_seq */
            if (!keep->ready) vi_stream_list_remove(a, keep);
            owner_set(keep, result);
            vi_stream_track(a, keep);
        }
    }
    if (keep->in_cached) return keep;
    if (keep->region->expandable) {
        uint64_t p0, p1, f0, f1, P = a->page_size;
        vi_full_pages(a, keep->region, keep->addr, keep->size, &p0, &p1);
        /* only the pages touching the freshly freed range can have become wholly free */
        f0 = (fresh_addr - keep->region->base) >> a->page_shift;
        f1 = (fresh_addr + fresh_size - keep->region->base + P - 1) >> a->page_shift;
        if (f0 < p0) f0 = p0;
        if (f1 > p1) f1 = p1;
        if (f0 < f1 && vi_bits_find(keep->region->mapped, f0, f1, 1) < f1) vi_cached_add(a, keep);
    } else if (!keep->prev && !keep->next) {
        vi_cached_add(a, keep); /* segments model: a wholly free segment */
    }
    return keep;
}

/* vi_find_free_inline for malloc's later searches (rare: after a flush, a poll, a failed
 * mapping); its first search, on every malloc that is not an exact reuse, inlines it. */
vi_block *vi_find_free(vram_allocator *a, vi_pool *p, uint64_t rsize, vram_stream s,
                                                       int *place, int *mapped) {
    return vi_find_free_inline(a, p, rsize, s, place, mapped);
}
