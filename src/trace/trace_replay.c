/* trace_replay.c — a loaded trace through the allocator; the smallest device that fits it.
 *
 * The replay loop is the allocator's hot path and nothing else: events are 16-byte records
 * read in order, and live pointers sit in an array indexed by the trace's dense allocation
 * index, so the loop does no lookups of its own. A request of 0 bytes (an empty tensor) gets
 * no memory and a NULL pointer, as under PyTorch's allocator and vram_torch, and its free is
 * skipped. Figures are read from the allocator's statistics once, after the loop.
 *
 * The fit search runs whole replays on fresh devices: first doubling from the trace's peak
 * of live bytes until one fits, then bisecting between the largest failure and the smallest
 * success until they are within max(2 MiB, 0.1%).
 */
#include "vram/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill_from_stats(vram_allocator *a, vram_replay_result *res) {
    vram_stats s;
    vram_allocator_get_stats(a, &s);
    res->peak_requested_bytes = (uint64_t)s.requested_bytes[VRAM_POOL_ALL].peak;
    res->peak_allocated_bytes = (uint64_t)s.allocated_bytes[VRAM_POOL_ALL].peak;
    res->peak_reserved_bytes = (uint64_t)s.reserved_bytes[VRAM_POOL_ALL].peak;
    res->reserved_over_requested =
        res->peak_requested_bytes ? (double)res->peak_reserved_bytes / (double)res->peak_requested_bytes : 0.0;
    res->device_allocs = s.num_device_alloc;
    res->device_frees = s.num_device_free;
    res->alloc_retries = s.num_alloc_retries;
    res->ooms = s.num_ooms;
}

vram_status vram_trace_replay(const vram_trace *t, vram_allocator *a, size_t stop, int track_peak,
                              vram_replay_result *res) {
    return vram_trace_replay_range(t, a, 0, stop, track_peak, res);
}

vram_status vram_trace_replay_range(const vram_trace *t, vram_allocator *a, size_t start, size_t stop, int track_peak,
                                    vram_replay_result *res) {
    return vram_trace_replay_observed(t, a, start, stop, track_peak, NULL, NULL, res);
}

vram_status vram_trace_replay_observed(const vram_trace *t, vram_allocator *a, size_t start, size_t stop,
                                       int track_peak, vram_replay_observer observer, void *ctx,
                                       vram_replay_result *res) {
    if (!t || !a || !res) return vram_error(VRAM_ERR_INVALID_ARG, "replay: null argument");
    memset(res, 0, sizeof *res);
    size_t n;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    if (stop > n) stop = n;
    if (start > stop) start = stop;
    size_t nallocs = vram_trace_num_allocs(t);
    void **ptrs = calloc(nallocs ? nallocs : 1, sizeof *ptrs);
    if (!ptrs) return vram_error(VRAM_ERR_HOST_MEMORY, "replay: host out of memory for %zu pointers", nallocs);

    vram_stats *peek = NULL;
    if (track_peak && !(peek = malloc(sizeof *peek))) {
        free(ptrs);
        return vram_error(VRAM_ERR_HOST_MEMORY, "replay: host out of memory");
    }
    int64_t best = -1;

    vram_status st = VRAM_OK;
    size_t i = 0;
    uint64_t allocs = 0, empty = 0;
    vram_device *dev = vram_allocator_device(a);
    void (*step)(vram_device *, int) = dev ? dev->ops->host_step : NULL; /* a simulated GPU's work */
    size_t h = 0, nh = step ? vram_trace_header_count(t) : 0; /* the next header line ("sync") */
    double t0 = now_seconds();
    for (; i < stop; i++) {
        const vram_trace_event *e = &ev[i];
        if (step) {
            for (; h < nh && vram_trace_header_event(t, h) <= i; h++) {
                const char *key;
                vram_trace_header_at(t, h, &key, NULL);
                if (!strcmp(key, "sync")) step(dev, 1); /* the program waited for the GPU here */
            }
            step(dev, 0); /* the work that uses this call's block */
        }
        if (i == start && start > 0) { /* the workload's own figures from here, as a program measures them */
            vram_allocator_empty_cache(a);
            vram_allocator_reset_peak_stats(a);
            allocs = empty = 0;
            t0 = now_seconds();
        }
        if (observer) observer(ctx, i);
        if (vram_trace_event_empty(e)) {
            allocs++; /* an empty tensor: no memory (vram/trace.h) */
            empty++;
        } else if (e->op == VRAM_TRACE_ALLOC) {
            st = vram_allocator_malloc(a, (size_t)e->size, (vram_stream)e->stream, VRAM_TAG_OTHER, &ptrs[e->index]);
            if (st != VRAM_OK) break;
            allocs++;
            if (peek && i >= start) { /* track_peak: the event at which reserved memory peaks */
                vram_allocator_get_stats(a, peek);
                if (peek->reserved_bytes[VRAM_POOL_ALL].current > best) {
                    best = peek->reserved_bytes[VRAM_POOL_ALL].current;
                    res->peak_event = i;
                }
            }
        } else if (ptrs[e->index]) { /* (NULL: an empty tensor's) */
            st = vram_allocator_free(a, ptrs[e->index]);
            if (st != VRAM_OK) break;
        }
    }
    double secs = now_seconds() - t0;
    free(peek);

    size_t done = i < stop ? i + 1 : i; /* events run, a failing one included */
    res->events = done > start ? done - start : 0;
    res->allocs = i >= start ? allocs : 0;
    res->empty_allocs = i >= start ? empty : 0;
    res->frees = res->events - res->allocs - (i < stop && i >= start ? 1 : 0);
    res->seconds = secs;
    res->events_per_second = secs > 0 ? (double)res->events / secs : 0.0;
    res->peak_event_reserved_bytes = best > 0 ? (uint64_t)best : 0;
    fill_from_stats(a, res);
    if (st != VRAM_OK) {
        res->failed = 1;
        res->failed_event = i;
        res->failed_line = vram_trace_event_line(t, i);
        res->failed_status = st;
        const vram_trace_event *e = &ev[i];
        char sz[32];
        if (e->op == VRAM_TRACE_ALLOC) {
            /* Out of memory: the allocator's report (vram_allocator_oom_report) says the rest. */
            const char *detail = st == VRAM_ERR_OUT_OF_MEMORY ? "out of memory" : vram_last_error();
            st = vram_error(st, "%s line %llu (event %zu): allocation of %llu bytes (%s) on stream %u, id %llu, failed: %s",
                            vram_trace_name(t), (unsigned long long)res->failed_line, i,
                            (unsigned long long)e->size, vram_format_size(e->size, sz, sizeof sz), e->stream,
                            (unsigned long long)vram_trace_alloc_id(t, e->index), detail);
        } else {
            /* A validated trace frees only live allocations, so this is the allocator's bug. */
            st = vram_error(VRAM_ERR_INTERNAL, "%s line %llu (event %zu): free of id %llu failed: %s",
                            vram_trace_name(t), (unsigned long long)res->failed_line, i,
                            (unsigned long long)vram_trace_alloc_id(t, e->index), vram_last_error());
            res->failed_status = st;
        }
    }
    free(ptrs);
    return st;
}

vram_status vram_replay_open(const vram_replay_options *o, uint64_t capacity, vram_device **dev,
                             vram_allocator **a) {
    static const vram_replay_options defaults = {0};
    if (!o) o = &defaults;
    if (!capacity) capacity = o->capacity;
    const char *spec = o->device ? o->device : "sim";
    *dev = NULL;
    *a = NULL;
    if (spec[strcspn(spec, ":")] && !spec[strcspn(spec, ":") + 1]) /* "sim:": named below, before a size is added */
        return vram_device_open(spec, dev);

    vram_alloc_config cfg;
    vram_status st = vram_alloc_config_from_env(&cfg);
    if (st != VRAM_OK) return st;
    if (o->conf && (st = vram_alloc_config_parse(o->conf, &cfg)) != VRAM_OK) return st;

    /* A simulated device whose spec gives no size gets the capacity as its size, its other
     * arguments kept ("cudasim:lag=100" -> "cudasim:CAPACITY,lag=100"), at any length of them
     * (a fixed buffer once left a long spec unsized: 80 GiB with a limit of the capacity). */
    char *sim_spec = NULL;
    int cap_in_spec = 0;
    int simulated = vram_device_spec_is(spec, "sim") || vram_device_spec_is(spec, "cudasim");
    if (capacity && simulated && !vram_device_spec_sized(spec)) {
        size_t kind = strcspn(spec, ":"), len = strlen(spec) + 32; /* + ':', 20 digits, ',' */
        const char *rest = spec[kind] && spec[kind + 1] ? spec + kind + 1 : NULL;
        if (!(sim_spec = malloc(len))) return vram_error(VRAM_ERR_HOST_MEMORY, "replay: host out of memory");
        snprintf(sim_spec, len, "%.*s:%llu%s%s", (int)kind, spec, (unsigned long long)capacity, rest ? "," : "",
                 rest ? rest : "");
        spec = sim_spec;
        cap_in_spec = 1;
    }
    st = vram_device_open(spec, dev);
    free(sim_spec);
    if (st != VRAM_OK) return st;
    if ((st = vram_allocator_new(*dev, &cfg, a)) != VRAM_OK) {
        vram_device_close(*dev);
        *dev = NULL;
        return st;
    }
    if (capacity && !cap_in_spec && (st = vram_allocator_set_limit(*a, capacity)) != VRAM_OK) {
        vram_allocator_destroy(*a);
        vram_device_close(*dev);
        *a = NULL;
        *dev = NULL;
        return st;
    }
    return VRAM_OK;
}

/* 1: fits, 0: an allocation failed for lack of memory, <0: another error (status). */
static int fit_try(const vram_trace *t, const vram_replay_options *o, uint64_t capacity, vram_status *err) {
    vram_device *dev;
    vram_allocator *a;
    vram_status st = vram_replay_open(o, capacity, &dev, &a);
    if (st != VRAM_OK) {
        *err = st;
        return -1;
    }
    vram_replay_result r;
    st = vram_trace_replay(t, a, SIZE_MAX, 0, &r);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    if (st == VRAM_OK) return 1;
    if (st == VRAM_ERR_OUT_OF_MEMORY) return 0;
    *err = st;
    return -1;
}

static uint64_t fit_tolerance(uint64_t capacity) {
    uint64_t rel = capacity / 1000;
    return rel > (2ull << 20) ? rel : (2ull << 20);
}

vram_status vram_replay_fit(const vram_trace *t, const vram_replay_options *o, uint64_t *capacity,
                            unsigned *tries) {
    if (!t || !capacity) return vram_error(VRAM_ERR_INVALID_ARG, "fit: null argument");
    static const vram_replay_options defaults = {0};
    if (!o) o = &defaults;
    const char *spec = o->device ? o->device : "sim";
    /* The sim device takes capacities from 2 MiB to 32 TiB. */
    const uint64_t min_cap = 2ull << 20, max_cap = 1ull << 45;
    unsigned n = 0;
    vram_status err = VRAM_OK;

    /* No allocator fits a trace below its peak of live bytes, so that is the lower end; the
     * first try is a little above it, where a good allocator fits. */
    uint64_t lo = vram_trace_peak_live_bytes(t); /* largest capacity known (or assumed) to fail */
    if (lo < min_cap) lo = min_cap - 1;
    else lo -= 1;
    uint64_t hi = 0; /* smallest capacity known to fit */
    uint64_t probe = lo + lo / 50 + (4ull << 20);
    if (probe < min_cap) probe = min_cap;
    while (!hi) {
        if (probe > max_cap) probe = max_cap;
        int r = fit_try(t, o, probe, &err);
        n++;
        if (r < 0) return err;
        if (r) {
            hi = probe;
        } else {
            lo = probe;
            if (probe == max_cap) {
                if (tries) *tries = n;
                return vram_error(VRAM_ERR_OUT_OF_MEMORY, "fit: %s does not run on %s even at %llu bytes",
                                  vram_trace_name(t), spec, (unsigned long long)max_cap);
            }
            probe = probe * 2;
        }
    }
    while (hi - lo > fit_tolerance(hi)) {
        uint64_t mid = lo + (hi - lo) / 2;
        int r = fit_try(t, o, mid, &err);
        n++;
        if (r < 0) return err;
        if (r) hi = mid;
        else lo = mid;
    }
    *capacity = hi;
    if (tries) *tries = n;
    return VRAM_OK;
}
