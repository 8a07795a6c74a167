/* ops_mixed.c — mixed precision: what an op does when its activations are f16/bf16 and its
 * parameters f32 (the model casts its activations once, after the embeddings).
 *
 * The rules are autocast's: products run in the activations' 16-bit dtype on the device's
 * low-precision slot (fp32 accumulation); the f32 weights are cast for each product into a
 * temporary, or, for parameters that ask for it (vram_gpt_config.keep_lowp_weights), kept as a
 * 16-bit copy that the multi-tensor Adam rewrites as it updates the f32 master; weight and bias
 * gradients come out of the product in f32, so the master weights, their gradients and the
 * optimizer state stay f32. Layer norm and the loss compute in fp32 from 16-bit inputs (their
 * statistics are f32). A device without the low-precision slots (the CPU) refuses 16-bit
 * activations with a message.
 */
#include <string.h>

#include "rt_internal.h"

int vram_dtype_is_lowp(vram_dtype dt) { return dt == VRAM_DTYPE_F16 || dt == VRAM_DTYPE_BF16; }

vram_dtype vram_stat_dtype(vram_dtype dt) { return vram_dtype_is_lowp(dt) ? VRAM_DTYPE_F32 : dt; }

vram_status vram_check_float_lowp(const char *op, const vram_tensor *t) {
    if (t && vram_dtype_is_lowp(t->dtype)) {
        if (t->rt->k->matmul_lowp) return VRAM_OK;
        return vram_error(VRAM_ERR_UNSUPPORTED, "%s: %s tensors need a device with low-precision kernels (the GPU); the %s "
                          "device computes in f32 or f64", op, vram_dtype_name(t->dtype), t->rt->k->name);
    }
    return vram_check_float(op, t);
}

vram_status vram_check_param_dtype(const char *op, const vram_tensor *x, const vram_tensor *p) {
    vram_status s = vram_check_float_lowp(op, x);
    if (s != VRAM_OK) return s;
    if (vram_dtype_is_lowp(x->dtype) && p && p->dtype == VRAM_DTYPE_F32) return VRAM_OK;
    return vram_check_same_dtype(op, x, p);
}

/* ---- the f32 residual stream (vram_gpt_config.residual_f32) ---- */

/* Autocast keeps the residual stream f32: layer norm reads it and gives its 16-bit output to
 * the product after it, and the products' 16-bit outputs are added to it in f32. */
vram_status vram_check_norm_dtype(const char *op, const vram_tensor *x, vram_dtype dt) {
    if (dt == x->dtype) return VRAM_OK;
    if (x->dtype != VRAM_DTYPE_F32 || !vram_dtype_is_lowp(dt))
        return vram_error(VRAM_ERR_UNSUPPORTED, "%s: a %s output from a %s input: the output is the input's dtype, or "
                          "f16/bf16 from an f32 input (mixed precision)", op, vram_dtype_name(dt), vram_dtype_name(x->dtype));
    vram_tensor tmp = {.rt = x->rt, .dtype = dt};
    vram_status s = vram_check_float_lowp(op, &tmp);
    if (s == VRAM_OK && !x->rt->k->layer_norm_mixed)
        return vram_error(VRAM_ERR_UNSUPPORTED, "%s: the %s device has no layer norm from f32 to %s", op, x->rt->k->name,
                          vram_dtype_name(dt));
    return s;
}

static vram_status mixed_add_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_status s = VRAM_OK; /* g is f32, the sum's dtype: rounded once for the 16-bit operand */
    for (int i = 0; i < 2 && s == VRAM_OK; i++) {
        if (!vram_node_needs(n, i)) continue;
        if ((vram_dtype)n->ip[i] == g->dtype) gin[i] = vram_tensor_retain(g);
        else s = vram_tensor_cast(g, (vram_dtype)n->ip[i], VRAM_TAG_TEMPORARY, &gin[i]);
    }
    return s;
}

vram_status vram_mixed_add(vram_tensor *a, vram_tensor *b, vram_tensor **out) {
    char sa[96], sb[96];
    vram_tensor *hi = a->dtype == VRAM_DTYPE_F32 ? a : b, *lo = hi == a ? b : a;
    if (!vram_shape_equal(a, b))
        return vram_error(VRAM_ERR_SHAPE, "add: an f32 and a %s tensor add only at one shape (no broadcasting across "
                          "dtypes): %s and %s", vram_dtype_name(lo->dtype), SHAPE_STR(a, sa), SHAPE_STR(b, sb));
    vram_status s = vram_check_float_lowp("add", lo);
    vram_tensor *y = NULL;
    if (s == VRAM_OK) s = vram_tensor_empty(a->rt, VRAM_DTYPE_F32, a->ndim, a->shape, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) return s;
    vram_kview vo, vh, vl;
    vram_kview_of(y, &vo);
    vram_kview_of(hi, &vh);
    vram_kview_of(lo, &vl);
    a->rt->k->binary(VRAM_BIN_ADD, &vo, &vh, &vl); /* the kernel reads b's dtype from its view */
    vram_tensor *in[2] = {a, b};
    if (vram_should_record(2, in)) {
        vram_node *n = vram_node_attach(y, "add", mixed_add_backward, 2, in);
        if (!n) s = vram_error(VRAM_ERR_HOST_MEMORY, "add: out of host memory for the graph");
        else n->ip[0] = a->dtype, n->ip[1] = b->dtype;
    }
    return rt_finish(s, y, out);
}

/* ---- a differentiable cast ---- */

static vram_status to_dtype_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    return vram_tensor_cast(g, (vram_dtype)n->ip[0], VRAM_TAG_TEMPORARY, &gin[0]);
}

vram_status vram_to_dtype(vram_tensor *x, vram_dtype dt, vram_tensor **out) {
    if (!x || !out) return vram_error(VRAM_ERR_INVALID_ARG, "to_dtype: null argument");
    vram_tensor tmp = {.rt = x->rt, .dtype = dt};
    vram_status s = vram_check_float_lowp("to_dtype", x);
    if (s == VRAM_OK) s = vram_check_float_lowp("to_dtype", &tmp);
    if (s != VRAM_OK) return s;
    vram_tensor *y = NULL;
    s = vram_tensor_cast(x, dt, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK && vram_should_record(1, &x)) {
        vram_node *n = vram_node_attach(y, "to_dtype", to_dtype_backward, 1, &x);
        if (!n) s = vram_error(VRAM_ERR_HOST_MEMORY, "to_dtype: out of host memory for the graph");
        else n->ip[0] = x->dtype;
    }
    return rt_finish(s, y, out);
}

/* ---- linear with 16-bit activations and f32 parameters ---- */

/* Products whose output width is not a multiple of 8 elements (GPT-2's 50257-token head) fall
 * off cuBLASLt's tensor-core layouts, so they run on a width padded to a multiple of 64: the
 * weight's cast gets zero rows, the output (and in backward the gradient) is copied between the
 * padded and the exact layout. The copies cost a fraction of what the misaligned product does. */
int64_t vram_mixed_padded_width(int64_t n) { return n % 8 ? (n + 63) / 64 * 64 : n; }

/* A [rows, width] view of the first `width` columns of a [rows, ld] tensor. */
static void columns_view(const vram_tensor *t, int64_t rows, int64_t width, int64_t ld, int64_t col0, vram_kview *v) {
    vram_kview_of(t, v);
    v->ndim = 2;
    v->shape[0] = rows, v->shape[1] = width;
    v->strides[0] = ld, v->strides[1] = 1;
    v->data += col0 * (int64_t)vram_dtype_size(t->dtype);
}

/* t's first rows cast into c (dt, its first dimension n_pad >= t's); the extra rows untouched. */
static void cast_rows_into(const vram_tensor *t, vram_tensor *c) {
    vram_kview dst, src;
    vram_kview_of(c, &dst);
    vram_kview_of(t, &src);
    dst.shape[0] = t->shape[0];
    t->rt->k->copy(&dst, &src);
}

/* t [n, ...] (f32) cast to dt with its first dimension zero-padded to n_pad, tagged `tag`. */
static vram_status cast_padded(const vram_tensor *t, vram_dtype dt, int64_t n_pad, vram_tag tag, vram_tensor **out) {
    if (t->shape[0] == n_pad) return vram_tensor_cast(t, dt, tag, out);
    int64_t shape[MAXD];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = n_pad;
    vram_tensor *p = NULL;
    vram_status s = vram_tensor_empty(t->rt, dt, t->ndim, shape, tag, &p);
    if (s != VRAM_OK) return s;
    int64_t row = vram_tensor_numel(t) / t->shape[0];
    size_t esz = vram_dtype_size(dt);
    t->rt->k->zero((char *)vram_tensor_data(p) + (size_t)(t->shape[0] * row) * esz, (size_t)((n_pad - t->shape[0]) * row) * esz);
    cast_rows_into(t, p);
    *out = p;
    return VRAM_OK;
}

/* A parameter's kept 16-bit copy, on its storage: made at first use (tagged as a parameter: it
 * lives as long as the weight), re-cast when the parameters changed since it was written. */
static vram_status kept_copy(vram_tensor *t, vram_dtype dt, int64_t n_pad, vram_tensor **out) {
    vram_storage *st = t->st;
    if (st->lowp && (st->lowp->dtype != dt || st->lowp->shape[0] != n_pad)) {
        vram_tensor_free(st->lowp); /* asked for in another layout: one kept copy per weight */
        st->lowp = NULL;
    }
    if (!st->lowp) {
        vram_status s = cast_padded(t, dt, n_pad, VRAM_TAG_PARAMETER, &st->lowp);
        if (s != VRAM_OK) return s;
    } else if (st->lowp_epoch != t->rt->param_epoch) {
        cast_rows_into(t, st->lowp);
    }
    st->lowp_epoch = t->rt->param_epoch;
    *out = vram_tensor_retain(st->lowp);
    return VRAM_OK;
}

vram_status vram_mixed_cast_padded(vram_tensor *t, vram_dtype dt, int64_t n_pad, vram_tensor **out) {
    if (t->st->keep_lowp && t->ndim > 0 && vram_tensor_is_contiguous(t) && t->offset == 0)
        return kept_copy(t, dt, n_pad, out); /* the weight and every alias of it */
    return cast_padded(t, dt, n_pad, VRAM_TAG_TEMPORARY, out);
}

vram_tensor *vram_mixed_take_gelu(vram_tensor *x) {
    vram_tensor *g = x->st->gelu;
    if (!g || x->offset || !vram_tensor_is_contiguous(x) || x->dtype != g->dtype ||
        vram_tensor_numel(x) != vram_tensor_numel(g))
        return NULL;
    x->st->gelu = NULL;
    return g;
}

vram_status vram_mixed_linear(vram_tensor *xc, vram_tensor *w, vram_tensor *bias, vram_tensor *y) {
    vram_runtime *rt = xc->rt;
    vram_dtype dt = xc->dtype;
    int64_t out_f = w->shape[0], in_f = w->shape[1], rows = vram_tensor_numel(xc) / (in_f ? in_f : 1);
    int64_t ld = vram_mixed_padded_width(out_f), ps[2] = {rows, ld};
    vram_tensor *wl = NULL, *bl = NULL, *yp = NULL;
    vram_status s = vram_mixed_cast_padded(w, dt, ld, &wl);
    if (s == VRAM_OK && bias) s = vram_mixed_cast_padded(bias, dt, ld, &bl);
    if (s == VRAM_OK && ld != out_f) s = vram_tensor_empty(rt, dt, 2, ps, VRAM_TAG_TEMPORARY, &yp);
    if (s == VRAM_OK && w->st->gelu_epilogue && rt->k->matmul_lowp_gelu && !yp && out_f % 8 == 0 && !y->st->gelu) {
        /* y and GELU-tanh(y) from one product, the latter for the GELU op that follows */
        s = vram_tensor_empty_like(y, VRAM_TAG_TEMPORARY, &y->st->gelu);
        if (s == VRAM_OK)
            rt->k->matmul_lowp_gelu(rt, dt, rows, out_f, in_f, vram_tensor_data(xc), in_f, 1, vram_tensor_data(wl), 1, in_f,
                                    vram_tensor_data(y), vram_tensor_data(y->st->gelu), bl ? vram_tensor_data(bl) : NULL);
    } else if (s == VRAM_OK) /* y [rows, out] = x [rows, in] @ W^T */
        rt->k->matmul_lowp(rt, dt, dt, 1, rows, ld, in_f, vram_tensor_data(xc), 0, in_f, 1, vram_tensor_data(wl), 0, 1,
                           in_f, vram_tensor_data(yp ? yp : y), 0, bl ? vram_tensor_data(bl) : NULL);
    if (s == VRAM_OK && yp) {
        vram_kview dst, src;
        columns_view(y, rows, out_f, out_f, 0, &dst);
        columns_view(yp, rows, out_f, ld, 0, &src);
        rt->k->copy(&dst, &src);
    }
    vram_tensor_free(wl); /* freed in stream order: the product has read it */
    vram_tensor_free(bl);
    vram_tensor_free(yp);
    return s;
}

/* gc [rows, n] copied into a [rows, ld] tensor whose extra columns are zero. */
static vram_status pad_columns(vram_tensor *gc, int64_t rows, int64_t n, int64_t ld, vram_tensor **out) {
    int64_t ps[2] = {rows, ld};
    vram_status s = vram_tensor_empty(gc->rt, gc->dtype, 2, ps, VRAM_TAG_TEMPORARY, out);
    if (s != VRAM_OK) return s;
    vram_kview dst, src, pad;
    columns_view(*out, rows, n, ld, 0, &dst);
    columns_view(gc, rows, n, n, 0, &src);
    gc->rt->k->copy(&dst, &src);
    columns_view(*out, rows, ld - n, ld, n, &pad);
    gc->rt->k->fill(&pad, 0.0);
    return VRAM_OK;
}

vram_status vram_mixed_linear_backward(const vram_mixed_grads *want, vram_tensor *gc, vram_tensor *a, vram_tensor *w,
                                       vram_tensor **gx, vram_tensor **gw, vram_tensor **gb) {
    vram_runtime *rt = gc->rt;
    vram_dtype dt = gc->dtype;
    int64_t out_f = w->shape[0], in_f = w->shape[1], rows = vram_tensor_numel(gc) / (out_f ? out_f : 1);
    int64_t ld = vram_mixed_padded_width(out_f);
    vram_tensor *gp = NULL; /* g on the padded layout, where the product needs it */
    vram_status s = ld != out_f ? pad_columns(gc, rows, out_f, ld, &gp) : VRAM_OK;
    if (gp) gc = gp;
    int64_t os[1] = {out_f};
    int fused = want->gw && rt->k->matmul_lowp_wgrad;
    if (s == VRAM_OK && fused) { /* gW = g^T @ a and gb = g's column sums in one call */
        s = vram_tensor_empty(rt, w->dtype, 2, w->shape, VRAM_TAG_TEMPORARY, gw);
        if (s == VRAM_OK && want->gb) s = vram_tensor_empty(rt, w->dtype, 1, os, VRAM_TAG_TEMPORARY, gb);
        if (s == VRAM_OK)
            rt->k->matmul_lowp_wgrad(rt, dt, rows, out_f, in_f, vram_tensor_data(gc), ld, vram_tensor_data(a),
                                     vram_tensor_data(*gw), want->gb ? vram_tensor_data(*gb) : NULL);
    } else if (s == VRAM_OK && want->gw) { /* gW [out, in] (f32) = g^T [out, rows] @ a [rows, in] */
        s = vram_tensor_empty(rt, w->dtype, 2, w->shape, VRAM_TAG_TEMPORARY, gw);
        if (s == VRAM_OK)
            rt->k->matmul_lowp(rt, dt, w->dtype, 1, out_f, in_f, rows, vram_tensor_data(gc), 0, 1, ld, vram_tensor_data(a),
                               0, in_f, 1, vram_tensor_data(*gw), 0, NULL);
    }
    if (s == VRAM_OK && want->gb && !fused && rt->k->column_sum_lowp) { /* gb [out] (f32) = g's column sums */
        s = vram_tensor_empty(rt, w->dtype, 1, os, VRAM_TAG_TEMPORARY, gb);
        if (s == VRAM_OK) rt->k->column_sum_lowp(dt, rows, out_f, ld, vram_tensor_data(gc), vram_tensor_data(*gb));
    } else if (s == VRAM_OK && want->gb && !fused) { /* gb [out] (f32) = ones [1, rows] @ g [rows, out] */
        vram_tensor *ones = NULL;
        int64_t rs[2] = {1, rows};
        s = vram_tensor_empty(rt, dt, 2, rs, VRAM_TAG_TEMPORARY, &ones);
        if (s == VRAM_OK) s = vram_tensor_fill(ones, 1.0);
        if (s == VRAM_OK) s = vram_tensor_empty(rt, w->dtype, 1, os, VRAM_TAG_TEMPORARY, gb);
        if (s == VRAM_OK)
            rt->k->matmul_lowp(rt, dt, w->dtype, 1, 1, out_f, rows, vram_tensor_data(ones), 0, rows, 1, vram_tensor_data(gc),
                               0, ld, 1, vram_tensor_data(*gb), 0, NULL);
        vram_tensor_free(ones);
    }
    if (s == VRAM_OK && want->gx) { /* gx [rows, in] = g [rows, out] @ W [out, in] */
        vram_tensor *wl = NULL;
        s = vram_mixed_cast_padded(w, dt, ld, &wl);
        if (s == VRAM_OK) s = vram_tensor_empty(rt, dt, want->x_ndim, want->x_shape, VRAM_TAG_TEMPORARY, gx);
        if (s == VRAM_OK && want->dgelu_pre) /* times GELU's derivative at its input, in the epilogue */
            rt->k->matmul_lowp_dgelu(rt, dt, rows, in_f, ld, vram_tensor_data(gc), ld, 1, vram_tensor_data(wl), in_f, 1,
                                     vram_tensor_data(*gx), vram_tensor_data(want->dgelu_pre));
        else if (s == VRAM_OK)
            rt->k->matmul_lowp(rt, dt, dt, 1, rows, in_f, ld, vram_tensor_data(gc), 0, ld, 1, vram_tensor_data(wl), 0,
                               in_f, 1, vram_tensor_data(*gx), 0, NULL);
        vram_tensor_free(wl);
    }
    vram_tensor_free(gp);
    return s;
}
