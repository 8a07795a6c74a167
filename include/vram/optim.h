/* optim.h — optimizers over a parameter list: SGD (with or without momentum), Adam, AdamW,
 * Adagrad, and gradient clipping by global norm.
 *
 * The update rules are PyTorch's (torch.optim, default hyperparameters from
 * vram_optim_config_default). State is allocated at the first step that sees a parameter's
 * gradient, tagged VRAM_TAG_OPTIMIZER_STATE, so what each optimizer costs shows in the
 * allocator's per-tag statistics: Adam/AdamW two tensors per parameter (exp_avg and
 * exp_avg_sq), Adagrad one (sum), SGD with momentum one (momentum_buffer), plain SGD none.
 * A parameter whose gradient is NULL (set_to_none) is skipped, as in PyTorch.
 */
#ifndef VRAM_OPTIM_H
#define VRAM_OPTIM_H

#include "vram/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vram_optim_kind {
    VRAM_OPTIM_SGD = 0,
    VRAM_OPTIM_ADAM,
    VRAM_OPTIM_ADAMW,
    VRAM_OPTIM_ADAGRAD
} vram_optim_kind;

typedef struct vram_optim_config {
    vram_optim_kind kind;
    double lr;
    double momentum;     /* SGD */
    double weight_decay; /* L2 (SGD, Adam, Adagrad) or decoupled (AdamW) */
    double beta1, beta2; /* Adam, AdamW */
    double eps;          /* Adam, AdamW, Adagrad */
    double lr_decay;     /* Adagrad */
} vram_optim_config;

/* PyTorch's defaults for the kind (SGD: lr 0.01, no momentum). */
void vram_optim_config_default(vram_optim_kind kind, vram_optim_config *cfg);
/* "sgd", "momentum" (SGD, momentum 0.9), "adam", "adamw", "adagrad". */
vram_status vram_optim_config_parse(const char *name, vram_optim_config *cfg);
const char *vram_optim_kind_name(vram_optim_kind kind);

typedef struct vram_optimizer vram_optimizer;
vram_status vram_optimizer_new(vram_runtime *rt, vram_param_list *params, const vram_optim_config *cfg,
                               vram_optimizer **out);
void vram_optimizer_free(vram_optimizer *o); /* returns its state memory */
vram_status vram_optimizer_step(vram_optimizer *o);
void vram_optimizer_set_lr(vram_optimizer *o, double lr);
/* Bytes of optimizer state held now (as requested; the allocator rounds each block to 512). */
uint64_t vram_optimizer_state_bytes(const vram_optimizer *o);

/* For saving and resuming (model_file.h): the configuration, and parameter i's step count and
 * state tensors (borrowed; NULL until its first step). state_prepare creates them as a first step
 * would and sets the step count, so a resumed optimizer continues where the saved one stopped. */
const vram_optim_config *vram_optimizer_config(const vram_optimizer *o);
void vram_optimizer_state(const vram_optimizer *o, int i, int64_t *step, vram_tensor **s1, vram_tensor **s2);
vram_status vram_optimizer_state_prepare(vram_optimizer *o, int i, int64_t step, vram_tensor **s1, vram_tensor **s2);

/* Dynamic loss scaling with PyTorch GradScaler's semantics (grad_scaler.c), for fp16 training.
 * The scale, the growth tracker and the found-inf flag live on the device: backward is seeded
 * with the scale tensor (loss x scale), unscale divides every gradient in place and sets the
 * flag on any inf or NaN, the optimizer's kernels read the flag and leave weights and state
 * untouched when it is set, and update halves the scale after an overflow or doubles it after
 * `growth_interval` clean steps in a row. update then reads the flag back (4 bytes, once a
 * step) so the optimizer's step counts (Adam's bias correction) skip the step as PyTorch's do. */
typedef struct vram_grad_scaler_config {
    double init_scale;      /* 65536 */
    double growth_factor;   /* 2 */
    double backoff_factor;  /* 0.5 */
    int growth_interval;    /* 2000 */
} vram_grad_scaler_config;
void vram_grad_scaler_config_default(vram_grad_scaler_config *cfg);
typedef struct vram_grad_scaler vram_grad_scaler;
/* The scaler for optimizer o (it sets o's skip flag); cfg NULL: GradScaler's defaults. */
vram_status vram_grad_scaler_new(vram_runtime *rt, vram_optimizer *o, const vram_grad_scaler_config *cfg,
                                 vram_grad_scaler **out);
void vram_grad_scaler_free(vram_grad_scaler *s);
/* A scalar f32 tensor holding the scale (borrowed): vram_backward(loss, seed) scales the loss. */
const vram_tensor *vram_grad_scaler_seed(const vram_grad_scaler *s);
/* Clears the flag, then divides every gradient of params by the scale and flags inf/NaN. */
vram_status vram_grad_scaler_unscale(vram_grad_scaler *s, vram_param_list *params);
/* After the optimizer step: the scale's update on the device, then the flag read back.
 * *skipped (may be NULL) says whether this step was skipped. */
vram_status vram_grad_scaler_update(vram_grad_scaler *s, int *skipped);
/* The current scale and the number of steps skipped so far (reads the device). */
double vram_grad_scaler_scale(const vram_grad_scaler *s);
int64_t vram_grad_scaler_skipped(const vram_grad_scaler *s);
/* The device flag optimizer updates read (NULL: never skip); vram_grad_scaler_new sets it. */
void vram_optimizer_set_skip_flag(vram_optimizer *o, const int32_t *flag);
/* Takes the last step out of the step counts (a step the kernels skipped). */
void vram_optimizer_uncount_step(vram_optimizer *o);

/* Scales all gradients so their global L2 norm is at most max_norm; *total_norm (may be NULL)
 * receives the norm before clipping. */
vram_status vram_clip_grad_norm(vram_param_list *params, double max_norm, double *total_norm);
/* vram_clip_grad_norm over o's parameters, then vram_optimizer_step(o), in one pass fewer where
 * the update is one multi-tensor kernel (Adam, AdamW on the GPU): the clipping factor is applied
 * inside the update, and the gradients are left as they were (unclipped). */
vram_status vram_optimizer_clip_step(vram_optimizer *o, double max_norm, double *total_norm);

#ifdef __cplusplus
}
#endif

#endif
