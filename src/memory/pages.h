/* pages.h — the pages model's page bitmaps, inline for malloc's search and pages.c (pages.c's
 * functions are declared in allocator_internal.h).
 *
 * A region of the pages model keeps three bitmaps, one bit per page: `mapped` (physical memory
 * behind the page), `chunk` (the page starts a chunk: one physical allocation, mapped and
 * unmapped whole) and `zombie` (an old address of pages moved by aliasing, not yet dropped).
 * The inline helpers below read and write them; vi_range_mapped is malloc's test whether a placement
 * needs the device at all.
 */
#ifndef VRAM_PAGES_H
#define VRAM_PAGES_H

#include "allocator_internal.h"

static inline uint64_t vi_bits_count(const uint64_t *map, uint64_t p0, uint64_t p1) {
    uint64_t n = 0;
    while (p0 < p1) {
        uint64_t w = p0 >> 6, off = p0 & 63, len = p1 - p0 < 64 - off ? p1 - p0 : 64 - off;
        uint64_t mask = (len == 64 ? ~0ull : ((1ull << len) - 1)) << off;
        n += (uint64_t)__builtin_popcountll(map[w] & mask);
        p0 += len;
    }
    return n;
}

/* First page in [p0, p1) whose bit equals `value`, or p1. */
static inline uint64_t vi_bits_find(const uint64_t *map, uint64_t p0, uint64_t p1, int value) {
    while (p0 < p1) {
        uint64_t w = p0 >> 6, off = p0 & 63;
        uint64_t word = value ? map[w] : ~map[w];
        word &= ~0ull << off;
        if (word) {
            uint64_t p = (w << 6) + (uint64_t)__builtin_ctzll(word);
            return p < p1 ? p : p1;
        }
        p0 = (w + 1) << 6;
    }
    return p1;
}

static inline void vi_bits_set(uint64_t *map, uint64_t p0, uint64_t p1, int value) {
    while (p0 < p1) {
        uint64_t w = p0 >> 6, off = p0 & 63, len = p1 - p0 < 64 - off ? p1 - p0 : 64 - off;
        uint64_t mask = (len == 64 ? ~0ull : ((1ull << len) - 1)) << off;
        if (value) map[w] |= mask;
        else map[w] &= ~mask;
        p0 += len;
    }
}

/* Whole pages inside [addr, addr+size) of region r: [*p0, *p1). */
static inline void vi_full_pages(const vram_allocator *a, const vi_region *r, uint64_t addr, uint64_t size,
                       uint64_t *p0, uint64_t *p1) {
    uint64_t P = a->page_size;
    unsigned sh = a->page_shift;
    uint64_t lo = (addr - r->base + P - 1) >> sh, hi = (addr + size - r->base) >> sh;
    *p0 = lo;
    *p1 = hi > lo ? hi : lo;
}

/* Pages model: whether every page under [addr, addr+rsize) of r is mapped (the fast path). */
static inline int vi_range_mapped(const vram_allocator *a, const vi_region *r, uint64_t addr, uint64_t rsize) {
    uint64_t p0 = (addr - r->base) >> a->page_shift, p1 = (addr + rsize - 1 - r->base) >> a->page_shift;
    if (p1 - p0 < 64 - (p0 & 63)) { /* within one bitmap word */
        uint64_t n = p1 - p0 + 1;
        uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << (p0 & 63);
        return (r->mapped[p0 >> 6] & mask) == mask;
    }
    const uint64_t *w = r->mapped + (p0 >> 6), *last = r->mapped + (p1 >> 6);
    if ((*w | ((1ull << (p0 & 63)) - 1)) != ~0ull) return 0; /* the first word, from p0 */
    while (++w < last)
        if (*w != ~0ull) return 0;
    uint64_t tail = (p1 & 63) == 63 ? ~0ull : (1ull << ((p1 & 63) + 1)) - 1; /* the last word, to p1 */
    return (*last & tail) == tail;
}

#endif
