/* ddp.c — data parallel training (ddp.h): the buckets, the gradient hook that starts their
 * reductions during backward, and the wait that ends a step's communication.
 *
 * The hook (autograd's vram_runtime_set_grad_hook) finds the parameter by address (a sorted
 * index), marks it ready, and when its bucket is complete starts that bucket and every complete
 * bucket after it (buckets start in index order, so all ranks issue the same collectives in the
 * same order even if their backward passes finished gradients in another order). Each call of
 * the hook also tests the collectives under way: MPI's non-blocking collectives move only while
 * the process calls into MPI, and backward calls the hook often. A bucket's gradients are
 * copied into its flat buffer when it starts, and the mean copied back when vram_ddp_finish has
 * waited for it (plain DDP); ZeRO keeps the mean in the bucket's chunk (zero.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "ddp_internal.h"

static int cmp_index(const void *x, const void *y) {
    const ddp_index *a = x, *b = y;
    return (a->t > b->t) - (a->t < b->t);
}

static int find_param(const vram_ddp *d, const vram_tensor *t) {
    int lo = 0, hi = d->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (d->index[mid].t == t) return d->index[mid].i;
        if (d->index[mid].t < t) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

vram_tensor *vram_ddp_view(vram_tensor *t, int64_t off, int64_t n) {
    int64_t stride = 1;
    return vram_tensor_view_new(t, 1, &n, &stride, t->offset + off);
}

vram_status vram_ddp_copy_range(vram_ddp *d, ddp_bucket *b, int64_t lo, int64_t hi, vram_tensor *buf, int grads,
                                int to_buf) {
    for (int k = b->first; k < b->first + b->count; k++) {
        int i = d->order[k];
        vram_tensor *p = vram_param_list_get(d->params, i);
        int64_t p_lo = d->offset_of[i], p_hi = p_lo + vram_tensor_numel(p);
        int64_t a = p_lo > lo ? p_lo : lo, z = p_hi < hi ? p_hi : hi;
        if (a >= z) continue;
        vram_tensor *src = grads ? p->grad : p;
        if (grads && !src && !to_buf) { /* the mean gradient of a parameter this rank did not use */
            vram_status s = vram_tensor_new(d->rt, d->dt, p->ndim, p->shape, VRAM_TAG_GRADIENT, &p->grad);
            if (s != VRAM_OK) return s;
            src = p->grad;
        }
        vram_tensor *bv = vram_ddp_view(buf, a - lo, z - a);
        vram_tensor *pv = src ? vram_ddp_view(src, a - p_lo, z - a) : NULL;
        vram_status s = !bv || (src && !pv) ? vram_error(VRAM_ERR_HOST_MEMORY, "ddp: out of host memory") : VRAM_OK;
        if (s == VRAM_OK) s = !to_buf ? vram_tensor_copy(pv, bv) : src ? vram_tensor_copy(bv, pv) : vram_tensor_fill(bv, 0);
        vram_tensor_free(bv);
        vram_tensor_free(pv);
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}

static vram_status launch(vram_ddp *d, ddp_bucket *b) {
    vram_status s = vram_ddp_copy_range(d, b, 0, b->numel, b->flat, 1, 1);
    if (s == VRAM_OK && d->cfg.zero)
        s = vram_comm_ireduce_scatter(d->comm, vram_tensor_data(b->flat), vram_tensor_data(b->shard_g), b->chunk, d->dt,
                                      &b->req);
    else if (s == VRAM_OK)
        s = vram_comm_iallreduce(d->comm, vram_tensor_data(b->flat), b->numel, d->dt, &b->req);
    b->launched = s == VRAM_OK;
    return s;
}

/* Starts every complete bucket from next_launch on, in order; `all` starts the rest too. */
static vram_status launch_ready(vram_ddp *d, int all) {
    while (d->next_launch < d->nb) {
        ddp_bucket *b = &d->b[d->next_launch];
        if (!all && b->ready < b->count) break;
        vram_status s = launch(d, b);
        if (s != VRAM_OK) return s;
        d->next_launch++;
    }
    return VRAM_OK;
}

static vram_status progress(vram_ddp *d) {
    for (int j = 0; j < d->next_launch; j++) {
        int t = vram_comm_test(d->comm, &d->b[j].req);
        if (t < 0) return (vram_status)t;
    }
    return VRAM_OK;
}

static vram_status on_grad(void *ctx, vram_tensor *leaf) {
    vram_ddp *d = ctx;
    if (!d->sync) return VRAM_OK;
    int i = find_param(d, leaf);
    if (i < 0 || d->ready[i]) return VRAM_OK; /* (a checkpoint's stand-in input, or seen already) */
    d->ready[i] = 1;
    d->b[d->bucket_of[i]].ready++;
    vram_status s = launch_ready(d, 0);
    return s == VRAM_OK ? progress(d) : s;
}

/* Buckets of about bucket_bytes, parameters from the last to the first. */
static vram_status build_buckets(vram_ddp *d) {
    size_t esize = vram_dtype_size(d->dt);
    uint64_t cap = d->cfg.bucket_bytes ? d->cfg.bucket_bytes : 25ull << 20;
    d->b = calloc((size_t)d->n, sizeof *d->b);
    if (!d->b) return vram_error(VRAM_ERR_HOST_MEMORY, "ddp: out of host memory");
    for (int k = 0; k < d->n; k++) {
        int i = d->order[k];
        int64_t numel = vram_tensor_numel(vram_param_list_get(d->params, i));
        ddp_bucket *b = d->nb ? &d->b[d->nb - 1] : NULL;
        if (!b || (uint64_t)b->numel * esize >= cap) {
            b = &d->b[d->nb++];
            b->first = k;
        }
        d->bucket_of[i] = (int)(b - d->b);
        d->offset_of[i] = b->numel;
        b->numel += numel;
        b->count++;
    }
    int size = vram_comm_size(d->comm);
    for (int j = 0; j < d->nb; j++) {
        ddp_bucket *b = &d->b[j];
        b->padded = d->cfg.zero ? (b->numel + size - 1) / size * size : b->numel;
        b->chunk = b->padded / size;
        vram_status s = vram_tensor_new(d->rt, d->dt, 1, &b->padded, d->tag, &b->flat);
        if (s != VRAM_OK) return s;
    }
    return d->cfg.zero ? vram_zero_alloc(d) : VRAM_OK;
}

static vram_status check_params(vram_ddp *d) {
    for (int i = 0; i < d->n; i++) {
        vram_tensor *p = vram_param_list_get(d->params, i);
        if (i == 0) d->dt = p->dtype;
        if (p->dtype != d->dt || (p->dtype != VRAM_DTYPE_F32 && p->dtype != VRAM_DTYPE_F64) ||
            !vram_tensor_is_contiguous(p) || p->rt != d->rt)
            return vram_error(VRAM_ERR_INVALID_ARG, "ddp: parameter %s: the parameters must be contiguous, of one runtime "
                                                    "and of one dtype (f32 or f64)",
                              vram_param_list_name(d->params, i));
    }
    return VRAM_OK;
}

vram_status vram_ddp_new(vram_comm *c, vram_param_list *params, const vram_ddp_config *cfg, vram_ddp **out) {
    if (!c || !params || !cfg || !out || (cfg->zero != 0 && cfg->zero != 1) || vram_param_list_count(params) < 1)
        return vram_error(VRAM_ERR_INVALID_ARG, "ddp: bad arguments (zero %d: 0 or 1; parameters needed)", cfg ? cfg->zero : -1);
    vram_ddp *d = calloc(1, sizeof *d);
    if (!d) return vram_error(VRAM_ERR_HOST_MEMORY, "ddp: out of host memory");
    d->comm = c;
    d->rt = c->rt;
    d->params = params;
    d->cfg = *cfg;
    d->n = vram_param_list_count(params);
    d->order = calloc((size_t)d->n, sizeof *d->order);
    d->bucket_of = calloc((size_t)d->n, sizeof *d->bucket_of);
    d->offset_of = calloc((size_t)d->n, sizeof *d->offset_of);
    d->ready = calloc((size_t)d->n, 1);
    d->index = calloc((size_t)d->n, sizeof *d->index);
    vram_status s = d->order && d->bucket_of && d->offset_of && d->ready && d->index
                        ? VRAM_OK
                        : vram_error(VRAM_ERR_HOST_MEMORY, "ddp: out of host memory");
    if (s == VRAM_OK) s = check_params(d);
    if (s == VRAM_OK) s = vram_allocator_tag_register(vram_runtime_allocator(d->rt), "communication", &d->tag);
    for (int i = 0; s == VRAM_OK && i < d->n; i++) { /* the same initial weights everywhere */
        vram_tensor *p = vram_param_list_get(params, i);
        d->order[i] = d->n - 1 - i;
        d->index[i] = (ddp_index){p, i};
        s = vram_comm_broadcast(c, vram_tensor_data(p), vram_tensor_numel(p), p->dtype, 0);
    }
    if (s == VRAM_OK) {
        qsort(d->index, (size_t)d->n, sizeof *d->index, cmp_index);
        s = build_buckets(d);
    }
    if (s != VRAM_OK) {
        vram_ddp_free(d);
        return s;
    }
    vram_runtime_set_grad_hook(d->rt, on_grad, d);
    *out = d;
    return VRAM_OK;
}

void vram_ddp_free(vram_ddp *d) {
    if (!d) return;
    if (d->rt && d->rt->on_grad == on_grad) vram_runtime_set_grad_hook(d->rt, NULL, NULL);
    for (int j = 0; d->b && j < d->nb; j++) {
        ddp_bucket *b = &d->b[j];
        vram_tensor_free(b->flat);
        vram_tensor_free(b->shard_g);
        vram_tensor_free(b->shard_p);
        vram_tensor_free(b->s1);
        vram_tensor_free(b->s2);
    }
    free(d->b);
    free(d->order);
    free(d->bucket_of);
    free(d->offset_of);
    free(d->ready);
    free(d->index);
    free(d);
}

void vram_ddp_begin_micro(vram_ddp *d, int sync) { d->sync = sync; }

static int cmp_interval(const void *x, const void *y) {
    const double *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* The union of the buckets' intervals, and its part before `cut`. */
static void interval_stats(const vram_ddp *d, double cut, double *total, double *before) {
    double iv[2 * 4096];
    int m = 0;
    for (int j = 0; j < d->nb && m < 4096; j++, m++) {
        iv[2 * m] = d->b[j].req.t_start;
        iv[2 * m + 1] = d->b[j].req.t_done;
    }
    qsort(iv, (size_t)m, 2 * sizeof *iv, cmp_interval);
    *total = *before = 0;
    double lo = 0, hi = -1;
    for (int j = 0; j <= m; j++) {
        if (j < m && j > 0 && iv[2 * j] <= hi) {
            if (iv[2 * j + 1] > hi) hi = iv[2 * j + 1];
            continue;
        }
        if (j > 0) {
            *total += hi - lo;
            if (lo < cut) *before += (hi < cut ? hi : cut) - lo;
        }
        if (j < m) lo = iv[2 * j], hi = iv[2 * j + 1];
    }
}

vram_status vram_ddp_finish(vram_ddp *d) {
    double t_bwd = vram_comm_now();
    vram_status s = launch_ready(d, 1);
    for (int j = 0; s == VRAM_OK && j < d->nb; j++) s = vram_comm_wait(d->comm, &d->b[j].req);
    double t_end = vram_comm_now();
    if (s == VRAM_OK) {
        memset(&d->last, 0, sizeof d->last);
        interval_stats(d, t_bwd, &d->last.comm_s, &d->last.hidden_s);
        d->last.exposed_s = t_end - t_bwd;
        d->last.buckets = d->nb;
    }
    double mean = 1.0 / vram_comm_size(d->comm);
    for (int j = 0; s == VRAM_OK && j < d->nb; j++) {
        ddp_bucket *b = &d->b[j];
        vram_tensor *t = d->cfg.zero ? b->shard_g : b->flat;
        d->rt->k->scale_inplace(d->dt, vram_tensor_numel(t), vram_tensor_data(t), mean);
        if (!d->cfg.zero) s = vram_ddp_copy_range(d, b, 0, b->numel, b->flat, 1, 0);
    }
    for (int j = 0; j < d->nb; j++) d->b[j].ready = d->b[j].launched = 0;
    memset(d->ready, 0, (size_t)d->n);
    d->next_launch = 0;
    d->sync = 0;
    return s;
}

vram_status vram_ddp_clip_grad_norm(vram_ddp *d, double max_norm, double *total_norm) {
    return d->cfg.zero ? vram_zero_clip(d, max_norm, total_norm) : vram_clip_grad_norm(d->params, max_norm, total_norm);
}

vram_status vram_ddp_step(vram_ddp *d, vram_optimizer *opt) {
    return d->cfg.zero ? vram_zero_step(d, opt) : vram_optimizer_step(opt);
}

void vram_ddp_last_stats(const vram_ddp *d, vram_ddp_stats *out) { *out = d->last; }

uint64_t vram_ddp_optimizer_state_bytes(const vram_ddp *d, const vram_optimizer *opt) {
    return d->cfg.zero ? vram_zero_state_bytes(d) : vram_optimizer_state_bytes(opt);
}

uint64_t vram_ddp_comm_bytes(const vram_ddp *d) {
    uint64_t n = 0;
    for (int j = 0; j < d->nb; j++) {
        const ddp_bucket *b = &d->b[j];
        n += vram_tensor_storage_bytes(b->flat);
        if (b->shard_g) n += vram_tensor_storage_bytes(b->shard_g) + vram_tensor_storage_bytes(b->shard_p);
    }
    return n;
}

vram_tag vram_ddp_comm_tag(const vram_ddp *d) { return d->tag; }
int vram_ddp_bucket_count(const vram_ddp *d) { return d->nb; }
