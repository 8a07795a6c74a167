/* test_gpu_flash.c — flash attention's backward variants (VRAM_FLASH_BWD=fused, the one-pass
 * default with dQ added atomically; fused3, the same kernel held to three blocks an SM; split,
 * the two deterministic kernels; fused128, fused128p and split128, the same over 128-key blocks
 * of 8 warps) and forward forms (VRAM_FLASH_FWD=rows16, rows32) against the CPU's f32 attention and against
 * each other, in bf16 and f16.
 *
 * Against the CPU: inputs already rounded to the 16-bit type (so both sides see the same
 * numbers), T around the 64-row tiles and B*H from 1 to 96; the output and the gradients of
 * q, k and v, each to a relative error (norm of the difference over the CPU's norm) that the
 * kernel's own roundings explain: P and dS are rounded to 16 bits before their products.
 * Against each other at GPT-2's shape: the same forward bit for bit, dK and dV bit for bit
 * between two fused runs (no atomics there), dQ within fp32 summation order (the atomics add
 * in any order, so its last bits may differ between runs: the count is printed). Skipped (77)
 * where no GPU or driver exists.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "attention_sides.h"

static const char *const parts[3] = {"dQ", "dK", "dV"};

/* Each variant against the CPU's f32 attention at one shape. */
static void against_cpu(vram_dtype dt, int64_t B, int64_t T, int64_t H) {
    int64_t C = H * 64, qs[3] = {B, T, 3 * C}, os[3] = {B, T, C}, nq = B * T * 3 * C, no = B * T * C;
    double *qkv = random_in(dt, qs, 2.0), *g = random_in(dt, os, 1.0);
    double *ref_out = malloc(sizeof(double) * (size_t)no), *ref_grad = malloc(sizeof(double) * (size_t)nq);
    double *out = malloc(sizeof(double) * (size_t)no), *grad = malloc(sizeof(double) * (size_t)nq);
    /* bf16 keeps 8 significant bits, f16 11: tolerances a few units of each's rounding */
    double tol_out = dt == VRAM_DTYPE_BF16 ? 1.5e-2 : 3e-3, tol_grad = dt == VRAM_DTYPE_BF16 ? 3e-2 : 8e-3;
    if (attention_run(&cpu, VRAM_DTYPE_F32, B, T, H, qkv, g, ref_out, ref_grad)) {
        /* the backward forms, then the 32-rows-a-warp forward with the default backward */
        enum { NB = 6 };
        const char *variants[NB + 1] = {"fused",    "fused3",    "split", "fused128",
                                        "split128", "fused128p", "fused, forward rows32"};
        for (int v = 0; v < NB + 1; v++) {
            setenv("VRAM_FLASH_BWD", v < NB ? variants[v] : "fused", 1);
            setenv("VRAM_FLASH_FWD", v < NB ? "rows16" : "rows32", 1);
            if (!attention_run(&gpu, dt, B, T, H, qkv, g, out, grad)) continue;
            int64_t diff;
            double eo = rel_err(ref_out, out, no, C, -1, 0, &diff), e[3];
            /* a third far smaller than the whole gradient is measured against 1% of the whole's
             * norm: at T = 1, dQ and dK are 0 in exact arithmetic and rounding noise on both sides */
            double at_least = 1e-2 * norm(ref_grad, nq);
            CHECK(eo <= tol_out, "flash %s B=%lld T=%lld H=%lld (%s): output relative error %.3g (tolerance %.1g)",
                  vram_dtype_name(dt), (long long)B, (long long)T, (long long)H, variants[v], eo, tol_out);
            for (int p = 0; p < 3; p++) {
                e[p] = rel_err(ref_grad, grad, nq, 3 * C, p, at_least, &diff);
                CHECK(e[p] <= tol_grad, "flash %s B=%lld T=%lld H=%lld (%s backward): %s relative error %.3g (tolerance %.1g)",
                      vram_dtype_name(dt), (long long)B, (long long)T, (long long)H, variants[v], parts[p], e[p], tol_grad);
            }
            printf("flash %s B=%lld T=%lld H=%lld %s: out %.2e dQ %.2e dK %.2e dV %.2e against the CPU's f32\n",
                   vram_dtype_name(dt), (long long)B, (long long)T, (long long)H, variants[v], eo, e[0], e[1], e[2]);
        }
        unsetenv("VRAM_FLASH_BWD");
        unsetenv("VRAM_FLASH_FWD");
    }
    free(qkv), free(g), free(ref_out), free(ref_grad), free(out), free(grad);
}

/* fused twice, split and fused3 once, the rows32 forward, fused128 twice, split128 and fused128p
 * once, on the GPU at one (large) shape. */
static void variants_agree(vram_dtype dt, int64_t B, int64_t T, int64_t H) {
    enum { RUNS = 9 };
    int64_t C = H * 64, qs[3] = {B, T, 3 * C}, os[3] = {B, T, C}, nq = B * T * 3 * C, no = B * T * C;
    double *qkv = random_in(dt, qs, 2.0), *g = random_in(dt, os, 1.0), *out[RUNS], *grad[RUNS];
    /* the fifth with the rows32 forward */
    const char *variants[RUNS] = {"fused",    "fused",    "split",    "fused3",   "fused",
                                  "fused128", "fused128", "split128", "fused128p"};
    int ok = 1;
    for (int r = 0; r < RUNS; r++) {
        out[r] = malloc(sizeof(double) * (size_t)no), grad[r] = malloc(sizeof(double) * (size_t)nq);
        setenv("VRAM_FLASH_BWD", variants[r], 1);
        setenv("VRAM_FLASH_FWD", r == 4 ? "rows32" : "rows16", 1);
        ok &= attention_run(&gpu, dt, B, T, H, qkv, g, out[r], grad[r]);
    }
    unsetenv("VRAM_FLASH_BWD");
    unsetenv("VRAM_FLASH_FWD");
    if (ok) {
        int64_t diff, d32, again[3], vs_split[3], d3;
        double e[3];
        rel_err(out[0], out[2], no, C, -1, 0, &diff);
        CHECK(diff == 0, "flash %s: the forward differs between runs in %lld elements", vram_dtype_name(dt), (long long)diff);
        /* 32 rows a warp: the same products and exponentials per element, in the same order */
        double e32 = rel_err(out[0], out[4], no, C, -1, 0, &d32);
        CHECK(e32 <= 1e-3, "flash %s: the rows32 forward against rows16: relative error %.3g", vram_dtype_name(dt), e32);
        printf("flash %s: forward rows32 against rows16: %.2e, %lld elements differ\n", vram_dtype_name(dt), e32,
               (long long)d32);
        for (int p = 0; p < 3; p++) {
            rel_err(grad[0], grad[1], nq, 3 * C, p, 0, &again[p]);
            e[p] = rel_err(grad[2], grad[0], nq, 3 * C, p, 0, &vs_split[p]);
            double e3 = rel_err(grad[2], grad[3], nq, 3 * C, p, 0, &d3);
            /* the same products in the same order but for dQ's sum over key blocks: fp32 order,
             * then one rounding to 16 bits, moves an element by at most an ulp now and then */
            CHECK(e[p] <= 1e-3 && e3 <= 1e-3, "flash %s B=%lld T=%lld H=%lld: %s against split: relative error %.3g (fused), %.3g (fused3)",
                  vram_dtype_name(dt), (long long)B, (long long)T, (long long)H, parts[p], e[p], e3);
        }
        CHECK(again[1] == 0 && again[2] == 0, "flash %s: fused dK/dV differ between two runs (%lld, %lld elements)",
              vram_dtype_name(dt), (long long)again[1], (long long)again[2]);
        /* the 128-key forms: the products of split's dK/dV kernel (P's exponent rounded apart),
         * dK/dV deterministic; split128's dQ kernel gives each row split's products in split's
         * order, so the same bits */
        int64_t again128[3], d128[3], ds128[3], dp128[3];
        double e128[3], es128[3], ep128[3];
        for (int p = 0; p < 3; p++) {
            rel_err(grad[5], grad[6], nq, 3 * C, p, 0, &again128[p]);
            e128[p] = rel_err(grad[2], grad[5], nq, 3 * C, p, 0, &d128[p]);
            es128[p] = rel_err(grad[2], grad[7], nq, 3 * C, p, 0, &ds128[p]);
            ep128[p] = rel_err(grad[2], grad[8], nq, 3 * C, p, 0, &dp128[p]);
            CHECK(e128[p] <= 1e-3 && es128[p] <= 1e-3 && ep128[p] <= 1e-3,
                  "flash %s B=%lld T=%lld H=%lld: %s against split: relative error %.3g (fused128), %.3g (split128), "
                  "%.3g (fused128p)",
                  vram_dtype_name(dt), (long long)B, (long long)T, (long long)H, parts[p], e128[p], es128[p], ep128[p]);
        }
        CHECK(again128[1] == 0 && again128[2] == 0, "flash %s: fused128 dK/dV differ between two runs (%lld, %lld elements)",
              vram_dtype_name(dt), (long long)again128[1], (long long)again128[2]);
        CHECK(ds128[0] == 0, "flash %s: split128's dQ differs from split's in %lld elements (the same products)",
              vram_dtype_name(dt), (long long)ds128[0]);
        printf("flash %s: fused128 against split: dQ %.2e, dK %.2e (%lld differ), dV %.2e (%lld); split128: dK %.2e, "
               "dV %.2e; fused128p: dQ %.2e, dK %.2e, dV %.2e; two fused128 runs: dQ differs in %lld elements\n",
               vram_dtype_name(dt), e128[0], e128[1], (long long)d128[1], e128[2], (long long)d128[2], es128[1], es128[2],
               ep128[0], ep128[1], ep128[2], (long long)again128[0]);
        printf("flash %s B=%lld T=%lld H=%lld: fused against split: dQ %.2e (%lld of %lld elements differ), dK %.2e (%lld), "
               "dV %.2e (%lld); two fused runs: dQ differs in %lld elements, dK/dV in %lld\n",
               vram_dtype_name(dt), (long long)B, (long long)T, (long long)H, e[0], (long long)vs_split[0],
               (long long)(no), e[1], (long long)vs_split[1], e[2], (long long)vs_split[2], (long long)again[0],
               (long long)(again[1] + again[2]));
    }
    for (int r = 0; r < RUNS; r++) free(out[r]), free(grad[r]);
    free(qkv), free(g);
}

/* A value of VRAM_FLASH_BWD that is neither variant fails the backward with a message. */
static void bad_variant(void) {
    int64_t qs[3] = {1, 8, 192}, os[3] = {1, 8, 64};
    double *qkv = random_in(VRAM_DTYPE_BF16, qs, 1.0), *g = random_in(VRAM_DTYPE_BF16, os, 1.0);
    vram_tensor *leaf = NULL, *x = NULL, *gt = tensor_of(&gpu, VRAM_DTYPE_BF16, os, g), *y = NULL;
    setenv("VRAM_FLASH_BWD", "sideways", 1);
    CHECK_OK(grad_input(&gpu, VRAM_DTYPE_BF16, qs, qkv, &leaf, &x));
    if (x) CHECK_OK(vram_causal_attention_qkv(x, 1, &y));
    vram_status s = y ? vram_backward(y, gt) : VRAM_ERR_INVALID_ARG;
    if (s == VRAM_OK) s = vram_runtime_sync(gpu.rt);
    CHECK(s != VRAM_OK && strstr(vram_last_error(), "VRAM_FLASH_BWD=sideways"),
          "VRAM_FLASH_BWD=sideways: status %s, message '%s'", vram_status_str(s), vram_last_error());
    unsetenv("VRAM_FLASH_BWD");
    vram_tensor_free(y);
    vram_tensor_free(gt);
    vram_tensor_free(x);
    vram_tensor_free(leaf);
    free(qkv), free(g);
}

int main(int argc, char **argv) {
    setenv("VRAM_ATTENTION", "flash", 1); /* the own kernels, which cuDNN's attention would replace by default */
    int large = !(argc > 1 && !strcmp(argv[1], "quick"));
    if (vram_device_open("cuda", &gpu.dev) != VRAM_OK) check_skip(vram_last_error());
    vram_device_close(gpu.dev);
    gpu.dev = NULL;
    if (!open_side(&cpu, "host") || !open_side(&gpu, "cuda")) return check_done();
    static const int64_t shapes[][3] = {/* B, T, H */ {1, 1, 1},    {1, 17, 2},  {2, 64, 1},  {1, 65, 3},   {2, 130, 2},
                                        {1, 200, 1}, {2, 192, 12}, {8, 70, 12}, {1, 1000, 12}};
    vram_dtype dts[2] = {VRAM_DTYPE_BF16, VRAM_DTYPE_F16};
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (large || shapes[i][1] < 1000) against_cpu(dts[d], shapes[i][0], shapes[i][1], shapes[i][2]);
        variants_agree(dts[d], large ? 4 : 1, 1024, 12);
    }
    bad_variant(); /* last: the sticky error stays */
    close_side(&gpu);
    close_side(&cpu);
    return check_done();
}
