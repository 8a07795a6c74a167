/* test_gpu_ops.c — every op of the runtime on the GPU against the same op on the CPU, as
 * ggml's test-backend-ops does: random shapes, broadcasting and non-contiguous inputs, the
 * forward output and the gradient of every input (through sum(out * R) with a random R), and
 * the optimizers' updates. Two runtimes, one per device, get the same inputs from the host;
 * f32 results must agree to a relative error of 1e-4 (norm of the difference over the norm of
 * the CPU's), f64 to 1e-10. Mixed precision: the GPU gets the activations (specs marked .act)
 * in bf16 or f16 with f32 parameters and is compared with the CPU's f32 op, to 2e-2 (3e-2 for
 * gradients); this covers flash attention (head size 64) against the CPU's attention, and the f32
 * residual stream's ops (f32 in, 16-bit out; f32 + 16-bit) and GPT against the CPU's f32. Skipped
 * (77) where no GPU or driver exists.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "../../src/runtime/cuda_rt.h"
#include "runtime_sides.h"
#include "vram/alloc.h"
#include "vram/nn.h"
#include "vram/optim.h"

static side cpu, gpu;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}
static int64_t irand(int64_t lo, int64_t hi) { return lo + (int64_t)(urand() * (double)(hi - lo + 1)); }

/* An input: a float tensor (random in [-1, 1]) or ids below `limit`; `transposed` makes it a
 * non-contiguous view of a contiguous tensor with its last two dims swapped. */
typedef struct spec {
    int nd;
    int64_t shape[6];
    int ids;
    int64_t limit;
    int transposed;
    int grad;
    int act; /* an activation: 16-bit on the GPU in the mixed-precision cases */
} spec;

static vram_dtype gpu_act_dt = VRAM_DTYPE_F32; /* F16/BF16 while the mixed-precision cases run */

/* t cast to the GPU's activation dtype (t's reference taken; the cast keeps t's gradient). */
static vram_tensor *to_act(vram_tensor *t) {
    vram_tensor *c = NULL;
    CHECK_OK(vram_to_dtype(t, gpu_act_dt, &c));
    vram_tensor_free(t);
    return c;
}

static double *host_data(const spec *s, int64_t *n) {
    *n = 1;
    for (int d = 0; d < s->nd; d++) *n *= s->shape[d];
    double *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    for (int64_t i = 0; i < *n; i++) v[i] = s->ids ? (double)irand(0, s->limit - 1) : 2 * urand() - 1;
    return v;
}

static vram_tensor *make(side *sd, const spec *s, const double *v, vram_dtype dt) {
    vram_tensor *t = NULL, *base = NULL;
    int64_t shape[6];
    memcpy(shape, s->shape, sizeof shape);
    if (s->transposed) {
        int64_t x = shape[s->nd - 1];
        shape[s->nd - 1] = shape[s->nd - 2];
        shape[s->nd - 2] = x;
    }
    vram_dtype tdt = s->ids ? VRAM_DTYPE_I32 : dt;
    CHECK_OK(vram_tensor_new(sd->rt, tdt, s->nd, shape, VRAM_TAG_TEMPORARY, &base));
    /* fill in the base's order so that the view has the values v in its own order */
    vram_tensor *view = base;
    if (s->transposed) CHECK_OK(vram_transpose(base, s->nd - 2, s->nd - 1, &view));
    int64_t n = vram_tensor_numel(view), idx[6] = {0};
    double *ordered = malloc(sizeof *ordered * (size_t)(n ? n : 1));
    /* base element e (row-major over `shape`) is the view's element with the last two indices swapped */
    for (int64_t e = 0; e < n; e++) {
        int64_t r = e;
        for (int d = s->nd - 1; d >= 0; d--) idx[d] = r % shape[d], r /= shape[d];
        int64_t vi = 0;
        for (int d = 0; d < s->nd; d++) {
            int src = s->transposed && d >= s->nd - 2 ? (d == s->nd - 1 ? s->nd - 2 : s->nd - 1) : d;
            vi = vi * s->shape[d] + idx[src];
        }
        ordered[e] = v[vi];
    }
    if (tdt == VRAM_DTYPE_I32) {
        int32_t *h = malloc(sizeof *h * (size_t)(n ? n : 1));
        for (int64_t e = 0; e < n; e++) h[e] = (int32_t)ordered[e];
        vram_tensor_write_host(base, h);
        free(h);
    } else if (tdt == VRAM_DTYPE_F32) {
        float *h = malloc(sizeof *h * (size_t)(n ? n : 1));
        for (int64_t e = 0; e < n; e++) h[e] = (float)ordered[e];
        vram_tensor_write_host(base, h);
        free(h);
    } else {
        vram_tensor_write_host(base, ordered);
    }
    free(ordered);
    if (s->transposed) {
        vram_tensor_free(base);
        t = view;
    } else {
        t = base;
    }
    if (s->grad && !s->ids) CHECK_OK(vram_tensor_set_requires_grad(t, 1));
    return t;
}

static double *to_host(vram_tensor *t) {
    int64_t n = vram_tensor_numel(t);
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    CHECK_OK(vram_tensor_to_f64(t, v));
    return v;
}

static int compare(const char *what, vram_tensor *c, vram_tensor *g, double tol) {
    if (!c || !g) {
        CHECK(c == NULL && g == NULL, "%s: one side has no tensor (cpu %p, gpu %p)", what, (void *)c, (void *)g);
        return 0;
    }
    CHECK(vram_tensor_numel(c) == vram_tensor_numel(g), "%s: sizes differ", what);
    double *a = to_host(c), *b = to_host(g), num = 0, den = 0;
    int nan = 0;
    for (int64_t i = 0; i < vram_tensor_numel(c); i++) {
        if (isnan(b[i]) != isnan(a[i])) nan = 1;
        if (isinf(a[i]) || isinf(b[i])) {
            if (a[i] != b[i]) nan = 1;
            continue;
        }
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += a[i] * a[i];
    }
    double rel = sqrt(num) / (sqrt(den) + 1e-30);
    CHECK(!nan && rel <= tol, "%s: relative error %.3g (tolerance %.1g)%s", what, rel, tol, nan ? ", NaN/inf differ" : "");
    free(a);
    free(b);
    return rel <= tol;
}

typedef vram_status (*op_fn)(vram_tensor **in, const int64_t *p, vram_tensor **out);

/* Runs op on both devices with the same inputs, compares outputs and input gradients. */
static void run_case(const char *name, op_fn op, int n_in, const spec *specs, const int64_t *p, vram_dtype dt) {
    int mixed = gpu_act_dt != VRAM_DTYPE_F32;
    double tol = dt == VRAM_DTYPE_F64 ? 1e-10 : mixed ? 2e-2 : 1e-4, gtol = mixed ? 3e-2 : tol * 10;
    vram_tensor *leaf[8] = {0}; /* the GPU's f32 inputs behind the 16-bit casts */
    double *vals[8];
    for (int i = 0; i < n_in; i++) {
        int64_t n;
        vals[i] = host_data(&specs[i], &n);
    }
    vram_tensor *in[2][8], *out[2] = {0}, *grads[2][8] = {{0}};
    side *sides[2] = {&cpu, &gpu};
    uint64_t seed = (uint64_t)irand(1, 1 << 30);
    double *r = NULL;
    int64_t rn = 0;
    for (int k = 0; k < 2; k++) {
        vram_runtime_seed(sides[k]->rt, seed);
        for (int i = 0; i < n_in; i++) {
            in[k][i] = make(sides[k], &specs[i], vals[i], dt);
            if (k == 1 && mixed && specs[i].act) {
                leaf[i] = vram_tensor_retain(in[k][i]);
                in[k][i] = to_act(in[k][i]);
            }
        }
        vram_status s = op(in[k], p, &out[k]);
        CHECK(s == VRAM_OK, "%s on %s: %s (%s)", name, k ? "gpu" : "cpu", vram_status_str(s), vram_last_error());
        if (s != VRAM_OK) out[k] = NULL;
    }
    char what[160];
    snprintf(what, sizeof what, "%s (%s) output", name, vram_dtype_name(dt));
    int ok = compare(what, out[0], out[1], tol);
    int any_grad = 0;
    for (int i = 0; i < n_in; i++) any_grad |= specs[i].grad && !specs[i].ids;
    if (ok && any_grad && out[0] && vram_dtype_is_float(vram_tensor_dtype(out[0]))) {
        rn = vram_tensor_numel(out[0]);
        r = malloc(sizeof *r * (size_t)(rn ? rn : 1));
        for (int64_t i = 0; i < rn; i++) r[i] = 2 * urand() - 1;
        for (int k = 0; k < 2; k++) {
            vram_tensor *rt_ = NULL, *prod = NULL, *loss = NULL;
            spec rs = {.nd = vram_tensor_ndim(out[k])};
            memcpy(rs.shape, vram_tensor_shape(out[k]), sizeof(int64_t) * (size_t)rs.nd);
            int lowp = vram_tensor_dtype(out[k]) == VRAM_DTYPE_BF16 || vram_tensor_dtype(out[k]) == VRAM_DTYPE_F16;
            rt_ = make(sides[k], &rs, r, lowp ? VRAM_DTYPE_F32 : vram_tensor_dtype(out[k]));
            if (lowp) rt_ = to_act(rt_);
            CHECK_OK(vram_mul(out[k], rt_, &prod));
            CHECK_OK(vram_sum(prod, &loss));
            CHECK_OK(vram_backward(loss, NULL));
            for (int i = 0; i < n_in; i++)
                grads[k][i] = specs[i].grad && !specs[i].ids ? vram_tensor_grad(k && leaf[i] ? leaf[i] : in[k][i]) : NULL;
            vram_tensor_free(rt_);
            vram_tensor_free(prod);
            vram_tensor_free(loss);
        }
        for (int i = 0; i < n_in; i++) {
            if (!grads[0][i] && !grads[1][i]) continue;
            snprintf(what, sizeof what, "%s (%s) gradient of input %d", name, vram_dtype_name(dt), i);
            compare(what, grads[0][i], grads[1][i], gtol);
        }
    }
    for (int i = 0; i < n_in; i++) vram_tensor_free(leaf[i]);
    CHECK_OK(vram_runtime_sync(gpu.rt));
    for (int k = 0; k < 2; k++) {
        vram_tensor_free(out[k]);
        for (int i = 0; i < n_in; i++) vram_tensor_free(in[k][i]);
    }
    for (int i = 0; i < n_in; i++) free(vals[i]);
    free(r);
}

/* ---- the ops ---- */

static vram_status op_add(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_add(x[0], x[1], y); }
static vram_status op_sub(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_sub(x[0], x[1], y); }
static vram_status op_mul(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_mul(x[0], x[1], y); }
static vram_status op_div(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_div(x[0], x[1], y); }
static vram_status op_scale(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_scale(x[0], -1.75, y); }
static vram_status op_relu(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_relu(x[0], y); }
static vram_status op_gelu(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_gelu(x[0], y); }
static vram_status op_tanh(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_tanh(x[0], y); }
static vram_status op_gelu_tanh(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_gelu_tanh(x[0], y); }
static vram_status op_matmul(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_matmul(x[0], x[1], y); }
static vram_status op_linear(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    return vram_linear(x[0], x[1], p[0] ? x[2] : NULL, y);
}
static vram_status op_gelu_linear(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_gelu_linear(x[0], x[1], x[2], y);
}
static vram_status op_gelu_tanh_linear(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_gelu_tanh_linear(x[0], x[1], x[2], y);
}
/* The GPT's MLP with the tanh GELU: fc, whose weight asks for the GELU epilogue (as nn.c's does),
 * then gelu_tanh_linear (p[0] = 0) or gelu_tanh and a linear (p[0] = 1: GELU's output kept). In
 * mixed precision on the GPU the GELU comes out of fc's product (counted in epilogue_gelus). */
static int epilogue_gelus;
static vram_status op_mlp_tanh(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    vram_tensor *h = NULL, *a = NULL;
    x[1]->st->gelu_epilogue = 1;
    vram_status s = vram_linear(x[0], x[1], x[2], &h);
    if (s == VRAM_OK && h->st->gelu) epilogue_gelus++;
    if (s == VRAM_OK && p[0]) {
        s = vram_gelu_tanh(h, &a);
        if (s == VRAM_OK) s = vram_linear(a, x[3], x[4], y);
    } else if (s == VRAM_OK) {
        s = vram_gelu_tanh_linear(h, x[3], x[4], y);
    }
    if (s == VRAM_OK && h->st->gelu) s = vram_error(VRAM_ERR_INVALID_ARG, "the epilogue's GELU was left unused");
    vram_tensor_free(a);
    vram_tensor_free(h);
    return s;
}
static vram_status op_ln_linear(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_layer_norm_linear(x[0], x[1], x[2], 1e-5, x[3], x[4], y);
}
/* The residual sum and layer_norm_linear of it: one kernel for the add and the layer norm on the
 * GPU (p[0] = 1: VRAM_FUSED_ADD_LN=0, separate kernels), separate ops on the CPU; both outputs
 * side by side, so that the sum (the residual stream) is compared too. p[1] = 1: the branch is
 * a tensor only the op holds (x[1] * 1), whose block the layer norm's output overwrites. */
static vram_status op_add_ln_linear(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    vram_tensor *h = NULL, *c = NULL, *r = NULL;
    vram_status s = p && p[1] ? vram_scale(x[1], 1.0, &r) : VRAM_OK;
    if (!r) r = vram_tensor_retain(x[1]);
    if (p && p[0]) setenv("VRAM_FUSED_ADD_LN", "0", 1);
    if (s == VRAM_OK)
        s = vram_add_layer_norm_linear_to(x[0], r, x[2], x[3], 1e-5, x[4], x[5], vram_tensor_dtype(x[0]), &h, &c);
    else
        vram_tensor_free(r);
    unsetenv("VRAM_FUSED_ADD_LN");
    if (s == VRAM_OK) s = vram_concat(2, (vram_tensor *[]){c, h}, vram_tensor_ndim(h) - 1, y);
    vram_tensor_free(h);
    vram_tensor_free(c);
    return s;
}
static vram_status op_softmax(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_softmax(x[0], y); }
static vram_status op_log_softmax(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_log_softmax(x[0], y); }
static vram_status op_causal_softmax(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_causal_softmax(x[0], y); }
static vram_status op_xent(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_cross_entropy(x[0], x[1], y); }
static vram_status op_linear_xent(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_linear_cross_entropy(x[0], x[1], x[2], y);
}
static vram_status op_layer_norm(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_layer_norm(x[0], x[1], x[2], 1e-5, y);
}
/* From an f32 input to the GPU's 16-bit activation dtype (mixed precision's f32 residual
 * stream); the CPU's op stays f32. */
static vram_dtype out_dt(vram_tensor *x) { return vram_tensor_runtime(x) == gpu.rt ? gpu_act_dt : vram_tensor_dtype(x); }
static vram_status op_layer_norm_f32in(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_layer_norm_to(x[0], x[1], x[2], 1e-5, out_dt(x[0]), y);
}
static vram_status op_ln_linear_f32in(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_layer_norm_linear_to(x[0], x[1], x[2], 1e-5, x[3], x[4], out_dt(x[0]), y);
}
static vram_status op_embedding(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_embedding(x[0], x[1], y); }
static vram_status op_dropout(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_dropout(x[0], 0.3, 1, y); }
static vram_status op_sum(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_sum(x[0], y); }
static vram_status op_mean(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_mean(x[0], y); }
static vram_status op_sum_dim(vram_tensor **x, const int64_t *p, vram_tensor **y) { return vram_sum_dim(x[0], (int)p[0], (int)p[1], y); }
static vram_status op_transpose_copy(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], (int)p[0], (int)p[1], &t);
    if (s == VRAM_OK) s = vram_contiguous(t, y);
    vram_tensor_free(t);
    return s;
}
static vram_status op_slice_concat(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    vram_tensor *a = NULL, *b = NULL;
    vram_status s = vram_slice(x[0], (int)p[0], 0, p[1], 1, &a);
    if (s == VRAM_OK) s = vram_slice(x[0], (int)p[0], p[1], p[2], 1, &b);
    if (s == VRAM_OK) s = vram_concat(2, (vram_tensor *[]){b, a}, (int)p[0], y);
    vram_tensor_free(a);
    vram_tensor_free(b);
    return s;
}
static vram_status op_attention(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    (void)p;
    return vram_causal_attention(x[0], x[1], x[2], y);
}
static vram_status op_attention_qkv(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    return vram_causal_attention_qkv(x[0], p[0], y);
}
static vram_status op_conv(vram_tensor **x, const int64_t *p, vram_tensor **y) {
    return vram_conv2d(x[0], x[1], x[2], (int)p[0], (int)p[1], y);
}
static vram_status op_maxpool(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_max_pool2d(x[0], 2, 2, y); }
static vram_status op_avgpool(vram_tensor **x, const int64_t *p, vram_tensor **y) { (void)p; return vram_avg_pool2d(x[0], 2, 2, y); }

#define SPEC(...) ((spec){__VA_ARGS__})

static void test_ops(vram_dtype dt, int trials) {
    for (int t = 0; t < trials; t++) {
        int64_t a = irand(1, 7), b = irand(1, 9), c = irand(2, 67), d = irand(1, 5);
        /* broadcasting: [a, 1, c] op [b, 1] -> [a, b, c] */
        spec bc[2] = {SPEC(.nd = 3, .shape = {a, 1, c}, .grad = 1), SPEC(.nd = 2, .shape = {b, 1}, .grad = 1)};
        run_case("add (broadcast)", op_add, 2, bc, NULL, dt);
        run_case("sub (broadcast)", op_sub, 2, bc, NULL, dt);
        run_case("mul (broadcast)", op_mul, 2, bc, NULL, dt);
        spec same[2] = {SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1, .transposed = 1), SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1)};
        run_case("add (non-contiguous)", op_add, 2, same, NULL, dt);
        run_case("div", op_div, 2, same, NULL, dt);
        spec one[1] = {SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1, .transposed = t & 1)};
        run_case("scale", op_scale, 1, one, NULL, dt);
        run_case("relu", op_relu, 1, one, NULL, dt);
        run_case("gelu", op_gelu, 1, one, NULL, dt);
        run_case("tanh", op_tanh, 1, one, NULL, dt);
        run_case("gelu_tanh", op_gelu_tanh, 1, one, NULL, dt);
        run_case("sum", op_sum, 1, one, NULL, dt);
        run_case("mean", op_mean, 1, one, NULL, dt);
        int64_t sd[2] = {irand(0, 2), irand(0, 1)};
        run_case("sum_dim", op_sum_dim, 1, one, sd, dt);
        int64_t tp[2] = {0, 2};
        run_case("transpose + contiguous", op_transpose_copy, 1, one, tp, dt);
        int64_t sl[3] = {2, c / 2, c};
        run_case("slice + concat", op_slice_concat, 1, one, sl, dt);
        run_case("softmax", op_softmax, 1, one, NULL, dt);
        run_case("log_softmax", op_log_softmax, 1, one, NULL, dt);
        spec sq[1] = {SPEC(.nd = 3, .shape = {a, c, c}, .grad = 1)};
        run_case("causal_softmax", op_causal_softmax, 1, sq, NULL, dt);
        run_case("dropout", op_dropout, 1, one, NULL, dt);
        /* products: batched with a broadcast right operand, transposed operands */
        int64_t m = irand(1, 70), k = irand(1, 90), n = irand(1, 70);
        spec mm[2] = {SPEC(.nd = 4, .shape = {d, 2, m, k}, .grad = 1, .transposed = t & 1),
                      SPEC(.nd = 2, .shape = {k, n}, .grad = 1, .transposed = (t >> 1) & 1)};
        run_case("matmul (batched, broadcast)", op_matmul, 2, mm, NULL, dt);
        spec lin[3] = {SPEC(.nd = 3, .shape = {d, m, k}, .grad = 1), SPEC(.nd = 2, .shape = {n, k}, .grad = 1),
                       SPEC(.nd = 1, .shape = {n}, .grad = 1)};
        int64_t bias[1] = {t & 1};
        run_case("linear", op_linear, 3, lin, bias, dt);
        run_case("gelu_linear", op_gelu_linear, 3, lin, NULL, dt);
        run_case("gelu_tanh_linear", op_gelu_tanh_linear, 3, lin, NULL, dt);
        spec lnl[5] = {SPEC(.nd = 3, .shape = {d, m, k}, .grad = 1), SPEC(.nd = 1, .shape = {k}, .grad = 1),
                       SPEC(.nd = 1, .shape = {k}, .grad = 1), SPEC(.nd = 2, .shape = {n, k}, .grad = 1),
                       SPEC(.nd = 1, .shape = {n}, .grad = 1)};
        run_case("layer_norm_linear", op_ln_linear, 5, lnl, NULL, dt);
        spec aln[6] = {lnl[0], lnl[0], lnl[1], lnl[2], lnl[3], lnl[4]};
        int64_t fresh[2] = {0, t & 1};
        run_case("add_layer_norm_linear", op_add_ln_linear, 6, aln, fresh, dt);
        spec ln[3] = {SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1), SPEC(.nd = 1, .shape = {c}, .grad = 1),
                      SPEC(.nd = 1, .shape = {c}, .grad = 1)};
        run_case("layer_norm", op_layer_norm, 3, ln, NULL, dt);
        int64_t rows = irand(1, 40), classes = irand(2, 3000);
        spec xe[2] = {SPEC(.nd = 2, .shape = {rows, classes}, .grad = 1), SPEC(.nd = 1, .shape = {rows}, .ids = 1, .limit = classes)};
        run_case("cross_entropy", op_xent, 2, xe, NULL, dt);
        spec em[2] = {SPEC(.nd = 2, .shape = {b + 3, c}, .grad = 1), SPEC(.nd = 2, .shape = {a, 2 * b}, .ids = 1, .limit = b + 3)};
        run_case("embedding", op_embedding, 2, em, NULL, dt);
        int64_t T = irand(1, 40), D = irand(1, 24);
        spec at[3] = {SPEC(.nd = 4, .shape = {a, d, T, D}, .grad = 1), SPEC(.nd = 4, .shape = {a, d, T, D}, .grad = 1),
                      SPEC(.nd = 4, .shape = {a, d, T, D}, .grad = 1)};
        run_case("causal_attention", op_attention, 3, at, NULL, dt);
        int64_t heads[1] = {d};
        spec aq[1] = {SPEC(.nd = 3, .shape = {a, T, 3 * d * D}, .grad = 1)};
        run_case("causal_attention_qkv", op_attention_qkv, 1, aq, heads, dt);
        int64_t ci = irand(1, 3), co = irand(1, 4), hw = 2 * irand(2, 6);
        spec cv[3] = {SPEC(.nd = 4, .shape = {d, ci, hw, hw}, .grad = 1), SPEC(.nd = 4, .shape = {co, ci, 3, 3}, .grad = 1),
                      SPEC(.nd = 1, .shape = {co}, .grad = 1)};
        int64_t cp[2] = {1, t & 1};
        run_case("conv2d", op_conv, 3, cv, cp, dt);
        spec pl[1] = {SPEC(.nd = 4, .shape = {d, ci, hw, hw}, .grad = 1)};
        run_case("max_pool2d", op_maxpool, 1, pl, NULL, dt);
        run_case("avg_pool2d", op_avgpool, 1, pl, NULL, dt);
    }
}

static int64_t bgrad_cases, bgrad_fused; /* bias gradients asked of the product, and those from its epilogue */
static int64_t splitk_cases, splitk_chosen; /* weight gradients run with only split-K offered, and those split */

/* Mixed precision: 16-bit activations with f32 parameters on the GPU against f32 on the CPU. */
static void test_mixed(vram_dtype act, int trials) {
    gpu_act_dt = act;
    vram_dtype dt = VRAM_DTYPE_F32;
    for (int t = 0; t < trials; t++) {
        int64_t a = irand(1, 5), b = irand(1, 9), c = irand(2, 67), d = irand(1, 4);
        spec same[2] = {SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1, .act = 1), SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1, .act = 1)};
        run_case("mixed add", op_add, 2, same, NULL, dt);
        run_case("mixed gelu", op_gelu, 1, same, NULL, dt);
        /* the f32 residual stream: f32 + 16-bit (either order, one a transposed view) into f32;
         * layer norms from f32 rows to 16-bit ones, at widths of both kernel paths */
        int64_t wide = t & 1 ? 256 * irand(1, 4) : c;
        spec hl[2] = {SPEC(.nd = 3, .shape = {a, b, wide}, .grad = 1), SPEC(.nd = 3, .shape = {a, b, wide}, .grad = 1, .act = 1)};
        run_case("add f32 + 16-bit", op_add, 2, hl, NULL, dt);
        spec lh[2] = {SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1, .act = 1), SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1, .transposed = 1)};
        run_case("add 16-bit + f32 (transposed)", op_add, 2, lh, NULL, dt);
        spec lf[3] = {SPEC(.nd = 3, .shape = {a, b, wide}, .grad = 1), SPEC(.nd = 1, .shape = {wide}, .grad = 1),
                      SPEC(.nd = 1, .shape = {wide}, .grad = 1)};
        run_case("layer_norm f32 -> 16-bit", op_layer_norm_f32in, 3, lf, NULL, dt);
        int64_t m = irand(1, 70), k = 8 * irand(1, 12), n = 8 * irand(1, 9);
        spec lin[3] = {SPEC(.nd = 3, .shape = {d, m, k}, .grad = 1, .act = 1), SPEC(.nd = 2, .shape = {n, k}, .grad = 1),
                       SPEC(.nd = 1, .shape = {n}, .grad = 1)};
        int64_t bias[1] = {t & 1};
        run_case("mixed linear", op_linear, 3, lin, bias, dt);
        /* an output width off the multiples of 8: the padded layout, the bias gradient's scalar path */
        int64_t odd = 8 * irand(0, 8) + irand(1, 7), with_bias[1] = {1};
        spec lo[3] = {SPEC(.nd = 2, .shape = {m, k}, .grad = 1, .act = 1), SPEC(.nd = 2, .shape = {odd, k}, .grad = 1),
                      SPEC(.nd = 1, .shape = {odd}, .grad = 1)};
        run_case("mixed linear (odd width)", op_linear, 3, lo, with_bias, dt);
        /* the bias gradient out of the weight gradient's product (cuBLASLt's BGRADB), over few
         * rows and over many, and with it off (VRAM_BGRAD_EPILOGUE=0: the column-sum kernel) */
        int64_t fused0 = vram_cuda_epilogue_bgrads;
        run_case("mixed linear, bias gradient from the product", op_linear, 3, lin, with_bias, dt);
        spec tall[3] = {SPEC(.nd = 2, .shape = {2048 + 8 * irand(0, 4), k}, .grad = 1, .act = 1), lin[1], lin[2]};
        run_case("mixed linear, bias gradient over 2k rows", op_linear, 3, tall, with_bias, dt);
        bgrad_cases += 2, bgrad_fused += vram_cuda_epilogue_bgrads - fused0;
        setenv("VRAM_BGRAD_EPILOGUE", "0", 1);
        int64_t off0 = vram_cuda_epilogue_bgrads;
        run_case("mixed linear, bias gradient kernel (epilogue off)", op_linear, 3, tall, with_bias, dt);
        CHECK(vram_cuda_epilogue_bgrads == off0, "VRAM_BGRAD_EPILOGUE=0: a bias gradient still came from the epilogue");
        unsetenv("VRAM_BGRAD_EPILOGUE");
        /* the weight gradient's product with its sum over the rows split (cuBLASLt's split-K, which
         * the tuner may pick for long sums): only split algorithms offered, with and without the
         * bias gradient's epilogue */
        setenv("VRAM_CUBLASLT_SPLITK", "only", 1);
        int64_t split0 = vram_cuda_splitk_chosen, no_bias[1] = {0};
        spec tall_split[3] = {SPEC(.nd = 2, .shape = {4096 + 8 * irand(0, 64), k}, .grad = 1, .act = 1), lin[1], lin[2]};
        run_case("mixed linear, weight gradient split over K", op_linear, 3, tall_split, no_bias, dt);
        run_case("mixed linear, weight gradient split over K, bias", op_linear, 3, tall_split, with_bias, dt);
        splitk_cases += 2, splitk_chosen += vram_cuda_splitk_chosen - split0;
        unsetenv("VRAM_CUBLASLT_SPLITK");
        run_case("mixed gelu_linear", op_gelu_linear, 3, lin, NULL, dt);
        run_case("mixed gelu_tanh", op_gelu_tanh, 1, same, NULL, dt);
        /* the tanh GELU's derivative in the input gradient's product (cuBLASLt's DGELU) */
        run_case("mixed gelu_tanh_linear", op_gelu_tanh_linear, 3, lin, NULL, dt);
        /* fc with the GELU in its epilogue (GELU_AUX_BIAS), then the projection (any width) */
        int64_t po = irand(1, 40), mlp_one[1] = {0}, mlp_kept[1] = {1};
        spec mlp[5] = {SPEC(.nd = 3, .shape = {d, m, k}, .grad = 1, .act = 1), SPEC(.nd = 2, .shape = {n, k}, .grad = 1),
                       SPEC(.nd = 1, .shape = {n}, .grad = 1), SPEC(.nd = 2, .shape = {po, n}, .grad = 1),
                       SPEC(.nd = 1, .shape = {po}, .grad = 1)};
        run_case("mixed mlp, tanh GELU from fc's epilogue", op_mlp_tanh, 5, mlp, mlp_one, dt);
        run_case("mixed mlp, tanh GELU from fc's epilogue, kept", op_mlp_tanh, 5, mlp, mlp_kept, dt);
        setenv("VRAM_GELU_EPILOGUE", "0", 1); /* as where cuBLASLt has no such product: separate kernels */
        run_case("mixed mlp, tanh GELU, epilogue off", op_mlp_tanh, 5, mlp, mlp_one, dt);
        unsetenv("VRAM_GELU_EPILOGUE");
        spec mlp_odd[5] = {mlp[0], SPEC(.nd = 2, .shape = {odd, k}, .grad = 1), SPEC(.nd = 1, .shape = {odd}, .grad = 1),
                           SPEC(.nd = 2, .shape = {po, odd}, .grad = 1), SPEC(.nd = 1, .shape = {po}, .grad = 1)};
        run_case("mixed mlp, tanh GELU, odd width (unfused)", op_mlp_tanh, 5, mlp_odd, mlp_one, dt);
        spec lnl[5] = {SPEC(.nd = 3, .shape = {d, m, k}, .grad = 1, .act = 1), SPEC(.nd = 1, .shape = {k}, .grad = 1),
                       SPEC(.nd = 1, .shape = {k}, .grad = 1), SPEC(.nd = 2, .shape = {n, k}, .grad = 1),
                       SPEC(.nd = 1, .shape = {n}, .grad = 1)};
        run_case("mixed layer_norm_linear", op_ln_linear, 5, lnl, NULL, dt);
        /* the residual add and the layer norm in one kernel: widths off and on the one-warp-a-row
         * path (multiples of 256 up to 1024), and the separate kernels (VRAM_FUSED_ADD_LN=0) */
        int64_t kwide = t & 1 ? 256 * irand(1, 4) : k, sep[2] = {1, 0}, fresh[2] = {0, 1};
        spec aln[6] = {SPEC(.nd = 3, .shape = {d, m, kwide}, .grad = 1, .act = 1),
                       SPEC(.nd = 3, .shape = {d, m, kwide}, .grad = 1, .act = 1), SPEC(.nd = 1, .shape = {kwide}, .grad = 1),
                       SPEC(.nd = 1, .shape = {kwide}, .grad = 1), SPEC(.nd = 2, .shape = {n, kwide}, .grad = 1),
                       SPEC(.nd = 1, .shape = {n}, .grad = 1)};
        run_case("mixed add_layer_norm_linear (one kernel)", op_add_ln_linear, 6, aln, NULL, dt);
        run_case("mixed add_layer_norm_linear (one kernel, output over the branch)", op_add_ln_linear, 6, aln, fresh, dt);
        spec aln_warp[6] = {SPEC(.nd = 2, .shape = {m, 768}, .grad = 1, .act = 1),
                            SPEC(.nd = 2, .shape = {m, 768}, .grad = 1, .act = 1), SPEC(.nd = 1, .shape = {768}, .grad = 1),
                            SPEC(.nd = 1, .shape = {768}, .grad = 1), SPEC(.nd = 2, .shape = {n, 768}, .grad = 1),
                            SPEC(.nd = 1, .shape = {n}, .grad = 1)};
        run_case("mixed add_layer_norm_linear (one kernel, width 768)", op_add_ln_linear, 6, aln_warp, fresh, dt);
        run_case("mixed add_layer_norm_linear (separate kernels)", op_add_ln_linear, 6, aln, sep, dt);
        int64_t kw = t & 1 ? 256 * irand(1, 3) : k;
        spec lnf[5] = {SPEC(.nd = 3, .shape = {d, m, kw}, .grad = 1), SPEC(.nd = 1, .shape = {kw}, .grad = 1),
                       SPEC(.nd = 1, .shape = {kw}, .grad = 1), SPEC(.nd = 2, .shape = {n, kw}, .grad = 1),
                       SPEC(.nd = 1, .shape = {n}, .grad = 1)};
        run_case("layer_norm_linear f32 -> 16-bit product", op_ln_linear_f32in, 5, lnf, NULL, dt);
        spec ln[3] = {SPEC(.nd = 3, .shape = {a, b, c}, .grad = 1, .act = 1), SPEC(.nd = 1, .shape = {c}, .grad = 1),
                      SPEC(.nd = 1, .shape = {c}, .grad = 1)};
        run_case("mixed layer_norm", op_layer_norm, 3, ln, NULL, dt);
        /* layer norm's one-pass backward (VRAM_LN_KERNEL=fused, opt-in until it has run on a GPU):
         * widths that are multiples of 8 up to 1024 (a partial last vector round included) take
         * it, odd and wider ones the pair of kernels, as does every width under
         * VRAM_LN_KERNEL=old; 16-bit rows and f32 ones (the _mixed kernel) */
        int64_t lnw[] = {64, 768, 1024, 8 * irand(1, 127), 1600, 8 * irand(1, 20) + irand(1, 7)};
        for (int i = 0; i < 6; i++) {
            int64_t wd = lnw[i], f0 = vram_cuda_ln_fused_backwards, want = wd % 8 == 0 && wd <= 1024 ? 2 : 0;
            spec lw[3] = {SPEC(.nd = 3, .shape = {irand(1, 3), irand(1, 20), wd}, .grad = 1, .act = 1),
                          SPEC(.nd = 1, .shape = {wd}, .grad = 1), SPEC(.nd = 1, .shape = {wd}, .grad = 1)};
            spec lwf[3] = {SPEC(.nd = 3, .shape = {irand(1, 3), irand(1, 20), wd}, .grad = 1), lw[1], lw[2]};
            setenv("VRAM_LN_KERNEL", "fused", 1);
            run_case("mixed layer_norm (backward widths)", op_layer_norm, 3, lw, NULL, dt);
            run_case("layer_norm f32 -> 16-bit (backward widths)", op_layer_norm_f32in, 3, lwf, NULL, dt);
            CHECK(vram_cuda_ln_fused_backwards - f0 == want, "layer norm width %lld: %lld one-pass backwards, expected %lld",
                  (long long)wd, (long long)(vram_cuda_ln_fused_backwards - f0), (long long)want);
            setenv("VRAM_LN_KERNEL", "old", 1);
            f0 = vram_cuda_ln_fused_backwards;
            run_case("mixed layer_norm (backward widths, VRAM_LN_KERNEL=old)", op_layer_norm, 3, lw, NULL, dt);
            run_case("layer_norm f32 -> 16-bit (backward widths, VRAM_LN_KERNEL=old)", op_layer_norm_f32in, 3, lwf, NULL, dt);
            CHECK(vram_cuda_ln_fused_backwards == f0, "VRAM_LN_KERNEL=old: a layer norm backward still ran one-pass");
            unsetenv("VRAM_LN_KERNEL");
        }
        int64_t rows = irand(1, 40), classes = irand(2, 3000);
        spec xe[2] = {SPEC(.nd = 2, .shape = {rows, classes}, .grad = 1, .act = 1),
                      SPEC(.nd = 1, .shape = {rows}, .ids = 1, .limit = classes)};
        run_case("mixed cross_entropy", op_xent, 2, xe, NULL, dt);
        /* the fused classifier: a vocabulary off the tensor-core widths, two chunks of rows at GPT-2's */
        int64_t V = t & 1 ? 50257 : irand(2, 700), R = t & 1 ? 2000 : irand(1, 90);
        spec lx[3] = {SPEC(.nd = 2, .shape = {R, 64}, .grad = 1, .act = 1), SPEC(.nd = 2, .shape = {V, 64}, .grad = 1),
                      SPEC(.nd = 1, .shape = {R}, .ids = 1, .limit = V)};
        run_case("fused linear_cross_entropy", op_linear_xent, 3, lx, NULL, dt);
        /* flash attention (head size 64): T around the 64-row tiles. Not T = 1: there dQ and dK
         * are 0 in exact arithmetic, exactly 0 on the CPU and rounding noise on the GPU, which a
         * relative error cannot weigh; test_gpu_flash.c covers T = 1 against the whole gradient. */
        int64_t Ts[] = {17, 64, 65, 130, 200, 2}, T = Ts[t % 6], heads[1] = {irand(1, 3)};
        spec fa[1] = {SPEC(.nd = 3, .shape = {irand(1, 2), T, 3 * heads[0] * 64}, .grad = 1, .act = 1)};
        run_case("flash attention (qkv, head size 64)", op_attention_qkv, 1, fa, heads, dt);
        int64_t other[1] = {d}; /* head size 16: the composed path in 16 bits */
        spec aq[1] = {SPEC(.nd = 3, .shape = {a, irand(1, 40), 3 * d * 16}, .grad = 1, .act = 1)};
        run_case("mixed causal_attention_qkv (head size 16)", op_attention_qkv, 1, aq, other, dt);
    }
    gpu_act_dt = VRAM_DTYPE_F32;
}

/* The GPT in bf16 with the residual stream kept f32 (vram_gpt_config.residual_f32) and with it
 * in 16 bits, against the same GPT in f32 on the CPU from the same weights: one step's loss and
 * every parameter's gradient. Width 256: the layer norms' one-warp-a-row paths; head size 64:
 * flash attention. */
static void test_residual_f32_gpt(void) {
    enum { B = 2, T = 64, V = 300 };
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)irand(0, V - 1), targets[i] = (int32_t)irand(0, V - 1);
    for (int resid = 1; resid >= 0; resid--) {
        vram_gpt *g[2] = {NULL, NULL};
        vram_tensor *loss[2] = {NULL, NULL};
        side *sides[2] = {&cpu, &gpu};
        for (int k = 0; k < 2; k++) {
            vram_gpt_config cfg = {.layers = 2, .heads = 4, .width = 256, .vocab = V, .context = T, .tied = 1,
                                   .init_std = 0.02, .precision = k ? VRAM_DTYPE_BF16 : VRAM_DTYPE_F32, .residual_f32 = resid};
            vram_runtime_seed(sides[k]->rt, 4321);
            CHECK_OK(vram_gpt_new(sides[k]->rt, &cfg, &g[k]));
            vram_tensor *ti = NULL, *tt = NULL;
            CHECK_OK(vram_tensor_from_data(sides[k]->rt, VRAM_DTYPE_I32, 2, (int64_t[]){B, T}, VRAM_TAG_OTHER, ids, &ti));
            CHECK_OK(vram_tensor_from_data(sides[k]->rt, VRAM_DTYPE_I32, 2, (int64_t[]){B, T}, VRAM_TAG_OTHER, targets, &tt));
            vram_status s = vram_gpt_forward(g[k], ti, tt, 1, NULL, &loss[k]);
            CHECK(s == VRAM_OK, "gpt (residual %s) on %s: %s", resid ? "f32" : "16-bit", k ? "gpu" : "cpu", vram_last_error());
            if (s == VRAM_OK) CHECK_OK(vram_backward(loss[k], NULL));
            vram_tensor_free(ti);
            vram_tensor_free(tt);
        }
        if (loss[0] && loss[1]) {
            double *l0 = to_host(loss[0]), *l1 = to_host(loss[1]);
            CHECK(fabs(l1[0] - l0[0]) <= 1e-2 * fabs(l0[0]), "gpt bf16 (residual %s): loss %.6f, f32 on the CPU %.6f",
                  resid ? "f32" : "16-bit", l1[0], l0[0]);
            printf("gpt bf16, residual stream %s: loss %.6f, f32 on the CPU %.6f\n", resid ? "f32" : "16-bit", l1[0], l0[0]);
            free(l0);
            free(l1);
            vram_param_list *pl[2] = {vram_gpt_params(g[0]), vram_gpt_params(g[1])};
            for (int i = 0; i < vram_param_list_count(pl[0]); i++) {
                char what[160];
                snprintf(what, sizeof what, "gpt bf16 (residual %s): gradient of %s", resid ? "f32" : "16-bit",
                         vram_param_list_name(pl[0], i));
                compare(what, vram_tensor_grad(vram_param_list_get(pl[0], i)), vram_tensor_grad(vram_param_list_get(pl[1], i)),
                        5e-2);
            }
        }
        for (int k = 0; k < 2; k++) {
            vram_tensor_free(loss[k]);
            vram_gpt_free(g[k]);
        }
    }
}

/* Two steps of each optimizer, with gradients clipped, from the same parameters and grads. */
static void test_optimizers(void) {
    const char *names[] = {"sgd", "momentum", "adam", "adamw", "adagrad"};
    for (size_t o = 0; o < sizeof names / sizeof *names; o++) {
        spec ps = SPEC(.nd = 2, .shape = {37, 29}, .grad = 1);
        int64_t n;
        double *pv = host_data(&ps, &n), *g1 = host_data(&ps, &n), *g2 = host_data(&ps, &n);
        vram_tensor *p[3];
        side *sides[3] = {&cpu, &gpu, &gpu}; /* the third: clipping folded into the step (clip_step) */
        double norms[3] = {0};
        for (int k = 0; k < 3; k++) {
            vram_param_list *pl = NULL;
            CHECK_OK(vram_param_list_new(&pl));
            vram_tensor *t = NULL;
            CHECK_OK(vram_param_new(sides[k]->rt, pl, "w", 2, ps.shape, &t));
            float *h = malloc(sizeof *h * (size_t)n);
            for (int64_t i = 0; i < n; i++) h[i] = (float)pv[i];
            vram_tensor_write_host(t, h);
            vram_optim_config oc;
            CHECK_OK(vram_optim_config_parse(names[o], &oc));
            oc.weight_decay = 0.05;
            vram_optimizer *opt = NULL;
            CHECK_OK(vram_optimizer_new(sides[k]->rt, pl, &oc, &opt));
            for (int step = 0; step < 2; step++) {
                vram_tensor *r = make(sides[k], &SPEC(.nd = 2, .shape = {37, 29}), step ? g2 : g1, VRAM_DTYPE_F32);
                vram_tensor *prod = NULL, *loss = NULL;
                vram_param_list_zero_grad(pl, 1);
                CHECK_OK(vram_mul(t, r, &prod));
                CHECK_OK(vram_sum(prod, &loss));
                CHECK_OK(vram_backward(loss, NULL));
                if (k < 2) CHECK_OK(vram_clip_grad_norm(pl, 10.0, &norms[k]));
                if (k < 2) CHECK_OK(vram_optimizer_step(opt));
                else CHECK_OK(vram_optimizer_clip_step(opt, 10.0, &norms[k]));
                vram_tensor_free(r);
                vram_tensor_free(prod);
                vram_tensor_free(loss);
            }
            p[k] = vram_tensor_retain(t);
            vram_optimizer_free(opt);
            vram_param_list_free(pl);
            free(h);
        }
        char what[64];
        snprintf(what, sizeof what, "%s: parameters after 2 steps", names[o]);
        compare(what, p[0], p[1], 1e-5);
        CHECK(fabs(norms[0] - norms[1]) <= 1e-5 * norms[0], "%s: gradient norm cpu %g gpu %g", names[o], norms[0], norms[1]);
        CHECK(norms[1] > 10.0, "%s: the gradient norm %g does not reach the clipping bound", names[o], norms[1]);
        snprintf(what, sizeof what, "%s: clip_step against clip then step", names[o]);
        /* The same products, in the update instead of before it; the GPU's sum of squares adds its
         * blocks' partial sums atomically, so the norm (and through it the factor) may differ in
         * its last bits from run to run. */
        compare(what, p[1], p[2], 1e-6);
        CHECK(fabs(norms[2] - norms[1]) <= 1e-12 * norms[1], "%s: clip_step's norm %.17g, clip's %.17g", names[o],
              norms[2], norms[1]);
        for (int k = 0; k < 3; k++) vram_tensor_free(p[k]);
        free(pv);
        free(g1);
        free(g2);
    }
}

/* Bad ids on the GPU are found there and reported, as on the CPU. */
static void test_bad_ids(void) {
    vram_tensor *table = NULL, *ids = NULL, *y = NULL;
    CHECK_OK(vram_tensor_new(gpu.rt, VRAM_DTYPE_F32, 2, (int64_t[]){5, 3}, VRAM_TAG_TEMPORARY, &table));
    int32_t bad[4] = {0, 4, 5, 1};
    CHECK_OK(vram_tensor_from_data(gpu.rt, VRAM_DTYPE_I32, 1, (int64_t[]){4}, VRAM_TAG_TEMPORARY, bad, &ids));
    vram_status s = vram_embedding(table, ids, &y);
    CHECK(s == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "[2] = 5"), "bad id on the GPU: %s (%s)",
          vram_status_str(s), vram_last_error());
    vram_tensor_free(table);
    vram_tensor_free(ids);
    CHECK_OK(vram_runtime_sync(gpu.rt));
}

/* A launch the driver refuses (more threads a block than any GPU has) is a sticky error with the
 * kernel's name: sync reports it, later work is skipped, reads give zeros; nothing crashes. Last,
 * since the runtime stays failed. */
static void test_launch_failure(void) {
    vram_tensor *x = NULL, *y = NULL;
    CHECK_OK(vram_tensor_new(gpu.rt, VRAM_DTYPE_F32, 2, (int64_t[]){4, 8}, VRAM_TAG_TEMPORARY, &x));
    CHECK_OK(vram_tensor_new(gpu.rt, VRAM_DTYPE_F32, 2, (int64_t[]){4, 8}, VRAM_TAG_TEMPORARY, &y));
    int dt = VRAM_DTYPE_F32, log_ = 0;
    int64_t rows = 4, n = 8, causal = 0;
    void *out = vram_tensor_data(y), *in = vram_tensor_data(x);
    void *args[] = {&dt, &rows, &n, &causal, &log_, &out, &in};
    vram_cuda_launch(CK_SOFTMAX, 1, 4096, args);
    vram_status s = vram_runtime_sync(gpu.rt);
    CHECK(s == VRAM_ERR_DRIVER && strstr(vram_last_error(), "vk_softmax") && strstr(vram_last_error(), "failed to launch"),
          "a refused launch: %s (%s)", vram_status_str(s), vram_last_error());
    vram_tensor *z = NULL;
    CHECK_OK(vram_add(x, y, &z)); /* queued work after the error is skipped, not crashed */
    CHECK(vram_tensor_item(z) == 0.0, "a read after the error gives 0");
    CHECK(vram_runtime_sync(gpu.rt) == VRAM_ERR_DRIVER, "the error stays");
    vram_tensor_free(x);
    vram_tensor_free(y);
    vram_tensor_free(z);
}

/* A small GPT (cfg) trained `steps` AdamW steps on side sd from seed 1234 on ids/targets [B, T]:
 * each step's loss into losses; the trained wte.weight retained into *wte when wte is not NULL. */
static void train_small_gpt(side *sd, const vram_gpt_config *cfg, const int32_t *ids, const int32_t *targets, int64_t B,
                            int64_t T, int steps, double *losses, vram_tensor **wte) {
    vram_runtime_seed(sd->rt, 1234);
    vram_gpt *g = NULL;
    CHECK_OK(vram_gpt_new(sd->rt, cfg, &g));
    if (!g) return;
    vram_param_list *pl = vram_gpt_params(g);
    vram_optim_config oc;
    CHECK_OK(vram_optim_config_parse("adamw", &oc));
    vram_optimizer *opt = NULL;
    CHECK_OK(vram_optimizer_new(sd->rt, pl, &oc, &opt));
    vram_tensor *ti = NULL, *tt = NULL;
    CHECK_OK(vram_tensor_from_data(sd->rt, VRAM_DTYPE_I32, 2, (int64_t[]){B, T}, VRAM_TAG_OTHER, ids, &ti));
    CHECK_OK(vram_tensor_from_data(sd->rt, VRAM_DTYPE_I32, 2, (int64_t[]){B, T}, VRAM_TAG_OTHER, targets, &tt));
    for (int step = 0; step < steps; step++) {
        vram_tensor *loss = NULL;
        vram_param_list_zero_grad(pl, 1);
        CHECK_OK(vram_gpt_forward(g, ti, tt, 1, NULL, &loss));
        CHECK_OK(vram_backward(loss, NULL));
        CHECK_OK(vram_optimizer_step(opt));
        double *v = to_host(loss);
        losses[step] = v[0];
        free(v);
        vram_tensor_free(loss);
    }
    for (int i = 0; wte && i < vram_param_list_count(pl); i++)
        if (!strcmp(vram_param_list_name(pl, i), "wte.weight")) *wte = vram_tensor_retain(vram_param_list_get(pl, i));
    vram_tensor_free(ti);
    vram_tensor_free(tt);
    vram_optimizer_free(opt);
    vram_gpt_free(g);
}

/* Kept 16-bit weight copies (vram_gpt_config.keep_lowp_weights) change no number: a small GPT
 * trained in bf16 with them and without them, from the same seed on the same tokens, gives
 * the same losses and weights up to the order of atomic adds (the kept copy is the cast each
 * product would make, rewritten by the multi-tensor AdamW). Head size 64: flash attention runs too. */
static void test_kept_lowp_weights(void) {
    enum { B = 2, T = 64, V = 300, STEPS = 4 };
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)irand(0, V - 1), targets[i] = (int32_t)irand(0, V - 1);
    double losses[2][STEPS];
    vram_tensor *wte[2] = {NULL, NULL};
    for (int keep = 0; keep < 2; keep++) {
        vram_gpt_config cfg = {.layers = 2, .heads = 2, .width = 128, .vocab = V, .context = T, .tied = 1,
                               .init_std = 0.02, .precision = VRAM_DTYPE_BF16, .keep_lowp_weights = keep};
        train_small_gpt(&gpu, &cfg, ids, targets, B, T, STEPS, losses[keep], &wte[keep]);
    }
    /* Atomics (flash attention's dQ, the embedding's scatter onto the head's gradient) add in an
     * order that varies run to run: the two runs agree to that rounding, not bit for bit; a wrong
     * kept copy would differ by bf16's rounding (1e-3) or more. */
    for (int step = 0; step < STEPS; step++)
        CHECK(fabs(losses[0][step] - losses[1][step]) <= 1e-6 * fabs(losses[0][step]) && isfinite(losses[0][step]),
              "kept bf16 weights: step %d loss %.9g, cast each product %.9g", step + 1, losses[1][step], losses[0][step]);
    CHECK(losses[0][STEPS - 1] < losses[0][0], "kept bf16 weights: the loss did not fall (%g -> %g)", losses[0][0],
          losses[0][STEPS - 1]);
    CHECK(wte[0] && wte[1], "kept bf16 weights: no wte.weight parameter");
    if (wte[0] && wte[1]) compare("kept bf16 weights: wte after the steps", wte[0], wte[1], 1e-6);
    vram_tensor_free(wte[0]);
    vram_tensor_free(wte[1]);
}

/* The tanh GELU end to end: a small GPT trained in bf16 with the GELU in cuBLASLt's epilogues,
 * and with them off (VRAM_GELU_EPILOGUE=0: separate kernels), from the same weights on the same
 * tokens: the same losses to bf16's rounding, falling; its first loss as the CPU's f32 model's. */
static void test_tanh_gpt(void) {
    enum { B = 2, T = 64, V = 300, STEPS = 4 };
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)irand(0, V - 1), targets[i] = (int32_t)irand(0, V - 1);
    double losses[3][STEPS];
    vram_gpt_config cfg = {.layers = 2, .heads = 2, .width = 128, .vocab = V, .context = T, .tied = 1, .init_std = 0.02,
                           .precision = VRAM_DTYPE_BF16, .keep_lowp_weights = 1, .activation = VRAM_ACT_GELU_TANH};
    train_small_gpt(&gpu, &cfg, ids, targets, B, T, STEPS, losses[0], NULL);
    setenv("VRAM_GELU_EPILOGUE", "0", 1);
    train_small_gpt(&gpu, &cfg, ids, targets, B, T, STEPS, losses[1], NULL);
    unsetenv("VRAM_GELU_EPILOGUE");
    cfg.precision = VRAM_DTYPE_F32, cfg.keep_lowp_weights = 0;
    train_small_gpt(&cpu, &cfg, ids, targets, B, T, 1, losses[2], NULL);
    for (int step = 0; step < STEPS; step++)
        CHECK(fabs(losses[0][step] - losses[1][step]) <= 1e-2 * fabs(losses[1][step]) && isfinite(losses[0][step]),
              "tanh GELU GPT: step %d loss %.6g with the epilogues, %.6g without", step + 1, losses[0][step],
              losses[1][step]);
    CHECK(losses[0][STEPS - 1] < losses[0][0], "tanh GELU GPT: the loss did not fall (%g -> %g)", losses[0][0],
          losses[0][STEPS - 1]);
    CHECK(fabs(losses[0][0] - losses[2][0]) <= 1e-2 * losses[2][0], "tanh GELU GPT: first loss %.6g in bf16, %.6g on the CPU",
          losses[0][0], losses[2][0]);
    printf("tanh GELU GPT: losses %.5f -> %.5f (epilogues), %.5f -> %.5f (separate kernels); step 1 on the CPU %.5f\n",
           losses[0][0], losses[0][STEPS - 1], losses[1][0], losses[1][STEPS - 1], losses[2][0]);
}

/* VRAM_FEWER_LAUNCHES: a small tied GPT trained in bf16 with it on (the default) and off gives
 * the same losses and weights (to the atomics' order: layer-norm and embedding gradients), and
 * on queues at least two memsets fewer per layer norm and one per step (the embedding's zeroed
 * [V, C] buffer) and no more copies. */
static void test_fewer_launches(void) {
    enum { B = 2, T = 64, V = 300, C = 128, LAYERS = 2, STEPS = 3 };
    int32_t ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)irand(0, V - 1), targets[i] = (int32_t)irand(0, V - 1);
    double losses[2][STEPS];
    vram_tensor *wte[2] = {NULL, NULL};
    int64_t zeros[2], zero_bytes[2], copies[2];
    vram_gpt_config cfg = {.layers = LAYERS, .heads = 2, .width = C, .vocab = V, .context = T, .tied = 1,
                           .init_std = 0.02, .precision = VRAM_DTYPE_BF16, .keep_lowp_weights = 1};
    /* the pair of layer-norm backward kernels, where the weight and bias gradients' memsets go (the
     * one-pass kernel keeps them: it adds atomically; the layer-norm cases check that path) */
    setenv("VRAM_LN_KERNEL", "old", 1);
    for (int on = 0; on < 2; on++) {
        if (!on) setenv("VRAM_FEWER_LAUNCHES", "0", 1);
        int64_t z0 = vram_cuda_zeros, zb0 = vram_cuda_zero_bytes, c0 = vram_cuda_copies;
        train_small_gpt(&gpu, &cfg, ids, targets, B, T, STEPS, losses[on], &wte[on]);
        zeros[on] = vram_cuda_zeros - z0, zero_bytes[on] = vram_cuda_zero_bytes - zb0, copies[on] = vram_cuda_copies - c0;
        unsetenv("VRAM_FEWER_LAUNCHES");
    }
    for (int step = 0; step < STEPS; step++)
        CHECK(fabs(losses[0][step] - losses[1][step]) <= 1e-3 * fabs(losses[0][step]) && isfinite(losses[1][step]),
              "fewer launches: step %d loss %.9g, %.9g with them all", step + 1, losses[1][step], losses[0][step]);
    CHECK(wte[0] && wte[1], "fewer launches: no wte.weight parameter");
    if (wte[0] && wte[1]) compare("fewer launches: wte after the steps", wte[0], wte[1], 1e-3);
    int64_t ln_memsets = STEPS * 2 * (2 * LAYERS + 1); /* weight and bias gradients of every layer norm */
    CHECK(zeros[0] - zeros[1] >= ln_memsets + STEPS, "fewer launches: %lld memsets, %lld with them all (want %lld fewer)",
          (long long)zeros[1], (long long)zeros[0], (long long)(ln_memsets + STEPS));
    CHECK(zero_bytes[0] - zero_bytes[1] >= (int64_t)STEPS * V * C * 4, "fewer launches: %lld bytes zeroed, %lld with "
          "them all", (long long)zero_bytes[1], (long long)zero_bytes[0]);
    CHECK(copies[1] <= copies[0], "fewer launches: %lld copies, %lld with them all", (long long)copies[1],
          (long long)copies[0]);
    printf("fewer launches: %lld memsets (%lld bytes) and %lld copies in %d steps, against %lld (%lld bytes) and %lld\n",
           (long long)zeros[1], (long long)zero_bytes[1], (long long)copies[1], STEPS, (long long)zeros[0],
           (long long)zero_bytes[0], (long long)copies[0]);
    unsetenv("VRAM_LN_KERNEL");
    vram_tensor_free(wte[0]);
    vram_tensor_free(wte[1]);
}

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 3;
    if (vram_device_open("cuda", &gpu.dev) != VRAM_OK) check_skip(vram_last_error());
    vram_device_close(gpu.dev);
    gpu.dev = NULL;
    if (!open_side(&cpu, "host") || !open_side(&gpu, "cuda")) return check_done();
    test_ops(VRAM_DTYPE_F32, trials);
    test_ops(VRAM_DTYPE_F64, 1);
    test_mixed(VRAM_DTYPE_BF16, 2 * trials);
    test_mixed(VRAM_DTYPE_F16, trials);
    CHECK(epilogue_gelus > 0, "no mixed MLP got its GELU from fc's product (the GELU epilogue never ran)");
    /* (no failure where cuBLASLt has no BGRADB product: the kernel's sums were checked instead) */
    printf("bias gradients from cuBLASLt's BGRADB epilogue: %lld of %lld linear cases (%lld in all)\n",
           (long long)bgrad_fused, (long long)bgrad_cases, (long long)vram_cuda_epilogue_bgrads);
    /* (cuBLASLt may offer no split algorithm for a product: its results were checked all the same) */
    printf("weight gradients split over K by cuBLASLt: %lld of %lld cases with only splits offered (%lld in all)\n",
           (long long)splitk_chosen, (long long)splitk_cases, (long long)vram_cuda_splitk_chosen);
    test_optimizers();
    test_kept_lowp_weights();
    test_tanh_gpt();
    test_fewer_launches();
    test_bad_ids();
    test_residual_f32_gpt(); /* (before the launch failure, whose error stays) */
    test_launch_failure();
    close_side(&gpu);
    close_side(&cpu);
    return check_done();
}
