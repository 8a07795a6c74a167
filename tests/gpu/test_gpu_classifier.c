/* test_gpu_classifier.c — the fused classifier's cross-entropy on the GPU.
 *
 * 1. The kernel slot (vram_cuda_kernels.cross_entropy_fused) on [rows, ld] logits against a
 *    host reference in double computed from the same 16-bit values: the loss added to
 *    loss_sum, and the gradient scale * (softmax - onehot) written over the logits with zeros
 *    in the padding columns. Rows that fit the register kernel (vk_cross_entropy_rows: GPT-2's
 *    n = 50257, ld = 50304, smaller widths, a partial last vector, bf16 and f16) must take it
 *    (vram_cuda_ce_row_launches counts); wider rows, widths off the 8-element vectors,
 *    misaligned rows and f32 must not, and still agree. Targets at column 0 and n - 1 in every
 *    case; the register kernel (VRAM_CE_KERNEL=rows) also against the old one on the same input.
 * 2. vram_linear_cross_entropy (bf16, where the mean's 1/rows is in the kernel, and f16) against
 *    the CPU's composed f32 op: loss.backward() from the seed vram_backward makes (no scaling
 *    pass), from a given seed, and under an upstream factor (loss * 0.37) and a sum; on the
 *    old kernel, the register one, and the default (VRAM_CE_KERNEL unset: the register one).
 * Skipped (77) where no GPU or driver exists.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "../../src/runtime/cuda_abi.h" /* VK_CE_REG_VPT, VK_CE_REG_THREADS */
#include "../../src/runtime/cuda_rt.h"
#include "runtime_sides.h"
#include "vram/ops.h"

static side cpu, gpu;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* A tensor of dtype dt on sd with the values v (given as f64), through an f32 upload. */
static vram_tensor *upload(side *sd, vram_dtype dt, int nd, const int64_t *shape, const double *v) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    vram_tensor *f = NULL, *t = NULL;
    if (dt == VRAM_DTYPE_I32 || dt == VRAM_DTYPE_I64) {
        CHECK_OK(vram_tensor_new(sd->rt, dt, nd, shape, VRAM_TAG_TEMPORARY, &t));
        void *h = malloc((size_t)n * 8);
        for (int64_t i = 0; i < n; i++) {
            if (dt == VRAM_DTYPE_I32)
                ((int32_t *)h)[i] = (int32_t)v[i];
            else
                ((int64_t *)h)[i] = (int64_t)v[i];
        }
        vram_tensor_write_host(t, h);
        free(h);
        return t;
    }
    float *h = malloc(sizeof *h * (size_t)n);
    for (int64_t i = 0; i < n; i++) h[i] = (float)v[i];
    CHECK_OK(vram_tensor_new(sd->rt, VRAM_DTYPE_F32, nd, shape, VRAM_TAG_TEMPORARY, &f));
    vram_tensor_write_host(f, h);
    free(h);
    if (dt == VRAM_DTYPE_F32) return f;
    CHECK_OK(vram_tensor_new(sd->rt, dt, nd, shape, VRAM_TAG_TEMPORARY, &t));
    CHECK_OK(vram_tensor_copy(t, f));
    vram_tensor_free(f);
    return t;
}

static double *download(vram_tensor *t) {
    double *v = malloc(sizeof *v * (size_t)vram_tensor_numel(t));
    CHECK_OK(vram_tensor_to_f64(t, v));
    return v;
}

/* ---- 1. the kernel slot ---- */

/* rows x ld logits (skip elements in front: off 16-byte alignment where skip is odd), targets
 * 0 and n - 1 in the first two rows; expect_rows: whether the register kernel must run. */
static void kernel_case(const char *what, vram_dtype dt, vram_dtype tdt, int64_t rows, int64_t n, int64_t ld,
                        int64_t skip, double scale, int expect_rows) {
    int64_t total = skip + rows * ld, one = 1;
    double *v = malloc(sizeof *v * (size_t)total), *tg = malloc(sizeof *tg * (size_t)rows);
    for (int64_t i = 0; i < total; i++) v[i] = 8 * urand() - 4;
    for (int64_t r = 0; r < rows; r++) {
        tg[r] = r == 0 ? 0 : r == 1 ? (double)(n - 1) : (double)(int64_t)(urand() * (double)n);
        v[skip + r * ld + (int64_t)tg[r]] += 6 * (urand() - 0.3); /* some confident rows, some wrong ones */
    }
    vram_tensor *src = upload(&gpu, dt, 1, &total, v), *t = upload(&gpu, tdt, 1, &rows, tg);
    double *x = download(src); /* the 16-bit values the kernels see */
    vram_tensor *lg[2] = { NULL, NULL }, *sum[2] = { NULL, NULL };
    double loss[2] = { 0, 0 }, *g[2] = { NULL, NULL };
    int runs = expect_rows ? 2 : 1; /* the register kernel's cases also run the old one */
    for (int k = 0; k < runs; k++) {
        CHECK_OK(vram_tensor_new(gpu.rt, dt, 1, &total, VRAM_TAG_TEMPORARY, &lg[k]));
        CHECK_OK(vram_tensor_copy(lg[k], src));
        CHECK_OK(vram_tensor_new(gpu.rt, VRAM_DTYPE_F64, 1, &one, VRAM_TAG_TEMPORARY, &sum[k]));
        CHECK_OK(vram_tensor_fill(sum[k], 0.0));
        setenv("VRAM_CE_KERNEL", k ? "old" : "rows", 1);
        int64_t l0 = vram_cuda_ce_row_launches;
        vram_cuda_kernels.cross_entropy_fused(dt, rows, n, ld, scale,
                                              (char *)vram_tensor_data(lg[k]) + skip * vram_dtype_size(dt),
                                              vram_tensor_data(t), tdt, vram_tensor_data(sum[k]));
        unsetenv("VRAM_CE_KERNEL");
        CHECK_OK(vram_runtime_sync(gpu.rt));
        int64_t took = vram_cuda_ce_row_launches - l0;
        CHECK(took == (k == 0 && expect_rows), "%s%s: %lld register-kernel launches, expected %d", what,
              k ? " (old)" : "", (long long)took, k == 0 && expect_rows);
        loss[k] = vram_tensor_item(sum[k]);
        g[k] = download(lg[k]);
    }
    /* the reference in double */
    double want = 0, num = 0, den = 0, dnum = 0, dden = 0;
    int pad_bad = 0, untouched_bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + skip + r * ld, *gr = g[0] + skip + r * ld;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; j++) m = fmax(m, xr[j]);
        for (int64_t j = 0; j < n; j++) s += exp(xr[j] - m);
        double lse = m + log(s);
        int64_t tj = (int64_t)tg[r];
        want += lse - xr[tj];
        for (int64_t j = 0; j < ld; j++) {
            if (scale == 0) { /* no gradient: the logits stay */
                untouched_bad |= gr[j] != xr[j];
                continue;
            }
            if (j >= n) {
                pad_bad |= gr[j] != 0;
                continue;
            }
            double ref = (exp(xr[j] - lse) - (j == tj)) * scale;
            num += (gr[j] - ref) * (gr[j] - ref), den += ref * ref;
            if (runs > 1) dnum += (gr[j] - g[1][skip + r * ld + j]) * (gr[j] - g[1][skip + r * ld + j]);
        }
    }
    dden = den;
    double tol = dt == VRAM_DTYPE_F32 ? 1e-4 : dt == VRAM_DTYPE_F16 ? 2e-3 : 1e-2;
    CHECK(fabs(loss[0] - want) <= 1e-5 * fabs(want) + 1e-6, "%s: loss sum %.9g, want %.9g", what, loss[0], want);
    if (runs > 1)
        CHECK(fabs(loss[0] - loss[1]) <= 1e-5 * fabs(want) + 1e-6, "%s: loss sum %.9g, the old kernel's %.9g", what,
              loss[0], loss[1]);
    if (scale != 0) {
        double rel = sqrt(num) / (sqrt(den) + 1e-30);
        CHECK(rel <= tol, "%s: gradient relative error %.3g (tolerance %.1g)", what, rel, tol);
        CHECK(!pad_bad, "%s: a padding column's gradient is not 0", what);
        if (runs > 1) {
            double d = sqrt(dnum) / (sqrt(dden) + 1e-30);
            CHECK(d <= tol, "%s: gradient differs from the old kernel's by %.3g (tolerance %.1g)", what, d, tol);
        }
    } else {
        CHECK(!untouched_bad, "%s: scale 0 changed the logits", what);
    }
    for (int k = 0; k < runs; k++) vram_tensor_free(lg[k]), vram_tensor_free(sum[k]), free(g[k]);
    vram_tensor_free(src);
    vram_tensor_free(t);
    free(x);
    free(v);
    free(tg);
}

static void test_kernel(void) {
    const vram_dtype B = VRAM_DTYPE_BF16, H = VRAM_DTYPE_F16, I32 = VRAM_DTYPE_I32;
    kernel_case("bf16 GPT-2 width", B, I32, 37, 50257, 50304, 0, 1.0 / 37, 1);
    kernel_case("bf16 GPT-2 width, unit scale, i64 targets", B, VRAM_DTYPE_I64, 3, 50257, 50304, 0, 1.0, 1);
    kernel_case("bf16 GPT-2 width, no gradient", B, I32, 5, 50257, 50304, 0, 0.0, 1);
    kernel_case("bf16 1000 classes", B, I32, 11, 1000, 1000, 0, 0.25, 1);
    kernel_case("bf16 9 classes in 16", B, I32, 7, 9, 16, 0, 1.0, 1);
    kernel_case("f16 3001 classes in 3008", H, I32, 13, 3001, 3008, 0, 1.0, 1);
    kernel_case("f16 GPT-2 width", H, I32, 6, 50257, 50304, 0, 1.0, 1);
    kernel_case("bf16 the widest register row", B, I32, 3, VK_CE_REG_VPT * VK_CE_REG_THREADS * 8 - 3,
                VK_CE_REG_VPT * VK_CE_REG_THREADS * 8, 0, 1.0 / 3, 1);
    /* the fallback, vk_cross_entropy_fused */
    kernel_case("bf16 wider than the registers", B, I32, 3, VK_CE_REG_VPT * VK_CE_REG_THREADS * 8 + 5,
                VK_CE_REG_VPT * VK_CE_REG_THREADS * 8 + 8, 0, 0.5, 0);
    kernel_case("bf16 width off the vectors", B, I32, 4, 1001, 1001, 0, 1.0, 0);
    kernel_case("bf16 misaligned rows", B, I32, 4, 1000, 1000, 1, 1.0, 0);
    kernel_case("f32 rows", VRAM_DTYPE_F32, I32, 5, 777, 784, 0, 0.5, 0);
}

/* ---- 2. the op and its backward ---- */

enum { SEED_MADE, SEED_GIVEN, SCALED, SUMMED };
static const char *mode_name[] = { "loss.backward()", "backward with a given seed 1", "(loss * 0.37).backward()",
                                   "(loss + loss).backward()" };

/* loss = linear_cross_entropy(x, W, targets) on both sides (x 16-bit on the GPU, from an f32
 * leaf), backward as `mode` says; the loss and both gradients compared. */
static void op_case(vram_dtype act, int64_t R, int64_t C, int64_t V, int mode) {
    int64_t xs[2] = { R, C }, ws[2] = { V, C };
    double *xv = malloc(sizeof *xv * (size_t)(R * C)), *wv = malloc(sizeof *wv * (size_t)(V * C)),
           *tv = malloc(sizeof *tv * (size_t)R);
    for (int64_t i = 0; i < R * C; i++) xv[i] = 2 * urand() - 1;
    for (int64_t i = 0; i < V * C; i++) wv[i] = 0.5 * (2 * urand() - 1);
    for (int64_t r = 0; r < R; r++)
        tv[r] = r == 0 ? 0 : r == 1 ? (double)(V - 1) : (double)(int64_t)(urand() * (double)V);
    side *sides[2] = { &cpu, &gpu };
    vram_tensor *x[2], *w[2], *loss[2] = { 0 }, *gx[2], *gw[2];
    for (int k = 0; k < 2; k++) {
        x[k] = upload(sides[k], VRAM_DTYPE_F32, 2, xs, xv);
        w[k] = upload(sides[k], VRAM_DTYPE_F32, 2, ws, wv);
        vram_tensor *t = upload(sides[k], VRAM_DTYPE_I32, 1, &R, tv), *xa = NULL, *root = NULL, *seed = NULL;
        CHECK_OK(vram_tensor_set_requires_grad(x[k], 1));
        CHECK_OK(vram_tensor_set_requires_grad(w[k], 1));
        if (k) CHECK_OK(vram_to_dtype(x[k], act, &xa));
        CHECK_OK(vram_linear_cross_entropy(k ? xa : x[k], w[k], t, &loss[k]));
        if (mode == SCALED) CHECK_OK(vram_scale(loss[k], 0.37, &root));
        if (mode == SUMMED) CHECK_OK(vram_add(loss[k], loss[k], &root));
        if (mode == SEED_GIVEN) {
            CHECK_OK(vram_tensor_new(sides[k]->rt, VRAM_DTYPE_F32, 0, NULL, VRAM_TAG_TEMPORARY, &seed));
            CHECK_OK(vram_tensor_fill(seed, 1.0));
        }
        CHECK_OK(vram_backward(root ? root : loss[k], seed));
        gx[k] = vram_tensor_grad(x[k]);
        gw[k] = vram_tensor_grad(w[k]);
        vram_tensor_free(root), vram_tensor_free(seed), vram_tensor_free(xa), vram_tensor_free(t);
    }
    double l[2] = { vram_tensor_item(loss[0]), vram_tensor_item(loss[1]) };
    const char *an = vram_dtype_name(act);
    CHECK(fabs(l[0] - l[1]) <= 2e-2 * fabs(l[0]), "classifier %s R=%lld V=%lld, %s: loss %.6g, cpu %.6g", an,
          (long long)R, (long long)V, mode_name[mode], l[1], l[0]);
    for (int i = 0; i < 2; i++) {
        vram_tensor *c = i ? gw[0] : gx[0], *d = i ? gw[1] : gx[1];
        CHECK(c && d, "classifier %s, %s: no gradient of %s", an, mode_name[mode], i ? "W" : "x");
        if (!c || !d) continue;
        double *a = download(c), *b = download(d), num = 0, den = 0;
        for (int64_t e = 0; e < vram_tensor_numel(c); e++) num += (a[e] - b[e]) * (a[e] - b[e]), den += a[e] * a[e];
        double rel = sqrt(num) / (sqrt(den) + 1e-30);
        CHECK(rel <= 3e-2, "classifier %s R=%lld V=%lld, %s: gradient of %s, relative error %.3g", an, (long long)R,
              (long long)V, mode_name[mode], i ? "W" : "x", rel);
        free(a), free(b);
    }
    CHECK_OK(vram_runtime_sync(gpu.rt));
    for (int k = 0; k < 2; k++) vram_tensor_free(loss[k]), vram_tensor_free(x[k]), vram_tensor_free(w[k]);
    free(xv), free(wv), free(tv);
}

/* Each case on both kernels (VRAM_CE_KERNEL=old, =rows) and with the switch unset, the default:
 * the register kernel. */
static void test_op(void) {
    static const char *const forms[] = {"old", "rows", NULL};
    for (int f = 0; f < 3; f++) {
        int rows_kernel = f > 0;
        if (forms[f]) setenv("VRAM_CE_KERNEL", forms[f], 1);
        int64_t l0 = vram_cuda_ce_row_launches;
        for (int mode = SEED_MADE; mode <= SUMMED; mode++) {
            op_case(VRAM_DTYPE_BF16, 77, 64, 777, mode);
            op_case(VRAM_DTYPE_F16, 77, 64, 777, mode);
        }
        /* GPT-2's vocabulary over two chunks of rows (1334 a chunk at its padded width) */
        op_case(VRAM_DTYPE_BF16, 1400, 32, 50257, SEED_MADE);
        op_case(VRAM_DTYPE_BF16, 1400, 32, 50257, SCALED);
        CHECK((vram_cuda_ce_row_launches > l0) == rows_kernel, "VRAM_CE_KERNEL=%s: %lld register-kernel launches",
              forms[f] ? forms[f] : "(unset)", (long long)(vram_cuda_ce_row_launches - l0));
        unsetenv("VRAM_CE_KERNEL");
    }
}

int main(void) {
    if (vram_device_open("cuda", &gpu.dev) != VRAM_OK) check_skip(vram_last_error());
    vram_device_close(gpu.dev);
    gpu.dev = NULL;
    if (!open_side(&cpu, "host") || !open_side(&gpu, "cuda")) return check_done();
    test_kernel();
    test_op();
    /* last (the runtime's error is sticky): a bad value stops the launch, naming it */
    setenv("VRAM_CE_KERNEL", "bogus", 1);
    vram_cuda_kernels.cross_entropy_fused(VRAM_DTYPE_BF16, 0, 8, 8, 1.0, NULL, NULL, VRAM_DTYPE_I64, NULL);
    unsetenv("VRAM_CE_KERNEL");
    vram_status st = vram_runtime_sync(gpu.rt);
    CHECK(st != VRAM_OK && strstr(vram_last_error(), "VRAM_CE_KERNEL=bogus: expected rows or old"),
          "VRAM_CE_KERNEL=bogus: %s (%s)", vram_status_str(st), vram_last_error());
    close_side(&gpu);
    close_side(&cpu);
    return check_done();
}
