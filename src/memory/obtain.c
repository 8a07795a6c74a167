/* obtain.c — where a request's memory comes from when no cached block serves it as it lies:
 * malloc's one retry ladder, over the pages model (pages.c) and the segments model (segments.c).
 *
 * vi_obtain first lets deferred and pending frees and finished stream work into the bins and
 * searches again; then maps or moves pages under the placement, or makes a segment; on an
 * out-of-memory answer it waits once for every stream and retries.
 */
#include "allocator_internal.h"
#include "deferred.h"
#include "search.h"

/* Pages model: maps what is missing under the placement of rsize in free block b (none: out of
 * memory); see vi_pages_ensure_mapped for may_defer. */
static vram_status map_placement(vram_allocator *a, vi_block *b, uint64_t rsize, int place, vram_stream stream,
                                 int may_defer, int *retried) {
    if (!b) return VRAM_ERR_OUT_OF_MEMORY;
    if (!b->region->expandable) return VRAM_OK; /* a segment (made while expandable_segments was off): all mapped */
    uint64_t left = a->stats.num_device_free;
    vram_status st = vi_pages_ensure_mapped(a, b->region, vi_place_addr(b, rsize, place), rsize, retried, may_defer, stream);
    if (a->stats.num_device_free != left) a->pages_moved = 1; /* pages made room: see mergeable */
    return st;
}

/* The memory for rsize on `stream` when the search found no free block `b` that serves it as it
 * lies (none, or one whose pages are not all mapped): the one retry ladder of malloc. In order:
 * deferred and pending frees and finished stream work are looked at again; then the pages model
 * maps (or moves) pages under the placement (pages.c), the segments model makes a new segment
 * (segments.c); an out-of-memory answer waits for every stream once and tries again. Returns
 * the block, with *place and *mapped updated; NULL and *err set when nothing fits. *retried
 * tells whether cached memory was released or streams waited for on the way. */
vi_block *vi_obtain(vram_allocator *a, int pool, uint64_t rsize, vram_stream stream, vi_block *b, int *placep,
                    int *mappedp, int *retriedp, vram_status *errp) {
    vi_pool *p = &a->pools[pool];
    int place = *placep, mapped = *mappedp, retried = *retriedp;
    vram_status err = VRAM_OK;
    if ((a->recent.mask || a->held.count || a->streams.not_ready || a->pending.head) &&
        (!b || !mapped)) {
        /* The slow path: pages would be mapped or a segment created. Deferred blocks may hold
         * what is needed, and so may blocks freed on streams whose events have completed.
         * (New events are recorded only when a page move is blocked, below: recording them on
         * every slow path made freed pages move sooner, which cost GPU step time;
         * docs/allocator-evidence.md §10.) */
        if (a->pending.head && !vi_capturing(a)) vi_process_pending(a); /* first: its frees are deferred */
        vi_deferred_flush(a);
        if (!vi_capturing(a)) {
            if (a->streams.not_ready) vi_poll_streams(a, 0);
            if (a->zombies.head) vi_pages_reap_zombies(a, 0);
        }
        b = vi_find_free(a, p, rsize, stream, &place, &mapped);
    }
    if (!b && a->streams.not_ready && !vi_capturing(a)) {
        vi_poll_streams(a, 1);
        b = vi_find_free(a, p, rsize, stream, &place, &mapped);
    }
    if (vi_grows_pages(a)) {
        err = mapped ? VRAM_OK : map_placement(a, b, rsize, place, stream, 1, &retried);
        if (err == VRAM_ERR_STATE) {
            /* cached pages belong to streams that may still use them: ask their events */
            vi_poll_streams(a, 1);
            b = vi_find_free(a, p, rsize, stream, &place, &mapped);
            err = map_placement(a, b, rsize, place, stream, 0, &retried);
        }
        if (err == VRAM_ERR_OUT_OF_MEMORY && (a->streams.not_ready || a->held.count || a->recent.mask) &&
            !vi_capturing(a)) {
            /* out of memory: wait for the streams, as a last resort, and retry */
            err = vi_sync_all_streams(a);
            if (err == VRAM_OK) {
                b = vi_find_free(a, p, rsize, stream, &place, &mapped);
                err = map_placement(a, b, rsize, place, stream, 0, &retried);
            }
        }
    } else if (!b || !mapped) { /* a new segment (where pages no longer grow, b would need pages mapped) */
        b = vi_new_segment(a, pool, rsize, &retried, &err);
        place = PLACE_START;
        if (!b && err == VRAM_ERR_OUT_OF_MEMORY && !vi_capturing(a)) {
            vi_sync_all_streams(a);
            b = vi_find_free(a, p, rsize, stream, &place, &mapped);
            if (b && !mapped) b = NULL;
            err = b ? VRAM_OK : VRAM_ERR_OUT_OF_MEMORY;
        }
    }
    *placep = place;
    *mappedp = mapped;
    *retriedp = retried;
    *errp = err;
    return b;
}
