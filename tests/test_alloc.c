/* test_alloc.c — the caching allocator's behaviour, case by case, with exact numbers, mostly on
 * one stream: rounding and pools, statistics, bad frees, coalescing, page reuse, chunks and their
 * headroom near the limit, when cached pages move, limits and OOM reports, both memory models,
 * tags, snapshots and history, real host memory, best-fit placement and small size classes
 * (with which stream may take a held small block back). Each test_* function opens its own
 * device and allocator (alloc_test_util.h), works through one layout and closes it with the
 * invariant checker; main runs them in order. Streams, record_stream and threads are
 * test_alloc_streams.c's; configuration, parsed or changed at run time, test_alloc_config.c's.
 */
#include <string.h>

#include "alloc_test_util.h"
#include "vram/snapshot.h"

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

/* A need for pages below move_min (default: one chunk) maps fresh pages; from move_min up,
 * cached chunks move instead. x (one 8 MiB chunk) is freed before y; w, freed after, leaves
 * 4 MiB mapped at the head of the free end; 9 MiB fits neither hole whole and needs 6 MiB of
 * new pages at the free end. */
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

/* Placement with no page moves, on a device with events (freed blocks stay usable by their
 * stream only): a request larger than a free block at the end of the used range extends that
 * block instead of mapping pages beyond it, and a deferred block is seen by a request that
 * splits a free block. */
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

/* Small size classes: requests of 4 KiB to 1 MiB round to four classes per power of two (512 B
 * steps below), a small block freed stays uncoalesced (in its `recent` slot, then held on its
 * class's stack) and the next request of its class on a stream that may use it gets it back;
 * held blocks are coalesced before the small pool grows, and by empty_cache; small_classes:False
 * rounds to 512 B as PyTorch does. */
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
    test_chunk_map_all_or_nothing();
    test_limit_and_oom();
    test_segments_model();
    test_segments_limit_release();
    test_tags();
    test_solo_tag();
    test_placement_no_moves();
    test_free_beside_free();
    test_best_fit_ties();
    test_snapshot_and_history();
    test_host_memory();
    test_rounding();
    test_small_classes();
    return check_done();
}
