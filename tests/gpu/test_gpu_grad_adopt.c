/* test_gpu_grad_adopt.c — VRAM_GRAD_ADOPT=1 (opt-in) on the GPU: the gradients a GPT's backward
 * gives with it on are those with it off, and those of f32 on the CPU.
 *
 * One forward and backward of a small tied GPT in bf16 with kept weights (width 256: the layer
 * norms' one-warp-a-row paths; head size 64: flash attention), on both layer-norm backward paths
 * (VRAM_LN_KERNEL old: the pair of kernels; fused: the one-pass kernel) and both residual streams
 * (16-bit; f32: the mixed kernels, whose input gradient is f32), each run three times from the
 * same weights: f32 on the CPU, the GPU with the switch off, the GPU with it on. With it on: the
 * same loss as off, bit for bit (forward does not change); every parameter's gradient the same as
 * off up to the order of atomic adds (the layer norms' input gradients are added in place into the
 * residual stream's, rounded as the separate accumulate rounded them); every gradient against the
 * CPU's within test_gpu_ops' bound for a bf16 GPT; and at least two device copies fewer a block
 * (the stream's gradient that each add handed to both inputs). Skipped (77) without a GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/runtime/cuda_rt.h"
#include "../check.h"
#include "runtime_sides.h"
#include "vram/nn.h"

static side cpu, gpu;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static int64_t irand(int64_t lo, int64_t hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)((double)(rng >> 11) * 0x1.0p-53 * (double)(hi - lo + 1));
}

static double *to_host(vram_tensor *t) {
    int64_t n = vram_tensor_numel(t);
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    CHECK(v != NULL, "out of host memory");
    if (v) CHECK_OK(vram_tensor_to_f64(t, v));
    return v;
}

/* The relative L2 error of b against a within tol (both present, the same size, no NaN). */
static void compare(const char *what, vram_tensor *a, vram_tensor *b, double tol) {
    CHECK(a && b, "%s: a gradient is missing (%p, %p)", what, (void *)a, (void *)b);
    if (!a || !b) return;
    int64_t n = vram_tensor_numel(a);
    CHECK(n == vram_tensor_numel(b), "%s: sizes differ", what);
    double *x = to_host(a), *y = to_host(b), num = 0, den = 0;
    int nan = 0;
    for (int64_t i = 0; x && y && n == vram_tensor_numel(b) && i < n; i++) {
        nan |= !isfinite(x[i]) || !isfinite(y[i]);
        num += (x[i] - y[i]) * (x[i] - y[i]);
        den += x[i] * x[i];
    }
    double rel = sqrt(num) / (sqrt(den) + 1e-30);
    CHECK(!nan && rel <= tol, "%s: relative error %.3g (tolerance %.1g)%s", what, rel, tol, nan ? ", not finite" : "");
    free(x);
    free(y);
}

static void run(const char *kernel, int resid) {
    enum { B = 2, T = 64, V = 300, LAYERS = 2 };
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)irand(0, V - 1), targets[i] = (int32_t)irand(0, V - 1);
    const char *stream = resid ? "f32" : "16-bit";
    setenv("VRAM_LN_KERNEL", kernel, 1);
    vram_gpt *g[3] = { NULL, NULL, NULL }; /* the CPU in f32, the GPU with the switch off, on */
    vram_tensor *loss[3] = { NULL, NULL, NULL };
    int64_t copies[3] = { 0, 0, 0 };
    for (int k = 0; k < 3; k++) {
        side *sd = k ? &gpu : &cpu;
        setenv("VRAM_GRAD_ADOPT", k == 1 ? "0" : "1", 1);
        vram_gpt_config cfg = { .layers = LAYERS,
                                .heads = 4,
                                .width = 256,
                                .vocab = V,
                                .context = T,
                                .tied = 1,
                                .init_std = 0.02,
                                .precision = k ? VRAM_DTYPE_BF16 : VRAM_DTYPE_F32,
                                .keep_lowp_weights = k != 0,
                                .residual_f32 = k ? resid : 0 };
        vram_runtime_seed(sd->rt, 4321);
        CHECK_OK(vram_gpt_new(sd->rt, &cfg, &g[k]));
        vram_tensor *ti = NULL, *tt = NULL;
        CHECK_OK(vram_tensor_from_data(sd->rt, VRAM_DTYPE_I32, 2, (int64_t[]){ B, T }, VRAM_TAG_OTHER, ids, &ti));
        CHECK_OK(vram_tensor_from_data(sd->rt, VRAM_DTYPE_I32, 2, (int64_t[]){ B, T }, VRAM_TAG_OTHER, targets, &tt));
        int64_t c0 = vram_cuda_copies;
        vram_status s = g[k] && ti && tt ? vram_gpt_forward(g[k], ti, tt, 1, NULL, &loss[k]) : VRAM_ERR_STATE;
        CHECK(s == VRAM_OK, "%s kernels, residual %s, run %d: %s", kernel, stream, k, vram_last_error());
        if (s == VRAM_OK) CHECK_OK(vram_backward(loss[k], NULL));
        copies[k] = vram_cuda_copies - c0;
        vram_tensor_free(ti);
        vram_tensor_free(tt);
    }
    unsetenv("VRAM_GRAD_ADOPT");
    if (loss[0] && loss[1] && loss[2]) {
        double *l1 = to_host(loss[1]), *l2 = to_host(loss[2]);
        if (l1 && l2)
            CHECK(l1[0] == l2[0], "%s kernels, residual %s: loss %.9g on, %.9g off", kernel, stream, l2[0], l1[0]);
        free(l1);
        free(l2);
        vram_param_list *pl[3] = { vram_gpt_params(g[0]), vram_gpt_params(g[1]), vram_gpt_params(g[2]) };
        for (int i = 0; i < vram_param_list_count(pl[0]); i++) {
            char what[200];
            const char *name = vram_param_list_name(pl[0], i);
            snprintf(what, sizeof what, "%s kernels, residual %s: gradient of %s, on against off", kernel, stream,
                     name);
            compare(what, vram_tensor_grad(vram_param_list_get(pl[1], i)),
                    vram_tensor_grad(vram_param_list_get(pl[2], i)), 1e-3);
            snprintf(what, sizeof what, "%s kernels, residual %s: gradient of %s, on against the CPU", kernel, stream,
                     name);
            compare(what, vram_tensor_grad(vram_param_list_get(pl[0], i)),
                    vram_tensor_grad(vram_param_list_get(pl[2], i)), 5e-2);
        }
        CHECK(copies[1] - copies[2] >= 2 * LAYERS, "%s kernels, residual %s: %lld device copies on, %lld off", kernel,
              stream, (long long)copies[2], (long long)copies[1]);
        printf("%s layer-norm kernels, residual %s: %lld device copies in forward and backward, %lld with "
               "VRAM_GRAD_ADOPT=0\n",
               kernel, stream, (long long)copies[2], (long long)copies[1]);
    }
    for (int k = 0; k < 3; k++) {
        vram_tensor_free(loss[k]);
        vram_gpt_free(g[k]);
    }
    unsetenv("VRAM_LN_KERNEL");
}

int main(void) {
    if (vram_device_open("cuda", &gpu.dev) != VRAM_OK) check_skip(vram_last_error());
    vram_device_close(gpu.dev);
    gpu.dev = NULL;
    if (!open_side(&cpu, "host") || !open_side(&gpu, "cuda")) return check_done();
    for (int resid = 0; resid < 2; resid++) {
        run("old", resid);
        run("fused", resid);
    }
    close_side(&gpu);
    close_side(&cpu);
    return check_done();
}
