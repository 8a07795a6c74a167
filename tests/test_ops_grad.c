/* test_ops_grad.c — every differentiable op's backward against central finite differences in
 * f64, across broadcasting and non-contiguous (transposed, sliced) inputs, plus the shape
 * errors ops return.
 *
 * Each case is a function from leaf tensors to an output; the check builds the scalar
 * L = sum(out * R) with a fixed random R, back-propagates, and compares every leaf element's
 * gradient with (L(x+h) - L(x-h)) / 2h. Views are taken inside the case functions, so the
 * non-contiguous paths are what is differentiated.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "vram/alloc.h"
#include "vram/autograd.h"
#include "vram/ops.h"

static vram_runtime *rt;

typedef vram_status (*case_fn)(vram_tensor **x, vram_tensor **out);

static vram_tensor *leaf(int nd, const int64_t *shape, double lo, double hi) {
    vram_tensor *t = NULL;
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F64, nd, shape, VRAM_TAG_PARAMETER, &t));
    double *p = vram_tensor_data(t);
    for (int64_t i = 0; i < vram_tensor_numel(t); i++) p[i] = lo + (hi - lo) * vram_runtime_uniform(rt);
    vram_tensor_set_requires_grad(t, 1);
    return t;
}

static double weighted_sum(vram_tensor *out, const double *r) {
    int64_t n = vram_tensor_numel(out);
    double vals[4096], s = 0;
    if (n > 4096) return NAN;
    vram_tensor_to_f64(out, vals);
    for (int64_t i = 0; i < n; i++) s += vals[i] * r[i];
    return s;
}

static uint64_t case_seed = 1234;

static void gradcheck(const char *name, case_fn fn, int n, vram_tensor **x) {
    vram_tensor *out = NULL, *rt_r = NULL, *prod = NULL, *loss = NULL;
    vram_runtime_seed(rt, case_seed);
    vram_status s = fn(x, &out);
    CHECK(s == VRAM_OK, "%s: forward failed: %s", name, vram_last_error());
    if (s != VRAM_OK) return;
    int64_t no = vram_tensor_numel(out);
    double r[4096];
    for (int64_t i = 0; i < no; i++) r[i] = 0.5 + vram_runtime_uniform(rt) * ((i % 3) ? 1.0 : -1.0);
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F64, vram_tensor_ndim(out), vram_tensor_shape(out), VRAM_TAG_TEMPORARY, r, &rt_r));
    CHECK_OK(vram_mul(out, rt_r, &prod));
    CHECK_OK(vram_sum(prod, &loss));
    CHECK_OK(vram_backward(loss, NULL));
    vram_tensor_free(loss);
    vram_tensor_free(prod);
    vram_tensor_free(rt_r);
    vram_tensor_free(out);
    double worst = 0;
    vram_no_grad_enter();
    for (int k = 0; k < n; k++) {
        vram_tensor *g = vram_tensor_grad(x[k]);
        CHECK(g != NULL, "%s: input %d got no gradient", name, k);
        if (!g) continue;
        double *p = vram_tensor_data(x[k]);
        double ga[4096];
        vram_tensor_to_f64(g, ga);
        for (int64_t i = 0; i < vram_tensor_numel(x[k]); i++) {
            double keep = p[i], h = 1e-6, lp, lm;
            p[i] = keep + h;
            vram_runtime_seed(rt, case_seed);
            fn(x, &out);
            lp = weighted_sum(out, r);
            vram_tensor_free(out);
            p[i] = keep - h;
            vram_runtime_seed(rt, case_seed);
            fn(x, &out);
            lm = weighted_sum(out, r);
            vram_tensor_free(out);
            p[i] = keep;
            double num = (lp - lm) / (2 * h), err = fabs(num - ga[i]) / (1.0 + fabs(num));
            if (err > worst) worst = err;
            if (err > 1e-5) {
                CHECK(err <= 1e-5, "%s: input %d element %lld: analytic %.9g, numeric %.9g", name, k, (long long)i, ga[i], num);
                k = n; /* one report per case */
                break;
            }
        }
    }
    vram_no_grad_exit();
    printf("%-28s max rel error %.2e\n", name, worst);
    for (int k = 0; k < n; k++) vram_tensor_free(x[k]);
}

#define SH(...) (const int64_t[]){__VA_ARGS__}

static vram_status c_add(vram_tensor **x, vram_tensor **o) { return vram_add(x[0], x[1], o); }
static vram_status c_sub(vram_tensor **x, vram_tensor **o) { return vram_sub(x[0], x[1], o); }
static vram_status c_mul(vram_tensor **x, vram_tensor **o) { return vram_mul(x[0], x[1], o); }
static vram_status c_div(vram_tensor **x, vram_tensor **o) { return vram_div(x[0], x[1], o); }
static vram_status c_mul_t(vram_tensor **x, vram_tensor **o) { /* transposed operand */
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 1, &t);
    if (s == VRAM_OK) s = vram_mul(t, x[1], o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_matmul(vram_tensor **x, vram_tensor **o) { return vram_matmul(x[0], x[1], o); }
static vram_status c_matmul_t(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], -1, -2, &t);
    if (s == VRAM_OK) s = vram_matmul(t, x[1], o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_linear(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 1, 2, &t);
    if (s == VRAM_OK) s = vram_linear(t, x[1], x[2], o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_gelu_linear(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 1, &t);
    if (s == VRAM_OK) s = vram_gelu_linear(t, x[1], x[2], o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_gelu_tanh_linear(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 1, &t);
    if (s == VRAM_OK) s = vram_gelu_tanh_linear(t, x[1], x[2], o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_ln_linear(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 1, &t);
    if (s == VRAM_OK) s = vram_layer_norm_linear(t, x[1], x[2], 1e-5, x[3], x[4], o);
    vram_tensor_free(t);
    return s;
}
/* The residual sum and layer_norm_linear of it (vram_add_layer_norm_linear_to): both outputs,
 * side by side, so that the gradient reaches the inputs through either. */
static vram_status c_add_ln_linear(vram_tensor **x, vram_tensor **o) {
    vram_tensor *h = NULL, *y = NULL;
    vram_status s = vram_add_layer_norm_linear_to(x[0], vram_tensor_retain(x[1]), x[2], x[3], 1e-5, x[4], x[5],
                                                  VRAM_DTYPE_F64, &h, &y);
    if (s == VRAM_OK) s = vram_concat(2, (vram_tensor *[]){y, h}, 1, o);
    vram_tensor_free(h);
    vram_tensor_free(y);
    return s;
}
static vram_status c_relu(vram_tensor **x, vram_tensor **o) { return vram_relu(x[0], o); }
static vram_status c_gelu(vram_tensor **x, vram_tensor **o) { return vram_gelu(x[0], o); }
static vram_status c_tanh(vram_tensor **x, vram_tensor **o) { return vram_tanh(x[0], o); }
static vram_status c_gelu_tanh(vram_tensor **x, vram_tensor **o) { return vram_gelu_tanh(x[0], o); }
static vram_status c_scale(vram_tensor **x, vram_tensor **o) { return vram_scale(x[0], -2.5, o); }
static vram_status c_softmax_t(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 1, &t);
    if (s == VRAM_OK) s = vram_softmax(t, o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_log_softmax(vram_tensor **x, vram_tensor **o) { return vram_log_softmax(x[0], o); }
static vram_status c_causal_softmax(vram_tensor **x, vram_tensor **o) { return vram_causal_softmax(x[0], o); }
static vram_tensor *targets;
static vram_status c_xent(vram_tensor **x, vram_tensor **o) { return vram_cross_entropy(x[0], targets, o); }
static vram_status c_layer_norm(vram_tensor **x, vram_tensor **o) { return vram_layer_norm(x[0], x[1], x[2], 1e-5, o); }
static vram_tensor *ids;
static vram_status c_embedding(vram_tensor **x, vram_tensor **o) { return vram_embedding(x[0], ids, o); }
static vram_status c_dropout(vram_tensor **x, vram_tensor **o) { return vram_dropout(x[0], 0.4, 1, o); }
static vram_status c_sum(vram_tensor **x, vram_tensor **o) { return vram_sum(x[0], o); }
static vram_status c_mean_sliced(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_slice(x[0], 1, 1, 5, 2, &t);
    if (s == VRAM_OK) s = vram_mean(t, o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_sum_dim(vram_tensor **x, vram_tensor **o) { return vram_sum_dim(x[0], 1, 0, o); }
static vram_status c_sum_dim_keep_t(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 2, &t);
    if (s == VRAM_OK) s = vram_sum_dim(t, 2, 1, o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_reshape_t(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 1, &t);
    if (s == VRAM_OK) s = vram_reshape(t, 2, SH(2, -1), o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_slice(vram_tensor **x, vram_tensor **o) { return vram_slice(x[0], 0, 1, 4, 2, o); }
static vram_status c_concat(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[1], 0, 1, &t);
    vram_tensor *xs[2] = {x[0], t};
    if (s == VRAM_OK) s = vram_concat(2, xs, 1, o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_contig(vram_tensor **x, vram_tensor **o) {
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 0, 1, &t);
    if (s == VRAM_OK) s = vram_contiguous(t, o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_attention(vram_tensor **x, vram_tensor **o) { return vram_causal_attention(x[0], x[1], x[2], o); }
static vram_status c_attention_qkv(vram_tensor **x, vram_tensor **o) { return vram_causal_attention_qkv(x[0], 3, o); }
static vram_status c_attention_qkv_t(vram_tensor **x, vram_tensor **o) { /* a non-contiguous qkv */
    vram_tensor *t = NULL;
    vram_status s = vram_transpose(x[0], 1, 2, &t);
    if (s == VRAM_OK) s = vram_causal_attention_qkv(t, 3, o);
    vram_tensor_free(t);
    return s;
}
static vram_status c_conv(vram_tensor **x, vram_tensor **o) { return vram_conv2d(x[0], x[1], x[2], 2, 1, o); }
static vram_status c_conv_nobias(vram_tensor **x, vram_tensor **o) { return vram_conv2d(x[0], x[1], NULL, 1, 0, o); }
static vram_status c_maxpool(vram_tensor **x, vram_tensor **o) { return vram_max_pool2d(x[0], 2, 2, o); }
static vram_status c_avgpool(vram_tensor **x, vram_tensor **o) { return vram_avg_pool2d(x[0], 2, 1, o); }
static vram_status c_chain(vram_tensor **x, vram_tensor **o) { /* a value used twice: gradients add */
    vram_tensor *a = NULL, *b = NULL;
    vram_status s = vram_tanh(x[0], &a);
    if (s == VRAM_OK) s = vram_mul(a, x[0], &b);
    if (s == VRAM_OK) s = vram_add(b, a, o);
    vram_tensor_free(a);
    vram_tensor_free(b);
    return s;
}

static void shape_errors(void) {
    vram_tensor *a = NULL, *b = NULL, *o = NULL;
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F32, 2, SH(2, 3), VRAM_TAG_TEMPORARY, &a));
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F32, 2, SH(4, 5), VRAM_TAG_TEMPORARY, &b));
    CHECK(vram_matmul(a, b, &o) == VRAM_ERR_SHAPE, "matmul mismatch not reported");
    CHECK(strstr(vram_last_error(), "matmul") && strstr(vram_last_error(), "[2, 3]") && strstr(vram_last_error(), "[4, 5]"),
          "detail: %s", vram_last_error());
    CHECK(vram_add(a, b, &o) == VRAM_ERR_SHAPE, "add mismatch not reported");
    CHECK(strstr(vram_last_error(), "add") && strstr(vram_last_error(), "[2, 3]") && strstr(vram_last_error(), "[4, 5]"),
          "detail: %s", vram_last_error());
    CHECK(vram_linear(a, b, NULL, &o) == VRAM_ERR_SHAPE, "linear mismatch not reported");
    CHECK(strstr(vram_last_error(), "linear") != NULL, "detail: %s", vram_last_error());
    CHECK(vram_reshape(a, 2, SH(4, 2), &o) == VRAM_ERR_SHAPE, "reshape mismatch not reported");
    vram_tensor *i8 = NULL;
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_I8, 2, SH(2, 3), VRAM_TAG_TEMPORARY, &i8));
    CHECK(vram_relu(i8, &o) == VRAM_ERR_UNSUPPORTED, "relu on i8 accepted");
    vram_tensor *bad_ids = NULL;
    int32_t v[2] = {0, 7};
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 1, SH(2), VRAM_TAG_TEMPORARY, v, &bad_ids));
    CHECK(vram_embedding(a, bad_ids, &o) == VRAM_ERR_INVALID_ARG, "embedding id out of range accepted");
    vram_tensor_free(a);
    vram_tensor_free(b);
    vram_tensor_free(i8);
    vram_tensor_free(bad_ids);
}

/* GPT-2's tanh GELU in f32 (the vectorised sigmoid form) against its tanh formula in f64, value
 * and gradient, over [-12, 12] (both tails included); and the f32 gradient against f32 central
 * differences. */
static double gelu_tanh_ref(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static void gelu_tanh_f32(void) {
    enum { N = 241 };
    float xs[N], ys[N], gs[N];
    for (int i = 0; i < N; i++) xs[i] = -12.0f + 0.1f * (float)i + 0.0123f;
    vram_tensor *x = NULL, *y = NULL, *loss = NULL;
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F32, 1, SH(N), VRAM_TAG_PARAMETER, xs, &x));
    vram_tensor_set_requires_grad(x, 1);
    CHECK_OK(vram_gelu_tanh(x, &y));
    CHECK_OK(vram_sum(y, &loss));
    CHECK_OK(vram_backward(loss, NULL));
    vram_tensor_read_host(y, ys);
    vram_tensor_read_host(vram_tensor_grad(x), gs);
    double worst_y = 0, worst_g = 0, worst_fd = 0;
    for (int i = 0; i < N; i++) {
        double xd = xs[i], h = 1e-5;
        double gref = (gelu_tanh_ref(xd + h) - gelu_tanh_ref(xd - h)) / (2 * h);
        double ey = fabs(ys[i] - gelu_tanh_ref(xd)) / (1e-3 + fabs(gelu_tanh_ref(xd))), eg = fabs(gs[i] - gref);
        float hf = 1.0f / 64, xp = xs[i] + hf, xm = xs[i] - hf, yp, ym;
        vram_tensor *tp = NULL, *tm = NULL, *op = NULL, *om = NULL;
        vram_no_grad_enter();
        CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F32, 1, SH(1), VRAM_TAG_TEMPORARY, &xp, &tp));
        CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F32, 1, SH(1), VRAM_TAG_TEMPORARY, &xm, &tm));
        CHECK_OK(vram_gelu_tanh(tp, &op));
        CHECK_OK(vram_gelu_tanh(tm, &om));
        vram_no_grad_exit();
        vram_tensor_read_host(op, &yp);
        vram_tensor_read_host(om, &ym);
        double efd = fabs(gs[i] - ((double)yp - ym) / (2.0 * hf));
        vram_tensor_free(tp), vram_tensor_free(tm), vram_tensor_free(op), vram_tensor_free(om);
        worst_y = ey > worst_y ? ey : worst_y;
        worst_g = eg > worst_g ? eg : worst_g;
        worst_fd = efd > worst_fd ? efd : worst_fd;
    }
    CHECK(worst_y < 2e-6, "f32 gelu_tanh differs from the f64 formula by %g (relative)", worst_y);
    CHECK(worst_g < 5e-6, "f32 gelu_tanh gradient differs from the f64 derivative by %g", worst_g);
    CHECK(worst_fd < 2e-3, "f32 gelu_tanh gradient differs from f32 central differences by %g", worst_fd);
    printf("%-28s max rel error %.2e, gradient %.2e (f32 differences %.2e)\n", "gelu_tanh f32", worst_y, worst_g, worst_fd);
    vram_tensor_free(loss);
    vram_tensor_free(y);
    vram_tensor_free(x);
}

/* The blocked, threaded f32 kernel against the plain f64 loop, with ragged edges and a
 * transposed operand, at sizes that take the threaded path. */
static void matmul_f32(void) {
    const int64_t M = 131, K = 300, N = 77;
    vram_tensor *a64 = leaf(2, SH(M, K), -1, 1), *b64 = leaf(2, SH(N, K), -1, 1);
    vram_tensor *a32 = NULL, *b32 = NULL, *bt64 = NULL, *bt32 = NULL, *c64 = NULL, *c32 = NULL;
    vram_no_grad_enter();
    CHECK_OK(vram_tensor_cast(a64, VRAM_DTYPE_F32, VRAM_TAG_TEMPORARY, &a32));
    CHECK_OK(vram_tensor_cast(b64, VRAM_DTYPE_F32, VRAM_TAG_TEMPORARY, &b32));
    CHECK_OK(vram_transpose(b64, 0, 1, &bt64));
    CHECK_OK(vram_transpose(b32, 0, 1, &bt32));
    CHECK_OK(vram_matmul(a64, bt64, &c64));
    CHECK_OK(vram_matmul(a32, bt32, &c32));
    static double r64[131 * 77], r32[131 * 77];
    vram_tensor_to_f64(c64, r64);
    vram_tensor_to_f64(c32, r32);
    double worst = 0;
    for (int64_t i = 0; i < M * N; i++) worst = fmax(worst, fabs(r64[i] - r32[i]));
    CHECK(worst < 1e-4, "f32 matmul differs from f64 by %g", worst);
    printf("%-28s max abs error %.2e\n", "matmul f32 blocked", worst);
    /* A transposed (packed path) against A row-major (read in place): the same numbers */
    vram_tensor *at32 = NULL, *at32c = NULL, *a2 = NULL, *c2 = NULL;
    CHECK_OK(vram_transpose(a32, 0, 1, &at32));
    CHECK_OK(vram_contiguous(at32, &at32c)); /* [K, M] in memory */
    CHECK_OK(vram_transpose(at32c, 0, 1, &a2)); /* [M, K] view with unit row stride */
    CHECK_OK(vram_matmul(a2, bt32, &c2));
    static double r2[131 * 77];
    vram_tensor_to_f64(c2, r2);
    double worst2 = 0;
    for (int64_t i = 0; i < M * N; i++) worst2 = fmax(worst2, fabs(r2[i] - r32[i]));
    CHECK(worst2 < 1e-4, "f32 matmul with a transposed A differs by %g", worst2);
    vram_tensor *more[4] = {at32, at32c, a2, c2};
    for (int i = 0; i < 4; i++) vram_tensor_free(more[i]);
    vram_no_grad_exit();
    vram_tensor *all[8] = {a64, b64, a32, b32, bt64, bt32, c64, c32};
    for (int i = 0; i < 8; i++) vram_tensor_free(all[i]);
}

static void dtypes(void) {
    /* f16 / bf16 round trips and the per-dtype element sizes. */
    double vals[4] = {1.0, -2.5, 0.333251953125, 65504.0};
    vram_tensor *t = NULL, *h = NULL, *b = NULL, *back = NULL;
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F64, 1, SH(4), VRAM_TAG_TEMPORARY, vals, &t));
    CHECK_OK(vram_tensor_cast(t, VRAM_DTYPE_F16, VRAM_TAG_TEMPORARY, &h));
    CHECK_OK(vram_tensor_cast(h, VRAM_DTYPE_F64, VRAM_TAG_TEMPORARY, &back));
    double out[4];
    vram_tensor_to_f64(back, out);
    for (int i = 0; i < 4; i++) CHECK(out[i] == vals[i], "f16 round trip %g -> %g", vals[i], out[i]);
    vram_tensor_free(back);
    CHECK_OK(vram_tensor_cast(t, VRAM_DTYPE_BF16, VRAM_TAG_TEMPORARY, &b));
    CHECK_OK(vram_tensor_cast(b, VRAM_DTYPE_F64, VRAM_TAG_TEMPORARY, &back));
    vram_tensor_to_f64(back, out);
    CHECK(out[0] == 1.0 && out[1] == -2.5 && fabs(out[2] - 0.333251953125) < 2e-3 && out[3] == 65536.0,
          "bf16: %g %g %g %g", out[0], out[1], out[2], out[3]);
    CHECK(vram_dtype_size(VRAM_DTYPE_BF16) == 2 && vram_dtype_size(VRAM_DTYPE_I64) == 8 && vram_dtype_size(VRAM_DTYPE_U8) == 1,
          "dtype sizes");
    CHECK(vram_tensor_storage_bytes(h) == 8, "f16 storage %zu", vram_tensor_storage_bytes(h));
    vram_tensor_free(t);
    vram_tensor_free(h);
    vram_tensor_free(b);
    vram_tensor_free(back);
}

/* Mixed precision's f32 residual stream (a 16-bit branch added to f32, layer norm from f32 to 16
 * bits): what the CPU, which has no low-precision kernels, and bad arguments get — one message and
 * no tensor; and an output dtype equal to the input's is the plain op, bit for bit. */
static void residual_f32_refusals(void) {
    vram_tensor *x = NULL, *xb = NULL, *row = NULL, *w = NULL, *bias = NULL, *lw = NULL, *x64 = NULL, *o = NULL, *p = NULL;
    float ones[4] = {1, 1, 1, 1}, zeros[4] = {0}, v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)(0.1 * i * i - 1);
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F32, 2, SH(3, 4), VRAM_TAG_TEMPORARY, v, &x));
    CHECK_OK(vram_tensor_cast(x, VRAM_DTYPE_BF16, VRAM_TAG_TEMPORARY, &xb));
    CHECK_OK(vram_tensor_cast(x, VRAM_DTYPE_F64, VRAM_TAG_TEMPORARY, &x64));
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_BF16, 1, SH(4), VRAM_TAG_TEMPORARY, &row));
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F32, 1, SH(4), VRAM_TAG_TEMPORARY, ones, &w));
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F32, 1, SH(4), VRAM_TAG_TEMPORARY, zeros, &bias));
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_F32, 2, SH(5, 4), VRAM_TAG_TEMPORARY, &lw));
    CHECK(vram_add(x, row, &o) == VRAM_ERR_SHAPE && !o, "f32 + bf16 broadcast accepted");
    CHECK(strstr(vram_last_error(), "add only at one shape") && strstr(vram_last_error(), "[3, 4] and [4]"), "detail: %s",
          vram_last_error());
    CHECK(vram_add(xb, x, &o) == VRAM_ERR_UNSUPPORTED && !o, "bf16 + f32 on the CPU accepted");
    CHECK(strstr(vram_last_error(), "add: bf16 tensors need a device with low-precision kernels"), "detail: %s",
          vram_last_error());
    CHECK(vram_layer_norm_to(x, w, bias, 1e-5, VRAM_DTYPE_BF16, &o) == VRAM_ERR_UNSUPPORTED && !o,
          "layer norm to bf16 on the CPU accepted");
    CHECK(strstr(vram_last_error(), "layer_norm: bf16 tensors need a device with low-precision kernels"), "detail: %s",
          vram_last_error());
    CHECK(vram_layer_norm_to(x64, w, bias, 1e-5, VRAM_DTYPE_F16, &o) == VRAM_ERR_UNSUPPORTED && !o, "f64 to f16 accepted");
    CHECK(strstr(vram_last_error(), "a f16 output from a f64 input") && strstr(vram_last_error(), "from an f32 input"),
          "detail: %s", vram_last_error());
    CHECK(vram_layer_norm_linear_to(x, w, bias, 1e-5, lw, NULL, VRAM_DTYPE_I32, &o) == VRAM_ERR_UNSUPPORTED && !o,
          "layer_norm_linear to i32 accepted");
    CHECK(strstr(vram_last_error(), "layer_norm_linear: a i32 output from a f32 input"), "detail: %s", vram_last_error());
    CHECK(vram_layer_norm_linear_to(x, w, bias, 1e-5, lw, NULL, VRAM_DTYPE_BF16, &o) == VRAM_ERR_UNSUPPORTED && !o,
          "layer_norm_linear to bf16 on the CPU accepted");
    /* the output in the input's dtype: vram_layer_norm itself */
    CHECK_OK(vram_layer_norm_to(x, w, bias, 1e-5, VRAM_DTYPE_F32, &o));
    CHECK_OK(vram_layer_norm(x, w, bias, 1e-5, &p));
    if (o && p) {
        float a[12], b[12];
        vram_tensor_read_host(o, a);
        vram_tensor_read_host(p, b);
        CHECK(vram_tensor_dtype(o) == VRAM_DTYPE_F32 && !memcmp(a, b, sizeof a), "layer_norm_to f32 differs from layer_norm");
    }
    vram_tensor *all[] = {x, xb, row, w, bias, lw, x64, o, p};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vram_tensor_free(all[i]);
}

int main(void) {
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    CHECK_OK(vram_device_open("host", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    CHECK_OK(vram_runtime_new(a, 2, &rt));
    if (!rt) return check_done();
    vram_tensor *x[3];

    x[0] = leaf(2, SH(3, 4), -1, 1), x[1] = leaf(1, SH(4), -1, 1);
    gradcheck("add (broadcast [4])", c_add, 2, x);
    x[0] = leaf(3, SH(2, 3, 1), -1, 1), x[1] = leaf(2, SH(3, 4), -1, 1);
    gradcheck("sub (broadcast both)", c_sub, 2, x);
    x[0] = leaf(2, SH(3, 4), -1, 1), x[1] = leaf(2, SH(3, 1), -1, 1);
    gradcheck("mul (broadcast [3,1])", c_mul, 2, x);
    x[0] = leaf(2, SH(4, 3), -1, 1), x[1] = leaf(1, SH(4), -1, 1);
    gradcheck("mul (transposed input)", c_mul_t, 2, x);
    x[0] = leaf(2, SH(3, 4), -1, 1), x[1] = leaf(2, SH(1, 4), 1, 2);
    gradcheck("div (broadcast [1,4])", c_div, 2, x);
    x[0] = leaf(2, SH(3, 5), -1, 1), x[1] = leaf(2, SH(5, 4), -1, 1);
    gradcheck("matmul", c_matmul, 2, x);
    x[0] = leaf(3, SH(2, 3, 5), -1, 1), x[1] = leaf(2, SH(5, 4), -1, 1);
    gradcheck("matmul (batched @ 2-D)", c_matmul, 2, x);
    x[0] = leaf(3, SH(2, 5, 3), -1, 1), x[1] = leaf(3, SH(2, 5, 4), -1, 1);
    gradcheck("matmul (transposed, batched)", c_matmul_t, 2, x);
    x[0] = leaf(3, SH(2, 5, 3), -1, 1), x[1] = leaf(2, SH(4, 5), -1, 1), x[2] = leaf(1, SH(4), -1, 1);
    gradcheck("linear (transposed input)", c_linear, 3, x);
    x[0] = leaf(2, SH(5, 3), -2, 2), x[1] = leaf(2, SH(4, 5), -1, 1), x[2] = leaf(1, SH(4), -1, 1);
    gradcheck("gelu_linear (transposed)", c_gelu_linear, 3, x);
    x[0] = leaf(2, SH(5, 3), -3, 3), x[1] = leaf(2, SH(4, 5), -1, 1), x[2] = leaf(1, SH(4), -1, 1);
    gradcheck("gelu_tanh_linear (transposed)", c_gelu_tanh_linear, 3, x);
    {
        vram_tensor *y[5] = {leaf(2, SH(6, 3), -2, 2), leaf(1, SH(6), 0.5, 1.5), leaf(1, SH(6), -1, 1), leaf(2, SH(4, 6), -1, 1),
                             leaf(1, SH(4), -1, 1)};
        gradcheck("layer_norm_linear (transp.)", c_ln_linear, 5, y);
        vram_tensor *z[6] = {leaf(2, SH(3, 6), -2, 2), leaf(2, SH(3, 6), -2, 2), leaf(1, SH(6), 0.5, 1.5), leaf(1, SH(6), -1, 1),
                             leaf(2, SH(4, 6), -1, 1), leaf(1, SH(4), -1, 1)};
        gradcheck("add_layer_norm_linear", c_add_ln_linear, 6, z);
    }
    x[0] = leaf(2, SH(3, 4), 0.1, 1);
    {
        double *p = vram_tensor_data(x[0]);
        for (int i = 0; i < 12; i += 2) p[i] = -p[i]; /* both signs, away from the kink */
    }
    gradcheck("relu", c_relu, 1, x);
    x[0] = leaf(2, SH(3, 4), -3, 3);
    gradcheck("gelu", c_gelu, 1, x);
    x[0] = leaf(2, SH(4, 5), -4, 4);
    gradcheck("gelu_tanh", c_gelu_tanh, 1, x);
    x[0] = leaf(2, SH(3, 4), -2, 2);
    gradcheck("tanh", c_tanh, 1, x);
    x[0] = leaf(2, SH(3, 4), -2, 2);
    gradcheck("scale", c_scale, 1, x);
    x[0] = leaf(2, SH(5, 3), -2, 2);
    gradcheck("softmax (transposed input)", c_softmax_t, 1, x);
    x[0] = leaf(2, SH(3, 5), -2, 2);
    gradcheck("log_softmax", c_log_softmax, 1, x);
    x[0] = leaf(3, SH(2, 4, 4), -2, 2);
    gradcheck("causal_softmax", c_causal_softmax, 1, x);
    int64_t tv[4] = {0, 3, 4, 1};
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I64, 1, SH(4), VRAM_TAG_TEMPORARY, tv, &targets));
    x[0] = leaf(2, SH(4, 5), -2, 2);
    gradcheck("cross_entropy", c_xent, 1, x);
    x[0] = leaf(2, SH(3, 6), -2, 2), x[1] = leaf(1, SH(6), 0.5, 1.5), x[2] = leaf(1, SH(6), -1, 1);
    gradcheck("layer_norm", c_layer_norm, 3, x);
    int32_t iv[5] = {2, 0, 2, 3, 1};
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 1, SH(5), VRAM_TAG_TEMPORARY, iv, &ids));
    x[0] = leaf(2, SH(4, 3), -1, 1);
    gradcheck("embedding (repeated ids)", c_embedding, 1, x);
    x[0] = leaf(2, SH(4, 5), -1, 1);
    gradcheck("dropout (p=0.4, same mask)", c_dropout, 1, x);
    x[0] = leaf(2, SH(3, 4), -1, 1);
    gradcheck("sum", c_sum, 1, x);
    x[0] = leaf(2, SH(3, 6), -1, 1);
    gradcheck("mean (sliced, step 2)", c_mean_sliced, 1, x);
    x[0] = leaf(3, SH(2, 3, 4), -1, 1);
    gradcheck("sum_dim", c_sum_dim, 1, x);
    x[0] = leaf(3, SH(2, 3, 4), -1, 1);
    gradcheck("sum_dim keepdim (transposed)", c_sum_dim_keep_t, 1, x);
    x[0] = leaf(2, SH(3, 4), -1, 1);
    gradcheck("reshape (of a transpose)", c_reshape_t, 1, x);
    x[0] = leaf(2, SH(5, 3), -1, 1);
    gradcheck("slice", c_slice, 1, x);
    x[0] = leaf(2, SH(3, 2), -1, 1), x[1] = leaf(2, SH(4, 3), -1, 1);
    gradcheck("concat (transposed part)", c_concat, 2, x);
    x[0] = leaf(2, SH(3, 4), -1, 1);
    gradcheck("contiguous", c_contig, 1, x);
    x[0] = leaf(4, SH(1, 2, 4, 3), -1, 1), x[1] = leaf(4, SH(1, 2, 4, 3), -1, 1), x[2] = leaf(4, SH(1, 2, 4, 3), -1, 1);
    gradcheck("causal_attention", c_attention, 3, x);
    x[0] = leaf(3, SH(2, 5, 18), -1, 1);
    gradcheck("causal_attention_qkv (3 heads)", c_attention_qkv, 1, x);
    x[0] = leaf(3, SH(2, 18, 5), -1, 1);
    gradcheck("causal_attention_qkv (transp.)", c_attention_qkv_t, 1, x);
    x[0] = leaf(4, SH(2, 2, 5, 5), -1, 1), x[1] = leaf(4, SH(3, 2, 3, 3), -1, 1), x[2] = leaf(1, SH(3), -1, 1);
    gradcheck("conv2d (stride 2, pad 1)", c_conv, 3, x);
    x[0] = leaf(4, SH(1, 2, 4, 4), -1, 1), x[1] = leaf(4, SH(2, 2, 2, 2), -1, 1);
    gradcheck("conv2d (no bias)", c_conv_nobias, 2, x);
    x[0] = leaf(4, SH(2, 2, 4, 4), -1, 1);
    gradcheck("max_pool2d", c_maxpool, 1, x);
    x[0] = leaf(4, SH(2, 2, 4, 4), -1, 1);
    gradcheck("avg_pool2d (overlapping)", c_avgpool, 1, x);
    /* not square: a backward that swaps height and width would pass every case above */
    x[0] = leaf(4, SH(2, 2, 5, 7), -1, 1), x[1] = leaf(4, SH(3, 2, 2, 3), -1, 1), x[2] = leaf(1, SH(3), -1, 1);
    gradcheck("conv2d (5x7 input, 2x3 kernel)", c_conv, 3, x);
    x[0] = leaf(4, SH(2, 2, 4, 6), -1, 1);
    gradcheck("max_pool2d (4x6)", c_maxpool, 1, x);
    x[0] = leaf(4, SH(2, 2, 4, 5), -1, 1);
    gradcheck("avg_pool2d (4x5, overlapping)", c_avgpool, 1, x);
    x[0] = leaf(2, SH(3, 4), -1, 1);
    gradcheck("value used twice", c_chain, 1, x);
    vram_tensor_free(targets);
    vram_tensor_free(ids);

    shape_errors();
    dtypes();
    residual_f32_refusals();
    matmul_f32();
    gelu_tanh_f32();

    vram_stats st;
    vram_allocator_get_stats(a, &st);
    CHECK(st.allocated_bytes[VRAM_POOL_ALL].current == 0, "%lld bytes still allocated (a leak)",
          (long long)st.allocated_bytes[VRAM_POOL_ALL].current);
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return check_done();
}
