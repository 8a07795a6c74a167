/* bench_alloc_latency.c — docs/benchmarks.md §2 through vram's allocator on any device:
 *
 *   bench_alloc_latency [DEVICE_SPEC] [--pairs N] [--repeat R]     (default cuda:0)
 *
 * 1. pair: allocate and free one block of the same size, repeatedly, after a warm-up; sizes
 *    512 B, 64 KiB, 1 MiB, 16 MiB, 256 MiB; ns per allocate+free pair (median of R runs).
 * 2. random live set: 1000 slots, 200,000 operations, xorshift64 seeded 88172645463325252,
 *    slot k = next() % 1000 freed if full, else filled with size() = (1<<e) + next() % (1<<e),
 *    e = 8 + next() % 19; ns per operation, peak reserved and peak allocated bytes, device calls
 *    (maps/allocations and unmaps/frees) in each timed run; "cold" with the cache emptied before
 *    each run, then "warm" with the cache kept from the run before.
 * 3. the host's atomic exchange: an uncontended acquire and release of a spin lock, ns per pair
 *    (median of 11 x 10 million): what the allocator's lock (src/memory/lock.h) costs a malloc
 *    or a free when threads take turns (9-10 ns on the H200's host, 2.6 on an AMD EPYC); a thread
 *    that allocates alone, as here, has the lock biased to it and executes no atomic exchange.
 * Both on stream 0 with the allocator's configuration from VRAM_ALLOC_CONF, so the same binary
 * measures the pages model (default) and the segments model (expandable_segments:False).
 * bench_torch_alloc.cpp runs the same two loops through PyTorch's allocators.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"
#include "vram/bench.h"

/* Median ns of an uncontended acquire (atomic exchange) + release (store) of a spin lock. */
static double lock_pair_ns(void) {
    enum { N = 10000000, R = 11 };
    static atomic_int lock;
    double runs[R];
    for (int r = 0; r < R; r++) {
        double t0 = vram_bench_now_ns();
        for (int i = 0; i < N; i++) {
            while (atomic_exchange_explicit(&lock, 1, memory_order_acquire)) {
            }
            atomic_store_explicit(&lock, 0, memory_order_release);
        }
        runs[r] = (vram_bench_now_ns() - t0) / N;
    }
    qsort(runs, R, sizeof runs[0], vram_bench_cmp_double);
    return runs[R / 2];
}

int main(int argc, char **argv) {
    const char *spec = "cuda:0";
    long pairs = 100000, repeat = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc) pairs = atol(argv[++i]);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = atol(argv[++i]);
        else if (argv[i][0] != '-') spec = argv[i];
        else {
            fprintf(stderr, "usage: bench_alloc_latency [DEVICE_SPEC] [--pairs N] [--repeat R]\n");
            return 2;
        }
    }
    if (pairs < 1 || repeat < 1 || repeat > 99) {
        fprintf(stderr, "bench_alloc_latency: --pairs and --repeat must be positive (repeat <= 99)\n");
        return 2;
    }
    vram_device *dev = NULL;
    if (vram_device_open(spec, &dev) != VRAM_OK) {
        fprintf(stderr, "bench_alloc_latency: %s: %s\n", spec, vram_last_error());
        return 1;
    }
    vram_allocator *a = NULL;
    if (vram_allocator_new(dev, NULL, &a) != VRAM_OK) {
        fprintf(stderr, "bench_alloc_latency: %s\n", vram_last_error());
        return 1;
    }
    char conf[VRAM_ALLOC_CONF_FORMAT_MAX];
    vram_alloc_config_format(vram_allocator_config(a), conf, sizeof conf);
    printf("device: %s (%s), VRAM_ALLOC_CONF: %s\n", spec, dev->name, conf);
    printf("allocator: vram %s\n", vram_allocator_config(a)->expandable_segments && vram_device_has_pages(dev)
                                         ? "pages" : "segments");

    const size_t sizes[] = {512, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        void *p = NULL;
        for (int w = 0; w < 1000; w++) { /* warm-up: maps the pages, fills the caches */
            if (vram_allocator_malloc(a, sizes[si], 0, VRAM_TAG_OTHER, &p) != VRAM_OK) {
                fprintf(stderr, "bench_alloc_latency: %s\n", vram_last_error());
                return 1;
            }
            vram_allocator_free(a, p);
        }
        double runs[99];
        for (long r = 0; r < repeat; r++) {
            double t0 = vram_bench_now_ns();
            for (long i = 0; i < pairs; i++) {
                vram_allocator_malloc(a, sizes[si], 0, VRAM_TAG_OTHER, &p);
                vram_allocator_free(a, p);
            }
            runs[r] = (vram_bench_now_ns() - t0) / (double)pairs;
        }
        qsort(runs, (size_t)repeat, sizeof runs[0], vram_bench_cmp_double);
        printf("pair %10zu B: %8.1f ns/pair (median of %ld x %ld)\n", sizes[si], runs[repeat / 2], repeat, pairs);
    }

    /* Cold: the cache emptied before each run (docs/benchmarks.md's figure, device calls included).
     * Warm: one untimed run first and the cache kept, so the timed runs measure the allocator's
     * own work on a cache that already holds the workload. */
    for (int warm = 0; warm < 2; warm++) {
        enum { SLOTS = 1000, OPS = 200000 };
        static void *slot[SLOTS];
        double runs[99];
        int64_t peak_res = 0, peak_alloc = 0;
        uint64_t calls_alloc = 0, calls_free = 0; /* device calls in the timed runs */
        for (long r = -warm; r < repeat; r++) {
            memset(slot, 0, sizeof slot);
            if (!warm) vram_allocator_empty_cache(a);
            vram_stats before;
            vram_allocator_get_stats(a, &before);
            vram_allocator_reset_peak_stats(a);
            uint64_t xs = VRAM_BENCH_SEED;
            long fails = 0;
            double t0 = vram_bench_now_ns();
            for (int op = 0; op < OPS; op++) {
                uint64_t k = vram_bench_next(&xs) % SLOTS;
                if (slot[k]) {
                    vram_allocator_free(a, slot[k]);
                    slot[k] = NULL;
                } else if (vram_allocator_malloc(a, (size_t)vram_bench_size(&xs), 0, VRAM_TAG_OTHER, &slot[k]) != VRAM_OK) {
                    fails++;
                    slot[k] = NULL;
                }
            }
            double t1 = vram_bench_now_ns();
            vram_stats st;
            vram_allocator_get_stats(a, &st);
            if (r >= 0) {
                runs[r] = (t1 - t0) / OPS;
                calls_alloc += st.num_device_alloc - before.num_device_alloc;
                calls_free += st.num_device_free - before.num_device_free;
            }
            peak_res = st.reserved_bytes[0].peak;
            peak_alloc = st.allocated_bytes[0].peak;
            for (int k = 0; k < SLOTS; k++)
                if (slot[k]) vram_allocator_free(a, slot[k]);
            if (fails) printf("random: %ld allocations failed (%s)\n", fails, vram_last_error());
        }
        qsort(runs, (size_t)repeat, sizeof runs[0], vram_bench_cmp_double);
        printf("random%s: %8.1f ns/op (median of %ld; min %.1f, max %.1f), peak reserved %.2f GB, peak allocated %.2f GB, "
               "device calls per run %.1f allocs/maps, %.1f frees/unmaps\n",
               warm ? " warm" : "", runs[repeat / 2], repeat, runs[0], runs[repeat - 1], peak_res / 1e9,
               peak_alloc / 1e9, (double)calls_alloc / repeat, (double)calls_free / repeat);
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    printf("device calls: %llu allocs/maps, %llu frees/unmaps\n", (unsigned long long)st.num_device_alloc,
           (unsigned long long)st.num_device_free);
    printf("host atomic exchange: %.2f ns per uncontended spin lock acquire+release (the allocator's lock when threads take turns; biased to a lone thread, as here, it takes none)\n",
           lock_pair_ns());
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return 0;
}
