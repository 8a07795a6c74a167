/* ops_attention.c — causal self-attention as one op from the packed projection: qkv [B, T, 3C]
 * (q, k, v side by side, each C = H heads x D) -> [B, T, C] with the heads merged back.
 *
 * Forward: q, k and v are copied out of qkv into contiguous [B, H, T, D] (q scaled by 1/sqrt(D)
 * on the way), S = q k^T and P = causal softmax(S) are [B*H, T, T] batched products, O = P v,
 * and O is written straight into the [B, T, C] output. The node keeps q (scaled), k, v and P.
 * Backward writes the three input gradients straight into the slices of one [B, T, 3C]
 * gradient, so the composition of views (reshape, transpose, slice) and its zero-filled
 * per-slice gradients summed by the engine never exists; the softmax's gradient is computed in
 * place over dP. Numerically it is the composition of vram_causal_attention.
 *
 * With 16-bit qkv and head size 64 on a device with a flash-attention slot, the op is one
 * kernel that never stores P: the node keeps qkv, the output and the rows' log-sum-exp.
 */
#include <math.h>
#include <string.h>

#include "rt_internal.h"

/* A [B, H, T, D] view of one third (part 0, 1, 2) of a [B, T, 3C] tensor, or of a [B, T, C]
 * tensor (part -1), as kernel view geometry. */
static void heads_view(const vram_tensor *t, int64_t H, int part, vram_kview *v) {
    int64_t B = t->shape[0], T = t->shape[1], W = t->shape[2], C = part < 0 ? W : W / 3, D = C / H;
    vram_kview_of(t, v);
    v->ndim = 4;
    v->shape[0] = B, v->shape[1] = H, v->shape[2] = T, v->shape[3] = D;
    v->strides[0] = T * W, v->strides[1] = D, v->strides[2] = W, v->strides[3] = 1;
    if (part > 0) v->data += (int64_t)part * C * (int64_t)vram_dtype_size(t->dtype);
}

/* C[b] = A[b] @ B[b] for b < B*H, on [.., T, x] contiguous operands; ta / tb read A / B transposed. */
static void bmm(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const vram_tensor *a,
                int ta, const vram_tensor *b, int tb, vram_tensor *c) {
    int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    rt->k->matmul(rt, dt, batch, M, N, K, vram_tensor_data(a), a_rows * a_cols, ta ? 1 : a_cols, ta ? a_cols : 1,
                  vram_tensor_data(b), b_rows * b_cols, tb ? 1 : b_cols, tb ? b_cols : 1, vram_tensor_data(c), 0);
}

static vram_status attention_qkv_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *q = n->saved[0], *k = n->saved[1], *v = n->saved[2], *p = n->saved[3];
    int64_t H = n->ip[0], B = n->in_shape[0][0], T = n->in_shape[0][1], C = n->in_shape[0][2] / 3, D = C / H, BH = B * H;
    vram_dtype dt = q->dtype;
    vram_tensor *gc = NULL, *go = NULL, *gp = NULL, *gq = NULL, *gk = NULL, *gv = NULL, *gqkv = NULL;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s == VRAM_OK) s = vram_tensor_empty_like(q, VRAM_TAG_TEMPORARY, &go);
    if (s == VRAM_OK) { /* dO [B, H, T, D] from the merged-heads gradient */
        vram_kview dst, src;
        vram_kview_of(go, &dst);
        heads_view(gc, H, -1, &src);
        rt->k->copy(&dst, &src);
        s = vram_tensor_empty_like(p, VRAM_TAG_TEMPORARY, &gp);
    }
    vram_tensor_free(gc);
    if (s == VRAM_OK) s = vram_tensor_empty_like(v, VRAM_TAG_TEMPORARY, &gv);
    if (s == VRAM_OK) {
        bmm(rt, dt, BH, T, T, D, go, 0, v, 1, gp); /* dP = dO v^T */
        bmm(rt, dt, BH, T, D, T, p, 1, go, 0, gv); /* dV = P^T dO */
        rt->k->softmax_backward(dt, BH * T, T, 0, vram_tensor_data(gp), vram_tensor_data(gp), vram_tensor_data(p));
        s = vram_tensor_empty_like(q, VRAM_TAG_TEMPORARY, &gq);
    }
    vram_tensor_free(go);
    if (s == VRAM_OK) s = vram_tensor_empty_like(k, VRAM_TAG_TEMPORARY, &gk);
    if (s == VRAM_OK) {
        bmm(rt, dt, BH, T, D, T, gp, 0, k, 0, gq); /* dq_scaled = dS k */
        bmm(rt, dt, BH, T, D, T, gp, 1, q, 0, gk); /* dK = dS^T q_scaled */
        rt->k->scale_inplace(dt, vram_tensor_numel(gq), vram_tensor_data(gq), 1.0 / sqrt((double)D));
        s = vram_tensor_empty(rt, dt, 3, n->in_shape[0], VRAM_TAG_TEMPORARY, &gqkv);
    }
    vram_tensor_free(gp);
    if (s == VRAM_OK) { /* the three gradients side by side: every element written once */
        vram_tensor *parts[3] = {gq, gk, gv};
        for (int i = 0; i < 3; i++) {
            vram_kview dst, src;
            heads_view(gqkv, H, i, &dst);
            vram_kview_of(parts[i], &src);
            rt->k->copy(&dst, &src);
        }
        gin[0] = gqkv;
    }
    vram_tensor_free(gq);
    vram_tensor_free(gk);
    vram_tensor_free(gv);
    return s;
}

static vram_status flash_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *qkv = n->saved[0], *y = n->saved[1], *lse = n->saved[2], *gc = NULL;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, qkv->dtype, 3, qkv->shape, VRAM_TAG_TEMPORARY, &gin[0]);
    if (s == VRAM_OK)
        rt->k->flash_attention_backward(rt, qkv->dtype, qkv->shape[0], qkv->shape[1], n->ip[0], vram_tensor_data(qkv),
                                        vram_tensor_data(y), vram_tensor_data(gc), vram_tensor_data(lse),
                                        vram_tensor_data(gin[0]));
    vram_tensor_free(gc);
    return s;
}

static vram_status attention_flash(vram_tensor *qkv, int64_t H, vram_tensor **out) {
    vram_runtime *rt = qkv->rt;
    int64_t B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3, os[3] = {B, T, C}, ls[1] = {B * H * T};
    vram_tensor *xc = NULL, *lse = NULL, *y = NULL;
    vram_status s = vram_tensor_contig(qkv, &xc);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, qkv->dtype, 3, os, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, VRAM_DTYPE_F32, 1, ls, VRAM_TAG_TEMPORARY, &lse);
    if (s == VRAM_OK) {
        rt->k->flash_attention(rt, qkv->dtype, B, T, H, vram_tensor_data(xc), vram_tensor_data(y), vram_tensor_data(lse));
        if (vram_should_record(1, &qkv)) {
            vram_node *n = vram_node_attach(y, "flash_attention", flash_backward, 1, &qkv);
            if (!n) {
                s = vram_error(VRAM_ERR_HOST_MEMORY, "causal_attention_qkv: out of host memory for the graph");
            } else {
                n->ip[0] = H;
                vram_node_save(n, xc);
                vram_node_save(n, y);
                vram_node_save(n, lse);
            }
        }
    }
    vram_tensor_free(xc);
    vram_tensor_free(lse);
    return rt_finish(s, y, out);
}

vram_status vram_causal_attention_qkv(vram_tensor *qkv, int64_t heads, vram_tensor **out) {
    char sq[96];
    if (!qkv || !out) return vram_error(VRAM_ERR_INVALID_ARG, "causal_attention_qkv: null argument");
    vram_status s = vram_check_float_lowp("causal_attention_qkv", qkv);
    if (s != VRAM_OK) return s;
    if (qkv->ndim != 3 || heads < 1 || qkv->shape[2] % (3 * heads))
        return vram_error(VRAM_ERR_SHAPE, "causal_attention_qkv: qkv %s must be [B, T, 3C] with C a multiple of %lld heads",
                          SHAPE_STR(qkv, sq), (long long)heads);
    vram_runtime *rt = qkv->rt;
    vram_dtype dt = qkv->dtype;
    int64_t B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3, H = heads, D = C / H, BH = B * H;
    if (vram_dtype_is_lowp(dt) && rt->k->flash_attention && D == 64) return attention_flash(qkv, H, out);
    int64_t hs[4] = {B, H, T, D}, ps[3] = {BH, T, T}, os[3] = {B, T, C};
    vram_tensor *xc = NULL, *parts[3] = {0}, *sc = NULL, *p = NULL, *o = NULL, *y = NULL;
    s = vram_tensor_contig(qkv, &xc);
    for (int i = 0; i < 3 && s == VRAM_OK; i++) {
        s = vram_tensor_empty(rt, dt, 4, hs, VRAM_TAG_TEMPORARY, &parts[i]);
        if (s != VRAM_OK) break;
        vram_kview dst, src;
        vram_kview_of(parts[i], &dst);
        heads_view(xc, H, i, &src);
        rt->k->copy(&dst, &src);
    }
    vram_tensor_free(xc);
    if (s == VRAM_OK) {
        rt->k->scale_inplace(dt, vram_tensor_numel(parts[0]), vram_tensor_data(parts[0]), 1.0 / sqrt((double)D));
        s = vram_tensor_empty(rt, dt, 3, ps, VRAM_TAG_TEMPORARY, &sc);
    }
    if (s == VRAM_OK) {
        bmm(rt, dt, BH, T, T, D, parts[0], 0, parts[1], 1, sc); /* S = q k^T */
        s = vram_tensor_empty(rt, dt, 3, ps, VRAM_TAG_TEMPORARY, &p);
    }
    if (s == VRAM_OK) rt->k->softmax(dt, BH * T, T, T, 0, vram_tensor_data(p), vram_tensor_data(sc));
    vram_tensor_free(sc);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, dt, 4, hs, VRAM_TAG_TEMPORARY, &o);
    if (s == VRAM_OK) {
        bmm(rt, dt, BH, T, D, T, p, 0, parts[2], 0, o); /* O = P v */
        s = vram_tensor_empty(rt, dt, 3, os, VRAM_TAG_TEMPORARY, &y);
    }
    if (s == VRAM_OK) {
        vram_kview dst, src;
        heads_view(y, H, -1, &dst);
        vram_kview_of(o, &src);
        rt->k->copy(&dst, &src);
    }
    vram_tensor_free(o);
    if (s == VRAM_OK && vram_should_record(1, &qkv)) {
        vram_node *n = vram_node_attach(y, "causal_attention_qkv", attention_qkv_backward, 1, &qkv);
        if (!n) {
            s = vram_error(VRAM_ERR_HOST_MEMORY, "causal_attention_qkv: out of host memory for the graph");
        } else {
            n->ip[0] = H;
            vram_node_remember_shape(n, 0, qkv);
            for (int i = 0; i < 3; i++) vram_node_save(n, parts[i]);
            vram_node_save(n, p);
        }
    }
    for (int i = 0; i < 3; i++) vram_tensor_free(parts[i]);
    vram_tensor_free(p);
    return rt_finish(s, y, out);
}
