/* grad_scaler.c — dynamic loss scaling for fp16 training, with PyTorch GradScaler's semantics.
 *
 * fp16 keeps 5 exponent bits, so small gradients underflow to zero; multiplying the loss by a
 * large scale (2^16 at first) moves them into range, and dividing the gradients by it again
 * before clipping and the optimizer restores their values. When a gradient overflows (inf or
 * NaN) the step is skipped and the scale halves; after 2,000 clean steps in a row it doubles.
 *
 * The state lives on the device, so a step needs no host round trip per tensor: `scale` (one
 * f32, the seed of backward) and `state` (i32: the growth tracker, the found-inf flag). The
 * kernels of the table do the work (unscale per gradient, scaler_update once); the optimizer's
 * update kernels read the flag. The host reads the flag once a step, after the update, to keep
 * the optimizer's step counts as PyTorch's (a skipped step does not count).
 */
#include <stdlib.h>

#include "rt_internal.h"
#include "vram/optim.h"

struct vram_grad_scaler {
    vram_runtime *rt;
    vram_optimizer *opt;
    vram_grad_scaler_config cfg;
    vram_tensor *scale; /* [] f32 */
    vram_tensor *state; /* [2] i32: growth tracker, found_inf */
    int64_t skipped;
};

void vram_grad_scaler_config_default(vram_grad_scaler_config *c) {
    c->init_scale = 65536.0;
    c->growth_factor = 2.0;
    c->backoff_factor = 0.5;
    c->growth_interval = 2000;
}

vram_status vram_grad_scaler_new(vram_runtime *rt, vram_optimizer *o, const vram_grad_scaler_config *cfg,
                                 vram_grad_scaler **out) {
    vram_grad_scaler_config defaults;
    if (!cfg) {
        vram_grad_scaler_config_default(&defaults);
        cfg = &defaults;
    }
    if (!rt || !o || !out) return vram_error(VRAM_ERR_INVALID_ARG, "grad scaler: null argument");
    if (!(cfg->init_scale > 0) || !(cfg->growth_factor >= 1) || !(cfg->backoff_factor > 0 && cfg->backoff_factor < 1) ||
        cfg->growth_interval < 1)
        return vram_error(VRAM_ERR_INVALID_ARG, "grad scaler: scale %g, growth %g, backoff %g, interval %d: want a positive "
                          "scale, growth >= 1, backoff in (0, 1), interval >= 1", cfg->init_scale, cfg->growth_factor,
                          cfg->backoff_factor, cfg->growth_interval);
    vram_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) return vram_error(VRAM_ERR_HOST_MEMORY, "grad scaler: out of host memory");
    s->rt = rt, s->opt = o, s->cfg = *cfg;
    int64_t two = 2;
    vram_status st = vram_tensor_empty(rt, VRAM_DTYPE_F32, 0, NULL, VRAM_TAG_OPTIMIZER_STATE, &s->scale);
    if (st == VRAM_OK) st = vram_tensor_new(rt, VRAM_DTYPE_I32, 1, &two, VRAM_TAG_OPTIMIZER_STATE, &s->state);
    if (st == VRAM_OK) st = vram_tensor_fill(s->scale, cfg->init_scale);
    if (st != VRAM_OK) {
        vram_grad_scaler_free(s);
        return st;
    }
    vram_optimizer_set_skip_flag(o, (const int32_t *)vram_tensor_data(s->state) + 1);
    *out = s;
    return VRAM_OK;
}

void vram_grad_scaler_free(vram_grad_scaler *s) {
    if (!s) return;
    vram_optimizer_set_skip_flag(s->opt, NULL);
    vram_tensor_free(s->scale);
    vram_tensor_free(s->state);
    free(s);
}

const vram_tensor *vram_grad_scaler_seed(const vram_grad_scaler *s) { return s->scale; }

vram_status vram_grad_scaler_unscale(vram_grad_scaler *s, vram_param_list *params) {
    if (!s || !params) return vram_error(VRAM_ERR_INVALID_ARG, "grad scaler unscale: null argument");
    const vram_kernels *k = s->rt->k;
    int32_t *state = vram_tensor_data(s->state);
    k->zero(state + 1, sizeof *state);
    for (int i = 0; i < vram_param_list_count(params); i++) {
        vram_tensor *g = vram_param_list_get(params, i)->grad;
        if (!g) continue;
        if (!vram_tensor_is_contiguous(g) || !vram_dtype_is_float(g->dtype))
            return vram_error(VRAM_ERR_INVALID_ARG, "grad scaler unscale: gradient of %s is not a contiguous float tensor",
                              vram_param_list_name(params, i));
        k->unscale(g->dtype, vram_tensor_numel(g), vram_tensor_data(g), vram_tensor_data(s->scale), state + 1);
    }
    return VRAM_OK;
}

vram_status vram_grad_scaler_update(vram_grad_scaler *s, int *skipped) {
    if (!s) return vram_error(VRAM_ERR_INVALID_ARG, "grad scaler update: null scaler");
    int32_t *state = vram_tensor_data(s->state), found = 0;
    s->rt->k->scaler_update(vram_tensor_data(s->scale), state, s->cfg.growth_factor, s->cfg.backoff_factor,
                            s->cfg.growth_interval);
    s->rt->k->download(&found, state + 1, sizeof found);
    vram_status st = s->rt->k->sync();
    if (st != VRAM_OK) return st;
    if (found) {
        s->skipped++;
        vram_optimizer_uncount_step(s->opt);
    }
    if (skipped) *skipped = found != 0;
    return VRAM_OK;
}

double vram_grad_scaler_scale(const vram_grad_scaler *s) { return vram_tensor_item(s->scale); }

int64_t vram_grad_scaler_skipped(const vram_grad_scaler *s) { return s->skipped; }
