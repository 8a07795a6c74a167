/* deferred.h — the inline half of deferred.c: what free's and malloc's fast paths do with the
 * recent slots and held stacks (block.h defines both). A free puts the block in a slot
 * (vi_recent_put), evicting the slot's previous block to its class's held stack or the bins; a
 * malloc of exactly that size takes it back (vi_recent_take), a small one of its class from the
 * held stack (vi_held_take), without search, split or merge.
 */
#ifndef VRAM_DEFERRED_H
#define VRAM_DEFERRED_H

#include "allocator_internal.h"
#include "live_map.h"

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
 * (vi_recent_leave). */

/* Empties slot k. */
static inline void vi_recent_empty(vram_allocator *a, unsigned k) {
    a->recent.slot[k] = NULL;
    a->recent.mask &= ~(1u << k);
}

/* A deferred block that leaves its slot for the bins: no longer deferred, out of the live map. */
static inline void vi_recent_leave(vram_allocator *a, vi_block *b) {
    b->deferred = DEFER_NONE;
    vi_live_del(&a->live, b->addr);
}

static inline void vi_recent_unslot(vram_allocator *a, vi_block *b) {
    unsigned k = vi_recent_slot(b->size);
    if (a->recent.slot[k] == b) vi_recent_empty(a, k);
    vi_recent_leave(a, b);
}

/* Small frees held per size class: the second level behind the `recent` slots. With
 * small_classes, a small block leaving its slot is not coalesced but pushed on its class's
 * stack (it keeps its live map entry, as a deferred block does); a request of that class that
 * finds no exact deferred block takes the most recently held block its stream may use, without
 * search, split or merge. Held blocks are coalesced into the bins (held_flush) only when a
 * request would otherwise map pages or create a segment, before pages are moved or released,
 * on an out-of-memory retry and by empty_cache: so no pool grows while held memory could have
 * served the request. */
static inline void vi_held_put(vram_allocator *a, vi_block *b) {
    unsigned c = vi_small_class(b->size);
    b->deferred = DEFER_HELD;
    b->fnext = a->held.stack[c]; /* a stack: newest first, linked through fnext */
    a->held.stack[c] = b;
    a->held.count++;
}

/* Whether a small block's size is its class's upper bound, as held stacks require: with classes
 * on every small block allocated has it, but one allocated while they were off (caching, a
 * garbage collection threshold or small_classes switched at run time: vram_allocator_set_config)
 * has its 512-byte rounding. */
static inline int vi_class_sized(uint64_t size) {
    if (size <= 4096) return 1; /* 512-byte classes */
    uint64_t step = 1ull << (63 - VRAM_CLASS_BITS - __builtin_clzll(size - 1));
    return (size & (step - 1)) == 0;
}

/* Sends a block that left its `recent` slot on: held, or into the bins (returning the block it
 * became part of there; NULL when held). */
static inline vi_block *vi_recent_evict(vram_allocator *a, vi_block *b) {
    if (b->pool == a->held_pool && vi_class_sized(b->size)) {
        vi_held_put(a, b); /* keeps its live map entry */
        return NULL;
    }
    vi_recent_leave(a, b);
    b->free_seq = ++a->streams.free_seq; /* its owner's list is ordered by free_seq */
    return vi_free_insert(a, b, b->addr, b->size);
}

static inline __attribute__((always_inline)) void vi_recent_put(vram_allocator *a, vi_block *b, uint64_t slot) {
    /* Beside a free block the freed block is coalesced at once, as PyTorch coalesces every free:
     * deferred there, it stays a hole of its own size that the next request of that size takes
     * back wherever it lies, where the best fit over the merged hole would place it elsewhere.
     * The free end of the range is the exception while it is the pool's one free block: a search
     * (which, as PyTorch's, takes the free end last) could then only place the request where the
     * slot does, so an allocate/free loop keeps its fast path, for one load of the count. With
     * other free blocks in the bins the search may choose one of them. Between live blocks,
     * deferral changes nothing that a search would place otherwise (docs/allocator-evidence.md
     * §2). */
    vi_block *below = b->prev, *above = b->next;
    /* (any free neighbour, not only one it may merge with: asking mergeable() held more memory) */
    if ((below && below->state == BLOCK_FREE && below->deferred < DEFER_HELD) ||
        (above && above->state == BLOCK_FREE && above->deferred < DEFER_HELD &&
         (above->next || a->pools[b->pool].nfree > 1))) {
        vi_live_del_near(&a->live, b->addr, slot);
        vi_free_insert(a, b, b->addr, b->size);
        return;
    }
    unsigned k = vi_recent_slot(b->size);
    vi_block *old = a->recent.slot[k];
    b->deferred = DEFER_RECENT;
    a->recent.slot[k] = b;
    if (!old) {
        a->recent.mask |= 1u << k;
        return;
    }
    vi_recent_evict(a, old); /* may absorb b, which then leaves its slot */
}

/* Takes held block b, found after `prev` (NULL: first) in the list of its class c, out of it. */
static inline void vi_held_unlink(vram_allocator *a, vi_block *b, vi_block *prev, unsigned c) {
    if (prev) prev->fnext = b->fnext;
    else a->held.stack[c] = b->fnext;
    b->fnext = NULL;
    a->held.count--;
    b->deferred = DEFER_NONE;
}

/* The held block that serves a request of class size rsize on `stream` (its live map entry
 * kept), or NULL. Only the list's first few blocks are looked at. */
static inline vi_block *vi_held_take(vram_allocator *a, uint64_t rsize, vram_stream stream) {
    unsigned c = vi_small_class(rsize);
    vi_block *b = a->held.stack[c], *prev = NULL;
    for (int i = 0; b && i < 4; prev = b, b = b->fnext, i++) {
        if (b->ready || b->stream == stream) {
            vi_held_unlink(a, b, prev, c);
            return b;
        }
    }
    return NULL;
}

/* The deferred block that serves a request of exactly rsize on `stream`, taken out of its slot
 * (it keeps its live map entry), or NULL. */
static inline vi_block *vi_recent_take(vram_allocator *a, uint64_t rsize, vram_stream stream) {
    unsigned k = vi_recent_slot(rsize);
    vi_block *b = a->recent.slot[k];
    if (!b || b->size != rsize || (!b->ready && b->stream != stream)) return NULL;
    vi_recent_empty(a, k);
    b->deferred = DEFER_NONE;
    return b;
}

#endif
