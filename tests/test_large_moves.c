/* test_large_moves.c — large_moves (VRAM_ALLOC_CONF, docs/alloc_conf.md): a request of at least
 * twice move_min that lacks fewer pages than move_min moves cached pages for them rather than
 * growing reserved memory, and while one stream allocates a chunk moved busy may reach past the
 * block into free unmapped pages (the gap the block leaves is smaller than any chunk).
 *
 * The layout, on the simulated CUDA device (64 MiB chunks, aliasing, events) with one stream: a
 * 64 MiB block D, a 128 MiB block A, a 128 MiB block C, one chunk each 64 MiB; D and C freed,
 * then a 150 MiB request R lands where C was and lacks 22 MiB past C's pages. Reserved memory
 * (320 MiB) is above its budget (3% over the 320 MiB allocated at the peak, 330 MiB) by more than
 * the room left, and 22 MiB is below move_min: without large_moves the pages are mapped afresh
 * (342 MiB); with it D's chunk moves (aliased: the stream may still use it) to R's end, 42 MiB of
 * it past R, and reserved memory stays 320 MiB. Also: the key parses, formats and round-trips,
 * and a multi-stream allocator keeps moved chunks inside the block. (chunk_divisor:0 throughout: the
 * layout is one 64 MiB chunk a block; chunks in proportion to a request are test_chunk_divisor's.)
 */
#include <string.h>

#include "check.h"
#include "conf_key_check.h"
#include "open_alloc.h"
#include "vram/alloc.h"
#include "vram/backend.h"

#define MiB (1024ull * 1024)

static int64_t reserved(vram_allocator *a) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    return st.reserved_bytes[VRAM_POOL_LARGE].current;
}

/* One piece of GPU work queued, as a replay queues one per call: on cudasim with a lag it completes
 * only that many calls later. */
static void step(vram_device *dev) {
    if (dev->ops->host_step) dev->ops->host_step(dev, 0);
}

/* The layout above; returns reserved memory after R, or -1. `other` allocates a small block on
 * a second stream first (ending one-stream mode). */
static int64_t place(const char *spec, const char *conf, int other, void **r_out, vram_allocator **a_out,
                     vram_device **dev) {
    vram_allocator *a = open_alloc(spec, conf, dev);
    CHECK(a != NULL, "open %s", conf);
    if (!a) return -1;
    void *d, *x, *c, *r, *s = NULL;
    if (other) CHECK_OK(vram_allocator_malloc(a, 4096, (vram_stream)7, VRAM_TAG_OTHER, &s));
    step(*dev);
    CHECK_OK(vram_allocator_malloc(a, 64 * MiB, 0, VRAM_TAG_OTHER, &d));
    step(*dev);
    CHECK_OK(vram_allocator_malloc(a, 128 * MiB, 0, VRAM_TAG_OTHER, &x));
    step(*dev);
    CHECK_OK(vram_allocator_malloc(a, 128 * MiB, 0, VRAM_TAG_OTHER, &c));
    CHECK(reserved(a) == (int64_t)(320 * MiB), "%s: 320 MiB mapped, got %lld", conf, (long long)reserved(a));
    step(*dev);
    CHECK_OK(vram_allocator_free(a, d));
    step(*dev);
    CHECK_OK(vram_allocator_free(a, c));
    step(*dev);
    CHECK_OK(vram_allocator_malloc(a, 150 * MiB, 0, VRAM_TAG_OTHER, &r));
    CHECK(r == c, "%s: R placed where C was", conf);
    CHECK_OK(vram_allocator_check(a));
    *r_out = r;
    *a_out = a;
    return reserved(a);
}

static void test_moves(void) {
    vram_device *dev;
    vram_allocator *a;
    void *r;
    /* the GPU's work done at once: the freed blocks' pages are unmapped and mapped afresh */
    int64_t off = place("cudasim:8GiB", "large_moves:False,chunk_divisor:0", 0, &r, &a, &dev);
    CHECK(off == (int64_t)(342 * MiB), "without large_moves the 22 MiB are mapped: %lld MiB", (long long)(off >> 20));
    vram_allocator_destroy(a);
    vram_device_close(dev);
    int64_t on = place("cudasim:8GiB", "chunk_divisor:0", 0, &r, &a, &dev);
    CHECK(on == (int64_t)(278 * MiB), "with large_moves D's chunk goes, 22 MiB come: %lld MiB", (long long)(on >> 20));
    vram_allocator_destroy(a);
    vram_device_close(dev);

    /* the GPU's work never done (a lag no replay advances): D's pages are busy and move by aliasing */
    off = place("cudasim:8GiB,lag=1000", "large_moves:False,chunk_divisor:0", 0, &r, &a, &dev);
    CHECK(off == (int64_t)(342 * MiB), "busy, without large_moves: %lld MiB", (long long)(off >> 20));
    vram_allocator_destroy(a);
    vram_device_close(dev);
    on = place("cudasim:8GiB,lag=1000", "chunk_divisor:0", 0, &r, &a, &dev);
    CHECK(on == (int64_t)(320 * MiB), "busy, with large_moves D's chunk moves past R's end: %lld MiB", (long long)(on >> 20));
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    /* the memory past R is free and mapped: the next request there takes it without the device */
    uint64_t calls = st.num_device_alloc + st.num_device_free;
    void *t;
    step(dev);
    CHECK_OK(vram_allocator_malloc(a, 40 * MiB, 0, VRAM_TAG_OTHER, &t));
    CHECK((char *)t == (char *)r + 150 * MiB, "the next block goes right past R: %p (R %p)", t, r);
    vram_allocator_get_stats(a, &st);
    CHECK(st.num_device_alloc + st.num_device_free == calls && reserved(a) == on,
          "served by the moved chunk's pages past R, no device call");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);

    /* two streams: a moved chunk stays inside the block, and none fits R's 22 MiB gap */
    int64_t many = place("cudasim:8GiB,lag=1000", "chunk_divisor:0", 1, &r, &a, &dev);
    CHECK(many == (int64_t)(342 * MiB), "two streams: nothing moves past the block (the small block is the small pool's): %lld MiB", (long long)(many >> 20));
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

static void test_config(void) {
    vram_alloc_config c;
    vram_alloc_config_default(&c);
    CHECK(c.large_moves == 1, "on by default");
    c = conf_key_check("large_moves", "large_moves:False", "large_moves:sometimes");
    CHECK(c.large_moves == 0, "large_moves:False");
}

int main(void) {
    test_moves();
    test_config();
    return check_done();
}
