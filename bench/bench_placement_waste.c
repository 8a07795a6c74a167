/* bench_placement_waste.c — where the memory a replay reserves beyond what it allocates sits, and
 * why a move could not take it (vram_allocator_cache_breakdown, include/vram/alloc.h).
 *
 * Each trace (each program of a multi-program trace, as vram replay measures it) is replayed on
 * a fresh simulated device (default cudasim: 64 MiB chunks, as vram places on CUDA). The large
 * pool's free memory is sorted at two moments: just after allocated memory first reaches its
 * peak (the waste at the moment that counts) and just after reserved memory first reaches its
 * peak. Free memory is "movable" (in chunks holding nothing in use: a page move or a release
 * takes it), "pinned" (whole free pages in a chunk that also holds a block in use: a chunk moves
 * only whole) or "in-page" (the free bytes of pages a block in use shares). Every growth of the
 * large pool's reserved memory is replayed up to the event before it and its bytes split the same
 * way: as much as there was movable memory then ("unmoved": the allocator chose to map, below
 * move_min or under its budget), as much as there was pinned or in-page ("stuck"), and the rest
 * ("new": no free memory could have served it). --events MIB lists the growths that left more than
 * MIB free. --snapshot FILE writes a JSON snapshot (include/vram/snapshot.h, what
 * bench/snapshot_layout.py reads) at the allocation peak of the one program measured: the layout
 * behind the first breakdown (vram replay --snapshot writes at the peak of reserved memory, which
 * a later growth of the small pool may set). Replays are deterministic: one run is the median of
 * any number.
 *
 *   bench_placement_waste [--device SPEC] [--conf CONF] [--events MIB] [--snapshot FILE] TRACE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/bench.h"
#include "vram/replay.h"
#include "vram/snapshot.h"

#define MIB (1024.0 * 1024.0)

typedef struct {
    vram_allocator *a;
    size_t start;
    int64_t last_reserved, max_allocated, max_reserved;
    size_t alloc_peak_event, reserved_peak_event; /* the events after which each first peaked */
    size_t *grow_event;                           /* events that raised the large pool's reserved bytes */
    int64_t *grow_bytes;
    size_t ngrow, capgrow;
    int failed;
} watch;

/* The replay's observer: called before event e, so what it reads is the state after e - 1. */
static void observe(void *ctx, size_t e) {
    watch *w = ctx;
    if (e < w->start) return; /* before the program */
    vram_stats s;
    vram_allocator_get_stats(w->a, &s);
    int64_t res = s.reserved_bytes[VRAM_POOL_LARGE].current, al = s.allocated_bytes[VRAM_POOL_LARGE].current;
    if (e == w->start) { /* the program's start, the cache just emptied: what earlier ones left */
        w->last_reserved = res;
        return;
    }
    if (al > w->max_allocated) {
        w->max_allocated = al;
        w->alloc_peak_event = e - 1;
    }
    if (res > w->max_reserved) {
        w->max_reserved = res;
        w->reserved_peak_event = e - 1;
    }
    if (res > w->last_reserved) {
        if (w->ngrow == w->capgrow) {
            size_t cap = w->capgrow ? 2 * w->capgrow : 64;
            size_t *ne = realloc(w->grow_event, cap * sizeof *ne);
            if (ne) w->grow_event = ne;
            int64_t *nb = ne ? realloc(w->grow_bytes, cap * sizeof *nb) : NULL;
            if (nb) w->grow_bytes = nb;
            if (!ne || !nb) {
                w->failed = 1;
                return;
            }
            w->capgrow = cap;
        }
        w->grow_event[w->ngrow] = e - 1;
        w->grow_bytes[w->ngrow++] = res - w->last_reserved;
    }
    w->last_reserved = res;
}

/* The large pool's breakdown after events [0, stop) of the program [start, ...) on a fresh device. */
static vram_status breakdown_at(const vram_trace *t, const vram_replay_options *o, size_t start, size_t stop,
                                vram_cache_breakdown *b) {
    vram_device *dev;
    vram_allocator *a;
    vram_replay_result r;
    vram_status st = vram_replay_open(o, 0, &dev, &a);
    if (st != VRAM_OK) return st;
    st = vram_trace_replay_range(t, a, start, stop, 0, &r);
    if (st == VRAM_OK) st = vram_allocator_cache_breakdown(a, VRAM_POOL_LARGE, b);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return st;
}

/* Writes the snapshot of the state after events [start, stop) of t to path: 0, or 1 with a message. */
static int snapshot_at(const vram_trace *t, const vram_replay_options *o, size_t start, size_t stop, const char *path) {
    vram_device *dev;
    vram_allocator *a;
    vram_replay_result r;
    vram_snapshot *snap = NULL;
    vram_status st = vram_replay_open(o, 0, &dev, &a);
    if (st != VRAM_OK) {
        fprintf(stderr, "bench_placement_waste: %s\n", vram_last_error());
        return 1;
    }
    st = vram_trace_replay_range(t, a, start, stop, 0, &r);
    if (st == VRAM_OK) st = vram_allocator_snapshot(a, &snap);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    if (st != VRAM_OK) {
        fprintf(stderr, "bench_placement_waste: snapshot: %s\n", vram_last_error());
        vram_snapshot_free(snap);
        return 1;
    }
    FILE *f = fopen(path, "w");
    int bad = !f || vram_snapshot_write_json(snap, f) != VRAM_OK;
    if (f && fclose(f)) bad = 1;
    vram_snapshot_free(snap);
    if (bad) {
        fprintf(stderr, "bench_placement_waste: cannot write snapshot '%s'\n", path);
        return 1;
    }
    printf("# snapshot after event %zu (the large pool's allocation peak) written to %s\n", stop - 1, path);
    return 0;
}

static void print_free(const vram_cache_breakdown *b) {
    printf(" %.0f / %.0f / %.0f |", (double)b->free_movable / MIB, (double)b->free_pinned / MIB,
           (double)b->free_in_page / MIB);
}

/* One program: events [start, stop) of t. Prints its row; 0, or 1 when a replay failed. */
static int measure(const vram_trace *t, const char *name, const vram_replay_options *o, size_t start, size_t stop,
                   double events_mib, const char *snapshot) {
    size_t nev;
    const vram_trace_event *ev = vram_trace_events(t, &nev);
    vram_device *dev;
    vram_replay_result r;
    watch w = {0};
    w.start = start;
    vram_status st = vram_replay_open(o, 0, &dev, &w.a);
    if (st == VRAM_OK) {
        st = vram_trace_replay_observed(t, w.a, start, stop, 0, observe, &w, &r);
        observe(&w, stop);
        vram_allocator_destroy(w.a);
        vram_device_close(dev);
    }
    vram_cache_breakdown at_alloc, at_res;
    if (st == VRAM_OK && !w.failed) st = breakdown_at(t, o, start, w.alloc_peak_event + 1, &at_alloc);
    if (st == VRAM_OK && !w.failed) st = breakdown_at(t, o, start, w.reserved_peak_event + 1, &at_res);
    if (st == VRAM_OK && !w.failed && snapshot && snapshot_at(t, o, start, w.alloc_peak_event + 1, snapshot)) {
        free(w.grow_event);
        free(w.grow_bytes);
        return 1;
    }
    double unmoved = 0, stuck = 0, fresh = 0;
    for (size_t i = 0; st == VRAM_OK && !w.failed && i < w.ngrow; i++) {
        vram_cache_breakdown b;
        st = breakdown_at(t, o, start, w.grow_event[i], &b);
        if (st != VRAM_OK) break;
        double g = (double)w.grow_bytes[i], m = (double)b.free_movable, p = (double)(b.free_pinned + b.free_in_page);
        double u = g < m ? g : m, s = g - u < p ? g - u : p;
        unmoved += u;
        stuck += s;
        fresh += g - u - s;
        if (events_mib > 0 && m + p > events_mib * MIB) {
            const vram_trace_event *e = &ev[w.grow_event[i]];
            printf("#   %s event %zu: %s of %.2f MiB mapped %.0f MiB; free before: movable %.0f, pinned %.0f, in-page %.0f "
                   "MiB (reserved %.0f, in use %.0f)\n",
                   name, w.grow_event[i], e->op == VRAM_TRACE_ALLOC ? "request" : "free", (double)e->size / MIB, g / MIB,
                   m / MIB, (double)b.free_pinned / MIB, (double)b.free_in_page / MIB, (double)b.reserved_bytes / MIB,
                   (double)b.held_bytes / MIB);
        }
    }
    free(w.grow_event);
    free(w.grow_bytes);
    if (st != VRAM_OK || w.failed) {
        fprintf(stderr, "bench_placement_waste: %s: %s\n", name, w.failed ? "out of host memory" : vram_last_error());
        return 1;
    }
    printf("| %s | %.3f | %.0f / %.0f |", name, r.reserved_over_requested, (double)w.max_reserved / MIB,
           (double)w.max_allocated / MIB);
    print_free(&at_alloc);
    print_free(&at_res);
    printf(" %.0f / %.0f / %.0f |\n", unmoved / MIB, stuck / MIB, fresh / MIB);
    return 0;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_placement_waste [--device SPEC] [--conf CONF] [--events MIB] [--snapshot FILE] TRACE...\n");
    return 2;
}

int main(int argc, char **argv) {
    vram_replay_options o = {.device = "cudasim"};
    double events_mib = 0;
    const char *snapshot = NULL;
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        if (i + 1 >= argc) return usage();
        char *end;
        if (!strcmp(argv[i], "--device")) o.device = argv[++i];
        else if (!strcmp(argv[i], "--conf")) o.conf = argv[++i];
        else if (!strcmp(argv[i], "--snapshot")) snapshot = argv[++i];
        else if (!strcmp(argv[i], "--events") && (events_mib = strtod(argv[++i], &end)) > 0 && !*end) continue;
        else return usage();
    }
    if (i >= argc) return usage();
    if (snapshot && argc - i != 1) {
        fprintf(stderr, "bench_placement_waste: --snapshot takes one trace\n");
        return 2;
    }
    /* bad input before any figure: every trace loads, the device and configuration open */
    int ntraces = argc - i;
    vram_trace **traces = calloc((size_t)ntraces, sizeof *traces);
    if (!traces) return 1;
    vram_device *dev;
    vram_allocator *probe;
    vram_status st = vram_replay_open(&o, 0, &dev, &probe);
    if (st == VRAM_OK) {
        vram_allocator_destroy(probe);
        vram_device_close(dev);
    }
    for (int k = 0; k < ntraces && st == VRAM_OK; k++) st = vram_trace_load(argv[i + k], &traces[k]);
    int rc = st == VRAM_OK ? 0 : 2;
    if (!rc && snapshot && vram_trace_workloads(traces[0], NULL, 0) > 1) {
        fprintf(stderr, "bench_placement_waste: --snapshot takes a trace of one program\n");
        rc = 2;
    } else
    if (rc) fprintf(stderr, "bench_placement_waste: %s\n", vram_last_error());
    else {
        vram_machine_print(stdout, argc, argv);
        printf("# device %s%s%s; MiB of the large pool. At a peak: free movable / pinned / in-page. Growths: the bytes "
               "reserved memory grew by, unmoved / stuck / new.\n\n",
               o.device, o.conf ? ", conf " : "", o.conf ? o.conf : "");
        printf("| program | reserved / requested | peak reserved / peak allocated | at the allocation peak | "
               "at the reserved peak | growths |\n|---|---|---|---|---|---|\n");
    }
    for (int k = 0; k < ntraces && !rc; k++) {
        vram_trace *t = traces[k];
        size_t n;
        vram_trace_events(t, &n);
        vram_trace_workload wl[64];
        size_t nw = vram_trace_workloads(t, wl, 64);
        const char *path = argv[i + k], *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        if (!nw) rc |= measure(t, base, &o, 0, n, events_mib, snapshot);
        for (size_t w = 0; w < nw && w < 64; w++) {
            char name[256];
            snprintf(name, sizeof name, "%s: %s", base, wl[w].name);
            rc |= measure(t, name, &o, wl[w].start, wl[w].end, events_mib, snapshot);
        }
    }
    for (int k = 0; k < ntraces; k++)
        if (traces[k]) vram_trace_free(traces[k]);
    free(traces);
    return rc;
}
