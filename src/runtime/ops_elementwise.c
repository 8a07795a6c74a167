/* ops_elementwise.c — broadcasting arithmetic (add, sub, mul, div, scale), activations (relu,
 * gelu, gelu_tanh, tanh) and dropout, with their backward functions, plus the helpers other ops share:
 * dtype checks and sum_to_shape (the reduction that undoes broadcasting in backward).
 *
 * Broadcasting builds, for each operand, a view over the output shape whose strides are 0 in
 * the dimensions it is stretched along; the binary kernel then needs no special cases.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

vram_status vram_check_float(const char *op, const vram_tensor *t) {
    if (!t) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null tensor", op);
    if (t->dtype != VRAM_DTYPE_F32 && t->dtype != VRAM_DTYPE_F64)
        return vram_error(VRAM_ERR_UNSUPPORTED, "%s: %s tensors are not supported (f32 or f64; cast first)", op,
                          vram_dtype_name(t->dtype));
    return VRAM_OK;
}

vram_status vram_check_same_dtype(const char *op, const vram_tensor *a, const vram_tensor *b) {
    vram_status s = vram_check_float_lowp(op, a);
    if (s == VRAM_OK) s = vram_check_float_lowp(op, b);
    if (s == VRAM_OK && a->dtype != b->dtype)
        return vram_error(VRAM_ERR_INVALID_ARG, "%s: dtypes differ (%s and %s)", op, vram_dtype_name(a->dtype),
                          vram_dtype_name(b->dtype));
    return s;
}

static vram_status broadcast_shape(const char *op, const vram_tensor *a, const vram_tensor *b, int *nd, int64_t *shape) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[96], sb[96];
            return vram_error(VRAM_ERR_SHAPE, "%s: shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)", op,
                              SHAPE_STR(a, sa), SHAPE_STR(b, sb), i, (long long)da, (long long)db);
        }
        shape[i] = da == 1 ? db : da;
    }
    *nd = n;
    return VRAM_OK;
}

/* A view of t over `shape` (t broadcasts to it): stride 0 where t is stretched. */
static void broadcast_view(const vram_tensor *t, int nd, const int64_t *shape, vram_kview *v) {
    v->data = vram_tensor_data(t);
    v->dtype = t->dtype;
    v->ndim = nd;
    for (int i = 0; i < nd; i++) {
        int it = t->ndim - nd + i;
        v->shape[i] = shape[i];
        v->strides[i] = (it < 0 || t->shape[it] == 1) ? 0 : t->strides[it];
    }
}

static vram_status binary_raw(const char *name, int op, vram_tensor *a, vram_tensor *b, vram_tensor **out) {
    vram_status s = vram_check_same_dtype(name, a, b);
    if (s != VRAM_OK) return s;
    int nd = 0;
    int64_t shape[MAXD] = {0};
    s = broadcast_shape(name, a, b, &nd, shape);
    if (s != VRAM_OK) return s;
    vram_tensor *y = NULL;
    s = vram_tensor_empty(a->rt, a->dtype, nd, shape, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) return s;
    vram_kview vo, va, vb;
    vram_kview_of(y, &vo);
    broadcast_view(a, nd, shape, &va);
    broadcast_view(b, nd, shape, &vb);
    a->rt->k->binary(op, &vo, &va, &vb);
    *out = y;
    return VRAM_OK;
}

vram_status vram_add_nograd(vram_tensor *a, vram_tensor *b, vram_tensor **out) {
    return binary_raw("add", VRAM_BIN_ADD, a, b, out);
}

vram_status vram_sum_to_shape(vram_tensor *g, int ndim, const int64_t *shape, vram_tensor **out) {
    int same = g->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = g->shape[i] == shape[i];
    if (same) {
        *out = vram_tensor_retain(g);
        return VRAM_OK;
    }
    vram_tensor *r = NULL;
    vram_status s = vram_tensor_new(g->rt, g->dtype, ndim, shape, VRAM_TAG_TEMPORARY, &r);
    if (s != VRAM_OK) return s;
    vram_kview dst, src;
    vram_kview_of(g, &src);
    broadcast_view(r, g->ndim, g->shape, &dst);
    g->rt->k->accumulate(&dst, &src);
    *out = r;
    return VRAM_OK;
}

static vram_status binary_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    int op = (int)n->ip[0];
    vram_tensor *a = n->n_saved > 0 ? n->saved[0] : NULL, *b = n->n_saved > 1 ? n->saved[1] : NULL;
    vram_status s = VRAM_OK;
    for (int i = 0; i < 2 && s == VRAM_OK; i++) {
        if (!vram_node_needs(n, i)) continue;
        vram_tensor *full = NULL, *t = NULL;
        switch (op) {
        case VRAM_BIN_ADD: full = vram_tensor_retain(g); break;
        case VRAM_BIN_SUB:
            if (i == 0) {
                full = vram_tensor_retain(g);
            } else {
                s = vram_tensor_empty_like(g, VRAM_TAG_TEMPORARY, &full);
                if (s == VRAM_OK) {
                    vram_tensor *gc = NULL;
                    s = vram_tensor_contig(g, &gc);
                    if (s == VRAM_OK) n->rt->k->unary(VRAM_UN_SCALE, -1.0, g->dtype, vram_tensor_numel(g), vram_tensor_data(full), vram_tensor_data(gc));
                    vram_tensor_free(gc);
                }
            }
            break;
        case VRAM_BIN_MUL: s = binary_raw("mul backward", VRAM_BIN_MUL, g, i == 0 ? b : a, &full); break;
        default:
            if (i == 0) {
                s = binary_raw("div backward", VRAM_BIN_DIV, g, b, &full);
            } else { /* -g a / b^2 */
                vram_tensor *t1 = NULL, *t2 = NULL;
                s = binary_raw("div backward", VRAM_BIN_MUL, g, a, &t1);
                if (s == VRAM_OK) s = binary_raw("div backward", VRAM_BIN_DIV, t1, b, &t2);
                vram_tensor_free(t1);
                if (s == VRAM_OK) s = binary_raw("div backward", VRAM_BIN_DIV, t2, b, &t1);
                vram_tensor_free(t2);
                if (s == VRAM_OK) n->rt->k->scale_inplace(t1->dtype, vram_tensor_numel(t1), vram_tensor_data(t1), -1.0);
                full = t1;
            }
        }
        if (s == VRAM_OK) s = vram_sum_to_shape(full, n->in_ndim[i], n->in_shape[i], &t);
        vram_tensor_free(full);
        gin[i] = t;
    }
    return s;
}

static const char *bin_names[] = {"add", "sub", "mul", "div"};

static vram_status binary_op(int op, vram_tensor *a, vram_tensor *b, vram_tensor **out) {
    if (!a || !b || !out) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null argument", bin_names[op]);
    if (op == VRAM_BIN_ADD && ((a->dtype == VRAM_DTYPE_F32 && vram_dtype_is_lowp(b->dtype)) ||
                               (b->dtype == VRAM_DTYPE_F32 && vram_dtype_is_lowp(a->dtype))))
        return vram_mixed_add(a, b, out); /* a 16-bit branch onto the f32 residual stream (ops_mixed.c) */
    vram_tensor *y = NULL;
    vram_status s = binary_raw(bin_names[op], op, a, b, &y);
    if (s == VRAM_OK) s = vram_binary_record(op, a, b, y);
    if (s != VRAM_OK) {
        vram_tensor_free(y);
        return s;
    }
    *out = y;
    return VRAM_OK;
}

vram_status vram_binary_record(int op, vram_tensor *a, vram_tensor *b, vram_tensor *y) {
    vram_tensor *in[2] = {a, b};
    if (!vram_should_record(2, in)) return VRAM_OK;
    vram_node *n = vram_node_attach(y, bin_names[op], binary_backward, 2, in);
    if (!n) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: out of host memory for the graph", bin_names[op]);
    n->ip[0] = op;
    vram_node_remember_shape(n, 0, a);
    vram_node_remember_shape(n, 1, b);
    if (op == VRAM_BIN_MUL || op == VRAM_BIN_DIV) {
        vram_node_save(n, a);
        vram_node_save(n, b);
    }
    return VRAM_OK;
}

vram_status vram_add(vram_tensor *a, vram_tensor *b, vram_tensor **out) { return binary_op(VRAM_BIN_ADD, a, b, out); }
vram_status vram_sub(vram_tensor *a, vram_tensor *b, vram_tensor **out) { return binary_op(VRAM_BIN_SUB, a, b, out); }
vram_status vram_mul(vram_tensor *a, vram_tensor *b, vram_tensor **out) { return binary_op(VRAM_BIN_MUL, a, b, out); }
vram_status vram_div(vram_tensor *a, vram_tensor *b, vram_tensor **out) { return binary_op(VRAM_BIN_DIV, a, b, out); }

/* ---- unary ---- */

static vram_status unary_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    int op = (int)n->ip[0];
    vram_tensor *gc = NULL, *r = NULL;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s != VRAM_OK) return s;
    s = vram_tensor_empty_like(gc, VRAM_TAG_TEMPORARY, &r);
    if (s == VRAM_OK) {
        const void *saved = n->n_saved ? vram_tensor_data(n->saved[0]) : NULL;
        n->rt->k->unary_backward(op, n->dp[0], g->dtype, vram_tensor_numel(g), vram_tensor_data(r), vram_tensor_data(gc), saved);
        gin[0] = r;
    }
    vram_tensor_free(gc);
    return s;
}

static vram_status unary_op(const char *name, int op, double p, vram_tensor *x, vram_tensor **out) {
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null argument", name);
    vram_status s = vram_check_float_lowp(name, x);
    if (s != VRAM_OK) return s;
    vram_tensor *xc = NULL, *y = op == VRAM_UN_GELU_TANH ? vram_mixed_take_gelu(x) : NULL; /* from an epilogue */
    s = vram_tensor_contig(x, &xc);
    if (s == VRAM_OK && !y) {
        s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &y);
        if (s == VRAM_OK) x->rt->k->unary(op, p, x->dtype, vram_tensor_numel(x), vram_tensor_data(y), vram_tensor_data(xc));
    }
    if (s != VRAM_OK) {
        vram_tensor_free(xc);
        vram_tensor_free(y);
        return s;
    }
    if (vram_should_record(1, &x)) {
        vram_node *n = vram_node_attach(y, name, unary_backward, 1, &x);
        if (!n) {
            vram_tensor_free(xc);
            vram_tensor_free(y);
            return vram_error(VRAM_ERR_HOST_MEMORY, "%s: out of host memory for the graph", name);
        }
        n->ip[0] = op;
        n->dp[0] = p;
        /* relu and the gelus need their input; tanh its output; scale nothing. */
        if (op == VRAM_UN_RELU || op == VRAM_UN_GELU || op == VRAM_UN_GELU_TANH) vram_node_save(n, xc);
        if (op == VRAM_UN_TANH) vram_node_save(n, y);
    }
    vram_tensor_free(xc);
    *out = y;
    return VRAM_OK;
}

vram_status vram_relu(vram_tensor *x, vram_tensor **out) { return unary_op("relu", VRAM_UN_RELU, 0, x, out); }
vram_status vram_gelu(vram_tensor *x, vram_tensor **out) { return unary_op("gelu", VRAM_UN_GELU, 0, x, out); }
vram_status vram_tanh(vram_tensor *x, vram_tensor **out) { return unary_op("tanh", VRAM_UN_TANH, 0, x, out); }
vram_status vram_gelu_tanh(vram_tensor *x, vram_tensor **out) { return unary_op("gelu_tanh", VRAM_UN_GELU_TANH, 0, x, out); }
vram_status vram_scale(vram_tensor *x, double f, vram_tensor **out) { return unary_op("scale", VRAM_UN_SCALE, f, x, out); }

/* ---- dropout ---- */

static vram_status dropout_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *gc = NULL, *r = NULL;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s != VRAM_OK) return s;
    s = vram_tensor_empty_like(gc, VRAM_TAG_TEMPORARY, &r);
    if (s == VRAM_OK) {
        n->rt->k->mask_scale(g->dtype, vram_tensor_numel(g), vram_tensor_data(r), vram_tensor_data(gc),
                             vram_tensor_data(n->saved[0]), n->dp[0]);
        gin[0] = r;
    }
    vram_tensor_free(gc);
    return s;
}

vram_status vram_dropout(vram_tensor *x, double p, int training, vram_tensor **out) {
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "dropout: null argument");
    vram_status s = vram_check_float_lowp("dropout", x);
    if (s != VRAM_OK) return s;
    if (!(p >= 0 && p <= 1)) return vram_error(VRAM_ERR_INVALID_ARG, "dropout: probability %g outside [0, 1]", p);
    if (!training || p == 0) return vram_scale(x, 1.0, out);
    vram_runtime *rt = x->rt;
    vram_tensor *xc, *mask, *y;
    s = vram_tensor_contig(x, &xc);
    if (s != VRAM_OK) return s;
    s = vram_tensor_empty(rt, VRAM_DTYPE_U8, x->ndim, x->shape, VRAM_TAG_TEMPORARY, &mask);
    if (s != VRAM_OK) {
        vram_tensor_free(xc);
        return s;
    }
    int64_t n = vram_tensor_numel(x);
    /* drawn on the host: the same mask on every device (none for the planner's shape-only runtime) */
    uint8_t *hm = rt->shape_only ? NULL : malloc((size_t)(n ? n : 1));
    if (!hm && !rt->shape_only) {
        vram_tensor_free(xc);
        vram_tensor_free(mask);
        return vram_error(VRAM_ERR_HOST_MEMORY, "dropout: out of host memory for the mask");
    }
    for (int64_t i = 0; i < n && hm; i++) hm[i] = vram_runtime_uniform(rt) >= p;
    if (hm) vram_tensor_write_host(mask, hm);
    free(hm);
    const uint8_t *m = vram_tensor_data(mask);
    double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
    s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK) {
        rt->k->mask_scale(x->dtype, n, vram_tensor_data(y), vram_tensor_data(xc), m, scale);
        if (vram_should_record(1, &x)) {
            vram_node *nd = vram_node_attach(y, "dropout", dropout_backward, 1, &x);
            if (!nd) {
                s = vram_error(VRAM_ERR_HOST_MEMORY, "dropout: out of host memory for the graph");
                vram_tensor_free(y);
            } else {
                nd->dp[0] = scale;
                vram_node_save(nd, mask);
            }
        }
    }
    vram_tensor_free(xc);
    vram_tensor_free(mask);
    if (s == VRAM_OK) *out = y;
    return s;
}
