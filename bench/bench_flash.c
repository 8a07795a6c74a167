/* bench_flash.c — flash attention on the GPU (vram_causal_attention_qkv with 16-bit qkv and
 * head size 64): milliseconds of its forward and of its backward, in each backward variant
 * (VRAM_FLASH_BWD=fused, the one-pass default; fused3, the same held to three blocks an SM;
 * split, the two-kernel one; fused128, fused128p and split128, over 128-key blocks) and forward
 * form (VRAM_FLASH_FWD=rows16, the default; rows32), and of cuDNN's fused attention
 * (VRAM_ATTENTION=cudnn; its row says where cuDNN did not run and why), at GPT-2's layer shape
 * by default.
 *
 * Each round times one forward (no graph recorded) and one backward (from a recorded forward,
 * from a fixed output gradient) between device syncs, the variants alternating round by round
 * so that a slow spell hits both; the medians are printed with TFLOP/s of the causal products
 * (forward 2 of them, backward 5, half of each T x T product under the mask). Exit status 1
 * where there is no GPU or a run failed, 2 for a bad flag.
 *   bench_flash [--batch 8] [--seq 1024] [--heads 12] [--dtype bf16|f16] [--rounds 20]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runtime/cuda_rt.h" /* vram_cudnn_attention_calls, vram_cudnn_why */
#include "vram/alloc.h"
#include "vram/autograd.h"
#include "vram/bench.h"
#include "vram/ops.h"

typedef struct opts {
    int64_t B, T, H;
    int rounds;
    vram_dtype dt;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.B = 8, .T = 1024, .H = 12, .rounds = 20, .dt = VRAM_DTYPE_BF16};
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n = v ? atoll(v) : 0;
        if (!v) goto bad;
        if (!strcmp(f, "--batch") && n > 0) o->B = n;
        else if (!strcmp(f, "--seq") && n > 0) o->T = n;
        else if (!strcmp(f, "--heads") && n > 0) o->H = n;
        else if (!strcmp(f, "--rounds") && n > 0 && n <= 10000) o->rounds = (int)n;
        else if (!strcmp(f, "--dtype") && (!strcmp(v, "bf16") || !strcmp(v, "f16")))
            o->dt = !strcmp(v, "bf16") ? VRAM_DTYPE_BF16 : VRAM_DTYPE_F16;
        else goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "usage: bench_flash [--batch N] [--seq N] [--heads N] [--dtype bf16|f16] [--rounds N]\n");
    return 1;
}

/* A [d0, d1, d2] tensor of dtype dt with values uniform in [-amp, amp]. */
static vram_status random_tensor(vram_runtime *rt, vram_dtype dt, int64_t d0, int64_t d1, int64_t d2, double amp,
                                 vram_tensor **out) {
    int64_t shape[3] = {d0, d1, d2}, n = d0 * d1 * d2;
    vram_tensor *f = NULL;
    float *h = malloc(sizeof *h * (size_t)n);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; h && i < n; i++) h[i] = (float)(amp * (2.0 * (double)(vram_bench_next(&x) >> 11) * 0x1.0p-53 - 1));
    vram_status s = h ? vram_tensor_new(rt, VRAM_DTYPE_F32, 3, shape, VRAM_TAG_TEMPORARY, &f) : VRAM_ERR_HOST_MEMORY;
    if (s == VRAM_OK) vram_tensor_write_host(f, h);
    if (s == VRAM_OK) s = vram_tensor_new(rt, dt, 3, shape, VRAM_TAG_TEMPORARY, out);
    if (s == VRAM_OK) s = vram_tensor_copy(*out, f);
    vram_tensor_free(f);
    free(h);
    return s;
}

/* One round: forward alone on x (16-bit, no graph), then a recorded forward of leaf's 16-bit
 * cast (gradients live in f32 only) and its backward; milliseconds of each. The backward also
 * widens the cast's gradient to the f32 leaf, one pass over qkv's gradient. */
static vram_status round_once(vram_runtime *rt, vram_tensor *x, vram_tensor *leaf, vram_tensor *g, int64_t H,
                              double *fwd, double *bwd) {
    vram_tensor *y = NULL, *xc = NULL, *y2 = NULL;
    vram_status s = vram_runtime_sync(rt);
    double t0 = vram_bench_now_ns();
    if (s == VRAM_OK) s = vram_causal_attention_qkv(x, H, &y);
    if (s == VRAM_OK) s = vram_runtime_sync(rt);
    double t1 = vram_bench_now_ns();
    vram_tensor_free(y);
    if (s == VRAM_OK) s = vram_to_dtype(leaf, vram_tensor_dtype(x), &xc);
    if (s == VRAM_OK) s = vram_causal_attention_qkv(xc, H, &y2);
    if (s == VRAM_OK) s = vram_runtime_sync(rt);
    double t2 = vram_bench_now_ns(); /* the backward alone: attention's, then the cast's (small) */
    if (s == VRAM_OK) s = vram_backward(y2, g);
    if (s == VRAM_OK) s = vram_runtime_sync(rt);
    double t3 = vram_bench_now_ns();
    vram_tensor_free(y2);
    vram_tensor_free(xc);
    vram_tensor_zero_grad(leaf, 1);
    *fwd = (t1 - t0) / 1e6, *bwd = (t3 - t2) / 1e6;
    return s;
}

int main(int argc, char **argv) {
    opts o;
    if (parse(argc, argv, &o)) return 2;
    vram_machine_print(stdout, argc, argv);
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_tensor *x = NULL, *leaf = NULL, *g = NULL;
    vram_status s = vram_device_open("cuda", &dev);
    if (s == VRAM_OK) s = vram_allocator_new(dev, NULL, &a);
    if (s == VRAM_OK) s = vram_runtime_new(a, 1, &rt);
    if (s == VRAM_OK) s = random_tensor(rt, o.dt, o.B, o.T, 3 * o.H * 64, 2.0, &x);
    if (s == VRAM_OK) s = random_tensor(rt, VRAM_DTYPE_F32, o.B, o.T, 3 * o.H * 64, 2.0, &leaf);
    if (s == VRAM_OK) s = vram_tensor_set_requires_grad(leaf, 1);
    if (s == VRAM_OK) s = random_tensor(rt, o.dt, o.B, o.T, o.H * 64, 1.0, &g);
    enum { NV = 8 }; /* cudnn last */
    const char *fwd[NV] = {"rows16", "rows16", "rows16", "rows16", "rows16", "rows16", "rows32", "rows16"};
    const char *bwd[NV] = {"fused", "fused3", "split", "fused128", "fused128p", "split128", "fused", "fused"};
    const char *path[NV] = {"flash", "flash", "flash", "flash", "flash", "flash", "flash", "cudnn"};
    int64_t cudnn_calls = 0; /* the cudnn row's calls that cuDNN ran (3 a round: two forwards, a backward) */
    double *ms[NV][2] = {{0}};
    for (int v = 0; v < NV; v++)
        for (int k = 0; k < 2; k++) ms[v][k] = calloc((size_t)o.rounds, sizeof(double));
    for (int r = -2; r < o.rounds && s == VRAM_OK; r++) /* two rounds of warm-up */
        for (int v = 0; v < NV && s == VRAM_OK; v++) {
            double f, b;
            setenv("VRAM_FLASH_FWD", fwd[v], 1);
            setenv("VRAM_FLASH_BWD", bwd[v], 1);
            setenv("VRAM_ATTENTION", path[v], 1);
            int64_t c0 = vram_cudnn_attention_calls;
            s = round_once(rt, x, leaf, g, o.H, &f, &b);
            if (r >= 0 && v == NV - 1) cudnn_calls += vram_cudnn_attention_calls - c0;
            if (r >= 0) ms[v][0][r] = f, ms[v][1][r] = b;
        }
    if (s != VRAM_OK) {
        fprintf(stderr, "bench_flash: %s (%s)\n", vram_status_str(s), vram_last_error());
    } else {
        /* causal: half of each of the 2 (forward) or 5 (backward) B*H products of T x T x 64 */
        double flop = 2.0 * (double)(o.B * o.H) * (double)o.T * (double)o.T * 64 / 2;
        printf("flash attention B=%lld T=%lld H=%lld head size 64, %s, %d rounds (medians)\n\n", (long long)o.B,
               (long long)o.T, (long long)o.H, vram_dtype_name(o.dt), o.rounds);
        printf("| VRAM_ATTENTION | VRAM_FLASH_FWD | VRAM_FLASH_BWD | forward ms | backward ms | forward TFLOP/s | "
               "backward TFLOP/s |\n|---|---|---|---|---|---|---|\n");
        for (int v = 0; v < NV; v++) {
            double f = vram_bench_median(ms[v][0], o.rounds), b = vram_bench_median(ms[v][1], o.rounds);
            int dnn = !strcmp(path[v], "cudnn");
            printf("| %s | %s | %s | %.3f | %.3f | %.0f | %.0f |\n", path[v], dnn ? "-" : fwd[v], dnn ? "-" : bwd[v], f, b,
                   2 * flop / f / 1e9, 5 * flop / b / 1e9);
        }
        if (cudnn_calls != 3 * (int64_t)o.rounds)
            printf("\nthe cudnn row is NOT cuDNN's: %lld of its %d calls ran on cuDNN, the rest on the flash kernels (%s)\n",
                   (long long)cudnn_calls, 3 * o.rounds, vram_cudnn_why());
    }
    for (int v = 0; v < NV; v++) free(ms[v][0]), free(ms[v][1]);
    vram_tensor_free(g);
    vram_tensor_free(leaf);
    vram_tensor_free(x);
    vram_runtime_free(rt);
    if (a) vram_allocator_destroy(a);
    if (dev) vram_device_close(dev);
    return s == VRAM_OK ? 0 : 1;
}
