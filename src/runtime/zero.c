/* zero.c — ZeRO stage 1 (ddp.h, zero = 1): the optimizer state of this rank's chunks only.
 *
 * After vram_ddp_finish each bucket's shard_g holds the mean gradient of this rank's chunk of
 * the bucket (reduce-scatter). The step copies the chunk's current parameters into shard_p,
 * runs the optimizer's own update kernel (the kernel table's sgd/adam/adagrad slots, the
 * formulas of optim.c) over the chunk with state tensors of the chunk's size, and all-gathers
 * every rank's shard_p into the bucket's flat buffer, from which the parameters are copied
 * back: afterwards every rank holds the same updated weights, while each kept 1/size of the
 * optimizer state. Padding elements (a bucket rounded up to a multiple of the ranks) have zero
 * gradient and zero weight and stay zero under every update rule. Clipping sums the chunks'
 * squares over the ranks: the same global norm as the whole gradient's. (A loss scaler's skip
 * flag is not read: `vram train` refuses --zero 1 with loss scaling.)
 */
#include <math.h>
#include <stdlib.h>

#include "comm_internal.h"
#include "ddp_internal.h"

vram_status vram_zero_alloc(vram_ddp *d) {
    for (int j = 0; j < d->nb; j++) {
        ddp_bucket *b = &d->b[j];
        vram_status s = vram_tensor_new(d->rt, d->dt, 1, &b->chunk, d->tag, &b->shard_g);
        if (s == VRAM_OK) s = vram_tensor_new(d->rt, d->dt, 1, &b->chunk, d->tag, &b->shard_p);
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}

uint64_t vram_zero_state_bytes(const vram_ddp *d) {
    uint64_t n = 0;
    for (int j = 0; j < d->nb; j++) {
        if (d->b[j].s1) n += vram_tensor_storage_bytes(d->b[j].s1);
        if (d->b[j].s2) n += vram_tensor_storage_bytes(d->b[j].s2);
    }
    return n;
}

vram_status vram_zero_clip(vram_ddp *d, double max_norm, double *total_norm) {
    if (!(max_norm > 0)) return vram_error(VRAM_ERR_INVALID_ARG, "clip_grad_norm: max_norm %g", max_norm);
    vram_dtype *dts = malloc(sizeof *dts * (size_t)d->nb);
    int64_t *ns = malloc(sizeof *ns * (size_t)d->nb);
    const void **xs = malloc(sizeof *xs * (size_t)d->nb);
    if (!dts || !ns || !xs) {
        free(dts), free(ns), free(xs);
        return vram_error(VRAM_ERR_HOST_MEMORY, "zero: out of host memory");
    }
    for (int j = 0; j < d->nb; j++) dts[j] = d->dt, ns[j] = d->b[j].chunk, xs[j] = vram_tensor_data(d->b[j].shard_g);
    double sq = d->rt->k->sum_squares(d->nb, dts, ns, xs);
    free(dts), free(ns), free(xs);
    vram_status s = vram_comm_allreduce_host(d->comm, &sq, 1);
    if (s != VRAM_OK) return s;
    double norm = sqrt(sq);
    if (total_norm) *total_norm = norm;
    double coef = max_norm / (norm + 1e-6); /* (vram_clip_grad_norm's rule) */
    if (coef < 1)
        for (int j = 0; j < d->nb; j++)
            d->rt->k->scale_inplace(d->dt, d->b[j].chunk, vram_tensor_data(d->b[j].shard_g), coef);
    return VRAM_OK;
}

static vram_status state(vram_ddp *d, ddp_bucket *b, vram_tensor **slot) {
    if (*slot) return VRAM_OK;
    return vram_tensor_new(d->rt, d->dt, 1, &b->chunk, VRAM_TAG_OPTIMIZER_STATE, slot);
}

/* The optimizer's update over bucket b's chunk (shard_p, shard_g). */
static vram_status update(vram_ddp *d, ddp_bucket *b, const vram_optim_config *c) {
    const vram_kernels *k = d->rt->k;
    int64_t step = ++b->step;
    void *p = vram_tensor_data(b->shard_p), *g = vram_tensor_data(b->shard_g);
    vram_status s = VRAM_OK;
    switch (c->kind) {
    case VRAM_OPTIM_SGD:
        if (c->momentum > 0) s = state(d, b, &b->s1);
        if (s == VRAM_OK)
            k->sgd_update(d->dt, b->chunk, p, g, b->s1 ? vram_tensor_data(b->s1) : NULL, c->lr, c->momentum,
                          c->weight_decay, step == 1, NULL);
        break;
    case VRAM_OPTIM_ADAM:
    case VRAM_OPTIM_ADAMW:
        s = state(d, b, &b->s1);
        if (s == VRAM_OK) s = state(d, b, &b->s2);
        if (s == VRAM_OK)
            k->adam_update(d->dt, b->chunk, p, g, vram_tensor_data(b->s1), vram_tensor_data(b->s2), c->lr, c->beta1,
                           c->beta2, c->eps, c->weight_decay, c->kind == VRAM_OPTIM_ADAMW, step, NULL);
        break;
    case VRAM_OPTIM_ADAGRAD:
        s = state(d, b, &b->s1);
        if (s == VRAM_OK)
            k->adagrad_update(d->dt, b->chunk, p, g, vram_tensor_data(b->s1), c->lr, c->eps, c->weight_decay, step,
                              c->lr_decay, NULL);
        break;
    }
    if (s != VRAM_OK) b->step--;
    return s;
}

vram_status vram_zero_step(vram_ddp *d, vram_optimizer *opt) {
    const vram_optim_config *c = vram_optimizer_config(opt);
    int r = vram_comm_rank(d->comm);
    vram_status s = VRAM_OK;
    for (int j = 0; s == VRAM_OK && j < d->nb; j++) {
        ddp_bucket *b = &d->b[j];
        int64_t lo = r * b->chunk, hi = lo + b->chunk < b->numel ? lo + b->chunk : b->numel;
        if (lo < hi) s = vram_ddp_copy_range(d, b, lo, hi, b->shard_p, 0, 1);
        if (s == VRAM_OK) s = update(d, b, c);
    }
    double t0 = vram_comm_now();
    int started = 0;
    for (int j = 0; s == VRAM_OK && j < d->nb; j++, started++)
        s = vram_comm_iallgather(d->comm, vram_tensor_data(d->b[j].shard_p), vram_tensor_data(d->b[j].flat),
                                 d->b[j].chunk, d->dt, &d->b[j].req);
    for (int j = 0; j < started; j++) { /* (every started one is waited for, even after an error) */
        vram_status w = vram_comm_wait(d->comm, &d->b[j].req);
        if (s == VRAM_OK) s = w;
    }
    double dt = vram_comm_now() - t0;
    d->last.comm_s += dt;
    d->last.exposed_s += dt;
    for (int j = 0; s == VRAM_OK && j < d->nb; j++) s = vram_ddp_copy_range(d, &d->b[j], 0, d->b[j].numel, d->b[j].flat, 0, 0);
    return s;
}
