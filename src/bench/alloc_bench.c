/* alloc_bench.c — the allocator latency microbenchmarks of docs/benchmarks.md §2.
 *
 * Both run one thread against a fresh allocator per run, on the device given (the sim device
 * by default, so the figure is the allocator's bookkeeping alone). Timing is
 * clock_gettime(CLOCK_MONOTONIC) around the measured loop only.
 *
 *   pair    for each size: 1000 warm-up pairs (so the cache holds the block), then batches of
 *           4096 pairs until at least 25 ms have passed; ns/pair = elapsed / pairs.
 *   random  the exact stream of docs/benchmarks.md (xorshift64 from 88172645463325252; a draw
 *           picks the slot, and for an empty slot size() draws two more), 200,000 operations
 *           over 1000 slots. The blocks still live afterwards are freed outside the timing.
 *
 * With repeat N every figure is the median of N runs (the upper median for even N).
 */
#include "vram/bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vram/alloc.h"

const uint64_t vram_bench_pair_sizes[VRAM_BENCH_PAIR_COUNT] = {512, 65536, 1048576, 16777216, 268435456};

#define PAIR_WARMUP 1000
#define PAIR_BATCH 4096
#define PAIR_MIN_SECONDS 0.025

double vram_bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double now_seconds(void) { return vram_bench_now_ns() * 1e-9; }

static vram_status open_allocator(const vram_bench_alloc_options *o, vram_device **dev, vram_allocator **a) {
    vram_alloc_config cfg;
    vram_status st = vram_alloc_config_from_env(&cfg);
    if (st != VRAM_OK) return st;
    if (o->conf && (st = vram_alloc_config_parse(o->conf, &cfg)) != VRAM_OK) return st;
    if ((st = vram_device_open(o->device ? o->device : "sim", dev)) != VRAM_OK) return st;
    if ((st = vram_allocator_new(*dev, &cfg, a)) != VRAM_OK) {
        vram_device_close(*dev);
        return st;
    }
    return VRAM_OK;
}

static vram_status pair_run(vram_allocator *a, uint64_t size, double *ns, uint64_t *iters) {
    void *p;
    vram_status st;
    for (int i = 0; i < PAIR_WARMUP; i++) {
        if ((st = vram_allocator_malloc(a, (size_t)size, 0, VRAM_TAG_OTHER, &p)) != VRAM_OK) return st;
        if ((st = vram_allocator_free(a, p)) != VRAM_OK) return st;
    }
    uint64_t n = 0;
    double t0 = now_seconds(), elapsed;
    do {
        for (int i = 0; i < PAIR_BATCH; i++) {
            st = vram_allocator_malloc(a, (size_t)size, 0, VRAM_TAG_OTHER, &p);
            if (st != VRAM_OK) return st;
            st = vram_allocator_free(a, p);
            if (st != VRAM_OK) return st;
        }
        n += PAIR_BATCH;
        elapsed = now_seconds() - t0;
    } while (elapsed < PAIR_MIN_SECONDS);
    *ns = elapsed * 1e9 / (double)n;
    *iters = n;
    return VRAM_OK;
}

static vram_status random_run(vram_allocator *a, double *ns_per_op, vram_bench_alloc_result *out) {
    void *slots[VRAM_BENCH_RANDOM_SLOTS] = {0};
    uint64_t x = VRAM_BENCH_SEED;
    vram_status st = VRAM_OK;
    double t0 = now_seconds();
    for (int i = 0; i < VRAM_BENCH_RANDOM_OPS; i++) {
        uint64_t k = vram_bench_next(&x) % VRAM_BENCH_RANDOM_SLOTS;
        if (slots[k]) {
            st = vram_allocator_free(a, slots[k]);
            slots[k] = NULL;
        } else {
            st = vram_allocator_malloc(a, (size_t)vram_bench_size(&x), 0, VRAM_TAG_OTHER, &slots[k]);
        }
        if (st != VRAM_OK) break;
    }
    double elapsed = now_seconds() - t0;
    if (st != VRAM_OK) {
        char detail[4096]; /* the whole out-of-memory report, kept across the frees below */
        snprintf(detail, sizeof detail, "%s", vram_last_error());
        for (int k = 0; k < VRAM_BENCH_RANDOM_SLOTS; k++)
            if (slots[k]) vram_allocator_free(a, slots[k]);
        return vram_error(st, "bench random: %s", detail);
    }
    for (int k = 0; k < VRAM_BENCH_RANDOM_SLOTS; k++) {
        if (slots[k] && (st = vram_allocator_free(a, slots[k])) != VRAM_OK) return st;
    }
    *ns_per_op = elapsed * 1e9 / VRAM_BENCH_RANDOM_OPS;
    vram_stats s;
    vram_allocator_get_stats(a, &s);
    out->random_peak_reserved_bytes = (uint64_t)s.reserved_bytes[VRAM_POOL_ALL].peak;
    out->random_peak_allocated_bytes = (uint64_t)s.allocated_bytes[VRAM_POOL_ALL].peak;
    out->random_peak_requested_bytes = (uint64_t)s.requested_bytes[VRAM_POOL_ALL].peak;
    return VRAM_OK;
}

static double median(double *v, unsigned n) {
    qsort(v, n, sizeof *v, vram_bench_cmp_double);
    return v[n / 2];
}

vram_status vram_bench_alloc_run(const vram_bench_alloc_options *o, vram_bench_alloc_result *out) {
    static const vram_bench_alloc_options defaults = {0};
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "bench: null argument");
    if (!o) o = &defaults;
    unsigned repeat = o->repeat ? o->repeat : 5;
    if (repeat > 1000) return vram_error(VRAM_ERR_INVALID_ARG, "bench: repeat %u is above 1000", repeat);
    memset(out, 0, sizeof *out);
    out->repeat = repeat;
    out->random_ops = VRAM_BENCH_RANDOM_OPS;
    double *pair = calloc((size_t)repeat * VRAM_BENCH_PAIR_COUNT, sizeof *pair);
    double *rnd = calloc(repeat, sizeof *rnd);
    if (!pair || !rnd) {
        free(pair);
        free(rnd);
        return vram_error(VRAM_ERR_HOST_MEMORY, "bench: host out of memory");
    }
    vram_status st = VRAM_OK;
    for (unsigned r = 0; r < repeat && st == VRAM_OK; r++) {
        vram_device *dev;
        vram_allocator *a;
        if ((st = open_allocator(o, &dev, &a)) != VRAM_OK) break;
        snprintf(out->device_name, sizeof out->device_name, "%s", dev->name);
        for (int s = 0; s < VRAM_BENCH_PAIR_COUNT && st == VRAM_OK; s++) {
            st = pair_run(a, vram_bench_pair_sizes[s], &pair[s * repeat + r], &out->pair_iterations[s]);
            if (st != VRAM_OK) {
                st = vram_error(st, "bench pair %llu bytes: %s", (unsigned long long)vram_bench_pair_sizes[s],
                                vram_last_error());
            }
        }
        vram_allocator_destroy(a);
        vram_device_close(dev);
        if (st != VRAM_OK) break;
        /* A fresh allocator, so the random workload's peaks are its own. */
        if ((st = open_allocator(o, &dev, &a)) != VRAM_OK) break;
        st = random_run(a, &rnd[r], out);
        vram_allocator_destroy(a);
        vram_device_close(dev);
    }
    if (st == VRAM_OK) {
        for (int s = 0; s < VRAM_BENCH_PAIR_COUNT; s++) {
            out->pair_ns[s] = median(&pair[s * repeat], repeat); /* sorts the runs */
            out->pair_ns_min[s] = pair[s * repeat];
        }
        out->random_ns_per_op = median(rnd, repeat);
        out->random_ns_per_op_min = rnd[0];
    }
    free(pair);
    free(rnd);
    return st;
}

void vram_bench_alloc_write_json(const vram_bench_alloc_result *r, const char *command, FILE *out) {
    vram_machine_info m;
    vram_machine_info_get(&m);
    fputs("{\"benchmark\": \"alloc\", \"pair_ns\": {", out);
    for (int s = 0; s < VRAM_BENCH_PAIR_COUNT; s++)
        fprintf(out, "%s\"%llu\": %.2f", s ? ", " : "", (unsigned long long)vram_bench_pair_sizes[s], r->pair_ns[s]);
    fputs("}, \"pair_ns_min\": {", out);
    for (int s = 0; s < VRAM_BENCH_PAIR_COUNT; s++)
        fprintf(out, "%s\"%llu\": %.2f", s ? ", " : "", (unsigned long long)vram_bench_pair_sizes[s], r->pair_ns_min[s]);
    fprintf(out, "}, \"random_ns_per_op_min\": %.2f", r->random_ns_per_op_min);
    fprintf(out, ", \"random_ns_per_op\": %.2f, \"random_ops\": %llu, \"random_peak_reserved_bytes\": %llu, "
                 "\"random_peak_allocated_bytes\": %llu, \"random_peak_requested_bytes\": %llu, \"repeat\": %u, "
                 "\"statistic\": \"median\", \"device\": ",
            r->random_ns_per_op, (unsigned long long)r->random_ops, (unsigned long long)r->random_peak_reserved_bytes,
            (unsigned long long)r->random_peak_allocated_bytes, (unsigned long long)r->random_peak_requested_bytes,
            r->repeat);
    vram_json_write_string(out, r->device_name, SIZE_MAX);
    fputs(", \"machine\": {\"cpu\": ", out);
    vram_json_write_string(out, m.cpu, SIZE_MAX);
    fprintf(out, ", \"cores\": %u, \"os\": ", m.cores);
    vram_json_write_string(out, m.os, SIZE_MAX);
    fputs(", \"date\": ", out);
    vram_json_write_string(out, m.date, SIZE_MAX);
    fputs("}, \"command\": ", out);
    vram_json_write_string(out, command ? command : "", SIZE_MAX);
    fputs("}\n", out);
}

void vram_bench_alloc_write_text(const vram_bench_alloc_result *r, const char *command, FILE *out) {
    vram_machine_info m;
    vram_machine_info_get(&m);
    fprintf(out, "machine: %s, %u cores, %s\n", m.cpu, m.cores, m.os);
    fprintf(out, "date:    %s\n", m.date);
    if (command) fprintf(out, "command: %s\n", command);
    fprintf(out, "device:  %s; one thread; median of %u runs\n\n", r->device_name, r->repeat);
    fprintf(out, "pair (allocate + free of one block, after a warm-up)\n");
    fprintf(out, "  %12s  %10s  %10s\n", "size", "ns/pair", "(fastest)");
    for (int s = 0; s < VRAM_BENCH_PAIR_COUNT; s++) {
        char sz[32];
        fprintf(out, "  %12s  %10.1f  %10.1f\n", vram_format_size(vram_bench_pair_sizes[s], sz, sizeof sz), r->pair_ns[s],
                r->pair_ns_min[s]);
    }
    char res[32], al[32], rq[32];
    fprintf(out, "\nrandom live set (%d slots, %llu operations)\n", VRAM_BENCH_RANDOM_SLOTS,
            (unsigned long long)r->random_ops);
    fprintf(out, "  ns/op                %10.1f  (fastest run %.1f)\n", r->random_ns_per_op, r->random_ns_per_op_min);
    fprintf(out, "  peak reserved        %s (%llu bytes)\n",
            vram_format_size(r->random_peak_reserved_bytes, res, sizeof res),
            (unsigned long long)r->random_peak_reserved_bytes);
    fprintf(out, "  peak allocated       %s (%llu bytes)\n",
            vram_format_size(r->random_peak_allocated_bytes, al, sizeof al),
            (unsigned long long)r->random_peak_allocated_bytes);
    fprintf(out, "  peak requested       %s (%llu bytes)\n",
            vram_format_size(r->random_peak_requested_bytes, rq, sizeof rq),
            (unsigned long long)r->random_peak_requested_bytes);
    if (r->random_peak_allocated_bytes)
        fprintf(out, "  reserved/allocated   %10.3f\n",
                (double)r->random_peak_reserved_bytes / (double)r->random_peak_allocated_bytes);
}
