/* bench_replay_lag.c — trace replay as on a GPU whose work lags behind the host.
 *
 * The sim device finishes all work at once, so every freed block is at once free for any use.
 * On a GPU the host runs ahead: a block freed on a stream may still be read by kernels queued
 * before the free, and its pages can move only once an event shows the stream is past them
 * (or, with page aliasing, to a new block of the same stream). This benchmark replays traces,
 * through the replay engine (vram_trace_replay_observed), on the simulated CUDA device whose work
 * completes LAG allocator calls after it was queued (one "kernel" per call: `vram replay --device
 * cudasim:lag=N`, src/backends/sim.c), its mapping calls counted by kind, for several lags and
 * VRAM_ALLOC_CONF strings (by default CUDA's defaults, i.e. chunk_size_mb:64, and the same with
 * the earlier policy of moving pages for any need, busy pages only under the limit), and prints peak
 * reserved over peak requested and the device calls (maps, unmaps, aliases, drops: one chunk
 * each) each needs, in all and in the last 40% of the trace (a training loop's steady state).
 * With --fit it finds instead, for each, the smallest limit on reserved memory (max_reserved) at
 * which the whole trace runs without an out-of-memory error, to 0.2% of the peak requested (what
 * `vram replay --fit` does on the plain sim device, here with the lag), and the device calls
 * made at that limit: what a user whose GPU is just large enough gets, and pays. With --limit F
 * every replay runs under a limit of F times the trace's peak requested (a row says OOM when it
 * does not fit): what a GPU with some room to spare costs in device calls.
 *
 * A trace of several programs run in one process (bench/torch_workloads.py --trace: a
 * "# workload: NAME" line where each begins) is replayed whole, and measured per workload as
 * the workloads were: the cache emptied and the peaks reset where each begins, a row each
 * ("TRACE: NAME"), the device calls counted from its start. What one workload leaves
 * allocated (cuBLAS workspaces) stays where it was placed and shapes the next one's placement.
 * A "# sync: ..." line (the program waited for the GPU there: torch.cuda.synchronize() after each
 * of torch_workloads.py's steps) completes all work queued before it; the lag counts again
 * from there.
 *
 *   bench_replay_lag [--fit | --limit F] [--lags 0,100,1000] [--confs "CONF;CONF..."] TRACE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/replay.h"
#include "counted_device.h"

typedef struct lag_result {
    double ratio;
    uint64_t maps, unmaps, aliases, drops; /* device calls, one physical allocation (chunk) each */
    uint64_t late;                         /* those calls in the last 40% of the trace */
    double driver_ms;                      /* their host time on a busy H200 */
} lag_result;

/* Host time of one mapping call on an H200 while a kernel runs (bench_cuda_pages, 2026-12-02
 * run 8: page_map of one 2 MiB page 283-348 us, page_unmap 103-118, page_alias 38-47,
 * page_drop 49; the driver's cost goes by physical allocations, not bytes). */
static const double MAP_US = 300.0, UNMAP_US = 110.0, ALIAS_US = 45.0, DROP_US = 50.0;

/* The page calls (counted_device.h) that the driver-time estimate prices. */
static uint64_t calls(const counted_device *c) { return c->maps + c->unmaps + c->aliases + c->drops; }

/* What the replay's observer keeps: the counts where the workload starts and where its last 40%
 * starts (bench_replay_lag measures each workload from its start, and its steady state). */
typedef struct lag_marks {
    const counted_device *counts;
    size_t start, late;
    counted_device from;  /* the counts at `start` */
    uint64_t before_late; /* calls() at `late` */
} lag_marks;

static void mark(void *ctx, size_t event) {
    lag_marks *m = ctx;
    if (event == m->start) m->from = *m->counts;
    if (event == m->late) m->before_late = calls(m->counts);
}

/* Replays t at `lag` under `conf` (and, when nonzero, the limit max_reserved) up to ph's end,
 * measuring from its start (there the cache is emptied and the peaks reset, as
 * torch_workloads.py does before each workload), through the replay engine on the simulated CUDA
 * device of `vram replay --device cudasim:lag=N` (src/backends/sim.c), its mapping calls counted.
 * Returns 0, 1 when an allocation failed for lack of memory (out of memory at the limit), -1 on
 * any other failure. */
static int replay(const vram_trace *t, long lag, const char *conf, uint64_t max_reserved, vram_trace_workload ph,
                  lag_result *out) {
    char spec[64], with_limit[1200];
    snprintf(spec, sizeof spec, "cudasim:141GiB,lag=%ld", lag);
    if (max_reserved)
        snprintf(with_limit, sizeof with_limit, "%s%smax_reserved:%llu", conf, *conf ? "," : "",
                 (unsigned long long)max_reserved);
    else
        snprintf(with_limit, sizeof with_limit, "%s", conf);
    vram_replay_options o = {.device = spec, .conf = with_limit};
    vram_device *dev;
    vram_allocator *a;
    if (vram_replay_open(&o, 0, &dev, &a) != VRAM_OK) return -1;
    counted_device c;
    counted_device_attach(&c, dev);
    lag_marks m = {.counts = &c, .start = ph.start, .late = ph.end - (ph.end - ph.start) * 2 / 5};
    vram_replay_result r;
    vram_status st = vram_trace_replay_observed(t, a, ph.start, ph.end, 0, mark, &m, &r);
    int rc = st == VRAM_OK ? 0 : st == VRAM_ERR_OUT_OF_MEMORY && r.failed ? 1 : -1;
    out->ratio = r.reserved_over_requested;
    out->maps = c.maps - m.from.maps;
    out->unmaps = c.unmaps - m.from.unmaps;
    out->aliases = c.aliases - m.from.aliases;
    out->drops = c.drops - m.from.drops;
    out->late = calls(&c) - m.before_late;
    out->driver_ms = (out->maps * MAP_US + out->unmaps * UNMAP_US + out->aliases * ALIAS_US + out->drops * DROP_US) / 1000.0;
    if (vram_allocator_check(a) != VRAM_OK) rc = -1;
    vram_allocator_destroy(a);
    counted_device_detach(&c, dev);
    vram_device_close(dev);
    return rc;
}

/* The smallest max_reserved at which t runs at `lag` under `conf`, to 0.2% of its peak of live
 * bytes (below which nothing fits), with the replay's figures at that limit in *out. Returns 0,
 * or -1 when a replay failed otherwise than by running out of memory, or nothing up to 8x fit. */
static int fit(const vram_trace *t, long lag, const char *conf, uint64_t *capacity, lag_result *out) {
    uint64_t peak = vram_trace_peak_live_bytes(t), lo = peak - 1, hi = 0, step = peak / 500 + 1;
    lag_result r;
    vram_trace_workload all = {NULL, 0, vram_trace_num_events(t)};
    if (!peak) { /* nothing is ever live: any limit fits */
        *capacity = 0;
        return replay(t, lag, conf, 0, all, out) == 0 ? 0 : -1;
    }
    for (uint64_t probe = peak + peak / 50; !hi; probe *= 2) {
        if (probe > 8 * peak) return -1;
        int rc = replay(t, lag, conf, probe, all, &r);
        if (rc < 0) return -1;
        if (rc) lo = probe;
        else hi = probe, *out = r;
    }
    while (hi - lo > step) {
        uint64_t mid = lo + (hi - lo) / 2;
        int rc = replay(t, lag, conf, mid, all, &r);
        if (rc < 0) return -1;
        if (rc) lo = mid;
        else hi = mid, *out = r;
    }
    *capacity = hi;
    return 0;
}

/* Splits `list` at `sep` into at most `max` items (in place); returns the count. */
static int split(char *list, const char *sep, char **items, int max) {
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(list, sep, &save); tok && n < max; tok = strtok_r(NULL, sep, &save))
        items[n++] = tok;
    return n;
}

int main(int argc, char **argv) {
    char lags[256] = "0,100,1000", confs[1024] = "chunk_size_mb:64;chunk_size_mb:64,move_busy_pages:False,reserve_slack:0,move_min_mb:2";
    int first = 1, fit_mode = 0;
    double limit = 0;
    while (first < argc && argv[first][0] == '-') {
        if (!strcmp(argv[first], "--fit")) {
            fit_mode = 1;
            first++;
            continue;
        }
        if (first + 1 >= argc) break;
        if (!strcmp(argv[first], "--limit")) {
            char *end;
            limit = strtod(argv[first + 1], &end);
            if (*end || !(limit >= 1.0 && limit <= 100.0)) {
                fprintf(stderr, "bench_replay_lag: --limit: '%s' is not a factor from 1 to 100\n", argv[first + 1]);
                return 2;
            }
        } else if (!strcmp(argv[first], "--lags")) snprintf(lags, sizeof lags, "%s", argv[first + 1]);
        else if (!strcmp(argv[first], "--confs")) snprintf(confs, sizeof confs, "%s", argv[first + 1]);
        else break;
        first += 2;
    }
    if (first >= argc || argv[first][0] == '-' || (fit_mode && limit)) {
        fprintf(stderr, "usage: bench_replay_lag [--fit | --limit F] [--lags 0,100,1000] [--confs 'CONF;CONF...'] TRACE...\n");
        return 2;
    }
    char *lag_v[32], *conf_v[32];
    int nlags = split(lags, ",", lag_v, 32), nconfs = 0;
    /* configurations are separated by ';' and may be empty (the defaults) */
    for (char *c = confs; nconfs < 32;) {
        conf_v[nconfs++] = c;
        char *semi = strchr(c, ';');
        if (!semi) break;
        *semi = '\0';
        c = semi + 1;
    }
    printf("command:");
    for (int i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n\nDevice calls (each maps, unmaps, aliases or drops one chunk, i.e. one physical allocation); "
           "late: those in the last 40%% of the trace; driver ms: all of them at a busy H200's host time.%s\n\n",
           fit_mode ? " Fit: the smallest limit on reserved memory with no out-of-memory error, over the peak "
                      "requested; the other columns are the replay at that limit."
           : limit ? " Every replay under a limit on reserved memory of the given factor times the peak requested "
                     "(OOM: it ran out)." : "");
    printf("| trace | lag | VRAM_ALLOC_CONF | %s | maps | unmaps | aliases | drops | late | driver ms |\n",
           fit_mode ? "fit / requested" : "reserved / requested");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (int f = first; f < argc; f++) {
        vram_trace *t;
        if (vram_trace_load(argv[f], &t) != VRAM_OK) {
            fprintf(stderr, "bench_replay_lag: %s\n", vram_last_error());
            return 2;
        }
        const char *base = strrchr(argv[f], '/') ? strrchr(argv[f], '/') + 1 : argv[f];
        vram_trace_workload ph[64];
        int nph = (int)vram_trace_workloads(t, ph, 64);
        if (nph > 64) {
            fprintf(stderr, "bench_replay_lag: %s holds %d workloads, more than the 64 this tool replays\n", base, nph);
            vram_trace_free(t);
            return 2;
        }
        if (!nph) ph[nph++] = (vram_trace_workload){NULL, 0, vram_trace_num_events(t)};
        if (nph > 1 && (fit_mode || limit)) {
            fprintf(stderr, "bench_replay_lag: %s holds %d workloads: --fit and --limit take a trace of one\n", base, nph);
            vram_trace_free(t);
            return 2;
        }
        for (int run = 0; run < nph * nlags * nconfs; run++) { /* workloads, then lags, then configurations */
            int k = run / (nlags * nconfs), l = run / nconfs % nlags, c = run % nconfs;
            lag_result r;
            char name[512];
            snprintf(name, sizeof name, "%s%s%s", base, ph[k].name ? ": " : "", ph[k].name ? ph[k].name : "");
            uint64_t capacity = 0, peak = vram_trace_peak_live_bytes(t);
            int rc = fit_mode ? fit(t, atol(lag_v[l]), conf_v[c], &capacity, &r)
                              : replay(t, atol(lag_v[l]), conf_v[c], (uint64_t)(limit * (double)peak), ph[k], &r);
            char label[1100];
            snprintf(label, sizeof label, "%s", *conf_v[c] ? conf_v[c] : "(defaults)");
            if (limit) snprintf(label + strlen(label), sizeof label - strlen(label), ", limit %.2fx", limit);
            if (rc == 1 && limit) {
                printf("| %s | %s | %s | OOM | | | | | | |\n", name, lag_v[l], label);
                continue;
            }
            if (rc != 0) {
                fprintf(stderr, "bench_replay_lag: %s with '%s' failed: %s\n", name, conf_v[c], vram_last_error());
                vram_trace_free(t);
                return 1;
            }
            if (fit_mode) r.ratio = peak ? (double)capacity / (double)peak : 0.0;
            printf("| %s | %s | %s | %.4f | %llu | %llu | %llu | %llu | %llu | %.0f |\n", name, lag_v[l], label,
                   r.ratio, (unsigned long long)r.maps,
                   (unsigned long long)r.unmaps, (unsigned long long)r.aliases, (unsigned long long)r.drops,
                   (unsigned long long)r.late, r.driver_ms);
        }
        vram_trace_free(t);
    }
    return 0;
}
