/* bench_lock.c — what the host CPU charges for the allocator's uncontended lock.
 *
 * vram_allocator_malloc and _free each take the allocator's spin lock once (an atomic
 * exchange to acquire, a release store to drop it: allocator_internal.h), so a reuse pair pays
 * for two. This times that acquire+release pair in a loop of 10 million, against a loop of
 * plain volatile load+store, 11 times, and prints the medians, with the machine: run beside
 * `vram bench alloc` it tells how much of the allocator's time on a host is the lock
 * (bench/results/2026-12-02-cuda-latency.md, run 43: 8.9 ns on the H200's host, 2.6 ns on
 * the AMD EPYC build machine).
 *
 *   bench_lock
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vram/bench.h"

enum { N = 10000000, R = 11 };

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

int main(int argc, char **argv) {
    (void)argc;
    static atomic_int lock;
    static volatile int plain;
    double locked[R], plain_ns[R];
    for (int r = 0; r < R; r++) {
        double t0 = now_ns();
        for (int i = 0; i < N; i++) {
            while (atomic_exchange_explicit(&lock, 1, memory_order_acquire)) {
            }
            atomic_store_explicit(&lock, 0, memory_order_release);
        }
        double t1 = now_ns();
        for (int i = 0; i < N; i++) plain = plain + 1;
        double t2 = now_ns();
        locked[r] = (t1 - t0) / N;
        plain_ns[r] = (t2 - t1) / N;
    }
    qsort(locked, R, sizeof *locked, by_value);
    qsort(plain_ns, R, sizeof *plain_ns, by_value);
    vram_machine_info m;
    vram_machine_info_get(&m);
    printf("machine: %s, %u cores, %s\ndate:    %s\ncommand: %s\n", m.cpu, m.cores, m.os, m.date, argv[0]);
    printf("lock acquire+release: %.2f ns; plain load+store: %.2f ns (medians of %d x %d)\n", locked[R / 2],
           plain_ns[R / 2], R, N);
    return 0;
}
