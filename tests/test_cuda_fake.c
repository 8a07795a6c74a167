/* test_cuda_fake.c — vram's CUDA device and the allocator over it, against a fake driver
 * (tests/fakes/fake_cuda.c, loaded through VRAM_LIBCUDA) that enforces the driver's rules:
 * whole-mapping unmaps, access only on mapped memory, limited physical memory, events that stay
 * pending for a while, two devices with their own contexts and memory. Runs on any machine; the
 * real-GPU tests are in tests/gpu/ (the two-GPU one needs a machine with two).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_rng.h"
#include "vram/alloc.h"

#define MiB (1ull << 20)

typedef void (*counts_fn)(int *, int *, int *, int *, uint64_t *, int *);
static counts_fn fake_counts;
static uint64_t (*fake_used)(int device);
static void (*fake_set_capturing)(uintptr_t stream);
static void (*fake_capture)(uintptr_t stream, uint64_t id);

static void expect_clean(const char *when) {
    int maps, handles, res, segs, bad;
    uint64_t used;
    fake_counts(&maps, &handles, &res, &segs, &used, &bad);
    CHECK(maps == 0 && handles == 0 && res == 0 && segs == 0 && used == 0,
          "%s: driver still holds %d mappings, %d handles, %d reservations, %d segments, %llu bytes", when, maps,
          handles, res, segs, (unsigned long long)used);
    CHECK(bad == 0, "%s: %d calls broke the driver's rules", when, bad);
}

static uint64_t xs = 88172645463325252ull;
static uint64_t next_rand(void) { return test_rng(&xs); }

/* Random allocation and free on four streams with the invariant check along the way. */
static void allocator_run(vram_device *dev, const char *what, const char *conf) {
    vram_allocator *a = NULL;
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_alloc_config_parse(conf, &cfg));
    CHECK_OK(vram_allocator_new(dev, &cfg, &a));
    if (!a) return;
    enum { SLOTS = 300, OPS = 6000 };
    static void *slot[SLOTS];
    memset(slot, 0, sizeof slot);
    int ooms = 0, errors = 0, bad_checks = 0;
    for (int op = 0; op < OPS; op++) {
        int k = (int)(next_rand() % SLOTS);
        if (slot[k]) {
            if (vram_allocator_free(a, slot[k]) != VRAM_OK) errors++;
            slot[k] = NULL;
        } else {
            size_t size = (size_t)(next_rand() % (8 * MiB)) + 1;
            vram_stream s = (vram_stream)(0x1000 * (1 + next_rand() % 4));
            vram_status st = vram_allocator_malloc(a, size, s, VRAM_TAG_OTHER, &slot[k]);
            if (st == VRAM_ERR_OUT_OF_MEMORY) ooms++;
            else if (st != VRAM_OK) errors++;
            if (st != VRAM_OK) slot[k] = NULL;
        }
        if (op % 500 == 499 && vram_allocator_check(a) != VRAM_OK && bad_checks++ == 0)
            printf("%s: invariant broken at op %d: %s\n", what, op, vram_last_error());
    }
    printf("%s: %d out-of-memory answers (1 GiB fake device)\n", what, ooms);
    CHECK(errors == 0, "%s: %d calls failed other than out of memory (%s)", what, errors, vram_last_error());
    CHECK(bad_checks == 0, "%s: invariant check failed %d times", what, bad_checks);
    for (int k = 0; k < SLOTS; k++)
        if (slot[k]) CHECK_OK(vram_allocator_free(a, slot[k]));
    CHECK_OK(vram_allocator_empty_cache(a));
    size_t f = 0, t = 0;
    dev->ops->mem_info(dev, &f, &t);
    vram_stats stats;
    vram_allocator_get_stats(a, &stats);
    CHECK(stats.reserved_bytes[0].current == 0, "%s: empty_cache leaves %lld reserved", what,
          (long long)stats.reserved_bytes[0].current);
    CHECK(f == t, "%s: the driver has everything back after empty_cache (%zu of %zu free)", what, f, t);
    vram_allocator_destroy(a);
}

/* One allocator per device, each device's memory its own. */
typedef struct device_worker {
    vram_allocator *a;
    uint64_t seed;
    int errors;
} device_worker;

static void *device_work(void *arg) { /* random allocate/free on one device, from its own thread */
    device_worker *w = arg;
    void *slot[64] = {0};
    for (int op = 0; op < 20000; op++) {
        int k = (int)(test_rng(&w->seed) % 64);
        if (slot[k]) {
            w->errors += vram_allocator_free(w->a, slot[k]) != VRAM_OK;
            slot[k] = NULL;
        } else {
            vram_status st = vram_allocator_malloc(w->a, (size_t)(test_rng(&w->seed) % (4 * MiB)) + 1, 0, 0, &slot[k]);
            w->errors += st != VRAM_OK && st != VRAM_ERR_OUT_OF_MEMORY;
            if (st != VRAM_OK) slot[k] = NULL;
        }
    }
    for (int k = 0; k < 64; k++)
        if (slot[k]) w->errors += vram_allocator_free(w->a, slot[k]) != VRAM_OK;
    return NULL;
}

static int64_t reserved_of(vram_allocator *a) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    return st.reserved_bytes[0].current;
}

static void test_two_devices(void) {
    vram_device *dev[2] = {NULL, NULL};
    vram_allocator *a[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) {
        char spec[16];
        snprintf(spec, sizeof spec, "cuda:%d", d);
        CHECK_OK(vram_device_open(spec, &dev[d]));
        if (!dev[d]) return;
        CHECK(dev[d]->index == d, "%s has index %d", spec, dev[d]->index);
        CHECK_OK(vram_allocator_new(dev[d], NULL, &a[d]));
        if (!a[d]) return;
    }
    void *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(vram_allocator_malloc(a[0], 100 * MiB, 0, 0, &x));
    CHECK_OK(vram_allocator_malloc(a[1], 300 * MiB, 0, 0, &y));
    CHECK(fake_used(0) == (uint64_t)reserved_of(a[0]) && fake_used(1) == (uint64_t)reserved_of(a[1]),
          "each device holds its allocator's reserved memory: %llu/%lld, %llu/%lld", (unsigned long long)fake_used(0),
          (long long)reserved_of(a[0]), (unsigned long long)fake_used(1), (long long)reserved_of(a[1]));
    size_t f = 0, t = 0;
    CHECK_OK(dev[1]->ops->mem_info(dev[1], &f, &t));
    CHECK(t - f == fake_used(1) && fake_used(1) >= 300 * MiB, "cuda:1's mem_info sees cuda:1 only: %zu used", t - f);
    /* cuda:1 full: its allocation fails, cuda:0's still fits */
    CHECK(vram_allocator_malloc(a[1], 800 * MiB, 0, 0, &z) == VRAM_ERR_OUT_OF_MEMORY, "800 MiB more do not fit on cuda:1");
    CHECK(strstr(vram_last_error(), "out of memory") != NULL, "says so: %s", vram_last_error());
    CHECK_OK(vram_allocator_malloc(a[0], 800 * MiB, 0, 0, &z));
    CHECK_OK(vram_allocator_free(a[0], z));
    /* empty_cache on one device returns that device's memory only */
    uint64_t before0 = fake_used(0);
    CHECK_OK(vram_allocator_free(a[1], y));
    CHECK_OK(vram_allocator_empty_cache(a[1]));
    CHECK(fake_used(1) == 0 && fake_used(0) == before0, "empty_cache on cuda:1: %llu left there, cuda:0 %llu -> %llu",
          (unsigned long long)fake_used(1), (unsigned long long)before0, (unsigned long long)fake_used(0));
    CHECK_OK(vram_allocator_free(a[0], x));
    /* both devices at once, one thread each: every driver call must run in its device's context */
    device_worker w[2] = {{a[0], 1, 0}, {a[1], 2, 0}};
    pthread_t th[2];
    for (int d = 0; d < 2; d++) pthread_create(&th[d], NULL, device_work, &w[d]);
    for (int d = 0; d < 2; d++) pthread_join(th[d], NULL);
    for (int d = 0; d < 2; d++) {
        CHECK(w[d].errors == 0, "cuda:%d: %d calls failed from its thread", d, w[d].errors);
        CHECK_OK(vram_allocator_check(a[d]));
        CHECK(fake_used(d) == (uint64_t)reserved_of(a[d]), "cuda:%d after the threads: driver %llu, reserved %lld", d,
              (unsigned long long)fake_used(d), (long long)reserved_of(a[d]));
        vram_allocator_destroy(a[d]);
        vram_device_close(dev[d]);
    }
    expect_clean("after two devices");
}

int main(void) {
    setenv("VRAM_LIBCUDA", FAKE_CUDA_PATH, 1);
    setenv("FAKE_CUDA_MEMORY", "1073741824", 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    void *lib = dlopen(FAKE_CUDA_PATH, RTLD_NOW);
    fake_counts = lib ? (counts_fn)dlsym(lib, "fake_cuda_counts") : NULL;
    fake_used = lib ? (uint64_t(*)(int))dlsym(lib, "fake_cuda_used") : NULL;
    fake_set_capturing = lib ? (void (*)(uintptr_t))dlsym(lib, "fake_cuda_set_capturing") : NULL;
    fake_capture = lib ? (void (*)(uintptr_t, uint64_t))dlsym(lib, "fake_cuda_capture") : NULL;
    if (!fake_counts || !fake_used || !fake_set_capturing || !fake_capture) {
        CHECK(0, "cannot load the fake driver %s", FAKE_CUDA_PATH);
        return check_done();
    }
    vram_device *dev = NULL;
    CHECK_OK(vram_device_open("cuda:0", &dev));
    if (!dev) return check_done();
    CHECK(strcmp(dev->name, "Fake GPU") == 0 && strcmp(dev->kind, "cuda") == 0, "name %s", dev->name);
    CHECK(dev->page_size == 2 * MiB && dev->capacity == 1ull << 30, "page %zu, capacity %llu", dev->page_size,
          (unsigned long long)dev->capacity);

    /* Units: each page_map is one physical allocation, unmapped (moved, dropped) whole; the
     * fake refuses, as the driver does, any unmap that cuts a mapping. */
    uint64_t base = 0;
    size_t pg = dev->page_size;
    CHECK_OK(dev->ops->va_reserve(dev, 64 * pg, &base));
    CHECK_OK(dev->ops->page_map(dev, base, 3 * pg));
    CHECK_OK(dev->ops->page_map(dev, base + 3 * pg, 5 * pg));
    CHECK_OK(dev->ops->page_map(dev, base + 8 * pg, 8 * pg));
    CHECK(dev->ops->page_unmap(dev, base + 4 * pg, 2 * pg) == VRAM_ERR_STATE, "unmap of part of a unit refused");
    CHECK(strstr(vram_last_error(), "unmap of") && strstr(vram_last_error(), "splits a mapping"), "says why: %s",
          vram_last_error());
    CHECK(dev->ops->page_unmap(dev, base + 3 * pg, 9 * pg) == VRAM_ERR_STATE, "unmap ending inside a unit refused");
    CHECK_OK(dev->ops->page_unmap(dev, base + 3 * pg, 13 * pg)); /* two whole units */
    CHECK_OK(dev->ops->page_map(dev, base + 4 * pg, 2 * pg));
    CHECK_OK(dev->ops->page_map(dev, base + 12 * pg, 4 * pg));
    CHECK(dev->ops->page_map(dev, base + 5 * pg, 2 * pg) == VRAM_ERR_STATE, "overlapping map refused");
    CHECK(dev->ops->page_unmap(dev, base + 6 * pg, 2 * pg) == VRAM_ERR_STATE, "unmap of unmapped pages refused");
    CHECK(dev->ops->page_map(dev, base + 63 * pg, 2 * pg) == VRAM_ERR_INVALID_ARG, "map past the reservation refused");
    CHECK(dev->ops->page_map(dev, base + pg / 2, pg) == VRAM_ERR_INVALID_ARG, "unaligned map refused");
    /* Aliases: whole units of the source, mapped again at the target; the source dropped later. */
    CHECK_OK(dev->ops->page_map(dev, base + 20 * pg, 4 * pg));
    CHECK(dev->ops->page_alias(dev, base + 20 * pg, base + 30 * pg, 2 * pg) == VRAM_ERR_STATE,
          "alias of part of a unit refused");
    CHECK_OK(dev->ops->page_alias(dev, base + 20 * pg, base + 30 * pg, 4 * pg));
    CHECK(dev->ops->page_unmap(dev, base + 20 * pg, 4 * pg) == VRAM_ERR_STATE, "an alias source is dropped, not unmapped");
    CHECK(dev->ops->page_drop(dev, base + 30 * pg, 4 * pg) == VRAM_ERR_STATE, "a mapping that is no alias source is not dropped");
    CHECK(strstr(vram_last_error(), "drop of") && strstr(vram_last_error(), "not whole alias sources"), "says why: %s",
          vram_last_error());
    CHECK(dev->ops->page_drop(dev, base + 20 * pg, 2 * pg) == VRAM_ERR_STATE, "drop of part of an alias source refused");
    CHECK(dev->ops->page_drop(dev, base + 40 * pg, 2 * pg) == VRAM_ERR_STATE, "drop of unmapped pages refused");
    CHECK(dev->ops->page_drop(dev, base + 20 * pg + 1, pg) == VRAM_ERR_INVALID_ARG, "unaligned drop refused");
    CHECK_OK(dev->ops->page_drop(dev, base + 20 * pg, 4 * pg));
    CHECK_OK(dev->ops->page_unmap(dev, base + 30 * pg, 4 * pg));
    size_t f = 0, t = 0;
    CHECK_OK(dev->ops->mem_info(dev, &f, &t));
    CHECK(t - f == (3 + 2 + 4) * pg, "9 pages held: %zu", t - f);
    /* Out of memory mapping past the capacity: all or nothing. */
    uint64_t big = 0;
    CHECK_OK(dev->ops->va_reserve(dev, 1024 * pg, &big));
    CHECK(dev->ops->page_map(dev, big, 600 * pg) == VRAM_ERR_OUT_OF_MEMORY, "600 pages do not fit in 1 GiB");
    dev->ops->mem_info(dev, &f, &t);
    CHECK(t - f == 9 * pg, "a failed map takes nothing: %zu held", t - f);
    CHECK_OK(dev->ops->va_release(dev, big, 1024 * pg));
    CHECK_OK(dev->ops->page_unmap(dev, base, 3 * pg));
    CHECK_OK(dev->ops->page_unmap(dev, base + 4 * pg, 2 * pg));
    CHECK_OK(dev->ops->page_unmap(dev, base + 12 * pg, 4 * pg));
    CHECK_OK(dev->ops->va_release(dev, base, 64 * pg));
    /* Events: pending for a while, pooled. */
    void *ev = NULL, *ev2 = NULL;
    CHECK_OK(dev->ops->event_record(dev, 0x1000, &ev));
    CHECK(dev->ops->event_query(dev, ev) == VRAM_ERR_STATE, "pending event");
    CHECK_OK(dev->ops->event_sync(dev, ev));
    CHECK_OK(dev->ops->event_query(dev, ev));
    dev->ops->event_destroy(dev, ev);
    CHECK_OK(dev->ops->event_record(dev, 0x1000, &ev2));
    CHECK(ev2 == ev, "event reused from the pool");
    dev->ops->event_destroy(dev, ev2);
    /* Captures: which capture a stream records (cuStreamGetCaptureInfo); the legacy stream cannot say. */
    uint64_t capture = 1;
    CHECK(dev->ops->stream_capture != NULL, "the CUDA device says which capture a stream records");
    CHECK(dev->ops->stream_capture(dev, 0x1000, &capture) == VRAM_OK && capture == 0, "no capture: %llu",
          (unsigned long long)capture);
    fake_set_capturing(0x1000);
    uint64_t first = 0;
    CHECK(dev->ops->stream_capture(dev, 0x1000, &first) == VRAM_OK && first != 0 && first != VRAM_CAPTURE_UNNAMED,
          "the capturing stream, with its capture's id (%llu)", (unsigned long long)first);
    CHECK(dev->ops->stream_capture(dev, 0x2000, &capture) == VRAM_OK && capture == 0, "another stream");
    CHECK(dev->ops->stream_capture(dev, 0, &capture) != VRAM_OK, "the legacy stream cannot be asked");
    /* through the allocator: the capture's allocations are its pool's, another stream's are not */
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    CHECK_OK(vram_alloc_config_parse("chunk_size_mb:2", &cfg)); /* so that empty_cache can unmap a block */
    vram_allocator *ca = NULL;
    CHECK_OK(vram_allocator_new(dev, &cfg, &ca));
    if (ca) {
        void *ptrs[3] = {NULL, NULL, NULL}; /* on the capturing stream, another, the legacy one */
        CHECK_OK(vram_allocator_begin_pool(ca, 1));
        CHECK_OK(vram_allocator_malloc(ca, 4 * MiB, 0x1000, 0, &ptrs[0]));
        CHECK_OK(vram_allocator_malloc(ca, 6 * MiB, 0x2000, 0, &ptrs[1]));
        CHECK_OK(vram_allocator_malloc(ca, 8 * MiB, 0, 0, &ptrs[2]));
        fake_set_capturing(0);
        CHECK_OK(vram_allocator_end_pool(ca, 1));
        for (int k = 0; k < 3; k++) CHECK_OK(vram_allocator_free(ca, ptrs[k]));
        CHECK_OK(vram_allocator_empty_cache(ca));
        CHECK(fake_used(0) == 12 * MiB, "the graph keeps the capturing stream's 4 MiB and the legacy stream's 8 MiB, "
              "not the other stream's 6: %llu MiB held", (unsigned long long)(fake_used(0) / MiB));
        CHECK_OK(vram_allocator_release_pool(ca, 1));
        CHECK_OK(vram_allocator_empty_cache(ca));
        /* two captures at once, each named by its stream (bind_pool): each takes its own memory */
        fake_capture(0x1000, 500);
        CHECK_OK(vram_allocator_begin_pool(ca, 2));
        CHECK_OK(vram_allocator_bind_pool(ca, 2, 0x1000));
        fake_capture(0x3000, 600);
        CHECK_OK(vram_allocator_begin_pool(ca, 3));
        CHECK_OK(vram_allocator_bind_pool(ca, 3, 0x3000));
        void *x, *y, *x2;
        CHECK_OK(vram_allocator_malloc(ca, 4 * MiB, 0x1000, 0, &x));
        CHECK_OK(vram_allocator_free(ca, x));
        CHECK_OK(vram_allocator_malloc(ca, 4 * MiB, 0x3000, 0, &y));
        CHECK_OK(vram_allocator_malloc(ca, 4 * MiB, 0x1000, 0, &x2));
        CHECK(y != x && x2 == x, "a capture's freed block serves that capture again, not the other one");
        fake_capture(0x1000, 0);
        CHECK_OK(vram_allocator_end_pool(ca, 2));
        fake_capture(0x3000, 0);
        CHECK_OK(vram_allocator_end_pool(ca, 3));
        CHECK_OK(vram_allocator_free(ca, x2));
        CHECK_OK(vram_allocator_free(ca, y));
        CHECK_OK(vram_allocator_empty_cache(ca));
        CHECK(fake_used(0) == 8 * MiB, "both graphs keep their 4 MiB: %llu MiB held",
              (unsigned long long)(fake_used(0) / MiB));
        CHECK_OK(vram_allocator_release_pool(ca, 3)); /* the graph begun last */
        CHECK_OK(vram_allocator_empty_cache(ca));
        CHECK(fake_used(0) == 4 * MiB, "its release gives back its own 4 MiB, not the other graph's: %llu MiB held",
              (unsigned long long)(fake_used(0) / MiB));
        CHECK_OK(vram_allocator_release_pool(ca, 2));
        CHECK_OK(vram_allocator_empty_cache(ca));
        vram_allocator_destroy(ca);
    }
    expect_clean("after the page tests");

    allocator_run(dev, "pages model", "");
    expect_clean("after the pages-model allocator");
    allocator_run(dev, "pages model, 16 MiB chunks, busy pages moved", "chunk_size_mb:16,move_busy_pages:True");
    expect_clean("after the pages-model allocator with chunks");
    /* A reservation left mapped is cleaned up by close. */
    CHECK_OK(dev->ops->va_reserve(dev, 4 * pg, &base));
    CHECK_OK(dev->ops->page_map(dev, base, 2 * pg));
    vram_device_close(dev);
    expect_clean("after close");

    CHECK_OK(vram_device_open("cuda:0:segments", &dev));
    if (dev) {
        CHECK(!vram_device_has_pages(dev), "segments spec has no pages");
        allocator_run(dev, "segments model", "");
        vram_device_close(dev);
        expect_clean("after the segments-model allocator");
    }
    test_two_devices();
    setenv("FAKE_CUDA_NO_VMM", "1", 1);
    CHECK(vram_device_open("cuda:0:pages", &dev) == VRAM_ERR_UNSUPPORTED, "pages refused without VMM");
    CHECK_OK(vram_device_open("cuda:0", &dev));
    if (dev) {
        CHECK(!vram_device_has_pages(dev), "no VMM: segments chosen by itself");
        vram_device_close(dev);
    }
    CHECK(vram_device_open("cuda:3", &dev) == VRAM_ERR_NO_DEVICE, "ordinal past the count");
    return check_done();
}
