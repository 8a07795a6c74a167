/* bench_random_split.c — where the random latency workload's time goes, by kind of operation.
 *
 *   bench_random_split [DEVICE_SPEC] [--runs N]     (default cudasim, 5 timed runs)
 *
 * The random workload of docs/benchmarks.md §2 (1000 slots, 200,000 operations), warm: one
 * untimed run first, the cache kept, then N timed runs. Each allocator call is timed alone and
 * counted as a malloc or a free of a small (<= 1 MiB, the small pool) or large block, so the
 * table shows what each kind costs and what share of the allocator's time it takes; the harness's
 * own work (the random numbers, the slot array) is left out, and the timer's own cost (measured
 * on empty intervals) is subtracted. On x86-64 the timer is the time-stamp counter, converted to
 * ns against CLOCK_MONOTONIC over the whole run; elsewhere CLOCK_MONOTONIC, whose own cost is
 * then most of each figure. The configuration comes from VRAM_ALLOC_CONF. bench_alloc_latency
 * gives the end-to-end figure that is compared with PyTorch's.
 *
 * A second table splits the same calls by what they asked of the device: nothing, only stream
 * events (record, query, sync, destroy), or memory (page maps, unmaps, aliases, drops, device
 * allocations and frees), counted by counted_device.h's wrappers of the device's functions, so the
 * allocator's own bookkeeping and the driver's time show apart (on a real GPU a page call costs
 * tens of microseconds or more, on cudasim only the allocator's own work around it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "vram/alloc.h"
#include "vram/bench.h"
#include "counted_device.h"

static inline uint64_t ticks(void) {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return (uint64_t)vram_bench_now_ns();
#endif
}

enum { SMALL_MALLOC, LARGE_MALLOC, SMALL_FREE, LARGE_FREE, KINDS };
static const char *const kind_names[KINDS] = {"malloc, small", "malloc, large", "free, small", "free, large"};

/* What a call asked of the device (counted_device.h). */
enum { ASKED_NOTHING, ASKED_EVENTS, ASKED_MEMORY, ASKED };
static const char *const asked_names[ASKED] = {"nothing", "stream events only", "memory (maps, unmaps, moves)"};

int main(int argc, char **argv) {
    const char *spec = "cudasim";
    int runs = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (argv[i][0] != '-') spec = argv[i];
        else {
            fprintf(stderr, "usage: bench_random_split [DEVICE_SPEC] [--runs N]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 100) {
        fprintf(stderr, "bench_random_split: --runs must be 1 to 100\n");
        return 2;
    }
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    if (vram_device_open(spec, &dev) != VRAM_OK) {
        fprintf(stderr, "bench_random_split: %s: %s\n", spec, vram_last_error());
        return 1;
    }
    static counted_device counted_dev; /* (static: the device uses it until it is closed) */
    counted_device_attach(&counted_dev, dev);
    if (vram_allocator_new(dev, NULL, &a) != VRAM_OK) {
        fprintf(stderr, "bench_random_split: %s: %s\n", spec, vram_last_error());
        vram_device_close(dev);
        return 1;
    }
    vram_machine_print(stdout, argc, argv);
    printf("device:  %s (%s)\n\n", spec, dev->name);

    /* the timer's own cost: empty intervals */
    uint64_t empty = UINT64_MAX;
    for (int i = 0; i < 100000; i++) {
        uint64_t t0 = ticks(), t1 = ticks();
        if (t1 - t0 < empty) empty = t1 - t0;
    }
    static void *slot[VRAM_BENCH_RANDOM_SLOTS];
    static size_t slot_size[VRAM_BENCH_RANDOM_SLOTS];
    uint64_t sum[KINDS] = {0}, count[KINDS] = {0}, fails = 0;
    uint64_t asked_sum[ASKED] = {0}, asked_count[ASKED] = {0};
    uint64_t memory_before = 0, events_before = 0; /* the counts where the timed runs start */
    double wall0 = 0, wall = 0;
    uint64_t tick0 = 0, tick = 0;
    for (int r = -1; r < runs; r++) { /* run -1: the untimed warm-up */
        uint64_t xs = VRAM_BENCH_SEED;
        if (r == 0) {
            wall0 = vram_bench_now_ns();
            tick0 = ticks();
            memory_before = counted_memory_calls(&counted_dev);
            events_before = counted_dev.events;
        }
        for (int op = 0; op < VRAM_BENCH_RANDOM_OPS; op++) {
            uint64_t k = vram_bench_next(&xs) % VRAM_BENCH_RANDOM_SLOTS;
            int kind;
            uint64_t t0, t1, memory0 = counted_memory_calls(&counted_dev), events0 = counted_dev.events;
            if (slot[k]) {
                kind = slot_size[k] <= (1u << 20) ? SMALL_FREE : LARGE_FREE;
                t0 = ticks();
                vram_allocator_free(a, slot[k]);
                t1 = ticks();
                slot[k] = NULL;
            } else {
                size_t size = (size_t)vram_bench_size(&xs);
                kind = size <= (1u << 20) ? SMALL_MALLOC : LARGE_MALLOC;
                t0 = ticks();
                vram_status st = vram_allocator_malloc(a, size, 0, VRAM_TAG_OTHER, &slot[k]);
                t1 = ticks();
                if (st != VRAM_OK) {
                    slot[k] = NULL;
                    fails++;
                }
                slot_size[k] = size;
            }
            if (r >= 0) {
                uint64_t t = t1 - t0 > empty ? t1 - t0 - empty : 0;
                int asked = counted_memory_calls(&counted_dev) != memory0 ? ASKED_MEMORY
                            : counted_dev.events != events0              ? ASKED_EVENTS
                                                                         : ASKED_NOTHING;
                sum[kind] += t;
                count[kind]++;
                asked_sum[asked] += t;
                asked_count[asked]++;
            }
        }
        for (int k = 0; k < VRAM_BENCH_RANDOM_SLOTS; k++)
            if (slot[k]) {
                vram_allocator_free(a, slot[k]);
                slot[k] = NULL;
            }
    }
    wall = vram_bench_now_ns() - wall0;
    tick = ticks() - tick0;
    double ns_per_tick = tick ? wall / (double)tick : 1.0;
    uint64_t total = 0, ops = 0;
    for (int k = 0; k < KINDS; k++) {
        total += sum[k];
        ops += count[k];
    }
    printf("The random workload, warm, %d timed runs of %d operations (%llu failed)%s; the timer's own cost,\n"
           "%.1f ns, taken off each call.\n\n",
           runs, VRAM_BENCH_RANDOM_OPS, (unsigned long long)fails,
           fails ? ": out of memory on this device" : "", (double)empty * ns_per_tick);
    printf("| operation | calls | ns per call | share of the allocator's time |\n|---|---|---|---|\n");
    for (int k = 0; k < KINDS; k++)
        printf("| %s | %llu | %.1f | %.1f%% |\n", kind_names[k], (unsigned long long)count[k],
               count[k] ? (double)sum[k] * ns_per_tick / (double)count[k] : 0.0,
               total ? 100.0 * (double)sum[k] / (double)total : 0.0);
    printf("| all | %llu | %.1f | 100%% |\n", (unsigned long long)ops,
           ops ? (double)total * ns_per_tick / (double)ops : 0.0);
    printf("\nThe same calls by what they asked of the device (the timed runs' device calls: %.1f memory, "
           "%.1f stream-event, per run):\n\n",
           (double)(counted_memory_calls(&counted_dev) - memory_before) / runs,
           (double)(counted_dev.events - events_before) / runs);
    printf("| asked the device for | calls | ns per call | share of the allocator's time |\n|---|---|---|---|\n");
    for (int c = 0; c < ASKED; c++)
        printf("| %s | %llu | %.1f | %.1f%% |\n", asked_names[c], (unsigned long long)asked_count[c],
               asked_count[c] ? (double)asked_sum[c] * ns_per_tick / (double)asked_count[c] : 0.0,
               total ? 100.0 * (double)asked_sum[c] / (double)total : 0.0);
    printf("\nWhole runs (harness included): %.1f ns per operation.\n", wall / ((double)runs * VRAM_BENCH_RANDOM_OPS));
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return 0;
}
