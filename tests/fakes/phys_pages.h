/* phys_pages.h — a model of what physical memory lies under a test device's reserved ranges, so
 * that tests can check page moves, which the sim device only counts.
 *
 * Each 2 MiB page of a reserved range holds the id of the physical page mapped there (0: none;
 * ids are never reused) and whether it is an alias source. The device calls are checked as the
 * CUDA driver (src/backends/cuda.c) would refuse them: page_map only over unmapped pages,
 * page_unmap only over mapped pages that are no alias source, page_alias from mapped pages that
 * are no alias source to unmapped ones (both ranges then show the same ids; the source pages
 * become alias sources), page_drop only over alias sources. A refused call is counted in
 * `violations` (the first described in `error`) and changes nothing. Before pages leave an
 * address (unmap, drop) the test's `on_unmap` hook sees the range, to check that no live block
 * and no queued work still uses it.
 *
 *   phys_pages_reserve / _release   follow va_reserve / va_release
 *   phys_pages_map / _unmap / _alias / _drop   model (and check) the page calls
 *   phys_pages_id(pp, addr)         the physical page under addr: an id, 0 when unmapped,
 *                                   UINT64_MAX outside every reserved range (segments)
 */
#ifndef VRAM_TESTS_PHYS_PAGES_H
#define VRAM_TESTS_PHYS_PAGES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PHYS_PAGE (2ull << 20)
#define PHYS_RANGES 8

typedef struct phys_range {
    uint64_t base, npages;
    uint64_t *id;    /* per page: physical page id, 0 when unmapped */
    uint8_t *source; /* per page: an alias source (mapped, its memory now also shown elsewhere) */
} phys_range;

typedef struct phys_pages {
    phys_range ranges[PHYS_RANGES];
    uint64_t next_id;
    uint64_t violations;
    char error[256];
    void (*on_unmap)(void *ctx, uint64_t addr, uint64_t size);
    void *ctx;
} phys_pages;

static inline void phys_pages_refuse(phys_pages *pp, const char *call, uint64_t addr, uint64_t size, const char *why) {
    if (!pp->violations++)
        snprintf(pp->error, sizeof pp->error, "%s of [%#llx, +%llu MiB): %s", call, (unsigned long long)addr,
                 (unsigned long long)(size >> 20), why);
}

static inline void phys_pages_reserve(phys_pages *pp, uint64_t base, uint64_t size) {
    for (int i = 0; i < PHYS_RANGES; i++) {
        phys_range *r = &pp->ranges[i];
        if (r->npages) continue;
        r->base = base;
        r->npages = (size + PHYS_PAGE - 1) / PHYS_PAGE;
        r->id = calloc(r->npages, sizeof *r->id);
        r->source = calloc(r->npages, 1);
        if (!r->id || !r->source) phys_pages_refuse(pp, "va_reserve", base, size, "host out of memory for the model");
        return;
    }
    phys_pages_refuse(pp, "va_reserve", base, size, "more reservations than the model keeps");
}

static inline void phys_pages_release(phys_pages *pp, uint64_t base) {
    for (int i = 0; i < PHYS_RANGES; i++) {
        phys_range *r = &pp->ranges[i];
        if (!r->npages || r->base != base) continue;
        free(r->id);
        free(r->source);
        *r = (phys_range){0};
    }
}

/* The range holding [addr, addr+size) whole and page-aligned, with *first its first page; NULL
 * (and counted) otherwise. */
static inline phys_range *phys_pages_find(phys_pages *pp, const char *call, uint64_t addr, uint64_t size,
                                          uint64_t *first) {
    for (int i = 0; i < PHYS_RANGES; i++) {
        phys_range *r = &pp->ranges[i];
        if (!r->npages || addr < r->base || addr - r->base >= r->npages * PHYS_PAGE) continue;
        if ((addr - r->base) % PHYS_PAGE || size % PHYS_PAGE || !size ||
            (addr - r->base) / PHYS_PAGE + size / PHYS_PAGE > r->npages)
            break;
        *first = (addr - r->base) / PHYS_PAGE;
        return r;
    }
    phys_pages_refuse(pp, call, addr, size, "not whole pages of one reserved range");
    return NULL;
}

/* Whether every page of [p, p+n) of r is mapped (want 1) or unmapped (want 0), and, mapped,
 * an alias source or not as `source` says (-1: either). */
static inline int phys_pages_are(const phys_range *r, uint64_t p, uint64_t n, int want, int source) {
    for (uint64_t i = p; i < p + n; i++) {
        if ((r->id[i] != 0) != want) return 0;
        if (want && source >= 0 && r->source[i] != source) return 0;
    }
    return 1;
}

static inline int phys_pages_map(phys_pages *pp, uint64_t addr, uint64_t size) {
    uint64_t p;
    phys_range *r = phys_pages_find(pp, "page_map", addr, size, &p);
    if (!r) return -1;
    if (!phys_pages_are(r, p, size / PHYS_PAGE, 0, -1)) {
        phys_pages_refuse(pp, "page_map", addr, size, "some page is mapped already");
        return -1;
    }
    for (uint64_t i = p; i < p + size / PHYS_PAGE; i++) r->id[i] = ++pp->next_id;
    return 0;
}

/* page_unmap (drop 0) and page_drop (drop 1). */
static inline int phys_pages_unmap(phys_pages *pp, uint64_t addr, uint64_t size, int drop) {
    const char *call = drop ? "page_drop" : "page_unmap";
    uint64_t p;
    phys_range *r = phys_pages_find(pp, call, addr, size, &p);
    if (!r) return -1;
    if (!phys_pages_are(r, p, size / PHYS_PAGE, 1, drop)) {
        phys_pages_refuse(pp, call, addr, size, drop ? "some page is no alias source" : "some page is unmapped or an alias source");
        return -1;
    }
    if (pp->on_unmap) pp->on_unmap(pp->ctx, addr, size);
    for (uint64_t i = p; i < p + size / PHYS_PAGE; i++) {
        r->id[i] = 0;
        r->source[i] = 0;
    }
    return 0;
}

static inline int phys_pages_alias(phys_pages *pp, uint64_t src, uint64_t dst, uint64_t size) {
    uint64_t ps, pd;
    phys_range *rs = phys_pages_find(pp, "page_alias", src, size, &ps), *rd;
    if (!rs || !(rd = phys_pages_find(pp, "page_alias", dst, size, &pd))) return -1;
    if (!phys_pages_are(rs, ps, size / PHYS_PAGE, 1, 0) || !phys_pages_are(rd, pd, size / PHYS_PAGE, 0, -1)) {
        phys_pages_refuse(pp, "page_alias", src, size, "source not mapped (or an alias source already) or target mapped");
        return -1;
    }
    for (uint64_t i = 0; i < size / PHYS_PAGE; i++) {
        rd->id[pd + i] = rs->id[ps + i];
        rs->source[ps + i] = 1;
    }
    return 0;
}

static inline uint64_t phys_pages_id(const phys_pages *pp, uint64_t addr) {
    for (int i = 0; i < PHYS_RANGES; i++) {
        const phys_range *r = &pp->ranges[i];
        if (r->npages && addr >= r->base && addr - r->base < r->npages * PHYS_PAGE)
            return r->id[(addr - r->base) / PHYS_PAGE];
    }
    return UINT64_MAX;
}

static inline void phys_pages_free(phys_pages *pp) {
    for (int i = 0; i < PHYS_RANGES; i++) phys_pages_release(pp, pp->ranges[i].base);
}

#endif
