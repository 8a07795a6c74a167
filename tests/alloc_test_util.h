/* alloc_test_util.h — what the caching allocator's case-by-case tests share (test_alloc.c,
 * test_alloc_streams.c, test_alloc_config.c): the KiB/MiB/GiB units, an allocator opened on a
 * device spec with the layouts' settings and closed after a consistency check, and two small
 * probes of what a request gets and what a statistic holds. Unlike open_alloc.h, the allocator
 * here uses chunk_divisor:0 and takes the "events:SIZE" spec of the test device with streams.
 */
#ifndef VRAM_TESTS_ALLOC_TEST_UTIL_H
#define VRAM_TESTS_ALLOC_TEST_UTIL_H

#include <string.h>

#include "check.h"
#include "fakes/event_device.h"
#include "vram/alloc.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

/* A device by its spec ("events:SIZE": the test device whose stream work the test controls,
 * fakes/event_device.h) and an allocator on it with `conf` over the defaults and chunk_divisor:0:
 * the layouts in the tests are worked out for chunks of chunk_size whatever a request's size
 * (chunks in proportion to the request are test_chunk_divisor.c's). */
static inline vram_allocator *open_alloc(const char *spec, const char *conf, vram_device **dev) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    cfg.chunk_divisor = 0;
    if (vram_alloc_config_parse(conf, &cfg) != VRAM_OK) return NULL;
    if ((strncmp(spec, "events:", 7) ? vram_device_open(spec, dev) : event_device_open(spec + 7, dev)) != VRAM_OK) return NULL;
    vram_allocator *a = NULL;
    if (vram_allocator_new(*dev, &cfg, &a) != VRAM_OK) return NULL;
    return a;
}

/* Checks the allocator's invariants before it goes, so that every test ends with them. */
static inline void close_alloc(vram_allocator *a, vram_device *dev) {
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* The size of the block a request of `request` bytes gets on stream 0 (allocated and freed at
 * once), 0 when the request fails: how rounding and size classes answer, without keeping it. */
static inline size_t block_size(vram_allocator *a, size_t request) {
    void *p;
    size_t size = 0;
    if (vram_allocator_malloc(a, request, 0, 0, &p) != VRAM_OK) return 0;
    vram_allocator_block_info(a, p, &size, NULL, NULL);
    vram_allocator_free(a, p);
    return size;
}

/* Whether a statistic holds exactly these four figures. */
static inline int stat_is(const vram_stat *s, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
    return s->current == current && s->peak == peak && s->allocated == allocated && s->freed == freed;
}

#endif
