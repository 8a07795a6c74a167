/* ops_matmul.c — matmul (batched, broadcasting a 2-D operand over the other's batch), linear,
 * and causal scaled-dot-product attention built from them.
 *
 * The kernel takes A and B with any row/column strides (transposed views cost nothing: the
 * kernel packs them) but one uniform batch stride, so batch dimensions that cannot be
 * flattened into one stride are made contiguous first. Backward: dA = dC @ B^T and
 * dB = A^T @ dC, again as strided views, summed over the batch when the operand was 2-D.
 * gelu_linear is linear(gelu(x)) that keeps only x for backward and recomputes gelu(x) there:
 * the MLP's widest activation is then stored once instead of twice (llm.c's recompute idea);
 * gelu_tanh_linear the same with GPT-2's tanh GELU, whose forward takes gelu(x) from the
 * previous product's epilogue when there is one, and whose mixed backward applies gelu'(x)
 * in the input gradient's product (cuBLASLt's DGELU epilogue on the GPU).
 */
#include <math.h>
#include <string.h>

#include "rt_internal.h"

/* Batch dims of t (all but the last two) flatten to one stride? */
static int batch_flat(const vram_tensor *t) {
    int nb = t->ndim - 2;
    for (int i = 0; i + 1 < nb; i++)
        if (t->shape[i] != 1 && t->strides[i] != t->strides[i + 1] * t->shape[i + 1]) return 0;
    return 1;
}

vram_status vram_matmul_raw(vram_tensor *a, vram_tensor *b, vram_tensor **out) {
    char sa[96], sb[96];
    vram_status s = vram_check_same_dtype("matmul", a, b);
    if (s != VRAM_OK) return s;
    if (a->ndim < 2 || b->ndim < 2)
        return vram_error(VRAM_ERR_SHAPE, "matmul: %s @ %s: both operands need at least 2 dimensions", SHAPE_STR(a, sa),
                          SHAPE_STR(b, sb));
    int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], K2 = b->shape[b->ndim - 2], N = b->shape[b->ndim - 1];
    if (K != K2)
        return vram_error(VRAM_ERR_SHAPE, "matmul: %s @ %s: inner dimensions %lld and %lld differ", SHAPE_STR(a, sa),
                          SHAPE_STR(b, sb), (long long)K, (long long)K2);
    const vram_tensor *big = a->ndim >= b->ndim ? a : b;
    if (a->ndim > 2 && b->ndim > 2) {
        int same = a->ndim == b->ndim;
        for (int i = 0; same && i < a->ndim - 2; i++) same = a->shape[i] == b->shape[i];
        if (!same)
            return vram_error(VRAM_ERR_SHAPE, "matmul: %s @ %s: batch dimensions differ", SHAPE_STR(a, sa), SHAPE_STR(b, sb));
    }
    int nd = big->ndim;
    int64_t shape[MAXD];
    memcpy(shape, big->shape, sizeof shape);
    shape[nd - 2] = M;
    shape[nd - 1] = N;
    int64_t batch = vram_shape_numel(nd - 2, shape);
    vram_tensor *ac = vram_tensor_retain(a), *bc = vram_tensor_retain(b), *y = NULL;
    if (!batch_flat(ac)) {
        vram_tensor_free(ac);
        s = vram_tensor_contig(a, &ac);
    }
    if (s == VRAM_OK && !batch_flat(bc)) {
        vram_tensor_free(bc);
        s = vram_tensor_contig(b, &bc);
    }
    if (s == VRAM_OK) s = vram_tensor_empty(a->rt, a->dtype, nd, shape, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK) {
        int64_t sab = ac->ndim > 2 ? ac->strides[ac->ndim - 3] : 0, sbb = bc->ndim > 2 ? bc->strides[bc->ndim - 3] : 0;
        a->rt->k->matmul(a->rt, a->dtype, batch, M, N, K, vram_tensor_data(ac), sab, ac->strides[ac->ndim - 2],
                         ac->strides[ac->ndim - 1], vram_tensor_data(bc), sbb, bc->strides[bc->ndim - 2],
                         bc->strides[bc->ndim - 1], vram_tensor_data(y), 0);
        *out = y;
    }
    vram_tensor_free(ac);
    vram_tensor_free(bc);
    return s;
}

static vram_tensor *transposed_last2(vram_tensor *t) {
    int64_t shape[MAXD], strides[MAXD];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(strides, t->strides, sizeof strides);
    int nd = t->ndim;
    int64_t x = shape[nd - 1];
    shape[nd - 1] = shape[nd - 2];
    shape[nd - 2] = x;
    x = strides[nd - 1];
    strides[nd - 1] = strides[nd - 2];
    strides[nd - 2] = x;
    return vram_tensor_view_new(t, nd, shape, strides, t->offset);
}

static vram_status matmul_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *a = n->saved[0], *b = n->saved[1];
    vram_status s = VRAM_OK;
    if (vram_node_needs(n, 0)) {
        vram_tensor *bt = transposed_last2(b), *full = NULL;
        s = bt ? vram_matmul_raw(g, bt, &full) : vram_error(VRAM_ERR_HOST_MEMORY, "matmul backward: host out of memory for a view");
        vram_tensor_free(bt);
        if (s == VRAM_OK) s = vram_sum_to_shape(full, n->in_ndim[0], n->in_shape[0], &gin[0]);
        vram_tensor_free(full);
    }
    if (s == VRAM_OK && vram_node_needs(n, 1)) {
        vram_tensor *at = transposed_last2(a), *full = NULL;
        s = at ? vram_matmul_raw(at, g, &full) : vram_error(VRAM_ERR_HOST_MEMORY, "matmul backward: host out of memory for a view");
        vram_tensor_free(at);
        if (s == VRAM_OK) s = vram_sum_to_shape(full, n->in_ndim[1], n->in_shape[1], &gin[1]);
        vram_tensor_free(full);
    }
    return s;
}

vram_status vram_matmul(vram_tensor *a, vram_tensor *b, vram_tensor **out) {
    if (!a || !b || !out) return vram_error(VRAM_ERR_INVALID_ARG, "matmul: null argument");
    vram_tensor *y = NULL;
    vram_status s = vram_matmul_raw(a, b, &y);
    if (s != VRAM_OK) return s;
    vram_tensor *in[2] = {a, b};
    if (vram_should_record(2, in)) {
        vram_node *n = vram_node_attach(y, "matmul", matmul_backward, 2, in);
        if (!n) {
            vram_tensor_free(y);
            return vram_error(VRAM_ERR_HOST_MEMORY, "matmul: out of host memory for the graph");
        }
        vram_node_remember_shape(n, 0, a);
        vram_node_remember_shape(n, 1, b);
        vram_node_save(n, a);
        vram_node_save(n, b);
    }
    *out = y;
    return VRAM_OK;
}

/* ---- linear: x [.., in] @ W[out, in]^T + b ---- */

static vram_status linear_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *x = n->saved[0], *w = n->saved[1], *gc = NULL;
    int64_t out_f = w->shape[0], in_f = w->shape[1], rows = vram_tensor_numel(x) / in_f;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s != VRAM_OK) return s;
    if (x->dtype != w->dtype) { /* mixed precision */
        vram_mixed_grads want = {vram_node_needs(n, 0), vram_node_needs(n, 1), n->n_in > 2 && vram_node_needs(n, 2),
                                 n->in_ndim[0], n->in_shape[0], NULL};
        s = vram_mixed_linear_backward(&want, gc, x, w, &gin[0], &gin[1], n->n_in > 2 ? &gin[2] : NULL);
        vram_tensor_free(gc);
        return s;
    }
    if (vram_node_needs(n, 0)) { /* gx [rows, in] = g [rows, out] @ W [out, in] */
        s = vram_tensor_empty(rt, g->dtype, n->in_ndim[0], n->in_shape[0], VRAM_TAG_TEMPORARY, &gin[0]);
        if (s == VRAM_OK)
            rt->k->matmul(rt, g->dtype, 1, rows, in_f, out_f, vram_tensor_data(gc), 0, out_f, 1, vram_tensor_data(w), 0,
                          w->strides[0], w->strides[1], vram_tensor_data(gin[0]), 0);
    }
    if (s == VRAM_OK && vram_node_needs(n, 1)) { /* gW [out, in] = g^T [out, rows] @ x [rows, in] */
        s = vram_tensor_empty(rt, g->dtype, 2, w->shape, VRAM_TAG_TEMPORARY, &gin[1]);
        if (s == VRAM_OK)
            rt->k->matmul(rt, g->dtype, 1, out_f, in_f, rows, vram_tensor_data(gc), 0, 1, out_f, vram_tensor_data(x), 0,
                          in_f, 1, vram_tensor_data(gin[1]), 0);
    }
    if (s == VRAM_OK && n->n_in > 2 && vram_node_needs(n, 2)) {
        int64_t shape[1] = {out_f};
        s = vram_sum_to_shape(gc, 1, shape, &gin[2]);
    }
    vram_tensor_free(gc);
    return s;
}

vram_status vram_linear(vram_tensor *x, vram_tensor *w, vram_tensor *bias, vram_tensor **out) {
    char sx[96], sw[96];
    if (!x || !w || !out) return vram_error(VRAM_ERR_INVALID_ARG, "linear: null argument");
    vram_status s = vram_check_param_dtype("linear", x, w);
    if (s == VRAM_OK && bias) s = vram_check_param_dtype("linear", x, bias);
    if (s != VRAM_OK) return s;
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return vram_error(VRAM_ERR_SHAPE, "linear: input %s and weight %s: the weight must be [out, %lld]", SHAPE_STR(x, sx),
                          SHAPE_STR(w, sw), (long long)x->shape[x->ndim - 1]);
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))
        return vram_error(VRAM_ERR_SHAPE, "linear: weight %s and bias %s: the bias must be [%lld]", SHAPE_STR(w, sw),
                          SHAPE_STR(bias, sx), (long long)w->shape[0]);
    vram_runtime *rt = x->rt;
    int64_t out_f = w->shape[0], in_f = w->shape[1], rows = vram_tensor_numel(x) / (in_f ? in_f : 1);
    vram_tensor *xc = NULL, *y = NULL;
    s = vram_tensor_contig(x, &xc);
    if (s != VRAM_OK) return s;
    int64_t shape[MAXD];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out_f;
    s = vram_tensor_empty(rt, x->dtype, x->ndim, shape, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) {
        vram_tensor_free(xc);
        return s;
    }
    int mixed = x->dtype != w->dtype; /* its product adds the bias itself */
    int fused_bias = bias && (mixed || (rt->k->matmul_bias && bias->strides[0] == 1 && in_f > 0));
    if (mixed) {
        s = vram_mixed_linear(xc, w, bias, y);
        if (s != VRAM_OK) {
            vram_tensor_free(xc);
            vram_tensor_free(y);
            return s;
        }
    } else if (fused_bias) { /* the bias added by the product itself */
        rt->k->matmul_bias(rt, x->dtype, rows, out_f, in_f, vram_tensor_data(xc), in_f, 1, vram_tensor_data(w),
                           w->strides[1], w->strides[0], vram_tensor_data(y), vram_tensor_data(bias));
    } else {
        rt->k->matmul(rt, x->dtype, 1, rows, out_f, in_f, vram_tensor_data(xc), 0, in_f, 1, vram_tensor_data(w), 0,
                      w->strides[1], w->strides[0], vram_tensor_data(y), 0);
    }
    if (bias && !fused_bias) {
        vram_kview dst, src;
        vram_kview_of(y, &dst);
        dst.ndim = 2;
        dst.shape[0] = rows;
        dst.shape[1] = out_f;
        dst.strides[0] = out_f;
        dst.strides[1] = 1;
        src = dst;
        src.data = vram_tensor_data(bias);
        src.strides[0] = 0;
        src.strides[1] = bias->strides[0];
        rt->k->accumulate(&dst, &src);
    }
    vram_tensor *in[3] = {x, w, bias};
    if (vram_should_record(bias ? 3 : 2, in)) {
        vram_node *n = vram_node_attach(y, "linear", linear_backward, bias ? 3 : 2, in);
        if (!n) {
            vram_tensor_free(xc);
            vram_tensor_free(y);
            return vram_error(VRAM_ERR_HOST_MEMORY, "linear: out of host memory for the graph");
        }
        vram_node_remember_shape(n, 0, x);
        vram_node_save(n, xc);
        vram_node_save(n, w);
    }
    vram_tensor_free(xc);
    *out = y;
    return VRAM_OK;
}

/* ---- gelu_linear: linear(gelu(x)) saving only x (n->ip[0]: VRAM_UN_GELU or VRAM_UN_GELU_TANH) ---- */

/* Mixed precision: gelu(x) recomputed for the products; with the tanh GELU on a device with
 * the fused slot, gelu'(x) is applied in the input gradient's product (no separate pass). */
static vram_status gelu_linear_backward_mixed(vram_node *n, vram_tensor *gc, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *x = n->saved[0], *w = n->saved[1], *h = NULL, *gh = NULL;
    int op = (int)n->ip[0], need_gx = vram_node_needs(n, 0);
    int fused = op == VRAM_UN_GELU_TANH && rt->k->matmul_lowp_dgelu && x->shape[x->ndim - 1] % 8 == 0;
    vram_mixed_grads want = {need_gx, vram_node_needs(n, 1), n->n_in > 2 && vram_node_needs(n, 2), n->in_ndim[0],
                             n->in_shape[0], fused && need_gx ? x : NULL};
    vram_status s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &h);
    if (s == VRAM_OK) {
        rt->k->unary(op, 0, x->dtype, vram_tensor_numel(x), vram_tensor_data(h), vram_tensor_data(x));
        s = vram_mixed_linear_backward(&want, gc, h, w, &gh, &gin[1], n->n_in > 2 ? &gin[2] : NULL);
    }
    vram_tensor_free(h);
    if (s == VRAM_OK && need_gx) {
        if (!want.dgelu_pre)
            rt->k->unary_backward(op, 0, x->dtype, vram_tensor_numel(x), vram_tensor_data(gh), vram_tensor_data(gh),
                                  vram_tensor_data(x));
        gin[0] = gh;
    } else {
        vram_tensor_free(gh);
    }
    return s;
}

static vram_status gelu_linear_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *x = n->saved[0], *w = n->saved[1], *gc = NULL, *h = NULL, *gh = NULL;
    int op = (int)n->ip[0];
    int64_t out_f = w->shape[0], in_f = w->shape[1], rows = vram_tensor_numel(x) / in_f;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s == VRAM_OK && x->dtype != w->dtype) {
        s = gelu_linear_backward_mixed(n, gc, gin);
        vram_tensor_free(gc);
        return s;
    }
    /* recompute gelu(x): the activation forward did not keep */
    if (s == VRAM_OK && vram_node_needs(n, 1)) s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &h);
    if (s == VRAM_OK && h) {
        rt->k->unary(op, 0, x->dtype, vram_tensor_numel(x), vram_tensor_data(h), vram_tensor_data(x));
        s = vram_tensor_empty(rt, g->dtype, 2, w->shape, VRAM_TAG_TEMPORARY, &gin[1]);
        if (s == VRAM_OK) /* gW [out, in] = g^T [out, rows] @ gelu(x) [rows, in] */
            rt->k->matmul(rt, g->dtype, 1, out_f, in_f, rows, vram_tensor_data(gc), 0, 1, out_f, vram_tensor_data(h), 0,
                          in_f, 1, vram_tensor_data(gin[1]), 0);
        vram_tensor_free(h);
    }
    if (s == VRAM_OK && vram_node_needs(n, 0)) { /* gx = (g @ W) * gelu'(x) */
        s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &gh);
        if (s == VRAM_OK) {
            rt->k->matmul(rt, g->dtype, 1, rows, in_f, out_f, vram_tensor_data(gc), 0, out_f, 1, vram_tensor_data(w), 0,
                          w->strides[0], w->strides[1], vram_tensor_data(gh), 0);
            s = vram_tensor_empty(rt, g->dtype, n->in_ndim[0], n->in_shape[0], VRAM_TAG_TEMPORARY, &gin[0]);
        }
        if (s == VRAM_OK)
            rt->k->unary_backward(op, 0, x->dtype, vram_tensor_numel(x), vram_tensor_data(gin[0]), vram_tensor_data(gh),
                                  vram_tensor_data(x));
        vram_tensor_free(gh);
    }
    if (s == VRAM_OK && n->n_in > 2 && vram_node_needs(n, 2)) {
        int64_t shape[1] = {out_f};
        s = vram_sum_to_shape(gc, 1, shape, &gin[2]);
    }
    vram_tensor_free(gc);
    return s;
}

static vram_status gelu_linear_op(const char *name, int op, vram_tensor *x, vram_tensor *w, vram_tensor *bias,
                                  vram_tensor **out) {
    if (!x || !w || !out) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null argument", name);
    vram_status s = vram_check_param_dtype(name, x, w);
    if (s != VRAM_OK) return s;
    vram_tensor *xc = NULL, *h = op == VRAM_UN_GELU_TANH ? vram_mixed_take_gelu(x) : NULL, *y = NULL;
    s = vram_tensor_contig(x, &xc);
    if (s == VRAM_OK && !h) {
        s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &h);
        if (s == VRAM_OK) x->rt->k->unary(op, 0, x->dtype, vram_tensor_numel(x), vram_tensor_data(h), vram_tensor_data(xc));
    }
    if (s == VRAM_OK) {
        vram_no_grad_enter(); /* the linear part is recorded below as one node */
        s = vram_linear(h, w, bias, &y);
        vram_no_grad_exit();
    }
    vram_tensor_free(h);
    if (s == VRAM_OK) {
        vram_tensor *in[3] = {x, w, bias};
        if (vram_should_record(bias ? 3 : 2, in)) {
            vram_node *n = vram_node_attach(y, name, gelu_linear_backward, bias ? 3 : 2, in);
            if (!n) {
                s = vram_error(VRAM_ERR_HOST_MEMORY, "%s: out of host memory for the graph", name);
            } else {
                n->ip[0] = op;
                vram_node_remember_shape(n, 0, x);
                vram_node_save(n, xc);
                vram_node_save(n, w);
            }
        }
    }
    vram_tensor_free(xc);
    return rt_finish(s, y, out);
}

vram_status vram_gelu_linear(vram_tensor *x, vram_tensor *w, vram_tensor *bias, vram_tensor **out) {
    return gelu_linear_op("gelu_linear", VRAM_UN_GELU, x, w, bias, out);
}

vram_status vram_gelu_tanh_linear(vram_tensor *x, vram_tensor *w, vram_tensor *bias, vram_tensor **out) {
    return gelu_linear_op("gelu_tanh_linear", VRAM_UN_GELU_TANH, x, w, bias, out);
}

/* ---- attention ---- */

vram_status vram_causal_attention(vram_tensor *q, vram_tensor *k, vram_tensor *v, vram_tensor **out) {
    char a[96], b[96];
    if (!q || !k || !v || !out) return vram_error(VRAM_ERR_INVALID_ARG, "causal_attention: null argument");
    if (q->ndim != 4 || !vram_shape_equal(q, k))
        return vram_error(VRAM_ERR_SHAPE, "causal_attention: q %s and k %s must both be [B, H, T, D]", SHAPE_STR(q, a),
                          SHAPE_STR(k, b));
    if (!vram_shape_equal(q, v))
        return vram_error(VRAM_ERR_SHAPE, "causal_attention: q %s and v %s must both be [B, H, T, D]", SHAPE_STR(q, a),
                          SHAPE_STR(v, b));
    /* q is scaled before the product, not the T x T scores after it: the same scores, with a
     * pass over a [B, H, T, D] tensor instead of two over [B, H, T, T] (forward and backward) */
    vram_tensor *kt = NULL, *qs = NULL, *sc = NULL, *p = NULL;
    vram_status s = vram_transpose(k, 2, 3, &kt);
    if (s == VRAM_OK) s = vram_scale(q, 1.0 / sqrt((double)q->shape[3]), &qs);
    if (s == VRAM_OK) s = vram_matmul(qs, kt, &sc);
    vram_tensor_free(kt);
    vram_tensor_free(qs);
    if (s == VRAM_OK) s = vram_causal_softmax(sc, &p);
    vram_tensor_free(sc);
    if (s == VRAM_OK) s = vram_matmul(p, v, out);
    vram_tensor_free(p);
    return s;
}
