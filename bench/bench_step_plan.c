/* bench_step_plan.c — learned placement (include/vram/step_plan.h) against the allocator's own
 * placement, replayed on recorded traces.
 *
 * Each trace is replayed twice on a fresh simulated device (default cudasim: 64 MiB chunks,
 * streams with events, as vram places on CUDA; `--device sim` moves 2 MiB pages for free): once
 * straight through vram_allocator_malloc/free, once through a vram_step_plan over the same
 * allocator. Printed per trace: peak reserved over the trace's peak of live bytes (its peak
 * requested: the plan's arena is one allocator block, so the allocator's own requested figure
 * counts the arena whole), device calls (maps + unmaps), and the plan's figures: requests of at
 * least min_size, how many a plan served, how many missed while a plan was active, plans built
 * and retired, the last plan's period, planned requests, arena and the floor of its planned
 * requests (their own cyclic peak of live bytes). A "# sync" line completes the device's work,
 * as vram replay does. A trace of several programs is measured per program, as vram replay
 * does. --empty-at K,... empties the cache of the replay without a plan before those large
 * requests: the perturbation a plan's beginning makes, alone. --may-raise-peak and --confirm N set
 * the configuration's fields of those names, --early and --auto `early` and `auto_plan`
 * (step_plan.h; --auto is VRAM_STEP_PLAN=auto).
 *
 *   bench_step_plan [--device SPEC] [--min-mb N] [--miss-limit N] [--max-period N] [--min-period N] [--empty-at K,K...] [--early] [--auto] [--may-raise-peak] [--confirm N] TRACE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vram/replay.h"
#include "vram/step_plan.h"

typedef struct {
    double ratio, seconds;
    uint64_t reserved, calls;
    vram_step_plan_stats ps;
    int failed;
} outcome;

/* --empty-at: the large requests (more than 1 MiB, counted from 0) before which the replay
 * without a plan empties the cache, as the plan does when it begins: what such a perturbation
 * alone does to the placement. */
static const char *g_empty_at;

static int empty_here(uint64_t k) {
    for (const char *t = g_empty_at; t && *t; t = strchr(t, ',') ? strchr(t, ',') + 1 : NULL)
        if (strtoull(t, NULL, 10) == k) return 1;
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The trace's peak of live bytes over events [start, stop) (blocks allocated before start
 * count while they live): what a program measures as its peak requested from start on. */
static uint64_t peak_live(const vram_trace *t, size_t start, size_t stop) {
    size_t n;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    uint64_t *size = calloc(vram_trace_num_allocs(t) + 1, sizeof *size), live = 0, peak = 0;
    if (!size) return 0;
    for (size_t i = 0; i < stop && i < n; i++) {
        if (ev[i].op == VRAM_TRACE_ALLOC) {
            size[ev[i].index] = ev[i].size;
            live += ev[i].size;
        } else {
            live -= size[ev[i].index];
            size[ev[i].index] = 0;
        }
        if (i >= start && live > peak) peak = live;
    }
    free(size);
    return peak;
}

/* One replay of events [0, stop) of t on a fresh device, through a plan when cfg is given, its
 * figures from event `start` on (the cache emptied and the peaks reset there, as a program that
 * runs several workloads in turn measures each: vram replay's per-workload rows). */
static vram_status run(const vram_trace *t, size_t start, size_t stop, const char *spec,
                       const vram_step_plan_config *cfg, outcome *o) {
    memset(o, 0, sizeof *o);
    vram_replay_options opt = {0};
    opt.device = spec;
    vram_device *dev;
    vram_allocator *a;
    vram_status st = vram_replay_open(&opt, 0, &dev, &a);
    if (st != VRAM_OK) return st;
    vram_step_plan *p = NULL;
    if (cfg && (st = vram_step_plan_new(a, cfg, &p)) != VRAM_OK) goto out;
    size_t n, nh = vram_trace_header_count(t), h = 0;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    void **ptrs = calloc(vram_trace_num_allocs(t) + 1, sizeof *ptrs);
    if (!ptrs) {
        st = VRAM_ERR_HOST_MEMORY;
        goto out;
    }
    void (*step)(vram_device *, int) = dev->ops->host_step;
    uint64_t nlarge = 0; /* large requests so far (--empty-at) */
    double t0 = now();
    if (stop > n) stop = n;
    for (size_t i = 0; i < stop && st == VRAM_OK; i++) {
        const vram_trace_event *e = &ev[i];
        if (i == start && start > 0) {
            st = p ? vram_step_plan_empty_cache(p) : vram_allocator_empty_cache(a);
            vram_allocator_reset_peak_stats(a);
        }
        if (step) {
            for (; h < nh && vram_trace_header_event(t, h) <= i; h++) {
                const char *key;
                vram_trace_header_at(t, h, &key, NULL);
                if (!strcmp(key, "sync")) step(dev, 1);
            }
            step(dev, 0);
        }
        if (vram_trace_event_empty(e)) continue;
        if (!p && g_empty_at && e->op == VRAM_TRACE_ALLOC && e->size > (1u << 20) && empty_here(nlarge++))
            vram_allocator_empty_cache(a);
        if (e->op == VRAM_TRACE_ALLOC)
            st = p ? vram_step_plan_malloc(p, e->size, e->stream, VRAM_TAG_OTHER, &ptrs[e->index])
                   : vram_allocator_malloc(a, e->size, e->stream, VRAM_TAG_OTHER, &ptrs[e->index]);
        else if (ptrs[e->index])
            st = p ? vram_step_plan_free(p, ptrs[e->index]) : vram_allocator_free(a, ptrs[e->index]);
    }
    o->seconds = now() - t0;
    o->failed = st != VRAM_OK;
    if (!o->failed && vram_allocator_check(a) != VRAM_OK) {
        fprintf(stderr, "bench_step_plan: %s: the allocator's invariants do not hold: %s\n", vram_trace_name(t),
                vram_last_error());
        st = VRAM_ERR_INTERNAL;
    }
    vram_stats s;
    vram_allocator_get_stats(a, &s);
    o->reserved = (uint64_t)s.reserved_bytes[VRAM_POOL_ALL].peak;
    o->ratio = (double)o->reserved / (double)peak_live(t, start, stop);
    o->calls = s.num_device_alloc + s.num_device_free;
    if (p) vram_step_plan_get_stats(p, &o->ps);
    free(ptrs);
out:
    vram_step_plan_destroy(p);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return st;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_step_plan [--device SPEC] [--min-mb N] [--miss-limit N] [--max-period N] [--min-period N] "
                    "[--empty-at K,K...] [--early] [--auto] [--may-raise-peak] [--confirm N] TRACE...\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *spec = "cudasim";
    vram_step_plan_config cfg = {0};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--min-mb") && i + 1 < argc) cfg.min_size = (uint64_t)(atof(argv[++i]) * 1048576.0);
        else if (!strcmp(argv[i], "--miss-limit") && i + 1 < argc) cfg.miss_limit = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-period") && i + 1 < argc) cfg.max_period = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-period") && i + 1 < argc) cfg.min_period = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--empty-at") && i + 1 < argc) g_empty_at = argv[++i];
        else if (!strcmp(argv[i], "--early")) cfg.early = 1;
        else if (!strcmp(argv[i], "--auto")) cfg.auto_plan = 1;
        else if (!strcmp(argv[i], "--may-raise-peak")) cfg.may_raise_peak = 1;
        else if (!strcmp(argv[i], "--confirm") && i + 1 < argc) cfg.confirm = (uint32_t)atoi(argv[++i]);
        else {
            return usage();
        }
    }
    if (i == argc) {
        return usage();
    }
    char machine[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    for (char line[512]; f && fgets(line, sizeof line, f);)
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(machine, sizeof machine, "%s", strchr(line, ':') + 2);
            machine[strcspn(machine, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
    printf("# machine: %s\n# command:", machine);
    for (int k = 0; k < argc; k++) printf(" %s", argv[k]);
    printf("\n# device %s; ratio = peak reserved / the trace's peak live bytes; calls = device maps + unmaps\n\n", spec);
    printf("# requests .. plans begun/retired: the layer's counters from the trace's start (a workload's row counts\n"
           "# those of the workloads before it); period, planned, arena / floor: the last plan solved (begun or not);\n"
           "# ns/event: the replay loop's host time per trace event, device model included (one run)\n\n");
    printf("| trace | vram | calls | with plan | calls | requests | served | missed | plans begun/retired "
           "| period | planned | arena / floor | ns/event | with plan |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int rc = 0;
    for (; i < argc; i++) {
        vram_trace *t;
        if (vram_trace_load(argv[i], &t) != VRAM_OK) {
            fprintf(stderr, "bench_step_plan: %s: %s\n", argv[i], vram_last_error());
            rc = 1;
            continue;
        }
        const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        vram_trace_workload w[64];
        size_t nw = vram_trace_workloads(t, w, 64);
        if (nw > 64) nw = 64;
        for (size_t k = 0; k <= nw; k++) { /* the whole trace, then each workload */
            size_t start = k ? w[k - 1].start : 0, stop = k ? w[k - 1].end : vram_trace_num_events(t);
            outcome base, plan;
            vram_status s1 = run(t, start, stop, spec, NULL, &base), s2 = run(t, start, stop, spec, &cfg, &plan);
            if (s1 != VRAM_OK || s2 != VRAM_OK) {
                fprintf(stderr, "bench_step_plan: %s: replay failed: %s\n", name, vram_last_error());
                rc = 1;
                continue;
            }
            if (k == 0 && nw) continue; /* (several programs: each measured alone, as vram replay does) */
            printf("| %s%s%s | %.3f | %llu | %.3f | %llu | %llu | %llu | %llu | %llu/%llu | %llu | %llu | %.3f | %.0f | %.0f |\n",
                   name, k ? ": " : "", k ? w[k - 1].name : "", base.ratio, (unsigned long long)base.calls, plan.ratio,
                   (unsigned long long)plan.calls, (unsigned long long)plan.ps.requests,
                   (unsigned long long)plan.ps.served, (unsigned long long)plan.ps.missed,
                   (unsigned long long)plan.ps.plans_built, (unsigned long long)plan.ps.plans_retired,
                   (unsigned long long)plan.ps.last_period, (unsigned long long)plan.ps.last_planned,
                   plan.ps.last_live_peak_bytes ? (double)plan.ps.last_arena_bytes / (double)plan.ps.last_live_peak_bytes
                                                : 0.0,
                   1e9 * base.seconds / (double)stop, 1e9 * plan.seconds / (double)stop);
        }
        vram_trace_free(t);
    }
    return rc;
}
