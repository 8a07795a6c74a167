/* optim.c — SGD, Adam, AdamW, Adagrad and global-norm clipping.
 *
 * An optimizer keeps, per parameter, up to two state tensors and a step count. State comes
 * into being at the first step that sees the parameter's gradient (so constructing an
 * optimizer costs nothing, as in PyTorch) and lives until vram_optimizer_free. The update
 * itself is a kernel-table slot (sgd_update, adam_update, adagrad_update), so a CUDA table
 * brings its own fused update.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "vram/optim.h"

struct vram_optimizer {
    vram_runtime *rt;
    vram_param_list *params;
    vram_optim_config cfg;
    int n;
    vram_tensor **s1, **s2; /* [n] state tensors (NULL until needed) */
    int64_t *steps;
    int stepped_last; /* the last step's count of updated parameters, for uncounting it */
    const int32_t *skip; /* a loss scaler's device flag, or NULL */
    double grad_coef;    /* clipping's factor, applied inside the multi-tensor update (clip_step) */
};

void vram_optimizer_set_skip_flag(vram_optimizer *o, const int32_t *flag) { o->skip = flag; }

void vram_optimizer_uncount_step(vram_optimizer *o) {
    for (int i = 0; i < o->n && o->stepped_last; i++)
        if (vram_param_list_get(o->params, i)->grad && o->steps[i] > 0) o->steps[i]--;
    o->stepped_last = 0;
}

void vram_optim_config_default(vram_optim_kind kind, vram_optim_config *c) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    switch (kind) {
    case VRAM_OPTIM_SGD: c->lr = 0.01; break;
    case VRAM_OPTIM_ADAM: c->lr = 1e-3; c->eps = 1e-8; break;
    case VRAM_OPTIM_ADAMW: c->lr = 1e-3; c->eps = 1e-8; c->weight_decay = 0.01; break;
    case VRAM_OPTIM_ADAGRAD: c->lr = 0.01; c->eps = 1e-10; break;
    }
}

vram_status vram_optim_config_parse(const char *name, vram_optim_config *c) {
    if (!name) return vram_error(VRAM_ERR_INVALID_ARG, "optimizer: no name");
    if (!strcmp(name, "sgd")) {
        vram_optim_config_default(VRAM_OPTIM_SGD, c);
    } else if (!strcmp(name, "momentum")) {
        vram_optim_config_default(VRAM_OPTIM_SGD, c);
        c->momentum = 0.9;
    } else if (!strcmp(name, "adam")) {
        vram_optim_config_default(VRAM_OPTIM_ADAM, c);
    } else if (!strcmp(name, "adamw")) {
        vram_optim_config_default(VRAM_OPTIM_ADAMW, c);
    } else if (!strcmp(name, "adagrad")) {
        vram_optim_config_default(VRAM_OPTIM_ADAGRAD, c);
    } else {
        return vram_error(VRAM_ERR_INVALID_ARG, "unknown optimizer '%s' (sgd, momentum, adam, adamw, adagrad)", name);
    }
    return VRAM_OK;
}

const char *vram_optim_kind_name(vram_optim_kind k) {
    switch (k) {
    case VRAM_OPTIM_SGD: return "sgd";
    case VRAM_OPTIM_ADAM: return "adam";
    case VRAM_OPTIM_ADAMW: return "adamw";
    case VRAM_OPTIM_ADAGRAD: return "adagrad";
    }
    return "?";
}

vram_status vram_optimizer_new(vram_runtime *rt, vram_param_list *params, const vram_optim_config *cfg,
                               vram_optimizer **out) {
    if (!rt || !params || !cfg || !out) return vram_error(VRAM_ERR_INVALID_ARG, "optimizer: null argument");
    if (!(cfg->lr >= 0) || !(cfg->momentum >= 0) || !(cfg->weight_decay >= 0) || !(cfg->beta1 >= 0 && cfg->beta1 < 1) ||
        !(cfg->beta2 >= 0 && cfg->beta2 < 1) || !(cfg->eps >= 0) || (unsigned)cfg->kind > VRAM_OPTIM_ADAGRAD)
        return vram_error(VRAM_ERR_INVALID_ARG, "optimizer: bad hyperparameters (lr %g, momentum %g, betas %g %g)", cfg->lr,
                          cfg->momentum, cfg->beta1, cfg->beta2);
    vram_optimizer *o = calloc(1, sizeof *o);
    int n = vram_param_list_count(params);
    if (o) {
        o->s1 = calloc((size_t)n + 1, sizeof *o->s1);
        o->s2 = calloc((size_t)n + 1, sizeof *o->s2);
        o->steps = calloc((size_t)n + 1, sizeof *o->steps);
    }
    if (!o || !o->s1 || !o->s2 || !o->steps) {
        vram_optimizer_free(o);
        return vram_error(VRAM_ERR_HOST_MEMORY, "optimizer: out of host memory");
    }
    o->rt = rt;
    o->grad_coef = 1;
    o->params = params;
    o->cfg = *cfg;
    o->n = n;
    *out = o;
    return VRAM_OK;
}

void vram_optimizer_free(vram_optimizer *o) {
    if (!o) return;
    for (int i = 0; o->s1 && i < o->n; i++) vram_tensor_free(o->s1[i]);
    for (int i = 0; o->s2 && i < o->n; i++) vram_tensor_free(o->s2[i]);
    free(o->s1);
    free(o->s2);
    free(o->steps);
    free(o);
}

void vram_optimizer_set_lr(vram_optimizer *o, double lr) { o->cfg.lr = lr; }

uint64_t vram_optimizer_state_bytes(const vram_optimizer *o) {
    uint64_t b = 0;
    for (int i = 0; i < o->n; i++) {
        if (o->s1[i]) b += vram_tensor_storage_bytes(o->s1[i]);
        if (o->s2[i]) b += vram_tensor_storage_bytes(o->s2[i]);
    }
    return b;
}

static vram_status state(vram_tensor *p, vram_tensor **slot) {
    if (*slot) return VRAM_OK;
    return vram_tensor_new(p->rt, p->dtype, p->ndim, p->shape, VRAM_TAG_OPTIMIZER_STATE, slot);
}

const vram_optim_config *vram_optimizer_config(const vram_optimizer *o) { return &o->cfg; }

void vram_optimizer_state(const vram_optimizer *o, int i, int64_t *step, vram_tensor **s1, vram_tensor **s2) {
    int ok = i >= 0 && i < o->n;
    *step = ok ? o->steps[i] : 0;
    *s1 = ok ? o->s1[i] : NULL;
    *s2 = ok ? o->s2[i] : NULL;
}

vram_status vram_optimizer_state_prepare(vram_optimizer *o, int i, int64_t step, vram_tensor **s1, vram_tensor **s2) {
    if (i < 0 || i >= o->n || step < 0) return vram_error(VRAM_ERR_INVALID_ARG, "optimizer state: parameter %d, step %lld", i, (long long)step);
    vram_tensor *p = vram_param_list_get(o->params, i);
    const vram_optim_config *c = &o->cfg;
    int two = c->kind == VRAM_OPTIM_ADAM || c->kind == VRAM_OPTIM_ADAMW;
    int one = two || c->kind == VRAM_OPTIM_ADAGRAD || c->momentum > 0;
    vram_status s = one && step > 0 ? state(p, &o->s1[i]) : VRAM_OK;
    if (s == VRAM_OK && two && step > 0) s = state(p, &o->s2[i]);
    if (s != VRAM_OK) return s;
    o->steps[i] = step;
    *s1 = o->s1[i];
    *s2 = o->s2[i];
    return VRAM_OK;
}

/* Adam/AdamW over every parameter in one multi-tensor update, where the device has one and all
 * parameters with gradients share a dtype and a step count (VRAM_ERR_UNSUPPORTED otherwise,
 * before anything changed). */
static vram_status adam_step_list(vram_optimizer *o) {
    const vram_optim_config *c = &o->cfg;
    int count = 0;
    int64_t step = -1;
    vram_dtype dt = VRAM_DTYPE_F32;
    for (int i = 0; i < o->n; i++) {
        vram_tensor *p = vram_param_list_get(o->params, i);
        if (!p->grad) continue;
        if ((count && (o->steps[i] + 1 != step || p->dtype != dt)) || !vram_tensor_is_contiguous(p) ||
            !vram_tensor_is_contiguous(p->grad))
            return VRAM_ERR_UNSUPPORTED;
        step = o->steps[i] + 1, dt = p->dtype, count++;
    }
    if (!count) return VRAM_OK;
    void **ptrs = malloc(sizeof *ptrs * 5 * (size_t)count), **lowp = ptrs ? ptrs + 4 * count : NULL;
    int64_t *ns = malloc(sizeof *ns * (size_t)count);
    vram_status s = ptrs && ns ? VRAM_OK : vram_error(VRAM_ERR_HOST_MEMORY, "optimizer step: out of host memory");
    vram_dtype lowp_dt = VRAM_DTYPE_F32; /* the kept 16-bit copies' dtype: the first one's */
    int m = 0, kept = 0;
    for (int i = 0; i < o->n && s == VRAM_OK; i++) {
        vram_tensor *p = vram_param_list_get(o->params, i);
        if (!p->grad) continue;
        s = state(p, &o->s1[i]);
        if (s == VRAM_OK) s = state(p, &o->s2[i]);
        if (s != VRAM_OK) break;
        ptrs[m] = vram_tensor_data(p), ptrs[count + m] = vram_tensor_data(p->grad);
        ptrs[2 * count + m] = vram_tensor_data(o->s1[i]), ptrs[3 * count + m] = vram_tensor_data(o->s2[i]);
        lowp[m] = NULL;
        vram_tensor *kc = p->st->lowp; /* a kept 16-bit copy: rows past p's (padding) stay zero */
        if (kc && (!kept || kc->dtype == lowp_dt)) lowp[m] = vram_tensor_data(kc), lowp_dt = kc->dtype, kept++;
        ns[m++] = vram_tensor_numel(p);
    }
    if (s == VRAM_OK) {
        o->rt->k->adam_update_list(dt, count, ptrs, (const void *const *)(ptrs + count), ptrs + 2 * count,
                                   ptrs + 3 * count, ns, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay,
                                   c->kind == VRAM_OPTIM_ADAMW, step, o->skip, kept ? lowp : NULL, lowp_dt, o->grad_coef);
        for (int i = 0; i < o->n; i++) {
            vram_tensor *p = vram_param_list_get(o->params, i);
            if (!p->grad) continue;
            o->steps[i] = step;
            if (p->st->lowp && p->st->lowp->dtype == lowp_dt) p->st->lowp_epoch = o->rt->param_epoch; /* rewritten above */
        }
    }
    free(ptrs);
    free(ns);
    return s;
}

/* Every gradient of params (m of them) times coef in one launch; 0 when they differ in dtype or
 * host memory ran out (the caller scales them one by one). */
static int scale_all(const vram_kernels *k, vram_param_list *params, int m, double coef) {
    int64_t *ns = malloc(sizeof *ns * (size_t)m);
    void **xs = malloc(sizeof *xs * (size_t)m);
    int n = 0, ok = ns && xs;
    vram_dtype dt = VRAM_DTYPE_F32;
    for (int i = 0; ok && i < vram_param_list_count(params); i++) {
        vram_tensor *g = vram_param_list_get(params, i)->grad;
        if (!g) continue;
        if (n && g->dtype != dt) ok = 0;
        dt = g->dtype, ns[n] = vram_tensor_numel(g), xs[n++] = vram_tensor_data(g);
    }
    if (ok) k->scale_inplace_list(dt, n, ns, xs, coef);
    free(ns);
    free(xs);
    return ok;
}

/* Every gradient of params times coef (< 1). */
static void scale_grads(vram_param_list *params, double coef) {
    int m = 0;
    const vram_kernels *k = NULL;
    for (int i = 0; i < vram_param_list_count(params); i++) {
        vram_tensor *g = vram_param_list_get(params, i)->grad;
        if (g) m++, k = g->rt->k;
    }
    if (!k || (k->scale_inplace_list && scale_all(k, params, m, coef))) return;
    for (int i = 0; i < vram_param_list_count(params); i++) {
        vram_tensor *g = vram_param_list_get(params, i)->grad;
        if (g) g->rt->k->scale_inplace(g->dtype, vram_tensor_numel(g), vram_tensor_data(g), coef);
    }
}

vram_status vram_optimizer_step(vram_optimizer *o) {
    if (!o) return vram_error(VRAM_ERR_INVALID_ARG, "optimizer step: null optimizer");
    const vram_kernels *k = o->rt->k;
    const vram_optim_config *c = &o->cfg;
    o->stepped_last = 1;
    o->rt->param_epoch++; /* kept 16-bit weight copies not rewritten by the update below are stale */
    if ((c->kind == VRAM_OPTIM_ADAM || c->kind == VRAM_OPTIM_ADAMW) && k->adam_update_list) {
        vram_status s = adam_step_list(o);
        if (s != VRAM_ERR_UNSUPPORTED) return s; /* else the parameters are not one list: per tensor */
    }
    if (o->grad_coef < 1) scale_grads(o->params, o->grad_coef); /* (clip_step's factor) */
    for (int i = 0; i < o->n; i++) {
        vram_tensor *p = vram_param_list_get(o->params, i), *g = p->grad;
        if (!g) continue;
        if (!vram_tensor_is_contiguous(p) || !vram_tensor_is_contiguous(g))
            return vram_error(VRAM_ERR_INVALID_ARG, "optimizer step: parameter %s is not contiguous",
                              vram_param_list_name(o->params, i));
        vram_status s = VRAM_OK;
        int64_t n = vram_tensor_numel(p);
        int64_t step = ++o->steps[i];
        switch (c->kind) {
        case VRAM_OPTIM_SGD:
            if (c->momentum > 0) s = state(p, &o->s1[i]);
            if (s == VRAM_OK)
                k->sgd_update(p->dtype, n, vram_tensor_data(p), vram_tensor_data(g),
                              o->s1[i] ? vram_tensor_data(o->s1[i]) : NULL, c->lr, c->momentum, c->weight_decay, step == 1,
                              o->skip);
            break;
        case VRAM_OPTIM_ADAM:
        case VRAM_OPTIM_ADAMW:
            s = state(p, &o->s1[i]);
            if (s == VRAM_OK) s = state(p, &o->s2[i]);
            if (s == VRAM_OK)
                k->adam_update(p->dtype, n, vram_tensor_data(p), vram_tensor_data(g), vram_tensor_data(o->s1[i]),
                               vram_tensor_data(o->s2[i]), c->lr, c->beta1, c->beta2, c->eps, c->weight_decay,
                               c->kind == VRAM_OPTIM_ADAMW, step, o->skip);
            break;
        case VRAM_OPTIM_ADAGRAD:
            s = state(p, &o->s1[i]);
            if (s == VRAM_OK)
                k->adagrad_update(p->dtype, n, vram_tensor_data(p), vram_tensor_data(g), vram_tensor_data(o->s1[i]), c->lr,
                                  c->eps, c->weight_decay, step, c->lr_decay, o->skip);
            break;
        }
        if (s != VRAM_OK) {
            o->steps[i]--;
            return s;
        }
    }
    return VRAM_OK;
}

/* The global L2 norm of params' gradients (one reduction over all of them). */
static vram_status grad_norm(vram_param_list *params, double *norm) {
    int count = vram_param_list_count(params), m = 0;
    vram_dtype *dts = malloc(sizeof *dts * (size_t)(count ? count : 1));
    int64_t *ns = malloc(sizeof *ns * (size_t)(count ? count : 1));
    const void **xs = malloc(sizeof *xs * (size_t)(count ? count : 1));
    const vram_kernels *k = NULL;
    if (!dts || !ns || !xs) {
        free(dts), free(ns), free(xs);
        return vram_error(VRAM_ERR_HOST_MEMORY, "clip_grad_norm: out of host memory");
    }
    for (int i = 0; i < count; i++) {
        vram_tensor *g = vram_param_list_get(params, i)->grad;
        if (!g) continue;
        k = g->rt->k;
        dts[m] = g->dtype, ns[m] = vram_tensor_numel(g), xs[m++] = vram_tensor_data(g);
    }
    double sq = k ? k->sum_squares(m, dts, ns, xs) : 0;
    free(dts), free(ns), free(xs);
    *norm = sqrt(sq);
    return VRAM_OK;
}

vram_status vram_clip_grad_norm(vram_param_list *params, double max_norm, double *total_norm) {
    if (!params || !(max_norm > 0)) return vram_error(VRAM_ERR_INVALID_ARG, "clip_grad_norm: max_norm %g", max_norm);
    double norm = 0;
    vram_status s = grad_norm(params, &norm);
    if (s != VRAM_OK) return s;
    if (total_norm) *total_norm = norm;
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1) scale_grads(params, coef);
    return VRAM_OK;
}

vram_status vram_optimizer_clip_step(vram_optimizer *o, double max_norm, double *total_norm) {
    if (!o || !(max_norm > 0)) return vram_error(VRAM_ERR_INVALID_ARG, "clip_step: max_norm %g", max_norm);
    const vram_optim_config *c = &o->cfg;
    if (!((c->kind == VRAM_OPTIM_ADAM || c->kind == VRAM_OPTIM_ADAMW) && o->rt->k->adam_update_list)) {
        vram_status s = vram_clip_grad_norm(o->params, max_norm, total_norm);
        return s == VRAM_OK ? vram_optimizer_step(o) : s;
    }
    double norm = 0;
    vram_status s = grad_norm(o->params, &norm);
    if (s != VRAM_OK) return s;
    if (total_norm) *total_norm = norm;
    double coef = max_norm / (norm + 1e-6);
    o->grad_coef = coef < 1 ? coef : 1;
    s = vram_optimizer_step(o);
    o->grad_coef = 1;
    return s;
}
