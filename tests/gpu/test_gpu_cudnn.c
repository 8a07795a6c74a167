/* test_gpu_cudnn.c — VRAM_ATTENTION=cudnn (cuDNN's fused flash attention, cuda_cudnn_attention.c)
 * against the CPU's f32 attention and against the runtime's own flash kernels, in bf16 and f16.
 *
 * Against the CPU: inputs already rounded to the 16-bit type, B from 1 to 4, T from 64 to 1024
 * (and two lengths off the 64-row tiles), H from 2 to 12; the output and the gradients of q, k
 * and v to the flash tests' tolerances. Against the flash kernels at GPT-2's layer shape (B=8,
 * T=1024, H=12): the same tolerances. Where libcudnn is installed, every call at a sequence
 * length that is a multiple of 128 must have run on cuDNN (vram_cudnn_attention_calls counts
 * them; a decline prints the failing step and cuDNN's reason); where it is not, the calls fall
 * back to the flash kernels and only the results are checked. The two paths keep the same row
 * statistics, so a forward on one and a backward on the other are checked too. Last, a value
 * of VRAM_ATTENTION that is neither path fails with a message. Skipped (77) where no GPU or
 * driver exists.
 *   gpu_test_gpu_cudnn [quick]   (quick: without the T=1024 CPU comparisons)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/runtime/cuda_rt.h"
#include "../check.h"
#include "attention_sides.h"

static const char *const parts[3] = {"dQ", "dK", "dV"};
static int cudnn_installed = 1; /* cleared where libcudnn cannot be loaded at all */

/* The calls cuDNN ran since `before` were both of a forward and backward expected on cuDNN. */
static void ran_on_cudnn(int64_t before, int expected, const char *what) {
    int64_t ran = vram_cudnn_attention_calls - before;
    const char *why = vram_cudnn_why();
    if (vram_cudnn_state() < 0 && (strstr(why, "cuDNN not found") || strstr(why, "no cuDNN headers"))) {
        if (cudnn_installed) printf("cuDNN is not installed here (%s): only the fallback's results are checked\n", vram_cudnn_why());
        cudnn_installed = 0;
        return;
    }
    if (expected)
        CHECK(ran == 2, "%s: %lld of the forward and backward ran on cuDNN (expected both): %s", what, (long long)ran,
              vram_cudnn_why());
    printf("%s: %lld of 2 calls on cuDNN%s%s\n", what, (long long)ran, ran < 2 && *vram_cudnn_why() ? ": " : "",
           ran < 2 ? vram_cudnn_why() : "");
}

static void set_path(const char *p) { setenv("VRAM_ATTENTION", p, 1); }
static void to_flash(void) { set_path("flash"); }
static void to_cudnn(void) { set_path("cudnn"); }

/* Compares a GPU run (forward on path fwd, backward on path bwd) with reference results. */
static void compare(const char *what, vram_dtype dt, int64_t B, int64_t T, int64_t H, const double *qkv, const double *g,
                    const double *ref_out, const double *ref_grad, const char *fwd, const char *bwd) {
    int64_t C = H * 64, nq = B * T * 3 * C, no = B * T * C, diff;
    double *out = malloc(sizeof(double) * (size_t)no), *grad = malloc(sizeof(double) * (size_t)nq);
    /* bf16 keeps 8 significant bits, f16 11: tolerances a few units of each's rounding */
    double tol_out = dt == VRAM_DTYPE_BF16 ? 1.5e-2 : 3e-3, tol_grad = dt == VRAM_DTYPE_BF16 ? 3e-2 : 8e-3;
    char name[160];
    snprintf(name, sizeof name, "%s %s B=%lld T=%lld H=%lld (forward %s, backward %s)", what, vram_dtype_name(dt),
             (long long)B, (long long)T, (long long)H, fwd, bwd);
    set_path(fwd);
    attention_between = strcmp(fwd, bwd) ? (!strcmp(bwd, "cudnn") ? to_cudnn : to_flash) : NULL;
    int64_t before = vram_cudnn_attention_calls;
    int ok = attention_run(&gpu, dt, B, T, H, qkv, g, out, grad);
    attention_between = NULL;
    unsetenv("VRAM_ATTENTION");
    if (ok) {
        double eo = rel_err(ref_out, out, no, C, -1, 0, &diff), e[3];
        double at_least = 1e-2 * norm(ref_grad, nq); /* as the flash test: a third far smaller than the whole */
        CHECK(eo <= tol_out, "%s: output relative error %.3g (tolerance %.1g)", name, eo, tol_out);
        for (int p = 0; p < 3; p++) {
            e[p] = rel_err(ref_grad, grad, nq, 3 * C, p, at_least, &diff);
            CHECK(e[p] <= tol_grad, "%s: %s relative error %.3g (tolerance %.1g)", name, parts[p], e[p], tol_grad);
        }
        printf("%s: out %.2e dQ %.2e dK %.2e dV %.2e\n", name, eo, e[0], e[1], e[2]);
        int on_cudnn = !!strcmp(fwd, "flash") + !!strcmp(bwd, "flash"); /* cudnn or auto (the default) */
        if (on_cudnn == 2) ran_on_cudnn(before, T % 128 == 0, name);
    }
    free(out), free(grad);
}

/* cuDNN against the CPU's f32 attention (and, at one shape, each crossing of the two paths). */
static void against_cpu(vram_dtype dt, int64_t B, int64_t T, int64_t H, int cross) {
    int64_t C = H * 64, qs[3] = {B, T, 3 * C}, os[3] = {B, T, C}, nq = B * T * 3 * C, no = B * T * C;
    double *qkv = random_in(dt, qs, 2.0), *g = random_in(dt, os, 1.0);
    double *ref_out = malloc(sizeof(double) * (size_t)no), *ref_grad = malloc(sizeof(double) * (size_t)nq);
    if (attention_run(&cpu, VRAM_DTYPE_F32, B, T, H, qkv, g, ref_out, ref_grad)) {
        compare("cudnn against the CPU", dt, B, T, H, qkv, g, ref_out, ref_grad, "cudnn", "cudnn");
        compare("the default against the CPU", dt, B, T, H, qkv, g, ref_out, ref_grad, "auto", "auto");
        if (cross) {
            compare("crossed, against the CPU", dt, B, T, H, qkv, g, ref_out, ref_grad, "cudnn", "flash");
            compare("crossed, against the CPU", dt, B, T, H, qkv, g, ref_out, ref_grad, "flash", "cudnn");
        }
    }
    free(qkv), free(g), free(ref_out), free(ref_grad);
}

/* cuDNN against the flash kernels at one (large) shape. */
static void against_flash(vram_dtype dt, int64_t B, int64_t T, int64_t H) {
    int64_t C = H * 64, qs[3] = {B, T, 3 * C}, os[3] = {B, T, C}, nq = B * T * 3 * C, no = B * T * C;
    double *qkv = random_in(dt, qs, 2.0), *g = random_in(dt, os, 1.0);
    double *ref_out = malloc(sizeof(double) * (size_t)no), *ref_grad = malloc(sizeof(double) * (size_t)nq);
    to_flash();
    int ok = attention_run(&gpu, dt, B, T, H, qkv, g, ref_out, ref_grad);
    unsetenv("VRAM_ATTENTION");
    if (ok) compare("cudnn against the flash kernels", dt, B, T, H, qkv, g, ref_out, ref_grad, "cudnn", "cudnn");
    free(qkv), free(g), free(ref_out), free(ref_grad);
}

/* A value of VRAM_ATTENTION that is neither path fails the forward with a message. */
static void bad_path(void) {
    int64_t qs[3] = {1, 8, 192};
    double *qkv = random_in(VRAM_DTYPE_BF16, qs, 1.0);
    vram_tensor *x = tensor_of(&gpu, VRAM_DTYPE_BF16, qs, qkv), *y = NULL;
    set_path("sideways");
    vram_status s = x ? vram_causal_attention_qkv(x, 1, &y) : VRAM_ERR_INVALID_ARG;
    if (s == VRAM_OK) s = vram_runtime_sync(gpu.rt);
    CHECK(s != VRAM_OK && strstr(vram_last_error(), "VRAM_ATTENTION=sideways"),
          "VRAM_ATTENTION=sideways: status %s, message '%s'", vram_status_str(s), vram_last_error());
    unsetenv("VRAM_ATTENTION");
    vram_tensor_free(y);
    vram_tensor_free(x);
    free(qkv);
}

int main(int argc, char **argv) {
    int large = !(argc > 1 && !strcmp(argv[1], "quick"));
    if (vram_device_open("cuda", &gpu.dev) != VRAM_OK) check_skip(vram_last_error());
    vram_device_close(gpu.dev);
    gpu.dev = NULL;
    if (!open_side(&cpu, "host") || !open_side(&gpu, "cuda")) return check_done();
    static const int64_t shapes[][3] = {/* B, T, H */ {2, 64, 2}, {1, 65, 3}, {4, 128, 4}, {2, 200, 2},
                                        {2, 256, 12}, {1, 512, 6}, {1, 1024, 12}};
    vram_dtype dts[2] = {VRAM_DTYPE_BF16, VRAM_DTYPE_F16};
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (large || shapes[i][1] < 1024) against_cpu(dts[d], shapes[i][0], shapes[i][1], shapes[i][2], i == 4);
        against_flash(dts[d], large ? 8 : 2, 1024, 12);
    }
    if (vram_cudnn_state() > 0) printf("cuDNN ran %lld attention calls\n", (long long)vram_cudnn_attention_calls);
    bad_path(); /* last: the sticky error stays */
    close_side(&gpu);
    close_side(&cpu);
    return check_done();
}
