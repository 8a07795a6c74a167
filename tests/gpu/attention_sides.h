/* attention_sides.h — what the GPU attention tests (test_gpu_flash.c, test_gpu_cudnn.c) share:
 * the CPU and GPU sides, random qkv already rounded to a 16-bit type, one causal attention
 * forward and backward on a side (vram_causal_attention_qkv from an f32 leaf through its
 * differentiable cast), and the relative error of one result against another.
 */
#ifndef VRAM_TESTS_ATTENTION_SIDES_H
#define VRAM_TESTS_ATTENTION_SIDES_H

#include <math.h>
#include <stdlib.h>

#include "runtime_sides.h"
#include "vram/ops.h"

static side cpu, gpu;
/* Called between attention_run's forward and its backward where set (a test switching paths). */
static void (*attention_between)(void);
static uint64_t rng = 0x2545f4914f6cdd1dull;

static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* A contiguous tensor of dtype dt on side sd holding v (converted through f32). */
static vram_tensor *tensor_of(side *sd, vram_dtype dt, const int64_t shape[3], const double *v) {
    int64_t n = shape[0] * shape[1] * shape[2];
    float *h = malloc(sizeof *h * (size_t)n);
    for (int64_t i = 0; i < n; i++) h[i] = (float)v[i];
    vram_tensor *f = NULL, *t = NULL;
    CHECK_OK(vram_tensor_new(sd->rt, VRAM_DTYPE_F32, 3, shape, VRAM_TAG_TEMPORARY, &f));
    if (f) vram_tensor_write_host(f, h);
    free(h);
    if (!f || dt == VRAM_DTYPE_F32) return f;
    CHECK_OK(vram_tensor_new(sd->rt, dt, 3, shape, VRAM_TAG_TEMPORARY, &t));
    if (t) CHECK_OK(vram_tensor_copy(t, f));
    vram_tensor_free(f);
    return t;
}

/* n random values in [-amp, amp], rounded to dt (through the GPU's conversion). */
static double *random_in(vram_dtype dt, const int64_t shape[3], double amp) {
    int64_t n = shape[0] * shape[1] * shape[2];
    double *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = amp * (2 * urand() - 1);
    vram_tensor *t = tensor_of(&gpu, dt, shape, v);
    if (t) CHECK_OK(vram_tensor_to_f64(t, v));
    vram_tensor_free(t);
    return v;
}

/* v as an f32 leaf that requires grad on side sd (gradients live in f32 or f64 only) and, for a
 * 16-bit dt, the leaf's differentiable cast to dt: the leaf's gradient is dt's widened exactly. */
static vram_status grad_input(side *sd, vram_dtype dt, const int64_t shape[3], const double *v, vram_tensor **leaf,
                              vram_tensor **x) {
    *x = NULL;
    *leaf = tensor_of(sd, VRAM_DTYPE_F32, shape, v);
    vram_status s = *leaf ? vram_tensor_set_requires_grad(*leaf, 1) : VRAM_ERR_INVALID_ARG;
    if (s != VRAM_OK) return s;
    if (dt == VRAM_DTYPE_F32) {
        *x = vram_tensor_retain(*leaf);
        return VRAM_OK;
    }
    return vram_to_dtype(*leaf, dt, x);
}

/* Attention of qkv [B, T, 3C] on side sd in dtype dt, then backward from the output gradient
 * g: out [B, T, C] and grad [B, T, 3C] as doubles. Returns 0 where a step failed. */
static int attention_run(side *sd, vram_dtype dt, int64_t B, int64_t T, int64_t H, const double *qkv, const double *g,
                         double *out, double *grad) {
    int64_t qs[3] = {B, T, 3 * H * 64}, os[3] = {B, T, H * 64};
    vram_tensor *leaf = NULL, *x = NULL, *gt = tensor_of(sd, dt, os, g), *y = NULL;
    vram_status s = gt ? grad_input(sd, dt, qs, qkv, &leaf, &x) : VRAM_ERR_INVALID_ARG;
    if (s == VRAM_OK) s = vram_causal_attention_qkv(x, H, &y);
    if (s == VRAM_OK && attention_between) attention_between();
    if (s == VRAM_OK) s = vram_backward(y, gt);
    if (s == VRAM_OK) s = vram_runtime_sync(sd->rt);
    if (s == VRAM_OK) s = vram_tensor_to_f64(y, out);
    if (s == VRAM_OK) s = vram_tensor_to_f64(vram_tensor_grad(leaf), grad);
    CHECK(s == VRAM_OK, "attention B=%lld T=%lld H=%lld %s on %s: %s (%s)", (long long)B, (long long)T, (long long)H,
          vram_dtype_name(dt), sd == &gpu ? "gpu" : "cpu", vram_status_str(s), vram_last_error());
    vram_tensor_free(y);
    vram_tensor_free(gt);
    vram_tensor_free(x);
    vram_tensor_free(leaf);
    return s == VRAM_OK;
}

/* Relative error of b against a over the elements of `part` (-1 all; 0, 1, 2 the q, k, v
 * thirds of rows `width` wide): the norm of the difference over a's norm, or over `at_least` where
 * that is larger; *diff counts the elements that differ at all. */
static double rel_err(const double *a, const double *b, int64_t n, int64_t width, int part, double at_least,
                      int64_t *diff) {
    double num = 0, den = 0;
    *diff = 0;
    for (int64_t i = 0; i < n; i++) {
        if (part >= 0 && (i % width) / (width / 3) != part) continue;
        double d = a[i] - b[i];
        if (a[i] != b[i]) ++*diff;
        num += d != d ? INFINITY : d * d;
        den += a[i] * a[i];
    }
    return sqrt(num) / fmax(sqrt(den), fmax(at_least, 1e-30));
}

static double norm(const double *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

#endif
