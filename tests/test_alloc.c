/* test_alloc.c — the caching allocator's behaviour, case by case, with exact numbers:
 * rounding and pools, statistics, coalescing, page reuse, limits and OOM reports, bad frees,
 * tags, empty_cache, both memory models, streams and record_stream (on a device whose stream
 * work the test controls), snapshots, real host memory, and several threads at once.
 */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "fakes/event_device.h"
#include "vram/alloc.h"
#include "vram/snapshot.h"

#define KiB 1024ull
#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

/* A device by its spec ("events:SIZE": the test device whose stream work the test controls,
 * fakes/event_device.h) and an allocator on it with `conf` over the defaults and chunk_divisor:0:
 * the layouts below are worked out for chunks of chunk_size whatever a request's size (chunks in
 * proportion to the request are test_chunk_divisor.c's). */
static vram_allocator *open_alloc(const char *spec, const char *conf, vram_device **dev) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    cfg.chunk_divisor = 0;
    if (vram_alloc_config_parse(conf, &cfg) != VRAM_OK) return NULL;
    if ((strncmp(spec, "events:", 7) ? vram_device_open(spec, dev) : event_device_open(spec + 7, dev)) != VRAM_OK) return NULL;
    vram_allocator *a = NULL;
    if (vram_allocator_new(*dev, &cfg, &a) != VRAM_OK) return NULL;
    return a;
}

static void close_alloc(vram_allocator *a, vram_device *dev) {
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

static void test_basic_stats(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:8GiB", "", &dev);
    CHECK(a != NULL, "open");
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_allocator_malloc(a, 1000, 0, VRAM_TAG_ACTIVATION, &p));
    CHECK(p != NULL && (uintptr_t)p % 512 == 0, "aligned pointer %p", p);
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[VRAM_POOL_ALL].current == 1024, "rounded to 1024, got %lld",
          (long long)st.allocated_bytes[0].current);
    CHECK(st.requested_bytes[VRAM_POOL_ALL].current == 1000, "requested 1000");
    CHECK(st.allocated_bytes[VRAM_POOL_SMALL].current == 1024 && st.allocated_bytes[VRAM_POOL_LARGE].current == 0,
          "small pool");
    CHECK(st.reserved_bytes[VRAM_POOL_ALL].current == (int64_t)(2 * MiB), "one 2 MiB page mapped, got %lld",
          (long long)st.reserved_bytes[0].current);
    CHECK(st.segment[VRAM_POOL_ALL].current == 1, "one mapped range");
    CHECK(st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.current == 1024, "tag bytes");
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB + 1, 0, VRAM_TAG_PARAMETER, &q));
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[VRAM_POOL_LARGE].current == (int64_t)(5 * MiB + 512), "large block rounded to 512");
    CHECK(st.reserved_bytes[VRAM_POOL_LARGE].current == (int64_t)(6 * MiB), "three pages for 5 MiB + 1");
    size_t size, req;
    vram_tag tag;
    CHECK_OK(vram_allocator_block_info(a, q, &size, &req, &tag));
    CHECK(size == 5 * MiB + 512 && req == 5 * MiB + 1 && tag == VRAM_TAG_PARAMETER, "block info");
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_free(a, q));
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[0].current == 0 && st.allocated_bytes[0].peak == (int64_t)(5 * MiB + 512 + 1024),
          "peak allocated");
    CHECK(st.allocation[0].allocated == 2 && st.allocation[0].freed == 2, "allocation counts");
    CHECK(st.reserved_bytes[0].current == (int64_t)(8 * MiB), "cache keeps pages");
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "empty_cache releases every page, %lld left",
          (long long)st.reserved_bytes[0].current);
    CHECK(st.segment[0].current == 0, "no mapped range left");
    vram_allocator_reset_peak_stats(a);
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[0].peak == 0, "reset peak");
    vram_allocator_reset_accumulated_stats(a);
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocation[0].allocated == 0 && st.num_device_alloc == 0, "reset accumulated");
    close_alloc(a, dev);
}

static void test_bad_frees(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    void *p;
    CHECK_OK(vram_allocator_malloc(a, 4096, 0, 0, &p));
    CHECK(vram_allocator_free(a, (char *)p + 512) == VRAM_ERR_NOT_FOUND, "interior pointer");
    CHECK(strstr(vram_last_error(), "not a live allocation") != NULL, "message: %s", vram_last_error());
    CHECK(vram_allocator_free(a, NULL) == VRAM_ERR_NOT_FOUND, "null pointer");
    CHECK(vram_allocator_free(a, (void *)0x1234) == VRAM_ERR_NOT_FOUND, "wild pointer");
    CHECK_OK(vram_allocator_free(a, p));
    CHECK(vram_allocator_free(a, p) == VRAM_ERR_NOT_FOUND, "double free");
    CHECK(vram_allocator_record_stream(a, p, 3) == VRAM_ERR_NOT_FOUND, "record_stream after free");
    CHECK(vram_allocator_malloc(a, 16, 0, VRAM_TAG_MAX, &p) == VRAM_ERR_INVALID_ARG, "bad tag");
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocation[0].current == 0 && st.allocation[0].freed == 1, "bad frees change nothing");
    close_alloc(a, dev);
}

static void test_coalesce_and_reuse(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    void *p[4];
    for (int i = 0; i < 4; i++) CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &p[i]));
    CHECK((uintptr_t)p[1] == (uintptr_t)p[0] + 3 * MiB, "blocks are adjacent");
    CHECK_OK(vram_allocator_free(a, p[1]));
    CHECK_OK(vram_allocator_free(a, p[2]));
    void *big;
    CHECK_OK(vram_allocator_malloc(a, 6 * MiB, 0, 0, &big));
    CHECK(big == p[1], "two freed neighbours coalesce and serve a request of their joint size");
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == (int64_t)(12 * MiB), "no new pages: %lld",
          (long long)st.reserved_bytes[0].current);
    CHECK_OK(vram_allocator_free(a, big));
    CHECK_OK(vram_allocator_free(a, p[0]));
    CHECK_OK(vram_allocator_free(a, p[3]));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* Fully free pages are moved to where they are needed instead of raising reserved memory. */
static void test_page_reuse(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    void *x, *y, *z;
    CHECK_OK(vram_allocator_malloc(a, 10 * MiB, 0, 0, &x));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &y)); /* pins the range after x */
    CHECK_OK(vram_allocator_free(a, x));
    /* 12 MiB does not fit in x's 10 MiB hole: it goes after y and needs 6 new pages, which
     * come from x's 5 free pages plus one new page. */
    CHECK_OK(vram_allocator_malloc(a, 12 * MiB, 0, 0, &z));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].peak == (int64_t)(14 * MiB), "reserved peaks at what is live (14 MiB), got %lld",
          (long long)st.reserved_bytes[0].peak);
    CHECK(st.num_device_free == 5, "x's 5 pages were unmapped, one chunk each, got %llu",
          (unsigned long long)st.num_device_free);
    CHECK_OK(vram_allocator_free(a, y));
    CHECK_OK(vram_allocator_free(a, z));
    close_alloc(a, dev);
}

/* A map of several chunks that the device runs out of memory for part-way is undone whole: the
 * allocator answers out of memory and holds nothing it did not hold before. Another allocator on
 * the same device holds memory this one does not know about. */
static void test_chunk_map_all_or_nothing(void) {
    vram_device *dev;
    CHECK_OK(vram_device_open("sim:24MiB", &dev));
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_alloc_config_parse("chunk_size_mb:8,chunk_divisor:0", &cfg));
    vram_allocator *other, *a;
    CHECK_OK(vram_allocator_new(dev, &cfg, &other));
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    void *x, *y;
    CHECK_OK(vram_allocator_malloc(other, 8 * MiB, 0, 0, &x));
    /* 20 MiB = chunks of 8, 8 and 4 MiB: the first fits, the second does not */
    CHECK(vram_allocator_malloc(a, 20 * MiB, 0, 0, &y) == VRAM_ERR_OUT_OF_MEMORY, "out of memory, got %s",
          vram_last_error());
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "nothing left mapped, got %lld", (long long)st.reserved_bytes[0].current);
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_malloc(a, 16 * MiB, 0, 0, &y)); /* what does fit still maps */
    CHECK_OK(vram_allocator_free(a, y));
    CHECK_OK(vram_allocator_free(other, x));
    CHECK_OK(vram_allocator_check(other));
    vram_allocator_destroy(a);
    vram_allocator_destroy(other);
    vram_device_close(dev);
}

/* Chunks: with chunk_size_mb:8 a 20 MiB block is mapped as chunks of 8, 8 and 4 MiB (three
 * physical allocations); pages move and return to the device only as whole chunks. */
static void test_chunks(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "chunk_size_mb:8", &dev);
    void *x, *y, *z;
    CHECK_OK(vram_allocator_malloc(a, 20 * MiB, 0, 0, &x));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_device_alloc == 3, "20 MiB mapped as 3 chunks, got %llu", (unsigned long long)st.num_device_alloc);
    CHECK(st.reserved_bytes[0].current == (int64_t)(20 * MiB), "20 MiB reserved");
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &y)); /* pins the range after x */
    CHECK_OK(vram_allocator_free(a, x));
    /* 24 MiB does not fit in x's hole: it goes after y and takes x's chunks (20 MiB) plus 4 MiB new */
    CHECK_OK(vram_allocator_malloc(a, 24 * MiB, 0, 0, &z));
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_device_free == 3, "x's three chunks unmapped, got %llu", (unsigned long long)st.num_device_free);
    CHECK(st.reserved_bytes[0].peak == (int64_t)(26 * MiB), "reserved peaks at what is live (26 MiB), got %lld",
          (long long)st.reserved_bytes[0].peak);
    CHECK_OK(vram_allocator_check(a));
    /* a chunk partly under a live block stays: free z, keep y, then empty the cache */
    CHECK_OK(vram_allocator_free(a, z));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == (int64_t)(2 * MiB), "only y's chunk is left, got %lld",
          (long long)st.reserved_bytes[0].current);
    CHECK_OK(vram_allocator_free(a, y));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "everything returned");
    close_alloc(a, dev);
}

/* chunk_headroom: near the limit chunks shrink to 1/N of the memory left under the limit and
 * free on the device, so the last memory mapped can move in small pieces. On a 1 GiB device with
 * 64 MiB chunks and the default 1/64: a first 64 MiB maps as four 16 MiB chunks (1 GiB / 64);
 * with 960 MiB left, 896 MiB maps as 64 chunks of 14 MiB (960 MiB / 64 = 15 MiB, in whole pages);
 * with 64 MiB left, 32 MiB maps page by page (64 MiB / 64 is below a page); with
 * chunk_headroom:0, whole 64 MiB chunks throughout. The device's free memory counts too: another
 * allocator holding 3 GiB of a 4 GiB device leaves 1 GiB, so 64 MiB again maps as 16 MiB
 * chunks. */
static void test_chunk_headroom(void) {
    for (int off = 0; off < 2; off++) {
        vram_device *dev;
        vram_allocator *a = open_alloc("sim:1GiB", off ? "chunk_size_mb:64,chunk_headroom:0" : "chunk_size_mb:64", &dev);
        void *x, *y, *z;
        vram_stats st;
        CHECK_OK(vram_allocator_malloc(a, 64 * MiB, 0, 0, &x));
        vram_allocator_get_stats(a, &st);
        CHECK(st.num_device_alloc == (off ? 1u : 4u), "headroom %s: 64 MiB in %llu chunks", off ? "off" : "on",
              (unsigned long long)st.num_device_alloc);
        CHECK_OK(vram_allocator_malloc(a, 896 * MiB, 0, 0, &y)); /* 64 MiB left under the limit */
        uint64_t before = st.num_device_alloc;
        vram_allocator_get_stats(a, &st);
        CHECK(st.reserved_bytes[0].current == (int64_t)(960 * MiB), "960 MiB reserved, got %lld",
              (long long)st.reserved_bytes[0].current);
        if (off)
            CHECK(st.num_device_alloc - before == 14, "896 MiB as 14 chunks of 64 MiB, got %llu",
                  (unsigned long long)(st.num_device_alloc - before));
        else
            CHECK(st.num_device_alloc - before == 64, "896 MiB with 960 MiB left: 64 chunks of 14 MiB, got %llu",
                  (unsigned long long)(st.num_device_alloc - before));
        before = st.num_device_alloc;
        CHECK_OK(vram_allocator_malloc(a, 32 * MiB, 0, 0, &z));
        vram_allocator_get_stats(a, &st);
        CHECK(st.num_device_alloc - before == (off ? 1u : 16u), "32 MiB with 64 MiB left: %llu chunks",
              (unsigned long long)(st.num_device_alloc - before));
        CHECK_OK(vram_allocator_free(a, x));
        CHECK_OK(vram_allocator_free(a, y));
        CHECK_OK(vram_allocator_free(a, z));
        close_alloc(a, dev);
    }
    vram_device *dev;
    CHECK_OK(vram_device_open("sim:4GiB", &dev));
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_alloc_config_parse("chunk_size_mb:64,chunk_divisor:0", &cfg));
    vram_allocator *other, *a;
    CHECK_OK(vram_allocator_new(dev, &cfg, &other));
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    void *big, *x;
    CHECK_OK(vram_allocator_malloc(other, 3 * GiB, 0, 0, &big));
    CHECK_OK(vram_allocator_malloc(a, 64 * MiB, 0, 0, &x));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_device_alloc == 4, "1 GiB free on the device: 64 MiB in 4 chunks, got %llu",
          (unsigned long long)st.num_device_alloc);
    CHECK_OK(vram_allocator_free(a, x));
    CHECK_OK(vram_allocator_free(other, big));
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_check(other));
    vram_allocator_destroy(a);
    vram_allocator_destroy(other);
    vram_device_close(dev);
}

/* A need for pages below move_min (default: one chunk) maps fresh pages; from move_min up,
 * cached chunks move instead. x (one 8 MiB chunk) is freed before y; w, freed after, leaves
 * 4 MiB mapped at the head of the free end; 9 MiB fits neither hole whole and needs 6 MiB of
 * new pages at the free end. */
/* x (8 MiB, one chunk), y (2 MiB) and w (4 MiB) allocated, x and w freed, then 9 MiB (r): it
 * goes after y, where w's 4 MiB are mapped, and needs 6 MiB more, below x's one chunk. */
static void hole_then_9mib(vram_allocator *a, void **y, void **r) {
    void *x, *w;
    CHECK_OK(vram_allocator_malloc(a, 8 * MiB, 0, 0, &x));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, y));
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 0, 0, &w));
    CHECK_OK(vram_allocator_free(a, x));
    CHECK_OK(vram_allocator_free(a, w));
    CHECK_OK(vram_allocator_malloc(a, 9 * MiB, 0, 0, r));
}

static void test_move_min(void) {
    const char *confs[2] = {"chunk_size_mb:8,reserve_slack:0", "chunk_size_mb:8,reserve_slack:0,move_min_mb:2"};
    for (int c = 0; c < 2; c++) {
        vram_device *dev;
        vram_allocator *a = open_alloc("sim:1GiB", confs[c], &dev);
        void *y, *r;
        hole_then_9mib(a, &y, &r);
        CHECK((char *)r == (char *)y + 2 * MiB, "%s: 9 MiB goes to the free end", confs[c]);
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        if (c == 0) {
            CHECK(st.num_device_free == 0, "below one chunk nothing moves, got %llu unmaps",
                  (unsigned long long)st.num_device_free);
            CHECK(st.reserved_bytes[0].current == (int64_t)(20 * MiB), "6 MiB mapped fresh: 20 MiB, got %lld",
                  (long long)st.reserved_bytes[0].current);
        } else {
            CHECK(st.num_device_free == 1, "with move_min_mb:2 x's chunk moves, got %llu unmaps",
                  (unsigned long long)st.num_device_free);
            CHECK(st.reserved_bytes[0].peak == (int64_t)(14 * MiB), "reserved stays at its peak, got %lld",
                  (long long)st.reserved_bytes[0].peak);
        }
        CHECK_OK(vram_allocator_check(a));
        CHECK_OK(vram_allocator_free(a, r));
        CHECK_OK(vram_allocator_free(a, y));
        close_alloc(a, dev);
    }
}

/* The page budget counts from the last empty_cache: after a phase that allocated 64 MiB and gave
 * its cache back, test_move_min's second phase moves x's chunk as it would in a fresh allocator
 * (its reserved peak, 14 MiB, is the budget), where the first phase's 64 MiB peak would let
 * reserved memory grow to 20 MiB. The peaks a caller reads still include the first phase's,
 * until reset_peak_stats. */
static void test_budget_after_empty_cache(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "chunk_size_mb:8,reserve_slack:0,move_min_mb:2", &dev);
    void *big, *y, *r;
    CHECK_OK(vram_allocator_malloc(a, 64 * MiB, 0, 0, &big));
    CHECK_OK(vram_allocator_free(a, big));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[0].peak == (int64_t)(64 * MiB) && st.reserved_bytes[0].peak == (int64_t)(64 * MiB),
          "peaks kept across empty_cache: allocated %lld, reserved %lld", (long long)st.allocated_bytes[0].peak,
          (long long)st.reserved_bytes[0].peak);
    CHECK(st.reserved_bytes[0].current == 0 && st.num_device_free == 8, "all 8 chunks unmapped, got %llu",
          (unsigned long long)st.num_device_free);
    hole_then_9mib(a, &y, &r);
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_device_free == 9, "x's chunk moves within the second phase's budget, got %llu unmaps in all",
          (unsigned long long)st.num_device_free);
    CHECK(st.reserved_bytes[0].current <= (int64_t)(14 * MiB), "reserved within 14 MiB, got %lld",
          (long long)st.reserved_bytes[0].current);
    CHECK(st.allocated_bytes[0].peak == (int64_t)(64 * MiB) && st.reserved_bytes[0].peak == (int64_t)(64 * MiB),
          "the first phase's peaks still reported");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_reset_peak_stats(a);
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[0].peak == st.allocated_bytes[0].current &&
          st.reserved_bytes[0].peak == st.reserved_bytes[0].current, "a reset lowers them to the current values");
    CHECK_OK(vram_allocator_free(a, r));
    CHECK_OK(vram_allocator_free(a, y));
    close_alloc(a, dev);
}

/* The OOM report tells fragmentation apart: with 64 MiB chunks and chunk_headroom off, three
 * 8 MiB chunks each hold two live 2 MiB blocks and two free ones, at a 24 MiB limit; a 4 MiB
 * request then finds 12 MiB cached but no free run longer than 2 MiB, and nothing to move. And
 * vram_allocator_largest_free counts only mapped pages side by side: x, y and z (2 MiB each, one
 * chunk each, g after them) freed around an empty_cache that unmapped y's page leave one 6 MiB
 * free block with 4 MiB mapped, of which a request could take 2 MiB. */
static void test_oom_fragmented(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "chunk_size_mb:8,chunk_headroom:0,max_reserved:24MiB", &dev);
    void *big, *p[12], *q;
    for (int c = 0; c < 3; c++) {
        CHECK_OK(vram_allocator_malloc(a, 8 * MiB, 0, 0, &big)); /* one 8 MiB chunk */
        CHECK_OK(vram_allocator_free(a, big));
        for (int i = 0; i < 4; i++) CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &p[4 * c + i]));
    }
    for (int i = 0; i < 12; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    CHECK(vram_allocator_malloc(a, 4 * MiB, 0, 0, &q) == VRAM_ERR_OUT_OF_MEMORY, "4 MiB does not fit");
    const char *report = vram_allocator_oom_report(a);
    CHECK(strstr(report, "of which 12.00 MiB is cached") != NULL, "12 MiB cached: %s", report);
    CHECK(strstr(report, "the largest free cached block of the large pool is 2.00 MiB") != NULL, "largest run: %s", report);
    CHECK(strstr(report, "The pool's 12.00 MiB of cached memory is fragmented") != NULL, "says fragmented: %s", report);
    for (int i = 1; i < 12; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    close_alloc(a, dev);

    /* the segments model: two 20 MiB segments of four 5 MiB blocks, every other one freed */
    a = open_alloc("sim:1GiB", "expandable_segments:False,max_reserved:40MiB", &dev);
    for (int i = 0; i < 8; i++) CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 0, 0, &p[i]));
    for (int i = 0; i < 8; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    CHECK(vram_allocator_malloc(a, 8 * MiB, 0, 0, &q) == VRAM_ERR_OUT_OF_MEMORY, "8 MiB does not fit");
    report = vram_allocator_oom_report(a);
    CHECK(strstr(report, "of the large pool is 5.00 MiB") && strstr(report, "expandable_segments:True"),
          "segments: largest 5 MiB, fragmented: %s", report);
    for (int i = 1; i < 8; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    close_alloc(a, dev);

    a = open_alloc("sim:1GiB", "chunk_size_mb:8,move_min_mb:1024", &dev); /* no voluntary moves */
    void *x, *y, *z, *g, *w;
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &x));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &y));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &z));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &g)); /* keeps x, y and z apart from the free end */
    CHECK_OK(vram_allocator_free(a, y));
    CHECK_OK(vram_allocator_empty_cache(a)); /* y's page goes back to the device */
    CHECK_OK(vram_allocator_free(a, x));
    CHECK_OK(vram_allocator_free(a, z));
    CHECK_OK(vram_allocator_malloc(a, 10 * MiB, 0, 0, &w)); /* maps fresh pages: x, y and z merge first */
    CHECK(vram_allocator_largest_free(a) == 2 * MiB, "largest free: 2 MiB side by side, got %llu",
          (unsigned long long)vram_allocator_largest_free(a));
    CHECK_OK(vram_allocator_free(a, w));
    CHECK_OK(vram_allocator_free(a, g));
    close_alloc(a, dev);
}

/* move_busy_pages and reserve_slack default to "auto": chosen by what the device can do. */
static void test_auto_policies(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    const vram_alloc_config *c = vram_allocator_config(a);
    CHECK(c->move_busy_pages == 0 && c->reserve_slack == 0, "sim: no aliasing, pages as chunks: no slack");
    close_alloc(a, dev);
    a = open_alloc("sim:1GiB", "chunk_size_mb:64", &dev);
    CHECK(vram_allocator_config(a)->reserve_slack == 0.03, "chunks above a page: 3%% slack");
    close_alloc(a, dev);
    /* cudasim: the sim device with CUDA's events, aliasing and 64 MiB chunks */
    a = open_alloc("cudasim:4GiB", "", &dev);
    c = vram_allocator_config(a);
    CHECK(c->move_busy_pages == 1 && c->reserve_slack == 0.03, "cudasim: aliasing and 3%% slack as on CUDA");
    void *x;
    CHECK_OK(vram_allocator_malloc(a, 128 * MiB, 0, 0, &x));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_device_alloc == 2, "cudasim: 128 MiB in two 64 MiB chunks, got %llu",
          (unsigned long long)st.num_device_alloc);
    CHECK_OK(vram_allocator_record_stream(a, x, 7));
    CHECK_OK(vram_allocator_free(a, x)); /* an event on stream 7, complete when asked */
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "cudasim: everything returned, got %lld",
          (long long)st.reserved_bytes[0].current);
    close_alloc(a, dev);
    CHECK(vram_device_open("cudasim:lots", &dev) == VRAM_ERR_PARSE && strstr(vram_last_error(), "cudasim device"),
          "a bad cudasim capacity names the device: %s", vram_last_error());
    CHECK_OK(event_device_open("1GiB", &dev));
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    CHECK(vram_allocator_config(a)->move_busy_pages == 1, "a device that aliases pages moves busy ones");
    vram_allocator_destroy(a);
    CHECK_OK(vram_alloc_config_parse("move_busy_pages:False,reserve_slack:0.1", &cfg));
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    c = vram_allocator_config(a);
    CHECK(c->move_busy_pages == 0 && c->reserve_slack == 0.1, "explicit values stay");
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

static void test_limit_and_oom(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    CHECK_OK(vram_allocator_set_limit(a, 64 * MiB));
    CHECK(vram_allocator_limit(a) == 64 * MiB, "limit");
    void *p, *q, *r;
    CHECK_OK(vram_allocator_malloc(a, 40 * MiB, 0, VRAM_TAG_ACTIVATION, &p));
    CHECK(vram_allocator_malloc(a, 30 * MiB, 0, VRAM_TAG_GRADIENT, &q) == VRAM_ERR_OUT_OF_MEMORY, "over the limit");
    CHECK(q == NULL, "no pointer on OOM");
    const char *report = vram_allocator_oom_report(a);
    CHECK(strstr(report, "tried to allocate 30.00 MiB") != NULL, "report names the request: %s", report);
    CHECK(strstr(report, "limit is 64.00 MiB") != NULL, "report names the limit: %s", report);
    CHECK(strstr(report, "activation 40.00 MiB") != NULL, "report names the biggest tag: %s", report);
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_ooms == 1 && st.num_alloc_retries == 1, "ooms %llu retries %llu", (unsigned long long)st.num_ooms,
          (unsigned long long)st.num_alloc_retries);
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_malloc(a, 20 * MiB, 0, 0, &q)); /* what fits still works */
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &r)); /* freed pages are reused under the limit */
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_free(a, r));
    double kept = vram_allocator_memory_fraction(a);
    CHECK(vram_allocator_set_memory_fraction(a, 1.5) == VRAM_ERR_INVALID_ARG, "fraction above 1");
    CHECK(vram_allocator_set_memory_fraction(a, 0) == VRAM_ERR_INVALID_ARG, "fraction 0");
    CHECK(vram_allocator_memory_fraction(a) == kept, "a refused fraction leaves the one in force (%g)", kept);
    CHECK_OK(vram_allocator_set_memory_fraction(a, 0.75));
    CHECK(vram_allocator_memory_fraction(a) == 0.75, "the fraction set is the fraction read");
    CHECK(vram_allocator_memory_fraction(NULL) == 0.0 && vram_allocator_limit(NULL) == 0 &&
              vram_allocator_largest_free(NULL) == 0 && vram_allocator_room(NULL) == 0,
          "getters of a null allocator answer 0");
    vram_stats rs;
    vram_allocator_get_stats(a, &rs);
    CHECK(vram_allocator_room(a) == vram_allocator_limit(a) - (uint64_t)rs.reserved_bytes[0].current,
          "room: the limit less what is reserved (%llu)", (unsigned long long)vram_allocator_room(a));
    CHECK(vram_allocator_malloc(a, (size_t)1 << 60, 0, 0, &p) == VRAM_ERR_OUT_OF_MEMORY, "absurd size");
    close_alloc(a, dev);

    /* the device itself full (no limit set): release cache, then fail cleanly */
    a = open_alloc("sim:16MiB", "", &dev);
    CHECK_OK(vram_allocator_malloc(a, 10 * MiB, 0, 0, &p));
    CHECK(vram_allocator_malloc(a, 8 * MiB, 0, 0, &q) == VRAM_ERR_OUT_OF_MEMORY, "device full");
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_malloc(a, 16 * MiB, 0, 0, &q));
    CHECK_OK(vram_allocator_free(a, q));
    close_alloc(a, dev);
}

static void test_segments_model(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "expandable_segments:False", &dev);
    void *s1, *s2, *l1, *l2;
    CHECK_OK(vram_allocator_malloc(a, 1000, 0, 0, &s1));
    CHECK_OK(vram_allocator_malloc(a, 3000, 0, 0, &s2));
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &l1));
    CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &l2));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[VRAM_POOL_SMALL].current == (int64_t)(2 * MiB), "small segment of 2 MiB");
    CHECK(st.reserved_bytes[VRAM_POOL_LARGE].current == (int64_t)(20 * MiB + 30 * MiB), "20 MiB + 30 MiB, got %lld",
          (long long)st.reserved_bytes[VRAM_POOL_LARGE].current);
    CHECK(st.segment[0].current == 3 && st.num_device_alloc == 3, "three segments");
    CHECK(st.inactive_split_bytes[VRAM_POOL_LARGE].current == (int64_t)(17 * MiB), "17 MiB left in the split 20 MiB segment");
    CHECK_OK(vram_allocator_free(a, l1));
    CHECK_OK(vram_allocator_free(a, l2));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[VRAM_POOL_LARGE].current == 0, "free segments released");
    CHECK(st.reserved_bytes[VRAM_POOL_SMALL].current == (int64_t)(2 * MiB), "a segment with live blocks stays");
    CHECK_OK(vram_allocator_free(a, s1));
    CHECK_OK(vram_allocator_free(a, s2));
    close_alloc(a, dev);
}

/* At the limit the segments model gives back what PyTorch does: with max_split_size unset its
 * release_available_cached_blocks does nothing and release_cached_blocks frees every wholly free
 * segment, not only as many as the request needs; what stays cached shapes later placements. */
static void test_segments_limit_release(void) {
    for (int split = 0; split < 2; split++) {
        vram_device *dev;
        vram_allocator *a = open_alloc("sim:1GiB", split ? "expandable_segments:False,max_split_size_mb:20"
                                                         : "expandable_segments:False", &dev);
        CHECK_OK(vram_allocator_set_limit(a, 100 * MiB));
        void *x, *y, *z;
        CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &x));
        CHECK_OK(vram_allocator_malloc(a, 40 * MiB, 0, 0, &y));
        CHECK_OK(vram_allocator_free(a, x));
        CHECK_OK(vram_allocator_free(a, y));
        CHECK_OK(vram_allocator_malloc(a, 50 * MiB, 0, 0, &z)); /* 70 cached + 50 > 100: a retry */
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        CHECK(st.num_alloc_retries == 1 && st.num_ooms == 0, "one retry, no OOM");
        if (!split)
            CHECK(st.reserved_bytes[0].current == (int64_t)(50 * MiB) && st.num_device_free == 2,
                  "every wholly free segment released: reserved %lld", (long long)st.reserved_bytes[0].current);
        else /* only as much as needed: the oldest free segment (30 MiB) suffices */
            CHECK(st.reserved_bytes[0].current == (int64_t)(90 * MiB) && st.num_device_free == 1,
                  "max_split_size set: released as needed: reserved %lld", (long long)st.reserved_bytes[0].current);
        CHECK_OK(vram_allocator_free(a, z));
        close_alloc(a, dev);
    }
}

static void test_tags(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    vram_tag kv, again;
    CHECK_OK(vram_allocator_tag_register(a, "kv_cache", &kv)); /* a built-in name gives the built-in tag */
    CHECK(kv == VRAM_TAG_KV_CACHE, "kv_cache is built in");
    CHECK_OK(vram_allocator_tag_register(a, "adapter", &kv));
    CHECK(kv == VRAM_TAG_BUILTIN_COUNT, "first user tag");
    CHECK_OK(vram_allocator_tag_register(a, "adapter", &again));
    CHECK(again == kv, "same name, same tag");
    CHECK(!strcmp(vram_allocator_tag_name(a, kv), "adapter") && !strcmp(vram_allocator_tag_name(a, 3), "optimizer_state"),
          "names");
    CHECK(vram_allocator_tag_register(a, "a_name_that_is_far_too_long_for_a_tag", &again) == VRAM_ERR_INVALID_ARG, "long");
    void *p;
    CHECK_OK(vram_allocator_malloc(a, 4096, 0, kv, &p));
    CHECK_OK(vram_allocator_set_tag(a, p, VRAM_TAG_GRADIENT));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.tags[kv].allocated_bytes.current == 0 && st.tags[VRAM_TAG_GRADIENT].allocated_bytes.current == 4096,
          "set_tag moves the bytes");
    CHECK(st.num_tags == VRAM_TAG_BUILTIN_COUNT + 1, "num_tags");
    CHECK_OK(vram_allocator_free(a, p));
    close_alloc(a, dev);
}

/* Statistics of the one tag a program uses (kept as the pools' until a second tag appears):
 * equal to the pools' "all" figures field by field, through resets, and unchanged by the
 * switch to per-tag bookkeeping when another tag is used or set. */
static int stat_is(const vram_stat *s, int64_t current, int64_t peak, int64_t allocated, int64_t freed);

static void test_solo_tag(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    void *p[6];
    for (int i = 0; i < 6; i++) CHECK_OK(vram_allocator_malloc(a, (size_t)(i + 1) * 100000, 0, VRAM_TAG_OTHER, &p[i]));
    CHECK_OK(vram_allocator_free(a, p[1]));
    CHECK_OK(vram_allocator_free(a, p[4]));
    vram_allocator_reset_peak_stats(a);
    vram_allocator_reset_accumulated_stats(a);
    CHECK_OK(vram_allocator_malloc(a, 7 * 1000000, 0, VRAM_TAG_OTHER, &p[1]));
    CHECK_OK(vram_allocator_free(a, p[0]));
    vram_stats before;
    vram_allocator_get_stats(a, &before);
    const vram_tag_stats *o = &before.tags[VRAM_TAG_OTHER];
    CHECK(stat_is(&o->allocation, before.allocation[0].current, before.allocation[0].peak, before.allocation[0].allocated,
                  before.allocation[0].freed) &&
              stat_is(&o->allocated_bytes, before.allocated_bytes[0].current, before.allocated_bytes[0].peak,
                      before.allocated_bytes[0].allocated, before.allocated_bytes[0].freed) &&
              stat_is(&o->requested_bytes, before.requested_bytes[0].current, before.requested_bytes[0].peak,
                      before.requested_bytes[0].allocated, before.requested_bytes[0].freed),
          "the solo tag's statistics are the pools' (allocation %lld/%lld/%lld/%lld)", (long long)o->allocation.current,
          (long long)o->allocation.peak, (long long)o->allocation.allocated, (long long)o->allocation.freed);
    CHECK(o->allocation.allocated == 1 && o->allocation.freed == 1 && o->allocation.current == 4,
          "after the resets: one allocated, one freed, four live");
    void *q;
    CHECK_OK(vram_allocator_malloc(a, 4096, 0, VRAM_TAG_PARAMETER, &q)); /* a second tag */
    vram_stats after;
    vram_allocator_get_stats(a, &after);
    CHECK(!memcmp(&after.tags[VRAM_TAG_OTHER], &before.tags[VRAM_TAG_OTHER], sizeof(vram_tag_stats)),
          "a second tag leaves the first one's statistics as they were");
    CHECK(after.tags[VRAM_TAG_PARAMETER].allocated_bytes.current == 4096 && after.tags[VRAM_TAG_PARAMETER].allocation.peak == 1,
          "and counts its own block");
    size_t moved = 0;
    CHECK_OK(vram_allocator_block_info(a, p[2], &moved, NULL, NULL));
    CHECK_OK(vram_allocator_set_tag(a, p[2], VRAM_TAG_ACTIVATION));
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, q));
    for (int i = 2; i < 6; i++)
        if (i != 4) CHECK_OK(vram_allocator_free(a, p[i]));
    CHECK_OK(vram_allocator_free(a, p[1]));
    vram_allocator_get_stats(a, &after);
    CHECK(after.tags[VRAM_TAG_OTHER].allocation.current == 0 && after.tags[VRAM_TAG_ACTIVATION].allocation.current == 0 &&
              after.tags[VRAM_TAG_ACTIVATION].allocated_bytes.peak == (int64_t)moved,
          "set_tag moved the block; all freed (activation peak %lld)", (long long)after.tags[VRAM_TAG_ACTIVATION].allocated_bytes.peak);
    close_alloc(a, dev);

    /* the first allocation of a program with another tag than the usual one */
    a = open_alloc("sim:1GiB", "", &dev);
    CHECK_OK(vram_allocator_malloc(a, 8192, 0, VRAM_TAG_GRADIENT, &q));
    vram_allocator_get_stats(a, &after);
    CHECK(after.tags[VRAM_TAG_GRADIENT].allocation.current == 1 && after.tags[VRAM_TAG_OTHER].allocation.peak == 0,
          "a first allocation of another tag counts there, not under 'other'");
    CHECK_OK(vram_allocator_free(a, q));
    close_alloc(a, dev);
}

/* A block freed on stream 1 is reused at once by stream 1, but by stream 2 only after stream
 * 1's work queued before the free has completed. */
/* A block of `size` freed on stream 1 while stream 1's work runs: stream 2 does not get it,
 * stream 1 does at once. Returns the block's address (freed again). */
static void *stream_reuse(vram_allocator *a, vram_device *dev, size_t size) {
    void *p, *q, *r;
    CHECK_OK(vram_allocator_malloc(a, size, 1, 0, &p));
    event_device_submit(dev, 1); /* a kernel on stream 1 uses p */
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_malloc(a, size, 2, 0, &q));
    CHECK(q != p, "%zu bytes: stream 2 does not get stream 1's block while its work runs", size);
    CHECK_OK(vram_allocator_malloc(a, size, 1, 0, &r));
    CHECK(r == p, "%zu bytes: stream 1 reuses its own block at once", size);
    CHECK_OK(vram_allocator_free(a, r));
    CHECK_OK(vram_allocator_free(a, q));
    return p;
}

static void test_streams(void) {
    vram_device *dev;
    CHECK_OK(event_device_open("1GiB", &dev));
    vram_allocator *a;
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    void *p = stream_reuse(a, dev, 4 * MiB);
    event_device_complete(dev, 1);
    void *s;
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 3, 0, &s)); /* records + polls, then reuses */
    void *t;
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 3, 0, &t));
    CHECK(s == p || t == p, "after stream 1's work completed another stream may take its block");
    CHECK_OK(vram_allocator_free(a, s));
    CHECK_OK(vram_allocator_free(a, t));
    CHECK_OK(vram_allocator_check(a));

    /* record_stream: the free waits for the other stream's work */
    void *u;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &u));
    CHECK_OK(vram_allocator_record_stream(a, u, 5));
    event_device_submit(dev, 5);
    CHECK_OK(vram_allocator_free(a, u));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.active[0].current == 1 && st.allocation[0].current == 0, "pending free stays active");
    /* its requested bytes stay in the pool's count until the free completes (as PyTorch counts
     * them), not in its tag's, which counts live blocks: also while every block has one tag */
    CHECK(st.requested_bytes[0].current == (int64_t)MiB && st.tags[0].requested_bytes.current == 0 &&
              st.tags[0].allocated_bytes.current == 0,
          "pending: pool requested %lld, tag requested %lld", (long long)st.requested_bytes[0].current,
          (long long)st.tags[0].requested_bytes.current);
    CHECK_OK(vram_allocator_check(a));
    vram_snapshot *snap;
    CHECK_OK(vram_allocator_snapshot(a, &snap));
    int pending = 0;
    for (size_t i = 0; i < snap->num_blocks; i++) pending += snap->blocks[i].state == VRAM_BLOCK_ACTIVE_PENDING_FREE;
    CHECK(pending == 1, "snapshot shows the pending free");
    vram_snapshot_free(snap);
    void *v;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &v));
    CHECK(v != u, "not reused while stream 5 still works");
    event_device_complete(dev, 5);
    CHECK_OK(vram_allocator_free(a, v));
    /* the fast path asks events only every so many mallocs (each query costs microseconds
     * while a GPU is busy): the pending free completes within a bounded number of them */
    int mallocs = 0;
    do {
        void *w;
        CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &w));
        vram_allocator_get_stats(a, &st);
        CHECK_OK(vram_allocator_free(a, w));
    } while (st.active[0].current != 1 && ++mallocs < 1000);
    CHECK(st.active[0].current == 1 && mallocs <= 64, "pending free completed within 64 mallocs");
    void *z;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &z));
    CHECK_OK(vram_allocator_record_stream(a, z, 6));
    event_device_submit(dev, 6); /* stream 6 still works on z when it is freed */
    CHECK_OK(vram_allocator_free(a, z));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.active[0].current == 0, "empty_cache waited for the pending free's stream");
    CHECK(st.reserved_bytes[0].current == 0, "empty_cache waits for streams and releases everything");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    CHECK(event_device_state(dev)->live_events == 0, "every event destroyed");
    vram_device_close(dev);
}

/* Pages that stream 1 freed and its kernels may still use: a request that needs them moved first
 * asks the streams, and pages whose work has finished are unmapped and mapped plainly; only pages
 * still in use are aliased. x (8 MiB, one chunk), y and w freed around y on stream 1; 13 MiB then
 * goes after y, over w's 4 mapped MiB, and needs 10 MiB more: x's chunk moves there. */
static void test_busy_pages_ask_first(void) {
    for (int done = 0; done < 2; done++) {
        vram_device *dev;
        vram_allocator *a = open_alloc("events:1GiB", "chunk_size_mb:8,reserve_slack:0,move_min_mb:2,move_busy_pages:True", &dev);
        CHECK(a != NULL, "allocator");
        if (!a) return;
        void *x, *y, *w, *r;
        CHECK_OK(vram_allocator_malloc(a, 8 * MiB, 1, 0, &x));
        CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 1, 0, &y));
        CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 1, 0, &w));
        event_device_submit(dev, 1); /* kernels on stream 1 use x and w */
        CHECK_OK(vram_allocator_free(a, x));
        CHECK_OK(vram_allocator_free(a, w));
        if (done) event_device_complete(dev, 1);
        CHECK_OK(vram_allocator_malloc(a, 13 * MiB, 1, 0, &r));
        CHECK((char *)r == (char *)y + 2 * MiB, "13 MiB goes to the free end");
        const evdev_state *e = event_device_state(dev);
        if (done)
            CHECK(e->unmap_calls == 1 && e->alias_calls == 0, "finished work: x's chunk unmapped, not aliased (%llu, %llu)",
                  (unsigned long long)e->unmap_calls, (unsigned long long)e->alias_calls);
        else
            CHECK(e->alias_calls == 1 && e->unmap_calls == 0, "work still running: x's chunk aliased (%llu, %llu)",
                  (unsigned long long)e->alias_calls, (unsigned long long)e->unmap_calls);
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        CHECK(st.reserved_bytes[0].current == (int64_t)(16 * MiB), "x's 8 MiB moved: 16 MiB reserved, got %lld",
              (long long)st.reserved_bytes[0].current);
        CHECK_OK(vram_allocator_check(a));
        CHECK_OK(vram_allocator_free(a, r));
        CHECK_OK(vram_allocator_free(a, y));
        event_device_complete(dev, 1);
        close_alloc(a, dev);
    }
}

/* A busy page (freed on stream 1, its work still running) moved to the edge of a new block
 * would leave the rest of the page free for any stream while stream 1 may still write it. With
 * several streams, only pages wholly inside the block take busy pages; with one stream alone the
 * edge may take one, and the second stream, when it comes, first waits for that work. The
 * device's physical model (fakes/phys_pages.h) tells which memory lies where. */
static void test_busy_pages_edges(void) {
    for (int many = 0; many < 2; many++) {
        vram_device *dev;
        vram_allocator *a =
            open_alloc("events:1GiB", "chunk_size_mb:2,move_min_mb:2,reserve_slack:0,move_busy_pages:True", &dev);
        CHECK(a != NULL, "allocator");
        if (!a) return;
        evdev_state *e = event_device_state(dev);
        void *x, *l, *b, *c, *s2 = NULL;
        if (many) /* stream 2 has allocated (from the small pool): no more one-stream mode */
            CHECK_OK(vram_allocator_malloc(a, 4 * KiB, 2, 0, &s2));
        CHECK_OK(vram_allocator_malloc(a, 6 * MiB, 1, 0, &x));         /* pages 0-2 */
        CHECK_OK(vram_allocator_malloc(a, 2 * MiB + 512, 1, 0, &l));   /* page 3, the start of 4 */
        uint64_t xp[3];
        for (int i = 0; i < 3; i++) xp[i] = phys_pages_id(&e->phys, (uintptr_t)x + (uint64_t)i * 2 * MiB);
        event_device_submit(dev, 1); /* a kernel on stream 1 writes x */
        uint64_t target = e->submitted[1];
        CHECK_OK(vram_allocator_free(a, x));
        /* 6 MiB + 512 B, too large for x's hole, after l: the rest of page 4, pages 5 and 6 whole
         * and the start of page 7, whose last ~2 MiB stay free. Mapping 3 pages would pass the
         * budget (the peak, 10 MiB), so x's 3 busy pages move. */
        CHECK_OK(vram_allocator_malloc(a, 6 * MiB + 512, 1, 0, &b));
        CHECK((char *)b == (char *)l + 2 * MiB + 512, "the block goes after l");
        CHECK(e->alias_calls > 0, "x's busy pages moved by aliasing (%llu calls)", (unsigned long long)e->alias_calls);
        uint64_t edge = phys_pages_id(&e->phys, (uintptr_t)b + 6 * MiB);
        int edge_busy = 0;
        for (int i = 0; i < 3; i++) edge_busy |= edge == xp[i];
        if (many)
            CHECK(!edge_busy, "several streams: the edge page took no page stream 1 may still write");
        else
            CHECK(edge_busy, "one stream: the edge page took one of x's pages");
        /* stream 2 asks for what is left of the edge page */
        CHECK_OK(vram_allocator_malloc(a, 1536 * KiB, 2, 0, &c));
        uint64_t cp = phys_pages_id(&e->phys, (uintptr_t)c);
        int on_busy = 0;
        for (int i = 0; i < 3; i++) on_busy |= cp == xp[i];
        CHECK(!on_busy || e->completed[1] >= target,
              "stream 2 got memory stream 1's kernel may still write (%s)", many ? "several streams" : "one stream");
        event_device_complete(dev, 1);
        CHECK_OK(vram_allocator_free(a, c));
        CHECK_OK(vram_allocator_free(a, b));
        CHECK_OK(vram_allocator_free(a, l));
        if (s2) CHECK_OK(vram_allocator_free(a, s2));
        event_device_complete(dev, 2);
        close_alloc(a, dev);
    }
}

static int stat_is(const vram_stat *s, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
    return s->current == current && s->peak == peak && s->allocated == allocated && s->freed == freed;
}

/* Active is allocated plus pending frees: its peak, total and resets with blocks pending, as
 * PyTorch counts them (the allocator derives active from allocation and the pending blocks). */
static void test_active_with_pending(void) {
    vram_device *dev;
    CHECK_OK(event_device_open("1GiB", &dev));
    vram_allocator *a;
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    void *u, *v, *w;
    vram_stats st;
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &u));
    CHECK_OK(vram_allocator_record_stream(a, u, 5));
    event_device_submit(dev, 5);
    CHECK_OK(vram_allocator_free(a, u)); /* pending: stream 5 still works */
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 1, 0, &v));
    vram_allocator_get_stats(a, &st);
    for (int p = VRAM_POOL_ALL; p <= VRAM_POOL_SMALL; p++) {
        CHECK(stat_is(&st.active[p], 2, 2, 2, 0), "pool %d: active counts the pending block, peak 2", p);
        CHECK(stat_is(&st.allocation[p], 1, 1, 2, 1), "pool %d: allocation peak 1", p);
        CHECK(stat_is(&st.active_bytes[p], 2 * MiB, 2 * MiB, 2 * MiB, 0), "pool %d: active bytes peak 2 MiB", p);
    }
    CHECK(st.active[VRAM_POOL_LARGE].peak == 0, "nothing active in the large pool");
    vram_allocator_reset_peak_stats(a);
    vram_allocator_reset_accumulated_stats(a);
    vram_allocator_get_stats(a, &st);
    CHECK(stat_is(&st.active[0], 2, 2, 0, 0) && stat_is(&st.allocation[0], 1, 1, 0, 0),
          "resets with a pending block: active peak 2, allocation peak 1");
    CHECK_OK(vram_allocator_free(a, v));
    event_device_complete(dev, 5);
    CHECK_OK(vram_allocator_empty_cache(a)); /* completes the pending free (malloc polls only now and then) */
    CHECK_OK(vram_allocator_malloc(a, 512, 1, 0, &w));
    vram_allocator_get_stats(a, &st);
    CHECK(stat_is(&st.active[0], 1, 2, 1, 2), "active after the pending free completed: peak still 2");
    CHECK(stat_is(&st.active_bytes[0], 512, 2 * MiB, 512, 2 * MiB), "active bytes likewise");
    CHECK(stat_is(&st.allocation[0], 1, 1, 1, 1), "allocation unchanged by the pending free");
    CHECK_OK(vram_allocator_free(a, w));
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

static void test_snapshot_and_history(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "history:8", &dev);
    void *p, *q;
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, VRAM_TAG_PARAMETER, &p));
    for (int i = 0; i < 5; i++) {
        CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 0, VRAM_TAG_ACTIVATION, &q));
        CHECK_OK(vram_allocator_free(a, q));
    }
    vram_snapshot *s;
    CHECK_OK(vram_allocator_snapshot(a, &s));
    uint64_t total = 0, allocated = 0;
    for (size_t i = 0; i < s->num_segments; i++) {
        total += s->segments[i].total_size;
        allocated += s->segments[i].allocated_size;
        uint64_t sum = 0;
        for (size_t j = 0; j < s->segments[i].num_blocks; j++) sum += s->blocks[s->segments[i].first_block + j].size;
        CHECK(sum == s->segments[i].total_size, "blocks tile segment %zu", i);
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(total == (uint64_t)st.reserved_bytes[0].current, "segments add up to reserved");
    CHECK(allocated == (uint64_t)st.allocated_bytes[0].current, "allocated adds up");
    CHECK(s->num_events == 8, "ring keeps the last 8 events, has %zu", s->num_events);
    CHECK(s->events[s->num_events - 1].action == VRAM_EVENT_FREE_COMPLETED, "newest event last");
    CHECK(strstr(s->settings, "history:8") != NULL, "settings: %s", s->settings);
    vram_snapshot_free(s);
    /* at run time: off, refused above the maximum (nothing changes), then on again, empty */
    CHECK_OK(vram_allocator_set_history(a, 0));
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 0, 0, &q));
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_snapshot(a, &s));
    CHECK(s->num_events == 0, "history off: no events, has %zu", s->num_events);
    vram_snapshot_free(s);
    CHECK(vram_allocator_set_history(a, VRAM_HISTORY_MAX + 1) == VRAM_ERR_INVALID_ARG, "too many entries refused");
    CHECK(strstr(vram_last_error(), "more than") != NULL, "says so: %s", vram_last_error());
    CHECK_OK(vram_allocator_set_history(a, 100));
    CHECK_OK(vram_allocator_malloc(a, 1 * MiB, 0, 0, &q));
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_snapshot(a, &s));
    CHECK(s->num_events == 3 && s->events[0].action == VRAM_EVENT_ALLOC, "history on again: alloc, free requested and "
          "completed, has %zu", s->num_events);
    CHECK(strstr(s->settings, "history:100") != NULL, "settings follow: %s", s->settings);
    vram_snapshot_free(s);
    CHECK_OK(vram_allocator_free(a, p));
    close_alloc(a, dev);
}

static void test_host_memory(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("host:256MiB", "", &dev);
    CHECK(a != NULL, "host allocator");
    unsigned char *p[16];
    for (int i = 0; i < 16; i++) {
        CHECK_OK(vram_allocator_malloc(a, (size_t)(i + 1) * 777 * KiB, 0, 0, (void **)&p[i]));
        memset(p[i], i + 1, (size_t)(i + 1) * 777 * KiB);
    }
    for (int i = 0; i < 16; i += 2) CHECK_OK(vram_allocator_free(a, p[i]));
    for (int i = 1; i < 16; i += 2) {
        size_t n = (size_t)(i + 1) * 777 * KiB, bad = 0;
        for (size_t k = 0; k < n; k++) bad += p[i][k] != (unsigned char)(i + 1);
        CHECK(bad == 0, "block %d kept its bytes", i);
        CHECK_OK(vram_allocator_free(a, p[i]));
    }
    CHECK_OK(vram_allocator_empty_cache(a));
    close_alloc(a, dev);
}

typedef struct thread_arg {
    vram_allocator *a;
    unsigned seed;
    int failures;
} thread_arg;

static void *hammer(void *arg) {
    thread_arg *t = arg;
    void *slots[64] = {0};
    unsigned x = t->seed;
    for (int i = 0; i < 50000; i++) {
        x = x * 1103515245u + 12345u;
        int k = (int)(x >> 16) % 64;
        if (t->seed == 1 && i % 5000 == 2500) { /* caching switched while the others allocate */
            vram_alloc_config c;
            vram_allocator_get_config(t->a, &c);
            if (vram_allocator_set_caching(t->a, !c.caching) != VRAM_OK) t->failures++;
        }
        if (t->seed == 2 && i % 5000 == 1000) { /* and the options PyTorch's settings change */
            vram_alloc_config c;
            vram_allocator_get_config(t->a, &c);
            c.garbage_collection_threshold = c.garbage_collection_threshold > 0 ? 0.0 : 0.8;
            c.roundup_power2_divisions = c.roundup_power2_divisions ? 0 : 4;
            c.small_classes = !c.small_classes;
            if (vram_allocator_set_config(t->a, &c) != VRAM_OK) t->failures++;
        }
        if (slots[k]) {
            if (vram_allocator_free(t->a, slots[k]) != VRAM_OK) t->failures++;
            slots[k] = NULL;
        } else if (vram_allocator_malloc(t->a, 512u << ((x >> 8) % 14), (vram_stream)t->seed, 0, &slots[k]) != VRAM_OK) {
            t->failures++;
        }
    }
    for (int k = 0; k < 64; k++)
        if (slots[k] && vram_allocator_free(t->a, slots[k]) != VRAM_OK) t->failures++;
    return NULL;
}

static void test_threads(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:64GiB", "", &dev);
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){a, (unsigned)i + 1, 0};
        pthread_create(&th[i], NULL, hammer, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].failures == 0, "thread %d failures %d", i, args[i].failures);
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocation[0].current == 0 && st.allocated_bytes[0].current == 0, "all freed");
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

static void test_config(void) {
    vram_alloc_config c;
    vram_alloc_config_default(&c);
    CHECK_OK(vram_alloc_config_parse("expandable_segments:False, max_split_size_mb:256,memory_fraction:0.5,history:100", &c));
    CHECK(!c.expandable_segments && c.max_split_size == 256 * MiB && c.memory_fraction == 0.5 && c.history_entries == 100,
          "parsed");
    vram_alloc_config before = c;
    CHECK(vram_alloc_config_parse("max_split_size_mb:10", &c) == VRAM_ERR_INVALID_ARG, "below 20 MiB");
    CHECK(strstr(vram_last_error(), "max_split_size_mb: 10 is too small (at least 20)") != NULL, "names the key and "
          "the bound: %s", vram_last_error());
    /* too large, in MiB (bytes would not fit 64 bits) and above 2^64: said so, with the limit */
    CHECK(vram_alloc_config_parse("move_min_mb:99999999999999999", &c) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "move_min_mb: 99999999999999999 is too large (at most 17592186044415)"),
          "a MiB value too large: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("history:99999999999999999999", &c) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "history: 99999999999999999999 is too large (above 2^64)"),
          "a value above 2^64: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("colour:blue", &c) == VRAM_ERR_INVALID_ARG, "unknown key");
    CHECK(strstr(vram_last_error(), "unknown key 'colour'") != NULL, "names the unknown key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("memory_fraction:1.5", &c) == VRAM_ERR_INVALID_ARG, "fraction > 1");
    CHECK(vram_alloc_config_parse("garbage_collection_threshold:1", &c) == VRAM_ERR_INVALID_ARG, "gc = 1");
    CHECK(vram_alloc_config_parse("expandable_segments:maybe", &c) == VRAM_ERR_INVALID_ARG, "bad bool");
    CHECK(vram_alloc_config_parse("history:-1", &c) == VRAM_ERR_INVALID_ARG, "negative");
    CHECK(vram_alloc_config_parse("history:16777217", &c) == VRAM_ERR_INVALID_ARG, "history above its maximum");
    CHECK(strstr(vram_last_error(), "history") && strstr(vram_last_error(), "at most 16777216"), "names it: %s",
          vram_last_error());
    CHECK(vram_alloc_config_parse("roundup_power2_divisions:3", &c) == VRAM_ERR_INVALID_ARG, "not a power of two");
    CHECK(vram_alloc_config_parse("max_reserved", &c) == VRAM_ERR_INVALID_ARG, "no colon");
    CHECK(vram_alloc_config_parse("max_reserved:", &c) == VRAM_ERR_INVALID_ARG, "no value");
    CHECK(vram_alloc_config_parse("page_size_mb:6", &c) == VRAM_ERR_INVALID_ARG, "page not a power of two");
    CHECK(vram_alloc_config_parse("page_size_mb:2048", &c) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "page_size_mb: 2048 is too large (at most 1024)"),
          "a page above 1 GiB is refused by name: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("chunk_size_mb:131072", &c) == VRAM_ERR_INVALID_ARG, "a chunk above 64 GiB");
    vram_alloc_config largest;
    vram_alloc_config_default(&largest);
    CHECK_OK(vram_alloc_config_parse("page_size_mb:1024,chunk_size_mb:65536", &largest));
    CHECK(vram_alloc_config_parse("chunk_size_mb:48", &c) == VRAM_ERR_INVALID_ARG, "chunk not a power of two");
    CHECK(strstr(vram_last_error(), "chunk_size_mb") != NULL, "names the key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("chunk_size_mb:1", &c) == VRAM_ERR_INVALID_ARG, "chunk below a page");
    CHECK(vram_alloc_config_parse("reserve_slack:1", &c) == VRAM_ERR_INVALID_ARG, "slack = 1");
    CHECK(vram_alloc_config_parse("reserve_slack:-0.1", &c) == VRAM_ERR_INVALID_ARG, "negative slack");
    CHECK(strstr(vram_last_error(), "reserve_slack") != NULL, "names the key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("move_busy_pages:sometimes", &c) == VRAM_ERR_INVALID_ARG, "bad auto bool");
    CHECK(strstr(vram_last_error(), "(or auto)") != NULL, "says auto is accepted: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("caching:auto", &c) == VRAM_ERR_INVALID_ARG, "auto only where a key takes it");
    CHECK(vram_alloc_config_parse("memory_fraction:auto", &c) == VRAM_ERR_INVALID_ARG, "no auto fraction");
    CHECK(vram_alloc_config_parse("move_min_mb:x", &c) == VRAM_ERR_INVALID_ARG, "bad move minimum");
    CHECK(vram_alloc_config_parse("chunk_headroom:-1", &c) == VRAM_ERR_INVALID_ARG, "negative headroom share");
    CHECK(vram_alloc_config_parse("chunk_headroom:2000000", &c) == VRAM_ERR_INVALID_ARG, "headroom share too large");
    CHECK(strstr(vram_last_error(), "chunk_headroom") != NULL, "names the key: %s", vram_last_error());
    CHECK(vram_alloc_config_parse("small_classes:few", &c) == VRAM_ERR_INVALID_ARG, "bad small_classes");
    CHECK(strstr(vram_last_error(), "small_classes") != NULL, "names the key: %s", vram_last_error());
    CHECK(memcmp(&before, &c, sizeof c) == 0, "errors leave the configuration unchanged");
    vram_alloc_config_default(&c);
    CHECK(c.move_busy_pages == VRAM_CONF_AUTO && c.reserve_slack == VRAM_CONF_AUTO && c.move_min == 0, "auto defaults");
    char auto_text[512];
    vram_alloc_config_format(&c, auto_text, sizeof auto_text);
    CHECK(strstr(auto_text, "move_busy_pages:auto,reserve_slack:auto") != NULL, "auto formatted: %s", auto_text);
    vram_alloc_config e;
    vram_alloc_config_default(&e);
    CHECK_OK(vram_alloc_config_parse(auto_text, &e));
    CHECK(memcmp(&c, &e, sizeof c) == 0, "defaults round-trip: %s", auto_text);
    CHECK(c.small_classes == 1 && !strstr(auto_text, "small_classes"), "small classes on by default: %s", auto_text);
    CHECK(c.chunk_headroom == 64 && !strstr(auto_text, "chunk_headroom"), "chunk_headroom 64 by default: %s", auto_text);
    CHECK_OK(vram_alloc_config_parse("small_classes:False", &c));
    vram_alloc_config_format(&c, auto_text, sizeof auto_text);
    CHECK(!c.small_classes && strstr(auto_text, ",small_classes:False"), "small_classes:False formatted: %s", auto_text);
    vram_alloc_config_default(&e);
    CHECK_OK(vram_alloc_config_parse(auto_text, &e));
    CHECK(memcmp(&c, &e, sizeof c) == 0, "small_classes:False round-trips: %s", auto_text);
    CHECK_OK(vram_alloc_config_parse("move_busy_pages:True,reserve_slack:0.05,move_min_mb:128", &c));
    CHECK(c.move_busy_pages == 1 && c.reserve_slack == 0.05 && c.move_min == 128 * MiB, "policies parsed");
    CHECK_OK(vram_alloc_config_parse("move_busy_pages:auto,reserve_slack:auto", &c));
    CHECK(c.move_busy_pages == VRAM_CONF_AUTO && c.reserve_slack == VRAM_CONF_AUTO, "auto parsed");
    c = before;
    CHECK_OK(vram_alloc_config_parse("max_reserved:12GiB,roundup_power2_divisions:4,chunk_size_mb:16,reserve_slack:0.02,move_min_mb:32,chunk_headroom:0", &c));
    CHECK(c.chunk_headroom == 0, "chunk_headroom parsed");
    CHECK(c.chunk_size == 16 * MiB && c.reserve_slack == 0.02, "chunk and slack parsed");
    CHECK(c.max_reserved == 12 * GiB, "size with unit");
    char text[512];
    vram_alloc_config_format(&c, text, sizeof text);
    vram_alloc_config d;
    vram_alloc_config_default(&d);
    CHECK_OK(vram_alloc_config_parse(text, &d));
    CHECK(memcmp(&c, &d, sizeof c) == 0, "format round-trips: %s", text);
    /* every option at its longest value: the string fits VRAM_ALLOC_CONF_FORMAT_MAX and the
     * fractions keep all their digits (six significant digits, as %g writes, lost them) */
    vram_alloc_config_default(&c);
    CHECK_OK(vram_alloc_config_parse("expandable_segments:False,page_size_mb:1024,chunk_size_mb:65536,"
                                     "max_split_size_mb:17592186044415,max_non_split_rounding_mb:17592186044415,"
                                     "roundup_power2_divisions:2147483648,memory_fraction:0.12345678901234568,"
                                     "max_reserved:18446744073709551615,history:16777216,caching:False,"
                                     "move_busy_pages:False,reserve_slack:1.2345678901234567e-300,"
                                     "move_min_mb:17592186044415,chunk_headroom:1048575,"
                                     "garbage_collection_threshold:0.98765432109876543,small_classes:False", &c));
    char longest[VRAM_ALLOC_CONF_FORMAT_MAX + 64];
    vram_alloc_config_format(&c, longest, sizeof longest);
    CHECK(strlen(longest) < VRAM_ALLOC_CONF_FORMAT_MAX, "longest configuration fits: %zu bytes", strlen(longest));
    vram_alloc_config_default(&d);
    CHECK_OK(vram_alloc_config_parse(longest, &d));
    CHECK(memcmp(&c, &d, sizeof c) == 0, "longest configuration round-trips: %s", longest);
    CHECK(strstr(longest, "memory_fraction:0.12345678901234568,") != NULL, "all digits kept: %s", longest);
    setenv("VRAM_ALLOC_CONF", "nonsense_key:1", 1);
    vram_device *dev;
    CHECK_OK(vram_device_open("sim", &dev));
    vram_allocator *a = NULL;
    CHECK(vram_allocator_new(dev, NULL, &a) == VRAM_ERR_INVALID_ARG && a == NULL, "bad environment is an error");
    unsetenv("VRAM_ALLOC_CONF");
    vram_device_close(dev);

    uint64_t v;
    CHECK_OK(vram_parse_size("80GiB", &v));
    CHECK(v == 80 * GiB, "80GiB");
    CHECK_OK(vram_parse_size("1.5 MB", &v));
    CHECK(v == 1500000, "1.5 MB");
    CHECK(vram_parse_size("-5", &v) == VRAM_ERR_PARSE, "negative size");
    CHECK(vram_parse_size("12 parsecs", &v) == VRAM_ERR_PARSE, "unknown unit");
    CHECK(vram_parse_size("", &v) == VRAM_ERR_PARSE, "empty");
    CHECK(vram_parse_size("99999999999999999999TiB", &v) == VRAM_ERR_PARSE, "overflow");
    /* integers exactly (they went through a double: 2^63 - 1 became 2^63) */
    CHECK(vram_parse_size("9223372036854775807", &v) == VRAM_OK && v == 9223372036854775807ull, "2^63 - 1 exactly");
    CHECK(vram_parse_size("18446744073709551615", &v) == VRAM_OK && v == UINT64_MAX, "the largest size");
    CHECK(vram_parse_size("18446744073709551616", &v) == VRAM_ERR_PARSE, "one above the largest");
    CHECK(vram_parse_size("17179869184GiB", &v) == VRAM_ERR_PARSE, "2^64 bytes through the unit");
    CHECK(vram_parse_size("16777215TiB", &v) == VRAM_OK && v == 16777215ull << 40, "16777215TiB exactly");
    CHECK(vram_parse_size("2.5GiB", &v) == VRAM_OK && v == 5 * GiB / 2, "decimals still work");
    /* hexadecimal (which strtod reads) is refused, and an infinite number is too large */
    CHECK(vram_parse_size("0x100", &v) == VRAM_ERR_PARSE && strstr(vram_last_error(), "write it in decimal"),
          "hexadecimal refused: %s", vram_last_error());
    CHECK(vram_parse_size("1e309GiB", &v) == VRAM_ERR_PARSE && strstr(vram_last_error(), "too large"),
          "1e309: too large: %s", vram_last_error());
    CHECK(vram_parse_size("1e3KiB", &v) == VRAM_OK && v == 1000 * 1024, "an exponent is a number");
    CHECK(vram_device_open("tpu:0", &dev) == VRAM_ERR_INVALID_ARG, "unknown device");
    CHECK(vram_device_open("sim:lots", &dev) == VRAM_ERR_PARSE, "bad sim capacity");
    /* a message that wraps the one before it keeps that one whole (it was formatted over itself) */
    CHECK(strcmp(vram_last_error(), "sim device: bad size 'lots': expected a number such as 512, 64KiB or 80GiB") == 0,
          "the bad capacity named once: %s", vram_last_error());
    CHECK(vram_device_open("host:lots", &dev) == VRAM_ERR_PARSE && strstr(vram_last_error(), "host device: bad size 'lots'"),
          "host: %s", vram_last_error());
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK(vram_alloc_config_parse("max_reserved:lots", &cfg) != VRAM_OK &&
              strstr(vram_last_error(), "VRAM_ALLOC_CONF: max_reserved: bad size 'lots'"),
          "max_reserved: %s", vram_last_error());
}

static void test_rounding(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "roundup_power2_divisions:4", &dev);
    void *p;
    size_t size;
    CHECK_OK(vram_allocator_malloc(a, 1200 * 1024, 0, 0, &p));
    CHECK_OK(vram_allocator_block_info(a, p, &size, NULL, NULL));
    CHECK(size == 1280 * 1024, "1200 KiB rounds to 1280 KiB with 4 divisions, got %zu", size);
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_malloc(a, 0, 0, 0, &p));
    CHECK_OK(vram_allocator_block_info(a, p, &size, NULL, NULL));
    CHECK(size == 512 && p != NULL, "size 0 gives a 512-byte block");
    CHECK_OK(vram_allocator_free(a, p));
    close_alloc(a, dev);
}

/* Placement with no page moves, on a device with events (freed blocks stay usable by their
 * stream only): a request larger than a free block at the end of the used range extends that
 * block instead of mapping pages beyond it, and a deferred block is seen by a request that
 * splits a free block. */
/* A block freed beside a free block is coalesced at once, so the next request of its size is
 * placed by the best fit over the merged hole (lowest), not where the block was; between live
 * blocks, and before the free end (an allocate/free loop), it is deferred and taken back. */
static void test_free_beside_free(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    void *x, *y, *z, *w;
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &x));
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &y));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &z)); /* keeps y from the free end */
    CHECK_OK(vram_allocator_free(a, x));                    /* deferred: nothing free beside it */
    CHECK_OK(vram_allocator_free(a, y));                    /* beside x: coalesced with it */
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &w));  /* was y itself, taken back */
    CHECK(w == x, "the request takes the lowest place of the merged hole (got %+lld MiB from x)",
          (long long)(((char *)w - (char *)x) / (long long)MiB));
    CHECK_OK(vram_allocator_check(a));
    void *q, *r, *v;
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &q)); /* the rest of the hole */
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &r)); /* after z, before the free end */
    CHECK_OK(vram_allocator_free(a, r));                   /* deferred */
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &v));
    CHECK(v == r, "a block before the free end is taken back");
    for (void **p = (void *[]){v, q, z, w}, **e = p + 4; p < e; p++) CHECK_OK(vram_allocator_free(a, *p));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* The search's choices, as PyTorch's best fit makes them: of two equal free blocks the lower;
 * and a block freed before the free end is deferred (taken back by the next request of its
 * size) only while the free end is the pool's one free block. */
static void test_best_fit_ties(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    void *b[8];
    const uint64_t mib[8] = {2, 2, 4, 2, 2, 4, 2, 2}; /* A P Q C R S D E, then the free end */
    for (int i = 0; i < 8; i++) CHECK_OK(vram_allocator_malloc(a, mib[i] * MiB, 0, 0, &b[i]));
    for (int i = 1; i <= 5; i++)
        if (i != 3) CHECK_OK(vram_allocator_free(a, b[i])); /* holes P+Q and R+S, 6 MiB each */
    CHECK_OK(vram_allocator_check(a));
    void *w;
    CHECK_OK(vram_allocator_malloc(a, 6 * MiB, 0, 0, &w));
    CHECK(w == b[1], "of two equal holes the lower is taken (got %+lld MiB from it)",
          (long long)(((char *)w - (char *)b[1]) / (long long)MiB));
    CHECK_OK(vram_allocator_free(a, b[7])); /* before the free end, with the hole R+S free */
    void *v;
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &v));
    CHECK(v == b[4], "the request goes to the free hole, not back before the free end (got %+lld MiB from it)",
          (long long)(((char *)v - (char *)b[4]) / (long long)MiB));
    CHECK_OK(vram_allocator_check(a));
    for (void **p = (void *[]){b[0], b[3], b[6], w, v}, **e = p + 5; p < e; p++) CHECK_OK(vram_allocator_free(a, *p));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

static void test_placement_no_moves(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("events:1GiB", "reserve_slack:0.99", &dev);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    void *keep, *p, *q;
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, &keep));
    CHECK_OK(vram_allocator_malloc(a, 6 * MiB, 0, 0, &p));
    CHECK_OK(vram_allocator_free(a, p));                    /* deferred */
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &q)); /* flushes p first: the best fit */
    CHECK(q == p, "a deferred block is seen by a request that splits a free block");
    CHECK_OK(vram_allocator_free(a, q)); /* deferred, next to the rest of p: not ready either */
    void *r;
    CHECK_OK(vram_allocator_malloc(a, 10 * MiB, 0, 0, &r)); /* more than the free 6 MiB */
    CHECK(r == p, "the free end of the used range is extended");
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 12 * MiB, "reserved %lld MiB, expected 12",
          (long long)(st.reserved_bytes[0].current / MiB));
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, r));
    CHECK_OK(vram_allocator_free(a, keep));
    close_alloc(a, dev);
}

/* One stream: a block it frees merges with ready free memory beside it (ready after a wait for
 * the stream, or never used), so the two serve a request neither fits alone; the merged block
 * is the stream's, not ready. A second stream ends this mode: the first stream's blocks are
 * made ready then (one wait for its work), so the second may use them; a capture does the same
 * before it starts. (That such merges stop once pages had to move is checked on whole traces:
 * tests/replay_bounds.py.) */
static vram_allocator *one_stream_setup(vram_device *dev, void **w0, void **x, void **y, void **z) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    vram_allocator *a;
    if (vram_alloc_config_parse("reserve_slack:0.99", &cfg) != VRAM_OK || /* no page moves */
        vram_allocator_new(dev, &cfg, &a) != VRAM_OK)
        return NULL;
    size_t h = 3 * MiB / 2;
    CHECK_OK(vram_allocator_malloc(a, h, 0, 0, w0));      /* [0, 1.5) MiB */
    CHECK_OK(vram_allocator_malloc(a, h, 0, 0, x));       /* [1.5, 3): on pages shared with w0 and y */
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, y)); /* [3, 6) */
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, 0, z)); /* [6, 8): y is not next to the free end */
    CHECK_OK(vram_allocator_free(a, *x));
    CHECK_OK(vram_allocator_empty_cache(a)); /* waits for stream 0: x is ready, no page unmapped */
    return a;
}

static void test_one_stream_merges(void) {
    vram_device *dev;
    CHECK_OK(event_device_open("1GiB", &dev));
    evdev_state *e = event_device_state(dev);
    void *w0, *x, *y, *z, *w, *v, *u;
    vram_allocator *a = one_stream_setup(dev, &w0, &x, &y, &z);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    CHECK_OK(vram_allocator_free(a, y)); /* not ready, next to x */
    CHECK_OK(vram_allocator_malloc(a, 9 * MiB / 2, 0, 0, &w));
    CHECK(w == x, "x and y, freed by the only stream, serve 4.5 MiB together (got %+lld KiB from x)",
          (long long)(((char *)w - (char *)x) / 1024));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 8 * MiB, "reserved %lld MiB, expected 8",
          (long long)(st.reserved_bytes[0].current / MiB));
    CHECK_OK(vram_allocator_check(a));

    /* stream 0 still works on w when it is freed; then stream 1 asks */
    event_device_submit(dev, 0);
    CHECK_OK(vram_allocator_free(a, w));
    uint64_t syncs = e->syncs;
    CHECK_OK(vram_allocator_malloc(a, 9 * MiB / 2, 1, 0, &v));
    CHECK(e->syncs == syncs + 1, "a second stream waits once for the first one's work (%llu waits)",
          (unsigned long long)(e->syncs - syncs));
    CHECK(v == w, "after the wait the second stream reuses the first one's memory");
    CHECK(e->completed[0] == e->submitted[0], "the wait covered stream 0's work");
    CHECK_OK(vram_allocator_free(a, v));
    event_device_submit(dev, 1);
    CHECK_OK(vram_allocator_malloc(a, 4 * MiB, 2, 0, &v));
    CHECK(e->syncs == syncs + 1, "no more waits once several streams were seen");
    CHECK(v != w, "stream 2 does not get stream 1's block while its work runs");
    CHECK_OK(vram_allocator_free(a, v));
    CHECK_OK(vram_allocator_free(a, z));
    CHECK_OK(vram_allocator_free(a, w0));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);

    /* a capture after one-stream merges: begin_pool makes them ready before the capture starts */
    CHECK_OK(event_device_open("1GiB", &dev));
    e = event_device_state(dev);
    a = one_stream_setup(dev, &w0, &x, &y, &z);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    event_device_submit(dev, 0);
    CHECK_OK(vram_allocator_free(a, y));
    CHECK_OK(vram_allocator_malloc(a, 13 * MiB / 4, 0, 0, &u)); /* from x and y merged: leaves [4.75, 6) */
    CHECK(u == x, "stream 0 takes x and y together (got %+lld KiB from x)", (long long)(((char *)u - (char *)x) / 1024));
    syncs = e->syncs;
    CHECK_OK(vram_allocator_begin_pool(a, 7));
    CHECK(e->syncs == syncs + 1 && e->completed[0] == e->submitted[0], "begin_pool waited for stream 0");
    e->capturing = 1;
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB / 4, 3, 0, &w));
    CHECK(w == (char *)x + 13 * MiB / 4, "the capture's stream takes the rest of the merged block (got %+lld KiB from x)",
          (long long)(((char *)w - (char *)x) / 1024));
    CHECK(e->capture_violations == 0, "no event call during the capture (%llu)", (unsigned long long)e->capture_violations);
    e->capturing = 0;
    CHECK_OK(vram_allocator_end_pool(a, 7));
    CHECK_OK(vram_allocator_free(a, w));
    CHECK_OK(vram_allocator_release_pool(a, 7));
    CHECK_OK(vram_allocator_free(a, u));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);

}

/* Small size classes: requests of 4 KiB to 1 MiB round to four classes per power of two (512 B
 * steps below), a small block freed stays uncoalesced (in its `recent` slot, then held on its
 * class's stack) and the next request of its class on a stream that may use it gets it back;
 * held blocks are coalesced before the small pool grows, and by empty_cache; small_classes:False
 * rounds to 512 B as PyTorch does. */
static size_t block_size(vram_allocator *a, size_t request) {
    void *p;
    size_t size = 0;
    if (vram_allocator_malloc(a, request, 0, 0, &p) != VRAM_OK) return 0;
    vram_allocator_block_info(a, p, &size, NULL, NULL);
    vram_allocator_free(a, p);
    return size;
}

static void test_small_classes(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    static const size_t req[][2] = {{1, 512},          {4096, 4096},        {4097, 5 * KiB},
                                    {5000, 5 * KiB},   {8 * KiB, 8 * KiB},  {8 * KiB + 1, 10 * KiB},
                                    {100000, 112 * KiB}, {600 * KiB, 640 * KiB}, {MiB - 1, MiB},
                                    {MiB + 1, MiB + 512}};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        CHECK(block_size(a, req[i][0]) == req[i][1], "%zu bytes: block of %zu, want %zu", req[i][0],
              block_size(a, req[i][0]), req[i][1]);
    CHECK_OK(vram_allocator_check(a));

    /* held: a same-class request gets the block back; a block of another class does not merge */
    void *p, *q, *r;
    CHECK_OK(vram_allocator_malloc(a, 20000, 0, 0, &p));
    CHECK_OK(vram_allocator_malloc(a, 30000, 0, 0, &q));
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_malloc(a, 19000, 0, 0, &r));
    CHECK(r == p, "a request of the same class reuses the held block");
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.requested_bytes[0].current == 19000 && st.allocated_bytes[0].current == 20 * KiB,
          "statistics count the class size: requested %lld allocated %lld",
          (long long)st.requested_bytes[0].current, (long long)st.allocated_bytes[0].current);
    CHECK_OK(vram_allocator_free(a, r));
    /* empty_cache coalesces and releases everything held */
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "empty_cache releases held blocks: %lld reserved",
          (long long)st.reserved_bytes[0].current);
    /* the small pool does not grow while held blocks could serve a request once coalesced:
     * fill one 2 MiB page with 16 KiB blocks, free them all, then ask for 1 MiB */
    void *blocks[128];
    for (int i = 0; i < 128; i++) CHECK_OK(vram_allocator_malloc(a, 16 * KiB, 0, 0, &blocks[i]));
    vram_allocator_get_stats(a, &st);
    int64_t reserved = st.reserved_bytes[0].current;
    for (int i = 0; i < 128; i++) CHECK_OK(vram_allocator_free(a, blocks[i]));
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_malloc(a, MiB, 0, 0, &p));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == reserved, "1 MiB fits in the held blocks' page: reserved %lld -> %lld",
          (long long)reserved, (long long)st.reserved_bytes[0].current);
    CHECK_OK(vram_allocator_free(a, p));
    close_alloc(a, dev);

    a = open_alloc("sim:1GiB", "small_classes:False", &dev);
    CHECK(block_size(a, 5000) == 5120 && block_size(a, 100000) == 100352 && block_size(a, MiB - 1) == MiB,
          "without classes small requests round to 512 B");
    close_alloc(a, dev);

    /* streams: a block freed on stream 1 while its work runs is held (another request's split
     * moves it from its slot to the stack); the stack gives it to stream 1, not to stream 2 */
    CHECK_OK(event_device_open("1GiB", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    void *x;
    CHECK_OK(vram_allocator_malloc(a, 64 * KiB, 1, 0, &p));
    event_device_submit(dev, 1);
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_malloc(a, 16 * KiB, 2, 0, &x)); /* a split: p leaves its slot, held */
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_malloc(a, 64 * KiB, 2, 0, &q));
    CHECK(q != p, "stream 2 does not get stream 1's held block while its work runs");
    CHECK_OK(vram_allocator_malloc(a, 64 * KiB, 1, 0, &r));
    CHECK(r == p, "stream 1 takes its own held block at once");
    CHECK_OK(vram_allocator_free(a, x));
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_free(a, r));
    event_device_complete(dev, 1);
    close_alloc(a, dev);
}

/* Caching turned off and on at run time (PyTorch's caching_allocator_enable): off empties the
 * cache and makes every free return its memory; on again caches, and small blocks allocated
 * while it was off (512-byte rounding) never join the class stacks, whose blocks must be of
 * their class's size (test_alloc_random toggles it among millions of operations). */
static void test_set_caching(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    vram_stats st;
    void *p, *q, *r;
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &p));
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &q));
    CHECK_OK(vram_allocator_free(a, p));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current > st.allocated_bytes[0].current, "cached while caching is on");
    CHECK_OK(vram_allocator_set_caching(a, 0));
    vram_allocator_get_stats(a, &st);
    CHECK(vram_allocator_config(a)->caching == 0 && st.reserved_bytes[0].current == 2 * MiB,
          "caching off: the cache is returned at once (the small block's page stays): %lld reserved",
          (long long)st.reserved_bytes[0].current);
    void *left, *right; /* r between two live blocks, so that its free is deferred, not merged */
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &left));
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &r)); /* 512-byte rounding while off */
    CHECK_OK(vram_allocator_malloc(a, 100000, 0, 0, &right));
    CHECK(block_size(a, 100000) == 100352, "no size classes while caching is off");
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 0, 0, &p));
    CHECK_OK(vram_allocator_free(a, p));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 2 * MiB, "a free returns its memory while caching is off: %lld reserved",
          (long long)st.reserved_bytes[0].current);
    CHECK_OK(vram_allocator_set_caching(a, 0)); /* no change */
    CHECK_OK(vram_allocator_set_caching(a, 1));
    CHECK_OK(vram_allocator_free(a, r)); /* 100352 bytes, not a class size: coalesced, not held */
    void *split;
    CHECK_OK(vram_allocator_malloc(a, 20000, 0, 0, &split)); /* a split: r leaves its slot */
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_malloc(a, 100353, 0, 0, &q)); /* class 112 KiB, r's class had it been held */
    size_t size = 0;
    CHECK_OK(vram_allocator_block_info(a, q, &size, NULL, NULL));
    CHECK(size == 112 * KiB, "caching on again: classes again, and the odd-sized block was not handed out as one: %zu", size);
    CHECK_OK(vram_allocator_free(a, q));
    CHECK_OK(vram_allocator_free(a, split));
    CHECK_OK(vram_allocator_free(a, left));
    CHECK_OK(vram_allocator_free(a, right));
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, 0, &p));
    CHECK_OK(vram_allocator_free(a, p));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current > st.allocated_bytes[0].current, "caching on again: frees are cached");
    CHECK(vram_allocator_set_caching(NULL, 0) == VRAM_ERR_INVALID_ARG, "a null allocator refused");
    close_alloc(a, dev);
}

/* vram_allocator_set_config: the options PyTorch's settings reach, changed on a running allocator
 * (segments model, where max_split_size applies; a device without events, whose frees are ready
 * for garbage collection at once), each seen in what the next requests get; the
 * options fixed at creation and values out of range refused, nothing changed; the free path
 * not changed during a capture. */
static void test_set_config(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "expandable_segments:False", &dev);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    vram_alloc_config want, got;
    vram_stats st;
    void *big, *p;
    CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &big)); /* its own 30 MiB segment */
    vram_allocator_get_stats(a, &st);
    CHECK(st.oversize_allocations.current == 0 && st.max_split_size == -1, "no split limit at the start");
    vram_allocator_get_config(a, &want);
    want.max_split_size = 20 * MiB;
    want.roundup_power2_divisions = 4;
    want.memory_fraction = 0.5;
    want.history_entries = 64;
    CHECK_OK(vram_allocator_set_config(a, &want));
    vram_allocator_get_stats(a, &st);
    CHECK(st.max_split_size == (int64_t)(20 * MiB) && st.oversize_allocations.current == 1 &&
              st.oversize_segments.current == 1 && st.oversize_allocations.peak == 1,
          "max_split_size 20 MiB: the live 30 MiB block and its segment count as oversize (%lld, %lld)",
          (long long)st.oversize_allocations.current, (long long)st.oversize_segments.current);
    CHECK(block_size(a, 5 * MiB + 1) == 6 * MiB, "roundup_power2_divisions:4 rounds 5 MiB + 1 to 6 MiB");
    CHECK(block_size(a, 100000) == 112 * KiB, "a class size while small classes are on");
    vram_allocator_get_config(a, &want);
    want.roundup_power2_divisions = 0;
    want.small_classes = 0;
    CHECK_OK(vram_allocator_set_config(a, &want));
    CHECK(block_size(a, 100000) == 100352, "small_classes off: 512-byte rounding");
    CHECK(block_size(a, 5 * MiB + 1) == 5 * MiB + 512, "roundup_power2_divisions off again");
    CHECK(vram_allocator_limit(a) == 512 * MiB, "memory_fraction 0.5 of 1 GiB: %llu",
          (unsigned long long)vram_allocator_limit(a));
    CHECK(vram_allocator_history_count(a) >= 4, "the history records from the change on");
    CHECK_OK(vram_allocator_free(a, big));
    vram_allocator_get_stats(a, &st);
    CHECK(st.oversize_allocations.current == 0, "the oversize block freed");
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 0, 0, &p));
    CHECK(p != big, "a 5 MiB request does not split the cached 30 MiB segment, oversize now");
    CHECK_OK(vram_allocator_free(a, p));
    CHECK_OK(vram_allocator_check(a));

    /* the pages model's policies: taken as given, `auto` resolved as at creation */
    vram_allocator_get_config(a, &want);
    want.reserve_slack = VRAM_CONF_AUTO;
    want.move_busy_pages = VRAM_CONF_AUTO;
    want.move_min = 8 * MiB;
    want.chunk_headroom = 0;
    CHECK_OK(vram_allocator_set_config(a, &want));
    vram_allocator_get_config(a, &got);
    CHECK(got.reserve_slack == 0.0 && (got.move_busy_pages == 0 || got.move_busy_pages == 1) && got.move_min == 8 * MiB &&
              got.chunk_headroom == 0,
          "policies set, auto resolved (slack %g, move_busy_pages %d)", got.reserve_slack, got.move_busy_pages);

    /* refused: an option fixed at creation, values out of range; nothing changes */
    vram_allocator_get_config(a, &want);
    want.expandable_segments = 1;
    want.memory_fraction = 0.25;
    CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "expandable_segments"),
          "expandable_segments cannot turn pages on for an allocator started in the segments model: %s", vram_last_error());
    /* the ranges VRAM_ALLOC_CONF's keys take (vram_alloc_config_check), each named in the error */
    static const struct {
        double fraction, gc, slack;
        uint32_t history, divisions, headroom;
        const char *named;
    } bad[] = {{0.0, 0.0, 0.0, 0, 0, 64, "memory_fraction"},
               {1.5, 0.0, 0.0, 0, 0, 64, "memory_fraction"},
               {0.5, 1.0, 0.0, 0, 0, 64, "garbage_collection_threshold"},
               {0.5, -0.1, 0.0, 0, 0, 64, "garbage_collection_threshold"},
               {0.5, 0.0, 1.0, 0, 0, 64, "reserve_slack"},
               {0.5, 0.0, -0.5, 0, 0, 64, "reserve_slack"},
               {0.5, 0.0, 0.0, VRAM_HISTORY_MAX + 1, 0, 64, "history"},
               {0.5, 0.0, 0.0, 0, 3, 64, "roundup_power2_divisions"},
               {0.5, 0.0, 0.0, 0, 0, (1u << 20) + 1, "chunk_headroom"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vram_allocator_get_config(a, &want);
        want.memory_fraction = bad[i].fraction;
        want.garbage_collection_threshold = bad[i].gc;
        want.reserve_slack = bad[i].slack;
        want.history_entries = bad[i].history;
        want.roundup_power2_divisions = bad[i].divisions;
        want.chunk_headroom = bad[i].headroom;
        CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), bad[i].named),
              "bad value %zu refused, naming %s: %s", i, bad[i].named, vram_last_error());
        /* the same configuration is refused at creation too */
        vram_allocator *other = NULL;
        CHECK(vram_allocator_new(dev, &want, &other) == VRAM_ERR_INVALID_ARG && !other &&
                  strstr(vram_last_error(), bad[i].named),
              "allocator_new refuses bad value %zu: %s", i, vram_last_error());
    }
    vram_allocator_get_config(a, &got);
    CHECK(got.memory_fraction == 0.5 && got.expandable_segments == 0 && got.history_entries == 64 &&
              vram_allocator_limit(a) == 512 * MiB,
          "nothing changed by the refused calls");
    CHECK(vram_allocator_set_config(NULL, &want) == VRAM_ERR_INVALID_ARG &&
              vram_allocator_set_config(a, NULL) == VRAM_ERR_INVALID_ARG,
          "null arguments refused");

    /* garbage collection on at run time: frees are coalesced at once and the cache is trimmed */
    vram_allocator_get_config(a, &want);
    want.garbage_collection_threshold = 0.5;
    want.memory_fraction = 1.0;
    want.max_split_size = UINT64_MAX;
    CHECK_OK(vram_allocator_set_config(a, &want));
    vram_allocator_get_stats(a, &st);
    CHECK(st.oversize_allocations.current == 0 && st.oversize_segments.current == 0 && st.max_split_size == -1,
          "no split limit again");
    void *blocks[24];
    for (int i = 0; i < 24; i++) CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &blocks[i])); /* 720 MiB */
    for (int i = 0; i < 24; i++) CHECK_OK(vram_allocator_free(a, blocks[i]));
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current <= (int64_t)(512 * MiB),
          "garbage_collection_threshold 0.5: the cache trimmed to half the device once reserved memory passed it "
          "(%lld MiB reserved)", (long long)(st.reserved_bytes[0].current / (long long)MiB));
    CHECK_OK(vram_allocator_check(a));

    close_alloc(a, dev);

    /* during a capture the free path stays; other options may change */
    a = open_alloc("events:1GiB", "garbage_collection_threshold:0.5", &dev);
    CHECK(a != NULL, "allocator with events");
    if (!a) return;
    CHECK_OK(vram_allocator_begin_pool(a, 3));
    event_device_state(dev)->capturing = 1;
    vram_allocator_get_config(a, &want);
    want.garbage_collection_threshold = 0.0;
    CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_STATE, "garbage collection not switched during a capture");
    CHECK(vram_allocator_set_caching(a, 0) == VRAM_ERR_STATE, "nor caching");
    want.garbage_collection_threshold = 0.5;
    want.roundup_power2_divisions = 2;
    CHECK_OK(vram_allocator_set_config(a, &want));
    event_device_state(dev)->capturing = 0;
    CHECK_OK(vram_allocator_end_pool(a, 3));
    CHECK_OK(vram_allocator_release_pool(a, 3));
    vram_allocator_get_config(a, &got);
    CHECK(got.garbage_collection_threshold == 0.5 && got.roundup_power2_divisions == 2, "roundup changed in the capture");
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);
}

/* The segment (is_expandable as asked) that holds ptr in a snapshot, or -1 when none does. */
static int segment_kind(vram_allocator *a, const void *ptr) {
    vram_snapshot *snap = NULL;
    if (vram_allocator_snapshot(a, &snap) != VRAM_OK) return -1;
    int kind = -1;
    uint64_t p = (uint64_t)(uintptr_t)ptr;
    for (size_t i = 0; i < snap->num_segments; i++)
        if (p >= snap->segments[i].address && p < snap->segments[i].address + snap->segments[i].total_size)
            kind = snap->segments[i].is_expandable;
    vram_snapshot_free(snap);
    return kind;
}

/* expandable_segments switched at run time (PyTorch's _set_allocator_settings applies it to new
 * segments): a pages-model allocator turned off makes new segments for what its mapped pages
 * cannot hold, keeps serving from both, releases both, and grows by pages again once turned on;
 * one started in the segments model cannot turn pages on. */
static void test_expandable_switch(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    CHECK(a != NULL, "allocator");
    if (!a) return;
    vram_alloc_config want;
    void *p1, *p2, *p3, *p4;
    CHECK_OK(vram_allocator_malloc(a, 30 * MiB, 0, 0, &p1));
    CHECK(segment_kind(a, p1) == 1, "pages at the start");
    vram_allocator_get_config(a, &want);
    want.expandable_segments = 0;
    CHECK_OK(vram_allocator_set_config(a, &want));
    CHECK_OK(vram_allocator_malloc(a, 40 * MiB, 0, 0, &p2));
    CHECK(segment_kind(a, p2) == 0, "turned off: a new segment for memory the pages do not have mapped");
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, p1));
    CHECK_OK(vram_allocator_malloc(a, 20 * MiB, 0, 0, &p3));
    CHECK(p3 == p1, "mapped pages still serve requests that fit them");
    CHECK_OK(vram_allocator_malloc(a, 100 * 1024, 0, 0, &p4)); /* small pool: pages or a segment, both fine */
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, p2));
    CHECK_OK(vram_allocator_free(a, p3));
    CHECK_OK(vram_allocator_free(a, p4));
    CHECK_OK(vram_allocator_empty_cache(a));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.reserved_bytes[0].current == 0, "empty_cache returns both the pages and the segments (%lld left)",
          (long long)st.reserved_bytes[0].current);
    want.expandable_segments = 1;
    CHECK_OK(vram_allocator_set_config(a, &want));
    CHECK_OK(vram_allocator_malloc(a, 40 * MiB, 0, 0, &p2));
    CHECK(segment_kind(a, p2) == 1, "turned on again: pages");
    CHECK_OK(vram_allocator_free(a, p2));
    CHECK_OK(vram_allocator_check(a));
    close_alloc(a, dev);

    a = open_alloc("sim:1GiB", "expandable_segments:False", &dev);
    CHECK(a != NULL, "allocator in the segments model");
    if (!a) return;
    vram_allocator_get_config(a, &want);
    want.expandable_segments = 1;
    CHECK(vram_allocator_set_config(a, &want) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "segments model"),
          "started in the segments model: pages cannot be turned on (%s)", vram_last_error());
    close_alloc(a, dev);
}

int main(void) {
    test_basic_stats();
    test_bad_frees();
    test_coalesce_and_reuse();
    test_page_reuse();
    test_chunks();
    test_chunk_headroom();
    test_oom_fragmented();
    test_move_min();
    test_budget_after_empty_cache();
    test_auto_policies();
    test_chunk_map_all_or_nothing();
    test_limit_and_oom();
    test_segments_model();
    test_segments_limit_release();
    test_tags();
    test_solo_tag();
    test_streams();
    test_busy_pages_ask_first();
    test_busy_pages_edges();
    test_active_with_pending();
    test_placement_no_moves();
    test_free_beside_free();
    test_best_fit_ties();
    test_one_stream_merges();
    test_snapshot_and_history();
    test_host_memory();
    test_threads();
    test_config();
    test_rounding();
    test_small_classes();
    test_set_caching();
    test_set_config();
    test_expandable_switch();
    return check_done();
}
