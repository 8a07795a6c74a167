/* fuzz_trace.c — fuzz target for the memtrace v1 parser, and for replay of what it accepts.
 *
 * Any input must give either VRAM_OK or VRAM_ERR_PARSE with a detail naming a line, never a
 * crash, a leak or undefined behaviour (the target is built with ASan and UBSan). An accepted
 * trace must be self-consistent (every free refers to an earlier allocation, counts add up),
 * and replaying it on a small sim device, and on a small simulated CUDA device whose GPU lags
 * behind (events, page moves and aliasing), must end in VRAM_OK or VRAM_ERR_OUT_OF_MEMORY with
 * the allocator's invariants intact. Violations trap, which the fuzzer reports.
 *
 * Built as a libFuzzer binary with -DVRAM_FUZZ=ON under clang; driver.c runs it over the seed
 * corpus (corpus_trace/) plus bounded random mutations in every `make test`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vram/replay.h"

#define REQUIRE(c)                  \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vram_trace *t = NULL;
    vram_status st = vram_trace_parse((const char *)data, size, "fuzz", &t);
    if (st != VRAM_OK) {
        REQUIRE(st == VRAM_ERR_PARSE && t == NULL);
        REQUIRE(strncmp(vram_last_error(), "fuzz line ", 10) == 0);
        return 0;
    }
    size_t n;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    size_t nallocs = vram_trace_num_allocs(t);
    REQUIRE(nallocs + vram_trace_num_frees(t) == n);
    uint8_t *state = calloc(nallocs ? nallocs : 1, 1); /* 0 unseen, 1 live, 2 freed */
    REQUIRE(state != NULL);
    uint32_t next = 0;
    uint64_t live = 0, peak = 0;
    for (size_t i = 0; i < n; i++) {
        REQUIRE(ev[i].index < nallocs);
        if (ev[i].op == VRAM_TRACE_ALLOC) {
            REQUIRE(ev[i].index == next && state[ev[i].index] == 0); /* dense, in order */
            next++;
            state[ev[i].index] = 1;
            live += ev[i].size;
            if (live > peak) peak = live;
        } else {
            REQUIRE(ev[i].op == VRAM_TRACE_FREE && state[ev[i].index] == 1);
            state[ev[i].index] = 2;
            live -= ev[i].size;
        }
        REQUIRE(vram_trace_event_line(t, i) >= 2);
    }
    REQUIRE(peak == vram_trace_peak_live_bytes(t));
    free(state);

    /* on the plain sim device, and on the simulated CUDA device with its GPU 7 calls behind (small
     * chunks, so that pages move, busy ones by aliasing, across the trace's streams) */
    static const vram_replay_options devices[] = {{.device = "sim", .capacity = 64ull << 20},
                                                  {.device = "cudasim:lag=7", .capacity = 64ull << 20,
                                                   .conf = "chunk_size_mb:4"}};
    for (size_t d = 0; d < sizeof devices / sizeof devices[0]; d++) {
        vram_device *dev;
        vram_allocator *a;
        REQUIRE(vram_replay_open(&devices[d], 0, &dev, &a) == VRAM_OK);
        vram_replay_result r;
        st = vram_trace_replay(t, a, SIZE_MAX, 0, &r);
        REQUIRE(st == VRAM_OK || st == VRAM_ERR_OUT_OF_MEMORY);
        REQUIRE(vram_allocator_check(a) == VRAM_OK);
        vram_allocator_destroy(a);
        vram_device_close(dev);
    }
    vram_trace_free(t);
    return 0;
}
