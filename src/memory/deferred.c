/* deferred.c — frees kept uncoalesced: the 16 exact-size `recent` slots and, behind them, the
 * per-class `held` stacks of small blocks (block.h: DEFER_RECENT, DEFER_HELD). The fast paths
 * are deferred.h's; this file flushes the deferred blocks into the bins, which happens before a
 * free block is split, before pages are mapped, moved or released, before a segment is made and
 * by empty_cache, so that deferral changes no placement but exact-size reuse and never grows
 * memory while a deferred block could have served a request (docs/allocator.md; why before a
 * split, and what the held stacks save: docs/allocator-evidence.md §3, §4).
 */
#include "deferred.h"

/* Sends every deferred block on (vi_recent_evict). With `than` (a free block of `pool` that a
 * search for rsize chose), returns whether the search must run again: a resulting block of the
 * pool fits rsize better than it, or took it in. */
int vi_recent_flush(vram_allocator *a, int pool, uint64_t rsize, const vi_block *than) {
    uint64_t addr = than ? than->addr : 0, size = than ? than->size : 0; /* `than` may be merged away */
    int again = 0;
    while (a->recent.mask) {
        unsigned k = (unsigned)__builtin_ctz(a->recent.mask);
        vi_block *b = a->recent.slot[k];
        vi_recent_empty(a, k);
        b = vi_recent_evict(a, b);
        if (than && b && b->region->pool == pool && b->size >= rsize)
            again |= b->size < size || (addr >= b->addr && addr < b->addr + b->size);
    }
    return again;
}

/* Coalesces every held block into the bins. */
static void held_flush(vram_allocator *a) {
    for (unsigned c = 0; a->held.count; c++) {
        while (a->held.stack[c]) {
            vi_block *b = a->held.stack[c];
            vi_held_unlink(a, b, NULL, c);
            vi_live_del(&a->live, b->addr);
            b->free_seq = ++a->streams.free_seq; /* its owner's list is ordered by free_seq */
            vi_free_insert(a, b, b->addr, b->size);
        }
    }
}

/* Coalesces every deferred block: the slots' first (their small blocks go to the stacks), then
 * the stacks. */
void vi_deferred_flush(vram_allocator *a) {
    if (a->recent.mask) vi_recent_flush(a, 0, 0, NULL);
    if (a->held.count) held_flush(a);
}
