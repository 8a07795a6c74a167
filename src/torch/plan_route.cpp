/* plan_route.cpp — a device's allocations through a vram_step_plan (learned placement for
 * repeating steps, docs/step_plan.md) when VRAM_STEP_PLAN=1 (or early, layers or auto: the
 * presets on_new_allocator names), for measuring it on a GPU under unchanged PyTorch programs.
 *
 * One plan per device, made when the device's allocator starts, with its own mutex: the layer
 * is not thread-safe and PyTorch allocates from its main thread and the autograd engine's
 * device thread. The table is read without a lock (atomic pointers, set once before the
 * device's first allocation returns). The allocator's statistics count the plan's arena as one
 * allocated block (its free parts included), so allocated and requested bytes read through
 * memory_stats() are not the program's own while a plan is active: callers measuring the
 * program's requested peak take it from a run without the plan (bench/placement_workloads.py).
 */
#include "plan_route.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

extern "C" {
#include "vram/step_plan.h"
}

namespace plan_route {
namespace {
constexpr int kMaxDevices = 64;

struct Route {
    std::atomic<vram_step_plan *> plan{nullptr};
    std::mutex mutex;
};

Route g_routes[kMaxDevices];

vram_step_plan *plan_of(int device) {
    return device >= 0 && device < kMaxDevices ? g_routes[device].plan.load(std::memory_order_acquire) : nullptr;
}
} // namespace

bool on_new_allocator(int device, vram_allocator *a) {
    const char *v = getenv("VRAM_STEP_PLAN");
    if (!v || !*v || !strcmp(v, "0")) return true;
    vram_step_plan_config cfg = {};
    cfg.early = !strcmp(v, "early"); /* plan the first step, serve from the second (docs/step_plan.md) */
    if (!strcmp(v, "layers")) {
        /* a model's layers as the step (generation's prefill: docs/step_plan.md, "Layer plans"):
         * periods from 16 requests, confirmed after 8, begun even above the peak so far (the
         * prefill of the longest prompt sets the peak while it runs) */
        cfg.min_period = 16;
        cfg.confirm = 8;
        cfg.may_raise_peak = 1;
    } else if (!strcmp(v, "auto")) {
        /* the kind of plan decided from the allocation stream: whole steps where best fit wastes,
         * a model's layers where they come back at another shape (docs/step_plan.md, "Auto") */
        cfg.auto_plan = 1;
    } else if (strcmp(v, "1") != 0 && !cfg.early) {
        vram_error(VRAM_ERR_INVALID_ARG, "VRAM_STEP_PLAN=%s: 0, 1, early, layers or auto", v);
        return false;
    }
    if (device < 0 || device >= kMaxDevices) return false;
    vram_step_plan *p = nullptr;
    if (vram_step_plan_new(a, &cfg, &p) != VRAM_OK) return false;
    g_routes[device].plan.store(p, std::memory_order_release);
    return true;
}

bool allocate(int device, size_t size, vram_stream stream, vram_tag tag, void **ptr, vram_status *st) {
    vram_step_plan *p = plan_of(device);
    if (!p) return false;
    std::lock_guard<std::mutex> lock(g_routes[device].mutex);
    *st = vram_step_plan_malloc(p, size, stream, tag, ptr);
    return true;
}

bool release(int device, void *ptr, vram_status *st) {
    vram_step_plan *p = plan_of(device);
    if (!p) return false;
    std::lock_guard<std::mutex> lock(g_routes[device].mutex);
    *st = vram_step_plan_free(p, ptr);
    return true;
}

bool empty_cache(int device, vram_status *st) {
    vram_step_plan *p = plan_of(device);
    if (!p) return false;
    std::lock_guard<std::mutex> lock(g_routes[device].mutex);
    *st = vram_step_plan_empty_cache(p);
    return true;
}

void *arena_of(int device, void *ptr) {
    vram_step_plan *p = plan_of(device);
    if (!p) return nullptr;
    std::lock_guard<std::mutex> lock(g_routes[device].mutex);
    if (!vram_step_plan_owns(p, ptr)) return nullptr;
    void *arena = vram_step_plan_arena_block(p);
    vram_step_plan_retire(p);
    return arena;
}

bool stats(int device, unsigned long long out[11]) {
    vram_step_plan *p = plan_of(device);
    if (!p) return false;
    vram_step_plan_stats s;
    {
        std::lock_guard<std::mutex> lock(g_routes[device].mutex);
        vram_step_plan_get_stats(p, &s);
    }
    const uint64_t v[11] = {s.requests, s.served, s.missed, s.plans_built, s.plans_retired, s.last_period,
                            s.last_planned, s.last_arena_bytes, s.last_live_peak_bytes, s.arena_bytes,
                            s.arena_live_bytes};
    for (int i = 0; i < 11; i++) out[i] = v[i];
    return true;
}
} // namespace plan_route
