/* test_gpu_optim_list.c — the multi-tensor AdamW (kernel table's adam_update_list) and the list
 * sum of squares (sum_squares) on the GPU, in both forms: the vector kernels (the default for
 * f32, cuda_optim_list.cuh) and the scalar ones (VRAM_OPTIM_KERNEL=old).
 *
 * Each case is a list of f32 tensors of awkward sizes (0, 1, 3, 7, 4095, 4097, 8195, a million
 * and 5, and whole chunks), some starting one to three elements past an aligned address (so
 * their chunks take the scalar path) or with only the gradient misaligned, some with a kept
 * 16-bit copy (bf16 or f16) and some without. Parameters, gradients and Adam state get random values; one
 * step (AdamW and Adam, with clipping's factor 1 and 0.37) is checked element by element against
 * a double-precision reference of the formula from the same inputs (relative 1e-5), the two
 * forms against each other (4 float ulps), and each kept copy against its parameter (bf16: the
 * round-to-nearest-even bits; f16: within half an ulp). With the grad scaler's skip flag set,
 * nothing may change, kept copies included. The sum of squares of the gradients is checked
 * against a double sum (relative 1e-6). Skipped (77) where no GPU or driver exists.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "../../src/runtime/cuda_rt.h"
#include "runtime_sides.h"
#include "vram/alloc.h"

static side gpu;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* One tensor of a case: its size, its element offset from an aligned address (all four f32
 * arrays, or the gradient only), and its kept copy's dtype (F32: none). */
typedef struct item {
    int64_t n;
    int off, goff;
    vram_dtype lowp;
} item;

/* Device buffers of one tensor (SLACK elements more, for the offsets: off + goff < SLACK) and the
 * host copies of their starting values. */
enum { SLACK = 4 };
typedef struct bufs {
    vram_tensor *p, *g, *m, *v, *lw;
    float *hp, *hg, *hm, *hv;
} bufs;

static vram_tensor *dev_f32(int64_t n, const float *h) {
    vram_tensor *t = NULL;
    int64_t shape[1] = {n};
    CHECK_OK(vram_tensor_new(gpu.rt, VRAM_DTYPE_F32, 1, shape, VRAM_TAG_TEMPORARY, &t));
    if (t) vram_tensor_write_host(t, h);
    return t;
}

static float *host_rand(int64_t n, double lo, double hi) {
    float *h = malloc(sizeof *h * (size_t)n);
    for (int64_t i = 0; i < n; i++) h[i] = (float)(lo + (hi - lo) * urand());
    return h;
}

static void make(const item *it, bufs *b) {
    int64_t n = it->n + SLACK;
    b->hp = host_rand(n, -1, 1), b->hg = host_rand(n, -2, 2), b->hm = host_rand(n, -0.1, 0.1);
    b->hv = host_rand(n, 0, 0.01);
    b->p = dev_f32(n, b->hp), b->g = dev_f32(n, b->hg), b->m = dev_f32(n, b->hm), b->v = dev_f32(n, b->hv);
    b->lw = NULL;
    if (it->lowp != VRAM_DTYPE_F32) { /* a pattern the update must overwrite (or, skipped, keep) */
        int64_t shape[1] = {n};
        CHECK_OK(vram_tensor_new(gpu.rt, it->lowp, 1, shape, VRAM_TAG_TEMPORARY, &b->lw));
        if (b->lw) CHECK_OK(vram_tensor_fill(b->lw, 3.0));
    }
}

static void release(bufs *b) {
    vram_tensor_free(b->p), vram_tensor_free(b->g), vram_tensor_free(b->m), vram_tensor_free(b->v);
    vram_tensor_free(b->lw);
    free(b->hp), free(b->hg), free(b->hm), free(b->hv);
}

static void rewrite(bufs *bs, int count) { /* back to the starting values, for the next form */
    for (int i = 0; i < count; i++) {
        bufs *b = &bs[i];
        vram_tensor_write_host(b->p, b->hp), vram_tensor_write_host(b->g, b->hg);
        vram_tensor_write_host(b->m, b->hm), vram_tensor_write_host(b->v, b->hv);
        if (b->lw) CHECK_OK(vram_tensor_fill(b->lw, 3.0));
    }
}

static double *read(vram_tensor *t) {
    double *h = malloc(sizeof *h * (size_t)vram_tensor_numel(t));
    CHECK_OK(vram_tensor_to_f64(t, h));
    return h;
}

/* The nearest bf16 (ties to even) of x, as a double. */
static double bf16_of(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

typedef struct step_args {
    double lr, b1, b2, eps, wd, gcoef;
    int decoupled;
    int64_t step;
} step_args;

/* One list update of the case's tensors in the current form; skip: a device flag or NULL. */
static void run_update(const item *its, bufs *bs, int count, const step_args *a, const int32_t *skip) {
    void **ptr = calloc((size_t)count * 5, sizeof *ptr);
    int64_t *ns = malloc(sizeof *ns * (size_t)count);
    vram_dtype lowp_dt = VRAM_DTYPE_F32;
    int any = 0;
    for (int i = 0; i < count; i++) {
        float *p = vram_tensor_data(bs[i].p), *g = vram_tensor_data(bs[i].g);
        float *m = vram_tensor_data(bs[i].m), *v = vram_tensor_data(bs[i].v);
        ptr[i] = p + its[i].off, ptr[count + i] = g + its[i].off + its[i].goff;
        ptr[2 * count + i] = m + its[i].off, ptr[3 * count + i] = v + its[i].off;
        if (bs[i].lw) ptr[4 * count + i] = (char *)vram_tensor_data(bs[i].lw) + 2 * its[i].off, any = 1;
        if (bs[i].lw) lowp_dt = its[i].lowp;
        ns[i] = its[i].n;
    }
    gpu.rt->k->adam_update_list(VRAM_DTYPE_F32, count, ptr, (const void *const *)(ptr + count), ptr + 2 * count,
                                ptr + 3 * count, ns, a->lr, a->b1, a->b2, a->eps, a->wd, a->decoupled, a->step, skip,
                                any ? ptr + 4 * count : NULL, lowp_dt, a->gcoef);
    CHECK_OK(vram_runtime_sync(gpu.rt));
    free(ptr);
    free(ns);
}

/* The case's results now on the device against the double reference (or, skipped, against the
 * starting values exactly); out[i]: tensor i's parameters read back, for the other form. */
static void check_update(const char *form, const item *its, bufs *bs, int count, const step_args *a, int skipped,
                         double **out) {
    double bc1 = 1 - pow(a->b1, (double)a->step), bc2 = 1 - pow(a->b2, (double)a->step);
    double step_size = a->lr / bc1, sbc2 = sqrt(bc2), decay = 1 - a->lr * a->wd;
    for (int t = 0; t < count; t++) {
        const item *it = &its[t];
        bufs *b = &bs[t];
        double *p = read(b->p), *m = read(b->m), *v = read(b->v), *lw = b->lw ? read(b->lw) : NULL;
        int64_t bad = 0, bad_low = 0, first = -1;
        for (int64_t j = 0; j < it->n + SLACK; j++) {
            int64_t k = j - it->off; /* index in the tensor; outside [0, n): slack, never written */
            int inside = k >= 0 && k < it->n;
            double rp = b->hp[j], rm = b->hm[j], rv = b->hv[j];
            if (inside && !skipped) {
                double g = (double)(float)((double)b->hg[j + it->goff] * (double)(float)a->gcoef), pi = rp;
                if (a->decoupled) pi *= decay;
                else g += a->wd * pi;
                rm = a->b1 * rm + (1 - a->b1) * g, rv = a->b2 * rv + (1 - a->b2) * g * g;
                rp = pi - step_size * rm / (sqrt(rv) / sbc2 + a->eps);
            }
            int ok = fabs(p[j] - rp) <= 1e-5 * fabs(rp) + 1e-7 && fabs(m[j] - rm) <= 1e-5 * fabs(rm) + 1e-7 &&
                     fabs(v[j] - rv) <= 1e-5 * fabs(rv) + 1e-12;
            if (skipped || !inside) ok = p[j] == (double)b->hp[j] && m[j] == (double)b->hm[j] && v[j] == (double)b->hv[j];
            if (!ok && first < 0) first = j;
            bad += !ok;
            if (lw) { /* the kept copy: p rounded (3.0, the fill, where not written) */
                double want = inside && !skipped ? (it->lowp == VRAM_DTYPE_BF16 ? bf16_of((float)p[j]) : p[j]) : 3.0;
                double tol = inside && !skipped && it->lowp == VRAM_DTYPE_F16 ? fabs(p[j]) * 0x1p-11 + 0x1p-25 : 0;
                bad_low += !(fabs(lw[j] - want) <= tol);
            }
        }
        CHECK(bad == 0, "%s: tensor %d (n %lld, offset %d, gradient offset %d, gcoef %g, %s%s): %lld elements wrong, "
              "the first at %lld", form, t, (long long)it->n, it->off, it->goff, a->gcoef,
              a->decoupled ? "AdamW" : "Adam", skipped ? ", skipped" : "", (long long)bad, (long long)first);
        CHECK(bad_low == 0, "%s: tensor %d (n %lld, offset %d): %lld elements of the kept %s copy wrong", form, t,
              (long long)it->n, it->off, (long long)bad_low, vram_dtype_name(it->lowp));
        if (out) out[t] = p;
        else free(p);
        free(m), free(v), free(lw);
    }
}

/* One case: both forms, from the same starting values, against the reference and each other.
 * flag: the grad scaler's device flag or NULL; skipped: whether it is set. */
static void test_case(const char *name, const item *its, int count, const step_args *a, vram_tensor *flag,
                      int skipped) {
    bufs *bs = calloc((size_t)count, sizeof *bs);
    double **pv = calloc((size_t)count, sizeof *pv), **po = calloc((size_t)count, sizeof *po);
    for (int i = 0; i < count; i++) make(&its[i], &bs[i]);
    char form[160];
    for (int f = 0; f < 2; f++) {
        if (f) setenv("VRAM_OPTIM_KERNEL", "old", 1);
        else setenv("VRAM_OPTIM_KERNEL", "vec", 1);
        snprintf(form, sizeof form, "%s, %s kernel", name, f ? "old" : "vector");
        rewrite(bs, count);
        run_update(its, bs, count, a, flag ? vram_tensor_data(flag) : NULL);
        check_update(form, its, bs, count, a, skipped, f ? po : pv);
    }
    unsetenv("VRAM_OPTIM_KERNEL");
    int64_t apart = 0, same = 0, all = 0;
    for (int t = 0; t < count; t++)
        for (int64_t j = 0; j < its[t].n + SLACK; j++) {
            double x = pv[t][j], y = po[t][j];
            apart += !(fabs(x - y) <= 4 * 0x1p-24 * fabs(y) + 1e-9);
            same += x == y, all++;
        }
    CHECK(apart == 0, "%s: %lld parameters differ between the vector and the old kernel by more than 4 ulps", name,
          (long long)apart);
    printf("%s: %lld of %lld parameters bit for bit the same in both kernels\n", name, (long long)same, (long long)all);
    for (int i = 0; i < count; i++) release(&bs[i]), free(pv[i]), free(po[i]);
    free(bs), free(pv), free(po);
}

static void test_sum_squares(const item *its, int count) {
    vram_dtype *dts = malloc(sizeof *dts * (size_t)count);
    int64_t *ns = malloc(sizeof *ns * (size_t)count);
    const void **xs = malloc(sizeof *xs * (size_t)count);
    bufs *bs = calloc((size_t)count, sizeof *bs);
    double want = 0;
    for (int i = 0; i < count; i++) {
        make(&its[i], &bs[i]);
        int o = its[i].off + its[i].goff;
        dts[i] = VRAM_DTYPE_F32, ns[i] = its[i].n, xs[i] = (float *)vram_tensor_data(bs[i].g) + o;
        for (int64_t j = 0; j < its[i].n; j++) want += (double)bs[i].hg[o + j] * (double)bs[i].hg[o + j];
    }
    for (int f = 0; f < 2; f++) {
        if (f) setenv("VRAM_OPTIM_KERNEL", "old", 1);
        else setenv("VRAM_OPTIM_KERNEL", "vec", 1);
        double got = gpu.rt->k->sum_squares(count, dts, ns, xs);
        CHECK_OK(vram_runtime_sync(gpu.rt));
        CHECK(fabs(got - want) <= 1e-6 * want, "sum of squares (%s kernel): %.17g, the double sum %.17g",
              f ? "old" : "vector", got, want);
    }
    unsetenv("VRAM_OPTIM_KERNEL");
    for (int i = 0; i < count; i++) release(&bs[i]);
    free(bs), free(dts), free(ns), free(xs);
}

int main(void) {
    if (vram_device_open("cuda", &gpu.dev) != VRAM_OK) check_skip(vram_last_error());
    vram_device_close(gpu.dev);
    gpu.dev = NULL;
    if (!open_side(&gpu, "cuda")) return check_done();
    const vram_dtype B = VRAM_DTYPE_BF16, H = VRAM_DTYPE_F16, N = VRAM_DTYPE_F32;
    const item odd[] = {
        {1, 0, 0, B},       {3, 0, 0, B},    {7, 1, 0, B},    {4097, 0, 0, B}, {0, 0, 0, B},     {1000005, 0, 0, B},
        {4096, 0, 0, N},    {4095, 1, 0, B}, {8195, 0, 1, B}, {768, 0, 0, B},  {2304, 3, 0, N},  {12288, 0, 0, B},
        {5, 2, 0, B},       {65536, 1, 0, B},
    };
    const item halves[] = {{4097, 0, 0, H}, {1000005, 0, 0, H}, {3, 1, 0, H}, {8192, 0, 0, N}};
    const item none[] = {{1, 0, 0, N}, {4099, 0, 0, N}, {262147, 0, 0, N}, {7, 1, 0, N}};
    int n_odd = (int)(sizeof odd / sizeof *odd);
    step_args adamw = {1e-3, 0.9, 0.95, 1e-8, 0.1, 1, 1, 3}, clipped = adamw, adam = adamw;
    clipped.gcoef = 0.37;
    adam.decoupled = 0, adam.gcoef = 0.5, adam.step = 1;
    test_case("AdamW, odd sizes, bf16 copies", odd, n_odd, &adamw, NULL, 0);
    test_case("AdamW, odd sizes, gcoef 0.37", odd, n_odd, &clipped, NULL, 0);
    test_case("Adam (coupled decay), gcoef 0.5, step 1", odd, n_odd, &adam, NULL, 0);
    test_case("AdamW, f16 copies", halves, 4, &clipped, NULL, 0);
    test_case("AdamW, no kept copies", none, 4, &adamw, NULL, 0);
    vram_tensor *flag = NULL;
    int64_t one[1] = {1};
    CHECK_OK(vram_tensor_new(gpu.rt, VRAM_DTYPE_I32, 1, one, VRAM_TAG_TEMPORARY, &flag));
    if (flag) {
        CHECK_OK(vram_tensor_fill(flag, 1));
        test_case("AdamW, skip flag set", odd, n_odd, &clipped, flag, 1);
        test_case("AdamW, skip flag set, f16 copies", halves, 4, &adamw, flag, 1);
        CHECK_OK(vram_tensor_fill(flag, 0));
        test_case("AdamW, skip flag clear", odd, n_odd, &clipped, flag, 0);
        vram_tensor_free(flag);
    }
    test_sum_squares(odd, n_odd);
    test_sum_squares(none, 4);
    setenv("VRAM_OPTIM_KERNEL", "bogus", 1); /* a bad value: the runtime's sticky error names it */
    double s = gpu.rt->k->sum_squares(1, (vram_dtype[]){VRAM_DTYPE_F32}, (int64_t[]){0}, (const void *[]){NULL});
    unsetenv("VRAM_OPTIM_KERNEL");
    CHECK(isnan(s), "VRAM_OPTIM_KERNEL=bogus: sum of squares %g, expected NaN", s);
    vram_status st = vram_runtime_sync(gpu.rt);
    CHECK(st != VRAM_OK && strstr(vram_last_error(), "VRAM_OPTIM_KERNEL=bogus"), "VRAM_OPTIM_KERNEL=bogus: %s (%s)",
          vram_status_str(st), vram_last_error());
    close_side(&gpu);
    return check_done();
}
