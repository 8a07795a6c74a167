/* nn.h — layers and models on the runtime: Linear, LayerNorm, Embedding, MLP, causal
 * self-attention, transformer block, GPT, and a small convolutional classifier.
 *
 * Every layer registers its parameters (tensors tagged VRAM_TAG_PARAMETER, requires_grad) in a
 * vram_param_list under a dotted name ("h.0.attn.c_attn.weight"), which optimizers take.
 * Initialisation follows the PyTorch modules' defaults: Linear and Conv2d weight and bias
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5)), Embedding N(0, 1),
 * LayerNorm weight 1 and bias 0. Random numbers come from the runtime's state (seed it first).
 *
 * The GPT is GPT-2's shape: token + position embeddings, pre-norm blocks
 * (x + attn(ln1(x)), then + mlp(ln2(x)) with a 4x GELU MLP), a final layer norm and a
 * bias-free output projection, untied or (tied = 1, as GPT-2) the token embedding itself; with
 * checkpointing on, each block runs under vram_checkpoint and only block inputs stay alive
 * between forward and backward. init_std > 0 gives GPT-2's initialisation instead of the
 * modules' defaults: weights N(0, init_std), the residual projections (attn.c_proj, mlp.c_proj)
 * N(0, init_std / sqrt(2 layers)), biases 0.
 */
#ifndef VRAM_NN_H
#define VRAM_NN_H

#include "vram/autograd.h"
#include "vram/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_param_list vram_param_list;

vram_status vram_param_list_new(vram_param_list **out);
void vram_param_list_free(vram_param_list *l); /* drops its references */
int vram_param_list_count(const vram_param_list *l);
vram_tensor *vram_param_list_get(const vram_param_list *l, int i);
const char *vram_param_list_name(const vram_param_list *l, int i);
/* The parameter with that name, or NULL. */
vram_tensor *vram_param_list_find(const vram_param_list *l, const char *name);
/* Total elements and bytes of all parameters. */
int64_t vram_param_list_numel(const vram_param_list *l);
/* zero_grad over every parameter (set_to_none frees the gradient memory). */
void vram_param_list_zero_grad(vram_param_list *l, int set_to_none);

/* A new parameter tensor (f32, tagged, requires_grad) registered under `name`. */
vram_status vram_param_new(vram_runtime *rt, vram_param_list *l, const char *name, int ndim, const int64_t *shape,
                           vram_tensor **out);

typedef struct vram_nn_linear {
    vram_tensor *weight, *bias; /* [out, in], [out] or NULL */
} vram_nn_linear;
vram_status vram_nn_linear_init(vram_nn_linear *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t in,
                                int64_t out, int bias);
vram_status vram_nn_linear_forward(const vram_nn_linear *m, vram_tensor *x, vram_tensor **y);

typedef struct vram_nn_layer_norm {
    vram_tensor *weight, *bias;
    double eps;
} vram_nn_layer_norm;
vram_status vram_nn_layer_norm_init(vram_nn_layer_norm *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t n);
vram_status vram_nn_layer_norm_forward(const vram_nn_layer_norm *m, vram_tensor *x, vram_tensor **y);

typedef struct vram_nn_embedding {
    vram_tensor *weight; /* [num, dim] */
} vram_nn_embedding;
vram_status vram_nn_embedding_init(vram_nn_embedding *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t num,
                                   int64_t dim);
vram_status vram_nn_embedding_forward(const vram_nn_embedding *m, vram_tensor *ids, vram_tensor **y);

/* The GELU of the MLP and the GPT: erf's (PyTorch's default) or GPT-2's tanh approximation. */
enum { VRAM_ACT_GELU_ERF = 0, VRAM_ACT_GELU_TANH = 1 };

typedef struct vram_nn_mlp {
    vram_nn_linear fc, proj; /* width -> 4 width -> width, GELU between */
    double dropout;
    int activation; /* VRAM_ACT_* (0 after init: erf) */
} vram_nn_mlp;
vram_status vram_nn_mlp_init(vram_nn_mlp *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t width,
                             double dropout);
vram_status vram_nn_mlp_forward(const vram_nn_mlp *m, vram_tensor *x, int training, vram_tensor **y);

typedef struct vram_nn_attention {
    vram_nn_linear c_attn, c_proj; /* [3C, C] (q, k, v stacked), [C, C] */
    int64_t heads, width;
    double dropout;
} vram_nn_attention;
vram_status vram_nn_attention_init(vram_nn_attention *m, vram_runtime *rt, vram_param_list *l, const char *name,
                                   int64_t width, int64_t heads, double dropout);
/* x [B, T, C] -> [B, T, C] */
vram_status vram_nn_attention_forward(const vram_nn_attention *m, vram_tensor *x, int training, vram_tensor **y);

typedef struct vram_nn_block {
    vram_nn_layer_norm ln1, ln2;
    vram_nn_attention attn;
    vram_nn_mlp mlp;
    int training; /* read by the checkpointed forward */
    int keep;     /* VRAM_GPT_KEEP_* (vram_gpt_config) */
    int lowp;     /* VRAM_DTYPE_F16/_BF16: an f32 input's products run in it (vram_gpt_config.residual_f32);
                   * 0: in the input's dtype */
} vram_nn_block;
vram_status vram_nn_block_init(vram_nn_block *m, vram_runtime *rt, vram_param_list *l, const char *name, int64_t width,
                               int64_t heads, double dropout);
vram_status vram_nn_block_forward(vram_nn_block *m, vram_tensor *x, int training, vram_tensor **y);

typedef struct vram_gpt_config {
    int layers, heads, width, vocab, context;
    double dropout;
    int tied;        /* output projection = token embedding (GPT-2); 0: its own lm_head.weight */
    double init_std; /* > 0: GPT-2's initialisation (see above); 0: the modules' defaults */
    /* VRAM_DTYPE_F16 / _BF16: mixed precision (activations in it after the embeddings,
     * products on tensor cores, parameters, gradients and optimizer state f32); anything
     * else: the parameters' dtype throughout */
    vram_dtype precision;
    /* With mixed precision: 1 keeps a 16-bit copy of every weight beside its f32 master, which
     * the multi-tensor Adam rewrites as it updates the master (more memory; the forward's
     * products cast nothing); 0, the default, casts the f32 weight into a temporary for each
     * product. */
    int keep_lowp_weights;
    /* With mixed precision: 1 keeps the residual stream (the embeddings' sum, every block's
     * output) in f32, as PyTorch's autocast does: each layer norm reads f32 and rounds its
     * output for the 16-bit product after it, the products' 16-bit outputs are added in f32
     * (more activation memory: the layer norms' saved inputs are f32); 0, the default, casts
     * the stream to 16 bits once after the embeddings, as llm.c does. */
    int residual_f32;
    /* What the blocks store instead of recomputing in backward (0, the default: GELU's output
     * and the layer norms' outputs are recomputed, llm.c's recompute 2; VRAM_GPT_KEEP_* bits
     * keep them, for measuring what recomputation saves). */
    int keep;
    /* VRAM_ACT_GELU_ERF (0, the default) or VRAM_ACT_GELU_TANH (GPT-2's; in mixed precision on
     * the GPU the MLP's first product computes it in its epilogue). */
    int activation;
} vram_gpt_config;
enum { VRAM_GPT_KEEP_GELU = 1, VRAM_GPT_KEEP_LAYERNORM = 2 };

typedef struct vram_gpt vram_gpt;
vram_status vram_gpt_new(vram_runtime *rt, const vram_gpt_config *cfg, vram_gpt **out);
void vram_gpt_free(vram_gpt *g);
vram_param_list *vram_gpt_params(vram_gpt *g);
const vram_gpt_config *vram_gpt_get_config(const vram_gpt *g);
/* Checkpoint every block (1) or none (0). */
void vram_gpt_set_checkpoint(vram_gpt *g, int on);
/* ids, targets: [B, T] i32 with T <= context. logits (may be NULL) receives [B, T, vocab];
 * loss (may be NULL; needs targets) the mean cross-entropy. */
vram_status vram_gpt_forward(vram_gpt *g, vram_tensor *ids, vram_tensor *targets, int training, vram_tensor **logits,
                             vram_tensor **loss);

/* A small conv classifier for [N, Cin, H, W] images (H, W multiples of 4):
 * conv3x3(Cin->8) relu maxpool2, conv3x3(8->16) relu maxpool2, linear -> classes. */
typedef struct vram_convnet vram_convnet;
vram_status vram_convnet_new(vram_runtime *rt, int in_channels, int height, int width, int classes, vram_convnet **out);
void vram_convnet_free(vram_convnet *c);
vram_param_list *vram_convnet_params(vram_convnet *c);
vram_status vram_convnet_forward(vram_convnet *c, vram_tensor *x, vram_tensor **logits);

#ifdef __cplusplus
}
#endif

#endif
