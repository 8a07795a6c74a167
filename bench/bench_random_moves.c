/* bench_random_moves.c — what page moves cost and bring on the latency benchmark's random workload.
 *
 * The random workload of docs/benchmarks.md §2 (1000 slots, 200,000 operations, log-uniform sizes
 * 256 B … 128 MiB) on the CPU stand-in of a GPU (tests/fakes/event_device.h: streams with
 * events, page aliasing; the GPU's code path), for several seeds and VRAM_ALLOC_CONF strings.
 * Seed k starts xorshift64 at 88172645463325252 ^ (k * 0x9E3779B97F4A7C15); k = 0 is the
 * benchmark's own sequence. Per seed, on a new allocator: one run, empty_cache, a "cold" run (as
 * bench_alloc_latency's "random", whose cold runs follow an empty_cache), then a "warm" run with
 * the cache kept. Per configuration it prints the mean over the seeds of the cold run's peak
 * reserved and peak allocated memory and of the device calls (maps, unmaps, aliases, drops: one
 * physical allocation each) of the cold and of the warm run. A move is two or more such calls
 * (on an H200 40-300 µs each, bench_cuda_pages), so the calls are the time side of the trade.
 *
 *   bench_random_moves [--seeds N] [--confs "CONF;CONF..."]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/fakes/event_device.h"
#include "vram/alloc.h"
#include "vram/bench.h"

enum { SLOTS = VRAM_BENCH_RANDOM_SLOTS, OPS = VRAM_BENCH_RANDOM_OPS };

typedef struct run_calls {
    double maps, unmaps, aliases, drops;
} run_calls;

/* One pass of the workload from `seed`; adds its device calls to *calls (when given). Returns 0, or
 * -1 when an allocation or free failed. */
static int run(vram_allocator *a, evdev_state *e, uint64_t seed, run_calls *calls) {
    static void *slot[SLOTS];
    memset(slot, 0, sizeof slot);
    uint64_t m = e->map_calls, u = e->unmap_calls, al = e->alias_calls, d = e->drop_calls;
    uint64_t x = seed;
    int rc = 0;
    for (int op = 0; op < OPS && !rc; op++) {
        uint64_t k = vram_bench_next(&x) % SLOTS;
        if (slot[k]) {
            rc = vram_allocator_free(a, slot[k]) != VRAM_OK;
            slot[k] = NULL;
        } else {
            rc = vram_allocator_malloc(a, (size_t)vram_bench_size(&x), 0, VRAM_TAG_OTHER, &slot[k]) != VRAM_OK;
        }
    }
    if (calls) {
        calls->maps += (double)(e->map_calls - m);
        calls->unmaps += (double)(e->unmap_calls - u);
        calls->aliases += (double)(e->alias_calls - al);
        calls->drops += (double)(e->drop_calls - d);
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k] && vram_allocator_free(a, slot[k]) != VRAM_OK) rc = 1;
    return rc ? -1 : 0;
}

int main(int argc, char **argv) {
    int seeds = 10;
    char confs[1024] = "chunk_size_mb:64;chunk_size_mb:64,move_min_mb:128;chunk_size_mb:64,reserve_slack:0.99";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc) seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--confs") && i + 1 < argc) snprintf(confs, sizeof confs, "%s", argv[++i]);
        else {
            fprintf(stderr, "usage: bench_random_moves [--seeds N] [--confs 'CONF;CONF...']\n");
            return 2;
        }
    }
    if (seeds < 1 || seeds > 1000) {
        fprintf(stderr, "bench_random_moves: --seeds must be 1 to 1000\n");
        return 2;
    }
    vram_machine_print(stdout, argc, argv);
    printf("\nThe random workload on the event device (141 GiB), mean over %d seeds; cold: the run after an "
           "empty_cache, warm: the next run, cache kept. Device calls per run.\n\n", seeds);
    printf("| VRAM_ALLOC_CONF | peak reserved, GB | peak allocated, GB | cold: maps | unmaps | aliases | drops "
           "| warm: maps | unmaps | aliases | drops |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (char *conf = confs; conf;) {
        char *semi = strchr(conf, ';');
        if (semi) *semi = '\0';
        double reserved = 0, allocated = 0;
        run_calls cold = {0, 0, 0, 0}, warm = {0, 0, 0, 0};
        for (int k = 0; k < seeds; k++) {
            uint64_t seed = VRAM_BENCH_SEED ^ ((uint64_t)k * 0x9E3779B97F4A7C15ull);
            vram_device *dev;
            vram_alloc_config cfg;
            vram_allocator *a = NULL;
            vram_alloc_config_default(&cfg);
            if (event_device_open("141GiB", &dev) != VRAM_OK) return 1;
            if (vram_alloc_config_parse(conf, &cfg) != VRAM_OK || vram_allocator_new(dev, &cfg, &a) != VRAM_OK) {
                fprintf(stderr, "bench_random_moves: '%s': %s\n", conf, vram_last_error());
                vram_device_close(dev);
                return 2;
            }
            evdev_state *e = event_device_state(dev);
            vram_stats st;
            int rc = run(a, e, seed, NULL);
            if (!rc) rc = vram_allocator_empty_cache(a) != VRAM_OK;
            vram_allocator_reset_peak_stats(a);
            if (!rc) rc = run(a, e, seed, &cold);
            vram_allocator_get_stats(a, &st);
            reserved += (double)st.reserved_bytes[0].peak / 1e9;
            allocated += (double)st.allocated_bytes[0].peak / 1e9;
            if (!rc) rc = run(a, e, seed, &warm);
            if (!rc) rc = vram_allocator_check(a) != VRAM_OK;
            if (rc) fprintf(stderr, "bench_random_moves: '%s', seed %d: %s\n", conf, k, vram_last_error());
            vram_allocator_destroy(a);
            vram_device_close(dev);
            if (rc) return 1;
        }
        double n = seeds;
        printf("| %s | %.3f | %.3f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", *conf ? conf : "(defaults)",
               reserved / n, allocated / n, cold.maps / n, cold.unmaps / n, cold.aliases / n, cold.drops / n,
               warm.maps / n, warm.unmaps / n, warm.aliases / n, warm.drops / n);
        conf = semi ? semi + 1 : NULL;
    }
    return 0;
}
