/* test_chunk_divisor.c — chunk_divisor (VRAM_ALLOC_CONF, docs/alloc_conf.md): a request's pages are
 * mapped in chunks of at most 1/N of its size (a power of two of pages, never below an eighth of
 * chunk_size), and a page move for a need takes no chunk below 1/(4N) of it (at most a quarter
 * chunk).
 *
 * On the simulated CUDA device (64 MiB chunks, 2 MiB pages): how many chunks a request maps with
 * the default, with chunk_divisor:0 and with another divisor; the layout that motivates it (a
 * 256 MiB block freed, 200 MiB placed where it was: with 64 MiB chunks 56 MiB of free pages stay
 * pinned in the chunk the new block ends in, with 16 MiB chunks 8 MiB, and 48 MiB can move); a
 * large need that leaves the small chunks of small requests where they are and moves the large
 * chunks of a large block; the simulated device with page-sized chunks placing exactly as with
 * chunk_divisor:0; and the key's parsing, formatting and refusals. chunk_min_mb (the smallest
 * chunk, an eighth of chunk_size by default): the chunk counts it gives, the pinned pages it
 * frees in a smaller layout of the same kind, and its parsing.
 */
#include <string.h>

#include "check.h"
#include "conf_key_check.h"
#include "open_alloc.h"
#include "vram/alloc.h"
#include "vram/backend.h"

#define MiB (1024ull * 1024)

static vram_stats stats(vram_allocator *a) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    return st;
}

/* The chunks one request of `size` bytes maps on a fresh cudasim allocator under `conf`. */
static uint64_t chunks_for(const char *conf, uint64_t size) {
    vram_device *dev;
    vram_allocator *a = open_alloc("cudasim:8GiB", conf, &dev);
    CHECK(a != NULL, "open %s", conf);
    if (!a) return 0;
    void *p;
    CHECK_OK(vram_allocator_malloc(a, size, 0, VRAM_TAG_OTHER, &p));
    uint64_t n = stats(a).num_device_alloc;
    vram_cache_breakdown b;
    CHECK_OK(vram_allocator_cache_breakdown(a, VRAM_POOL_LARGE, &b));
    CHECK(b.chunks == n, "%s: the breakdown counts the same %llu chunks", conf, (unsigned long long)b.chunks);
    CHECK_OK(vram_allocator_check(a)); /* no chunk longer than chunk_size, every mapped run starts one */
    CHECK_OK(vram_allocator_free(a, p));
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return n;
}

static void test_chunk_sizes(void) {
    CHECK(chunks_for("", 256 * MiB) == 16, "256 MiB: 16 chunks of 16 MiB (1/16 of it)");
    CHECK(chunks_for("", 20 * MiB) == 3, "20 MiB: chunks of 8, 8 and 4 MiB (an eighth of a chunk at least)");
    CHECK(chunks_for("", 2048 * MiB) == 32, "2 GiB: 32 chunks of 64 MiB (never above chunk_size)");
    CHECK(chunks_for("", 100 * MiB) == 13, "100 MiB: 12 chunks of 8 MiB and one of 4 (6.25 MiB rounds down to 8)");
    CHECK(chunks_for("chunk_divisor:0", 256 * MiB) == 4, "chunk_divisor:0: 256 MiB in 4 chunks of 64 MiB");
    CHECK(chunks_for("chunk_divisor:0", 20 * MiB) == 1, "chunk_divisor:0: 20 MiB in one chunk");
    CHECK(chunks_for("chunk_divisor:4", 256 * MiB) == 4, "chunk_divisor:4: 256 MiB in chunks of 64 MiB");
    CHECK(chunks_for("chunk_divisor:4", 96 * MiB) == 6, "chunk_divisor:4: 96 MiB in chunks of 16 MiB");
    CHECK(chunks_for("chunk_size_mb:16", 256 * MiB) == 16, "chunk_size_mb:16: 16 MiB at most, as before");
    CHECK(chunks_for("chunk_size_mb:16", 10 * MiB) == 5, "chunk_size_mb:16: an eighth of 16 MiB is below a page: pages");
    CHECK(chunks_for("chunk_min_mb:2", 20 * MiB) == 10, "chunk_min_mb:2: 20 MiB in pages (1/16 of it is below one)");
    CHECK(chunks_for("chunk_min_mb:2", 100 * MiB) == 25, "chunk_min_mb:2: 100 MiB in chunks of 4 MiB (1/16: 6.25)");
    CHECK(chunks_for("chunk_min_mb:2", 256 * MiB) == 16, "chunk_min_mb:2: 256 MiB still in 16 MiB chunks");
    CHECK(chunks_for("chunk_min_mb:1", 20 * MiB) == 10, "chunk_min_mb:1: below a page means a page");
    CHECK(chunks_for("chunk_min_mb:32", 20 * MiB) == 1, "chunk_min_mb:32: 20 MiB in one chunk");
    CHECK(chunks_for("chunk_min_mb:128", 256 * MiB) == 4, "chunk_min_mb above chunk_size: chunks of chunk_size");
    CHECK(chunks_for("chunk_min_mb:2,chunk_divisor:0", 20 * MiB) == 1, "chunk_divisor:0: chunk_min_mb does nothing");
}

/* A block A of `asize` (a 2 MiB block B after it keeps A's memory from merging with the free end)
 * freed, a block C of `csize` placed where A was, under the VRAM_ALLOC_CONF `conf`: the large
 * pool's cache breakdown then, what of A's memory C's last chunk pins. 0 where the allocator did
 * not open. */
static int pinned_after(const char *conf, uint64_t asize, uint64_t csize, vram_cache_breakdown *b) {
    vram_device *dev;
    vram_allocator *a = open_alloc("cudasim:8GiB", conf, &dev);
    CHECK(a != NULL, "open");
    if (!a) return 0;
    void *x, *y, *z;
    CHECK_OK(vram_allocator_malloc(a, asize, 0, VRAM_TAG_OTHER, &x));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, VRAM_TAG_OTHER, &y));
    CHECK_OK(vram_allocator_free(a, x));
    CHECK_OK(vram_allocator_malloc(a, csize, 0, VRAM_TAG_OTHER, &z));
    CHECK(z == x, "C where A was");
    CHECK_OK(vram_allocator_cache_breakdown(a, VRAM_POOL_LARGE, b));
    CHECK_OK(vram_allocator_check(a));
    CHECK_OK(vram_allocator_free(a, z));
    CHECK_OK(vram_allocator_free(a, y));
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return 1;
}

/* A of 100 MiB, C of 90 MiB: A's chunks are 8 MiB by default, so C's last page leaves 3 free
 * pages of its chunk pinned (6 MiB) and A's 4 MiB tail chunk movable; with chunk_min_mb:2 A's
 * chunks are 4 MiB, one page stays pinned and 8 MiB can move. */
static void test_pinned_chunk_min(void) {
    for (int fine = 0; fine < 2; fine++) {
        vram_cache_breakdown b;
        if (!pinned_after(fine ? "chunk_min_mb:2" : "", 100 * MiB, 90 * MiB, &b)) return;
        uint64_t pinned = fine ? 2 * MiB : 6 * MiB, movable = fine ? 8 * MiB : 4 * MiB;
        CHECK(b.free_pinned == pinned && b.free_movable == movable,
              "%s: %llu MiB pinned, %llu movable (got %llu, %llu MiB)", fine ? "chunk_min_mb:2" : "default",
              (unsigned long long)(pinned >> 20), (unsigned long long)(movable >> 20),
              (unsigned long long)(b.free_pinned >> 20), (unsigned long long)(b.free_movable >> 20));
    }
}

/* A of 256 MiB, C of 200 MiB: what of A's memory stays pinned by C's last chunk. */
static void test_pinned(void) {
    for (int off = 0; off < 2; off++) {
        vram_cache_breakdown b;
        if (!pinned_after(off ? "chunk_divisor:0" : "", 256 * MiB, 200 * MiB, &b)) return;
        if (off)
            CHECK(b.free_pinned == 56 * MiB && b.free_movable == 0,
                  "64 MiB chunks: 56 MiB pinned, none movable (got %llu, %llu MiB)",
                  (unsigned long long)(b.free_pinned >> 20), (unsigned long long)(b.free_movable >> 20));
        else
            CHECK(b.free_pinned == 8 * MiB && b.free_movable == 48 * MiB,
                  "16 MiB chunks: 8 MiB pinned, 48 MiB movable (got %llu, %llu MiB)",
                  (unsigned long long)(b.free_pinned >> 20), (unsigned long long)(b.free_movable >> 20));
    }
}

/* 32 blocks of 20 MiB (chunks of 8, 8 and 4 MiB) then a 512 MiB block X (chunks of 32 MiB), a 2 MiB
 * block after each group; all but those freed. A request R of `rsize` at the free end lacks all its
 * pages and reserved memory is at its budget (reserve_slack:0): cached chunks move. For 1,100 MiB
 * (1/64 of it: 17 MiB) only X's 32 MiB chunks go and the small ones stay: reserved grows by the
 * rest; for 200 MiB (3 MiB) any chunk may go. Returns reserved memory after R. */
static int64_t move_for(uint64_t rsize, uint64_t *unmapped) {
    vram_device *dev;
    vram_allocator *a = open_alloc("cudasim:8GiB", "reserve_slack:0", &dev);
    CHECK(a != NULL, "open");
    if (!a) return -1;
    void *small[32], *x, *pin[2], *r;
    for (int i = 0; i < 32; i++) CHECK_OK(vram_allocator_malloc(a, 20 * MiB, 0, VRAM_TAG_OTHER, &small[i]));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, VRAM_TAG_OTHER, &pin[0]));
    CHECK_OK(vram_allocator_malloc(a, 512 * MiB, 0, VRAM_TAG_OTHER, &x));
    CHECK_OK(vram_allocator_malloc(a, 2 * MiB, 0, VRAM_TAG_OTHER, &pin[1]));
    CHECK(stats(a).num_device_alloc == 32 * 3 + 1 + 16 + 1, "the chunks: 3 per 20 MiB block, 16 for X, one per pin");
    for (int i = 0; i < 32; i++) CHECK_OK(vram_allocator_free(a, small[i]));
    CHECK_OK(vram_allocator_free(a, x));
    uint64_t frees = stats(a).num_device_free;
    CHECK_OK(vram_allocator_malloc(a, rsize, 0, VRAM_TAG_OTHER, &r));
    *unmapped = stats(a).num_device_free - frees;
    CHECK_OK(vram_allocator_check(a));
    int64_t res = stats(a).reserved_bytes[VRAM_POOL_LARGE].current;
    CHECK_OK(vram_allocator_free(a, r));
    CHECK_OK(vram_allocator_free(a, pin[0]));
    CHECK_OK(vram_allocator_free(a, pin[1]));
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return res;
}

static void test_move_sources(void) {
    uint64_t n = 0;
    int64_t res = move_for(1100 * MiB, &n);
    /* before R: 640 + 512 + 4 MiB; X's 512 MiB move, 588 MiB are mapped afresh */
    CHECK(res == (int64_t)((640 + 4 + 1100) * MiB), "1,100 MiB: X's chunks move, the 640 MiB of small chunks stay: %lld MiB",
          (long long)(res >> 20));
    CHECK(n == 16, "X's 16 chunks unmapped (or aliased), none of the 96 small ones: %llu", (unsigned long long)n);
    res = move_for(200 * MiB, &n);
    CHECK(res == (int64_t)((640 + 512 + 4) * MiB), "200 MiB: cached chunks of any size serve it, reserved stays: %lld MiB",
          (long long)(res >> 20));
}

/* The simulated device's chunks are one page: nothing to divide, and a move takes any page (the
 * same placement and device calls as chunk_divisor:0 on the random-looking sequence below). */
static void test_page_chunks(void) {
    uint64_t calls[2] = {0, 0}, reserved[2] = {0, 0};
    for (int off = 0; off < 2; off++) {
        vram_device *dev;
        vram_allocator *a = open_alloc("sim:64GiB", off ? "chunk_divisor:0" : "", &dev);
        CHECK(a != NULL, "open sim");
        if (!a) return;
        void *p[64] = {0};
        uint64_t seed = 12345;
        for (int i = 0; i < 4000; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int k = (int)((seed >> 33) % 64);
            if (p[k]) {
                CHECK_OK(vram_allocator_free(a, p[k]));
                p[k] = NULL;
            } else {
                uint64_t size = (2 + (seed >> 40) % 600) * MiB;
                CHECK_OK(vram_allocator_malloc(a, size, 0, VRAM_TAG_OTHER, &p[k]));
            }
        }
        vram_stats st = stats(a);
        calls[off] = st.num_device_alloc + st.num_device_free;
        reserved[off] = (uint64_t)st.reserved_bytes[VRAM_POOL_LARGE].peak;
        CHECK_OK(vram_allocator_check(a));
        for (int k = 0; k < 64; k++)
            if (p[k]) CHECK_OK(vram_allocator_free(a, p[k]));
        vram_allocator_destroy(a);
        vram_device_close(dev);
    }
    CHECK(calls[0] == calls[1] && reserved[0] == reserved[1] && calls[0] > 0,
          "sim: the same device calls (%llu, %llu) and peak (%llu, %llu MiB)", (unsigned long long)calls[0],
          (unsigned long long)calls[1], (unsigned long long)(reserved[0] >> 20), (unsigned long long)(reserved[1] >> 20));
}

static void test_config(void) {
    vram_alloc_config c;
    vram_alloc_config_default(&c);
    CHECK(c.chunk_divisor == 16, "16 by default");
    c = conf_key_check("chunk_divisor", "chunk_divisor:0", "chunk_divisor:4097");
    CHECK(c.chunk_divisor == 0, "chunk_divisor:0");
    CHECK(vram_alloc_config_parse("chunk_divisor:-1", &c) == VRAM_ERR_INVALID_ARG, "negative refused");
    vram_alloc_config_default(&c);
    c.chunk_divisor = 5000;
    CHECK(vram_alloc_config_check(&c) == VRAM_ERR_INVALID_ARG, "a struct above 4096 refused");
    vram_device *dev;
    CHECK_OK(vram_device_open("cudasim:1GiB", &dev));
    vram_allocator *a = NULL;
    CHECK(vram_allocator_new(dev, &c, &a) == VRAM_ERR_INVALID_ARG && a == NULL, "vram_allocator_new refuses it");
    vram_device_close(dev);
    vram_alloc_config_default(&c);
    CHECK(c.chunk_min == 0, "chunk_min_mb: 0 (an eighth of chunk_size) by default");
    c = conf_key_check("chunk_min_mb", "chunk_min_mb:2", "chunk_min_mb:3");
    CHECK(c.chunk_min == 2 * MiB, "chunk_min_mb:2");
    CHECK(vram_alloc_config_parse("chunk_min_mb:131072", &c) == VRAM_ERR_INVALID_ARG, "above 65536 refused");
}

int main(void) {
    test_chunk_sizes();
    test_pinned();
    test_pinned_chunk_min();
    test_move_sources();
    test_page_chunks();
    test_config();
    return check_done();
}
