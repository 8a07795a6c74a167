/* bench_replay_lag.c — trace replay as on a GPU whose work lags behind the host.
 *
 * The sim device finishes all work at once, so every freed block is at once free for any use.
 * On a GPU the host runs ahead: a block freed on a stream may still be read by kernels queued
 * before the free, and its pages can move only once an event shows the stream is past them
 * (or, with page aliasing, to a new block of the same stream). This benchmark replays traces on
 * the sim device wrapped with streams whose work completes LAG allocator calls after it was
 * queued (one "kernel" per call, tests/fakes/event_device.h), for several lags and both values
 * of VRAM_ALLOC_CONF move_busy_pages, and prints peak reserved over peak requested and the
 * device calls (page maps, unmaps and aliases) each needs.
 *
 *   bench_replay_lag [--lags 0,100,1000] TRACE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/fakes/event_device.h"
#include "vram/alloc.h"
#include "vram/trace.h"

static int replay(const vram_trace *t, long lag, int move_busy, double *ratio, uint64_t *maps, uint64_t *unmaps) {
    vram_device *dev;
    if (event_device_open("141GiB", &dev) != VRAM_OK) return -1;
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    cfg.move_busy_pages = move_busy;
    vram_allocator *a;
    if (vram_allocator_new(dev, &cfg, &a) != VRAM_OK) return -1;
    evdev_state *e = event_device_state(dev);
    size_t n;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    void **ptrs = calloc(vram_trace_num_allocs(t) + 1, sizeof *ptrs);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        event_device_submit(dev, 0); /* the work that uses this block */
        if ((long)e->submitted[0] - lag > (long)e->completed[0]) e->completed[0] = e->submitted[0] - (uint64_t)lag;
        if (ev[i].op == VRAM_TRACE_ALLOC)
            rc = vram_allocator_malloc(a, ev[i].size, 0, VRAM_TAG_OTHER, &ptrs[ev[i].index]) != VRAM_OK;
        else
            rc = vram_allocator_free(a, ptrs[ev[i].index]) != VRAM_OK;
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    *ratio = (double)st.reserved_bytes[0].peak / (double)st.requested_bytes[0].peak;
    *maps = st.num_device_alloc;
    *unmaps = st.num_device_free;
    if (vram_allocator_check(a) != VRAM_OK) rc = -1;
    vram_allocator_destroy(a);
    vram_device_close(dev);
    free(ptrs);
    return rc;
}

int main(int argc, char **argv) {
    const char *lags = "0,100,1000";
    int first = 1;
    if (argc > 2 && !strcmp(argv[1], "--lags")) {
        lags = argv[2];
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: bench_replay_lag [--lags 0,100,1000] TRACE...\n");
        return 2;
    }
    printf("command:");
    for (int i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n\n| trace | lag (calls) | move_busy_pages | peak reserved / peak requested | page maps | unmaps + drops |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int f = first; f < argc; f++) {
        vram_trace *t;
        if (vram_trace_load(argv[f], &t) != VRAM_OK) {
            fprintf(stderr, "bench_replay_lag: %s\n", vram_last_error());
            return 2;
        }
        const char *name = strrchr(argv[f], '/') ? strrchr(argv[f], '/') + 1 : argv[f];
        char buf[256];
        snprintf(buf, sizeof buf, "%s", lags);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            for (int mb = 0; mb < 2; mb++) {
                double ratio;
                uint64_t maps, unmaps;
                if (replay(t, atol(tok), mb, &ratio, &maps, &unmaps) != 0) {
                    fprintf(stderr, "bench_replay_lag: %s failed: %s\n", name, vram_last_error());
                    return 1;
                }
                printf("| %s | %s | %s | %.4f | %llu | %llu |\n", name, tok, mb ? "True" : "False", ratio,
                       (unsigned long long)maps, (unsigned long long)unmaps);
            }
        }
        vram_trace_free(t);
    }
    return 0;
}
