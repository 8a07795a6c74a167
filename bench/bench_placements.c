/* bench_placements.c — where vram places each large allocation of a trace, to compare placements
 * decision by decision with PyTorch's expandable segments as bench/expandable_model.py models them:
 *
 *   bench_placements [--device SPEC] [--conf CONF] [--free-at N] TRACE
 *   python3 bench/expandable_model.py --page-mb-large 2 --placements FILE TRACE
 *   diff <(bench_placements TRACE | grep -v '^#') FILE
 *
 * Replays TRACE through vram (default: the cudasim device, which places as vram on a GPU does)
 * and prints, after '#' header lines (machine, command, device, configuration), one line per
 * allocation whose rounded size is above 1 MiB (the large pool): "EVENT SIZE OFFSET", the event's
 * index among the trace's records, its requested bytes and its distance in bytes from the first
 * such allocation, which both allocators place at the start of their large range. The first line
 * diff shows is the first decision the two take apart; --free-at N then prints, before event N,
 * "FREE OFFSET SIZE" for every free block of the large pool's mapped segments, to see why.
 * (How the one-stream merges and the coalescing of frees beside free blocks were found:
 * bench/results/2026-12-03-one-stream-merges.md.) Exit status: 0, or 2 for bad usage or input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"
#include "vram/backend.h"
#include "vram/bench.h"
#include "vram/replay.h"
#include "vram/snapshot.h"
#include "vram/trace.h"

#define MiB (1024ull * 1024ull)

static void print_free_blocks(vram_allocator *a, uint64_t base) {
    vram_snapshot *snap;
    if (vram_allocator_snapshot(a, &snap) != VRAM_OK) {
        fprintf(stderr, "bench_placements: snapshot: %s\n", vram_last_error());
        return;
    }
    for (size_t g = 0; g < snap->num_segments; g++) {
        const vram_snapshot_segment *s = &snap->segments[g];
        if (s->pool != VRAM_POOL_LARGE) continue;
        for (size_t k = s->first_block; k < s->first_block + s->num_blocks; k++)
            if (snap->blocks[k].state == VRAM_BLOCK_INACTIVE)
                printf("FREE %lld %llu\n", (long long)(snap->blocks[k].address - base),
                       (unsigned long long)snap->blocks[k].size);
    }
    vram_snapshot_free(snap);
}

static int usage(void) {
    fprintf(stderr, "usage: bench_placements [--device SPEC] [--conf CONF] [--free-at N] TRACE\n");
    return 2;
}

int main(int argc, char **argv) {
    vram_replay_options o = {.device = "cudasim", .conf = ""};
    const char *path = NULL;
    long long free_at = -1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--device")) o.device = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--conf")) o.conf = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--free-at")) free_at = atoll(argv[++i]);
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else return usage();
    }
    if (!path) return usage();
    vram_trace *t = NULL;
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    /* the device and allocator as `vram replay` opens them (VRAM_ALLOC_CONF, then --conf) */
    if (vram_trace_load(path, &t) != VRAM_OK || vram_replay_open(&o, 0, &dev, &a) != VRAM_OK) {
        fprintf(stderr, "bench_placements: %s\n", vram_last_error());
        vram_trace_free(t);
        return 2;
    }
    vram_machine_info m;
    vram_machine_info_get(&m);
    printf("# machine: %s, %u cores, %s, %s\n# command:", m.cpu, m.cores, m.os, m.date);
    for (int i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n# device %s, --conf '%s'\n", o.device, o.conf);
    size_t n;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    void **ptr = calloc(vram_trace_num_allocs(t) + 1, sizeof *ptr);
    uint64_t base = 0;
    int rc = ptr ? 0 : 2;
    for (size_t i = 0; i < n && !rc; i++) {
        if ((long long)i == free_at) print_free_blocks(a, base);
        if (vram_trace_event_empty(&ev[i])) {
            continue; /* an empty tensor: no memory (vram/trace.h) */
        } else if (ev[i].op == VRAM_TRACE_ALLOC) {
            if (vram_allocator_malloc(a, ev[i].size, ev[i].stream, 0, &ptr[ev[i].index]) != VRAM_OK) {
                fprintf(stderr, "bench_placements: event %zu: %s\n", i, vram_last_error());
                rc = 1;
                break;
            }
            uint64_t p = (uint64_t)(uintptr_t)ptr[ev[i].index];
            if (((ev[i].size + 511) & ~511ull) > MiB) {
                if (!base) base = p;
                printf("%zu %llu %lld\n", i, (unsigned long long)ev[i].size, (long long)(p - base));
            }
        } else if (ptr[ev[i].index]) {
            vram_allocator_free(a, ptr[ev[i].index]);
            ptr[ev[i].index] = NULL;
        }
    }
    free(ptr);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    vram_trace_free(t);
    return rc;
}
