/* bench.h — the allocator latency microbenchmarks (docs/benchmarks.md §2) and the machine
 * description every benchmark prints.
 *
 *   pair    allocate and free one block of the same size, repeatedly, after a warm-up, for
 *           512 B, 64 KiB, 1 MiB, 16 MiB and 256 MiB: ns per allocate+free pair;
 *   random  1000 slots, 200,000 operations: slot k = next() % 1000 is freed if it holds a
 *           block, else gets a block of size() bytes; next() is xorshift64 seeded with
 *           88172645463325252, size() = (1 << e) + next() % (1 << e) with e = 8 + next() % 19.
 *           ns per operation, and the peak reserved and allocated bytes.
 *
 * The code lives in the library so that `vram bench alloc` and bench/bench_alloc.c measure
 * exactly the same thing.
 */
#ifndef VRAM_BENCH_H
#define VRAM_BENCH_H

#include <stdio.h>
#include <stdlib.h>

#include "vram/vram.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VRAM_BENCH_PAIR_COUNT 5
extern const uint64_t vram_bench_pair_sizes[VRAM_BENCH_PAIR_COUNT];

#define VRAM_BENCH_RANDOM_SLOTS 1000
#define VRAM_BENCH_RANDOM_OPS 200000
#define VRAM_BENCH_SEED 88172645463325252ull

typedef struct vram_bench_alloc_options {
    const char *device; /* device spec; NULL = "sim" (80 GiB) */
    const char *conf;   /* VRAM_ALLOC_CONF applied over the environment's; NULL = none */
    unsigned repeat;    /* runs; each figure is the median over them (0 = 5) */
} vram_bench_alloc_options;

typedef struct vram_bench_alloc_result {
    double pair_ns[VRAM_BENCH_PAIR_COUNT];      /* median ns per allocate+free pair */
    uint64_t pair_iterations[VRAM_BENCH_PAIR_COUNT]; /* timed pairs in one run (last run) */
    double random_ns_per_op;                    /* median */
    /* The fastest run of each: on a shared machine the least disturbed one, which is the
     * better estimate of the code's own cost; the medians are the figures to report. */
    double pair_ns_min[VRAM_BENCH_PAIR_COUNT];
    double random_ns_per_op_min;
    uint64_t random_ops;
    uint64_t random_peak_reserved_bytes;
    uint64_t random_peak_allocated_bytes;
    uint64_t random_peak_requested_bytes;
    unsigned repeat;
    char device_name[96];
} vram_bench_alloc_result;

/* CLOCK_MONOTONIC in ns, around the benchmarks' timed loops (in the library, so that this
 * header compiles under strict -std=c11, where clock_gettime is not declared). */
double vram_bench_now_ns(void);

/* qsort's comparison of doubles, for the benchmarks' medians. */
static inline int vram_bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n), n > 0 (the mean of the middle two for even n); sorts v in place. */
static inline double vram_bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, vram_bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* xorshift64, as docs/benchmarks.md gives it. */
static inline uint64_t vram_bench_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}
/* The random workload's size(): log-uniform from 256 B to 128 MiB. */
static inline uint64_t vram_bench_size(uint64_t *x) {
    uint64_t e = 8 + vram_bench_next(x) % 19;
    return (1ull << e) + vram_bench_next(x) % (1ull << e);
}

/* Runs both benchmarks `repeat` times, each run on a fresh device and allocator. */
vram_status vram_bench_alloc_run(const vram_bench_alloc_options *o, vram_bench_alloc_result *out);

/* Writes the result as one JSON line (pair_ns keyed by size in bytes, random_ns_per_op,
 * random_peak_reserved_bytes, random_peak_allocated_bytes, machine, ...). */
void vram_bench_alloc_write_json(const vram_bench_alloc_result *r, const char *command, FILE *out);
/* Writes the result as a human-readable table. */
void vram_bench_alloc_write_text(const vram_bench_alloc_result *r, const char *command, FILE *out);

/* The machine: CPU model (from /proc/cpuinfo; "unknown" elsewhere) and online cores. */
typedef struct vram_machine_info {
    char cpu[128];
    unsigned cores;
    char os[128];     /* uname: sysname release machine */
    char date[32];    /* UTC, ISO 8601 */
} vram_machine_info;
void vram_machine_info_get(vram_machine_info *m);
/* Writes the header a benchmark starts with: "machine: CPU, N cores, OS", "date:    ..." and
 * "command: argv[0] argv[1] ...", one line each. */
void vram_machine_print(FILE *out, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
