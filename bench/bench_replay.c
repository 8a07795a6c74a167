/* bench_replay.c — trace parsing and replay speed, each timed on its own, best of N runs.
 *
 * For each trace given (default: the four bundled ones): the load (read + decompress) and the
 * parse are timed separately, then the replay loop on a fresh sim allocator N times; it prints
 * lines/s for the parse and events/s for the best and median replay.
 * usage: bench_replay [--repeat N] [TRACE...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/bench.h"
#include "vram/replay.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int repeat = 9;
    const char *paths[64];
    int n = 0;
    static const char *bundled[] = {"resnet50_train", "gpt2_train", "bert_varlen_train", "gpt2_generate"};
    char buf[4][512];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (n < 64) paths[n++] = argv[i];
    }
    if (repeat < 1 || repeat > 1000) repeat = 9;
    if (n == 0) {
        for (int i = 0; i < 4; i++) {
            snprintf(buf[i], sizeof buf[i], "%s/traces/%s.trace.gz", VRAM_SOURCE_DIR, bundled[i]);
            paths[n++] = buf[i];
        }
    }
    vram_machine_print(stdout, argc, argv);
    printf("replay on sim (80 GiB), default VRAM_ALLOC_CONF, %d runs each\n\n", repeat);
    printf("%-40s %9s %9s %10s %10s %12s %12s\n", "trace", "events", "read ms", "parse ms", "Mlines/s",
           "replay best", "median Mev/s");
    double *secs = calloc((size_t)repeat, sizeof *secs);
    for (int i = 0; i < n; i++) {
        vram_trace *t;
        if (vram_trace_load(paths[i], &t) != VRAM_OK) {
            fprintf(stderr, "bench_replay: %s\n", vram_last_error());
            return 1;
        }
        uint64_t events = 0;
        for (int r = 0; r < repeat; r++) {
            vram_device *dev;
            vram_allocator *a;
            vram_replay_result res;
            if (vram_replay_open(NULL, 0, &dev, &a) != VRAM_OK || vram_trace_replay(t, a, SIZE_MAX, 0, &res) != VRAM_OK) {
                fprintf(stderr, "bench_replay: %s\n", vram_last_error());
                return 1;
            }
            secs[r] = res.seconds;
            events = res.events;
            vram_allocator_destroy(a);
            vram_device_close(dev);
        }
        qsort(secs, (size_t)repeat, sizeof *secs, cmp);
        const char *slash = strrchr(paths[i], '/');
        printf("%-40s %9llu %9.2f %10.2f %10.1f %9.2f Mev/s %12.2f\n", slash ? slash + 1 : paths[i],
               (unsigned long long)events, vram_trace_read_seconds(t) * 1e3, vram_trace_parse_seconds(t) * 1e3,
               (double)vram_trace_num_lines(t) / vram_trace_parse_seconds(t) / 1e6, (double)events / secs[0] / 1e6,
               (double)events / secs[repeat / 2] / 1e6);
        vram_trace_free(t);
    }
    free(secs);
    return 0;
}
