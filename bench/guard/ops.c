/* ops.c — the allocator loops that bench/compare_trees.py counts instructions of, built against
 * each tree's libvram.a by that script (public API only, so that any earlier tree links it).
 *
 *   ops DEVICE CONF pair SIZE N     N allocate+free pairs of SIZE bytes after 1000 warm-up pairs
 *   ops DEVICE CONF random N        N operations of bench.h's random live set (1000 slots)
 *
 * CONF is a VRAM_ALLOC_CONF string ("" for the defaults). The script runs each loop at N and
 * 2N under valgrind and takes the difference, so the setup's instructions cancel out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"
#include "vram/bench.h"

static int fail(const char *what) {
    fprintf(stderr, "ops: %s: %s\n", what, vram_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[3], "pair") == 0 && argc != 6) || (strcmp(argv[3], "random") == 0 && argc != 5) ||
        (strcmp(argv[3], "pair") != 0 && strcmp(argv[3], "random") != 0)) {
        fprintf(stderr, "usage: ops DEVICE CONF pair SIZE N | ops DEVICE CONF random N\n");
        return 2;
    }
    long n = atol(argv[argc - 1]);
    if (n < 1) {
        fprintf(stderr, "ops: N must be positive\n");
        return 2;
    }
    vram_device *dev = NULL;
    if (vram_device_open(argv[1], &dev) != VRAM_OK) return fail(argv[1]);
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    if (argv[2][0] && vram_alloc_config_parse(argv[2], &cfg) != VRAM_OK) return fail(argv[2]);
    vram_allocator *a = NULL;
    if (vram_allocator_new(dev, &cfg, &a) != VRAM_OK) return fail("allocator");
    void *p = NULL;
    if (strcmp(argv[3], "pair") == 0) {
        size_t size = (size_t)strtoull(argv[4], NULL, 10);
        for (long i = 0; i < 1000 + n; i++) {
            if (vram_allocator_malloc(a, size, 0, VRAM_TAG_OTHER, &p) != VRAM_OK) return fail("malloc");
            vram_allocator_free(a, p);
        }
    } else {
        static void *slot[VRAM_BENCH_RANDOM_SLOTS];
        uint64_t xs = VRAM_BENCH_SEED;
        for (long op = 0; op < n; op++) {
            uint64_t k = vram_bench_next(&xs) % VRAM_BENCH_RANDOM_SLOTS;
            if (slot[k]) {
                vram_allocator_free(a, slot[k]);
                slot[k] = NULL;
            } else if (vram_allocator_malloc(a, (size_t)vram_bench_size(&xs), 0, VRAM_TAG_OTHER, &slot[k]) != VRAM_OK) {
                slot[k] = NULL;
            }
        }
        for (int k = 0; k < VRAM_BENCH_RANDOM_SLOTS; k++)
            if (slot[k]) vram_allocator_free(a, slot[k]);
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    printf("peak reserved %lld, peak allocated %lld\n", (long long)st.reserved_bytes[0].peak,
           (long long)st.allocated_bytes[0].peak);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return 0;
}
