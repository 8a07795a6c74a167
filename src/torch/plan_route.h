/* plan_route.h — learned placement (vram/step_plan.h) under PyTorch, opt-in: with
 * VRAM_STEP_PLAN=1 in the environment when a device's allocator starts, that device's
 * allocations and frees go through a vram_step_plan over it (plan_route.cpp). */
#ifndef VRAM_TORCH_PLAN_ROUTE_H
#define VRAM_TORCH_PLAN_ROUTE_H

extern "C" {
#include "vram/alloc.h"
}

namespace plan_route {
/* A new allocator on `device`: a plan over it when VRAM_STEP_PLAN asks for one. false when it
 * asks with a value other than 0, 1 or early, or the plan cannot be made (the error says why); the
 * allocator then runs without. */
bool on_new_allocator(int device, vram_allocator *a);
/* Whether `device` routes through a plan: then *st is the plan's answer. */
bool allocate(int device, size_t size, vram_stream stream, vram_tag tag, void **ptr, vram_status *st);
bool release(int device, void *ptr, vram_status *st);
/* The plan retired and the cache given back (vram_step_plan_empty_cache). */
bool empty_cache(int device, vram_status *st);
/* A block that is the plan's own arena's: it is named by the arena's allocator block instead
 * (what record_stream needs), and the plan is retired, since it would reuse the block's range
 * on its stream while the other still uses it. NULL: not an arena block. */
void *arena_of(int device, void *ptr);
/* The plan's counters as 11 numbers (vram_step_plan_stats' order); false: no plan on device. */
bool stats(int device, unsigned long long out[11]);
} // namespace plan_route

#endif
