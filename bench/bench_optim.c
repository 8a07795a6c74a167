/* bench_optim.c — the optimizer step's two multi-tensor kernels on the GPU at GPT-2 124M's
 * parameter shapes (148 f32 tensors, 124,439,808 elements, each in its own block as a model's
 * are): the AdamW list update (kernel table's adam_update_list, with a kept bf16 copy of every
 * weight unless --no-lowp) and the gradients' sum of squares (sum_squares, clipping's norm), each
 * in its vector form (VRAM_OPTIM_KERNEL=vec, the default) and its scalar form (=old).
 *
 * Each round times one call of each kernel in each form between GPU events (a call includes its
 * small table upload; the sum of squares also its 8-byte read-back), the forms alternating round
 * by round so that a slow spell hits both. Printed: the machine and command, then per kernel and
 * form the median milliseconds and the effective bandwidth, counting the bytes the update must
 * move (per element: p, g, m, v read, p, m, v written, 30 bytes with the 2-byte copy, 28
 * without; the sum of squares 4 bytes), and the vector form's speedup. Exit status 1 where there
 * is no GPU or a call failed, 2 for a bad flag.
 *   bench_optim [--rounds 30] [--no-lowp]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runtime/cuda_rt.h" /* the kernel table, the GPU timer */
#include "vram/alloc.h"
#include "vram/bench.h"

enum { NT = 148 };

/* GPT-2 124M's parameter sizes in the model's order: token and position embeddings, twelve
 * blocks (layer norm, attention's qkv and projection, layer norm, the MLP's two products, each
 * with its bias), the final layer norm. */
static int gpt2_sizes(int64_t *n) {
    const int64_t C = 768, V = 50257, T = 1024;
    int k = 0;
    n[k++] = V * C, n[k++] = T * C;
    for (int l = 0; l < 12; l++) {
        n[k++] = C, n[k++] = C, n[k++] = C * 3 * C, n[k++] = 3 * C, n[k++] = C * C, n[k++] = C;
        n[k++] = C, n[k++] = C, n[k++] = C * 4 * C, n[k++] = 4 * C, n[k++] = 4 * C * C, n[k++] = C;
    }
    n[k++] = C, n[k++] = C;
    return k;
}

int main(int argc, char **argv) {
    int rounds = 30, lowp = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc && atoi(argv[i + 1]) > 0 && atoi(argv[i + 1]) <= 10000)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-lowp"))
            lowp = 0;
        else {
            fprintf(stderr, "usage: bench_optim [--rounds N] [--no-lowp]\n");
            return 2;
        }
    }
    vram_machine_print(stdout, argc, argv);
    int64_t ns[NT], total = 0;
    int count = gpt2_sizes(ns);
    for (int i = 0; i < count; i++) total += ns[i];
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_tensor *t[5][NT] = {{NULL}}; /* p, g, m, v, the bf16 copy */
    void *ptr[5][NT] = {{NULL}};
    vram_dtype dts[NT];
    vram_status s = vram_device_open("cuda", &dev);
    if (s == VRAM_OK) printf("device:  cuda (%s)\n", dev->name);
    if (s == VRAM_OK) s = vram_allocator_new(dev, NULL, &a);
    if (s == VRAM_OK) s = vram_runtime_new(a, 1, &rt);
    for (int i = 0; i < count && s == VRAM_OK; i++) {
        dts[i] = VRAM_DTYPE_F32;
        for (int k = 0; k < 5 && s == VRAM_OK; k++) {
            if (k == 4 && !lowp) break;
            s = vram_tensor_new(rt, k == 4 ? VRAM_DTYPE_BF16 : VRAM_DTYPE_F32, 1, &ns[i], VRAM_TAG_TEMPORARY, &t[k][i]);
            /* gradients O(1e-2), second moments positive: the update's arithmetic stays finite */
            if (s == VRAM_OK) s = vram_tensor_fill(t[k][i], k == 1 ? 1e-2 : k == 3 ? 1e-4 : 0.5);
            if (s == VRAM_OK) ptr[k][i] = vram_tensor_data(t[k][i]);
        }
    }
    const char *form[2] = {"vec", "old"};
    double *ms[2][2];
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 2; k++) ms[f][k] = calloc((size_t)rounds, sizeof(double));
    for (int r = -3; r < rounds && s == VRAM_OK; r++) /* three rounds of warm-up */
        for (int f = 0; f < 2 && s == VRAM_OK; f++) {
            setenv("VRAM_OPTIM_KERNEL", form[f], 1);
            s = vram_runtime_sync(rt);
            vram_cuda_timer_start();
            rt->k->adam_update_list(VRAM_DTYPE_F32, count, ptr[0], (const void *const *)ptr[1], ptr[2], ptr[3], ns, 6e-4,
                                    0.9, 0.95, 1e-8, 0.1, 1, 10 + r, NULL, lowp ? ptr[4] : NULL, VRAM_DTYPE_BF16, 0.8);
            double ta = vram_cuda_timer_stop();
            if (s == VRAM_OK) s = vram_runtime_sync(rt);
            vram_cuda_timer_start();
            double sq = rt->k->sum_squares(count, dts, ns, (const void *const *)ptr[1]);
            double tq = vram_cuda_timer_stop();
            if (s == VRAM_OK) s = vram_runtime_sync(rt);
            if (s == VRAM_OK && (ta < 0 || tq < 0 || !(sq > 0)))
                s = vram_error(VRAM_ERR_DRIVER, "bench_optim: a timer failed or the sum of squares is %g", sq);
            if (r >= 0) ms[f][0][r] = ta, ms[f][1][r] = tq;
        }
    unsetenv("VRAM_OPTIM_KERNEL");
    if (s != VRAM_OK) {
        fprintf(stderr, "bench_optim: %s (%s)\n", vram_status_str(s), vram_last_error());
    } else {
        double bytes[2] = {(double)total * (lowp ? 30 : 28), (double)total * 4}, med[2][2];
        const char *what[2] = {lowp ? "AdamW list update (bf16 copies)" : "AdamW list update (no copies)",
                               "sum of squares"};
        printf("GPT-2 124M's %d f32 tensors, %lld elements; %d rounds (medians)\n\n", count, (long long)total, rounds);
        printf("| kernel | VRAM_OPTIM_KERNEL | ms | GB/s |\n|---|---|---|---|\n");
        for (int k = 0; k < 2; k++)
            for (int f = 0; f < 2; f++) {
                med[f][k] = vram_bench_median(ms[f][k], rounds);
                printf("| %s | %s | %.3f | %.0f |\n", what[k], form[f], med[f][k], bytes[k] / med[f][k] / 1e6);
            }
        printf("\nvector form's speedup: update %.2fx, sum of squares %.2fx; %.3f ms a step saved\n",
               med[1][0] / med[0][0], med[1][1] / med[0][1], med[1][0] + med[1][1] - med[0][0] - med[0][1]);
    }
    for (int f = 0; f < 2; f++) free(ms[f][0]), free(ms[f][1]);
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < count; i++) vram_tensor_free(t[k][i]);
    vram_runtime_free(rt);
    if (a) vram_allocator_destroy(a);
    if (dev) vram_device_close(dev);
    return s == VRAM_OK ? 0 : 1;
}
