/* test_cuda_device.c — the CUDA device on a real GPU, below the allocator: pages mapped and
 * unmapped in arbitrary page-aligned pieces and written by a kernel, segments, events that
 * really wait for a kernel, the driver's out-of-memory answer, and bad specs. Skips (77)
 * where no CUDA device can be opened.
 */
#include <string.h>
#include <time.h>

#include "../check.h"
#include "cuda_kernels.h"
#include "vram/backend.h"

#define MiB (1ull << 20)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t used_bytes(vram_device *dev) {
    size_t f = 0, t = 0;
    dev->ops->mem_info(dev, &f, &t);
    return t - f;
}

int main(void) {
    vram_device *dev = NULL;
    if (tcu_gpu_present(1) == 0) check_skip("no CUDA driver or device");
    vram_status st = vram_device_open("cuda:0", &dev); /* a GPU is there: any failure is a failure */
    CHECK_OK(st);
    if (st != VRAM_OK) return check_done();
    tcu t;
    if (tcu_open(&t, 0) != 0) {
        CHECK(0, "the test's own driver setup failed");
        return check_done();
    }
    tcu_ptr s1 = tcu_stream(&t);
    CHECK(s1 != NULL, "stream");
    printf("device: %s, page %zu, capacity %llu\n", dev->name, dev->page_size, (unsigned long long)dev->capacity);
    CHECK(strcmp(dev->kind, "cuda") == 0, "kind %s", dev->kind);
    CHECK(dev->name[0] != 0, "a name");
    CHECK(dev->capacity > (1ull << 30), "capacity %llu", (unsigned long long)dev->capacity);
    CHECK(vram_device_has_pages(dev), "pages on a VMM device");
    CHECK(dev->page_size >= 2 * MiB && dev->page_size % (2 * MiB) == 0, "page size %zu", dev->page_size);

    /* Pages: each page_map is one unit (one physical allocation); units are unmapped whole, and
     * an alias maps a unit's memory at a second address. All written and read by kernels. */
    size_t pg = dev->page_size;
    uint64_t base = 0;
    CHECK_OK(dev->ops->va_reserve(dev, 32 * pg, &base));
    size_t used0 = used_bytes(dev);
    CHECK_OK(dev->ops->page_map(dev, base, 2 * pg));
    CHECK_OK(dev->ops->page_map(dev, base + 2 * pg, 8 * pg));
    CHECK_OK(dev->ops->page_map(dev, base + 10 * pg, 2 * pg));
    size_t used1 = used_bytes(dev);
    CHECK(used1 >= used0 + 12 * pg - 2 * MiB, "cuMemGetInfo shows the 12 mapped pages: %zu -> %zu", used0, used1);
    CHECK(tcu_fill(&t, base, 12 * pg, 11, s1, 0) == 0, "fill 12 pages");
    CHECK(tcu_check(&t, base, 12 * pg, 11, s1) == 0, "12 pages hold what was written");
    CHECK(tcu_fill(&t, base + 10 * pg, 2 * pg, 13, s1, 0) == 0, "fill the tail on its own"); /* pattern from its start */
    CHECK(dev->ops->page_unmap(dev, base + 3 * pg, 2 * pg) == VRAM_ERR_STATE, "unmapping part of a unit is refused");
    CHECK_OK(dev->ops->page_unmap(dev, base + 2 * pg, 8 * pg)); /* the middle unit */
    CHECK(dev->ops->page_unmap(dev, base + 2 * pg, pg) == VRAM_ERR_STATE, "unmapping an unmapped page is refused");
    CHECK(dev->ops->page_map(dev, base, pg) == VRAM_ERR_STATE, "mapping a mapped page is refused");
    CHECK(dev->ops->page_map(dev, base + 1, pg) == VRAM_ERR_INVALID_ARG, "unaligned map is refused");
    CHECK(dev->ops->page_map(dev, base + 40 * pg, pg) == VRAM_ERR_INVALID_ARG, "map outside the reservation is refused");
    CHECK(tcu_check(&t, base, 2 * pg, 11, s1) == 0, "pages kept mapped keep their data");
    CHECK(tcu_check(&t, base + 10 * pg, 2 * pg, 13, s1) == 0, "pages kept mapped keep their data (tail)");
    CHECK_OK(dev->ops->page_map(dev, base + 3 * pg, 4 * pg));
    CHECK(tcu_fill(&t, base + 3 * pg, 4 * pg, 12, s1, 0) == 0, "fill remapped");
    CHECK(tcu_check(&t, base + 3 * pg, 4 * pg, 12, s1) == 0, "remapped pages are usable");
    /* alias: the unit at [3, 7) shown at [20, 24) too, then its old address dropped */
    CHECK_OK(dev->ops->page_alias(dev, base + 3 * pg, base + 20 * pg, 4 * pg));
    CHECK(tcu_check(&t, base + 20 * pg, 4 * pg, 12, s1) == 0, "the alias shows the unit's data");
    CHECK_OK(dev->ops->page_drop(dev, base + 3 * pg, 4 * pg));
    CHECK(tcu_fill(&t, base + 20 * pg, 4 * pg, 14, s1, 0) == 0, "fill the alias after the drop");
    CHECK(tcu_check(&t, base + 20 * pg, 4 * pg, 14, s1) == 0, "the alias stays usable after the drop");
    CHECK_OK(dev->ops->page_unmap(dev, base, 2 * pg));
    CHECK_OK(dev->ops->page_unmap(dev, base + 20 * pg, 4 * pg));
    CHECK_OK(dev->ops->page_unmap(dev, base + 10 * pg, 2 * pg));
    size_t used2 = used_bytes(dev);
    CHECK(used2 <= used0 + 2 * MiB, "unmapping returns the memory: %zu -> %zu", used0, used2);
    CHECK_OK(dev->ops->va_release(dev, base, 32 * pg));

    /* The driver's out-of-memory: map more than the device has, all or nothing. */
    size_t big = (size_t)((dev->capacity + 8 * pg - 1) / pg) * pg + 8 * pg;
    CHECK_OK(dev->ops->va_reserve(dev, big, &base));
    double t0 = now_s();
    st = dev->ops->page_map(dev, base, big);
    printf("mapping %zu bytes: %s in %.2f s (%s)\n", big, vram_status_str(st), now_s() - t0, vram_last_error());
    CHECK(st == VRAM_ERR_OUT_OF_MEMORY, "more than the device holds is out of memory, got %s", vram_status_str(st));
    size_t used3 = used_bytes(dev);
    CHECK(used3 <= used0 + 2 * MiB, "a failed map leaves nothing mapped: %zu -> %zu", used0, used3);
    CHECK_OK(dev->ops->page_map(dev, base, 2 * pg));
    CHECK_OK(dev->ops->page_unmap(dev, base, 2 * pg));
    CHECK_OK(dev->ops->va_release(dev, base, big));

    /* Events wait for real work: a kernel spinning ~0.2 s is pending, then complete. */
    void *ev = NULL;
    CHECK(tcu_fill(&t, t.errs, 4, 1, s1, 400000000ull) == 0, "spin kernel");
    CHECK_OK(dev->ops->event_record(dev, (vram_stream)s1, &ev));
    CHECK(dev->ops->event_query(dev, ev) == VRAM_ERR_STATE, "event after a running kernel is pending");
    t0 = now_s();
    CHECK_OK(dev->ops->event_sync(dev, ev));
    printf("event_sync waited %.3f s\n", now_s() - t0);
    CHECK_OK(dev->ops->event_query(dev, ev));
    dev->ops->event_destroy(dev, ev);
    void *ev2 = NULL;
    CHECK_OK(dev->ops->event_record(dev, (vram_stream)s1, &ev2));
    CHECK(ev2 == ev, "events are pooled and reused");
    CHECK_OK(dev->ops->event_sync(dev, ev2));
    dev->ops->event_destroy(dev, ev2);
    vram_device_close(dev);

    /* Segments model. */
    CHECK_OK(vram_device_open("cuda:0:segments", &dev));
    if (dev) {
        CHECK(!vram_device_has_pages(dev) && dev->page_size == 0, "segments device has no pages");
        uint64_t p = 0;
        CHECK_OK(dev->ops->mem_alloc(dev, 10 * MiB + 512, &p));
        CHECK(tcu_fill(&t, p, 10 * MiB + 512, 5, s1, 0) == 0, "fill segment");
        CHECK(tcu_check(&t, p, 10 * MiB + 512, 5, s1) == 0, "segment usable");
        CHECK_OK(dev->ops->mem_free(dev, p, 10 * MiB + 512));
        CHECK(dev->ops->mem_alloc(dev, (size_t)dev->capacity * 2, &p) == VRAM_ERR_OUT_OF_MEMORY, "segment OOM");
        vram_device_close(dev);
    }

    /* Specs. */
    CHECK(vram_device_open("cuda:999", &dev) == VRAM_ERR_NO_DEVICE, "ordinal past the count");
    CHECK(strstr(vram_last_error(), "999") != NULL, "detail names it: %s", vram_last_error());
    CHECK(vram_device_open("cuda:0:bogus", &dev) == VRAM_ERR_INVALID_ARG, "bad argument");
    return check_done();
}
