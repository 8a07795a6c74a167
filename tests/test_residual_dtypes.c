/* test_residual_dtypes.c — mixed precision's f32 residual stream (vram_gpt_config.residual_f32)
 * without a GPU: the dtypes and shapes of its graph on the planner's shape-only GPU runtime
 * (vram_plan_cuda_kernels: the GPU's low-precision slots, no values behind the addresses).
 *
 * The ops: an f32 tensor plus a 16-bit one is f32 either way round, layer norm and
 * layer_norm_linear from f32 give their 16-bit outputs, and backward hands every f32 leaf an f32
 * gradient of its shape (a 16-bit gradient reaching an f32 sum would fail the engine's
 * accumulation). Only add mixes dtypes. The GPT, in both residual modes: forward and backward
 * run, the loss and every gradient are f32 of the parameter's shape, and the f32 stream keeps
 * more activations for backward than the 16-bit one (the saved layer-norm inputs); out of
 * memory, `--residual lowp` is among the remedies planned.
 */
#include <stdio.h>
#include <string.h>

#include "../src/runtime/rt_internal.h"
#include "check.h"
#include "vram/alloc.h"
#include "vram/nn.h"
#include "vram/plan.h"

static vram_runtime *rt;
static vram_allocator *alloc;

static vram_tensor *leaf(vram_dtype dt, int nd, const int64_t *shape) {
    vram_tensor *t = NULL;
    CHECK_OK(vram_tensor_new(rt, dt, nd, shape, VRAM_TAG_PARAMETER, &t));
    if (t) vram_tensor_set_requires_grad(t, 1);
    return t;
}

static void expect(const char *what, vram_tensor *t, vram_dtype dt, int nd, const int64_t *shape) {
    CHECK(t != NULL, "%s: no tensor", what);
    if (!t) return;
    int same = vram_tensor_ndim(t) == nd;
    for (int i = 0; same && i < nd; i++) same = vram_tensor_shape(t)[i] == shape[i];
    CHECK(vram_tensor_dtype(t) == dt && same, "%s: %s of %d dims, expected %s", what, vram_dtype_name(vram_tensor_dtype(t)),
          vram_tensor_ndim(t), vram_dtype_name(dt));
}

static void ops(void) {
    const int64_t xs[3] = {2, 8, 256}, cs[1] = {256}, ws[2] = {24, 256}, ns[1] = {24}, ys[3] = {2, 8, 24};
    vram_tensor *x = leaf(VRAM_DTYPE_F32, 3, xs), *b32 = leaf(VRAM_DTYPE_F32, 3, xs), *lw = leaf(VRAM_DTYPE_F32, 1, cs),
                *lb = leaf(VRAM_DTYPE_F32, 1, cs), *w = leaf(VRAM_DTYPE_F32, 2, ws), *bias = leaf(VRAM_DTYPE_F32, 1, ns);
    vram_tensor *b = NULL, *h = NULL, *h2 = NULL, *n = NULL, *y = NULL, *p = NULL, *s1 = NULL, *s2 = NULL, *loss = NULL;
    CHECK_OK(vram_to_dtype(b32, VRAM_DTYPE_BF16, &b));
    CHECK_OK(vram_add(x, b, &h));
    expect("f32 + bf16", h, VRAM_DTYPE_F32, 3, xs);
    CHECK_OK(vram_add(b, h, &h2));
    expect("bf16 + f32", h2, VRAM_DTYPE_F32, 3, xs);
    CHECK(vram_mul(x, b, &p) != VRAM_OK && !p && strstr(vram_last_error(), "dtypes differ"),
          "mul of f32 and bf16 accepted (only add mixes dtypes): %s", vram_last_error());
    CHECK_OK(vram_layer_norm_to(h2, lw, lb, 1e-5, VRAM_DTYPE_BF16, &n));
    expect("layer_norm f32 -> bf16", n, VRAM_DTYPE_BF16, 3, xs);
    CHECK_OK(vram_layer_norm_linear_to(h2, lw, lb, 1e-5, w, bias, VRAM_DTYPE_BF16, &y));
    expect("layer_norm_linear f32 -> bf16", y, VRAM_DTYPE_BF16, 3, ys);
    CHECK_OK(vram_sum(n, &s1));
    CHECK_OK(vram_sum(y, &s2));
    CHECK_OK(vram_add(s1, s2, &loss));
    vram_status s = loss ? vram_backward(loss, NULL) : VRAM_ERR_INVALID_ARG;
    CHECK(s == VRAM_OK, "backward through the f32 stream: %s", vram_last_error());
    vram_tensor *leaves[6] = {x, b32, lw, lb, w, bias};
    const char *names[6] = {"x", "the bf16 operand's f32 leaf", "layer-norm weight", "layer-norm bias", "weight", "bias"};
    for (int i = 0; i < 6 && s == VRAM_OK; i++) {
        char what[96];
        snprintf(what, sizeof what, "gradient of %s", names[i]);
        expect(what, vram_tensor_grad(leaves[i]), VRAM_DTYPE_F32, vram_tensor_ndim(leaves[i]), vram_tensor_shape(leaves[i]));
    }
    vram_tensor *all[] = {x, b32, lw, lb, w, bias, b, h, h2, n, y, s1, s2, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vram_tensor_free(all[i]);
}

/* One training forward and backward of a small GPT in bf16; returns the activations' peak. */
static int64_t gpt_step(int residual_f32) {
    enum { B = 2, T = 64, V = 300 };
    vram_gpt_config cfg = {.layers = 2, .heads = 4, .width = 256, .vocab = V, .context = T, .tied = 1,
                           .init_std = 0.02, .precision = VRAM_DTYPE_BF16, .residual_f32 = residual_f32};
    const char *mode = residual_f32 ? "f32" : "16-bit";
    vram_gpt *g = NULL;
    vram_tensor *ids = NULL, *targets = NULL, *loss = NULL;
    vram_allocator_reset_peak_stats(alloc);
    CHECK_OK(vram_gpt_new(rt, &cfg, &g));
    if (!g) return 0;
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_I32, 2, (int64_t[]){B, T}, VRAM_TAG_OTHER, &ids));
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_I32, 2, (int64_t[]){B, T}, VRAM_TAG_OTHER, &targets));
    vram_status s = vram_gpt_forward(g, ids, targets, 1, NULL, &loss);
    CHECK(s == VRAM_OK, "gpt forward (residual %s): %s", mode, vram_last_error());
    if (s == VRAM_OK) {
        expect("gpt loss", loss, VRAM_DTYPE_F32, 0, NULL);
        s = vram_backward(loss, NULL);
        CHECK(s == VRAM_OK, "gpt backward (residual %s): %s", mode, vram_last_error());
    }
    vram_param_list *pl = vram_gpt_params(g);
    for (int i = 0; i < vram_param_list_count(pl) && s == VRAM_OK; i++) {
        vram_tensor *p = vram_param_list_get(pl, i);
        char what[128];
        snprintf(what, sizeof what, "gpt (residual %s): gradient of %s", mode, vram_param_list_name(pl, i));
        expect(what, vram_tensor_grad(p), VRAM_DTYPE_F32, vram_tensor_ndim(p), vram_tensor_shape(p));
    }
    vram_stats st;
    vram_allocator_get_stats(alloc, &st);
    vram_tensor_free(loss);
    vram_tensor_free(ids);
    vram_tensor_free(targets);
    vram_gpt_free(g);
    return st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.peak;
}

/* An f32 stream that does not fit: the 16-bit one is a remedy, planned below it. */
static void remedy(void) {
    vram_plan_config c;
    vram_plan_config_default(&c);
    c.gpt = (vram_gpt_config){.layers = 2, .heads = 4, .width = 256, .vocab = 256, .context = 128,
                              .precision = VRAM_DTYPE_BF16, .residual_f32 = 1};
    c.gpu = 1;
    c.batch = 16;
    c.capacity = 256ull << 20;
    vram_plan_result base;
    CHECK(vram_plan_run(&c, &base) == VRAM_OK, "bf16 plan with an f32 stream: %s", vram_last_error());
    vram_plan_remedy rem[8];
    int n = vram_plan_remedies(&c, rem, 8), at = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(rem[i].flags, "--residual lowp")) at = i;
    CHECK(at >= 0 && !rem[at].config.gpt.residual_f32 && rem[at].peak_reserved > 0 &&
              rem[at].peak_reserved <= base.peak_reserved && rem[at].result.peak_allocated < base.peak_allocated,
          "--residual lowp among %d remedies: at %d, peak allocated %lld of %lld", n, at,
          at >= 0 ? (long long)rem[at].result.peak_allocated : -1, (long long)base.peak_allocated);
    c.gpt.residual_f32 = 0;
    n = vram_plan_remedies(&c, rem, 8);
    for (int i = 0; i < n; i++) CHECK(strcmp(rem[i].flags, "--residual lowp"), "--residual lowp offered for a 16-bit stream");
}

int main(void) {
    vram_device *dev = NULL;
    CHECK_OK(vram_device_open("cudasim:8GiB", &dev));
    if (dev) CHECK_OK(vram_allocator_new(dev, NULL, &alloc));
    if (alloc) CHECK_OK(vram_runtime_new_shape_only_gpu(alloc, &rt));
    if (!rt) return check_done();
    ops();
    int64_t low = gpt_step(0), f32 = gpt_step(1);
    /* five layer-norm inputs (two a block, the final one) of B x T x C widen from 2 to 4 bytes */
    int64_t want = 5LL * 2 * 64 * 256 * 2;
    CHECK(f32 - low == want, "activations' peak: 16-bit stream %lld, f32 stream %lld bytes (expected %lld more)",
          (long long)low, (long long)f32, (long long)want);
    remedy();
    vram_runtime_free(rt);
    vram_stats st;
    vram_allocator_get_stats(alloc, &st);
    CHECK(st.allocated_bytes[VRAM_POOL_ALL].current == 0, "%lld bytes left allocated",
          (long long)st.allocated_bytes[VRAM_POOL_ALL].current);
    vram_allocator_destroy(alloc);
    vram_device_close(dev);
    return check_done();
}
