/* bench_classifier.c — the fused classifier's cross-entropy kernel on the GPU: one chunk of
 * logits rows as ops_classifier.c hands it over (GPT-2's 1334 rows of 50304 padded bf16
 * columns, 50257 classes, by default), through the kernel slot with the register kernel
 * (vk_cross_entropy_rows, VRAM_CE_KERNEL=rows, the default) and with the old two-read kernel
 * (VRAM_CE_KERNEL=old), in one run.
 *
 * Each round copies the same random logits into the work buffer (untimed), then times one
 * launch between CUDA events; the two kernels alternate round by round so that a slow spell
 * hits both. Printed: the medians in ms, and GB/s counting one read and one write of the
 * logits (the least traffic the op needs), so the kernel that reads each row once shows the
 * higher figure for the same time. Exit status 1 where there is no GPU, a run failed or the
 * kernels' losses disagree, 2 for a bad flag.
 *   bench_classifier [--rows 1334] [--vocab 50257] [--dtype bf16|f16] [--rounds 50]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runtime/cuda_rt.h" /* vram_cuda_kernels, the timer, vram_cuda_ce_row_launches */
#include "vram/alloc.h"
#include "vram/bench.h"

typedef struct opts {
    int64_t rows, vocab;
    int rounds;
    vram_dtype dt;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){ .rows = 1334, .vocab = 50257, .rounds = 50, .dt = VRAM_DTYPE_BF16 };
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n = v ? atoll(v) : 0;
        if (!v) goto bad;
        if (!strcmp(f, "--rows") && n > 0 && n <= (1 << 20))
            o->rows = n;
        else if (!strcmp(f, "--vocab") && n > 0 && n <= (1 << 24))
            o->vocab = n;
        else if (!strcmp(f, "--rounds") && n > 0 && n <= 10000)
            o->rounds = (int)n;
        else if (!strcmp(f, "--dtype") && (!strcmp(v, "bf16") || !strcmp(v, "f16")))
            o->dt = !strcmp(v, "bf16") ? VRAM_DTYPE_BF16 : VRAM_DTYPE_F16;
        else
            goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "usage: bench_classifier [--rows N] [--vocab N] [--dtype bf16|f16] [--rounds N]\n");
    return 1;
}

/* logits [rows, ld] uniform in [-4, 4] (through f32) and targets below vocab. */
static vram_status inputs(vram_runtime *rt, const opts *o, int64_t ld, vram_tensor **logits, vram_tensor **targets) {
    int64_t shape[2] = { o->rows, ld }, n = o->rows * ld;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    float *h = malloc(sizeof *h * (size_t)n);
    int32_t *t = malloc(sizeof *t * (size_t)o->rows);
    vram_tensor *f = NULL;
    vram_status s =
        h && t ? vram_tensor_new(rt, VRAM_DTYPE_F32, 2, shape, VRAM_TAG_TEMPORARY, &f) : VRAM_ERR_HOST_MEMORY;
    for (int64_t i = 0; s == VRAM_OK && i < n; i++)
        h[i] = (float)(8.0 * (double)(vram_bench_next(&x) >> 11) * 0x1.0p-53 - 4);
    for (int64_t r = 0; s == VRAM_OK && r < o->rows; r++) t[r] = (int32_t)(vram_bench_next(&x) % (uint64_t)o->vocab);
    if (s == VRAM_OK) vram_tensor_write_host(f, h);
    if (s == VRAM_OK) s = vram_tensor_new(rt, o->dt, 2, shape, VRAM_TAG_TEMPORARY, logits);
    if (s == VRAM_OK) s = vram_tensor_copy(*logits, f);
    if (s == VRAM_OK) s = vram_tensor_new(rt, VRAM_DTYPE_I32, 1, &o->rows, VRAM_TAG_TEMPORARY, targets);
    if (s == VRAM_OK) vram_tensor_write_host(*targets, t);
    vram_tensor_free(f);
    free(h);
    free(t);
    return s;
}

int main(int argc, char **argv) {
    opts o;
    if (parse(argc, argv, &o)) return 2;
    vram_machine_print(stdout, argc, argv);
    int64_t ld = vram_mixed_padded_width(o.vocab), one = 1;
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_tensor *src = NULL, *work = NULL, *tg = NULL, *sum = NULL;
    vram_status s = vram_device_open("cuda", &dev);
    if (s == VRAM_OK) s = vram_allocator_new(dev, NULL, &a);
    if (s == VRAM_OK) s = vram_runtime_new(a, 1, &rt);
    if (s == VRAM_OK) s = inputs(rt, &o, ld, &src, &tg);
    if (s == VRAM_OK) s = vram_tensor_empty_like(src, VRAM_TAG_TEMPORARY, &work);
    if (s == VRAM_OK) s = vram_tensor_new(rt, VRAM_DTYPE_F64, 1, &one, VRAM_TAG_TEMPORARY, &sum);
    enum { NV = 2 };
    const char *kernel[NV] = { "rows", "old" };
    double *ms[NV] = { calloc((size_t)o.rounds, sizeof(double)), calloc((size_t)o.rounds, sizeof(double)) },
           loss[NV] = { 0 };
    int64_t launches[NV] = { 0 };
    double scale = 1.0 / (double)o.rows;                /* as the classifier's bf16 forward passes it */
    for (int r = -3; r < o.rounds && s == VRAM_OK; r++) /* three rounds of warm-up */
        for (int v = 0; v < NV && s == VRAM_OK; v++) {
            s = vram_tensor_copy(work, src);
            if (s == VRAM_OK) s = vram_tensor_fill(sum, 0.0);
            if (s == VRAM_OK) s = vram_runtime_sync(rt);
            setenv("VRAM_CE_KERNEL", kernel[v], 1);
            int64_t l0 = vram_cuda_ce_row_launches;
            vram_cuda_timer_start();
            vram_cuda_kernels.cross_entropy_fused(o.dt, o.rows, o.vocab, ld, scale, vram_tensor_data(work),
                                                  vram_tensor_data(tg), VRAM_DTYPE_I32, vram_tensor_data(sum));
            double t = vram_cuda_timer_stop();
            unsetenv("VRAM_CE_KERNEL");
            if (s == VRAM_OK) s = vram_runtime_sync(rt);
            if (s == VRAM_OK && t < 0) s = vram_error(VRAM_ERR_DRIVER, "bench_classifier: the CUDA event timer failed");
            if (s == VRAM_OK && r >= 0) ms[v][r] = t, launches[v] += vram_cuda_ce_row_launches - l0;
            if (s == VRAM_OK) loss[v] = vram_tensor_item(sum) / (double)o.rows;
        }
    int agree = s == VRAM_OK && fabs(loss[0] - loss[1]) <= 1e-5 * fabs(loss[1]);
    if (s != VRAM_OK) {
        fprintf(stderr, "bench_classifier: %s (%s)\n", vram_status_str(s), vram_last_error());
    } else {
        double bytes = 2.0 * (double)(o.rows * ld) * (double)vram_dtype_size(o.dt);
        printf("fused cross-entropy: %lld rows of %lld classes (ld %lld), %s, %d rounds (medians)\n\n",
               (long long)o.rows, (long long)o.vocab, (long long)ld, vram_dtype_name(o.dt), o.rounds);
        printf("| VRAM_CE_KERNEL | kernel | ms | GB/s (one read + one write) | mean loss |\n|---|---|---|---|---|\n");
        for (int v = 0; v < NV; v++) {
            double m = vram_bench_median(ms[v], o.rounds);
            printf("| %s | %s | %.4f | %.0f | %.6f |\n", kernel[v],
                   launches[v] == o.rounds ? "vk_cross_entropy_rows"
                   : launches[v] == 0      ? "vk_cross_entropy_fused"
                                           : "mixed",
                   m, bytes / (m * 1e-3) / 1e9, loss[v]);
        }
        if (!launches[0])
            printf("\nthe rows row did NOT run the register kernel (this width or dtype takes the old one)\n");
        if (!agree) printf("\nthe kernels' losses DISAGREE: %.9g against %.9g\n", loss[0], loss[1]);
    }
    free(ms[0]), free(ms[1]);
    vram_tensor_free(sum);
    vram_tensor_free(tg);
    vram_tensor_free(work);
    vram_tensor_free(src);
    vram_runtime_free(rt);
    if (a) vram_allocator_destroy(a);
    if (dev) vram_device_close(dev);
    return agree ? 0 : 1;
}
