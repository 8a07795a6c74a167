/* test_cuda_alloc.c — the caching allocator on a real GPU, in both memory models:
 *   1. every allocation is usable: a kernel writes every word of the block and another reads
 *      it all back;
 *   2. live blocks never overlap, under random allocation and free on four streams, each block
 *      filled on its stream and checked at the end (an overlap would clobber a pattern);
 *   3. cross-stream reuse waits: a kernel that spins, then writes its block, is still running
 *      when the block is freed; another stream's allocation must not receive that memory
 *      until the kernel is done (checked by an event and by the second stream's pattern
 *      surviving the first kernel's late writes), also when a limit forces the reuse;
 *   4. out of memory at a capacity limit is reported (with a report) and recovers;
 *   5. empty_cache lowers what cuMemGetInfo reports as used by what was cached;
 *   6. pages moved while busy (page_alias) reach no other stream early: a block freed on stream
 *      A while A's kernel is still to write it lends its pages to A's next block, whose last
 *      page is only partly used; stream B's block in the rest of that page must keep its
 *      pattern through A's late writes (with one stream alone at first, and with two).
 * Skips (77) where no CUDA device can be opened.
 */
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "cuda_kernels.h"
#include "../test_rng.h"
#include "vram/alloc.h"

#define MiB (1ull << 20)
#define SPIN_CYCLES 300000000ull /* ~0.15 s at H200 clocks */

static tcu t;

static uint64_t xs = 88172645463325252ull;
static uint64_t next_rand(void) { return test_rng(&xs); }

static size_t used_on_device(vram_device *dev) {
    size_t f = 0, total = 0;
    dev->ops->mem_info(dev, &f, &total);
    return total - f;
}

static vram_allocator *make(vram_device *dev, int pages) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    cfg.expandable_segments = pages;
    vram_allocator *a = NULL;
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    return a;
}

static void test_usable(vram_device *dev, int pages, tcu_ptr s) {
    vram_allocator *a = make(dev, pages);
    if (!a) return;
    const size_t sizes[] = {1, 4, 512, 4100, 1 * MiB, 3 * MiB + 12, 20 * MiB, 100 * MiB + 4, 1024 * MiB};
    void *ptrs[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ptrs[i] = NULL;
        CHECK_OK(vram_allocator_malloc(a, sizes[i], (vram_stream)s, VRAM_TAG_OTHER, &ptrs[i]));
        size_t bsize = 0, req = 0;
        CHECK_OK(vram_allocator_block_info(a, ptrs[i], &bsize, &req, NULL));
        CHECK(bsize >= sizes[i] && bsize % 4 == 0 && req == sizes[i], "block %zu for %zu", bsize, sizes[i]);
        CHECK(tcu_fill(&t, (uint64_t)(uintptr_t)ptrs[i], bsize, 100 + (uint32_t)i, s, 0) == 0, "fill launch");
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t bsize = 0;
        vram_allocator_block_info(a, ptrs[i], &bsize, NULL, NULL);
        int64_t bad = tcu_check(&t, (uint64_t)(uintptr_t)ptrs[i], bsize, 100 + (uint32_t)i, s);
        CHECK(bad == 0, "[%s] block of %zu bytes: %lld words wrong", pages ? "pages" : "segments", sizes[i], (long long)bad);
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) CHECK_OK(vram_allocator_free(a, ptrs[i]));
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
}

typedef struct live_block {
    uint64_t addr;
    size_t size;
    tcu_ptr stream;
    uint32_t seed;
} live_block;

static void test_no_overlap(vram_device *dev, int pages, tcu_ptr *streams) {
    vram_allocator *a = make(dev, pages);
    if (!a) return;
    enum { SLOTS = 200, OPS = 3000 };
    live_block live[SLOTS];
    memset(live, 0, sizeof live);
    int overlaps = 0, failures = 0;
    for (int op = 0; op < OPS; op++) {
        int k = (int)(next_rand() % SLOTS);
        if (live[k].addr) {
            if (vram_allocator_free(a, (void *)(uintptr_t)live[k].addr) != VRAM_OK) failures++;
            live[k].addr = 0;
            continue;
        }
        size_t size = (size_t)(1 + next_rand() % (8 * MiB)) & ~(size_t)3;
        if (!size) size = 4;
        tcu_ptr s = streams[next_rand() % 4];
        void *p = NULL;
        if (vram_allocator_malloc(a, size, (vram_stream)s, VRAM_TAG_OTHER, &p) != VRAM_OK) {
            failures++;
            continue;
        }
        uint64_t addr = (uint64_t)(uintptr_t)p;
        for (int j = 0; j < SLOTS; j++)
            if (live[j].addr && addr < live[j].addr + live[j].size && live[j].addr < addr + size) overlaps++;
        live[k] = (live_block){addr, size, s, (uint32_t)op};
        if (tcu_fill(&t, addr, size, (uint32_t)op, s, 0) != 0) failures++;
    }
    CHECK(overlaps == 0, "[%s] %d overlapping live blocks", pages ? "pages" : "segments", overlaps);
    CHECK(failures == 0, "[%s] %d failed calls", pages ? "pages" : "segments", failures);
    int64_t bad = 0;
    for (int j = 0; j < SLOTS; j++)
        if (live[j].addr) bad += tcu_check(&t, live[j].addr, live[j].size, live[j].seed, live[j].stream);
    CHECK(bad == 0, "[%s] %lld words of live blocks clobbered", pages ? "pages" : "segments", (long long)bad);
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
}

static void test_cross_stream(vram_device *dev, int pages, tcu_ptr sa, tcu_ptr sb, int with_limit) {
    vram_allocator *a = make(dev, pages);
    if (!a) return;
    const size_t size = 64 * MiB;
    void *p = NULL, *q = NULL;
    CHECK_OK(vram_allocator_malloc(a, size, (vram_stream)sa, VRAM_TAG_OTHER, &p));
    if (with_limit) {
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        /* room for p's memory only: q can only have it (after A's work) or fail */
        CHECK_OK(vram_allocator_set_limit(a, (uint64_t)st.reserved_bytes[0].current));
    }
    tcu_ptr ev = NULL;
    t.EventCreate(&ev, 2 /* CU_EVENT_DISABLE_TIMING */);
    CHECK(tcu_fill(&t, (uint64_t)(uintptr_t)p, size, 7, sa, SPIN_CYCLES) == 0, "spinning writer");
    t.EventRecord(ev, sa);
    CHECK_OK(vram_allocator_free(a, p)); /* the writer has not even started writing */
    vram_status st = vram_allocator_malloc(a, size, (vram_stream)sb, VRAM_TAG_OTHER, &q);
    CHECK(st == VRAM_OK, "[%s%s] allocation on stream B: %s (%s)", pages ? "pages" : "segments",
          with_limit ? ", limit" : "", vram_status_str(st), vram_last_error());
    if (st == VRAM_OK) {
        uint64_t pa = (uint64_t)(uintptr_t)p, qa = (uint64_t)(uintptr_t)q;
        int overlap = qa < pa + size && pa < qa + size;
        if (overlap) {
            CHECK(t.EventQuery(ev) == 0, "[%s%s] stream B got the block while stream A's kernel still ran",
                  pages ? "pages" : "segments", with_limit ? ", limit" : "");
        }
        printf("[%s%s] B's block %s A's\n", pages ? "pages" : "segments", with_limit ? ", limit" : "",
               overlap ? "reuses" : "is apart from");
        CHECK(tcu_fill(&t, qa, size, 8, sb, 0) == 0, "B fill");
        t.StreamSynchronize(sb);
        t.StreamSynchronize(sa); /* A's late writes, if they went to B's memory, are in now */
        int64_t bad = tcu_check(&t, qa, size, 8, sb);
        CHECK(bad == 0, "[%s%s] %lld words of B's block overwritten by A's kernel", pages ? "pages" : "segments",
              with_limit ? ", limit" : "", (long long)bad);
        CHECK_OK(vram_allocator_free(a, q));
    }
    t.StreamSynchronize(sa);
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
}

/* 6. The pages model with page-sized chunks and no slack, so that a block needing pages takes
 * those of a block freed busy (page_alias). Stream A: x (6 MiB, pages 0-2), l (2 MiB + 512 B:
 * page 3, the start of 4); A's spinning kernel is to write x; x freed. A's b (6 MiB + 512 B)
 * does not fit x's hole and goes after l: the rest of page 4, pages 5 and 6, and the start of
 * page 7, which x's pages fill. Then B's c (1.5 MiB) lies in the rest of page 7. If x's busy
 * page went to page 7 and B's block took its rest before A's kernel finished, A's late writes
 * land in c. `two`: stream B allocated (and holds a block) before anything else. */
static void test_busy_edge(vram_device *dev, tcu_ptr sa, tcu_ptr sb, int two) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_alloc_config_parse("chunk_size_mb:2,move_min_mb:2,reserve_slack:0,move_busy_pages:True", &cfg));
    vram_allocator *a = NULL;
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    if (!a) return;
    const char *what = two ? "two streams" : "one stream, then two";
    void *early = NULL, *x = NULL, *l = NULL, *b = NULL, *c = NULL;
    if (two) CHECK_OK(vram_allocator_malloc(a, 4096, (vram_stream)sb, VRAM_TAG_OTHER, &early));
    CHECK_OK(vram_allocator_malloc(a, 6 * MiB, (vram_stream)sa, VRAM_TAG_OTHER, &x));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB + 512, (vram_stream)sa, VRAM_TAG_OTHER, &l));
    if (!x || !l) return;
    CHECK(((uintptr_t)x & (2 * MiB - 1)) == 0, "[busy edge, %s] x starts a page", what);
    CHECK(tcu_fill(&t, (uint64_t)(uintptr_t)x, 6 * MiB, 11, sa, SPIN_CYCLES) == 0, "spinning writer of x");
    CHECK_OK(vram_allocator_free(a, x)); /* the writer has not started writing */
    CHECK_OK(vram_allocator_malloc(a, 6 * MiB + 512, (vram_stream)sa, VRAM_TAG_OTHER, &b));
    vram_status st = vram_allocator_malloc(a, 1536 * 1024, (vram_stream)sb, VRAM_TAG_OTHER, &c);
    CHECK(st == VRAM_OK, "[busy edge, %s] B's block: %s", what, vram_last_error());
    if (b && c) {
        uint64_t edge = ((uint64_t)(uintptr_t)b + 6 * MiB) & ~(2 * MiB - 1);
        int shares = (uint64_t)(uintptr_t)c >= edge && (uint64_t)(uintptr_t)c < edge + 2 * MiB;
        printf("[busy edge, %s] B's block %s the page where A's block ends\n", what, shares ? "shares" : "is apart from");
        CHECK(shares, "[busy edge, %s] the layout the test needs: B's block in the rest of A's last page", what);
        CHECK(tcu_fill(&t, (uint64_t)(uintptr_t)c, 1536 * 1024, 12, sb, 0) == 0, "B fill");
        t.StreamSynchronize(sb);
        t.StreamSynchronize(sa); /* A's late writes are in now */
        int64_t bad = tcu_check(&t, (uint64_t)(uintptr_t)c, 1536 * 1024, 12, sb);
        CHECK(bad == 0, "[busy edge, %s] %lld words of B's block overwritten by A's kernel", what, (long long)bad);
    }
    t.StreamSynchronize(sa);
    vram_stats sts;
    vram_allocator_get_stats(a, &sts);
    printf("[busy edge, %s] %llu maps, %llu unmaps\n", what, (unsigned long long)sts.num_device_alloc,
           (unsigned long long)sts.num_device_free);
    void *blocks[] = {c, b, l, early};
    for (int i = 0; i < 4; i++)
        if (blocks[i]) CHECK_OK(vram_allocator_free(a, blocks[i]));
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
}

static void test_oom(vram_device *dev, int pages, tcu_ptr s) {
    vram_allocator *a = make(dev, pages);
    if (!a) return;
    CHECK_OK(vram_allocator_set_limit(a, 1024 * MiB));
    void *ptrs[16] = {0};
    int n = 0;
    vram_status st = VRAM_OK;
    while (n < 16 && (st = vram_allocator_malloc(a, 200 * MiB, (vram_stream)s, VRAM_TAG_ACTIVATION, &ptrs[n])) == VRAM_OK) n++;
    CHECK(st == VRAM_ERR_OUT_OF_MEMORY, "[%s] past the limit is out of memory: %s", pages ? "pages" : "segments",
          vram_status_str(st));
    CHECK(n >= 4 && n <= 5, "[%s] %d blocks of 200 MiB fit under 1 GiB", pages ? "pages" : "segments", n);
    const char *report = vram_allocator_oom_report(a);
    CHECK(report && strlen(report) > 20, "an OOM report");
    printf("OOM report [%s]:\n%s\n", pages ? "pages" : "segments", report);
    vram_stats stats;
    vram_allocator_get_stats(a, &stats);
    CHECK(stats.num_ooms == 1, "num_ooms %llu", (unsigned long long)stats.num_ooms);
    /* more than the device holds: out of memory from the limit or the driver, then recovery */
    void *huge = NULL;
    CHECK_OK(vram_allocator_set_limit(a, 0));
    st = vram_allocator_malloc(a, (size_t)dev->capacity + 1024 * MiB, (vram_stream)s, VRAM_TAG_OTHER, &huge);
    CHECK(st == VRAM_ERR_OUT_OF_MEMORY, "more than the device: %s", vram_status_str(st));
    CHECK_OK(vram_allocator_set_limit(a, 1024 * MiB));
    CHECK_OK(vram_allocator_free(a, ptrs[0]));
    void *again = NULL;
    CHECK_OK(vram_allocator_malloc(a, 200 * MiB, (vram_stream)s, VRAM_TAG_ACTIVATION, &again));
    if (again) {
        CHECK(tcu_fill(&t, (uint64_t)(uintptr_t)again, 200 * MiB, 3, s, 0) == 0, "fill after OOM");
        CHECK(tcu_check(&t, (uint64_t)(uintptr_t)again, 200 * MiB, 3, s) == 0, "usable after OOM");
        CHECK_OK(vram_allocator_free(a, again));
    }
    for (int i = 1; i < n; i++) CHECK_OK(vram_allocator_free(a, ptrs[i]));
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
}

/* Segments model, the driver (not a limit) refusing memory: with 4 GiB cached in 1 GiB segments
 * and the device otherwise nearly full (the test holds all but 2 GiB of what is free), a 3 GiB
 * request fits no cached segment and the driver refuses a new one; the allocator releases its
 * cache and retries, and the request is served from what that gave back (PyTorch's retry). */
static void test_driver_oom_retry(vram_device *dev, tcu_ptr s) {
    vram_allocator *a = make(dev, 0);
    if (!a) return;
    void *ptrs[4] = {0};
    for (int i = 0; i < 4; i++) CHECK_OK(vram_allocator_malloc(a, 1024 * MiB, (vram_stream)s, VRAM_TAG_OTHER, &ptrs[i]));
    for (int i = 0; i < 4; i++)
        if (ptrs[i]) CHECK_OK(vram_allocator_free(a, ptrs[i]));
    t.StreamSynchronize(s);
    size_t dfree = 0, dtotal = 0;
    uint64_t hog = 0;
    CHECK(t.MemGetInfo(&dfree, &dtotal) == 0 && dfree > 3 * 1024 * MiB, "device free memory: %zu", dfree);
    if (dfree > 3 * 1024 * MiB && t.MemAlloc(&hog, dfree - 2 * 1024 * MiB) == 0) {
        void *p = NULL;
        vram_status st = vram_allocator_malloc(a, 3 * 1024 * MiB, (vram_stream)s, VRAM_TAG_OTHER, &p);
        vram_stats stats;
        vram_allocator_get_stats(a, &stats);
        CHECK(st == VRAM_OK && stats.num_alloc_retries == 1 && stats.num_ooms == 0,
              "[segments] the driver refused, the cache went back, the retry fit: %s, %llu retries, %llu OOMs",
              vram_status_str(st), (unsigned long long)stats.num_alloc_retries, (unsigned long long)stats.num_ooms);
        if (p) {
            CHECK(tcu_fill(&t, (uint64_t)(uintptr_t)p, 3 * 1024 * MiB, 5, s, 0) == 0 &&
                      tcu_check(&t, (uint64_t)(uintptr_t)p, 3 * 1024 * MiB, 5, s) == 0,
                  "[segments] the retried block is usable");
            CHECK_OK(vram_allocator_free(a, p));
        }
        t.MemFree(hog);
    } else {
        CHECK(0, "the test could not take the device's free memory");
    }
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
}

static void test_empty_cache(vram_device *dev, int pages, tcu_ptr s) {
    vram_allocator *a = make(dev, pages);
    if (!a) return;
    void *ptrs[8];
    for (int i = 0; i < 8; i++) {
        ptrs[i] = NULL;
        CHECK_OK(vram_allocator_malloc(a, 500 * MiB, (vram_stream)s, VRAM_TAG_OTHER, &ptrs[i]));
        if (ptrs[i]) tcu_fill(&t, (uint64_t)(uintptr_t)ptrs[i], 500 * MiB, 1, s, 0);
    }
    for (int i = 0; i < 8; i++) CHECK_OK(vram_allocator_free(a, ptrs[i]));
    vram_stats before, after;
    vram_allocator_get_stats(a, &before);
    size_t used0 = used_on_device(dev);
    CHECK_OK(vram_allocator_empty_cache(a));
    size_t used1 = used_on_device(dev);
    vram_allocator_get_stats(a, &after);
    int64_t cached = before.reserved_bytes[0].current - before.allocated_bytes[0].current;
    int64_t released = before.reserved_bytes[0].current - after.reserved_bytes[0].current;
    printf("[%s] empty_cache: cached %lld, released %lld, device used %zu -> %zu\n", pages ? "pages" : "segments",
           (long long)cached, (long long)released, used0, used1);
    CHECK(cached >= (int64_t)(4000 * MiB), "4000 MiB cached, got %lld", (long long)cached);
    CHECK(released == cached, "everything cached is released: %lld of %lld", (long long)released, (long long)cached);
    CHECK(used0 > used1 && used0 - used1 >= (size_t)released - 4 * MiB,
          "[%s] cuMemGetInfo used fell by %lld, released %lld", pages ? "pages" : "segments",
          (long long)used0 - (long long)used1, (long long)released);
    vram_allocator_destroy(a);
}

int main(void) {
    vram_device *dev = NULL;
    if (tcu_gpu_present(1) == 0) check_skip("no CUDA driver or device");
    vram_status st = vram_device_open("cuda:0", &dev); /* a GPU is there: any failure is a failure */
    CHECK_OK(st);
    if (st != VRAM_OK) return check_done();
    if (tcu_open(&t, 0) != 0) {
        CHECK(0, "the test's own driver setup failed");
        return check_done();
    }
    tcu_ptr streams[4];
    for (int i = 0; i < 4; i++) {
        streams[i] = tcu_stream(&t);
        CHECK(streams[i] != NULL, "stream %d (a NULL stream would be the legacy one, shared by all)", i);
        if (!streams[i]) return check_done();
    }
    for (int pages = 1; pages >= 0; pages--) {
        test_usable(dev, pages, streams[0]);
        test_no_overlap(dev, pages, streams);
        /* without a limit B may take memory of its own (then A's late writes cannot reach it);
         * with room for one block only, B gets A's memory, and must not before A's work is done */
        test_cross_stream(dev, pages, streams[0], streams[1], 0);
        test_cross_stream(dev, pages, streams[0], streams[1], 1);
        test_oom(dev, pages, streams[2]);
        test_empty_cache(dev, pages, streams[3]);
    }
    test_busy_edge(dev, streams[0], streams[1], 0);
    test_busy_edge(dev, streams[0], streams[1], 1);
    test_driver_oom_retry(dev, streams[2]);
    vram_device_close(dev);
    return check_done();
}
