/* autograd.h — reverse-mode differentiation over a graph built anew by every forward pass.
 *
 * When gradients are enabled and an op has an input that requires a gradient, the op records
 * a node: its backward function, edges to the nodes (or leaf tensors) of its inputs, and the
 * tensors it saved for backward. Saved tensors are what keep activations alive (their storage
 * is tagged VRAM_TAG_ACTIVATION while saved). vram_backward walks the nodes in dependency
 * order from the loss, hands each its output gradient, accumulates input gradients, and frees
 * each node's saved tensors as soon as the node has run, so activation memory drains during
 * backward as in PyTorch. Leaf gradients accumulate (+=) until zeroed: that is gradient
 * accumulation over micro-batches.
 *
 * no_grad is a thread-local depth counter: inside it ops record nothing and save nothing.
 * vram_checkpoint runs a function without recording, keeps only its inputs, and in backward
 * re-runs it with gradients enabled and the random state it first saw (dropout repeats).
 */
#ifndef VRAM_AUTOGRAD_H
#define VRAM_AUTOGRAD_H

#include "vram/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a leaf tensor (floating dtype) as needing a gradient. */
vram_status vram_tensor_set_requires_grad(vram_tensor *t, int requires_grad);
int vram_tensor_requires_grad(const vram_tensor *t);
/* The accumulated gradient of a leaf (borrowed; NULL when none). */
vram_tensor *vram_tensor_grad(const vram_tensor *t);
/* Name of the op that produced `t` ("" for leaves and tensors made without recording). */
const char *vram_tensor_grad_fn_name(const vram_tensor *t);
/* A tensor sharing t's storage with no graph history. */
vram_status vram_tensor_detach(vram_tensor *t, vram_tensor **out);

/* Drops the gradient (set_to_none, frees its memory) or zeroes it in place. */
void vram_tensor_zero_grad(vram_tensor *t, int set_to_none);

/* Back-propagates from `root`. `grad` NULL means a one-element root with gradient 1. The graph
 * is consumed: saved tensors are released as nodes run. */
vram_status vram_backward(vram_tensor *root, const vram_tensor *grad);

/* Called during vram_backward as soon as a leaf's gradient is final for this backward pass
 * (every edge to it has run; checkpointed segments' inner passes included): data parallel
 * training starts communicating a gradient there, while the rest of backward still runs. An
 * error it returns ends the backward pass with that error. NULL removes the hook. */
typedef vram_status (*vram_grad_hook)(void *ctx, vram_tensor *leaf);
void vram_runtime_set_grad_hook(vram_runtime *rt, vram_grad_hook fn, void *ctx);

/* Thread-local no_grad scope (nests). */
void vram_no_grad_enter(void);
void vram_no_grad_exit(void);
int vram_grad_enabled(void);

/* A checkpointed segment: fn maps inputs to one output tensor (a new reference). */
typedef vram_status (*vram_checkpoint_fn)(void *ctx, int n_inputs, vram_tensor *const *inputs,
                                          vram_tensor **out);
vram_status vram_checkpoint(vram_runtime *rt, vram_checkpoint_fn fn, void *ctx, int n_inputs,
                            vram_tensor *const *inputs, vram_tensor **out);

#ifdef __cplusplus
}
#endif

#endif
