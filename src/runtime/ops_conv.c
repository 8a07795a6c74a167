/* ops_conv.c — conv2d (im2col + matrix product, per image) and max/avg pooling, NCHW.
 *
 * conv2d saves only its input and weight: backward rebuilds each image's column matrix
 * instead of keeping N x (Cin*KH*KW) x (OH*OW) values alive, trading one im2col per image for
 * activation memory (the same trade checkpointing makes, at the scale of one op).
 */
#include <string.h>

#include "rt_internal.h"

static vram_status conv_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_runtime *rt = n->rt;
    vram_tensor *x = n->saved[0], *w = n->saved[1], *gc = NULL, *col = NULL, *gcol = NULL;
    int stride = (int)n->ip[0], pad = (int)n->ip[1];
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t CO = w->shape[0], KH = w->shape[2], KW = w->shape[3], OH = g->shape[2], OW = g->shape[3];
    int64_t ckk = C * KH * KW, ohw = OH * OW;
    size_t es = vram_dtype_size(x->dtype);
    vram_status s = vram_tensor_contig(g, &gc);
    int64_t cs[2] = {ckk, ohw};
    if (s == VRAM_OK) s = vram_tensor_empty(rt, x->dtype, 2, cs, VRAM_TAG_TEMPORARY, &col);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, x->dtype, 2, cs, VRAM_TAG_TEMPORARY, &gcol);
    if (s == VRAM_OK && vram_node_needs(n, 0)) s = vram_tensor_new(rt, x->dtype, 4, x->shape, VRAM_TAG_TEMPORARY, &gin[0]);
    if (s == VRAM_OK && vram_node_needs(n, 1)) s = vram_tensor_new(rt, x->dtype, 4, w->shape, VRAM_TAG_TEMPORARY, &gin[1]);
    if (s == VRAM_OK && n->n_in > 2 && vram_node_needs(n, 2)) {
        vram_tensor *t = NULL;
        s = vram_sum_dim(gc, 3, 0, &t); /* no graph: backward runs without recording inputs that need grad */
        if (s == VRAM_OK) {
            vram_tensor *t2 = NULL;
            s = vram_sum_dim(t, 2, 0, &t2);
            vram_tensor_free(t);
            if (s == VRAM_OK) s = vram_sum_dim(t2, 0, 0, &gin[2]);
            vram_tensor_free(t2);
        }
    }
    for (int64_t i = 0; s == VRAM_OK && i < N; i++) {
        const char *xi = (const char *)vram_tensor_data(x) + i * C * H * W * (int64_t)es;
        const char *gi = (const char *)vram_tensor_data(gc) + i * CO * ohw * (int64_t)es;
        if (gin[1]) { /* gW [CO, ckk] += g_i [CO, ohw] @ col^T [ohw, ckk] */
            rt->k->im2col(x->dtype, C, H, W, KH, KW, stride, pad, OH, OW, xi, vram_tensor_data(col));
            rt->k->matmul(rt, x->dtype, 1, CO, ckk, ohw, gi, 0, ohw, 1, vram_tensor_data(col), 0, 1, ohw,
                          vram_tensor_data(gin[1]), 1);
        }
        if (gin[0]) { /* gcol [ckk, ohw] = W^T [ckk, CO] @ g_i [CO, ohw] */
            rt->k->matmul(rt, x->dtype, 1, ckk, ohw, CO, vram_tensor_data(w), 0, 1, ckk, gi, 0, ohw, 1,
                          vram_tensor_data(gcol), 0);
            rt->k->col2im(x->dtype, C, H, W, KH, KW, stride, pad, OH, OW, vram_tensor_data(gcol),
                          (char *)vram_tensor_data(gin[0]) + i * C * H * W * (int64_t)es);
        }
    }
    vram_tensor_free(gc);
    vram_tensor_free(col);
    vram_tensor_free(gcol);
    return s;
}

vram_status vram_conv2d(vram_tensor *x, vram_tensor *w, vram_tensor *b, int stride, int pad, vram_tensor **out) {
    char sx[96], sw[96];
    if (!x || !w || !out) return vram_error(VRAM_ERR_INVALID_ARG, "conv2d: null argument");
    vram_status s = vram_check_float("conv2d", x); /* no 16-bit convolution kernels */
    if (s == VRAM_OK) s = vram_check_same_dtype("conv2d", x, w);
    if (s == VRAM_OK && b) s = vram_check_same_dtype("conv2d", x, b);
    if (s != VRAM_OK) return s;
    if (x->ndim != 4 || w->ndim != 4 || x->shape[1] != w->shape[1])
        return vram_error(VRAM_ERR_SHAPE, "conv2d: input %s and weight %s: expected [N, C, H, W] and [Cout, C, KH, KW]",
                          SHAPE_STR(x, sx), SHAPE_STR(w, sw));
    if (stride < 1 || pad < 0) return vram_error(VRAM_ERR_INVALID_ARG, "conv2d: stride %d, padding %d", stride, pad);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return vram_error(VRAM_ERR_SHAPE, "conv2d: weight %s and bias %s", SHAPE_STR(w, sw), SHAPE_STR(b, sx));
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t CO = w->shape[0], KH = w->shape[2], KW = w->shape[3];
    int64_t OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1;
    if (H + 2 * pad < KH || W + 2 * pad < KW || OH <= 0 || OW <= 0)
        return vram_error(VRAM_ERR_SHAPE, "conv2d: input %s is smaller than kernel %s", SHAPE_STR(x, sx), SHAPE_STR(w, sw));
    vram_runtime *rt = x->rt;
    vram_tensor *xc = NULL, *wc = NULL, *col = NULL, *y = NULL;
    int64_t ckk = C * KH * KW, ohw = OH * OW, cs[2] = {ckk, ohw}, ys[4] = {N, CO, OH, OW};
    s = vram_tensor_contig(x, &xc);
    if (s == VRAM_OK) s = vram_tensor_contig(w, &wc);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, x->dtype, 2, cs, VRAM_TAG_TEMPORARY, &col);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, x->dtype, 4, ys, VRAM_TAG_TEMPORARY, &y);
    size_t es = vram_dtype_size(x->dtype);
    for (int64_t i = 0; s == VRAM_OK && i < N; i++) {
        rt->k->im2col(x->dtype, C, H, W, KH, KW, stride, pad, OH, OW,
                      (const char *)vram_tensor_data(xc) + i * C * H * W * (int64_t)es, vram_tensor_data(col));
        char *yi = (char *)vram_tensor_data(y) + i * CO * ohw * (int64_t)es;
        rt->k->matmul(rt, x->dtype, 1, CO, ohw, ckk, vram_tensor_data(wc), 0, ckk, 1, vram_tensor_data(col), 0, ohw, 1, yi, 0);
        if (b) {
            vram_kview dst = {0}, src = {0};
            dst.data = yi;
            dst.dtype = src.dtype = x->dtype;
            dst.ndim = src.ndim = 2;
            dst.shape[0] = src.shape[0] = CO;
            dst.shape[1] = src.shape[1] = ohw;
            dst.strides[0] = ohw;
            dst.strides[1] = 1;
            src.data = vram_tensor_data(b);
            src.strides[0] = b->strides[0];
            src.strides[1] = 0;
            rt->k->accumulate(&dst, &src);
        }
    }
    vram_tensor_free(col);
    if (s == VRAM_OK) {
        vram_tensor *in[3] = {x, w, b};
        if (vram_should_record(b ? 3 : 2, in)) {
            vram_node *n = vram_node_attach(y, "conv2d", conv_backward, b ? 3 : 2, in);
            if (!n) {
                s = vram_error(VRAM_ERR_HOST_MEMORY, "conv2d: out of host memory for the graph");
            } else {
                n->ip[0] = stride;
                n->ip[1] = pad;
                vram_node_save(n, xc);
                vram_node_save(n, wc);
            }
        }
    }
    vram_tensor_free(xc);
    vram_tensor_free(wc);
    return rt_finish(s, y, out);
}

/* ---- pooling ---- */

static vram_status pool_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *gc = NULL;
    vram_status s = vram_tensor_contig(g, &gc);
    if (s != VRAM_OK) return s;
    s = vram_tensor_new(n->rt, g->dtype, 4, n->in_shape[0], VRAM_TAG_TEMPORARY, &gin[0]);
    if (s == VRAM_OK) {
        const int64_t *xs = n->in_shape[0];
        n->rt->k->pool2d_backward(g->dtype, (int)n->ip[0], xs[0] * xs[1], xs[2], xs[3], (int)n->ip[1], (int)n->ip[2],
                                  g->shape[2], g->shape[3], vram_tensor_data(gin[0]), vram_tensor_data(gc),
                                  n->ip[0] ? vram_tensor_data(n->saved[0]) : NULL);
    }
    vram_tensor_free(gc);
    return s;
}

static vram_status pool(const char *name, int is_max, vram_tensor *x, int k, int stride, vram_tensor **out) {
    char sx[96];
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null argument", name);
    vram_status s = vram_check_float(name, x);
    if (s != VRAM_OK) return s;
    if (k < 1 || stride < 1) return vram_error(VRAM_ERR_INVALID_ARG, "%s: kernel %d, stride %d", name, k, stride);
    if (x->ndim != 4 || x->shape[2] < k || x->shape[3] < k)
        return vram_error(VRAM_ERR_SHAPE, "%s: input %s must be [N, C, H, W] with H, W >= %d", name, SHAPE_STR(x, sx), k);
    int64_t OH = (x->shape[2] - k) / stride + 1, OW = (x->shape[3] - k) / stride + 1;
    int64_t ys[4] = {x->shape[0], x->shape[1], OH, OW};
    vram_tensor *xc = NULL, *y = NULL, *arg = NULL;
    s = vram_tensor_contig(x, &xc);
    if (s == VRAM_OK) s = vram_tensor_empty(x->rt, x->dtype, 4, ys, VRAM_TAG_TEMPORARY, &y);
    if (s == VRAM_OK && is_max) s = vram_tensor_empty(x->rt, VRAM_DTYPE_I32, 4, ys, VRAM_TAG_TEMPORARY, &arg);
    if (s == VRAM_OK) {
        x->rt->k->pool2d(x->dtype, is_max, ys[0] * ys[1], x->shape[2], x->shape[3], k, stride, OH, OW, vram_tensor_data(y),
                         vram_tensor_data(xc), is_max ? vram_tensor_data(arg) : NULL);
        if (vram_should_record(1, &x)) {
            vram_node *n = vram_node_attach(y, name, pool_backward, 1, &x);
            if (!n) {
                s = vram_error(VRAM_ERR_HOST_MEMORY, "%s: out of host memory for the graph", name);
            } else {
                vram_node_remember_shape(n, 0, x);
                n->ip[0] = is_max;
                n->ip[1] = k;
                n->ip[2] = stride;
                if (is_max) vram_node_save(n, arg);
            }
        }
    }
    vram_tensor_free(xc);
    vram_tensor_free(arg);
    return rt_finish(s, y, out);
}

vram_status vram_max_pool2d(vram_tensor *x, int k, int stride, vram_tensor **out) {
    return pool("max_pool2d", 1, x, k, stride, out);
}
vram_status vram_avg_pool2d(vram_tensor *x, int k, int stride, vram_tensor **out) {
    return pool("avg_pool2d", 0, x, k, stride, out);
}
