/* rt_internal.h — the runtime's private structures: storage, tensor, graph node, and the
 * per-device kernel table that ops dispatch through.
 *
 * A kernel table (vram_kernels) is what a device brings to the runtime: the CPU table lives in
 * cpu_kernels.c / cpu_matmul.c, the CUDA table in cuda_ops.c / cuda_blas.c (launches on the
 * runtime's stream). Data pointers handed to kernels are the device's addresses; the host
 * reaches them only through upload / download. Ops
 * (ops_*.c) check shapes, allocate outputs, call rt->k->..., and record graph nodes. Kernels
 * write into memory the ops allocated; the exceptions are the matrix product's pack buffers
 * and linear_lowp's weight panels, which they take from the runtime's allocator as temporaries.
 */
#ifndef VRAM_RT_INTERNAL_H
#define VRAM_RT_INTERNAL_H

#include <stdatomic.h>

#include "vram/autograd.h"
#include "vram/ops.h"

#define MAXD VRAM_TENSOR_MAX_DIMS

typedef struct vram_storage {
    vram_runtime *rt;
    void *data;
    size_t nbytes;
    vram_tag tag;
    atomic_int refs;
    int saved; /* how many graph nodes hold it for backward (tag is ACTIVATION while > 0) */
    vram_tag tag_before_saved;
    /* Mixed precision with kept 16-bit weights (ops_mixed.c): a parameter's storage that asks for
     * it (keep_lowp) keeps its cast in `lowp`, current while lowp_epoch equals the runtime's
     * param_epoch; the multi-tensor Adam rewrites it in the same pass as the weight. On the
     * storage, so that every view of the weight (the graph's saved aliases) finds it. */
    int keep_lowp;
    struct vram_tensor *lowp;
    uint64_t lowp_epoch;
    /* GELU in a product's epilogue (ops_mixed.c): a weight's storage with gelu_epilogue set has
     * its mixed products also write GELU-tanh of their output, into `gelu` on the output's
     * storage, which the next GELU-tanh op of that whole output takes instead of computing it. */
    int gelu_epilogue;
    struct vram_tensor *gelu;
} vram_storage;

typedef struct vram_node vram_node;

struct vram_tensor {
    atomic_int refs;
    vram_runtime *rt;
    vram_storage *st;
    vram_dtype dtype;
    int ndim;
    int64_t shape[MAXD];
    int64_t strides[MAXD];
    int64_t offset; /* in elements */
    int requires_grad;
    vram_tensor *grad;
    vram_node *grad_fn;
    int grad_is_temporary; /* a checkpoint's stand-in input: its grad is a temporary */
    int grad_uses;         /* leaf edges to it not yet run in the backward passes under way */
};

/* A strided view handed to kernels: data points at element [0..0]. */
typedef struct vram_kview {
    char *data;
    vram_dtype dtype;
    int ndim;
    int64_t shape[MAXD];
    int64_t strides[MAXD];
} vram_kview;

enum { VRAM_BIN_ADD, VRAM_BIN_SUB, VRAM_BIN_MUL, VRAM_BIN_DIV };
/* GELU_TANH: GPT-2's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
enum { VRAM_UN_RELU, VRAM_UN_GELU, VRAM_UN_TANH, VRAM_UN_SCALE, VRAM_UN_GELU_TANH };

typedef struct vram_kernels {
    const char *name;
    /* Strided copy with dtype conversion (dst and src have the same shape). */
    void (*copy)(const vram_kview *dst, const vram_kview *src);
    void (*fill)(const vram_kview *dst, double value);
    /* out (contiguous, shape = broadcast shape) = a op b, where a and b are views over that
     * shape with stride 0 in broadcast dims. f32/f64, one dtype; on a device with the
     * low-precision slots also f16/bf16, and b f16/bf16 under f32 out and a (a mixed add). */
    void (*binary)(int op, const vram_kview *out, const vram_kview *a, const vram_kview *b);
    /* dst += src elementwise over src's shape; dst may have stride-0 dims (a reduction). */
    void (*accumulate)(const vram_kview *dst, const vram_kview *src);
    /* Contiguous n elements. */
    void (*unary)(int op, double p, vram_dtype dt, int64_t n, void *out, const void *x);
    /* gin = gout * f'(.), where `saved` is the input (relu, both gelus) or the output (tanh). */
    void (*unary_backward)(int op, double p, vram_dtype dt, int64_t n, void *gin, const void *gout,
                           const void *saved);
    /* C[b] = A[b] @ B[b] (+ C[b] if accumulate) for b < batch. A: M x K with strides (sa_m, sa_k),
     * B: K x N with strides (sb_k, sb_n), C contiguous M x N; batch strides in elements. */
    void (*matmul)(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K,
                   const void *A, int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b,
                   int64_t sb_k, int64_t sb_n, void *C, int accumulate);
    /* Optional (NULL: ops use matmul, then accumulate the bias): C = A @ B + bias, one product
     * with the bias added in its epilogue; bias [N] contiguous, no batch. */
    void (*matmul_bias)(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa_m,
                        int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C, const void *bias);
    /* Row softmax over n columns (rows contiguous). causal_t > 0: row r masks columns
     * j > r % causal_t. log: log-softmax. */
    void (*softmax)(vram_dtype dt, int64_t rows, int64_t n, int64_t causal_t, int log, void *out,
                    const void *x);
    void (*softmax_backward)(vram_dtype dt, int64_t rows, int64_t n, int log, void *gin,
                             const void *gout, const void *y);
    /* Layer norm over rows of n; mean/rstd [rows] written for backward. w, b may be NULL. */
    void (*layer_norm)(vram_dtype dt, int64_t rows, int64_t n, double eps, void *out, const void *x,
                       const void *w, const void *b, void *mean, void *rstd);
    /* gx (may be NULL) written, or with gx_add added to (+=, each element rounded to gx's dtype
     * first, so the sum is the one a separate accumulate gives); gw, gb accumulate (+=) (may be
     * NULL); where the table sets layer_norm_backward_writes_wb and vram_fewer_launches() holds,
     * gw and gb are written (=) instead, so that the op need not zero them first. */
    void (*layer_norm_backward)(vram_dtype dt, int64_t rows, int64_t n, void *gx, int gx_add, void *gw, void *gb,
                                const void *gout, const void *x, const void *w, const void *mean,
                                const void *rstd);
    /* out[i, :] = table[ids[i], :]; ids are already range-checked. */
    void (*embedding)(vram_dtype dt, int64_t n_ids, int64_t c, void *out, const void *table,
                      const void *ids, vram_dtype id_dt);
    void (*embedding_backward)(vram_dtype dt, int64_t n_ids, int64_t c, void *gtable, const void *gout,
                               const void *ids, vram_dtype id_dt);
    /* Mean cross-entropy: returns the mean loss, writes lse[rows]. */
    double (*cross_entropy)(vram_dtype dt, int64_t rows, int64_t n, const void *logits, const void *targets,
                            vram_dtype tdt, void *lse);
    void (*cross_entropy_backward)(vram_dtype dt, int64_t rows, int64_t n, double scale, void *glogits,
                                   const void *logits, const void *targets, vram_dtype tdt,
                                   const void *lse);
    /* out = x * mask * scale (mask is u8). */
    void (*mask_scale)(vram_dtype dt, int64_t n, void *out, const void *x, const uint8_t *mask, double scale);
    /* im2col for one image: x [C, H, W] -> col [C*KH*KW, OH*OW]; col2im accumulates back. */
    void (*im2col)(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride,
                   int pad, int64_t oh, int64_t ow, const void *x, void *col);
    void (*col2im)(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride,
                   int pad, int64_t oh, int64_t ow, const void *col, void *gx);
    /* Pooling over planes [P, H, W] -> [P, OH, OW]; max writes argmax (i32) for backward. */
    void (*pool2d)(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride,
                   int64_t oh, int64_t ow, void *out, const void *x, int32_t *argmax);
    void (*pool2d_backward)(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k,
                            int stride, int64_t oh, int64_t ow, void *gx, const void *gout,
                            const int32_t *argmax);
    /* Optimizer updates over n contiguous elements (see optim.c for the formulas). `skip` (device
     * memory, may be NULL): when *skip is non-zero the update does nothing (a loss scaler found
     * an inf or NaN gradient), read by the kernel so the host need not wait for it. */
    void (*sgd_update)(vram_dtype dt, int64_t n, void *p, const void *g, void *buf, double lr,
                       double momentum, double weight_decay, int first, const int32_t *skip);
    void (*adam_update)(vram_dtype dt, int64_t n, void *p, const void *g, void *m, void *v, double lr,
                        double b1, double b2, double eps, double weight_decay, int decoupled,
                        int64_t step, const int32_t *skip);
    void (*adagrad_update)(vram_dtype dt, int64_t n, void *p, const void *g, void *sum, double lr,
                           double eps, double weight_decay, int64_t step, double lr_decay, const int32_t *skip);
    /* Optional (NULL: scale_inplace per tensor): every one of `count` tensors of one dtype scaled
     * by s in one launch (gradient clipping). */
    void (*scale_inplace_list)(vram_dtype dt, int count, const int64_t *ns, void *const *xs, double s);
    /* Optional (NULL: adam_update per tensor): adam_update over `count` tensors of one dtype and
     * one step count in one launch (a multi-tensor fused AdamW). lowp (may be NULL, or hold
     * NULLs) names kept 16-bit copies of the weights, in lowp_dt, rewritten from the result. The
     * gradients are read times grad_coef (gradient clipping's factor, 1 when not clipping). */
    void (*adam_update_list)(vram_dtype dt, int count, void *const *p, const void *const *g, void *const *m,
                             void *const *v, const int64_t *n, double lr, double b1, double b2, double eps,
                             double weight_decay, int decoupled, int64_t step, const int32_t *skip,
                             void *const *lowp, vram_dtype lowp_dt, double grad_coef);
    /* Dynamic loss scaling (grad_scaler.c): x /= *scale over n elements, and *found_inf = 1 when
     * any result is inf or NaN; then the scale's update from state = {growth tracker,
     * found_inf}: backoff and a reset tracker after an overflow, growth after `interval` clean
     * steps in a row. */
    void (*unscale)(vram_dtype dt, int64_t n, void *x, const float *scale, int32_t *found_inf);
    void (*scaler_update)(float *scale, int32_t *state, double growth, double backoff, int interval);
    /* The sum of squares of `count` tensors of ns[i] contiguous elements (the global gradient
     * norm: one read back for all of them), and in-place scaling. */
    double (*sum_squares)(int count, const vram_dtype *dts, const int64_t *ns, const void *const *xs);
    void (*scale_inplace)(vram_dtype dt, int64_t n, void *x, double s);
    /* Moving bytes between the host and the device's memory, and zeroing it. */
    void (*upload)(void *dst, const void *host_src, size_t n);
    void (*download)(void *host_dst, const void *src, size_t n);
    void (*zero)(void *dst, size_t n);
    /* The index of the first id outside [0, limit), or -1 when all are inside. */
    int64_t (*find_bad_id)(int64_t n, const void *ids, vram_dtype dt, int64_t limit);
    /* Waits for the device's queued work; returns the first error of a kernel or copy. */
    vram_status (*sync)(void);
    /* 1: layer_norm_backward and layer_norm_mixed_backward overwrite gw and gb under
     * vram_fewer_launches() (the GPU zeroes them inside the input-gradient kernel). */
    int layer_norm_backward_writes_wb;
    /* 1: layer_norm_backward and layer_norm_mixed_backward take gx_add (the ops then add a layer
     * norm's input gradient into the one autograd already holds, under vram_grad_adopt()). */
    int layer_norm_backward_adds_gx;

    /* ---- low precision (ops_mixed.c; NULL on a device without it, the CPU) ---- */
    /* C = A @ B (+ C if accumulate) (+ bias [N] when not NULL: no batch, no accumulate), A and B
     * in ab_dt (f16 or bf16), C and bias in c_dt (ab_dt, or f32 for a weight's gradient), with
     * fp32 accumulation. Strides as matmul's. */
    void (*matmul_lowp)(vram_runtime *rt, vram_dtype ab_dt, vram_dtype c_dt, int64_t batch, int64_t M, int64_t N,
                        int64_t K, const void *A, int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b,
                        int64_t sb_k, int64_t sb_n, void *C, int accumulate, const void *bias);
    /* Optional (NULL: matmul_lowp, then unary): GPT-2's tanh GELU in the product's epilogue, for
     * 16-bit A, B and outputs, no batch, N a multiple of 8. Forward: pre [M, N] = A @ B + bias
     * (bias [N], may be NULL) and out [M, N] = gelu_tanh(pre); backward (dgelu): C [M, N] =
     * (A @ B) * gelu_tanh'(pre). pre, out and C contiguous; A, B strided as matmul's. Where the
     * library has no such product the slot runs the product and the elementwise kernel. */
    void (*matmul_lowp_gelu)(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                             int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *pre, void *out,
                             const void *bias);
    void (*matmul_lowp_dgelu)(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                              int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C,
                              const void *pre);
    /* Optional (NULL: a product with a row of ones): out [n] (f32) = the sum over `rows` of the
     * first n columns of g [rows, ld] (f16/bf16): a mixed linear's bias gradient. */
    void (*column_sum_lowp)(vram_dtype dt, int64_t rows, int64_t n, int64_t ld, const void *g, float *out);
    /* Optional (NULL: matmul_lowp, then column_sum_lowp): a mixed linear's weight and bias
     * gradients from one call: gw [out_f, in_f] (f32) = g^T @ a, gb [out_f] (f32, or NULL) = the
     * column sums of the first out_f columns of g [rows, ld]; a [rows, in_f]; g and a 16-bit in
     * dt, contiguous. The GPU's comes out of one product where cuBLASLt has the epilogue. */
    void (*matmul_lowp_wgrad)(vram_runtime *rt, vram_dtype dt, int64_t rows, int64_t out_f, int64_t in_f, const void *g,
                              int64_t ld, const void *a, float *gw, float *gb);
    /* layer_norm and layer_norm_backward with f32 rows x (and gx) and 16-bit rows out (and
     * gout) in dt: an f32 residual stream normalised for a 16-bit product (ops_mixed.c). */
    void (*layer_norm_mixed)(vram_dtype dt, int64_t rows, int64_t n, double eps, void *out, const void *x, const void *w,
                             const void *b, void *mean, void *rstd);
    void (*layer_norm_mixed_backward)(vram_dtype dt, int64_t rows, int64_t n, void *gx, int gx_add, void *gw, void *gb,
                                      const void *gout, const void *x, const void *w, const void *mean, const void *rstd);
    /* Optional (NULL: binary, then layer_norm): the residual add and the layer norm after it in
     * one pass: h = x + r, out = layer_norm(h) as layer_norm would give it from the stored h;
     * x, r, h and out contiguous in dt (any float dtype); w, b, mean, rstd as layer_norm's. */
    void (*add_layer_norm)(vram_dtype dt, int64_t rows, int64_t n, double eps, void *h, void *out, const void *x,
                           const void *r, const void *w, const void *b, void *mean, void *rstd);
    /* Cross-entropy and its gradient in one pass, for the classifier (ops_classifier.c): logits
     * [rows, ld] (the first n columns are the classes); adds the rows' losses to *loss_sum
     * (device f64) and, when scale != 0, overwrites the logits with scale * (softmax - onehot),
     * zero past column n. */
    void (*cross_entropy_fused)(vram_dtype dt, int64_t rows, int64_t n, int64_t ld, double scale, void *logits,
                                const void *targets, vram_dtype tdt, double *loss_sum);
    /* Causal attention that never stores the T x T scores (f16/bf16, head size 64): qkv
     * [B, T, 3C] contiguous -> out [B, T, C] and lse [B*H*T] (f32) for backward, which writes
     * the whole of gqkv [B, T, 3C] from gout [B, T, C]. */
    void (*flash_attention)(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv, void *out,
                            float *lse);
    void (*flash_attention_backward)(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                     const void *out, const void *gout, const float *lse, void *gqkv);
    /* Which implementation ran the flash-attention calls so far, in words, into buf; NULL where
     * none ran (or the table has no choice to report). */
    const char *(*attention_report)(char *buf, size_t cap);

    /* ---- inference (generation.c; CPU versions in cpu_infer.c) ---- */
    /* y[M, N] = x[M, K] W^T + bias (may be NULL), W [N, K] in fmt (VRAM_WFMT_Q8_0 or _BF16,
     * model_file.h) read as stored: never a dequantised copy of the whole matrix. x, y
     * contiguous f32. A device without these slots (NULL) cannot run the inference model. */
    void (*linear_lowp)(vram_runtime *rt, int fmt, int64_t M, int64_t N, int64_t K, const float *x, const void *w,
                        const float *bias, float *y);
    /* out[i, :] = row ids[i] of table [rows, c] in fmt (f32, bf16 or Q8_0); ids range-checked. */
    void (*embedding_lowp)(int fmt, int64_t n_ids, int64_t c, int64_t rows, float *out, const void *table,
                           const int32_t *ids);
    /* Appends the keys and values of qkv [n, T, 3*H*D] to the cache kc, vc ([n, H, cap, D]) at each
     * row's length lens[b], and writes the causal attention of the T queries over the cache to
     * out [n, T, H*D]. scores: scratch of cap floats. */
    void (*kv_attention)(vram_runtime *rt, int64_t n, int64_t T, int64_t H, int64_t D, const float *qkv, float *kc,
                         float *vc, int64_t cap, const int64_t *lens, float *out, float *scores);
    /* GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), over n contiguous f32. */
    void (*gelu_tanh)(int64_t n, float *out, const float *x);
} vram_kernels;

extern const vram_kernels vram_cpu_kernels;
/* The planner's table (plan_kernels.c): computes nothing, allocates what the CPU table does. */
extern const vram_kernels vram_plan_kernels;
/* The planner's table for the GPU runtime: allocates what the CUDA table allocates (no pack
 * buffers; flash attention's row sums), with the low-precision slots, computing nothing. */
extern const vram_kernels vram_plan_cuda_kernels;
/* Which flash-attention backward the CUDA table runs, from VRAM_FLASH_BWD: fused (the default,
 * FlashAttention-2's one pass: dQ added atomically), fused3 (the same held to three blocks an
 * SM), split (two deterministic kernels), fused128 and split128 (the same over 128-key blocks
 * of 8 warps), fused128p (fused128 with dQ one tile behind), or bad (any other value: the CUDA slot fails with a message). The planner asks
 * too: the one-pass forms take an fp32 dQ accumulator (vram_flash_bwd_atomic). */
typedef enum {
    VRAM_FLASH_BWD_BAD = -1,
    VRAM_FLASH_BWD_FUSED,
    VRAM_FLASH_BWD_FUSED3,
    VRAM_FLASH_BWD_SPLIT,
    VRAM_FLASH_BWD_FUSED128, /* the 128-key forms last (cuda_ops.c tells them apart so) */
    VRAM_FLASH_BWD_SPLIT128,
    VRAM_FLASH_BWD_FUSED128P
} vram_flash_bwd;
vram_flash_bwd vram_flash_backward_form(void);
static inline int vram_flash_bwd_atomic(vram_flash_bwd f) {
    return f == VRAM_FLASH_BWD_FUSED || f == VRAM_FLASH_BWD_FUSED3 || f == VRAM_FLASH_BWD_FUSED128 ||
           f == VRAM_FLASH_BWD_FUSED128P;
}

/* The CPU matrix product's work split, which the planner's table repeats: how many threads
 * (each with its own pack buffers) one call runs on, 0 for an empty product; and the bytes of
 * the two pack buffers each thread takes from the allocator (0 where it packs nothing). */
int vram_cpu_matmul_workers(int threads, int64_t batch, int64_t M, int64_t N, int64_t K);
void vram_cpu_matmul_pack_bytes(vram_dtype dt, size_t *a_bytes, size_t *b_bytes);

struct vram_runtime {
    vram_allocator *alloc;
    const vram_kernels *k;
    int threads;
    int on_gpu;          /* the CUDA table: tensor memory is not host-addressable */
    vram_stream stream;  /* where kernels run and the allocator's blocks are used (0 on the CPU) */
    uint64_t rng[4];
    /* Shape-only (the planner): the device has no memory behind its addresses, so nothing
     * outside the kernel table reads or writes tensor data, and the kernels do nothing. */
    int shape_only;
    /* vram_runtime_set_alloc_observer's hook (may be NULL). */
    void (*on_alloc)(void *ctx, vram_status status);
    void *on_alloc_ctx;
    /* vram_runtime_set_grad_hook's hook (may be NULL): a leaf's gradient is final. */
    vram_grad_hook on_grad;
    void *on_grad_ctx;
    /* vram_grad_adopt() as the running backward read it at its start (one read a backward, not
     * one a gradient). */
    int grad_adopt;
    /* A shape-only runtime planning the GPU: the blocks the CUDA runtime holds from its start
     * (kernel scratch, cuBLASLt's workspace), NULL otherwise. */
    void *plan_held[2];
    /* Bumped whenever parameters may have changed (an optimizer step, a host write): kept
     * 16-bit weight copies older than it are re-cast before their next use. */
    uint64_t param_epoch;
};

/* A shape-only runtime over `a` (any device, simulated included) with the planner's kernel
 * table: ops check shapes and allocate exactly as the CPU runtime with `threads` threads does,
 * and compute nothing (tensor.c). */
vram_status vram_runtime_new_shape_only(vram_allocator *a, int threads, vram_runtime **out);
/* The same for the GPU runtime (vram_plan_cuda_kernels), holding the CUDA runtime's own blocks. */
vram_status vram_runtime_new_shape_only_gpu(vram_allocator *a, vram_runtime **out);
/* Calls the runtime's allocation observer, if any, with the allocation's status. */
static inline void vram_runtime_observe(vram_runtime *rt, vram_status status) {
    if (rt->on_alloc) rt->on_alloc(rt->on_alloc_ctx, status);
}

/* ---- tensor helpers (tensor.c) ---- */
vram_status vram_tensor_empty(vram_runtime *rt, vram_dtype dt, int ndim, const int64_t *shape, vram_tag tag,
                              vram_tensor **out);
vram_status vram_tensor_empty_like(const vram_tensor *t, vram_tag tag, vram_tensor **out);
/* A new view of t's storage with the given geometry (no graph history). */
vram_tensor *vram_tensor_view_new(const vram_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                                  int64_t offset);
void vram_kview_of(const vram_tensor *t, vram_kview *v);
int64_t vram_shape_numel(int ndim, const int64_t *shape);
int vram_shape_equal(const vram_tensor *a, const vram_tensor *b);
/* A contiguous tensor with t's data: t itself (retained) when already contiguous. */
vram_status vram_tensor_contig(vram_tensor *t, vram_tensor **out);
#define SHAPE_STR(t, buf) vram_shape_str((t)->ndim, (t)->shape, buf, sizeof buf)

/* ---- graph helpers (autograd.c) ---- */
typedef vram_status (*vram_backward_fn)(vram_node *n, vram_tensor *gout, vram_tensor **gin);

struct vram_node {
    atomic_int refs;
    const char *name;
    vram_backward_fn backward;
    void (*release_ctx)(vram_node *n);
    int n_in;
    vram_node **next;          /* [n_in]: producer node of input i, or NULL */
    vram_tensor **leaf;        /* [n_in]: leaf input i that requires grad, or NULL */
    int n_saved;
    vram_tensor *saved[8];
    int64_t ip[8];
    double dp[4];
    void *ctx;
    int in_ndim[4];            /* input shapes, for ops that need them in backward */
    int64_t in_shape[4][MAXD];
    vram_runtime *rt;
    /* engine state */
    vram_tensor *pending;      /* gradient accumulated for this node's output */
    int deps;
    int visited;
    int seed_one;              /* the root of a backward given no gradient: pending is the 1.0 it made */
};

/* 1 when grad mode is on and some input requires grad (so a node is to be recorded). */
int vram_should_record(int n, vram_tensor *const *inputs);
/* Creates a node for `out` with edges to the inputs; returns it (owned by out->grad_fn). */
vram_node *vram_node_attach(vram_tensor *out, const char *name, vram_backward_fn bw, int n,
                            vram_tensor *const *inputs);
/* Keeps a detached alias of t for backward (re-tags temporaries as activations). */
void vram_node_save(vram_node *n, vram_tensor *t);
/* Backward only: hands the caller saved tensor i (its reference; the node no longer holds it,
 * nor tags it an activation), so that a gradient an op computed ahead and saved can become the
 * input's gradient without a copy. */
vram_tensor *vram_node_take_saved(vram_node *n, int i);
void vram_node_remember_shape(vram_node *n, int i, const vram_tensor *t);
int vram_node_needs(const vram_node *n, int i);
/* Under vram_grad_adopt() on a table with layer_norm_backward_adds_gx: the gradient autograd
 * already holds for input i (its producer's pending gradient) when a backward may add into it in
 * place: held by nothing else, contiguous, of like's dtype and shape. NULL otherwise (the
 * backward then hands a fresh gradient). */
vram_tensor *vram_node_grad_dest(const vram_node *n, int i, const vram_tensor *like);

/* ---- shared op helpers (ops_*.c) ---- */
vram_status vram_check_float(const char *op, const vram_tensor *t);
vram_status vram_check_same_dtype(const char *op, const vram_tensor *a, const vram_tensor *b);
/* Sums g down to a tensor of the given shape (the inverse of broadcasting). */
vram_status vram_sum_to_shape(vram_tensor *g, int ndim, const int64_t *shape, vram_tensor **out);
/* Records y = a op b (VRAM_BIN_*), computed by the caller (a fused kernel), for backward as
 * the op itself would (nothing when no input needs a gradient). */
vram_status vram_binary_record(int op, vram_tensor *a, vram_tensor *b, vram_tensor *y);
/* out = a + b for same-shape tensors, no graph (used by the engine to accumulate). */
vram_status vram_add_nograd(vram_tensor *a, vram_tensor *b, vram_tensor **out);
/* Batched matrix product without recording, on raw geometry (a, b: [.., M, K], [.., K, N]). */
vram_status vram_matmul_raw(vram_tensor *a, vram_tensor *b, vram_tensor **out);

/* ---- mixed precision (ops_mixed.c) ---- */
int vram_dtype_is_lowp(vram_dtype dt);
/* 1 unless VRAM_FEWER_LAUNCHES=0: the training step's copies and memsets that can go (the layer
 * norms' zeroed weight gradients, the embedding's zeroed scatter buffer and its accumulate) are
 * left out. Read at each use, so a test can compare both ways in one process. */
int vram_fewer_launches(void);
/* OK when VRAM_FEWER_LAUNCHES and VRAM_GRAD_ADOPT are unset, "0" or "1"; else the error naming the
 * value (a runtime is not made under a switch it would read as something else). */
vram_status vram_check_switches(void);
/* 1 unless VRAM_GRAD_ADOPT=0: backward shares a gradient by reference where it would otherwise copy
 * it (an add hands its output gradient to both inputs; copy-on-write where a second one
 * arrives), a layer norm adds its input gradient into the one already there
 * (vram_node_grad_dest), and the embedding takes no scatter buffer it leaves unused. This changes
 * the allocations (the planner's GPU records say which way they were measured). Read once by
 * each backward at its start, into rt->grad_adopt, which the backward functions consult. */
int vram_grad_adopt(void);
/* The dtype of an op's statistics (layer norm's mean and rstd, the loss's lse): f32 for f16/bf16. */
vram_dtype vram_stat_dtype(vram_dtype dt);
/* OK when a layer norm of x may give its output in dt: x's dtype, or f16/bf16 from an f32 x on
 * a device with the mixed layer-norm kernels (the f32 residual stream); else a message. */
vram_status vram_check_norm_dtype(const char *op, const vram_tensor *x, vram_dtype dt);
/* a + b for one f32 and one f16/bf16 tensor of one shape: f32, the gradient rounded back to
 * the 16-bit operand's dtype (vram_add calls it for such operands). */
vram_status vram_mixed_add(vram_tensor *a, vram_tensor *b, vram_tensor **out);
/* vram_check_float, and f16/bf16 where the device has low-precision kernels; for the ops whose
 * kernels take 16-bit data (elementwise, reductions, layer norm, loss, attention, products). */
vram_status vram_check_float_lowp(const char *op, const vram_tensor *t);
/* A parameter p of an op on x: the same float dtype, or f32 with 16-bit x (mixed precision). */
vram_status vram_check_param_dtype(const char *op, const vram_tensor *x, const vram_tensor *p);
/* y = xc @ W^T + bias for contiguous 16-bit xc [rows, in] and f32 W [out, in], bias [out]. When
 * W's storage asks for the GELU epilogue (and the device has it), GELU-tanh(y) too, on y's
 * storage (vram_storage.gelu). */
vram_status vram_mixed_linear(vram_tensor *xc, vram_tensor *w, vram_tensor *bias, vram_tensor *y);
/* The GELU-tanh of the whole of x that a product's epilogue left on x's storage, handed over
 * (the caller owns it), or NULL when there is none. */
vram_tensor *vram_mixed_take_gelu(vram_tensor *x);
/* A product's output width padded for tensor-core layouts (a multiple of 64 when n is not one
 * of 8), and t [n, ...] cast to dt with its first dimension zero-padded to n_pad: a new
 * temporary, or, for a parameter whose storage keeps one, its kept copy (retained; free it either way). */
int64_t vram_mixed_padded_width(int64_t n);
vram_status vram_mixed_cast_padded(vram_tensor *t, vram_dtype dt, int64_t n_pad, vram_tensor **out);
/* Which gradients of a mixed linear to compute (gx takes x's shape). */
typedef struct vram_mixed_grads {
    int gx, gw, gb;
    int x_ndim;
    const int64_t *x_shape;
    /* Not NULL: gx comes out times gelu_tanh'(dgelu_pre) (the GELU's input, [rows, in]
     * contiguous, 16-bit), through the device's matmul_lowp_dgelu; the caller sets it only when
     * the device has that slot. */
    const struct vram_tensor *dgelu_pre;
} vram_mixed_grads;
/* From gc (contiguous, 16-bit [rows, out]) and the saved input a [rows, in]: gx in gc's dtype,
 * gw and gb in W's (f32). */
vram_status vram_mixed_linear_backward(const vram_mixed_grads *want, vram_tensor *gc, vram_tensor *a, vram_tensor *w,
                                       vram_tensor **gx, vram_tensor **gw, vram_tensor **gb);

/* An op's last step: hands y out on success, frees it on error (then *out is left alone). */
static inline vram_status rt_finish(vram_status s, vram_tensor *y, vram_tensor **out) {
    if (s != VRAM_OK) {
        vram_tensor_free(y);
        return s;
    }
    *out = y;
    return VRAM_OK;
}

#endif
