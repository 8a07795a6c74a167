/* allocator.c — the stream-ordered caching allocator: malloc, free and the two memory models.
 *
 * Free blocks live in segregated bins per pool (allocator_internal.h): a request is rounded to
 * 512 bytes, its bin found from the size's leading bits, and the best fit taken from that bin
 * or, through a two-level bitmap, from the next non-empty one: O(1) apart from a bounded scan
 * inside one bin. Blocks are split on allocation and coalesced with free neighbours on free.
 *
 * Pages model: each pool is one virtual range, initially one free (unmapped) block. After a
 * block is chosen, the pages under it that are not mapped get mapped, in chunks, or cached
 * chunks move there when reserved memory would exceed its budget: pages.c. Placement prefers
 * blocks whose pages are mapped. The `cached` list (allocator_internal.h) holds the free blocks
 * that may hold whole mapped pages, oldest free first: the candidates for moves and releases.
 *
 * Segments model: each region is one device allocation sized as PyTorch sizes its segments;
 * free segments go back to the device on empty_cache or when a request would not fit.
 *
 * Streams: see alloc.h. Blocks freed on a stream are ready for other streams only once an
 * event recorded on that stream after the free completes; events are recorded lazily, when
 * another stream finds nothing else to reuse or a page move is blocked, and polled, never
 * waited on, in malloc. On a device without events (sim, host) every freed block is ready at
 * once. Pages of blocks that are not ready move only by aliasing (pages.c). While one stream
 * alone allocates, its freed blocks also merge with ready free memory (mergeable: one-stream
 * merges); a second stream first waits once for them to be ready (streams_many).
 *
 * Deferred frees: a freed block first sits, uncoalesced, in one of 16 exact-size slots, from
 * which the next request of that size takes it back without search, split or merge (unless it
 * lies beside a free block, the range's free end excepted while that is the pool's one free
 * block: then it is coalesced at once, where the best fit would look); slots are
 * flushed into the bins before a free block is split and before any page is mapped or segment
 * created, so deferral changes no placement but exact-size reuse (held back from the search
 * until a page was mapped, the blocks fragmented the range: with no page moves effnet_infer
 * reserved 1.58x its requested peak; flushed before splits, 1.09x).
 *
 * Small size classes (small_classes, on by default): small requests above 4 KiB round to four
 * classes per power of two, and a small block leaving its slot goes, still uncoalesced, onto its
 * class's stack (`held`) instead of into the bins; a request of that class takes it back from
 * there. Held blocks are coalesced only before pages are mapped, moved or released, before a
 * segment is created and by empty_cache, so memory never grows while they could serve a request.
 * A workload of many sizes (the latency benchmark's random one: 60% of its requests are small)
 * then rarely searches, splits or merges for small requests.
 *
 * Placement without page moves (reserve_slack near 1, where the mapped range only grows): the
 * best fit among mapped blocks (equal sizes: the lowest address), else the free end of the
 * mapped range extended, as PyTorch's expandable segments do. A free block usable only by its
 * stream and the ready free block after it do not merge, so the allocation then straddles both
 * (find_free, PLACE_PREV).
 *
 * Private pools (CUDA graphs): during a capture every allocation of its streams belongs to the
 * pool captured into, and a pool's blocks, freed, stay in the pool until its last graph is released
 * (graph_pools.c; docs/allocator.md). The fast paths never look at them.
 *
 * The hot path: vram_allocator_malloc serves such an exact deferred block itself and leaves
 * every other case to malloc_locked; free of a block not used on other streams puts it in a
 * slot. A reuse pair thus takes the lock twice, looks the address up once in the live map
 * (live_map.h; a deferred block keeps its entry) and updates only the statistics that cannot
 * be derived on export (allocator_internal.h).
 *
 * File map: bins, streams, history, free-block insertion, deferred
 * frees, sizes, the block search, regions and segments, the OOM report, creation, malloc (the
 * fast path last), free, and the cache and limit API. Private pools are graph_pools.c's, the
 * statistics (export, resets, tags) stats.c's, the block structs allocator_internal.h's, the
 * lock lock.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator_internal.h"
#include "live_map.h"
#include "pages.h"

/* ---------------------------------------------------------------------------------------- */
/* Bins.                                                                                     */

static inline void bin_insert(vram_pool *p, vram_block *b) {
    vram_bins_insert(&p->free, b);
    p->nfree++;
}

static inline void bin_remove(vram_pool *p, vram_block *b) {
    vram_bins_remove(&p->free, b);
    p->nfree--;
}

static inline unsigned bin_next(const vram_pool *p, unsigned i) { return vram_bins_next(&p->free, i); }

/* ---------------------------------------------------------------------------------------- */
/* Streams.                                                                                  */

/* stream_state past the first entry, which it has asked already. */
static vram_stream_state *stream_state_find(vram_allocator *a, vram_stream s) {
    for (int i = 1; i < a->nstreams; i++)
        if (a->streams[i].stream == s) return &a->streams[i];
    if (a->nstreams == VRAM_MAX_STREAMS) return NULL;
    vram_stream_state *st = &a->streams[a->nstreams++];
    memset(st, 0, sizeof *st);
    st->stream = s;
    return st;
}

/* The state of stream s, made if new (NULL when the table is full). The first stream seen is
 * asked first, inline: it is most programs' only one, and the free path asks on every merge. */
static inline vram_stream_state *stream_state(vram_allocator *a, vram_stream s) {
    if (a->nstreams && a->streams[0].stream == s) return &a->streams[0];
    return stream_state_find(a, s);
}

/* Waits for the work queued on stream s so far (the host blocks: only where nothing can be tracked). */
static void stream_wait(vram_allocator *a, vram_stream s) {
    void *ev = NULL;
    if (a->dev->ops->event_record(a->dev, s, &ev) != VRAM_OK) return;
    a->dev->ops->event_sync(a->dev, ev);
    a->dev->ops->event_destroy(a->dev, ev);
}

/* Takes b out of its owner's list st (its own links left as they were; no counts). */
static inline void stream_list_unlink(vram_stream_state *st, vram_block *b) {
    if (b->sprev) b->sprev->snext = b->snext;
    else st->head = b->snext;
    if (b->snext) b->snext->sprev = b->sprev;
    else st->tail = b->sprev;
}

/* Links b into its owner's list st after the last block whose free_seq is at most b's, so the
 * list stays ordered by free_seq (almost always at the tail: a merged block can carry an older
 * free_seq). No counts. */
static inline void stream_list_link(vram_stream_state *st, vram_block *b) {
    vram_block *after = st->tail;
    while (after && after->free_seq > b->free_seq) after = after->sprev;
    b->sprev = after;
    b->snext = after ? after->snext : st->head;
    if (b->snext) b->snext->sprev = b;
    else st->tail = b;
    if (after) after->snext = b;
    else st->head = b;
}

static void stream_list_remove(vram_allocator *a, vram_block *b) {
    vram_stream_state *st = stream_state(a, b->stream);
    stream_list_unlink(st, b);
    b->sprev = b->snext = NULL;
    st->count--;
    a->not_ready_count--;
}

/* Puts a not-ready free block in its owner's list (stream_list_link). Returns -1 when the
 * stream table is full; the caller then treats the block as ready after synchronizing (see
 * stream_track). */
static int stream_list_append(vram_allocator *a, vram_block *b) {
    vram_stream_state *st = stream_state(a, b->stream);
    if (!st) return -1;
    stream_list_link(st, b);
    st->count++;
    a->not_ready_count++;
    return 0;
}

/* Gives not-ready block b, in its owner's list, the newer free_seq `seq` (a merge in
 * vram_free_insert), leaving it where stream_list_remove and stream_list_append would put it:
 * in place unless a block after it has a free_seq of at most seq, else after the last such one
 * (almost always the tail: seq is usually the newest). One stream lookup at most and no counts
 * touched, where leaving and rejoining the list cost two lookups. */
static void stream_list_reseq(vram_allocator *a, vram_block *b, uint64_t seq) {
    b->free_seq = seq;
    if (!b->snext || b->snext->free_seq > seq) return; /* the list is ordered: its place stays */
    vram_stream_state *st = stream_state(a, b->stream);
    stream_list_unlink(st, b);
    stream_list_link(st, b);
}

/* ---------------------------------------------------------------------------------------- */
/* History.                                                                                  */

static _Thread_local uint32_t thread_context; /* vram_set_context */

void vram_set_context(uint32_t context) { thread_context = context; }
uint32_t vram_context(void) { return thread_context; }

/* Records an event in the history ring (out of line: malloc and free only test a->history). */
void vram_history_record(vram_allocator *a, vram_event_action action, uint64_t addr, uint64_t size, vram_stream stream,
                         vram_tag tag) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    vram_event *e = &a->history[a->history_next % a->cfg.history_entries];
    e->action = action;
    e->addr = addr;
    e->size = size;
    e->stream = stream;
    e->tag = tag;
    e->context = thread_context;
    e->time_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    a->history_next++;
}

/* ---------------------------------------------------------------------------------------- */
/* Free blocks: insertion with coalescing, readiness.                                        */

/* Whether free blocks x and y may merge: two ready blocks, or two not ready of one stream; and
 * a ready block with a not-ready one while
 *   - one stream alone has searched for memory (as in most PyTorch programs, which queue all
 *     their work on one stream): the merged block is that stream's, not ready (merge_ready),
 *     usable at once by it and by others after its event; when a second stream comes, such
 *     blocks are made ready first (streams_many), so it never waits for them; and
 *   - no page had to move to make room since the cache was last emptied (pages_moved): pages
 *     of a not-ready block move only by aliasing, whole chunks into gaps they fit, where a ready
 *     block's are unmapped; once memory must move, merging ready memory away costs more than the
 *     holes it closes (gpt2_train, events 100 operations late: 1.037 x its peak requested memory
 *     with such merges throughout, 1.020 without; bench/results/2026-12-03-one-stream-merges.md).
 * Kept apart, a block freed beside never-used memory stays a hole of its own for good (on a
 * device with events, no page moves: gpt2_generate 1.110 x, effnet_infer 1.149 x, against
 * 1.074 and 1.092 with these merges). */
static inline int readiness_mergeable(const vram_allocator *a, const vram_block *x, const vram_block *y) {
    if (x->ready && y->ready) return 1;
    if (!x->ready && !y->ready) return x->stream == y->stream;
    return a->streams_seen == STREAMS_SOLO && !a->pages_moved && (x->ready ? y : x)->stream == a->solo_stream;
}

/* Whether blocks x and y may merge: both free, neither held nor a private pool's, and their
 * readiness allows it (above). */
static inline int mergeable(const vram_allocator *a, const vram_block *x, const vram_block *y) {
    if (x->state != BLOCK_FREE || y->state != BLOCK_FREE || x->deferred >= DEFER_HELD || y->deferred >= DEFER_HELD)
        return 0; /* held and private-pool blocks never merge */
    return readiness_mergeable(a, x, y);
}

/* mergeable(x, b) or (b, x) for a block b that vram_free_insert inserts, which every caller
 * passes free and not deferred: only the neighbour x's state is asked. */
static inline int neighbour_mergeable(const vram_allocator *a, const vram_block *x, const vram_block *b) {
    return x && x->state == BLOCK_FREE && x->deferred < DEFER_HELD && readiness_mergeable(a, x, b);
}

/* The readiness of a free block: whether every stream may take it, its owner, its free_seq. */
typedef struct vram_owner {
    uint64_t free_seq;
    vram_stream stream;
    uint8_t ready;
} vram_owner;

static inline vram_owner owner_of(const vram_block *b) { return (vram_owner){b->free_seq, b->stream, b->ready}; }

/* A block owned as *keep absorbs free block part (the caller links and indexes): it stays ready
 * only if both were (else it belongs to the not-ready one's stream) and keeps the newer
 * free_seq. */
static inline void merge_ready(vram_allocator *a, vram_owner *keep, const vram_block *part) {
    if (keep->ready != part->ready) a->mixed = 1;
    if (keep->ready && !part->ready) {
        keep->ready = 0;
        keep->stream = part->stream;
    }
    if (part->free_seq > keep->free_seq) keep->free_seq = part->free_seq;
}

static inline void owner_set(vram_block *b, vram_owner o) {
    b->free_seq = o.free_seq;
    b->stream = o.stream;
    b->ready = o.ready;
}

/* merge_ready for a block in no index (a deferred one), whose fields may change at once. */
static inline void merge_ready_block(vram_allocator *a, vram_block *keep, const vram_block *part) {
    vram_owner o = owner_of(keep);
    merge_ready(a, &o, part);
    owner_set(keep, o);
}

/* Takes a free block out of every index it is in (bin, stream list, cached list). */
static inline void free_unlink(vram_allocator *a, vram_block *b) {
    bin_remove(&a->pools[b->pool], b);
    if (!b->ready) stream_list_remove(a, b);
    cached_remove(a, b);
}

static inline void stream_track(vram_allocator *a, vram_block *b);

/* Deferred frees. A freed block first goes, uncoalesced, into one of a few `recent` slots
 * (chosen by its size), evicting the slot's previous block into the bins; a request of exactly
 * that size then takes it back without searching, splitting or merging. This is what makes a
 * repeated allocate/free of one size cost a few dozen nanoseconds. Deferred blocks are flushed
 * into the bins before a request splits a free block (a deferred block, merged with its free
 * neighbours, may fit it better), whenever the allocator would otherwise map pages or create a
 * segment, before pages are released, and by empty_cache, so they never raise reserved memory
 * and the placement of other sizes is that of the bins alone. A deferred block keeps its entry
 * in the live map, so a free followed by a malloc that takes the block back touches the map
 * only once (free's lookup); the entry goes when the block leaves its slot for the bins
 * (recent_leave). */


/* Empties slot k. */
static inline void recent_empty(vram_allocator *a, unsigned k) {
    a->recent[k] = NULL;
    a->recent_mask &= ~(1u << k);
}

/* A deferred block that leaves its slot for the bins: no longer deferred, out of the live map. */
static inline void recent_leave(vram_allocator *a, vram_block *b) {
    b->deferred = DEFER_NONE;
    live_del(&a->live, b->addr);
}

static void recent_unslot(vram_allocator *a, vram_block *b) {
    unsigned k = vram_recent_slot(b->size);
    if (a->recent[k] == b) recent_empty(a, k);
    recent_leave(a, b);
}

/* Merges into the unindexed free block b its deferred neighbours that it may merge with
 * (repeatedly: deferred blocks can lie side by side). Returns the resulting block. Out of line:
 * vram_free_insert, its caller, rarely needs it and saves fewer registers without it. */
static __attribute__((noinline)) vram_block *absorb_deferred(vram_allocator *a, vram_block *b) {
    for (;;) {
        vram_block *p = b->prev, *n = b->next;
        if (p && p->deferred == DEFER_RECENT && mergeable(a, p, b)) {
            recent_unslot(a, p);
            p->mapped_all &= b->mapped_all;
            p->size += b->size;
            p->next = n;
            if (n) n->prev = p;
            merge_ready_block(a, p, b);
            vram_block_release_free(a, b);
            b = p;
        } else if (n && n->deferred == DEFER_RECENT && mergeable(a, b, n)) {
            recent_unslot(a, n);
            b->mapped_all &= n->mapped_all;
            b->size += n->size;
            b->next = n->next;
            if (n->next) n->next->prev = b;
            merge_ready_block(a, b, n);
            vram_block_release_free(a, n);
        } else {
            return b;
        }
    }
}


/* Small frees held per size class: the second level behind the `recent` slots. With
 * small_classes, a small block leaving its slot is not coalesced but pushed on its class's
 * stack (it keeps its live map entry, as a deferred block does); a request of that class that
 * finds no exact deferred block takes the most recently held block its stream may use, without
 * search, split or merge. Held blocks are coalesced into the bins (held_flush) only when a
 * request would otherwise map pages or create a segment, before pages are moved or released,
 * on an out-of-memory retry and by empty_cache: so no pool grows while held memory could have
 * served the request. */
static inline void held_put(vram_allocator *a, vram_block *b) {
    unsigned c = vram_small_class(b->size);
    b->deferred = DEFER_HELD;
    b->fnext = a->held[c]; /* a stack: newest first, linked through fnext */
    a->held[c] = b;
    a->held_count++;
}

/* Whether a small block's size is its class's upper bound, as held stacks require: with classes
 * on every small block allocated has it, but one allocated while they were off (caching, a
 * garbage collection threshold or small_classes switched at run time: vram_allocator_set_config)
 * has its 512-byte rounding. */
static inline int class_sized(uint64_t size) {
    if (size <= 4096) return 1; /* 512-byte classes */
    uint64_t step = 1ull << (63 - VRAM_CLASS_BITS - __builtin_clzll(size - 1));
    return (size & (step - 1)) == 0;
}

/* Sends a block that left its `recent` slot on: held, or into the bins (returning the block it
 * became part of there; NULL when held). */
static inline vram_block *recent_evict(vram_allocator *a, vram_block *b) {
    if (b->pool == a->held_pool && class_sized(b->size)) {
        held_put(a, b); /* keeps its live map entry */
        return NULL;
    }
    recent_leave(a, b);
    b->free_seq = ++a->free_seq; /* its owner's list is ordered by free_seq */
    return vram_free_insert(a, b, b->addr, b->size);
}

/* Sends every deferred block on (recent_evict). With `than` (a free block of `pool` that a
 * search for rsize chose), returns whether the search must run again: a resulting block of the
 * pool fits rsize better than it, or took it in. */
int vram_recent_flush(vram_allocator *a, int pool, uint64_t rsize, const vram_block *than) {
    uint64_t addr = than ? than->addr : 0, size = than ? than->size : 0; /* `than` may be merged away */
    int again = 0;
    while (a->recent_mask) {
        unsigned k = (unsigned)__builtin_ctz(a->recent_mask);
        vram_block *b = a->recent[k];
        recent_empty(a, k);
        b = recent_evict(a, b);
        if (than && b && b->region->pool == pool && b->size >= rsize)
            again |= b->size < size || (addr >= b->addr && addr < b->addr + b->size);
    }
    return again;
}

static inline __attribute__((always_inline)) void recent_put(vram_allocator *a, vram_block *b, uint64_t slot) {
    /* Beside a free block the freed block is coalesced at once, as PyTorch coalesces every free:
     * deferred there, it stays a hole of its own size that the next request of that size takes
     * back wherever it lies, where the best fit over the merged hole would place it elsewhere
     * (GPT-2 sampling, three calls: 1.137 x its peak requested memory replayed as on a GPU,
     * 1.095 with this; bench/results/2026-12-03-one-stream-merges.md). The free end of the range
     * is the exception while it is the pool's one free block: a search (which, as PyTorch's,
     * takes the free end last) could then only place the request where the slot does, so an
     * allocate/free loop keeps its fast path, for one load of the count. With other free blocks
     * in the bins the search may choose one of them (GPT-2 sampling, one call: 1.097 -> 1.078
     * with bin_best's ties by address; bench/results/2026-12-03-placement-neutral.md). Between
     * live blocks, deferral changes nothing that a search would place otherwise. */
    vram_block *below = b->prev, *above = b->next;
    /* (any free neighbour, not only one it may merge with: asking mergeable() instead kept blocks
     * deferred beside not-ready neighbours and cost llama_train 1.049 -> 1.071, vit_train 1.033 ->
     * 1.038 with moves of busy pages off, bench_replay_lag lag 0) */
    if ((below && below->state == BLOCK_FREE && below->deferred < DEFER_HELD) ||
        (above && above->state == BLOCK_FREE && above->deferred < DEFER_HELD &&
         (above->next || a->pools[b->pool].nfree > 1))) {
        live_del_near(&a->live, b->addr, slot);
        vram_free_insert(a, b, b->addr, b->size);
        return;
    }
    unsigned k = vram_recent_slot(b->size);
    vram_block *old = a->recent[k];
    b->deferred = DEFER_RECENT;
    a->recent[k] = b;
    if (!old) {
        a->recent_mask |= 1u << k;
        return;
    }
    recent_evict(a, old); /* may absorb b, which then leaves its slot */
}

/* Takes held block b, found after `prev` (NULL: first) in the list of its class c, out of it. */
static inline void held_unlink(vram_allocator *a, vram_block *b, vram_block *prev, unsigned c) {
    if (prev) prev->fnext = b->fnext;
    else a->held[c] = b->fnext;
    b->fnext = NULL;
    a->held_count--;
    b->deferred = DEFER_NONE;
}

/* The held block that serves a request of class size rsize on `stream` (its live map entry
 * kept), or NULL. Only the list's first few blocks are looked at. */
static inline vram_block *held_take(vram_allocator *a, uint64_t rsize, vram_stream stream) {
    unsigned c = vram_small_class(rsize);
    vram_block *b = a->held[c], *prev = NULL;
    for (int i = 0; b && i < 4; prev = b, b = b->fnext, i++) {
        if (b->ready || b->stream == stream) {
            held_unlink(a, b, prev, c);
            return b;
        }
    }
    return NULL;
}

/* Coalesces every held block into the bins. */
static void held_flush(vram_allocator *a) {
    for (unsigned c = 0; a->held_count; c++) {
        while (a->held[c]) {
            vram_block *b = a->held[c];
            held_unlink(a, b, NULL, c);
            live_del(&a->live, b->addr);
            b->free_seq = ++a->free_seq; /* its owner's list is ordered by free_seq */
            vram_free_insert(a, b, b->addr, b->size);
        }
    }
}

/* Coalesces every deferred block: the slots' first (their small blocks go to the stacks), then
 * the stacks. */
static void deferred_flush(vram_allocator *a) {
    if (a->recent_mask) vram_recent_flush(a, 0, 0, NULL);
    if (a->held_count) held_flush(a);
}

/* Moves an indexed free block to the bin of its (changed) size. */
static inline __attribute__((always_inline)) void rebin(vram_allocator *a, vram_block *b) {
    unsigned i = vram_bin_of(b->size);
    if (i == b->bin) return;
    vram_bins *f = &a->pools[b->pool].free;
    vram_bins_remove(f, b); /* the pool's count of free blocks stays */
    vram_bins_insert_at(f, b, i); /* the bin known: not computed again */
}

/* Puts free block b, which is in no index yet, in its owner's not-ready list. */
static inline void stream_track(vram_allocator *a, vram_block *b) {
    if (b->ready || stream_list_append(a, b) == 0) return;
    stream_wait(a, b->stream); /* the stream table is full: wait for this stream's work instead */
    b->ready = 1;
}

/* Inserts free block b (in its region's address list, in no index), merging it with
 * mergeable neighbours. A neighbour that is already indexed survives the merge and absorbs
 * b, so the common case (a block freed next to its free remainder) touches no bin unless the
 * size class changes. `fresh` is the range that just became free (for the cached test).
 * Returns the resulting block. */
vram_block *vram_free_insert(vram_allocator *a, vram_block *b, uint64_t fresh_addr, uint64_t fresh_size) {
    /* (no slot holds a block while recent_mask is 0: check.c counts them against it) */
    if (a->recent_mask && ((b->prev && b->prev->deferred == DEFER_RECENT) || (b->next && b->next->deferred == DEFER_RECENT))) {
        vram_block *merged = absorb_deferred(a, b);
        if (merged != b || merged->size != fresh_size) { /* all of it is newly free */
            fresh_addr = merged->addr;
            fresh_size = merged->size;
        }
        b = merged;
    }
    vram_block *prev = b->prev, *next = b->next, *keep;
    int merge_prev = neighbour_mergeable(a, prev, b), merge_next = neighbour_mergeable(a, next, b);
    /* the readiness, owner and free_seq of the block that results: b's, then what the
     * neighbours it absorbs bring (merge_ready) */
    vram_owner result = owner_of(b);
    if (merge_prev) merge_ready(a, &result, prev);
    if (merge_next) merge_ready(a, &result, next);
    if (merge_prev) {
        keep = prev;
        keep->mapped_all &= b->mapped_all;
        keep->size += b->size;
        keep->next = next;
        if (next) next->prev = keep;
        vram_block_release_free(a, b);
        if (merge_next) {
            if (next->in_cached) cached_add(a, keep);
            free_unlink(a, next);
            keep->mapped_all &= next->mapped_all;
            keep->size += next->size;
            keep->next = next->next;
            if (next->next) next->next->prev = keep;
            vram_block_release_free(a, next);
        }
    } else if (merge_next) {
        keep = next;
        keep->mapped_all &= b->mapped_all;
        keep->addr = b->addr;
        keep->size += b->size;
        keep->prev = prev;
        if (prev) prev->next = keep;
        else b->region->first = keep;
        vram_block_release_free(a, b);
    } else {
        keep = b;
        bin_insert(&a->pools[b->pool], b);
        stream_track(a, b);
    }
    if (keep != b) {
        rebin(a, keep);
        if (!keep->ready && !result.ready && keep->stream == result.stream) {
            /* the same owner before and after, only a newer free_seq: the block moves within
             * its owner's list, if at all */
            if (keep->free_seq != result.free_seq) stream_list_reseq(a, keep, result.free_seq);
        } else if (keep->ready != result.ready || keep->free_seq != result.free_seq) {
            /* the owner's list stays ordered by free_seq */
            if (!keep->ready) stream_list_remove(a, keep);
            owner_set(keep, result);
            stream_track(a, keep);
        }
    }
    if (keep->in_cached) return keep;
    if (keep->region->expandable) {
        uint64_t p0, p1, f0, f1, P = a->page_size;
        full_pages(a, keep->region, keep->addr, keep->size, &p0, &p1);
        /* only the pages touching the freshly freed range can have become wholly free */
        f0 = (fresh_addr - keep->region->base) >> a->page_shift;
        f1 = (fresh_addr + fresh_size - keep->region->base + P - 1) >> a->page_shift;
        if (f0 < p0) f0 = p0;
        if (f1 > p1) f1 = p1;
        if (f0 < f1 && bits_find(keep->region->mapped, f0, f1, 1) < f1) cached_add(a, keep);
    } else if (!keep->prev && !keep->next) {
        cached_add(a, keep); /* segments model: a wholly free segment */
    }
    return keep;
}

/* Makes every free block of stream state st with free_seq <= upto ready, merging it. */
static void stream_make_ready(vram_allocator *a, vram_stream_state *st, uint64_t upto) {
    while (st->head && st->head->free_seq <= upto) {
        vram_block *b = st->head;
        free_unlink(a, b);
        b->ready = 1;
        vram_free_insert(a, b, b->addr, b->size);
    }
}

/* Waits for every stream with not-ready blocks and makes them ready (rare: before pages are
 * moved or released, and when out of memory). */
static vram_status sync_all_streams(vram_allocator *a) {
    deferred_flush(a);
    if (!a->not_ready_count) return VRAM_OK;
    a->stats.num_sync_all_streams++;
    for (int i = 0; i < a->nstreams; i++) {
        vram_stream_state *st = &a->streams[i];
        if (!st->count) continue;
        uint64_t upto = a->free_seq;
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
 * a block's edge in one-stream mode (vram_pages_ensure_mapped) left free memory beside the block
 * that the solo stream's earlier work may still write: the zombies' events cover that work, so
 * waiting for them makes such memory safe for the new stream. */
void vram_streams_many(vram_allocator *a) {
    a->streams_seen = STREAMS_MANY;
    if (vram_capturing(a)) return;
    if (a->zombies) vram_pages_reap_zombies(a, 1);
    if (a->mixed) sync_all_streams(a);
}

/* A searching malloc on `stream` while at most one stream was seen: the first one becomes the
 * solo stream, a second one ends one-stream mode. */
static void streams_note(vram_allocator *a, vram_stream stream) {
    if (a->streams_seen == STREAMS_NONE) {
        a->streams_seen = STREAMS_SOLO;
        a->solo_stream = stream;
    } else {
        vram_streams_many(a);
    }
}

/* Polls in-flight stream events; when `want_more` is set, records events on streams with
 * not-ready blocks and no event in flight (so another stream may soon take them). */
void vram_poll_streams(vram_allocator *a, int want_more) {
    for (int i = 0; i < a->nstreams; i++) {
        vram_stream_state *st = &a->streams[i];
        if (!st->count && !st->event) continue;
        if (st->event && a->dev->ops->event_query(a->dev, st->event) == VRAM_OK) {
            a->dev->ops->event_destroy(a->dev, st->event);
            st->event = NULL;
            stream_make_ready(a, st, st->event_seq);
        }
        /* a rolling event: blocks freed before it become reusable once the stream passes it */
        if (!st->event && want_more && st->count) {
            st->event_seq = a->free_seq;
            if (a->dev->ops->event_record(a->dev, st->stream, &st->event) != VRAM_OK) st->event = NULL;
            else if (a->dev->ops->event_query(a->dev, st->event) == VRAM_OK) { /* already idle */
                a->dev->ops->event_destroy(a->dev, st->event);
                st->event = NULL;
                stream_make_ready(a, st, st->event_seq);
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Sizes and pools.                                                                          */

/* A request's block size: 512 B steps, or (roundup_power2_divisions) steps of floor_pow2/d; with
 * small_classes, a request of 4 KiB to 1 MiB rounds to its class (vram_small_class). */
static uint64_t round_size(const vram_allocator *a, uint64_t size) {
    if (size < VRAM_BLOCK_ALIGN) return VRAM_BLOCK_ALIGN;
    if (size - 4097 < VRAM_SMALL_LIMIT - 4096 && a->held_pool == VRAM_POOL_SMALL) { /* 4 KiB < size <= 1 MiB */
        uint64_t step = 1ull << (63 - VRAM_CLASS_BITS - __builtin_clzll(size - 1)); /* a quarter of the power of two below */
        return ((size - 1) | (step - 1)) + 1;
    }
    uint32_t d = a->cfg.roundup_power2_divisions;
    if (d > 1 && size > VRAM_BLOCK_ALIGN * d) {
        uint64_t floor2 = 1ull << (63 - __builtin_clzll(size));
        if (floor2 == size) return size;
        uint64_t step = floor2 / d;
        return (size + step - 1) / step * step;
    }
    return (size + VRAM_BLOCK_ALIGN - 1) & ~(VRAM_BLOCK_ALIGN - 1);
}


/* Whether free block b may serve rsize under max_split_size (only blocks of segments are
 * limited), once it is known to be large enough and usable by the requesting stream. */
static inline int split_allows(const vram_allocator *a, const vram_block *b, uint64_t rsize) {
    if (a->cfg.max_split_size != UINT64_MAX && !b->region->expandable) {
        if (rsize < a->cfg.max_split_size && b->size >= a->cfg.max_split_size) return 0;
        if (rsize >= a->cfg.max_split_size && b->size >= rsize + a->cfg.max_non_split_rounding) return 0;
    }
    return 1;
}

/* Whether free block b lies in pages (an expandable region) rather than a segment, without
 * reading its region unless the allocator holds both kinds. */
static inline int in_pages(const vram_allocator *a, const vram_block *b) {
    return a->pages_model && (!a->segments_too || b->region->expandable);
}

/* Smaller first, then lower address (keeps the used address range compact). */
static inline int better_fit(const vram_block *x, const vram_block *y) {
    return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

/* Best fit among the first blocks of one bin (the scan is bounded; bins are narrow). In the
 * pages model a block whose pages are already mapped wins over a smaller one that would need
 * pages mapped: *mapped tells which kind was returned. A block of a segment (the segments model,
 * or segments made after expandable_segments was turned off at run time) is all mapped. */
static inline vram_block *bin_best(const vram_allocator *a, vram_block *list, uint64_t rsize, vram_stream s,
                                   int pages_only, int *mapped, int *at_end) {
    vram_block *best = NULL, *best_mapped = NULL;
    int scanned = 0, end = 0;
    for (vram_block *b = list; b && scanned < 32; b = b->fnext, scanned++) {
        if (b->size < rsize || (!b->ready && b->stream != s)) continue; /* the common rejects */
        /* pages_only (the pages model, no segment made: find_free reads it once per search)
         * answers what a mixed allocator asks of each block: every block lies in pages, where
         * max_split_size does not apply */
        if (!pages_only) {
            if (!split_allows(a, b, rsize)) continue;
            if (!in_pages(a, b)) {
                if (!best_mapped || better_fit(b, best_mapped)) {
                    best_mapped = b;
                    end = 0;
                }
                if (!a->pages_model && b->size == rsize) break;
                continue;
            }
        }
        if (!best_mapped || better_fit(b, best_mapped)) {
            /* its start mapped, or else its end: then the block is carved from the end */
            int e = -1;
            if (b->mapped_all || range_mapped(a, b->region, b->addr, rsize)) e = 0;
            else if (b->size > rsize && range_mapped(a, b->region, b->addr + b->size - rsize, rsize)) e = 1;
            if (e >= 0) {
                best_mapped = b;
                end = e;
                /* no early exit on an exact size: of equal blocks the lowest address wins, as in
                 * PyTorch's best fit. With recent_put's rule for the free end, GPT-2 sampling
                 * (three calls, replayed) holds 1.082 x its peak requested memory, as PyTorch's
                 * expandable segments model places it; 1.095 with neither, 1.111 and 1.117 with
                 * either alone (bench/results/2026-12-03-placement-neutral.md) */
                continue;
            }
        }
        if (!best || better_fit(b, best)) best = b;
    }
    *mapped = best_mapped != NULL || !a->pages_model;
    *at_end = best_mapped ? end : 0;
    return best_mapped ? best_mapped : best;
}

/* Where in the chosen free block b the allocation goes (pages model). */
enum {
    PLACE_START = 0, /* at b's start */
    PLACE_END = 1,   /* at b's end: its mapped part */
    PLACE_PREV = 2,  /* at b->prev's start: all of b->prev, then the head of b (see find_free) */
};

static inline uint64_t place_addr(const vram_block *b, uint64_t rsize, int place) {
    return place == PLACE_START ? b->addr : place == PLACE_END ? b->addr + b->size - rsize : b->prev->addr;
}

/* Pages model: how many pages under [addr, addr+rsize) of r are not mapped. */
static uint64_t unmapped_pages(const vram_allocator *a, const vram_region *r, uint64_t addr, uint64_t rsize) {
    uint64_t p0 = (addr - r->base) >> a->page_shift, p1 = (addr + rsize - r->base + a->page_size - 1) >> a->page_shift;
    return (p1 - p0) - bits_count(r->mapped, p0, p1);
}

/* Pages model: whether the allocation of rsize for stream s, chosen to start at free block b,
 * may rather take all of the free block before b and then the head of b. Two free blocks
 * lie side by side unmerged when one may be used by its owner stream only (not ready) and the
 * other by any stream; for the owner they are one free range. On a single stream, whose freed
 * blocks are never made ready, they would otherwise stay apart from the ready free end of the
 * range for good: small blocks freed there would never be reused, and a larger request would
 * map fresh pages beyond a free mapped block instead of extending it (gpt2_train on a device
 * with events, no page moves: 1.118 x peak requested; 1.075 on one without). find_free takes
 * the straddle when it needs no more pages mapped than b's own placement. */
static inline int straddle_possible(const vram_allocator *a, const vram_block *b, uint64_t rsize, vram_stream s) {
    const vram_block *x = b->prev;
    return in_pages(a, b) && x && x->state == BLOCK_FREE && !x->deferred && x->size < rsize &&
           (x->ready || x->stream == s);
}

/* The free block to serve rsize on stream s: the best fit, except that in the pages model a
 * slightly larger block with its pages mapped is preferred to one that would make pages move
 * (each page mapped costs tens of microseconds of driver time on a GPU). The search for a
 * mapped block goes at most VRAM_MAPPED_SEARCH_BINS bins past the first fit (8 powers of two;
 * 64 held more over 105 replays at five lags, Llama after ViT 1.059 -> 1.090 at lag 100:
 * bench/results/2026-12-04-replay-leads.md). *place tells
 * where in the block the allocation goes, *mapped whether every page under it is mapped
 * already (always, outside the pages model), so that malloc need not ask again. */
#define VRAM_MAPPED_SEARCH_BINS 256
static inline __attribute__((always_inline)) vram_block *find_free_inline(vram_allocator *a, vram_pool *p, uint64_t rsize,
                                                                         vram_stream s, int *place, int *mapped) {
    vram_block *fallback = NULL;
    unsigned first = 0;
    const int pages_only = a->pages_model && !a->segments_too; /* see bin_best */
    *place = PLACE_START;
    *mapped = 0;
    for (unsigned i = bin_next(p, vram_bin_of(rsize)); i < VRAM_NBINS; i = bin_next(p, i + 1)) {
        int is_mapped, end;
        vram_block *b = bin_best(a, p->free.bins[i], rsize, s, pages_only, &is_mapped, &end);
        if (!b) continue;
        if (is_mapped) {
            *place = end ? PLACE_END : PLACE_START;
            *mapped = 1;
            /* b's own placement maps nothing: the straddle must not either */
            if (!end && straddle_possible(a, b, rsize, s) && range_mapped(a, b->region, b->prev->addr, rsize))
                *place = PLACE_PREV;
            return b;
        }
        if (!fallback) {
            fallback = b;
            first = i;
        } else if (i - first > VRAM_MAPPED_SEARCH_BINS) {
            break;
        }
    }
    if (fallback && straddle_possible(a, fallback, rsize, s)) {
        uint64_t straddled = unmapped_pages(a, fallback->region, fallback->prev->addr, rsize);
        if (straddled <= unmapped_pages(a, fallback->region, fallback->addr, rsize)) {
            *place = PLACE_PREV;
            *mapped = straddled == 0;
        }
    }
    return fallback;
}

/* find_free_inline for malloc's later searches (rare: after a flush, a poll, a failed
 * mapping); its first search, on every malloc that is not an exact reuse, inlines it. */
static __attribute__((noinline)) vram_block *find_free(vram_allocator *a, vram_pool *p, uint64_t rsize, vram_stream s,
                                                       int *place, int *mapped) {
    return find_free_inline(a, p, rsize, s, place, mapped);
}

/* ---------------------------------------------------------------------------------------- */
/* Regions.                                                                                  */

static void region_link(vram_pool *p, vram_region *r) {
    r->prev = NULL;
    r->next = p->regions;
    if (p->regions) p->regions->prev = r;
    p->regions = r;
}

static void region_unlink(vram_pool *p, vram_region *r) {
    if (r->prev) r->prev->next = r->next;
    else p->regions = r->next;
    if (r->next) r->next->prev = r->prev;
}

/* Creates a region over [base, base+size) holding one free, ready block. */
static vram_region *region_new(vram_allocator *a, int pool, uint64_t base, uint64_t size, int expandable) {
    vram_region *r = calloc(1, sizeof *r);
    vram_block *b = vram_block_new(a);
    if (!r || !b) {
        free(r);
        if (b) vram_block_release(a, b);
        return NULL;
    }
    r->base = base;
    r->size = size;
    r->pool = pool;
    r->expandable = expandable;
    if (expandable) {
        r->npages = size / a->page_size;
        r->mapped = calloc((r->npages + 63) / 64 + 1, sizeof(uint64_t));
        r->zombie = calloc((r->npages + 63) / 64 + 1, sizeof(uint64_t));
        r->chunk = calloc((r->npages + 63) / 64 + 1, sizeof(uint64_t));
        if (!r->mapped || !r->zombie || !r->chunk) {
            free(r->mapped);
            free(r->zombie);
            free(r->chunk);
            free(r);
            vram_block_release(a, b);
            return NULL;
        }
    }
    b->addr = base;
    b->size = size;
    b->region = r;
    b->pool = (uint8_t)pool;
    b->state = BLOCK_FREE;
    b->ready = 1;
    r->first = b;
    region_link(&a->pools[pool], r);
    bin_insert(&a->pools[pool], b);
    return r;
}

static void region_destroy(vram_allocator *a, vram_region *r) {
    region_unlink(&a->pools[r->pool], r);
    free(r->mapped);
    free(r->zombie);
    free(r->chunk);
    free(r);
}

/* Segments model: the device allocation size for a request, as PyTorch sizes segments. */
static uint64_t segment_size(uint64_t rsize) {
    if (rsize <= VRAM_SMALL_LIMIT) return VRAM_SMALL_SEGMENT;
    if (rsize < VRAM_MIN_LARGE_ALLOC) return VRAM_LARGE_SEGMENT;
    return (rsize + VRAM_ROUND_LARGE - 1) / VRAM_ROUND_LARGE * VRAM_ROUND_LARGE;
}

/* Segments model: returns wholly free segments to the device until `want` bytes are released
 * (UINT64_MAX: all). Only ready segments are released. Returns the bytes released. */
static uint64_t release_segments(vram_allocator *a, uint64_t want) {
    uint64_t released = 0;
    vram_block *b = a->cached_head;
    while (b && released < want) {
        vram_block *next = b->cnext;
        vram_region *r = b->region;
        if (!r->expandable && b->ready && b->state == BLOCK_FREE && !b->prev && !b->next) {
            if (a->dev->ops->mem_free(a->dev, r->base, r->size) == VRAM_OK) {
                free_unlink(a, b);
                stat_pool_down(a->stats.reserved_bytes, r->pool, (int64_t)r->size);
                stat_pool_down(a->stats.segment, r->pool, 1);
                if (a->cfg.max_split_size != UINT64_MAX && r->size >= a->cfg.max_split_size)
                    stat_down(&a->stats.oversize_segments, 1);
                a->stats.num_device_free++;
                history_add(a, VRAM_EVENT_SEGMENT_FREE, r->base, r->size, 0, 0);
                released += r->size;
                vram_block_release(a, b);
                region_destroy(a, r);
            }
        } else if (!r->expandable && (b->prev || b->next)) {
            cached_remove(a, b); /* a segment in use; pages' blocks stay for vram_pages_release */
        }
        b = next;
    }
    return released;
}

static uint64_t release_cache(vram_allocator *a, uint64_t want) {
    uint64_t released = a->pages_model ? vram_pages_release(a, want, NULL, 0, 0, NULL) : 0;
    if (released < want && (!a->pages_model || a->segments_too)) released += release_segments(a, want - released);
    return released;
}

/* ---------------------------------------------------------------------------------------- */
/* OOM report.                                                                               */

/* The longest stretch of free block b that can serve a request without asking the device: all
 * of it in the segments model, its longest run of mapped pages in the pages model. */
static uint64_t cached_run(const vram_allocator *a, const vram_block *b) {
    const vram_region *r = b->region;
    if (!r->expandable) return b->size;
    uint64_t P = a->page_size, lo = b->addr - r->base, hi = lo + b->size, best = 0;
    uint64_t q1 = ((hi - 1) >> a->page_shift) + 1; /* one past the block's last page */
    for (uint64_t s = bits_find(r->mapped, lo >> a->page_shift, q1, 1), e; s < q1; s = bits_find(r->mapped, e, q1, 1)) {
        e = bits_find(r->mapped, s, q1, 0);
        uint64_t from = s * P > lo ? s * P : lo, to = e * P < hi ? e * P : hi;
        if (to - from > best) best = to - from;
    }
    return best;
}

/* The largest request of `pool` (-1: either) that cached memory could serve as it lies. */
static uint64_t largest_cached(const vram_allocator *a, int pool) {
    uint64_t largest = 0;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (const vram_region *r = a->pools[p].regions; r && (pool < 0 || p == pool); r = r->next)
            for (const vram_block *b = r->first; b; b = b->next)
                if (b->state == BLOCK_FREE) {
                    uint64_t c = cached_run(a, b);
                    if (c > largest) largest = c;
                }
    return largest;
}

static void oom_report(vram_allocator *a, uint64_t size, uint64_t rsize, const char *why) {
    char s1[32], s2[32], s3[32], s4[32], s5[32], s6[32], s7[32], s8[32], s9[32];
    const vram_stats *st = &a->stats;
    uint64_t allocated = (uint64_t)st->allocated_bytes[0].current, reserved = (uint64_t)st->reserved_bytes[0].current;
    size_t dfree = 0, dtotal = 0;
    if (a->dev->ops->mem_info) a->dev->ops->mem_info(a->dev, &dfree, &dtotal);
    int pool = vram_pool_of(rsize);
    uint64_t largest = largest_cached(a, pool);
    int n = snprintf(a->oom_report, sizeof a->oom_report,
                     "vram out of memory: tried to allocate %s (requested %s) on %s device %d (%s): %s. "
                     "Device capacity %s, of which %s is free; vram's limit is %s. "
                     "Allocated %s, reserved %s, of which %s is cached (reserved but unallocated); "
                     "the largest free cached block of the %s pool is %s.",
                     vram_format_size(rsize, s1, sizeof s1), vram_format_size(size, s2, sizeof s2), a->dev->kind,
                     a->dev->index, a->dev->name, why, vram_format_size(a->dev->capacity, s3, sizeof s3),
                     vram_format_size(dfree, s4, sizeof s4), vram_format_size(a->limit, s5, sizeof s5),
                     vram_format_size(allocated, s6, sizeof s6), vram_format_size(reserved, s7, sizeof s7),
                     vram_format_size(reserved - allocated, s8, sizeof s8), pool == VRAM_POOL_SMALL ? "small" : "large",
                     vram_format_size(largest, s9, sizeof s9));
    int64_t pool_cached = st->reserved_bytes[pool].current - st->allocated_bytes[pool].current;
    if (n > 0 && (size_t)n < sizeof a->oom_report && pool_cached >= 0 && (uint64_t)pool_cached >= rsize && largest < rsize)
        n += snprintf(a->oom_report + n, sizeof a->oom_report - (size_t)n,
                      a->pages_model
                          ? " The pool's %s of cached memory is fragmented: it lies in pieces smaller than the request, "
                            "in chunks shared with live blocks, and a chunk moves only whole (chunk_size_mb sets their size)."
                          : " The pool's %s of cached memory is fragmented: it lies in segments with live blocks, where "
                            "nothing this large fits (expandable_segments:True lets free pages move).",
                      vram_format_size((uint64_t)pool_cached, s1, sizeof s1));
    /* the three biggest tags by allocated bytes */
    int order[VRAM_TAG_MAX];
    uint32_t nt = st->num_tags;
    for (uint32_t i = 0; i < nt; i++) order[i] = (int)i;
    for (uint32_t i = 0; i < nt; i++)
        for (uint32_t j = i + 1; j < nt; j++)
            if (st->tags[order[j]].allocated_bytes.current > st->tags[order[i]].allocated_bytes.current) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    for (uint32_t i = 0; i < nt && i < 3 && n > 0 && (size_t)n < sizeof a->oom_report; i++) {
        int64_t bytes = st->tags[order[i]].allocated_bytes.current;
        if (bytes <= 0) break;
        n += snprintf(a->oom_report + n, sizeof a->oom_report - (size_t)n, "%s %s %s", i ? "," : " Biggest tags:",
                      a->tag_names[order[i]], vram_format_size((uint64_t)bytes, s1, sizeof s1));
    }
}

/* An out-of-memory answer (the lock held): counted, in the history, the report written and set as
 * the error, `why` saying what failed. */
static void oom_fail(vram_allocator *a, size_t size, uint64_t rsize, vram_stream stream, vram_tag tag, const char *why) {
    a->stats.num_ooms++;
    size_t dfree = 0, dtotal = 0;
    if (a->dev->ops->mem_info) a->dev->ops->mem_info(a->dev, &dfree, &dtotal);
    history_add(a, VRAM_EVENT_OOM, dfree, rsize, stream, tag);
    oom_report(a, size, rsize, why);
    vram_error(VRAM_ERR_OUT_OF_MEMORY, "%s", a->oom_report);
}

/* ---------------------------------------------------------------------------------------- */
/* Creation and destruction.                                                                 */

static const char *const builtin_tags[VRAM_TAG_BUILTIN_COUNT] = {
    "other", "parameter", "gradient", "optimizer_state", "activation", "temporary"};

static uint64_t compute_limit(const vram_allocator *a) {
    uint64_t limit = (uint64_t)((double)a->dev->capacity * a->cfg.memory_fraction);
    if (a->cfg.max_reserved && a->cfg.max_reserved < limit) limit = a->cfg.max_reserved;
    return limit;
}

/* Policies whose best value depends on what a page move costs (docs/alloc_conf.md), where `cfg`
 * leaves them auto: where chunks are larger than a page (CUDA), a move is a driver call of 40-300
 * us, so reserved memory may exceed the allocated peak by 3% before pages move, and pages a
 * stream may still use are moved by aliasing rather than new memory mapped. */
static void resolve_auto(const vram_allocator *a, vram_alloc_config *cfg) {
    if (cfg->move_busy_pages == VRAM_CONF_AUTO) cfg->move_busy_pages = a->can_alias;
    if (cfg->reserve_slack == VRAM_CONF_AUTO) cfg->reserve_slack = a->chunk_pages > 1 ? 0.03 : 0.0;
}

vram_status vram_allocator_new(vram_device *dev, const vram_alloc_config *cfg, vram_allocator **out) {
    if (!dev || !out) return vram_error(VRAM_ERR_INVALID_ARG, "allocator: null argument");
    *out = NULL;
    vram_alloc_config conf;
    if (cfg) {
        if (vram_alloc_config_check(cfg) != VRAM_OK)
            return vram_error(VRAM_ERR_INVALID_ARG, "allocator configuration: %s", vram_last_error());
        conf = *cfg;
    } else {
        vram_status st = vram_alloc_config_from_env(&conf);
        if (st != VRAM_OK) return st;
    }
    vram_allocator *a = calloc(1, sizeof *a);
    if (!a) return vram_error(VRAM_ERR_HOST_MEMORY, "allocator: host out of memory");
    vram_lock_init(&a->lock);
    a->dev = dev;
    a->cfg = conf;
    a->has_events = dev->ops->event_record && dev->ops->event_query && dev->ops->event_sync && dev->ops->event_destroy;
    a->pages_model = conf.expandable_segments && vram_device_has_pages(dev);
    a->can_alias = a->pages_model && a->has_events && dev->ops->page_alias && dev->ops->page_drop;
    vram_free_path_update(a);
    a->tag_solo = VRAM_TAG_OTHER; /* what PyTorch's plug-in and most callers use throughout */
    a->page_size = dev->page_size;
    if (a->pages_model && conf.page_size > dev->page_size && conf.page_size % dev->page_size == 0)
        a->page_size = conf.page_size;
    if (a->pages_model && (a->page_size & (a->page_size - 1))) {
        unsigned long long page = a->page_size;
        free(a);
        return vram_error(VRAM_ERR_UNSUPPORTED, "allocator: page size %llu of %s is not a power of two", page,
                          dev->name);
    }
    a->page_shift = a->page_size ? (unsigned)__builtin_ctzll(a->page_size) : 0;
    uint64_t chunk = conf.chunk_size ? conf.chunk_size : dev->chunk_size; /* 0: the device's default */
    a->chunk_pages = a->page_size && chunk > a->page_size ? chunk / a->page_size : 1;
    resolve_auto(a, &a->cfg);
    a->limit = compute_limit(a);
    a->stats.max_split_size = conf.max_split_size == UINT64_MAX ? -1 : (int64_t)conf.max_split_size;
    a->stats.num_tags = VRAM_TAG_BUILTIN_COUNT;
    for (int i = 0; i < VRAM_TAG_BUILTIN_COUNT; i++) snprintf(a->tag_names[i], sizeof a->tag_names[i], "%s", builtin_tags[i]);
    for (int p = 0; p < VRAM_POOL_COUNT; p++) a->pools[p].index = p;
    if (conf.history_entries) {
        a->history = calloc(conf.history_entries, sizeof *a->history);
        if (!a->history) {
            free(a);
            return vram_error(VRAM_ERR_HOST_MEMORY, "allocator: host out of memory for history");
        }
    }
    if (a->pages_model) {
        /* Virtual ranges cost nothing physical: give each pool room to spare so that address
         * fragmentation never limits what the pages can hold. */
        uint64_t P = a->page_size;
        uint64_t sizes[VRAM_POOL_COUNT] = {0, dev->capacity + (1ull << 30), dev->capacity * 2 + (1ull << 30)};
        for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
            uint64_t size = (sizes[p] + P - 1) / P * P, base;
            vram_status st = dev->ops->va_reserve(dev, size, &base);
            if (st != VRAM_OK || !region_new(a, p, base, size, 1)) {
                vram_allocator_destroy(a);
                return vram_error(st != VRAM_OK ? st : VRAM_ERR_HOST_MEMORY,
                                  "allocator: reserving %llu bytes of address space on %s failed%s",
                                  (unsigned long long)size, dev->name, st != VRAM_OK ? "" : ": host out of memory");
            }
        }
    }
    *out = a;
    return VRAM_OK;
}

void vram_allocator_destroy(vram_allocator *a) {
    if (!a) return;
    vram_pages_reap_zombies(a, 1);
    if (a->has_events) {
        sync_all_streams(a);
        for (int i = 0; i < a->nstreams; i++)
            if (a->streams[i].event) a->dev->ops->event_destroy(a->dev, a->streams[i].event);
        for (vram_block *b = a->pending_head; b; b = b->fnext)
            for (int i = 0; i < b->nevents; i++) a->dev->ops->event_destroy(a->dev, b->events[i]);
    }
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        while (a->pools[p].regions) {
            vram_region *r = a->pools[p].regions;
            if (r->expandable) {
                uint64_t q = 0;
                while ((q = bits_find(r->mapped, q, r->npages, 1)) < r->npages) {
                    uint64_t e = bits_find(r->mapped, q, r->npages, 0);
                    a->dev->ops->page_unmap(a->dev, r->base + q * a->page_size, (e - q) * a->page_size);
                    q = e;
                }
                a->dev->ops->va_release(a->dev, r->base, r->size);
            } else {
                a->dev->ops->mem_free(a->dev, r->base, r->size);
            }
            for (vram_block *b = r->first; b;) {
                vram_block *n = b->next;
                free(b->uses);
                free(b->events);
                b = n;
            }
            region_destroy(a, r);
        }
    }
    while (a->slabs) {
        vram_block_slab *s = a->slabs;
        a->slabs = s->next;
        free(s);
    }
    vram_graph_pools_destroy(a);
    free(a->live.slots);
    free(a->history);
    free(a);
}

vram_device *vram_allocator_device(vram_allocator *a) { return a->dev; }
const vram_alloc_config *vram_allocator_config(vram_allocator *a) { return &a->cfg; }

void vram_allocator_get_config(vram_allocator *a, vram_alloc_config *out) {
    vram_allocator_lock(a);
    *out = a->cfg;
    vram_allocator_unlock(a);
}

/* ---------------------------------------------------------------------------------------- */
/* malloc.                                                                                   */

/* Segments model: a new segment able to hold rsize, respecting the limit. */
static vram_block *new_segment(vram_allocator *a, int pool, uint64_t rsize, int *retried, vram_status *err) {
    uint64_t size = segment_size(rsize);
    uint64_t reserved = (uint64_t)a->stats.reserved_bytes[0].current;
    if (reserved + size > a->limit) {
        if (!vram_capturing(a)) { /* a capture waits for and releases nothing */
            *retried = 1;
            sync_all_streams(a);
            release_segments(a, reserved + size - a->limit);
        }
        if ((uint64_t)a->stats.reserved_bytes[0].current + size > a->limit) {
            *err = VRAM_ERR_OUT_OF_MEMORY;
            return NULL;
        }
    }
    uint64_t base;
    vram_status st = a->dev->ops->mem_alloc(a->dev, size, &base);
    if (st == VRAM_ERR_OUT_OF_MEMORY && !vram_capturing(a)) {
        *retried = 1;
        sync_all_streams(a);
        release_segments(a, UINT64_MAX);
        st = a->dev->ops->mem_alloc(a->dev, size, &base);
    }
    if (st != VRAM_OK) {
        *err = st;
        return NULL;
    }
    vram_region *r = region_new(a, pool, base, size, 0);
    if (!r) {
        a->dev->ops->mem_free(a->dev, base, size);
        *err = VRAM_ERR_HOST_MEMORY; /* the region's struct: not the device's memory */
        return NULL;
    }
    a->segments_too |= a->pages_model;
    stat_pool_up(a->stats.reserved_bytes, pool, (int64_t)size);
    stat_pool_up(a->stats.segment, pool, 1);
    if (a->cfg.max_split_size != UINT64_MAX && size >= a->cfg.max_split_size)
        stat_up(&a->stats.oversize_segments, 1);
    a->stats.num_device_alloc++;
    history_add(a, VRAM_EVENT_SEGMENT_ALLOC, base, size, 0, 0);
    return r->first;
}

/* Whether a free block of `size` serving `rsize` should be split. */
static int should_split(const vram_allocator *a, const vram_block *b, uint64_t rsize) {
    uint64_t rest = b->size - rsize;
    if (b->region->expandable || b->region->pool == VRAM_POOL_SMALL) return rest >= VRAM_BLOCK_ALIGN;
    return rsize < a->cfg.max_split_size && rest > VRAM_SMALL_LIMIT;
}


/* How many mallocs may pass between two polls of pending frees and in-flight stream events:
 * an event query costs 5-10 us while the GPU is busy (bench_cuda_pages), and asked on every
 * malloc it cost GPT-2 training ~20 ms a step on an H200. The slow path asks always. */
#define VRAM_POLL_EVERY 64

/* The deferred block that serves a request of exactly rsize on `stream`, taken out of its slot
 * (it keeps its live map entry), or NULL. */
static inline vram_block *recent_take(vram_allocator *a, uint64_t rsize, vram_stream stream) {
    unsigned k = vram_recent_slot(rsize);
    vram_block *b = a->recent[k];
    if (!b || b->size != rsize || (!b->ready && b->stream != stream)) return NULL;
    recent_empty(a, k);
    b->deferred = DEFER_NONE;
    return b;
}

/* Makes b (out of the free structures, in the live map) a live block serving `size` bytes on
 * `stream` with `tag`, and counts it. Always inlined: it is most of malloc's fast path. */
static inline __attribute__((always_inline)) void block_live(vram_allocator *a, vram_block *b, size_t size, vram_stream stream, vram_tag tag) {
    if (__builtin_expect((int)tag != a->tag_solo, 0)) vram_tag_stats_up(a, tag, b->size, size); /* first: may split */
    b->state = BLOCK_LIVE;
    b->ready = 0;
    b->stream = stream;
    b->requested = size;
    b->tag = tag;
    b->nuses = 0;
    int bpool = b->pool;
    stat_pool_up(a->stats.allocation, bpool, 1);
    stat_pool_up(a->stats.allocated_bytes, bpool, (int64_t)b->size);
    stat_pool_up(a->stats.requested_bytes, bpool, (int64_t)size);
    if (__builtin_expect(a->pending_blocks[0] != 0, 0)) vram_stats_active_lift(a, bpool);
    if (b->size >= a->cfg.max_split_size) /* UINT64_MAX when unlimited: no block reaches it */
        stat_up(&a->stats.oversize_allocations, 1);
    history_add(a, VRAM_EVENT_ALLOC, b->addr, size, stream, tag);
}

void vram_block_live(vram_allocator *a, vram_block *b, size_t size, vram_stream stream, vram_tag tag) {
    block_live(a, b, size, stream, tag);
}

/* Pages model: maps what is missing under the placement of rsize in free block b (none: out of
 * memory); see vram_pages_ensure_mapped for may_defer. */
static vram_status map_placement(vram_allocator *a, vram_block *b, uint64_t rsize, int place, vram_stream stream,
                                 int may_defer, int *retried) {
    if (!b) return VRAM_ERR_OUT_OF_MEMORY;
    if (!b->region->expandable) return VRAM_OK; /* a segment (made while expandable_segments was off): all mapped */
    uint64_t left = a->stats.num_device_free;
    vram_status st = vram_pages_ensure_mapped(a, b->region, place_addr(b, rsize, place), rsize, retried, may_defer, stream);
    if (a->stats.num_device_free != left) a->pages_moved = 1; /* pages made room: see mergeable */
    return st;
}

/* malloc with the lock held and the arguments checked, where vram_allocator_malloc's fast
 * path (an exact deferred block, nothing pending or not ready) did not apply. Kept out of line
 * so that the fast path stays a small function. */
__attribute__((noinline)) static vram_status malloc_locked(vram_allocator *a, size_t size, uint64_t rsize,
                                                           vram_stream stream, vram_tag tag, void **ptr) {
    vram_block *b;
    int graph = vram_capturing(a) ? vram_graph_route(a, stream) : -1; /* a capture's pool takes it */
    if (!a->poll_countdown && (a->pending_head || a->not_ready_count) && !vram_capturing(a)) {
        /* pending frees and ready streams first when it is their turn (the fast path counts
         * down to it and, until then, has looked for an exact deferred block itself), then an
         * exact deferred block. (The countdown is asked first: on a device with events, frees
         * leave blocks not ready, and the countdown is then 0 on one malloc in 64.) */
        a->poll_countdown = VRAM_POLL_EVERY;
        if (a->pending_head) vram_process_pending(a);
        if (a->not_ready_count) vram_poll_streams(a, 0);
        if ((b = recent_take(a, rsize, stream)) != NULL) goto live; /* its live map entry stayed */
    }
    if (a->streams_seen == STREAMS_NONE || (a->streams_seen == STREAMS_SOLO && stream != a->solo_stream))
        streams_note(a, stream);
    if (graph >= 0 && (b = vram_graph_take(a, graph, rsize, stream)) != NULL) goto live;
    int pool = vram_pool_of(rsize);
    if (pool == a->held_pool && (b = held_take(a, rsize, stream)) != NULL) goto live;
    vram_pool *p = &a->pools[pool];
    int retried = 0;
    vram_status err = VRAM_OK;
    int place = PLACE_START; /* where in free block b the allocation goes (pages model) */
    int mapped = 0;          /* every page under it mapped already (see find_free) */
    b = find_free_inline(a, p, rsize, stream, &place, &mapped);
    if (a->recent_mask && b && b->size != rsize) {
        /* b would be split: first let the search see the deferred blocks (see recent_put) */
        if (vram_recent_flush(a, pool, rsize, b) || place == PLACE_PREV) /* b->prev may have grown */
            b = find_free(a, p, rsize, stream, &place, &mapped);
    }
    if ((a->recent_mask || a->held_count || a->not_ready_count || a->pending_head) &&
        (!b || !mapped)) {
        /* The slow path: pages would be mapped or a segment created. Deferred blocks may hold
         * what is needed, and so may blocks freed on streams whose events have completed.
         * (New events are recorded only when a page move is blocked, below: recording them on
         * every slow path made freed pages move sooner, and on an H200 the extra page traffic
         * cost 12-46% of step time for 3-50% less reserved memory; bench/results/
         * 2026-12-02-torch-workloads.md, runs 3 and 6.) */
        if (a->pending_head && !vram_capturing(a)) vram_process_pending(a); /* first: its frees are deferred */
        deferred_flush(a);
        if (!vram_capturing(a)) {
            if (a->not_ready_count) vram_poll_streams(a, 0);
            if (a->zombies) vram_pages_reap_zombies(a, 0);
        }
        b = find_free(a, p, rsize, stream, &place, &mapped);
    }
    if (!b && a->not_ready_count && !vram_capturing(a)) {
        vram_poll_streams(a, 1);
        b = find_free(a, p, rsize, stream, &place, &mapped);
    }
    if (vram_grows_pages(a)) {
        err = mapped ? VRAM_OK : map_placement(a, b, rsize, place, stream, 1, &retried);
        if (err == VRAM_ERR_STATE) {
            /* cached pages belong to streams that may still use them: ask their events */
            vram_poll_streams(a, 1);
            b = find_free(a, p, rsize, stream, &place, &mapped);
            err = map_placement(a, b, rsize, place, stream, 0, &retried);
        }
        if (err == VRAM_ERR_OUT_OF_MEMORY && (a->not_ready_count || a->held_count || a->recent_mask) &&
            !vram_capturing(a)) {
            /* out of memory: wait for the streams, as a last resort, and retry */
            err = sync_all_streams(a);
            if (err == VRAM_OK) {
                b = find_free(a, p, rsize, stream, &place, &mapped);
                err = map_placement(a, b, rsize, place, stream, 0, &retried);
            }
        }
    } else if (!b || !mapped) { /* a new segment (where pages no longer grow, b would need pages mapped) */
        b = new_segment(a, pool, rsize, &retried, &err);
        place = PLACE_START;
        if (!b && err == VRAM_ERR_OUT_OF_MEMORY && !vram_capturing(a)) {
            sync_all_streams(a);
            b = find_free(a, p, rsize, stream, &place, &mapped);
            if (b && !mapped) b = NULL;
            err = b ? VRAM_OK : VRAM_ERR_OUT_OF_MEMORY;
        }
    }
    if (retried) a->stats.num_alloc_retries++;
    if (err != VRAM_OK || !b) {
        if (err == VRAM_ERR_OUT_OF_MEMORY) {
            oom_fail(a, size, rsize, stream, tag, retried ? "the cache was released and the request still does not fit"
                                                          : "the request does not fit");
        } else {
            vram_error(err, "malloc of %zu bytes on %s failed: %s", size, a->dev->name, vram_status_str(err));
        }
        vram_allocator_unlock(a);
        return err != VRAM_OK ? err : VRAM_ERR_OUT_OF_MEMORY;
    }
    /* Take [b->addr, b->addr + rsize) out of free block b (or its end, with PLACE_END). When b
     * is split, its struct stays in the indexes as the remainder and a new struct describes the
     * allocation. With PLACE_PREV, the free block before b grows by the head of b and is taken
     * whole. */
    if (place == PLACE_PREV) {
        vram_block *x = b->prev;
        uint64_t head = rsize - x->size; /* b->size >= rsize > x->size: b keeps a remainder */
        free_unlink(a, x);
        x->size = rsize;
        b->addr += head;
        b->size -= head;
        rebin(a, b);
        b = x;
        goto take;
    }
    if (should_split(a, b, rsize)) {
        vram_block *blk = vram_block_new(a);
        if (!blk) {
            vram_allocator_unlock(a);
            return vram_error(VRAM_ERR_HOST_MEMORY, "malloc: host out of memory for block metadata");
        }
        blk->region = b->region;
        blk->pool = b->pool;
        if (place == PLACE_END) {
            blk->addr = b->addr + b->size - rsize;
            blk->size = rsize;
            blk->prev = b;
            blk->next = b->next;
            if (b->next) b->next->prev = blk;
            b->next = blk;
            b->size -= rsize;
            rebin(a, b);
            b = blk;
            goto take;
        }
        blk->addr = b->addr;
        blk->size = rsize;
        blk->region = b->region;
        blk->prev = b->prev;
        blk->next = b;
        if (b->prev) b->prev->next = blk;
        else b->region->first = blk;
        b->prev = blk;
        b->addr += rsize;
        b->size -= rsize;
        rebin(a, b);
        b = blk;
    } else {
        free_unlink(a, b);
    }
take:
    if (live_put(&a->live, b) != 0) {
        b->state = BLOCK_FREE;
        b->ready = 1;
        vram_free_insert(a, b, b->addr, b->size);
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_HOST_MEMORY, "malloc: host out of memory for the block map");
    }
live:
    if (graph >= 0 && !b->graph) vram_graph_adopt(a, graph, b);
    block_live(a, b, size, stream, tag);
    *ptr = (void *)(uintptr_t)b->addr;
    vram_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_malloc(vram_allocator *a, size_t size, vram_stream stream, vram_tag tag, void **ptr) {
    if (!a || !ptr) return vram_error(VRAM_ERR_INVALID_ARG, "malloc: null argument");
    *ptr = NULL;
    if (tag >= VRAM_TAG_MAX) return vram_error(VRAM_ERR_INVALID_ARG, "malloc: unknown tag %u", tag);
    if (size > (1ull << 52)) {
        /* Failed at once, with no retry, but an out-of-memory like any other: counted, in the
         * history and reported, as PyTorch counts the cudaMalloc failure of such a request. */
        vram_allocator_lock(a);
        oom_fail(a, size, size, stream, tag, "it is larger than any device");
        vram_allocator_unlock(a);
        return VRAM_ERR_OUT_OF_MEMORY;
    }
    vram_allocator_lock(a);
    uint64_t rsize = round_size(a, size);
    /* The fast path: an exact deferred block, unless pending frees or not-ready blocks are due
     * to be looked at first (malloc_locked does that every VRAM_POLL_EVERY mallocs). During a
     * capture the slots stay empty (see graph_mode_update), so every request goes on. */
    vram_block *b;
    if ((!(a->pending_head || a->not_ready_count) || (a->poll_countdown && --a->poll_countdown)) &&
        (b = recent_take(a, rsize, stream)) != NULL) {
        block_live(a, b, size, stream, tag);
        *ptr = (void *)(uintptr_t)b->addr;
        vram_allocator_unlock(a);
        return VRAM_OK;
    }
    return malloc_locked(a, size, rsize, stream, tag, ptr);
}

/* ---------------------------------------------------------------------------------------- */
/* free.                                                                                     */

/* Counts block b into (dir 1) or out of (dir -1) the pending blocks, from which the active
 * statistics follow (allocator_internal.h). */
static void pending_count(vram_allocator *a, const vram_block *b, int dir) {
    int pool = b->pool;
    a->pending_blocks[pool] += dir;
    a->pending_blocks[0] += dir;
    a->pending_bytes[pool] += dir * (int64_t)b->size;
    a->pending_bytes[0] += dir * (int64_t)b->size;
    a->pending_requested += dir * (int64_t)b->requested;
}

/* Returns a LIVE or PENDING block to the free structures (PyTorch's free_block). Always
 * inlined: it is most of free's fast path. `slot`: where b's live map entry was just found
 * (live_del_near), or UINT64_MAX. */
static inline __attribute__((always_inline)) void free_block(vram_allocator *a, vram_block *b, uint64_t slot) {
    int pool = b->pool;
    stat_pool_down(a->stats.requested_bytes, pool, (int64_t)b->requested);
    history_add(a, VRAM_EVENT_FREE_COMPLETED, b->addr, b->requested, b->stream, b->tag);
    if (b->uses) {
        free(b->uses);
        b->uses = NULL;
        b->nuses = 0;
    }
    if (b->events) {
        free(b->events);
        b->events = NULL;
        b->nevents = 0;
    }
    b->state = BLOCK_FREE;
    b->ready = !a->has_events;
    b->mapped_all = 1; /* a live block's pages are all mapped */
    b->free_seq = ++a->free_seq;
    b->requested = 0;
    if (__builtin_expect(a->free_fast, 1)) {
        recent_put(a, b, slot); /* keeps its live map entry */
    } else if ((a->graph_mode & GRAPH_BLOCKS) && b->graph && vram_graph_keep(a, b)) {
        return; /* kept in its private pool */
    } else if (vram_frees_deferred(a) && !vram_capturing(a)) {
        recent_put(a, b, slot);
    } else { /* coalesced now (during a capture the slots stay empty) */
        live_del_near(&a->live, b->addr, slot);
        vram_free_insert(a, b, b->addr, b->size);
        if (vram_capturing(a)) return; /* a capture waits for and releases nothing */
        if (!a->cfg.caching) {
            sync_all_streams(a);
            release_cache(a, UINT64_MAX);
        } else { /* garbage_collection_threshold */
            double high = a->cfg.garbage_collection_threshold * (double)a->limit;
            double reserved = (double)a->stats.reserved_bytes[0].current;
            if (reserved > high) release_cache(a, (uint64_t)(reserved - high));
        }
    }
}

/* Completes pending frees whose events have all finished (FIFO). */
void vram_process_pending(vram_allocator *a) {
    vram_block *b = a->pending_head;
    while (b) {
        vram_block *next = b->fnext;
        while (b->nevents && a->dev->ops->event_query(a->dev, b->events[b->nevents - 1]) == VRAM_OK)
            a->dev->ops->event_destroy(a->dev, b->events[--b->nevents]);
        if (!b->nevents) {
            if (b->fprev) b->fprev->fnext = b->fnext;
            else a->pending_head = b->fnext;
            if (b->fnext) b->fnext->fprev = b->fprev;
            else a->pending_tail = b->fprev;
            b->fprev = b->fnext = NULL;
            pending_count(a, b, -1);
            free_block(a, b, UINT64_MAX);
        }
        b = next;
    }
}

/* Records an event on each stream block b was used on besides its own (record_stream), into
 * b->events, and returns how many: all of them, or 0 when one could not be recorded (then the
 * streams were waited for instead, and the block needs no event). */
static uint16_t use_events_record(vram_allocator *a, vram_block *b) {
    b->events = calloc(b->nuses, sizeof *b->events);
    int n = 0;
    while (b->events && n < b->nuses && a->dev->ops->event_record(a->dev, b->uses[n], &b->events[n]) == VRAM_OK) n++;
    if (n == b->nuses) return (uint16_t)n;
    /* no room for the events, or one could not be recorded: wait for those streams now instead */
    for (int i = 0; i < n; i++) a->dev->ops->event_destroy(a->dev, b->events[i]);
    for (int i = 0; i < b->nuses; i++) stream_wait(a, b->uses[i]);
    return 0;
}

/* A freed block used on other streams (record_stream): records an event on each of them and
 * makes the block PENDING until they complete. Returns 0, the block left as it was, when no
 * event is needed after all (recording failed, and those streams were waited for instead).
 * During a capture no event can be recorded: the block stays pending with none, and
 * vram_pending_after_captures records them once the last capture has ended (as PyTorch's
 * allocator defers them), so that the work those streams queued before still covers it. */
static int free_pending(vram_allocator *a, vram_block *b) {
    if (!vram_capturing(a)) {
        b->nevents = use_events_record(a, b);
        if (!b->nevents) return 0;
    }
    b->state = BLOCK_PENDING;
    pending_count(a, b, 1);
    b->fnext = NULL;
    b->fprev = a->pending_tail;
    if (a->pending_tail) a->pending_tail->fnext = b;
    else a->pending_head = b;
    a->pending_tail = b;
    return 1;
}

void vram_pending_after_captures(vram_allocator *a) {
    for (vram_block *b = a->pending_head; b; b = b->fnext)
        if (!b->nevents && !b->events) b->nevents = use_events_record(a, b);
    vram_process_pending(a);
}

vram_status vram_allocator_free(vram_allocator *a, void *ptr) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "free: null allocator");
    vram_allocator_lock(a);
    uint64_t slot = UINT64_MAX;
    vram_block *b = vram_live_find(&a->live, (uint64_t)(uintptr_t)ptr, &slot);
    if (!b || b->state != BLOCK_LIVE) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "free of %p: not a live allocation of this allocator%s", ptr,
                          b && b->state == BLOCK_PENDING ? " (already freed, waiting for its streams)" : "");
    }
    int pool = b->pool;
    stat_pool_down(a->stats.allocation, pool, 1);
    stat_pool_down(a->stats.allocated_bytes, pool, (int64_t)b->size);
    if (b->size >= a->cfg.max_split_size) /* UINT64_MAX when unlimited: no block reaches it */
        stat_down(&a->stats.oversize_allocations, 1);
    if (__builtin_expect((int)b->tag != a->tag_solo, 0)) vram_tag_stats_down(a, b->tag, b->size, b->requested);
    history_add(a, VRAM_EVENT_FREE_REQUESTED, b->addr, b->requested, b->stream, b->tag);
    if (__builtin_expect(b->nuses != 0, 0) && a->has_events && free_pending(a, b)) {
        vram_allocator_unlock(a);
        return VRAM_OK;
    }
    free_block(a, b, slot);
    vram_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_record_stream(vram_allocator *a, void *ptr, vram_stream stream) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "record_stream: null allocator");
    vram_allocator_lock(a);
    vram_block *b = vram_live_get(&a->live, (uint64_t)(uintptr_t)ptr);
    vram_status st = VRAM_OK;
    if (!b || b->state != BLOCK_LIVE) {
        st = vram_error(VRAM_ERR_NOT_FOUND, "record_stream of %p: not a live allocation", ptr);
    } else if (stream != b->stream) {
        int known = 0;
        for (int i = 0; i < b->nuses; i++) known |= b->uses[i] == stream;
        if (!known) {
            vram_stream *u = realloc(b->uses, (b->nuses + 1u) * sizeof *u);
            if (!u || b->nuses == UINT16_MAX) {
                if (u) b->uses = u;
                st = u ? vram_error(VRAM_ERR_OUT_OF_MEMORY, "record_stream: too many streams for one block")
                       : vram_error(VRAM_ERR_HOST_MEMORY, "record_stream: host out of memory");
            } else {
                b->uses = u;
                b->uses[b->nuses++] = stream;
            }
        }
    }
    vram_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_block_info(vram_allocator *a, const void *ptr, size_t *size, size_t *requested,
                                      vram_tag *tag) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "block_info: null allocator");
    vram_allocator_lock(a);
    vram_block *b = vram_live_get(&a->live, (uint64_t)(uintptr_t)ptr);
    if (!b || b->state != BLOCK_LIVE) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "block_info of %p: not a live allocation", ptr);
    }
    if (size) *size = b->size;
    if (requested) *requested = b->requested;
    if (tag) *tag = b->tag;
    vram_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_set_tag(vram_allocator *a, void *ptr, vram_tag tag) {
    if (!a || tag >= VRAM_TAG_MAX) return vram_error(VRAM_ERR_INVALID_ARG, "set_tag: bad argument");
    vram_allocator_lock(a);
    vram_block *b = vram_live_get(&a->live, (uint64_t)(uintptr_t)ptr);
    if (!b || b->state != BLOCK_LIVE) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "set_tag of %p: not a live allocation", ptr);
    }
    if (tag != b->tag) {
        vram_tag_stats_down(a, b->tag, b->size, b->requested);
        vram_tag_stats_up(a, tag, b->size, b->requested);
        b->tag = tag;
    }
    vram_allocator_unlock(a);
    return VRAM_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Cache, limits, history.                                                                   */

/* empty_cache with the lock held and no capture under way. */
static vram_status empty_cache_locked(vram_allocator *a) {
    /* wait for the streams that pending frees were used on, as PyTorch's empty_cache does */
    for (vram_block *b = a->pending_head; b; b = b->fnext)
        for (int i = 0; i < b->nevents; i++) a->dev->ops->event_sync(a->dev, b->events[i]);
    if (a->pending_head) vram_process_pending(a);
    vram_status st = sync_all_streams(a); /* flushes the deferred blocks first */
    vram_pages_reap_zombies(a, 1);
    if (st == VRAM_OK) {
        if (a->pages_model) {
            /* every free block, not only the cached list, so nothing mapped is missed */
            for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
                for (vram_region *r = a->pools[p].regions; r; r = r->next)
                    for (vram_block *b = r->first; b; b = b->next)
                        if (b->state == BLOCK_FREE && b->deferred != DEFER_GRAPH) cached_add(a, b);
        }
        release_cache(a, UINT64_MAX);
        a->pages_moved = 0; /* a fresh start for one-stream merges (mergeable) */
        /* and for the page budget: peaks from here on (allocator_internal.h) */
        vram_stat *al = &a->stats.allocated_bytes[0], *re = &a->stats.reserved_bytes[0];
        if (al->peak > a->allocated_peak_before) a->allocated_peak_before = al->peak;
        if (re->peak > a->reserved_peak_before) a->reserved_peak_before = re->peak;
        al->peak = al->current;
        re->peak = re->current;
        a->allocated_high = 0;
        history_add(a, VRAM_EVENT_EMPTY_CACHE, 0, 0, 0, 0);
    }
    return st;
}

vram_status vram_allocator_empty_cache(vram_allocator *a) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "empty_cache: null allocator");
    vram_allocator_lock(a);
    if (vram_capturing(a)) {
        vram_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "empty_cache: not during a CUDA graph capture (it would wait for the GPU)");
    }
    vram_status st = empty_cache_locked(a);
    vram_allocator_unlock(a);
    return st;
}

/* Puts history ring `ring` of `entries` events in place (lock held), dropping the events
 * recorded so far; returns the old ring, for the caller to free unlocked. */
static vram_event *history_install(vram_allocator *a, vram_event *ring, uint32_t entries) {
    vram_event *old = a->history;
    a->history = ring;
    a->cfg.history_entries = entries;
    a->history_next = 0;
    return old;
}

/* Counts again, after max_split_size changed, the live blocks and the segments at or above it
 * (PyTorch's oversize statistics follow the threshold in force). */
static void oversize_recount(vram_allocator *a) {
    int64_t blocks = 0, segments = 0;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (vram_region *r = a->pools[p].regions; r; r = r->next) {
            if (!r->expandable && r->size >= a->cfg.max_split_size) segments++;
            for (vram_block *b = r->first; b; b = b->next)
                if (b->state == BLOCK_LIVE && b->size >= a->cfg.max_split_size) blocks++;
        }
    vram_stat *st[2] = {&a->stats.oversize_allocations, &a->stats.oversize_segments};
    int64_t now[2] = {blocks, segments};
    for (int i = 0; i < 2; i++) {
        st[i]->current = now[i];
        if (st[i]->peak < now[i]) st[i]->peak = now[i];
    }
    a->stats.max_split_size = a->cfg.max_split_size == UINT64_MAX ? -1 : (int64_t)a->cfg.max_split_size;
}

/* Puts configuration `next` (checked; its history_entries ignored: set_history changes the ring)
 * in force, with the lock held: what vram_allocator_set_config and set_caching share. */
static vram_status set_config_locked(vram_allocator *a, vram_alloc_config next) {
    const vram_alloc_config *now = &a->cfg;
    next.expandable_segments = !!next.expandable_segments;
    next.small_classes = !!next.small_classes;
    next.caching = !!next.caching;
    const char *fixed = next.page_size != now->page_size    ? "page_size"
                        : next.chunk_size != now->chunk_size ? "chunk_size"
                                                             : NULL;
    if (fixed)
        return vram_error(VRAM_ERR_INVALID_ARG, "set_config: %s is fixed when the allocator starts (it shapes the memory "
                                                "already reserved)", fixed);
    /* expandable_segments switches between growing by pages and by new segments, as PyTorch's
     * setting does for new segments; an allocator that started in the segments model on a device
     * with pages has no address ranges for them */
    if (next.expandable_segments && !now->expandable_segments && !a->pages_model && vram_device_has_pages(a->dev))
        return vram_error(VRAM_ERR_INVALID_ARG, "set_config: expandable_segments cannot be turned on for an allocator that "
                                                "started in the segments model (it has no address ranges for pages)");
    if (next.move_busy_pages != VRAM_CONF_AUTO) next.move_busy_pages = !!next.move_busy_pages;
    resolve_auto(a, &next);
    int path_changes = vram_config_defers(&next) != vram_frees_deferred(a) || next.small_classes != now->small_classes;
    if ((path_changes || next.caching != now->caching) && vram_capturing(a))
        return vram_error(VRAM_ERR_STATE, "caching, garbage_collection_threshold and small_classes do not "
                                          "change during a CUDA graph capture (deferred frees would be coalesced, and "
                                          "turning caching off empties the cache, which waits for the GPU)");
    vram_status st = VRAM_OK;
    if (now->caching && !next.caching) st = empty_cache_locked(a); /* coalesces deferred and held blocks too */
    else if (path_changes) deferred_flush(a); /* blocks deferred under the old rule go to the bins */
    if (st != VRAM_OK) return st;
    int split_changes = next.max_split_size != now->max_split_size;
    next.history_entries = now->history_entries;
    a->cfg = next;
    vram_free_path_update(a);
    a->limit = compute_limit(a);
    if (split_changes) oversize_recount(a);
    return VRAM_OK;
}

vram_status vram_allocator_set_config(vram_allocator *a, const vram_alloc_config *want) {
    if (!a || !want) return vram_error(VRAM_ERR_INVALID_ARG, "set_config: null argument");
    if (vram_alloc_config_check(want) != VRAM_OK)
        return vram_error(VRAM_ERR_INVALID_ARG, "set_config: %s", vram_last_error());
    /* a new history ring is allocated before the lock is taken, and put in only with the rest */
    vram_alloc_config before;
    vram_allocator_get_config(a, &before);
    uint32_t entries = want->history_entries;
    vram_event *ring = entries != before.history_entries && entries ? calloc(entries, sizeof *ring) : NULL;
    if (entries != before.history_entries && entries && !ring)
        return vram_error(VRAM_ERR_HOST_MEMORY, "set_config: host out of memory for a history of %u events", entries);
    vram_allocator_lock(a);
    vram_status st = set_config_locked(a, *want);
    if (st == VRAM_OK && entries != a->cfg.history_entries && (ring || !entries)) ring = history_install(a, ring, entries);
    vram_allocator_unlock(a);
    free(ring); /* the ring replaced, or the new one left unused */
    return st;
}

vram_status vram_allocator_set_caching(vram_allocator *a, int on) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "set_caching: null allocator");
    vram_allocator_lock(a);
    vram_alloc_config next = a->cfg;
    next.caching = on;
    vram_status st = set_config_locked(a, next);
    vram_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_set_memory_fraction(vram_allocator *a, double fraction) {
    if (!a || !(fraction > 0.0) || fraction > 1.0)
        return vram_error(VRAM_ERR_INVALID_ARG, "memory fraction %g is not in (0, 1]", fraction);
    vram_allocator_lock(a);
    a->cfg.memory_fraction = fraction;
    a->limit = compute_limit(a);
    vram_allocator_unlock(a);
    return VRAM_OK;
}

double vram_allocator_memory_fraction(vram_allocator *a) {
    if (!a) return 0.0;
    vram_allocator_lock(a);
    double f = a->cfg.memory_fraction;
    vram_allocator_unlock(a);
    return f;
}

vram_status vram_allocator_set_limit(vram_allocator *a, uint64_t bytes) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "set_limit: null allocator");
    vram_allocator_lock(a);
    a->cfg.max_reserved = bytes;
    a->limit = compute_limit(a);
    vram_allocator_unlock(a);
    return VRAM_OK;
}

uint64_t vram_allocator_limit(vram_allocator *a) { return a ? a->limit : 0; }

vram_status vram_allocator_set_history(vram_allocator *a, uint32_t entries) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "set_history: null allocator");
    if (entries > VRAM_HISTORY_MAX)
        return vram_error(VRAM_ERR_INVALID_ARG, "set_history: %u entries, more than the %u allowed", entries,
                          VRAM_HISTORY_MAX);
    vram_event *ring = entries ? calloc(entries, sizeof *ring) : NULL;
    if (entries && !ring) return vram_error(VRAM_ERR_HOST_MEMORY, "set_history: host out of memory for %u events", entries);
    vram_allocator_lock(a);
    vram_event *old = history_install(a, ring, entries);
    vram_allocator_unlock(a);
    free(old);
    return VRAM_OK;
}

uint64_t vram_allocator_history_count(vram_allocator *a) {
    if (!a) return 0;
    vram_allocator_lock(a);
    uint64_t n = a->cfg.history_entries ? a->history_next : 0;
    vram_allocator_unlock(a);
    return n;
}

const char *vram_allocator_oom_report(vram_allocator *a) { return a->oom_report; }

uint64_t vram_allocator_room(vram_allocator *a) {
    if (!a) return 0;
    vram_allocator_lock(a);
    uint64_t room = vram_room(a);
    vram_allocator_unlock(a);
    return room;
}

uint64_t vram_allocator_largest_free(vram_allocator *a) {
    if (!a) return 0;
    vram_allocator_lock(a);
    uint64_t largest = largest_cached(a, -1);
    vram_allocator_unlock(a);
    return largest;
}
