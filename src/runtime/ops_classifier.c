/* ops_classifier.c — a language model's head and loss as one op: cross_entropy(x W^T, targets).
 *
 * GPT-2's logits are [B*T, 50257]: in bf16 at B=8, T=1024 they are 0.8 GB, and their gradient
 * another 0.8 GB, the largest buffers of a step. With 16-bit x on a device with the fused
 * kernels (the GPU) this op never holds them: the rows run in chunks whose logits (a [R, V]
 * buffer reused by every chunk, padded to a tensor-core width) are turned in place into
 * softmax - onehot by one kernel that also adds up the loss, and x's and W's gradients are
 * computed from the chunk at once (x's into its rows, W's accumulated in f32). The node keeps
 * those two gradients for backward, which scales them by the seed (a loss scale, an
 * accumulation factor). The mean's 1/rows: in bf16, whose exponent range is f32's, the kernel
 * writes it into the logits' gradient, so that with the seed 1 that vram_backward makes for a
 * loss (vram_node.seed_one) backward has nothing to scale and nothing to read back; in fp16
 * the per-row gradient stays in [-1, 1] (representable) and backward divides by the row count.
 * Elsewhere (the CPU, f32 activations) it is vram_linear then vram_cross_entropy.
 */
#include "rt_internal.h"

enum { CHUNK_BYTES = 128 << 20 }; /* the logits buffer of one chunk of rows */

static vram_status composed(vram_tensor *x, vram_tensor *w, vram_tensor *targets, vram_tensor **out) {
    vram_tensor *logits = NULL;
    vram_status s = vram_linear(x, w, NULL, &logits);
    if (s == VRAM_OK) s = vram_cross_entropy(logits, targets, out);
    vram_tensor_free(logits);
    return s;
}

/* Whether the kernel writes the mean's 1/rows into the logits' gradient (the header says why bf16). */
static int mean_in_kernel(vram_dtype dt) { return dt == VRAM_DTYPE_BF16; }

static vram_status classifier_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    int folded = (int)n->ip[1];
    /* the seed vram_backward made is 1: no read of it (a host sync on a device) */
    double factor = folded && n->seed_one ? 1.0 : vram_tensor_item(g) / (folded ? 1.0 : (double)n->ip[0]);
    for (int i = 0; i < 2; i++) {
        if (!vram_node_needs(n, i)) continue;
        /* kept for this backward only: scaled in place; under grad_adopt handed over, so that
         * autograd takes it as the gradient (W's: the tied table's, 154 MB for GPT-2) uncopied */
        vram_tensor *t = rt->grad_adopt ? vram_node_take_saved(n, i) : vram_tensor_retain(n->saved[i]);
        if (factor != 1.0) rt->k->scale_inplace(t->dtype, vram_tensor_numel(t), vram_tensor_data(t), factor);
        gin[i] = t;
    }
    return VRAM_OK;
}

/* The chunked product and loss; gx, gw NULL under no_grad (gw [ld, C], the padded width). Returns
 * the mean loss. */
static vram_status run_chunks(vram_tensor *xc, vram_tensor *wl, vram_tensor *tc, int64_t V, vram_tensor *gx,
                              vram_tensor *gw, double *loss) {
    vram_runtime *rt = xc->rt;
    vram_dtype dt = xc->dtype;
    size_t esz = vram_dtype_size(dt), tsz = vram_dtype_size(tc->dtype);
    int64_t C = wl->shape[1], ld = wl->shape[0], rows = vram_tensor_numel(tc);
    int64_t R = (int64_t)(CHUNK_BYTES / ((size_t)ld * esz));
    if (R > rows) R = rows;
    if (R < 1) R = 1;
    int64_t bs[2] = {R, ld}, one = 1;
    double scale = !gx ? 0.0 : mean_in_kernel(dt) ? 1.0 / (double)rows : 1.0; /* the logits' gradient's factor */
    vram_tensor *buf = NULL, *sum = NULL;
    vram_status s = vram_tensor_empty(rt, dt, 2, bs, VRAM_TAG_TEMPORARY, &buf);
    if (s == VRAM_OK) s = vram_tensor_new(rt, VRAM_DTYPE_F64, 1, &one, VRAM_TAG_TEMPORARY, &sum);
    char *x = vram_tensor_data(xc), *t = vram_tensor_data(tc), *b = buf ? vram_tensor_data(buf) : NULL;
    for (int64_t c0 = 0; c0 < rows && s == VRAM_OK; c0 += R) {
        int64_t r = rows - c0 < R ? rows - c0 : R;
        char *xr = x + (size_t)(c0 * C) * esz;
        /* logits [r, ld] = x [r, C] @ W^T */
        rt->k->matmul_lowp(rt, dt, dt, 1, r, ld, C, xr, 0, C, 1, vram_tensor_data(wl), 0, 1, C, b, 0, NULL);
        rt->k->cross_entropy_fused(dt, r, V, ld, scale, b, t + (size_t)c0 * tsz, tc->dtype, vram_tensor_data(sum));
        if (!gx) continue;
        /* gx [r, C] = dlogits [r, ld] @ W [ld, C]; gW [V, C] (+)= dlogits^T [V, r] @ x [r, C] */
        rt->k->matmul_lowp(rt, dt, dt, 1, r, C, ld, b, 0, ld, 1, vram_tensor_data(wl), 0, C, 1,
                           (char *)vram_tensor_data(gx) + (size_t)(c0 * C) * esz, 0, NULL);
        rt->k->matmul_lowp(rt, dt, VRAM_DTYPE_F32, 1, ld, C, r, b, 0, 1, ld, xr, 0, C, 1, vram_tensor_data(gw), c0 > 0,
                           NULL);
    }
    if (s == VRAM_OK) *loss = vram_tensor_item(sum) / (double)rows;
    vram_tensor_free(buf);
    vram_tensor_free(sum);
    return s;
}

vram_status vram_linear_cross_entropy(vram_tensor *x, vram_tensor *w, vram_tensor *targets, vram_tensor **out) {
    char sx[96], sw[96], st[96];
    if (!x || !w || !targets || !out) return vram_error(VRAM_ERR_INVALID_ARG, "linear_cross_entropy: null argument");
    vram_runtime *rt = x->rt;
    if (!vram_dtype_is_lowp(x->dtype) || w->dtype != VRAM_DTYPE_F32 || !rt->k->cross_entropy_fused || !rt->k->matmul_lowp)
        return composed(x, w, targets, out);
    int64_t C = x->shape[x->ndim - 1], V = w->ndim == 2 ? w->shape[0] : 0;
    int ok = w->ndim == 2 && w->shape[1] == C && targets->ndim == x->ndim - 1 && V > 0;
    for (int i = 0; ok && i < targets->ndim; i++) ok = targets->shape[i] == x->shape[i];
    if (!ok)
        return vram_error(VRAM_ERR_SHAPE, "linear_cross_entropy: x %s, weight %s, targets %s: want x [.., C], weight [V, C], "
                          "targets x's shape without C", SHAPE_STR(x, sx), SHAPE_STR(w, sw), SHAPE_STR(targets, st));
    if (targets->dtype != VRAM_DTYPE_I32 && targets->dtype != VRAM_DTYPE_I64)
        return vram_error(VRAM_ERR_INVALID_ARG, "linear_cross_entropy: targets must be i32 or i64, not %s",
                          vram_dtype_name(targets->dtype));
    vram_tensor *xc = NULL, *tc = NULL, *wl = NULL, *gx = NULL, *gw = NULL, *y = NULL;
    vram_status s = vram_tensor_contig(x, &xc);
    if (s == VRAM_OK) s = vram_tensor_contig(targets, &tc);
    int64_t bad = s == VRAM_OK ? rt->k->find_bad_id(vram_tensor_numel(tc), vram_tensor_data(tc), tc->dtype, V) : -1;
    if (bad >= 0)
        s = vram_error(VRAM_ERR_INVALID_ARG, "linear_cross_entropy: target %lld is outside [0, %lld)", (long long)bad,
                       (long long)V);
    vram_tensor *in[2] = {x, w};
    int grad = vram_should_record(2, in);
    if (s == VRAM_OK) s = vram_mixed_cast_padded(w, x->dtype, vram_mixed_padded_width(V), &wl);
    if (s == VRAM_OK && grad) s = vram_tensor_empty(rt, x->dtype, x->ndim, x->shape, VRAM_TAG_TEMPORARY, &gx);
    /* gW on the padded width too, so that its product's M is a tensor-core multiple (the padding
     * rows see zero logit gradients); the gradient is the view of its first V rows */
    int64_t gws[2] = {wl->shape[0], C};
    vram_tensor *gwp = NULL;
    if (s == VRAM_OK && grad) s = vram_tensor_empty(rt, VRAM_DTYPE_F32, 2, gws, VRAM_TAG_TEMPORARY, &gwp);
    if (s == VRAM_OK && grad) {
        gw = vram_tensor_view_new(gwp, 2, w->shape, gwp->strides, 0);
        if (!gw) s = vram_error(VRAM_ERR_HOST_MEMORY, "linear_cross_entropy: out of host memory");
    }
    double loss = 0;
    if (s == VRAM_OK) s = run_chunks(xc, wl, tc, V, gx, gwp, &loss);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, VRAM_DTYPE_F32, 0, NULL, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK) s = vram_tensor_fill(y, loss);
    if (s == VRAM_OK && grad) {
        vram_node *n = vram_node_attach(y, "linear_cross_entropy", classifier_backward, 2, in);
        if (!n) {
            s = vram_error(VRAM_ERR_HOST_MEMORY, "linear_cross_entropy: out of host memory for the graph");
        } else {
            n->ip[0] = vram_tensor_numel(tc);
            n->ip[1] = mean_in_kernel(x->dtype);
            vram_node_save(n, gx);
            vram_node_save(n, gw);
        }
    }
    vram_tensor_free(xc), vram_tensor_free(tc), vram_tensor_free(wl), vram_tensor_free(gx), vram_tensor_free(gw);
    vram_tensor_free(gwp);
    return rt_finish(s, y, out);
}
