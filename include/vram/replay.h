/* replay.h — running an allocation trace through the allocator, and the smallest device
 * that fits it.
 *
 * vram_trace_replay() feeds the events of a loaded trace (trace.h) to an allocator: an
 * allocation becomes vram_allocator_malloc(size, stream k, VRAM_TAG_OTHER), a free becomes
 * vram_allocator_free. It stops at the first allocation that fails and says which event.
 * The figures of the result come from the allocator's own statistics (stats.h), so they are
 * what vram_memory_summary and the PyTorch plug-in report.
 *
 * vram_replay_fit() binary-searches the device capacity at which the trace runs with no
 * out-of-memory error, each try on a fresh device and allocator.
 */
#ifndef VRAM_REPLAY_H
#define VRAM_REPLAY_H

#include "vram/alloc.h"
#include "vram/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_replay_result {
    uint64_t events; /* events replayed (up to and including a failing one) */
    uint64_t allocs;
    uint64_t empty_allocs; /* of allocs, those of 0 bytes (empty tensors): no memory, as under PyTorch */
    uint64_t frees;
    uint64_t peak_requested_bytes; /* requested_bytes[all].peak */
    uint64_t peak_allocated_bytes; /* allocated_bytes[all].peak */
    uint64_t peak_reserved_bytes;  /* reserved_bytes[all].peak */
    double reserved_over_requested;
    uint64_t device_allocs; /* num_device_alloc: device allocations or page maps */
    uint64_t device_frees;
    uint64_t alloc_retries;
    uint64_t ooms;
    double seconds; /* the replay loop alone (no parsing, no setup) */
    double events_per_second;
    /* Set when an allocation failed: the replay stopped at event failed_event (0-based;
     * source line failed_line) with status failed_status. */
    int failed;
    size_t failed_event;
    uint64_t failed_line;
    vram_status failed_status;
    /* With track_peak: the event after which reserved bytes first reached their highest value
     * in this replay (ties: the earliest), and that value. */
    size_t peak_event;
    uint64_t peak_event_reserved_bytes;
} vram_replay_result;

/* Replays events [0, stop) of `t` through `a` (stop >= the event count replays them all).
 * Allocations still live at the end stay allocated, so their state can be inspected (summary,
 * snapshot); vram_allocator_destroy releases them. Peaks are read from `a`'s statistics, so
 * give a fresh allocator (or reset its peaks) for figures of this trace alone.
 * `track_peak` reads the statistics after every allocation to find res->peak_event (slower;
 * the timing then includes it).
 * Returns VRAM_OK, or the failing allocation's status (VRAM_ERR_OUT_OF_MEMORY when the device
 * or limit cannot hold it; the allocator's vram_allocator_oom_report says why), with `res`
 * filled in either case. */
vram_status vram_trace_replay(const vram_trace *t, vram_allocator *a, size_t stop, int track_peak,
                              vram_replay_result *res);

/* As vram_trace_replay, measuring events [start, stop) as one program of a multi-program trace
 * (vram_trace_workloads): the events before `start` replay first, then the cache is emptied and
 * the peaks reset, as a process running one program after another measures each; the result's
 * figures (events, allocations, peaks, time) are those from `start` on. A failure before
 * `start` is reported as such (res->failed_event < start). */
vram_status vram_trace_replay_range(const vram_trace *t, vram_allocator *a, size_t start, size_t stop,
                                    int track_peak, vram_replay_result *res);

/* Called by vram_trace_replay_observed just before event `event` is replayed: after the device's
 * work step and, at `start`, after the cache was emptied and the peaks reset. */
typedef void (*vram_replay_observer)(void *ctx, size_t event);

/* vram_trace_replay_range with an observer (may be NULL) called before every event, for tools that
 * read the device or the allocator at points of a replay (bench_replay_lag counts mapping calls
 * from a workload's start and over its last 40%). */
vram_status vram_trace_replay_observed(const vram_trace *t, vram_allocator *a, size_t start, size_t stop,
                                       int track_peak, vram_replay_observer observer, void *ctx,
                                       vram_replay_result *res);

/* Where a replay runs. */
typedef struct vram_replay_options {
    const char *device; /* device spec (backend.h); NULL = "sim" */
    uint64_t capacity;  /* bytes; 0 = the device's own. A "sim" or "cudasim" spec that gives no size
                           (vram_device_spec_sized) gets it as its size ("cudasim:lag=9" becomes
                           "cudasim:CAPACITY,lag=9"); any other spec, the allocator is capped to it
                           (vram_allocator_set_limit). */
    const char *conf;   /* VRAM_ALLOC_CONF string applied over the environment's (NULL = none) */
} vram_replay_options;

/* Opens the device and a fresh allocator for `o` with `capacity` (overriding o->capacity when
 * nonzero). Close with vram_allocator_destroy then vram_device_close. */
vram_status vram_replay_open(const vram_replay_options *o, uint64_t capacity, vram_device **dev,
                             vram_allocator **a);

/* Finds the smallest capacity at which the whole trace replays with no allocation failure,
 * to within max(2 MiB, 0.1% of it): *capacity is a capacity that was seen to fit, and every
 * tried capacity below max(2 MiB, 0.1%) of it failed. `tries` (may be NULL) gets the number
 * of replays run. VRAM_ERR_OUT_OF_MEMORY when even the largest capacity tried (32 TiB for
 * sim) does not fit. */
vram_status vram_replay_fit(const vram_trace *t, const vram_replay_options *o, uint64_t *capacity,
                            unsigned *tries);

#ifdef __cplusplus
}
#endif

#endif
