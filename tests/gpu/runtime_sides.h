/* runtime_sides.h — the two runtimes a GPU-against-CPU test compares (test_gpu_ops.c,
 * test_gpu_infer.c): a device, its allocator and a runtime on it, opened by spec ("host",
 * "cuda"); closing checks that no tensor was left allocated (the runtime's own scratch, tag
 * "other", aside).
 */
#ifndef VRAM_TESTS_RUNTIME_SIDES_H
#define VRAM_TESTS_RUNTIME_SIDES_H

#include "../check.h"
#include "vram/alloc.h"
#include "vram/autograd.h"

typedef struct side {
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt;
} side;

static int open_side(side *s, const char *spec) {
    vram_status st = vram_device_open(spec, &s->dev);
    if (st != VRAM_OK) return 0;
    CHECK_OK(vram_allocator_new(s->dev, NULL, &s->a));
    st = vram_runtime_new(s->a, 2, &s->rt);
    CHECK(st == VRAM_OK, "runtime on %s: %s (%s)", spec, vram_status_str(st), vram_last_error());
    return st == VRAM_OK;
}

static void close_side(side *s) {
    vram_runtime_free(s->rt);
    if (s->a) {
        vram_stats st;
        vram_allocator_get_stats(s->a, &st);
        int64_t left = st.allocated_bytes[VRAM_POOL_ALL].current - st.tags[VRAM_TAG_OTHER].allocated_bytes.current;
        CHECK(left == 0, "%lld bytes of tensors still allocated on %s at the end", (long long)left, s->dev->kind);
        vram_allocator_destroy(s->a);
    }
    vram_device_close(s->dev);
}

#endif
