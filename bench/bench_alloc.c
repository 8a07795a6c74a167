/* bench_alloc.c — the allocator latency microbenchmarks (docs/benchmarks.md §2) as a program.
 *
 * The measurement is the library's (src/bench/alloc_bench.c), the same code `vram bench alloc`
 * runs, so the two cannot drift apart. usage: bench_alloc [DEVICE_SPEC [REPEAT]] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/bench.h"

int main(int argc, char **argv) {
    vram_bench_alloc_options o = {.device = "sim", .repeat = 5};
    int json = 0, pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (pos == 0) o.device = argv[i], pos++;
        else if (pos == 1) o.repeat = (unsigned)atoi(argv[i]), pos++;
    }
    char command[256];
    snprintf(command, sizeof command, "bench_alloc %s %u%s", o.device, o.repeat, json ? " --json" : "");
    vram_bench_alloc_result r;
    if (vram_bench_alloc_run(&o, &r) != VRAM_OK) {
        fprintf(stderr, "bench_alloc: %s\n", vram_last_error());
        return 1;
    }
    if (json) vram_bench_alloc_write_json(&r, command, stdout);
    else vram_bench_alloc_write_text(&r, command, stdout);
    return 0;
}
