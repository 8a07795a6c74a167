/* test_replay.c — trace replay through the allocator: exact peaks of a hand-made trace, the
 * failing event of an out-of-memory replay, stopping early, the peak tracker, the fit search,
 * and the bundled traces against the acceptance figures (reserved / requested <= 1.03,
 * geometric mean <= 1.015) and the replay speed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "vram/replay.h"

static const char *tiny =
    "# memtrace v1\n"
    "# peak_requested_bytes: 3003100\n"
    "a 0 1000 0\n"     /* 1024 allocated */
    "a 1 3000 0\n"     /* +3072 */
    "f 0\n"
    "a 2 100 1\n"      /* +512, stream 1 */
    "a 3 3000000 0\n"  /* +3000320 (512-byte rounding): the peak */
    "f 3\n"
    "f 1\n"
    "a 4 0 0\n"        /* size 0: an empty tensor, no memory (as PyTorch serves it) */
    "f 2\n"
    "f 4\n";

static vram_trace *load_str(const char *text) {
    vram_trace *t = NULL;
    CHECK_OK(vram_trace_parse(text, strlen(text), "tiny", &t));
    return t;
}

static void test_tiny(const char *conf) {
    const char *label = conf ? conf : "default";
    vram_trace *t = load_str(tiny);
    if (!t) return;
    vram_replay_options o = {.device = "sim", .capacity = 1ull << 30, .conf = conf};
    vram_device *dev;
    vram_allocator *a;
    CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
    CHECK(dev->capacity == 1ull << 30, "capacity in the sim spec");
    vram_replay_result r;
    CHECK_OK(vram_trace_replay(t, a, SIZE_MAX, 0, &r));
    CHECK(r.events == 10 && r.allocs == 5 && r.empty_allocs == 1 && r.frees == 5, "%s: counts %llu %llu %llu %llu",
          label, (unsigned long long)r.events, (unsigned long long)r.allocs, (unsigned long long)r.empty_allocs,
          (unsigned long long)r.frees);
    CHECK(r.peak_requested_bytes == 3003100, "%s: peak requested %llu", label, (unsigned long long)r.peak_requested_bytes);
    CHECK(r.peak_allocated_bytes == 3003904, "%s: peak allocated %llu", label, (unsigned long long)r.peak_allocated_bytes);
    CHECK(r.peak_reserved_bytes >= r.peak_allocated_bytes, "%s: reserved %llu >= allocated", label,
          (unsigned long long)r.peak_reserved_bytes);
    if (conf && strstr(conf, "expandable_segments:False"))
        /* PyTorch's segment sizes: one 2 MiB small segment, one 20 MiB large segment. */
        CHECK(r.peak_reserved_bytes == (22ull << 20), "%s: reserved %llu", label, (unsigned long long)r.peak_reserved_bytes);
    else
        CHECK(r.peak_reserved_bytes <= r.peak_allocated_bytes + (8ull << 20), "%s: reserved %llu within a few pages", label, (unsigned long long)r.peak_reserved_bytes);
    CHECK(fabs(r.reserved_over_requested - (double)r.peak_reserved_bytes / 3003100.0) < 1e-12, "ratio");
    CHECK(r.ooms == 0 && !r.failed, "no OOM");
    CHECK(r.seconds >= 0 && r.events_per_second >= 0, "timing");

    /* The figures are the allocator's own statistics. */
    vram_stats s;
    vram_allocator_get_stats(a, &s);
    CHECK(r.peak_reserved_bytes == (uint64_t)s.reserved_bytes[VRAM_POOL_ALL].peak, "reserved from stats");
    CHECK(r.device_allocs == s.num_device_alloc && r.device_frees == s.num_device_free, "device counts from stats");
    CHECK(s.allocated_bytes[VRAM_POOL_ALL].current == 0 && s.requested_bytes[VRAM_POOL_ALL].current == 0,
          "everything freed at the end");
    CHECK(s.allocation[VRAM_POOL_ALL].allocated == 4, "4 allocations counted (the empty one is none): %llu",
          (unsigned long long)s.allocation[VRAM_POOL_ALL].allocated);
    CHECK(s.tags[VRAM_TAG_OTHER].allocation.allocated == 4, "tagged 'other'");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);

    /* Stop after two events: both allocations still live. */
    CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
    CHECK_OK(vram_trace_replay(t, a, 2, 0, &r));
    CHECK(r.events == 2 && r.allocs == 2 && r.peak_requested_bytes == 4000 && r.peak_allocated_bytes == 4096,
          "stopped at 2: %llu %llu", (unsigned long long)r.events, (unsigned long long)r.peak_requested_bytes);
    vram_allocator_get_stats(a, &s);
    CHECK(s.allocation[VRAM_POOL_ALL].current == 2, "two live after stopping");
    vram_allocator_destroy(a); /* releases the live blocks */
    vram_device_close(dev);

    /* Stop right after the empty request: only allocation 2 holds memory. */
    CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
    CHECK_OK(vram_trace_replay(t, a, 8, 0, &r));
    vram_allocator_get_stats(a, &s);
    CHECK(r.events == 8 && r.allocs == 5 && r.empty_allocs == 1 && s.allocation[VRAM_POOL_ALL].current == 1 &&
              s.allocated_bytes[VRAM_POOL_ALL].current == 512,
          "%s: after the empty request: %llu live, %llu bytes", label,
          (unsigned long long)s.allocation[VRAM_POOL_ALL].current,
          (unsigned long long)s.allocated_bytes[VRAM_POOL_ALL].current);
    vram_allocator_destroy(a);
    vram_device_close(dev);

    /* The peak tracker finds the event after which reserved memory peaked. */
    CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
    CHECK_OK(vram_trace_replay(t, a, SIZE_MAX, 1, &r));
    CHECK(r.peak_event == 4, "%s: peak event %zu", label, r.peak_event);
    CHECK(r.peak_event_reserved_bytes == r.peak_reserved_bytes, "peak event reserved %llu",
          (unsigned long long)r.peak_event_reserved_bytes);
    vram_allocator_destroy(a);
    vram_device_close(dev);

    /* Fit: the tiny trace needs at least its peak; the result fits and a capacity one
     * tolerance below it does not. */
    uint64_t fit = 0;
    unsigned tries = 0;
    CHECK_OK(vram_replay_fit(t, &o, &fit, &tries));
    CHECK(fit >= 3003100 && tries >= 1, "%s: fit %llu after %u tries", label, (unsigned long long)fit, tries);
    CHECK_OK(vram_replay_open(&o, fit, &dev, &a));
    CHECK(vram_trace_replay(t, a, SIZE_MAX, 0, &r) == VRAM_OK, "replay fits at the fit capacity");
    vram_allocator_destroy(a);
    vram_device_close(dev);
    uint64_t below = fit - (2ull << 20) - 1;
    if (below >= (2ull << 20)) {
        CHECK_OK(vram_replay_open(&o, below, &dev, &a));
        CHECK(vram_trace_replay(t, a, SIZE_MAX, 0, &r) == VRAM_ERR_OUT_OF_MEMORY, "%s: does not fit below the fit (%llu)",
              label, (unsigned long long)below);
        vram_allocator_destroy(a);
        vram_device_close(dev);
    }
    vram_trace_free(t);
}

static void test_oom(void) {
    vram_trace *t = load_str("# memtrace v1\na 0 1000 0\na 1 2000 0\n\na 2 8388608 0\nf 0\n");
    if (!t) return;
    vram_replay_options o = {.capacity = 4ull << 20};
    vram_device *dev;
    vram_allocator *a;
    CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
    vram_replay_result r;
    vram_status st = vram_trace_replay(t, a, SIZE_MAX, 0, &r);
    CHECK(st == VRAM_ERR_OUT_OF_MEMORY, "OOM status %s", vram_status_str(st));
    CHECK(r.failed && r.failed_event == 2 && r.failed_line == 5, "failed at event %zu line %llu", r.failed_event,
          (unsigned long long)r.failed_line);
    CHECK(r.failed_status == VRAM_ERR_OUT_OF_MEMORY, "failed status");
    CHECK(r.events == 3 && r.allocs == 2 && r.frees == 0, "events %llu allocs %llu", (unsigned long long)r.events,
          (unsigned long long)r.allocs);
    CHECK(r.ooms == 1, "ooms %llu", (unsigned long long)r.ooms);
    CHECK(strstr(vram_last_error(), "tiny line 5") && strstr(vram_last_error(), "8388608"), "detail: %s",
          vram_last_error());
    CHECK(strlen(vram_allocator_oom_report(a)) > 0, "an OOM report");
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);

    /* Fit finds a capacity for it. */
    uint64_t fit = 0;
    CHECK_OK(vram_replay_fit(t, &o, &fit, NULL));
    CHECK(fit >= 8388608 + 3000 && fit <= (16ull << 20), "fit %llu", (unsigned long long)fit);

    /* Bad options are errors, not crashes. */
    vram_replay_options bad = {.device = "nonesuch"};
    CHECK(vram_replay_open(&bad, 0, &dev, &a) == VRAM_ERR_INVALID_ARG, "unknown device");
    vram_replay_options badconf = {.conf = "no_such_key:1"};
    CHECK(vram_replay_open(&badconf, 0, &dev, &a) != VRAM_OK, "bad conf");
    CHECK(strstr(vram_last_error(), "no_such_key") != NULL, "names the key: %s", vram_last_error());
    vram_trace_free(t);

    /* A request larger than any device (above 2^52 bytes) is an OOM like the others: counted and
     * reported with its reason (it was neither: "ooms" 0 beside "oom": true, an empty report). */
    t = load_str("# memtrace v1\na 0 1000 0\na 1 9007199254740992 0\nf 0\nf 1\n");
    if (!t) return;
    CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
    st = vram_trace_replay(t, a, SIZE_MAX, 0, &r);
    CHECK(st == VRAM_ERR_OUT_OF_MEMORY && r.failed && r.failed_event == 1, "huge request: %s at event %zu",
          vram_status_str(st), r.failed_event);
    CHECK(r.ooms == 1, "huge request counted: ooms %llu", (unsigned long long)r.ooms);
    CHECK(strstr(vram_allocator_oom_report(a), "larger than any device") != NULL, "huge request's report: '%s'",
          vram_allocator_oom_report(a));
    void *none = NULL; /* SIZE_MAX: a size past INT64_MAX once read no cached memory as "fragmented" */
    CHECK(vram_allocator_malloc(a, SIZE_MAX, 0, VRAM_TAG_OTHER, &none) == VRAM_ERR_OUT_OF_MEMORY && !none &&
              strstr(vram_allocator_oom_report(a), "fragmented") == NULL,
          "SIZE_MAX request's report: '%s'", vram_allocator_oom_report(a));
    CHECK_OK(vram_allocator_check(a));
    vram_allocator_destroy(a);
    vram_device_close(dev);
    vram_trace_free(t);
}

/* The bundled traces: reserved / requested within the acceptance figures, and speed. The
 * traces under traces/unseen/ were recorded on an H200 from workloads the allocator was never
 * tuned on (bench/extra_workloads.py), and must meet the same figures. */
static void test_bundled(void) {
    static const char *names[] = {"resnet50_train", "gpt2_train", "bert_varlen_train", "gpt2_generate",
                                  "unseen/vit_train", "unseen/llama_train", "unseen/t5_varlen_train",
                                  "unseen/effnet_infer"};
    int sanitized = getenv("VRAM_TEST_SANITIZED") != NULL;
    double logsum = 0;
    int n = 0;
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/traces/%s.trace.gz", VRAM_SOURCE_DIR, names[i]);
        vram_trace *t = NULL;
        CHECK_OK(vram_trace_load(path, &t));
        if (!t) continue;
        vram_device *dev;
        vram_allocator *a;
        CHECK_OK(vram_replay_open(NULL, 0, &dev, &a));
        vram_replay_result r;
        CHECK_OK(vram_trace_replay(t, a, SIZE_MAX, 0, &r));
        CHECK(r.peak_requested_bytes == vram_trace_peak_live_bytes(t), "%s: requested peak equals the trace's",
              names[i]);
        CHECK(r.events == vram_trace_num_events(t), "%s: all events", names[i]);
        CHECK(r.reserved_over_requested <= 1.03, "%s: reserved/requested %.4f > 1.03", names[i],
              r.reserved_over_requested);
        CHECK_OK(vram_allocator_check(a));
        printf("%-18s reserved/requested %.4f  %6.2f M events/s\n", names[i], r.reserved_over_requested,
               r.events_per_second / 1e6);
        if (!sanitized && vram_trace_num_events(t) > 100000)
            CHECK(r.events_per_second >= 2.5e6, "%s: replay %.2f M events/s (target 5)", names[i],
                  r.events_per_second / 1e6);
        logsum += log(r.reserved_over_requested);
        n++;
        vram_allocator_destroy(a);
        vram_device_close(dev);
        if (i == 3 && !sanitized) {
            /* with CUDA's 64 MiB chunks, generation's KV-cache holes near the limit can move only
             * because the chunks mapped there are small (chunk_headroom) */
            vram_replay_options on = {.conf = "chunk_size_mb:64"}, off = {.conf = "chunk_size_mb:64,chunk_headroom:0"};
            uint64_t fit_on = 0, fit_off = 0;
            CHECK_OK(vram_replay_fit(t, &on, &fit_on, NULL));
            CHECK_OK(vram_replay_fit(t, &off, &fit_off, NULL));
            double r_on = (double)fit_on / (double)vram_trace_peak_live_bytes(t);
            double r_off = (double)fit_off / (double)vram_trace_peak_live_bytes(t);
            printf("%-18s fit with 64 MiB chunks %.4f x peak requested (%.4f without chunk_headroom)\n", names[i], r_on,
                   r_off);
            CHECK(r_on <= 1.045, "%s: fit with chunk_headroom %.4f", names[i], r_on);
            CHECK(r_off >= 1.06, "%s: fit without chunk_headroom %.4f (the test no longer tells them apart)", names[i],
                  r_off);
            /* cudasim places as a GPU does: its fit is close to the lag replay's 1.054 (fit-lag.md) */
            vram_replay_options cs = {.device = "cudasim"};
            uint64_t fit_cs = 0;
            CHECK_OK(vram_replay_fit(t, &cs, &fit_cs, NULL));
            double r_cs = (double)fit_cs / (double)vram_trace_peak_live_bytes(t);
            printf("%-18s fit on cudasim %.4f x peak requested\n", names[i], r_cs);
            CHECK(r_cs >= 1.04 && r_cs <= 1.065, "%s: fit on cudasim %.4f", names[i], r_cs);
        }
        if (i == 0 && !sanitized) {
            uint64_t fit = 0;
            CHECK_OK(vram_replay_fit(t, NULL, &fit, NULL));
            double ratio = (double)fit / (double)vram_trace_peak_live_bytes(t);
            printf("%-18s fit %.4f x peak requested\n", names[i], ratio);
            CHECK(ratio >= 1.0 && ratio <= 1.03, "%s: fit ratio %.4f", names[i], ratio);
        }
        vram_trace_free(t);
    }
    if (n) {
        double g = exp(logsum / n);
        printf("geometric mean reserved/requested %.4f\n", g);
        CHECK(g <= 1.015, "geometric mean %.4f > 1.015", g);
    }
}

/* What vram_trace_replay_observed's observer sees: every event once, in order, just before it is
 * replayed, and at the measured range's start an emptied cache with its peaks reset. */
typedef struct observed {
    vram_allocator *a;
    size_t start, calls, last;
    int in_order;
    int64_t reserved_at_start, peak_at_start;
} observed;

static void observe(void *ctx, size_t event) {
    observed *o = ctx;
    o->in_order &= event == o->calls;
    o->calls++;
    o->last = event;
    if (event == o->start) {
        vram_stats st;
        vram_allocator_get_stats(o->a, &st);
        o->reserved_at_start = st.reserved_bytes[0].current;
        o->peak_at_start = st.allocated_bytes[0].peak;
    }
}

static void test_observer(const vram_trace *t, size_t start, size_t stop) {
    vram_replay_options opt = {.device = "sim", .capacity = 1ull << 30};
    vram_device *dev;
    vram_allocator *a;
    CHECK_OK(vram_replay_open(&opt, 0, &dev, &a));
    if (!a) return;
    observed o = {.a = a, .start = start, .in_order = 1, .reserved_at_start = -1};
    vram_replay_result r;
    CHECK_OK(vram_trace_replay_observed(t, a, start, stop, 0, observe, &o, &r));
    CHECK(o.calls == stop && o.in_order && o.last == stop - 1, "the observer saw events 0..%zu in order: %zu calls",
          stop - 1, o.calls);
    CHECK(o.reserved_at_start == (int64_t)(4ull << 20) && o.peak_at_start == (int64_t)(4ull << 20),
          "at the range's start the cache was emptied (reserved %lld: the first program's 4 MiB left) and the "
          "peak reset (%lld)", (long long)o.reserved_at_start, (long long)o.peak_at_start);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    CHECK_OK(vram_replay_open(&opt, 0, &dev, &a));
    if (!a) return;
    CHECK_OK(vram_trace_replay_observed(t, a, start, stop, 0, NULL, NULL, &r)); /* no observer: fine */
    CHECK(r.events == stop - start, "without an observer the range replays too: %llu events",
          (unsigned long long)r.events);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* A replay completes the work queued on the device at a "# sync:" line (the program waited for
 * the GPU there): on a device 1000 calls behind, an event recorded at the first allocation is
 * complete two allocations later with a sync line between them, and still pending without. */
typedef struct sync_probe {
    vram_device *dev;
    void *event;
    int complete; /* the event's state before event 2: 1 complete, 0 pending, -1 not asked */
} sync_probe;

static void probe_sync(void *ctx, size_t event) {
    sync_probe *p = ctx;
    if (event == 0 && p->dev->ops->event_record(p->dev, 0, &p->event) != VRAM_OK) p->event = NULL;
    if (event == 2 && p->event) p->complete = p->dev->ops->event_query(p->dev, p->event) == VRAM_OK;
}

static void test_replay_syncs(void) {
    static const char *traces[2] = {"# memtrace v1\na 0 1048576 0\na 1 1048576 0\na 2 1048576 0\n",
                                    "# memtrace v1\na 0 1048576 0\na 1 1048576 0\n# sync: step 0\na 2 1048576 0\n"};
    for (int synced = 0; synced < 2; synced++) {
        vram_trace *t = load_str(traces[synced]);
        vram_replay_options o = {.device = "cudasim:1GiB,lag=1000"};
        vram_device *dev = NULL;
        vram_allocator *a = NULL;
        if (t) CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
        if (a) {
            sync_probe p = {.dev = dev, .complete = -1};
            vram_replay_result r;
            CHECK_OK(vram_trace_replay_observed(t, a, 0, SIZE_MAX, 0, probe_sync, &p, &r));
            CHECK(p.complete == synced, "%s a sync line, work queued before it is %s (%d)", synced ? "after" : "without",
                  synced ? "complete" : "still running", p.complete);
            if (p.event) dev->ops->event_destroy(dev, p.event);
            vram_allocator_destroy(a);
            vram_device_close(dev);
        }
        vram_trace_free(t);
    }
}

/* A trace of two programs in one process: each measured from its start, what the first leaves
 * allocated counted in the second's figures, as a process measures them. */
static void test_workloads(void) {
    static const char *two =
        "# memtrace v1\n"
        "# workload: first\n"
        "a 0 4194304 0\n" /* 4 MiB, left allocated */
        "a 1 8388608 0\n" /* 8 MiB */
        "f 1\n"
        "# sync: first step 0\n"
        "# workload: second\n"
        "a 2 2097152 0\n" /* 2 MiB */
        "f 2\n";
    vram_trace *t = load_str(two);
    if (!t) return;
    vram_trace_workload w[4];
    CHECK(vram_trace_workloads(t, w, 4) == 2, "two workloads");
    CHECK(!strcmp(w[0].name, "first") && w[0].start == 0 && w[0].end == 3, "first: events [%zu, %zu)", w[0].start, w[0].end);
    CHECK(!strcmp(w[1].name, "second") && w[1].start == 3 && w[1].end == 5, "second: events [%zu, %zu)", w[1].start, w[1].end);
    CHECK(vram_trace_workloads(t, w, 1) == 2 && w[0].end == 3, "a short array gets the first, the count is all");
    vram_replay_options o = {.device = "sim", .capacity = 1ull << 30};
    vram_device *dev;
    vram_allocator *a;
    CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
    vram_replay_result r;
    CHECK_OK(vram_trace_replay_range(t, a, w[1].start, w[1].end, 0, &r));
    CHECK(r.events == 2 && r.allocs == 1 && r.frees == 1, "second's counts %llu %llu %llu", (unsigned long long)r.events,
          (unsigned long long)r.allocs, (unsigned long long)r.frees);
    CHECK(r.peak_requested_bytes == (6ull << 20), "second's peak requested counts the first's 4 MiB left: %llu",
          (unsigned long long)r.peak_requested_bytes);
    CHECK(r.peak_reserved_bytes >= (6ull << 20) && r.peak_reserved_bytes < (12ull << 20),
          "the first's 8 MiB peak is not the second's: reserved %llu", (unsigned long long)r.peak_reserved_bytes);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    test_observer(t, w[1].start, w[1].end);
    vram_trace_free(t);
    vram_trace *one = load_str(tiny);
    if (one) CHECK(vram_trace_workloads(one, w, 4) == 0, "a trace without workload lines is one program");
    vram_trace_free(one);
}

/* cudasim with a lag: an event recorded after the host queued work is pending until `lag`
 * more calls, or a sync, have passed; a replay steps the device once per event and completes all
 * work at "# sync:" lines; lag 0 places exactly as the device without one; bad specs are refused. */
static void test_cudasim_lag(void) {
    vram_device *dev;
    CHECK_OK(vram_device_open("cudasim:1GiB,lag=2", &dev));
    if (!dev) return;
    CHECK(dev->ops->host_step != NULL && strstr(dev->name, "lag 2") != NULL, "a lagging device: %s", dev->name);
    void *e0, *e1;
    CHECK_OK(dev->ops->event_record(dev, 0, &e0));
    CHECK(dev->ops->event_query(dev, e0) == VRAM_OK, "nothing queued yet: complete");
    dev->ops->host_step(dev, 0); /* work 1 queued, still running */
    CHECK_OK(dev->ops->event_record(dev, 0, &e1));
    CHECK(dev->ops->event_query(dev, e1) == VRAM_ERR_STATE, "recorded after running work: pending");
    dev->ops->host_step(dev, 0);
    CHECK(dev->ops->event_query(dev, e1) == VRAM_ERR_STATE, "one call later: pending (lag 2)");
    dev->ops->host_step(dev, 0);
    CHECK(dev->ops->event_query(dev, e1) == VRAM_OK, "two calls later: complete");
    dev->ops->event_destroy(dev, e1);
    dev->ops->host_step(dev, 0);
    CHECK_OK(dev->ops->event_record(dev, 3, &e1));
    CHECK(dev->ops->event_query(dev, e1) == VRAM_ERR_STATE, "pending again");
    dev->ops->host_step(dev, 1);
    CHECK(dev->ops->event_query(dev, e1) == VRAM_OK, "a sync completes all work");
    dev->ops->event_destroy(dev, e1);
    dev->ops->host_step(dev, 0);
    CHECK_OK(dev->ops->event_record(dev, 0, &e1));
    CHECK_OK(dev->ops->event_sync(dev, e1));
    CHECK(dev->ops->event_query(dev, e1) == VRAM_OK, "a host wait completes the event");
    dev->ops->event_destroy(dev, e1);
    dev->ops->event_destroy(dev, e0);
    vram_device_close(dev);
    static const char *bad[] = {"cudasim:lag=", "cudasim:lag=x", "cudasim:lag=-1", "cudasim:1GiBlag=2",
                                "cudasim:lag=99999999999", "cudasim:1GiB,lag=2,x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dev = NULL;
        CHECK(vram_device_open(bad[i], &dev) == VRAM_ERR_INVALID_ARG && !dev, "%s refused", bad[i]);
        CHECK(strstr(vram_last_error(), "cudasim device") != NULL, "%s: says which device: %s", bad[i], vram_last_error());
    }
    /* which specs give a size, and a replay's capacity sizing those that do not (the lag kept) */
    static const struct {
        const char *spec;
        int sized;
    } sizes[] = {{"sim", 0},         {"sim:1GiB", 1},          {"cudasim", 0},       {"cudasim:lag=3", 0},
                 {"cudasim:2GiB", 1}, {"cudasim:2GiB,lag=3", 1}, {"host", 0},          {"host:1GiB", 1},
                 {"cuda:0", 0},       {"simx:1GiB", 0},          {"cudasim:", 0},      {NULL, 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        CHECK(vram_device_spec_sized(sizes[i].spec) == sizes[i].sized, "%s gives a size: %d", sizes[i].spec,
              vram_device_spec_sized(sizes[i].spec));
    CHECK(vram_device_spec_is("cudasim:lag=3", "cudasim") && vram_device_spec_is("sim", "sim") &&
              !vram_device_spec_is("cudasimx:1GiB", "cudasim") && !vram_device_spec_is("cudasim", "sim") &&
              !vram_device_spec_is(NULL, "sim"),
          "a spec's kind is the text before its colon");
    vram_replay_options sized = {.device = "cudasim:lag=7", .capacity = 3ull << 30};
    vram_allocator *sa;
    CHECK_OK(vram_replay_open(&sized, 0, &dev, &sa));
    if (dev) {
        CHECK(dev->capacity == 3ull << 30 && strstr(dev->name, "lag 7") && vram_allocator_limit(sa) == 3ull << 30,
              "cudasim:lag=7 with a capacity: sized to it, lag kept: %s", dev->name);
        vram_allocator_destroy(sa);
        vram_device_close(dev);
    }
    /* ...at any length of the spec (from 64 characters it was an 80 GiB device capped at 3 GiB) */
    sized.device = "cudasim:lag=0000000000000000000000000000000000000000000000000000000000000000000000007";
    dev = NULL;
    CHECK_OK(vram_replay_open(&sized, 0, &dev, &sa));
    if (dev) {
        CHECK(dev->capacity == 3ull << 30 && strstr(dev->name, "lag 7") && vram_allocator_limit(sa) == 3ull << 30,
              "a %zu-character spec with a capacity: sized to it: %s", strlen(sized.device), dev->name);
        vram_allocator_destroy(sa);
        vram_device_close(dev);
    }
    /* a replay: lag 0 is the device without a lag; with a lag, work trails the calls */
    char path[512];
    snprintf(path, sizeof path, "%s/traces/gpt2_train.trace.gz", VRAM_SOURCE_DIR);
    vram_trace *t = NULL;
    CHECK_OK(vram_trace_load(path, &t));
    if (!t) return;
    const char *specs[] = {"cudasim:141GiB", "cudasim:141GiB,lag=0", "cudasim:lag=100"};
    vram_replay_result r[3];
    for (int i = 0; i < 3; i++) {
        vram_replay_options o = {.device = specs[i], .capacity = i == 2 ? 141ull << 30 : 0};
        vram_allocator *a;
        CHECK_OK(vram_replay_open(&o, 0, &dev, &a));
        CHECK_OK(vram_trace_replay(t, a, SIZE_MAX, 0, &r[i]));
        CHECK_OK(vram_allocator_check(a));
        vram_allocator_destroy(a);
        vram_device_close(dev);
    }
    CHECK(r[1].peak_reserved_bytes == r[0].peak_reserved_bytes && r[1].device_allocs == r[0].device_allocs &&
              r[1].device_frees == r[0].device_frees,
          "lag 0 places as no lag: %llu / %llu bytes", (unsigned long long)r[1].peak_reserved_bytes,
          (unsigned long long)r[0].peak_reserved_bytes);
    CHECK(r[2].reserved_over_requested <= 1.03 && r[2].peak_requested_bytes == r[0].peak_requested_bytes,
          "lag 100 (capacity from the options, lag kept): %.4f", r[2].reserved_over_requested);
    printf("gpt2_train on cudasim: %.4f at lag 0, %.4f at lag 100\n", r[0].reserved_over_requested,
           r[2].reserved_over_requested);
    vram_trace_free(t);
}

int main(void) {
    test_workloads();
    test_cudasim_lag();
    test_replay_syncs();
    test_tiny(NULL);
    test_tiny("expandable_segments:False");
    test_oom();
    test_bundled();
    return check_done();
}
