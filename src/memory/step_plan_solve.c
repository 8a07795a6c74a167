/* step_plan_solve.c — the offline placement of one period of a repeating allocation sequence:
 * the dynamic-storage-allocation problem that static planners (XLA, TVM, ggml-alloc) solve, for
 * lifetimes that wrap around the period's end (a block allocated late in a step and freed early
 * in the next, as gradients are under zero_grad(set_to_none=True)).
 *
 * Greedy: requests in one order (ties: earlier start), each placed at the lowest offset where it
 * overlaps no already placed request whose lifetime conflicts with its own; three orders are
 * tried (largest first, longest-lived first, largest size x lifetime first) and the smallest
 * arena kept. Two
 * cyclic lifetimes [s, e) conflict when [s, e) meets [s', e'), [s' - T, e' - T) or
 * [s' + T, e' + T). The placed requests are kept sorted by offset, so one pass over them, skipping
 * those that do not conflict, finds the first gap that holds the request: O(n^2) time, which for
 * the thousand or so large requests of a training step is a few milliseconds per order.
 */
#include <stdlib.h>
#include <string.h>

#include "vram/step_plan.h"
#include "vram/vram.h"

typedef struct { /* a request in the order of placement (its keys copied: qsort has no context) */
    uint64_t key, start;
    size_t i;
} item;

static int by_key_desc(const void *x, const void *y) {
    const item *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int meets(uint64_t s, uint64_t e, uint64_t s2, uint64_t e2) { return s < e2 && s2 < e; }

/* Whether cyclic lifetimes [s, e) and [s2, e2) of a period T conflict. */
static int conflict(uint64_t s, uint64_t e, uint64_t s2, uint64_t e2, uint64_t T) {
    return meets(s, e, s2, e2) || meets(s, e, s2 + T, e2 + T) || meets(s + T, e + T, s2, e2);
}

/* Places the requests in the order given, each at the lowest offset free of its placed
 * conflicts (placed: scratch, the placed requests kept by offset); returns the arena. */
static uint64_t place_in_order(size_t n, const item *order, const uint64_t *sizes, const uint64_t *start,
                               const uint64_t *end, uint64_t period, uint64_t *offsets, size_t *placed) {
    uint64_t top = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k].i, at = k;
        uint64_t off = 0;
        /* the placed requests in offset order: the first gap among the conflicting ones */
        for (size_t q = 0; q < k; q++) {
            size_t j = placed[q];
            if (!conflict(start[i], end[i], start[j], end[j], period)) continue;
            if (offsets[j] >= off + sizes[i]) break; /* the gap before it holds the request */
            if (offsets[j] + sizes[j] > off) off = offsets[j] + sizes[j];
        }
        offsets[i] = off;
        if (off + sizes[i] > top) top = off + sizes[i];
        for (size_t q = 0; q < k; q++)
            if (offsets[placed[q]] > off) {
                at = q;
                break;
            }
        memmove(&placed[at + 1], &placed[at], (k - at) * sizeof *placed);
        placed[at] = i;
    }
    return top;
}

vram_status vram_step_plan_solve(size_t n, const uint64_t *sizes, const uint64_t *start, const uint64_t *end,
                                 uint64_t period, uint64_t *offsets, uint64_t *arena) {
    if (!arena || (n && (!sizes || !start || !end || !offsets)))
        return vram_error(VRAM_ERR_INVALID_ARG, "step plan: solve: null argument");
    *arena = 0;
    for (size_t i = 0; i < n; i++)
        if (start[i] >= period || end[i] <= start[i] || end[i] - start[i] > period)
            return vram_error(VRAM_ERR_INVALID_ARG, "step plan: solve: request %zu lives [%llu, %llu), not within a "
                              "period of %llu", i, (unsigned long long)start[i], (unsigned long long)end[i],
                              (unsigned long long)period);
    if (!n) return VRAM_OK;
    item *order = malloc(n * sizeof *order);
    size_t *placed = malloc(n * sizeof *placed);
    uint64_t *trial = malloc(n * sizeof *trial);
    if (!order || !placed || !trial) {
        free(order);
        free(placed);
        free(trial);
        return vram_error(VRAM_ERR_HOST_MEMORY, "step plan: solve: host out of memory for %zu requests", n);
    }
    /* Three orders, the smallest arena kept: largest first (the classic), longest-lived first,
     * and largest size x lifetime first (a KV cache's slowly growing, long-lived blocks pack
     * better by lifetime than by size). */
    uint64_t best = UINT64_MAX;
    for (int rule = 0; rule < 3; rule++) {
        for (size_t i = 0; i < n; i++) {
            uint64_t life = end[i] - start[i];
            uint64_t key = rule == 0 ? sizes[i] : rule == 1 ? life : (sizes[i] >> 9) * life;
            order[i] = (item){key, start[i], i};
        }
        qsort(order, n, sizeof *order, by_key_desc);
        uint64_t top = place_in_order(n, order, sizes, start, end, period, trial, placed);
        if (top < best) {
            best = top;
            memcpy(offsets, trial, n * sizeof *offsets);
        }
    }
    free(order);
    free(placed);
    free(trial);
    *arena = best;
    return VRAM_OK;
}
