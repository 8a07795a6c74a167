/* streams.c — stream states: per stream, its not-ready free blocks (ordered by free_seq) and the
 * event in flight that will make them ready.
 *
 * A block freed on a stream is ready for other streams only once an event recorded on that
 * stream after the free completes. Events are recorded lazily (when another stream finds nothing
 * else to reuse, or a page move is blocked) and polled, never waited on, in malloc; a device
 * without events makes every freed block ready at once. While one stream alone allocates
 * (STREAMS_SOLO), its freed blocks may merge with ready memory; a second stream ends that mode
 * (vi_streams_many) after waiting once for such blocks.
 */
#include <string.h>

#include "allocator_internal.h"
#include "deferred.h"
#include "pages.h"

/* vi_stream_of past the first entry, which it has asked already. */
vi_stream_state *vi_stream_find(vram_allocator *a, vram_stream s) {
    for (int i = 1; i < a->streams.n; i++)
        if (a->streams.state[i].stream == s) return &a->streams.state[i];
    if (a->streams.n == VRAM_MAX_STREAMS) return NULL;
    vi_stream_state *st = &a->streams.state[a->streams.n++];
    memset(st, 0, sizeof *st);
    st->stream = s;
    return st;
}

/* Waits for the work queued on stream s so far (the host blocks: only where nothing can be tracked). */
void vi_stream_wait(vram_allocator *a, vram_stream s) {
    void *ev = NULL;
    if (a->dev->ops->event_record(a->dev, s, &ev) != VRAM_OK) return;
    a->dev->ops->event_sync(a->dev, ev);
    a->dev->ops->event_destroy(a->dev, ev);
}

void vi_stream_list_remove(vram_allocator *a, vi_block *b) {
    vi_stream_state *st = vi_stream_of(a, b->stream);
    vi_stream_list_unlink(st, b);
    b->sprev = b->snext = NULL;
    st->count--;
    a->streams.not_ready--;
}

/* Puts a not-ready free block in its owner's list (vi_stream_list_link). Returns -1 when the
 * stream table is full; the caller then treats the block as ready after synchronizing (see
 * vi_stream_track). */
int vi_stream_list_append(vram_allocator *a, vi_block *b) {
    vi_stream_state *st = vi_stream_of(a, b->stream);
    if (!st) return -1;
    vi_stream_list_link(st, b);
    st->count++;
    a->streams.not_ready++;
    return 0;
}

/* Gives not-ready block b, in its owner's list, the newer free_seq `seq` (a merge in
 * vi_free_insert), leaving it where vi_stream_list_remove and vi_stream_list_append would put it:
 * in place unless a block after it has a free_seq of at most seq, else after the last such one
 * (almost always the tail: seq is usually the newest). One stream lookup at most and no counts
 * touched, where leaving and rejoining the list cost two lookups. */
void vi_stream_list_reseq(vram_allocator *a, vi_block *b, uint64_t seq) {
    b->free_seq = seq;
    if (!b->snext || b->snext->free_seq > seq) return; /* the list is ordered: its place stays */
    vi_stream_state *st = vi_stream_of(a, b->stream);
    vi_stream_list_unlink(st, b);
    vi_stream_list_link(st, b);
}

/* Makes every free block of stream state st with free_seq <= upto ready, merging it. */
static void stream_make_ready(vram_allocator *a, vi_stream_state *st, uint64_t upto) {
    while (st->head && st->head->free_seq <= upto) {
        vi_block *b = st->head;
        vi_free_unlink(a, b);
        b->ready = 1;
        vi_free_insert(a, b, b->addr, b->size);
    }
}

/* Waits for every stream with not-ready blocks and makes them ready (rare: before pages are
 * moved or released, and when out of memory). */
vram_status vi_sync_all_streams(vram_allocator *a) {
    vi_deferred_flush(a);
    if (!a->streams.not_ready) return VRAM_OK;
    a->stats.num_sync_all_streams++;
    for (int i = 0; i < a->streams.n; i++) {
        vi_stream_state *st = &a->streams.state[i];
        if (!st->count) continue;
        uint64_t upto = a->streams.free_seq;
        if (st->event) {
            a->dev->ops->event_destroy(a->dev, st->event);
            st->event = NULL;
        }
        void *ev = NULL;
        vram_status s = a->dev->ops->event_record(a->dev, st->stream, &ev);
        if (s == VRAM_OK) s = a->dev->ops->event_sync(a->dev, ev);
        if (ev) a->dev->ops->event_destroy(a->dev, ev);
        if (s != VRAM_OK) return vram_error(s, "synchronizing stream %#lx failed", (unsigned long)st->stream);
        stream_make_ready(a, st, upto);
    }
    return VRAM_OK;
}

/* The end of one-stream mode (mergeable): blocks merged in it may hold ready memory under the
 * solo stream's ownership, which another stream could use only after that stream's event; they
 * are made ready now, once (a wait for the work queued on the solo stream; PyTorch synchronizes
 * the device before a graph capture anyway, where begin_pool calls this). Pages moved busy to
 * a block's edge in one-stream mode (vi_pages_ensure_mapped) left free memory beside the block
 * that the solo stream's earlier work may still write: the zombies' events cover that work, so
 * waiting for them makes such memory safe for the new stream. */
void vi_streams_many(vram_allocator *a) {
    a->streams_seen = STREAMS_MANY;
    if (vi_capturing(a)) return;
    if (a->zombies.head) vi_pages_reap_zombies(a, 1);
    if (a->mixed) vi_sync_all_streams(a);
}

/* A searching malloc on `stream` while at most one stream was seen: the first one becomes the
 * solo stream, a second one ends one-stream mode. */
void vi_streams_note(vram_allocator *a, vram_stream stream) {
    if (a->streams_seen == STREAMS_NONE) {
        a->streams_seen = STREAMS_SOLO;
        a->solo_stream = stream;
    } else {
        vi_streams_many(a);
    }
}

/* Polls in-flight stream events; when `want_more` is set, records events on streams with
 * not-ready blocks and no event in flight (so another stream may soon take them). */
void vi_poll_streams(vram_allocator *a, int want_more) {
    for (int i = 0; i < a->streams.n; i++) {
        vi_stream_state *st = &a->streams.state[i];
        if (!st->count && !st->event) continue;
        if (st->event && a->dev->ops->event_query(a->dev, st->event) == VRAM_OK) {
            a->dev->ops->event_destroy(a->dev, st->event);
            st->event = NULL;
            stream_make_ready(a, st, st->event_seq);
        }
        /* a rolling event: blocks freed before it become reusable once the stream passes it */
        if (!st->event && want_more && st->count) {
            st->event_seq = a->streams.free_seq;
            if (a->dev->ops->event_record(a->dev, st->stream, &st->event) != VRAM_OK) st->event = NULL;
            else if (a->dev->ops->event_query(a->dev, st->event) == VRAM_OK) { /* already idle */
                a->dev->ops->event_destroy(a->dev, st->event);
                st->event = NULL;
                stream_make_ready(a, st, st->event_seq);
            }
        }
    }
}
