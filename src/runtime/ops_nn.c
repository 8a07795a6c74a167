/* ops_nn.c — the row-wise neural-network ops: softmax, log_softmax, causal softmax,
 * cross-entropy, layer norm and embedding, with their backward functions.
 *
 * Each works on contiguous rows of the last dimension. What they save for backward is the
 * least that backward needs: softmax its output; cross-entropy its logits and one log-sum-exp
 * per row (not the probabilities); layer norm its input and one mean and 1/std per row;
 * embedding only the ids. layer_norm_linear (linear of a layer norm, as every transformer
 * block has twice) keeps the layer norm's input and row statistics but not its output, which
 * backward recomputes; add_layer_norm_linear computes that input as a residual sum, in the same
 * kernel as the layer norm where the device has one (recorded as the add and the
 * layer_norm_linear they replace).
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static vram_node *attach_or_fail(vram_tensor *y, const char *name, vram_backward_fn bw, int n, vram_tensor *const *in,
                                 vram_status *s) {
    vram_node *node = vram_node_attach(y, name, bw, n, in);
    if (!node) *s = vram_error(VRAM_ERR_HOST_MEMORY, "%s: out of host memory for the graph", name);
    return node;
}

/* ---- softmax family ---- */

static vram_status softmax_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *y = n->saved[0], *gc, *r;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s != VRAM_OK) return s;
    s = vram_tensor_empty_like(y, VRAM_TAG_TEMPORARY, &r);
    if (s == VRAM_OK) {
        int64_t c = y->shape[y->ndim - 1];
        n->rt->k->softmax_backward(y->dtype, vram_tensor_numel(y) / c, c, (int)n->ip[0], vram_tensor_data(r),
                                   vram_tensor_data(gc), vram_tensor_data(y));
        gin[0] = r;
    }
    vram_tensor_free(gc);
    return s;
}

static vram_status softmax_op(const char *name, int log_, int causal, vram_tensor *x, vram_tensor **out) {
    char sx[96];
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null argument", name);
    vram_status s = vram_check_float(name, x);
    if (s != VRAM_OK) return s;
    if (x->ndim < (causal ? 2 : 1) || x->shape[x->ndim - 1] == 0)
        return vram_error(VRAM_ERR_SHAPE, "%s: input %s needs a non-empty last dimension%s", name, SHAPE_STR(x, sx),
                          causal ? " and at least 2 dimensions" : "");
    vram_tensor *xc = NULL, *y = NULL;
    s = vram_tensor_contig(x, &xc);
    if (s != VRAM_OK) return s;
    s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK) {
        int64_t c = x->shape[x->ndim - 1];
        x->rt->k->softmax(x->dtype, vram_tensor_numel(x) / c, c, causal ? x->shape[x->ndim - 2] : 0, log_,
                          vram_tensor_data(y), vram_tensor_data(xc));
        if (vram_should_record(1, &x)) {
            vram_node *n = attach_or_fail(y, name, softmax_backward, 1, &x, &s);
            if (n) {
                n->ip[0] = log_;
                vram_node_save(n, y);
            } else {
                vram_tensor_free(y);
            }
        }
    }
    vram_tensor_free(xc);
    if (s == VRAM_OK) *out = y;
    return s;
}

vram_status vram_softmax(vram_tensor *x, vram_tensor **out) { return softmax_op("softmax", 0, 0, x, out); }
vram_status vram_log_softmax(vram_tensor *x, vram_tensor **out) { return softmax_op("log_softmax", 1, 0, x, out); }
vram_status vram_causal_softmax(vram_tensor *x, vram_tensor **out) { return softmax_op("causal_softmax", 0, 1, x, out); }

/* ---- integer index checks ---- */

static vram_status check_ids(const char *op, const vram_tensor *ids, int64_t limit, const char *what) {
    if (!ids) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null %s", op, what);
    if (ids->dtype != VRAM_DTYPE_I32 && ids->dtype != VRAM_DTYPE_I64)
        return vram_error(VRAM_ERR_INVALID_ARG, "%s: %s must be i32 or i64, not %s", op, what, vram_dtype_name(ids->dtype));
    if (!vram_tensor_is_contiguous(ids)) return vram_error(VRAM_ERR_INVALID_ARG, "%s: %s must be contiguous", op, what);
    int64_t n = vram_tensor_numel(ids);
    int64_t i = ids->rt->k->find_bad_id(n, vram_tensor_data(ids), ids->dtype, limit);
    vram_status s = ids->rt->k->sync();
    if (s != VRAM_OK) return s;
    if (i >= 0) {
        char one[8];
        ids->rt->k->download(one, (const char *)vram_tensor_data(ids) + i * (int64_t)vram_dtype_size(ids->dtype),
                             vram_dtype_size(ids->dtype));
        int64_t v = ids->dtype == VRAM_DTYPE_I64 ? *(const int64_t *)one : *(const int32_t *)one;
        return vram_error(VRAM_ERR_INVALID_ARG, "%s: %s[%lld] = %lld is outside [0, %lld)", op, what, (long long)i,
                          (long long)v, (long long)limit);
    }
    return VRAM_OK;
}

/* ---- cross-entropy ---- */

static vram_status xent_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *logits = n->saved[0], *targets = n->saved[1], *lse = n->saved[2];
    int64_t c = logits->shape[logits->ndim - 1], rows = vram_tensor_numel(logits) / c;
    vram_status s = vram_tensor_empty_like(logits, VRAM_TAG_TEMPORARY, &gin[0]);
    if (s != VRAM_OK) return s;
    double scale = vram_tensor_item(g) / (double)(rows ? rows : 1);
    n->rt->k->cross_entropy_backward(logits->dtype, rows, c, scale, vram_tensor_data(gin[0]), vram_tensor_data(logits),
                                     vram_tensor_data(targets), targets->dtype, vram_tensor_data(lse));
    return VRAM_OK;
}

vram_status vram_cross_entropy(vram_tensor *logits, vram_tensor *targets, vram_tensor **out) {
    char sl[96], st[96];
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "cross_entropy: null argument");
    vram_status s = vram_check_float_lowp("cross_entropy", logits);
    if (s != VRAM_OK) return s;
    if (!targets) return vram_error(VRAM_ERR_INVALID_ARG, "cross_entropy: null targets");
    if (logits->ndim < 1 || logits->shape[logits->ndim - 1] == 0 ||
        vram_tensor_numel(targets) * logits->shape[logits->ndim - 1] != vram_tensor_numel(logits) ||
        targets->ndim != logits->ndim - 1)
        return vram_error(VRAM_ERR_SHAPE, "cross_entropy: logits %s and targets %s: targets must be the logits' shape "
                          "without its last (class) dimension", SHAPE_STR(logits, sl), SHAPE_STR(targets, st));
    for (int i = 0; i < targets->ndim; i++)
        if (targets->shape[i] != logits->shape[i])
            return vram_error(VRAM_ERR_SHAPE, "cross_entropy: logits %s and targets %s differ in dimension %d",
                              SHAPE_STR(logits, sl), SHAPE_STR(targets, st), i);
    int64_t c = logits->shape[logits->ndim - 1], rows = vram_tensor_numel(targets);
    s = check_ids("cross_entropy", targets, c, "targets");
    if (s != VRAM_OK) return s;
    vram_runtime *rt = logits->rt;
    vram_tensor *lc = NULL, *lse = NULL, *y = NULL;
    s = vram_tensor_contig(logits, &lc);
    int64_t rshape[1] = {rows};
    vram_dtype sdt = vram_stat_dtype(logits->dtype); /* 16-bit logits: the lse and the loss in f32 */
    if (s == VRAM_OK) s = vram_tensor_empty(rt, sdt, 1, rshape, VRAM_TAG_TEMPORARY, &lse);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, sdt, 0, NULL, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK) {
        double loss = rt->k->cross_entropy(logits->dtype, rows, c, vram_tensor_data(lc), vram_tensor_data(targets),
                                           targets->dtype, vram_tensor_data(lse));
        vram_tensor_fill(y, loss);
        vram_tensor *in[2] = {logits, targets};
        if (vram_should_record(1, in)) {
            vram_node *n = attach_or_fail(y, "cross_entropy", xent_backward, 1, in, &s);
            if (n) {
                vram_node_save(n, lc);
                vram_node_save(n, targets);
                vram_node_save(n, lse);
            }
        }
    }
    vram_tensor_free(lc);
    vram_tensor_free(lse);
    return rt_finish(s, y, out);
}

/* ---- layer norm ---- */

/* A layer norm's weight or bias gradient [c]: the same allocation either way, zeroed only where
 * the backward kernels add to it (vram_kernels.layer_norm_backward_writes_wb). */
static vram_status ln_param_grad(vram_runtime *rt, vram_dtype pdt, int64_t c, vram_tensor **out) {
    int64_t cs[1] = {c};
    if (rt->k->layer_norm_backward_writes_wb && vram_fewer_launches())
        return vram_tensor_empty(rt, pdt, 1, cs, VRAM_TAG_TEMPORARY, out);
    return vram_tensor_new(rt, pdt, 1, cs, VRAM_TAG_TEMPORARY, out);
}

static vram_status ln_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *x = n->saved[0], *mean = n->saved[1], *rstd = n->saved[2];
    vram_tensor *w = n->ip[0] ? n->saved[3] : NULL, *gc;
    int64_t c = x->shape[x->ndim - 1], rows = vram_tensor_numel(x) / c;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s != VRAM_OK) return s;
    s = vram_check_norm_dtype("layer_norm backward", x, gc->dtype); /* (a 16-bit gradient of an f32 x: mixed) */
    vram_tensor *into = vram_node_needs(n, 0) ? vram_node_grad_dest(n, 0, x) : NULL; /* (adds to x's gradient) */
    if (s == VRAM_OK && vram_node_needs(n, 0) && !into) s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &gin[0]);
    void *gx = into ? vram_tensor_data(into) : gin[0] ? vram_tensor_data(gin[0]) : NULL;
    vram_dtype pdt = vram_stat_dtype(x->dtype); /* f32 weights under 16-bit activations */
    if (s == VRAM_OK && n->n_in > 1 && vram_node_needs(n, 1)) s = ln_param_grad(rt, pdt, c, &gin[1]);
    if (s == VRAM_OK && n->n_in > 2 && vram_node_needs(n, 2)) s = ln_param_grad(rt, pdt, c, &gin[2]);
    if (s == VRAM_OK)
        (gc->dtype == x->dtype ? rt->k->layer_norm_backward : rt->k->layer_norm_mixed_backward)(
                                   gc->dtype, rows, c, gx, into != NULL,
                                   n->n_in > 1 && gin[1] ? vram_tensor_data(gin[1]) : NULL,
                                   n->n_in > 2 && gin[2] ? vram_tensor_data(gin[2]) : NULL, vram_tensor_data(gc),
                                   vram_tensor_data(x), w ? vram_tensor_data(w) : NULL, vram_tensor_data(mean),
                                   vram_tensor_data(rstd));
    vram_tensor_free(gc);
    return s;
}

vram_status vram_layer_norm(vram_tensor *x, vram_tensor *w, vram_tensor *b, double eps, vram_tensor **out) {
    return vram_layer_norm_to(x, w, b, eps, x ? x->dtype : VRAM_DTYPE_F32, out);
}

vram_status vram_layer_norm_to(vram_tensor *x, vram_tensor *w, vram_tensor *b, double eps, vram_dtype dt, vram_tensor **out) {
    char sx[96], sp[96];
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "layer_norm: null argument");
    vram_status s = vram_check_float_lowp("layer_norm", x);
    if (s == VRAM_OK) s = vram_check_norm_dtype("layer_norm", x, dt);
    if (s != VRAM_OK) return s;
    if (x->ndim < 1 || x->shape[x->ndim - 1] == 0)
        return vram_error(VRAM_ERR_SHAPE, "layer_norm: input %s needs a non-empty last dimension", SHAPE_STR(x, sx));
    int64_t c = x->shape[x->ndim - 1];
    vram_tensor *params[2] = {w, b};
    for (int i = 0; i < 2; i++) {
        if (!params[i]) continue;
        s = vram_check_param_dtype("layer_norm", x, params[i]);
        if (s != VRAM_OK) return s;
        if (params[i]->ndim != 1 || params[i]->shape[0] != c || !vram_tensor_is_contiguous(params[i]))
            return vram_error(VRAM_ERR_SHAPE, "layer_norm: input %s and %s %s: expected a contiguous [%lld]",
                              SHAPE_STR(x, sx), i ? "bias" : "weight", SHAPE_STR(params[i], sp), (long long)c);
    }
    if (!w && b) return vram_error(VRAM_ERR_INVALID_ARG, "layer_norm: a bias without a weight is not supported");
    vram_runtime *rt = x->rt;
    int64_t rows = vram_tensor_numel(x) / c, rs[1] = {rows};
    vram_tensor *xc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
    s = vram_tensor_contig(x, &xc);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, dt, x->ndim, x->shape, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, vram_stat_dtype(x->dtype), 1, rs, VRAM_TAG_TEMPORARY, &mean);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, vram_stat_dtype(x->dtype), 1, rs, VRAM_TAG_TEMPORARY, &rstd);
    if (s == VRAM_OK) {
        (dt == x->dtype ? rt->k->layer_norm : rt->k->layer_norm_mixed)(
            dt, rows, c, eps, vram_tensor_data(y), vram_tensor_data(xc), w ? vram_tensor_data(w) : NULL,
            b ? vram_tensor_data(b) : NULL, vram_tensor_data(mean), vram_tensor_data(rstd));
        vram_tensor *in[3] = {x, w, b};
        int nin = b ? 3 : w ? 2 : 1;
        if (vram_should_record(nin, in)) {
            vram_node *n = attach_or_fail(y, "layer_norm", ln_backward, nin, in, &s);
            if (n) {
                n->ip[0] = w != NULL;
                vram_node_save(n, xc);
                vram_node_save(n, mean);
                vram_node_save(n, rstd);
                if (w) vram_node_save(n, w);
            }
        }
    }
    vram_tensor_free(xc);
    vram_tensor_free(mean);
    vram_tensor_free(rstd);
    return rt_finish(s, y, out);
}

/* ---- embedding ---- */

/* The table's gradient when the scatter can add into it directly: a leaf whose gradient already
 * holds another contribution (GPT-2's tied head wrote it first), contiguous and of the
 * gradient's shape and dtype, with no gradient hook (DDP) watching the order of contributions. */
static vram_tensor *emb_grad_in_place(vram_node *n, const vram_tensor *g) {
    vram_tensor *leaf = n->leaf[0], *d = leaf ? leaf->grad : NULL;
    if (!d || !vram_fewer_launches() || n->rt->on_grad || d->dtype != g->dtype || d->offset || d->ndim != 2 ||
        d->shape[0] != n->in_shape[0][0] || d->shape[1] != n->in_shape[0][1] || !vram_tensor_is_contiguous(d))
        return NULL;
    return d;
}

/* The scatter-add of g's rows into a zeroed [V, C] buffer, which autograd then adds to the
 * table's gradient; or, where that gradient exists (emb_grad_in_place), straight into it: no
 * memset, no accumulate. With VRAM_GRAD_ADOPT=0 the buffer is taken (and left unused) on that
 * path too, so that the allocation stream stays the one the planner's older GPU records saw. */
static vram_status emb_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *ids = n->saved[0], *gc, *direct = emb_grad_in_place(n, g);
    vram_status s = vram_tensor_contig(g, &gc);
    if (s != VRAM_OK) return s;
    if (direct && !n->rt->grad_adopt)
        s = vram_tensor_empty(n->rt, g->dtype, 2, n->in_shape[0], VRAM_TAG_TEMPORARY, &gin[0]);
    else if (!direct)
        s = vram_tensor_new(n->rt, g->dtype, 2, n->in_shape[0], VRAM_TAG_TEMPORARY, &gin[0]);
    if (s == VRAM_OK)
        n->rt->k->embedding_backward(g->dtype, vram_tensor_numel(ids), n->in_shape[0][1],
                                     vram_tensor_data(direct ? direct : gin[0]), vram_tensor_data(gc),
                                     vram_tensor_data(ids), ids->dtype);
    vram_tensor_free(gc);
    if (s == VRAM_OK && direct) { /* freed where autograd would have freed it after the accumulate */
        vram_tensor_free(gin[0]);
        gin[0] = NULL;
    }
    return s;
}

vram_status vram_embedding(vram_tensor *table, vram_tensor *ids, vram_tensor **out) {
    char st[96], si[96];
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "embedding: null argument");
    vram_status s = vram_check_float("embedding", table);
    if (s != VRAM_OK) return s;
    if (table->ndim != 2 || !vram_tensor_is_contiguous(table))
        return vram_error(VRAM_ERR_SHAPE, "embedding: table %s must be a contiguous [V, C]", SHAPE_STR(table, st));
    s = check_ids("embedding", ids, table->shape[0], "ids");
    if (s != VRAM_OK) return s;
    if (ids->ndim + 1 > MAXD)
        return vram_error(VRAM_ERR_SHAPE, "embedding: ids %s have too many dimensions", SHAPE_STR(ids, si));
    int64_t shape[MAXD];
    memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    shape[ids->ndim] = table->shape[1];
    vram_tensor *y = NULL;
    s = vram_tensor_empty(table->rt, table->dtype, ids->ndim + 1, shape, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) return s;
    table->rt->k->embedding(table->dtype, vram_tensor_numel(ids), table->shape[1], vram_tensor_data(y),
                            vram_tensor_data(table), vram_tensor_data(ids), ids->dtype);
    if (vram_should_record(1, &table)) {
        vram_node *n = attach_or_fail(y, "embedding", emb_backward, 1, &table, &s);
        if (!n) {
            vram_tensor_free(y);
            return s;
        }
        vram_node_remember_shape(n, 0, table);
        vram_node_save(n, ids);
    }
    *out = y;
    return VRAM_OK;
}

/* ---- layer_norm_linear: linear(layer_norm(x)) keeping only x (and per-row statistics) ---- */

static vram_status ln_linear_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *x = n->saved[0], *mean = n->saved[1], *rstd = n->saved[2], *lw = n->saved[3], *lb = n->saved[4],
                *w = n->saved[5];
    int64_t c = x->shape[x->ndim - 1], rows = vram_tensor_numel(x) / c, out_f = w->shape[0];
    vram_dtype adt = (vram_dtype)n->ip[0]; /* the normalised x's: x's, or 16-bit from an f32 x */
    vram_tensor *gc = NULL, *a = NULL, *m2 = NULL, *r2 = NULL, *ga = NULL;
    int64_t rs[1] = {rows};
    vram_status s = vram_tensor_contig(g, &gc);
    /* recompute the normalised input, which forward did not keep */
    if (s == VRAM_OK) s = vram_tensor_empty(rt, adt, x->ndim, x->shape, VRAM_TAG_TEMPORARY, &a);
    vram_dtype pdt = vram_stat_dtype(x->dtype); /* f32 statistics and weights under 16-bit activations */
    if (s == VRAM_OK) s = vram_tensor_empty(rt, pdt, 1, rs, VRAM_TAG_TEMPORARY, &m2);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, pdt, 1, rs, VRAM_TAG_TEMPORARY, &r2);
    if (s == VRAM_OK)
        (adt == x->dtype ? rt->k->layer_norm : rt->k->layer_norm_mixed)(adt, rows, c, n->dp[0], vram_tensor_data(a),
                                                                         vram_tensor_data(x), vram_tensor_data(lw),
                                                                         vram_tensor_data(lb), vram_tensor_data(m2),
                                                                         vram_tensor_data(r2));
    vram_tensor_free(m2);
    vram_tensor_free(r2);
    int need_ln = vram_node_needs(n, 0) || vram_node_needs(n, 1) || vram_node_needs(n, 2);
    if (s == VRAM_OK && adt != w->dtype) { /* mixed precision: the products' gradients in one call */
        vram_mixed_grads want = {need_ln, vram_node_needs(n, 3), n->n_in > 4 && vram_node_needs(n, 4), x->ndim, x->shape,
                                 NULL};
        s = vram_mixed_linear_backward(&want, gc, a, w, &ga, &gin[3], n->n_in > 4 ? &gin[4] : NULL);
    } else if (s == VRAM_OK && vram_node_needs(n, 3)) { /* gW [out, c] = g^T [out, rows] @ a [rows, c] */
        s = vram_tensor_empty(rt, x->dtype, 2, w->shape, VRAM_TAG_TEMPORARY, &gin[3]);
        if (s == VRAM_OK)
            rt->k->matmul(rt, x->dtype, 1, out_f, c, rows, vram_tensor_data(gc), 0, 1, out_f, vram_tensor_data(a), 0, c, 1,
                          vram_tensor_data(gin[3]), 0);
    }
    if (s == VRAM_OK && adt == w->dtype && n->n_in > 4 && vram_node_needs(n, 4)) {
        int64_t os[1] = {out_f};
        s = vram_sum_to_shape(gc, 1, os, &gin[4]);
    }
    if (s == VRAM_OK && need_ln && adt == w->dtype) { /* ga [rows, c] = g @ W */
        s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &ga);
        if (s == VRAM_OK)
            rt->k->matmul(rt, x->dtype, 1, rows, c, out_f, vram_tensor_data(gc), 0, out_f, 1, vram_tensor_data(w), 0,
                          w->strides[0], w->strides[1], vram_tensor_data(ga), 0);
    }
    if (s == VRAM_OK && need_ln) {
        vram_tensor *into = vram_node_needs(n, 0) ? vram_node_grad_dest(n, 0, x) : NULL; /* (adds to x's gradient) */
        if (s == VRAM_OK && vram_node_needs(n, 0) && !into)
            s = vram_tensor_empty(rt, x->dtype, n->in_ndim[0], n->in_shape[0], VRAM_TAG_TEMPORARY, &gin[0]);
        if (s == VRAM_OK && vram_node_needs(n, 1)) s = ln_param_grad(rt, pdt, c, &gin[1]);
        if (s == VRAM_OK && vram_node_needs(n, 2)) s = ln_param_grad(rt, pdt, c, &gin[2]);
        void *gx = into ? vram_tensor_data(into) : gin[0] ? vram_tensor_data(gin[0]) : NULL;
        if (s == VRAM_OK) /* (gx in x's dtype from ga in the normalised x's) */
            (adt == x->dtype ? rt->k->layer_norm_backward : rt->k->layer_norm_mixed_backward)(
                                       adt, rows, c, gx, into != NULL, gin[1] ? vram_tensor_data(gin[1]) : NULL,
                                       gin[2] ? vram_tensor_data(gin[2]) : NULL,
                                       vram_tensor_data(ga), vram_tensor_data(x), vram_tensor_data(lw),
                                       vram_tensor_data(mean), vram_tensor_data(rstd));
    }
    vram_tensor_free(ga);
    vram_tensor_free(a);
    vram_tensor_free(gc);
    return s;
}

vram_status vram_layer_norm_linear(vram_tensor *x, vram_tensor *ln_w, vram_tensor *ln_b, double eps, vram_tensor *w,
                                   vram_tensor *bias, vram_tensor **out) {
    return vram_layer_norm_linear_to(x, ln_w, ln_b, eps, w, bias, x ? x->dtype : VRAM_DTYPE_F32, out);
}

static void free_four(vram_tensor *a, vram_tensor *b, vram_tensor *c, vram_tensor *d) {
    vram_tensor_free(a);
    vram_tensor_free(b);
    vram_tensor_free(c);
    vram_tensor_free(d);
}

/* The checks of layer_norm_linear_to on x (the layer norm's input) and the parameters. */
static vram_status ln_linear_check(vram_tensor *x, vram_tensor *ln_w, vram_tensor *ln_b, vram_tensor *w, vram_dtype dt,
                                   vram_tensor **out) {
    char sx[96];
    if (!x || !ln_w || !ln_b || !w || !out)
        return vram_error(VRAM_ERR_INVALID_ARG, "layer_norm_linear: null argument (the layer norm needs weight and bias)");
    vram_status s = vram_check_param_dtype("layer_norm_linear", x, w);
    if (s == VRAM_OK) s = vram_check_norm_dtype("layer_norm_linear", x, dt);
    if (s != VRAM_OK) return s;
    if (x->ndim < 1 || x->shape[x->ndim - 1] == 0)
        return vram_error(VRAM_ERR_SHAPE, "layer_norm_linear: input %s needs a non-empty last dimension", SHAPE_STR(x, sx));
    int64_t c = x->shape[x->ndim - 1];
    vram_tensor *params[2] = {ln_w, ln_b};
    for (int i = 0; i < 2; i++) {
        char sp[96];
        s = vram_check_param_dtype("layer_norm_linear", x, params[i]);
        if (s != VRAM_OK) return s;
        if (params[i]->ndim != 1 || params[i]->shape[0] != c || !vram_tensor_is_contiguous(params[i]))
            return vram_error(VRAM_ERR_SHAPE, "layer_norm_linear: input %s and layer-norm %s %s: expected a contiguous [%lld]",
                              SHAPE_STR(x, sx), i ? "bias" : "weight", SHAPE_STR(params[i], sp), (long long)c);
    }
    return VRAM_OK;
}

/* The product after the layer norm (a = layer_norm(x) in dt, with x's contiguous xc and its row
 * statistics) and the node that keeps x, not a. Takes a, xc, mean and rstd. */
static vram_status ln_linear_finish(vram_tensor *x, vram_tensor *xc, vram_tensor *a, vram_tensor *mean, vram_tensor *rstd,
                                    vram_tensor *ln_w, vram_tensor *ln_b, double eps, vram_tensor *w, vram_tensor *bias,
                                    vram_dtype dt, vram_tensor **out) {
    vram_tensor *y = NULL;
    vram_no_grad_enter(); /* recorded below as one node that keeps x, not layer_norm(x) */
    vram_status s = vram_linear(a, w, bias, &y);
    vram_no_grad_exit();
    vram_tensor_free(a);
    vram_tensor *in[5] = {x, ln_w, ln_b, w, bias};
    int nin = bias ? 5 : 4;
    if (s == VRAM_OK && vram_should_record(nin, in)) {
        vram_node *n = attach_or_fail(y, "layer_norm_linear", ln_linear_backward, nin, in, &s);
        if (n) {
            n->dp[0] = eps;
            n->ip[0] = dt;
            vram_node_remember_shape(n, 0, x);
            vram_node_save(n, xc);
            vram_node_save(n, mean);
            vram_node_save(n, rstd);
            vram_node_save(n, ln_w);
            vram_node_save(n, ln_b);
            vram_node_save(n, w);
        }
    }
    vram_tensor_free(xc);
    vram_tensor_free(mean);
    vram_tensor_free(rstd);
    return rt_finish(s, y, out);
}

vram_status vram_layer_norm_linear_to(vram_tensor *x, vram_tensor *ln_w, vram_tensor *ln_b, double eps, vram_tensor *w,
                                      vram_tensor *bias, vram_dtype dt, vram_tensor **out) {
    vram_status s = ln_linear_check(x, ln_w, ln_b, w, dt, out);
    if (s != VRAM_OK) return s;
    vram_runtime *rt = x->rt;
    int64_t c = x->shape[x->ndim - 1], rows = vram_tensor_numel(x) / c, rs[1] = {rows};
    vram_tensor *a = NULL, *xc = NULL, *mean = NULL, *rstd = NULL;
    s = vram_tensor_contig(x, &xc);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, dt, x->ndim, x->shape, VRAM_TAG_TEMPORARY, &a);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, vram_stat_dtype(x->dtype), 1, rs, VRAM_TAG_TEMPORARY, &mean);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, vram_stat_dtype(x->dtype), 1, rs, VRAM_TAG_TEMPORARY, &rstd);
    if (s != VRAM_OK) {
        free_four(a, xc, mean, rstd);
        return s;
    }
    (dt == x->dtype ? rt->k->layer_norm : rt->k->layer_norm_mixed)(dt, rows, c, eps, vram_tensor_data(a),
                                                                   vram_tensor_data(xc), vram_tensor_data(ln_w),
                                                                   vram_tensor_data(ln_b), vram_tensor_data(mean),
                                                                   vram_tensor_data(rstd));
    return ln_linear_finish(x, xc, a, mean, rstd, ln_w, ln_b, eps, w, bias, dt, out);
}

/* Whether h = x + r and its layer norm run as one kernel (the device's add_layer_norm): one
 * dtype throughout, one shape, contiguous; VRAM_FUSED_ADD_LN=0 turns it off (to measure and
 * test the separate kernels, which allocate the same tensors in the same order). */
static int add_ln_fuses(const vram_tensor *x, const vram_tensor *r, vram_dtype dt) {
    const char *off = getenv("VRAM_FUSED_ADD_LN");
    return x->rt->k->add_layer_norm && !(off && !strcmp(off, "0")) && r->rt == x->rt && r->dtype == x->dtype &&
           dt == x->dtype && vram_shape_equal(x, r) && vram_tensor_is_contiguous(x) && vram_tensor_is_contiguous(r) &&
           (x->dtype == VRAM_DTYPE_F32 || x->dtype == VRAM_DTYPE_F64 || vram_dtype_is_lowp(x->dtype));
}

vram_status vram_add_layer_norm_linear_to(vram_tensor *x, vram_tensor *r, vram_tensor *ln_w, vram_tensor *ln_b,
                                          double eps, vram_tensor *w, vram_tensor *bias, vram_dtype dt, vram_tensor **h,
                                          vram_tensor **out) {
    if (!x || !r || !h || !out) {
        vram_tensor_free(r);
        return vram_error(VRAM_ERR_INVALID_ARG, "add_layer_norm_linear: null argument");
    }
    vram_status s;
    if (!add_ln_fuses(x, r, dt)) { /* the add, then the layer norm and the product */
        vram_tensor *sum = NULL;
        s = vram_add(x, r, &sum);
        vram_tensor_free(r); /* (before the layer norm allocates, as the separate ops run) */
        if (s == VRAM_OK) s = vram_layer_norm_linear_to(sum, ln_w, ln_b, eps, w, bias, dt, out);
        if (s != VRAM_OK) vram_tensor_free(sum);
        else *h = sum;
        return s;
    }
    s = ln_linear_check(x, ln_w, ln_b, w, dt, out);
    if (s != VRAM_OK) {
        vram_tensor_free(r);
        return s;
    }
    vram_runtime *rt = x->rt;
    int64_t c = x->shape[x->ndim - 1], rows = vram_tensor_numel(x) / c, rs[1] = {rows};
    vram_tensor *sum = NULL, *a = NULL, *mean = NULL, *rstd = NULL;
    /* The normalised rows overwrite the branch where nothing else holds it (each element is read
     * before it is written, by the thread that writes it): then the blocks are those of the
     * separate ops, whose layer norm takes the block the branch's free returned, and the
     * allocator sees the same requests (the sum, then the statistics). */
    int in_place = atomic_load(&r->refs) == 1 && atomic_load(&r->st->refs) == 1 && r->offset == 0 && !r->st->lowp &&
                   !r->st->gelu && !r->st->keep_lowp;
    s = vram_tensor_empty(rt, x->dtype, x->ndim, x->shape, VRAM_TAG_TEMPORARY, &sum);
    if (s == VRAM_OK && in_place) a = vram_tensor_retain(r);
    else if (s == VRAM_OK) s = vram_tensor_empty(rt, dt, x->ndim, x->shape, VRAM_TAG_TEMPORARY, &a);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, vram_stat_dtype(x->dtype), 1, rs, VRAM_TAG_TEMPORARY, &mean);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, vram_stat_dtype(x->dtype), 1, rs, VRAM_TAG_TEMPORARY, &rstd);
    if (s == VRAM_OK) {
        rt->k->add_layer_norm(dt, rows, c, eps, vram_tensor_data(sum), vram_tensor_data(a), vram_tensor_data(x),
                              vram_tensor_data(r), vram_tensor_data(ln_w), vram_tensor_data(ln_b), vram_tensor_data(mean),
                              vram_tensor_data(rstd));
        s = vram_binary_record(VRAM_BIN_ADD, x, r, sum);
    }
    vram_tensor_free(r); /* freed in stream order: the kernel has read it */
    if (s != VRAM_OK) {
        free_four(sum, a, mean, rstd);
        return s;
    }
    s = ln_linear_finish(sum, vram_tensor_retain(sum), a, mean, rstd, ln_w, ln_b, eps, w, bias, dt, out);
    if (s != VRAM_OK) vram_tensor_free(sum);
    else *h = sum;
    return s;
}
