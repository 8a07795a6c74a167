/* bench_pool_replay.c — how well a private pool (CUDA graphs) places a workload, beside the
 * ordinary cache: a trace replayed twice on the same device, once as usual and once with every
 * allocation routed into one private pool (vram_allocator_begin_pool + route_pool on each of the
 * trace's streams), as torch.compile(mode="reduce-overhead") routes a graph's warm-up and its
 * recording: a workload whose input shapes change (BERT's sequence lengths) runs through the
 * pool step after step. Prints, for both, the peak reserved over the peak requested and the
 * replay's seconds (bench/results/2026-12-04-pool-placement.md; CTest bench_pool_replay_bounds).
 *
 * usage: bench_pool_replay [--device SPEC] TRACE...   (default device cudasim:80GiB)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"
#include "vram/backend.h"
#include "vram/bench.h"
#include "vram/trace.h"

/* Replays t on a fresh allocator over `spec`, routed into a pool or not; 0 on success. */
static int replay(const vram_trace *t, const char *spec, int pooled, double *ratio, double *seconds) {
    vram_device *dev;
    vram_allocator *a;
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    if (vram_device_open(spec, &dev) != VRAM_OK) return -1;
    if (vram_allocator_new(dev, &cfg, &a) != VRAM_OK) {
        vram_device_close(dev);
        return -1;
    }
    uint32_t streams = vram_trace_max_stream(t) + 1;
    for (uint32_t s = 0; pooled && s < streams; s++)
        if (vram_allocator_begin_pool(a, 1) != VRAM_OK || vram_allocator_route_pool(a, 1, s) != VRAM_OK) return -1;
    size_t n;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    void **ptr = calloc(vram_trace_num_allocs(t) + 1, sizeof *ptr);
    int rc = ptr ? 0 : -1;
    double t0 = vram_bench_now_ns();
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ev[i].op == VRAM_TRACE_ALLOC) {
            if (ev[i].size && vram_allocator_malloc(a, ev[i].size, ev[i].stream, 0, &ptr[ev[i].index]) != VRAM_OK) rc = -1;
        } else if (ptr[ev[i].index]) {
            if (vram_allocator_free(a, ptr[ev[i].index]) != VRAM_OK) rc = -1;
            ptr[ev[i].index] = NULL;
        }
    }
    *seconds = (vram_bench_now_ns() - t0) * 1e-9;
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    *ratio = st.requested_bytes[0].peak ? (double)st.reserved_bytes[0].peak / (double)st.requested_bytes[0].peak : 0;
    free(ptr);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return rc;
}

int main(int argc, char **argv) {
    const char *spec = "cudasim:80GiB";
    int first = 1;
    if (argc > 2 && !strcmp(argv[1], "--device")) {
        spec = argv[2];
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: bench_pool_replay [--device SPEC] TRACE...\n");
        return 2;
    }
    vram_machine_print(stdout, argc, argv);
    printf("device %s, default configuration\n\n", spec);
    printf("| trace | reserved / requested, ordinary | in one private pool | replay s, ordinary | in the pool |\n");
    printf("|---|---|---|---|---|\n");
    for (int i = first; i < argc; i++) {
        vram_trace *t;
        if (vram_trace_load(argv[i], &t) != VRAM_OK) {
            fprintf(stderr, "bench_pool_replay: %s\n", vram_last_error());
            return 2; /* bad input, as vram replay and bench_replay_lag answer it */
        }
        double r0, r1, s0, s1;
        if (replay(t, spec, 0, &r0, &s0) != 0 || replay(t, spec, 1, &r1, &s1) != 0) {
            fprintf(stderr, "bench_pool_replay: %s: %s\n", argv[i], vram_last_error());
            vram_trace_free(t);
            return 1;
        }
        printf("| %s | %.3f | %.3f | %.3f | %.3f |\n", vram_trace_name(t), r0, r1, s0, s1);
        vram_trace_free(t);
    }
    return 0;
}
