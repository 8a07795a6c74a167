/* ops.h — differentiable tensor operations.
 *
 * Each op checks its inputs (a mismatch returns VRAM_ERR_SHAPE with a detail naming the op and
 * both shapes, e.g. "matmul: [2, 3] @ [4, 5]: inner dimensions 3 and 4 differ"), allocates its
 * output from the allocator as a temporary, runs the kernel from the runtime's device table,
 * and, when gradients are enabled and an input requires one, records a graph node
 * (autograd.h). Outputs are new references. Arithmetic ops take f32 or f64 inputs of one dtype;
 * index inputs (embedding ids, cross-entropy targets) are i32 or i64.
 *
 * Broadcasting follows NumPy: shapes align from the right, a dimension of 1 stretches.
 */
#ifndef VRAM_OPS_H
#define VRAM_OPS_H

#include "vram/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elementwise, with broadcasting. add also takes one f32 and one f16/bf16 tensor of one shape
 * (on a device with low-precision kernels): the sum in f32, as PyTorch promotes it (mixed
 * precision's residual adds), the 16-bit operand's gradient rounded to its dtype. */
vram_status vram_add(vram_tensor *a, vram_tensor *b, vram_tensor **out);
vram_status vram_sub(vram_tensor *a, vram_tensor *b, vram_tensor **out);
vram_status vram_mul(vram_tensor *a, vram_tensor *b, vram_tensor **out);
vram_status vram_div(vram_tensor *a, vram_tensor *b, vram_tensor **out);
vram_status vram_scale(vram_tensor *x, double s, vram_tensor **out); /* x * s */

/* Elementwise activations. gelu is the exact (erf) form, PyTorch's default; gelu_tanh GPT-2's
 * approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (PyTorch's approximate='tanh'). */
vram_status vram_relu(vram_tensor *x, vram_tensor **out);
vram_status vram_gelu(vram_tensor *x, vram_tensor **out);
vram_status vram_gelu_tanh(vram_tensor *x, vram_tensor **out);
vram_status vram_tanh(vram_tensor *x, vram_tensor **out);

/* Matrix product: [.., M, K] @ [.., K, N] -> [.., M, N]; leading (batch) dims broadcast;
 * 1-D operands are not accepted. */
vram_status vram_matmul(vram_tensor *a, vram_tensor *b, vram_tensor **out);
/* cross_entropy(x @ weight^T, targets): a language model's head and loss as one op. With 16-bit
 * x on a device with the fused kernels it runs in chunks of rows and never stores the logits:
 * each chunk's logits become their gradient in place, and x's and the weight's gradients are
 * computed then and kept for backward (llm.c's fused classifier); elsewhere it is the two ops. */
vram_status vram_linear_cross_entropy(vram_tensor *x, vram_tensor *weight, vram_tensor *targets, vram_tensor **out);
/* x cast to dtype, differentiable (the gradient is cast back). f16/bf16 need a device with
 * low-precision kernels (the GPU). */
vram_status vram_to_dtype(vram_tensor *x, vram_dtype dtype, vram_tensor **out);
/* x [.., in] · weight [out, in]^T + bias [out] (bias may be NULL). With f16/bf16 x and f32
 * weight and bias (mixed precision): the product in x's dtype with fp32 accumulation, the
 * weight cast for it, its gradients in f32. */
vram_status vram_linear(vram_tensor *x, vram_tensor *weight, vram_tensor *bias, vram_tensor **out);

/* linear(gelu(x), weight, bias), keeping only x for backward (gelu(x) is recomputed there):
 * the same values and gradients as the two ops, with one activation fewer saved. */
vram_status vram_gelu_linear(vram_tensor *x, vram_tensor *weight, vram_tensor *bias, vram_tensor **out);
/* The same with the tanh GELU. In mixed precision on the GPU, GELU's forward comes from the
 * epilogue of the product that made x when that product's weight asks for it (the GPT's MLP),
 * and its derivative is applied in the epilogue of the input gradient's product. */
vram_status vram_gelu_tanh_linear(vram_tensor *x, vram_tensor *weight, vram_tensor *bias, vram_tensor **out);

/* linear(layer_norm(x, ln_weight, ln_bias, eps), weight, bias) keeping x and one mean and
 * 1/std per row for backward, not the normalised x (recomputed there). ln_weight and ln_bias
 * are required; bias may be NULL. */
vram_status vram_layer_norm_linear(vram_tensor *x, vram_tensor *ln_weight, vram_tensor *ln_bias, double eps,
                                   vram_tensor *weight, vram_tensor *bias, vram_tensor **out);
/* The same with the normalised x in `dtype`: x's, or f16/bf16 from an f32 x (mixed precision
 * with an f32 residual stream, as autocast runs it: the layer norm computes in f32 and rounds
 * its output once, for a product in that dtype; x's gradient comes back f32). */
vram_status vram_layer_norm_linear_to(vram_tensor *x, vram_tensor *ln_weight, vram_tensor *ln_bias, double eps,
                                      vram_tensor *weight, vram_tensor *bias, vram_dtype dtype, vram_tensor **out);
/* The residual sum h = x + r (returned in *h, recorded as vram_add's) and
 * vram_layer_norm_linear_to(h, ...) in *out; takes r's reference (the branch is freed as soon
 * as the sum no longer needs it). On the GPU, with x and r of one shape and dtype (and dtype
 * the same), the add and the layer norm run as one kernel, which reads x and r once and never
 * reads h back (VRAM_FUSED_ADD_LN=0: separate kernels); where only the call holds r, the
 * layer norm's output overwrites it, so the allocator sees the separate ops' requests. */
vram_status vram_add_layer_norm_linear_to(vram_tensor *x, vram_tensor *r, vram_tensor *ln_weight, vram_tensor *ln_bias,
                                          double eps, vram_tensor *weight, vram_tensor *bias, vram_dtype dtype,
                                          vram_tensor **h, vram_tensor **out);

/* Along the last dimension. */
vram_status vram_softmax(vram_tensor *x, vram_tensor **out);
vram_status vram_log_softmax(vram_tensor *x, vram_tensor **out);
/* Mean cross-entropy of logits [N, C] (or [.., C]) against integer targets [N] (or [..]). */
vram_status vram_cross_entropy(vram_tensor *logits, vram_tensor *targets, vram_tensor **out);
/* Layer norm over the last dimension; weight/bias [C] may be NULL. */
vram_status vram_layer_norm(vram_tensor *x, vram_tensor *weight, vram_tensor *bias, double eps,
                            vram_tensor **out);
/* Layer norm with its output in `dtype`: x's, or f16/bf16 from an f32 x (as vram_layer_norm_linear_to). */
vram_status vram_layer_norm_to(vram_tensor *x, vram_tensor *weight, vram_tensor *bias, double eps, vram_dtype dtype,
                               vram_tensor **out);
/* Rows of table [V, C] picked by integer ids [..] -> [.., C]. An id out of range is an error. */
vram_status vram_embedding(vram_tensor *table, vram_tensor *ids, vram_tensor **out);
/* Inverted dropout: zeroes with probability p, scales the rest by 1/(1-p). Identity when
 * p == 0 or `training` is 0. The mask comes from the runtime's random state. */
vram_status vram_dropout(vram_tensor *x, double p, int training, vram_tensor **out);

/* Reductions: over everything (one-element result) or along one dimension. */
vram_status vram_sum(vram_tensor *x, vram_tensor **out);
vram_status vram_mean(vram_tensor *x, vram_tensor **out);
vram_status vram_sum_dim(vram_tensor *x, int dim, int keepdim, vram_tensor **out);

/* Views and copies. reshape accepts one -1. A reshape of a non-contiguous tensor copies. */
vram_status vram_reshape(vram_tensor *x, int ndim, const int64_t *shape, vram_tensor **out);
vram_status vram_transpose(vram_tensor *x, int dim0, int dim1, vram_tensor **out);
/* Elements start, start+step, ... < end along `dim` (a view). */
vram_status vram_slice(vram_tensor *x, int dim, int64_t start, int64_t end, int64_t step,
                       vram_tensor **out);
vram_status vram_concat(int n, vram_tensor *const *xs, int dim, vram_tensor **out);
vram_status vram_contiguous(vram_tensor *x, vram_tensor **out);

/* Causal scaled-dot-product attention: q, k, v [B, H, T, D] -> [B, H, T, D];
 * softmax(q k^T / sqrt(D) with j > i masked) v. */
vram_status vram_causal_attention(vram_tensor *q, vram_tensor *k, vram_tensor *v, vram_tensor **out);
/* The same from the packed projection of a GPT block: qkv [B, T, 3C] (q, k, v side by side,
 * C = heads x D) -> [B, T, C], heads merged; one op whose backward writes qkv's gradient
 * directly (no views, copies or sums of the three slices). */
vram_status vram_causal_attention_qkv(vram_tensor *qkv, int64_t heads, vram_tensor **out);
/* Softmax along the last dim with entries j > i (last two dims) masked out. */
vram_status vram_causal_softmax(vram_tensor *x, vram_tensor **out);

/* Convolution and pooling, NCHW. weight [Cout, Cin, KH, KW], bias [Cout] or NULL. */
vram_status vram_conv2d(vram_tensor *x, vram_tensor *weight, vram_tensor *bias, int stride, int padding,
                        vram_tensor **out);
vram_status vram_max_pool2d(vram_tensor *x, int kernel, int stride, vram_tensor **out);
vram_status vram_avg_pool2d(vram_tensor *x, int kernel, int stride, vram_tensor **out);

#ifdef __cplusplus
}
#endif

#endif
