/* test_breakdown.c — vram_allocator_cache_breakdown: where reserved memory lies (in use, free in
 * chunks holding nothing in use, free whole pages pinned by a chunk in use, free bytes of pages in
 * use), on layouts worked out by hand in both memory models, its sums over random operations on
 * the pages model with small chunks and on the simulated CUDA device, and bad arguments.
 */
#include <string.h>

#include "check.h"
#include "open_alloc.h"
#include "test_rng.h"
#include "vram/alloc.h"
#include "vram/backend.h"

#define MiB (1024ull * 1024)

static void expect(vram_allocator *a, int pool, uint64_t reserved, uint64_t held, uint64_t movable, uint64_t pinned,
                   uint64_t in_page, uint64_t chunks, uint64_t chunks_free, const char *what) {
    vram_cache_breakdown b;
    CHECK_OK(vram_allocator_cache_breakdown(a, pool, &b));
    CHECK(b.reserved_bytes == reserved && b.held_bytes == held, "%s: reserved %llu held %llu (want %llu, %llu)", what,
          (unsigned long long)b.reserved_bytes, (unsigned long long)b.held_bytes, (unsigned long long)reserved,
          (unsigned long long)held);
    CHECK(b.free_movable == movable && b.free_pinned == pinned && b.free_in_page == in_page,
          "%s: movable %llu pinned %llu in-page %llu (want %llu, %llu, %llu)", what, (unsigned long long)b.free_movable,
          (unsigned long long)b.free_pinned, (unsigned long long)b.free_in_page, (unsigned long long)movable,
          (unsigned long long)pinned, (unsigned long long)in_page);
    CHECK(b.chunks == chunks && b.chunks_free == chunks_free, "%s: chunks %llu free %llu (want %llu, %llu)", what,
          (unsigned long long)b.chunks, (unsigned long long)b.chunks_free, (unsigned long long)chunks,
          (unsigned long long)chunks_free);
}

/* Pages model, 2 MiB pages, 8 MiB chunks (4 pages), whatever the request's size (chunk_divisor:0). */
static void test_pages(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:8GiB", "chunk_size_mb:8,chunk_divisor:0", &dev);
    CHECK(a != NULL, "open");
    if (!a) return;
    expect(a, VRAM_POOL_ALL, 0, 0, 0, 0, 0, 0, 0, "empty");
    void *x, *y, *z;
    CHECK_OK(vram_allocator_malloc(a, 12 * MiB, 0, VRAM_TAG_OTHER, &x)); /* pages 0-5: chunks [0,4) [4,6) */
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, VRAM_TAG_OTHER, &y));  /* pages 6-7: chunk [6,8), 1 MiB free */
    expect(a, VRAM_POOL_LARGE, 16 * MiB, 15 * MiB, 0, 0, 1 * MiB, 3, 0, "two blocks");
    CHECK_OK(vram_allocator_free(a, x));
    expect(a, VRAM_POOL_LARGE, 16 * MiB, 3 * MiB, 12 * MiB, 0, 1 * MiB, 3, 2, "the first freed: its chunks movable");
    /* 5 MiB from the freed 12: pages 0-1 in use, page 2 half, page 3 free but in the same chunk */
    CHECK_OK(vram_allocator_malloc(a, 5 * MiB, 0, VRAM_TAG_OTHER, &z));
    CHECK((uintptr_t)z == (uintptr_t)x, "placed where the freed block was");
    expect(a, VRAM_POOL_LARGE, 16 * MiB, 8 * MiB, 4 * MiB, 2 * MiB, 2 * MiB, 3, 1, "a smaller block in the hole");
    expect(a, VRAM_POOL_SMALL, 0, 0, 0, 0, 0, 0, 0, "small pool untouched");
    void *s;
    CHECK_OK(vram_allocator_malloc(a, 1000, 0, VRAM_TAG_OTHER, &s)); /* a small block: one 2 MiB page of the small pool */
    expect(a, VRAM_POOL_SMALL, 2 * MiB, 1024, 0, 0, 2 * MiB - 1024, 1, 0, "small pool");
    expect(a, VRAM_POOL_ALL, 18 * MiB, 8 * MiB + 1024, 4 * MiB, 2 * MiB, 4 * MiB - 1024, 4, 1, "both pools");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* Segments model: a segment is a chunk; nothing is in-page. */
static void test_segments(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:8GiB", "expandable_segments:False", &dev);
    CHECK(a != NULL, "open");
    if (!a) return;
    void *x, *y;
    CHECK_OK(vram_allocator_malloc(a, 12 * MiB, 0, VRAM_TAG_OTHER, &x)); /* a 12 MiB segment */
    CHECK_OK(vram_allocator_malloc(a, 3 * MiB, 0, VRAM_TAG_OTHER, &y));  /* a 20 MiB segment, 17 free */
    expect(a, VRAM_POOL_LARGE, 32 * MiB, 15 * MiB, 0, 17 * MiB, 0, 2, 0, "two segments");
    CHECK_OK(vram_allocator_free(a, x));
    expect(a, VRAM_POOL_LARGE, 32 * MiB, 3 * MiB, 12 * MiB, 17 * MiB, 0, 2, 1, "one segment free");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* The sums hold whatever the layout: reserved = held + movable + pinned + in-page, reserved as the
 * statistics count it, held as allocated (no stream waits, no graph pools here). */
static void test_random(const char *spec, const char *conf) {
    vram_device *dev;
    vram_allocator *a = open_alloc(spec, conf, &dev);
    CHECK(a != NULL, "open %s", spec);
    if (!a) return;
    enum { SLOTS = 64 };
    void *slot[SLOTS] = {0};
    uint64_t rng = 0x5eed, bad = 0;
    for (int i = 0; i < 4000; i++) {
        unsigned k = (unsigned)(test_rng(&rng) % SLOTS);
        if (slot[k]) {
            CHECK_OK(vram_allocator_free(a, slot[k]));
            slot[k] = NULL;
        } else {
            uint64_t size = 1 + test_rng(&rng) % (test_rng(&rng) % 4 ? 3 * MiB : 96 * MiB);
            CHECK_OK(vram_allocator_malloc(a, size, 0, VRAM_TAG_OTHER, &slot[k]));
        }
        if (i % 37) continue;
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        for (int p = VRAM_POOL_ALL; p < VRAM_POOL_COUNT; p++) {
            vram_cache_breakdown b;
            CHECK_OK(vram_allocator_cache_breakdown(a, p, &b));
            if (b.reserved_bytes != b.held_bytes + b.free_movable + b.free_pinned + b.free_in_page ||
                b.reserved_bytes != (uint64_t)st.reserved_bytes[p].current ||
                b.held_bytes != (uint64_t)st.allocated_bytes[p].current || b.chunks_free > b.chunks)
                bad++;
        }
    }
    CHECK(bad == 0, "%s: %llu breakdowns whose sums do not hold", spec, (unsigned long long)bad);
    for (int k = 0; k < SLOTS; k++)
        if (slot[k]) CHECK_OK(vram_allocator_free(a, slot[k]));
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

static void test_bad_args(void) {
    vram_device *dev;
    vram_allocator *a = open_alloc("sim:1GiB", "", &dev);
    CHECK(a != NULL, "open");
    if (!a) return;
    vram_cache_breakdown b;
    CHECK(vram_allocator_cache_breakdown(a, 3, &b) == VRAM_ERR_INVALID_ARG, "no pool 3");
    CHECK(vram_allocator_cache_breakdown(a, -1, &b) == VRAM_ERR_INVALID_ARG, "no pool -1");
    CHECK(vram_allocator_cache_breakdown(a, VRAM_POOL_ALL, NULL) == VRAM_ERR_INVALID_ARG, "no output");
    CHECK(vram_allocator_cache_breakdown(NULL, VRAM_POOL_ALL, &b) == VRAM_ERR_INVALID_ARG, "no allocator");
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

int main(void) {
    test_pages();
    test_segments();
    test_random("sim:8GiB", "chunk_size_mb:8");
    test_random("cudasim:8GiB", "");
    test_bad_args();
    return check_done();
}
