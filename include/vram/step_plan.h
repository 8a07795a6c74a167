/* step_plan.h — learned placement for programs that repeat the same allocation sequence step
 * after step (training loops, serving loops): a layer over an allocator.
 *
 * A vram_step_plan watches the requests of at least `min_size` bytes (the large ones, which
 * decide fragmentation). When the sequence of their sizes repeats (a hash of a window of sizes
 * seen one period earlier, confirmed over a whole period), it solves the placement of
 * one whole period offline as a dynamic-storage-allocation problem: every request of the period
 * with its lifetime (the previous occurrence's), an offset in one arena such that no two
 * requests whose lifetimes overlap (cyclically, step after step) overlap in memory, the arena as
 * small as a greedy solver makes it. The arena is one block of the allocator; the following
 * requests are served from their planned offsets. Whenever a request does not match the plan
 * (another size, another stream) or its planned range is still in use, it falls back to the
 * allocator's own best fit; after `miss_limit` misses in a row the plan is retired, its arena
 * given back once its last block is freed, and learning starts again.
 * Everything else passes through to the allocator unchanged. The allocator's statistics count
 * the arena as one allocated block (docs/step_plan.md). A layer is not thread-safe: callers
 * from several threads (PyTorch's autograd thread and its main thread) must serialise.
 */
#ifndef VRAM_STEP_PLAN_H
#define VRAM_STEP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "vram/alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_step_plan vram_step_plan;

typedef struct vram_step_plan_config {
    uint64_t min_size;   /* requests of at least this many bytes are planned (0: 1 MiB + 1) */
    uint32_t window;     /* sizes hashed to recognise a repeat (0: 8) */
    uint32_t confirm;    /* requests that must repeat before a plan is solved: a whole period, and
                          * at least this many (0: 32) */
    uint32_t max_period; /* the longest period looked for, in planned requests (0: 8192; the
                          * solve takes O(period^2) time: ~12 ms for 1,000, ~180 ms for 4,000) */
    uint32_t miss_limit; /* misses in a row that retire a plan (0: 16) */
    uint32_t min_period; /* the shortest period looked for, in planned requests (0: 64) */
    int may_raise_peak;  /* begin a plan even where its arena would raise reserved memory above its
                          * peak so far (0: wait for a moment where it fits, at most 4 low points) */
    int early;           /* plan the program's first step and serve from its second (docs/step_plan.md,
                          * "Early plans"): a repeat whose period spans most of the history is solved
                          * at once, solved again once the first step's blocks are freed, and begins
                          * there even above the peak so far; entries the first step allocated for
                          * good (optimizer state) are skipped when the later steps lack them (0: off) */
    int auto_plan;       /* decide the kind of plan from the stream (docs/step_plan.md, "Auto"): whole steps as
                          * `early` does, where best fit's reserved peak is more than 1/32 above its
                          * allocated peak; a model's layers (periods of 16-63 requests) only where a layer's
                          * period comes back at another shape and no whole step has been planned, begun even
                          * above the peak so far; layer plans ruled out for good once a whole step is
                          * planned or a layer plan serves less than half the requests it sees (0: off) */
} vram_step_plan_config;

typedef struct vram_step_plan_stats {
    uint64_t requests;     /* requests of at least min_size */
    uint64_t served;       /* of those, served from a plan's arena */
    uint64_t missed;       /* made while a plan was active but not served by it */
    uint64_t plans_built;  /* plans begun (given an arena) */
    uint64_t plans_retired;
    uint64_t last_period;  /* the last plan's period, in requests */
    uint64_t last_planned; /* of those, the requests the plan places (the rest are long-lived) */
    uint64_t last_arena_bytes;
    uint64_t last_live_peak_bytes; /* the planned requests' own peak of live bytes (the arena's floor) */
    uint64_t arena_bytes;          /* the arena the allocator now holds (0: none) */
    uint64_t arena_live_bytes;     /* bytes of blocks now live in it */
} vram_step_plan_stats;

/* A plan layer over `a` (which must outlive it); cfg NULL: defaults. */
vram_status vram_step_plan_new(vram_allocator *a, const vram_step_plan_config *cfg, vram_step_plan **out);
/* Gives back the arenas (their blocks must all have been freed through the layer). */
void vram_step_plan_destroy(vram_step_plan *p);

/* vram_allocator_malloc / vram_allocator_free through the plan. */
vram_status vram_step_plan_malloc(vram_step_plan *p, size_t size, vram_stream stream, vram_tag tag, void **ptr);
vram_status vram_step_plan_free(vram_step_plan *p, void *ptr);

/* Whether ptr is a live block of the plan's arena (served by the plan, not by the allocator:
 * vram_allocator_block_info and record_stream do not know it). */
int vram_step_plan_owns(const vram_step_plan *p, const void *ptr);

/* The arena's own allocator block (NULL: no arena): a caller that must tell the allocator about
 * an arena block's other uses (record_stream) names the arena instead. */
void *vram_step_plan_arena_block(const vram_step_plan *p);

/* Stops serving from the current plan; learning starts again. Its arena goes back to the
 * allocator once its last block is freed. */
void vram_step_plan_retire(vram_step_plan *p);
/* vram_allocator_empty_cache, the plan retired first: a program that gives its cache back is
 * starting something else (another model, evaluation after training). */
vram_status vram_step_plan_empty_cache(vram_step_plan *p);

void vram_step_plan_get_stats(const vram_step_plan *p, vram_step_plan_stats *out);

/* The solver alone: offsets for n requests of sizes[i] bytes live over the cyclic times
 * [start[i], end[i]) of a period of `period` ticks (0 <= start < period, start < end <=
 * start + period). Two requests conflict when their intervals, or one shifted by a period,
 * overlap; conflicting requests get disjoint [offset, offset + size). Greedy: each at the
 * lowest offset free of its placed conflicts, in three orders (largest, longest-lived, largest
 * size x lifetime first), the smallest arena kept. Returns the arena size in *arena. */
vram_status vram_step_plan_solve(size_t n, const uint64_t *sizes, const uint64_t *start, const uint64_t *end,
                                 uint64_t period, uint64_t *offsets, uint64_t *arena);

#ifdef __cplusplus
}
#endif

#endif
