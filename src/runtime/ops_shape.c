/* ops_shape.c — views and reductions: reshape, transpose, slice (views sharing storage),
 * concat and contiguous (copies), sum, mean and sum along a dimension.
 *
 * Views change only shape, strides and offset. Their backward functions build the input's
 * gradient: reshape reshapes back, transpose swaps back, slice scatters into zeros, concat
 * cuts the gradient into pieces. Reductions use the accumulate kernel with stride-0
 * destination dimensions; their backward broadcasts the gradient back with a stride-0 copy.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static vram_status oom_graph(const char *op) {
    return vram_error(VRAM_ERR_HOST_MEMORY, "%s: out of host memory for the graph", op);
}

/* ---- reshape ---- */

static vram_status reshape_raw(vram_tensor *x, int nd, const int64_t *shape, vram_tensor **out) {
    vram_tensor *xc = NULL;
    vram_status s = vram_tensor_contig(x, &xc);
    if (s != VRAM_OK) return s;
    int64_t strides[MAXD], st = 1;
    for (int i = nd - 1; i >= 0; i--) {
        strides[i] = st;
        st *= shape[i];
    }
    vram_tensor *v = vram_tensor_view_new(xc, nd, shape, strides, xc->offset);
    vram_tensor_free(xc);
    if (!v) return vram_error(VRAM_ERR_HOST_MEMORY, "reshape: out of host memory");
    *out = v;
    return VRAM_OK;
}

static vram_status reshape_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    return reshape_raw(g, n->in_ndim[0], n->in_shape[0], &gin[0]);
}

vram_status vram_reshape(vram_tensor *x, int nd, const int64_t *shape_in, vram_tensor **out) {
    char sx[96], ss[96];
    if (!x || !out || (nd > 0 && !shape_in)) return vram_error(VRAM_ERR_INVALID_ARG, "reshape: null argument");
    if (nd < 0 || nd > MAXD) return vram_error(VRAM_ERR_SHAPE, "reshape: %d dimensions (at most %d)", nd, MAXD);
    int64_t shape[MAXD], known = 1;
    int infer = -1;
    for (int i = 0; i < nd; i++) {
        shape[i] = shape_in[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
        } else if (shape[i] < 0) {
            return vram_error(VRAM_ERR_SHAPE, "reshape: %s to %s: bad dimension", SHAPE_STR(x, sx),
                              vram_shape_str(nd, shape_in, ss, sizeof ss));
        } else {
            known *= shape[i];
        }
    }
    int64_t n = vram_tensor_numel(x);
    if (infer >= 0) shape[infer] = known ? n / known : 0;
    if (vram_shape_numel(nd, shape) != n)
        return vram_error(VRAM_ERR_SHAPE, "reshape: %s to %s: %lld elements cannot take that shape", SHAPE_STR(x, sx),
                          vram_shape_str(nd, shape_in, ss, sizeof ss), (long long)n);
    vram_tensor *y = NULL;
    vram_status s = reshape_raw(x, nd, shape, &y);
    if (s != VRAM_OK) return s;
    if (vram_should_record(1, &x)) {
        vram_node *node = vram_node_attach(y, "reshape", reshape_backward, 1, &x);
        if (!node) {
            vram_tensor_free(y);
            return oom_graph("reshape");
        }
        vram_node_remember_shape(node, 0, x);
    }
    *out = y;
    return VRAM_OK;
}

/* ---- transpose ---- */

static vram_tensor *transpose_view(vram_tensor *x, int d0, int d1) {
    int64_t shape[MAXD], strides[MAXD];
    memcpy(shape, x->shape, sizeof shape);
    memcpy(strides, x->strides, sizeof strides);
    int64_t t = shape[d0];
    shape[d0] = shape[d1];
    shape[d1] = t;
    t = strides[d0];
    strides[d0] = strides[d1];
    strides[d1] = t;
    return vram_tensor_view_new(x, x->ndim, shape, strides, x->offset);
}

static vram_status transpose_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    gin[0] = transpose_view(g, (int)n->ip[0], (int)n->ip[1]);
    return gin[0] ? VRAM_OK : vram_error(VRAM_ERR_HOST_MEMORY, "transpose: out of host memory");
}

vram_status vram_transpose(vram_tensor *x, int d0, int d1, vram_tensor **out) {
    char sx[96];
    if (!x || !out) return vram_error(VRAM_ERR_INVALID_ARG, "transpose: null argument");
    if (d0 < 0) d0 += x->ndim;
    if (d1 < 0) d1 += x->ndim;
    if (d0 < 0 || d1 < 0 || d0 >= x->ndim || d1 >= x->ndim)
        return vram_error(VRAM_ERR_SHAPE, "transpose: dimensions %d and %d of %s", d0, d1, SHAPE_STR(x, sx));
    vram_tensor *y = transpose_view(x, d0, d1);
    if (!y) return vram_error(VRAM_ERR_HOST_MEMORY, "transpose: out of host memory");
    if (vram_should_record(1, &x)) {
        vram_node *node = vram_node_attach(y, "transpose", transpose_backward, 1, &x);
        if (!node) {
            vram_tensor_free(y);
            return oom_graph("transpose");
        }
        node->ip[0] = d0;
        node->ip[1] = d1;
    }
    *out = y;
    return VRAM_OK;
}

/* ---- slice ---- */

static vram_status slice_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *z = NULL;
    vram_status s = vram_tensor_new(n->rt, g->dtype, n->in_ndim[0], n->in_shape[0], VRAM_TAG_TEMPORARY, &z);
    if (s != VRAM_OK) return s;
    int d = (int)n->ip[0];
    int64_t shape[MAXD], strides[MAXD];
    memcpy(shape, z->shape, sizeof shape);
    memcpy(strides, z->strides, sizeof strides);
    shape[d] = g->shape[d];
    strides[d] *= n->ip[2];
    vram_tensor *v = vram_tensor_view_new(z, z->ndim, shape, strides, n->ip[1] * z->strides[d]);
    if (!v) {
        vram_tensor_free(z);
        return vram_error(VRAM_ERR_HOST_MEMORY, "slice: out of host memory");
    }
    vram_tensor_copy(v, g);
    vram_tensor_free(v);
    gin[0] = z;
    return VRAM_OK;
}

vram_status vram_slice(vram_tensor *x, int dim, int64_t start, int64_t end, int64_t step, vram_tensor **out) {
    char sx[96];
    if (!x || !out) return vram_error(VRAM_ERR_INVALID_ARG, "slice: null argument");
    if (dim < 0) dim += x->ndim;
    if (dim < 0 || dim >= x->ndim)
        return vram_error(VRAM_ERR_SHAPE, "slice: dimension %d of %s", dim, SHAPE_STR(x, sx));
    int64_t size = x->shape[dim];
    if (end > size) end = size;
    if (step <= 0 || start < 0 || start > end)
        return vram_error(VRAM_ERR_SHAPE, "slice: [%lld:%lld:%lld] of dimension %d of %s", (long long)start, (long long)end,
                          (long long)step, dim, SHAPE_STR(x, sx));
    int64_t shape[MAXD], strides[MAXD];
    memcpy(shape, x->shape, sizeof shape);
    memcpy(strides, x->strides, sizeof strides);
    shape[dim] = (end - start + step - 1) / step;
    strides[dim] = x->strides[dim] * step;
    vram_tensor *y = vram_tensor_view_new(x, x->ndim, shape, strides, x->offset + start * x->strides[dim]);
    if (!y) return vram_error(VRAM_ERR_HOST_MEMORY, "slice: out of host memory");
    if (vram_should_record(1, &x)) {
        vram_node *node = vram_node_attach(y, "slice", slice_backward, 1, &x);
        if (!node) {
            vram_tensor_free(y);
            return oom_graph("slice");
        }
        vram_node_remember_shape(node, 0, x);
        node->ip[0] = dim;
        node->ip[1] = start;
        node->ip[2] = step;
    }
    *out = y;
    return VRAM_OK;
}

/* ---- contiguous ---- */

static vram_status identity_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    (void)n;
    gin[0] = vram_tensor_retain(g);
    return VRAM_OK;
}

vram_status vram_contiguous(vram_tensor *x, vram_tensor **out) {
    if (!x || !out) return vram_error(VRAM_ERR_INVALID_ARG, "contiguous: null argument");
    vram_tensor *y = NULL;
    vram_status s = vram_tensor_empty_like(x, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) return s;
    vram_tensor_copy(y, x);
    if (vram_should_record(1, &x) && !vram_node_attach(y, "contiguous", identity_backward, 1, &x)) {
        vram_tensor_free(y);
        return oom_graph("contiguous");
    }
    *out = y;
    return VRAM_OK;
}

/* ---- concat ---- */

static vram_status concat_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    int d = (int)n->ip[0];
    int64_t at = 0;
    vram_status s = VRAM_OK;
    for (int i = 0; i < n->n_in && s == VRAM_OK; i++) {
        int64_t len = ((int64_t *)n->ctx)[i];
        if (vram_node_needs(n, i)) {
            int64_t shape[MAXD];
            memcpy(shape, g->shape, sizeof shape);
            shape[d] = len;
            vram_tensor *v = vram_tensor_view_new(g, g->ndim, shape, g->strides, g->offset + at * g->strides[d]);
            if (!v) return vram_error(VRAM_ERR_HOST_MEMORY, "concat: out of host memory");
            s = vram_tensor_contig(v, &gin[i]);
            vram_tensor_free(v);
        }
        at += len;
    }
    return s;
}

static void free_ctx(vram_node *n) { free(n->ctx); }

vram_status vram_concat(int n, vram_tensor *const *xs, int dim, vram_tensor **out) {
    char s0[96], s1[96];
    if (n < 1 || !xs || !out) return vram_error(VRAM_ERR_INVALID_ARG, "concat: no inputs");
    for (int i = 0; i < n; i++)
        if (!xs[i]) return vram_error(VRAM_ERR_INVALID_ARG, "concat: input %d is null", i);
    vram_tensor *x0 = xs[0];
    if (dim < 0) dim += x0->ndim;
    if (dim < 0 || dim >= x0->ndim) return vram_error(VRAM_ERR_SHAPE, "concat: dimension %d of %s", dim, SHAPE_STR(x0, s0));
    int64_t shape[MAXD];
    memcpy(shape, x0->shape, sizeof shape);
    shape[dim] = 0;
    for (int i = 0; i < n; i++) {
        vram_tensor *x = xs[i];
        if (x->dtype != x0->dtype)
            return vram_error(VRAM_ERR_INVALID_ARG, "concat: dtypes differ (%s and %s)", vram_dtype_name(x0->dtype),
                              vram_dtype_name(x->dtype));
        int ok = x->ndim == x0->ndim;
        for (int d = 0; ok && d < x0->ndim; d++) ok = d == dim || x->shape[d] == x0->shape[d];
        if (!ok)
            return vram_error(VRAM_ERR_SHAPE, "concat: shapes %s and %s differ outside dimension %d", SHAPE_STR(x0, s0),
                              SHAPE_STR(x, s1), dim);
        shape[dim] += x->shape[dim];
    }
    vram_tensor *y = NULL;
    vram_status s = vram_tensor_empty(x0->rt, x0->dtype, x0->ndim, shape, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) return s;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t vs[MAXD];
        memcpy(vs, shape, sizeof vs);
        vs[dim] = xs[i]->shape[dim];
        vram_tensor *v = vram_tensor_view_new(y, y->ndim, vs, y->strides, at * y->strides[dim]);
        if (!v) {
            vram_tensor_free(y);
            return vram_error(VRAM_ERR_HOST_MEMORY, "concat: out of host memory");
        }
        vram_tensor_copy(v, xs[i]);
        vram_tensor_free(v);
        at += xs[i]->shape[dim];
    }
    if (vram_should_record(n, xs)) {
        int64_t *lens = malloc(sizeof(int64_t) * (size_t)n);
        vram_node *node = lens ? vram_node_attach(y, "concat", concat_backward, n, xs) : NULL;
        if (!node) {
            free(lens);
            vram_tensor_free(y);
            return oom_graph("concat");
        }
        for (int i = 0; i < n; i++) lens[i] = xs[i]->shape[dim];
        node->ctx = lens;
        node->release_ctx = free_ctx;
        node->ip[0] = dim;
    }
    *out = y;
    return VRAM_OK;
}

/* ---- reductions ---- */

/* gin = g broadcast back over the input shape (g has the input's rank with 1s, or is 0-d), times f. */
static vram_status expand_backward(vram_node *n, vram_tensor *g, vram_tensor **gin) {
    vram_tensor *r = NULL;
    vram_status s = vram_tensor_empty(n->rt, g->dtype, n->in_ndim[0], n->in_shape[0], VRAM_TAG_TEMPORARY, &r);
    if (s != VRAM_OK) return s;
    vram_kview dst, src;
    vram_kview_of(r, &dst);
    src = dst;
    src.data = vram_tensor_data(g);
    int dim = (int)n->ip[0];
    for (int i = 0; i < r->ndim; i++) {
        if (dim < 0) {
            src.strides[i] = 0;
        } else if (i == dim) {
            src.strides[i] = 0;
        } else {
            /* g is [.., 1 at dim, ..] or has dim removed (keepdim 0) */
            int gi = (n->ip[1] || i < dim) ? i : i - 1;
            src.strides[i] = g->strides[gi];
        }
    }
    n->rt->k->copy(&dst, &src);
    if (n->dp[0] != 1.0) n->rt->k->scale_inplace(r->dtype, vram_tensor_numel(r), vram_tensor_data(r), n->dp[0]);
    gin[0] = r;
    return VRAM_OK;
}

static vram_status reduce(const char *name, vram_tensor *x, int dim, int keepdim, double factor, vram_tensor **out) {
    char sx[96];
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "%s: null argument", name);
    vram_status s = vram_check_float_lowp(name, x);
    if (s != VRAM_OK) return s;
    if (dim >= x->ndim || dim < -1)
        return vram_error(VRAM_ERR_SHAPE, "%s: dimension %d of %s", name, dim, SHAPE_STR(x, sx));
    int64_t shape[MAXD];
    int nd = 0;
    if (dim >= 0) {
        for (int i = 0; i < x->ndim; i++) {
            if (i == dim && !keepdim) continue;
            shape[nd++] = i == dim ? 1 : x->shape[i];
        }
    }
    vram_tensor *y = NULL;
    s = vram_tensor_new(x->rt, x->dtype, nd, shape, VRAM_TAG_TEMPORARY, &y);
    if (s != VRAM_OK) return s;
    vram_kview dst, src;
    vram_kview_of(x, &src);
    dst = src;
    dst.data = vram_tensor_data(y);
    for (int i = 0; i < x->ndim; i++) {
        if (dim < 0 || i == dim) {
            dst.strides[i] = 0;
        } else {
            int yi = (keepdim || i < dim) ? i : i - 1;
            dst.strides[i] = y->strides[yi];
        }
    }
    x->rt->k->accumulate(&dst, &src);
    if (factor != 1.0) x->rt->k->scale_inplace(y->dtype, vram_tensor_numel(y), vram_tensor_data(y), factor);
    if (vram_should_record(1, &x)) {
        vram_node *n = vram_node_attach(y, name, expand_backward, 1, &x);
        if (!n) {
            vram_tensor_free(y);
            return oom_graph(name);
        }
        vram_node_remember_shape(n, 0, x);
        n->ip[0] = dim;
        n->ip[1] = keepdim;
        n->dp[0] = factor;
    }
    *out = y;
    return VRAM_OK;
}

vram_status vram_sum(vram_tensor *x, vram_tensor **out) { return reduce("sum", x, -1, 0, 1.0, out); }
vram_status vram_mean(vram_tensor *x, vram_tensor **out) {
    if (!x) return vram_error(VRAM_ERR_INVALID_ARG, "mean: null tensor");
    int64_t n = vram_tensor_numel(x);
    return reduce("mean", x, -1, 0, n ? 1.0 / (double)n : 1.0, out);
}
vram_status vram_sum_dim(vram_tensor *x, int dim, int keepdim, vram_tensor **out) {
    if (!x) return vram_error(VRAM_ERR_INVALID_ARG, "sum_dim: null tensor");
    if (dim < 0) dim += x->ndim;
    if (dim < 0) return vram_error(VRAM_ERR_SHAPE, "sum_dim: dimension out of range");
    return reduce("sum_dim", x, dim, keepdim, 1.0, out);
}
