/* search.h — the best-fit search over a pool's bins, inline so that malloc's first search makes
 * no call (bins.c's vi_find_free is the out-of-line copy for its later ones).
 *
 * From the request's bin on, through the bins' bitmap, each non-empty bin's first blocks are
 * scanned for the best fit the requesting stream may use (vi_bin_best). In the pages model a
 * block whose pages are mapped wins over a smaller one that needs pages mapped, within
 * VRAM_MAPPED_SEARCH_BINS bins; *place says where in the block the allocation goes (its start,
 * its mapped end, or straddling the free block before it).
 */
#ifndef VRAM_SEARCH_H
#define VRAM_SEARCH_H

#include "allocator_internal.h"
#include "pages.h"

/* Whether free block b may serve rsize under max_split_size (only blocks of segments are
 * limited), once it is known to be large enough and usable by the requesting stream. */
static inline int vi_split_allows(const vram_allocator *a, const vi_block *b, uint64_t rsize) {
    if (a->cfg.max_split_size != UINT64_MAX && !b->region->expandable) {
        if (rsize < a->cfg.max_split_size && b->size >= a->cfg.max_split_size) return 0;
        if (rsize >= a->cfg.max_split_size && b->size >= rsize + a->cfg.max_non_split_rounding) return 0;
    }
    return 1;
}

/* Whether free block b lies in pages (an expandable region) rather than a segment, without
 * reading its region unless the allocator holds both kinds. */
static inline int vi_in_pages(const vram_allocator *a, const vi_block *b) {
    return a->pages_model && (!a->segments_too || b->region->expandable);
}

/* Smaller first, then lower address (keeps the used address range compact). */
static inline int vi_better_fit(const vi_block *x, const vi_block *y) {
    return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

/* Best fit among the first blocks of one bin (the scan is bounded; bins are narrow). In the
 * pages model a block whose pages are already mapped wins over a smaller one that would need
 * pages mapped: *mapped tells which kind was returned. A block of a segment (the segments model,
 * or segments made after expandable_segments was turned off at run time) is all mapped. */
static inline vi_block *vi_bin_best(const vram_allocator *a, vi_block *list, uint64_t rsize, vram_stream s,
                                   int pages_only, int *mapped, int *at_end) {
    vi_block *best = NULL, *best_mapped = NULL;
    int scanned = 0, end = 0;
    for (vi_block *b = list; b && scanned < 32; b = b->fnext, scanned++) {
        if (b->size < rsize || (!b->ready && b->stream != s)) continue; /* the common rejects */
        /* pages_only (the pages model, no segment made: vi_find_free reads it once per search)
         * answers what a mixed allocator asks of each block: every block lies in pages, where
         * max_split_size does not apply */
        if (!pages_only) {
            if (!vi_split_allows(a, b, rsize)) continue;
            if (!vi_in_pages(a, b)) {
                if (!best_mapped || vi_better_fit(b, best_mapped)) {
                    best_mapped = b;
                    end = 0;
                }
                if (!a->pages_model && b->size == rsize) break;
                continue;
            }
        }
        if (!best_mapped || vi_better_fit(b, best_mapped)) {
            /* its start mapped, or else its end: then the block is carved from the end */
            int e = -1;
            if (b->mapped_all || vi_range_mapped(a, b->region, b->addr, rsize)) e = 0;
            else if (b->size > rsize && vi_range_mapped(a, b->region, b->addr + b->size - rsize, rsize)) e = 1;
            if (e >= 0) {
                best_mapped = b;
                end = e;
                /* no early exit on an exact size: of equal blocks the lowest address wins, as in
                 * PyTorch's best fit (docs/allocator-evidence.md §5) */
                continue;
            }
        }
        if (!best || vi_better_fit(b, best)) best = b;
    }
    *mapped = best_mapped != NULL || !a->pages_model;
    *at_end = best_mapped ? end : 0;
    return best_mapped ? best_mapped : best;
}

/* Where in the chosen free block b the allocation goes (pages model). */
enum {
    PLACE_START = 0, /* at b's start */
    PLACE_END = 1,   /* at b's end: its mapped part */
    PLACE_PREV = 2,  /* at b->prev's start: all of b->prev, then the head of b (see vi_find_free) */
};

static inline uint64_t vi_place_addr(const vi_block *b, uint64_t rsize, int place) {
    return place == PLACE_START ? b->addr : place == PLACE_END ? b->addr + b->size - rsize : b->prev->addr;
}

/* Pages model: how many pages under [addr, addr+rsize) of r are not mapped. */
static inline uint64_t vi_unmapped_pages(const vram_allocator *a, const vi_region *r, uint64_t addr, uint64_t rsize) {
    uint64_t p0 = (addr - r->base) >> a->page_shift, p1 = (addr + rsize - r->base + a->page_size - 1) >> a->page_shift;
    return (p1 - p0) - vi_bits_count(r->mapped, p0, p1);
}

/* Pages model: whether the allocation of rsize for stream s, chosen to start at free block b,
 * may rather take all of the free block before b and then the head of b. Two free blocks
 * lie side by side unmerged when one may be used by its owner stream only (not ready) and the
 * other by any stream; for the owner they are one free range. On a single stream, whose freed
 * blocks are never made ready, they would otherwise stay apart from the ready free end of the
 * range for good: small blocks freed there would never be reused, and a larger request would
 * map fresh pages beyond a free mapped block instead of extending it (docs/allocator-evidence.md
 * §6). vi_find_free takes the straddle when it needs no more pages mapped than b's own
 * placement. */
static inline int vi_straddle_possible(const vram_allocator *a, const vi_block *b, uint64_t rsize, vram_stream s) {
    const vi_block *x = b->prev;
    return vi_in_pages(a, b) && x && x->state == BLOCK_FREE && !x->deferred && x->size < rsize &&
           (x->ready || x->stream == s);
}

/* The free block to serve rsize on stream s: the best fit, except that in the pages model a
 * slightly larger block with its pages mapped is preferred to one that would make pages move
 * (each page mapped costs tens of microseconds of driver time on a GPU). The search for a
 * mapped block goes at most VRAM_MAPPED_SEARCH_BINS bins past the first fit (8 powers of two;
 * fewer held more memory: docs/allocator-evidence.md §7). *place tells where in the block the
 * allocation goes, *mapped whether every page under it is mapped already (always, outside the
 * pages model), so that malloc need not ask again. */
#define VRAM_MAPPED_SEARCH_BINS 256

static inline __attribute__((always_inline)) vi_block *vi_find_free_inline(vram_allocator *a, vi_pool *p, uint64_t rsize,
                                                                         vram_stream s, int *place, int *mapped) {
    vi_block *fallback = NULL;
    unsigned first = 0;
    const int pages_only = a->pages_model && !a->segments_too; /* see vi_bin_best */
    *place = PLACE_START;
    *mapped = 0;
    for (unsigned i = vi_bin_next(p, vi_bin_of(rsize)); i < VRAM_NBINS; i = vi_bin_next(p, i + 1)) {
        int is_mapped, end;
        vi_block *b = vi_bin_best(a, p->free.bins[i], rsize, s, pages_only, &is_mapped, &end);
        if (!b) continue;
        if (is_mapped) {
            *place = end ? PLACE_END : PLACE_START;
            *mapped = 1;
            /* b's own placement maps nothing: the straddle must not either */
            if (!end && vi_straddle_possible(a, b, rsize, s) && vi_range_mapped(a, b->region, b->prev->addr, rsize))
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
    if (fallback && vi_straddle_possible(a, fallback, rsize, s)) {
        uint64_t straddled = vi_unmapped_pages(a, fallback->region, fallback->prev->addr, rsize);
        if (straddled <= vi_unmapped_pages(a, fallback->region, fallback->addr, rsize)) {
            *place = PLACE_PREV;
            *mapped = straddled == 0;
        }
    }
    return fallback;
}

#endif
