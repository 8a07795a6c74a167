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

/* Scales all gradients so their global L2 norm is at most max_norm; *total_norm (may be NULL)
 * receives the norm before clipping. */
vram_status vram_clip_grad_norm(vram_param_list *params, double max_norm, double *total_norm);

#ifdef __cplusplus
}
#endif

#endif
