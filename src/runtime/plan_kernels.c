/* plan_kernels.c — the planner's kernel table (vram_plan_kernels): every slot of vram_kernels,
 * computing nothing.
 *
 * A shape-only runtime (vram_runtime_new_shape_only) runs the real ops, autograd, models and
 * optimizers on this table over any allocator, a simulated device's included: ops check shapes,
 * allocate their outputs, record graph nodes and free what they free, exactly as on the CPU, and
 * the kernels that would fill those outputs return at once. The one kernel that allocates, the
 * matrix product (its per-thread pack buffers, cpu_matmul.c), allocates and frees the same
 * buffers here, for as many threads as the CPU product would use, so the allocation stream is
 * the CPU runtime's own. Values returned by kernels (losses, norms) and read back to the host
 * are 0. vram_plan_cuda_kernels plans the GPU runtime instead: no pack buffers, the
 * low-precision slots, and the one temporary a CUDA kernel takes (flash attention's row sums).
 */
#include <string.h>

#include "rt_internal.h"

static void plan_copy(const vram_kview *dst, const vram_kview *src) { (void)dst, (void)src; }
static void plan_fill(const vram_kview *dst, double value) { (void)dst, (void)value; }
static void plan_binary(int op, const vram_kview *out, const vram_kview *a, const vram_kview *b) {
    (void)op, (void)out, (void)a, (void)b;
}
static void plan_accumulate(const vram_kview *dst, const vram_kview *src) { (void)dst, (void)src; }
static void plan_unary(int op, double p, vram_dtype dt, int64_t n, void *out, const void *x) {
    (void)op, (void)p, (void)dt, (void)n, (void)out, (void)x;
}
static void plan_unary_backward(int op, double p, vram_dtype dt, int64_t n, void *gin, const void *gout, const void *saved) {
    (void)op, (void)p, (void)dt, (void)n, (void)gin, (void)gout, (void)saved;
}

/* The CPU product's pack buffers: an A and a B buffer for each of its threads, all taken in
 * thread order before the threads start and freed in that order after they end (cpu_matmul.c). */
static void plan_matmul(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                        int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                        void *C, int accumulate) {
    (void)A, (void)sa_b, (void)sa_m, (void)sa_k, (void)B, (void)sb_b, (void)sb_k, (void)sb_n, (void)C, (void)accumulate;
    int workers = vram_cpu_matmul_workers(rt->threads, batch, M, N, K);
    size_t a_bytes, b_bytes;
    vram_cpu_matmul_pack_bytes(dt, &a_bytes, &b_bytes);
    if (!a_bytes) return;
    void *bufs[128] = {0};
    for (int t = 0; t < workers && t < 64; t++) {
        /* As on the CPU, a thread that cannot have both buffers runs unpacked, holding none. */
        if (vram_allocator_malloc(rt->alloc, a_bytes, 0, VRAM_TAG_TEMPORARY, &bufs[2 * t]) != VRAM_OK) continue;
        vram_runtime_observe(rt, VRAM_OK);
        if (vram_allocator_malloc(rt->alloc, b_bytes, 0, VRAM_TAG_TEMPORARY, &bufs[2 * t + 1]) != VRAM_OK) {
            vram_allocator_free(rt->alloc, bufs[2 * t]);
            bufs[2 * t] = NULL;
            continue;
        }
        vram_runtime_observe(rt, VRAM_OK);
    }
    for (int i = 0; i < 128; i++)
        if (bufs[i]) vram_allocator_free(rt->alloc, bufs[i]);
}

static void plan_softmax(vram_dtype dt, int64_t rows, int64_t n, int64_t causal_t, int log, void *out, const void *x) {
    (void)dt, (void)rows, (void)n, (void)causal_t, (void)log, (void)out, (void)x;
}
static void plan_softmax_backward(vram_dtype dt, int64_t rows, int64_t n, int log, void *gin, const void *gout,
                                  const void *y) {
    (void)dt, (void)rows, (void)n, (void)log, (void)gin, (void)gout, (void)y;
}
static void plan_layer_norm(vram_dtype dt, int64_t rows, int64_t n, double eps, void *out, const void *x, const void *w,
                            const void *b, void *mean, void *rstd) {
    (void)dt, (void)rows, (void)n, (void)eps, (void)out, (void)x, (void)w, (void)b, (void)mean, (void)rstd;
}
static void plan_layer_norm_backward(vram_dtype dt, int64_t rows, int64_t n, void *gx, int gx_add, void *gw, void *gb,
                                     const void *gout, const void *x, const void *w, const void *mean, const void *rstd) {
    (void)dt, (void)rows, (void)n, (void)gx, (void)gx_add, (void)gw, (void)gb, (void)gout, (void)x, (void)w, (void)mean;
    (void)rstd;
}
static void plan_embedding(vram_dtype dt, int64_t n_ids, int64_t c, void *out, const void *table, const void *ids,
                           vram_dtype id_dt) {
    (void)dt, (void)n_ids, (void)c, (void)out, (void)table, (void)ids, (void)id_dt;
}
static void plan_embedding_backward(vram_dtype dt, int64_t n_ids, int64_t c, void *gtable, const void *gout,
                                    const void *ids, vram_dtype id_dt) {
    (void)dt, (void)n_ids, (void)c, (void)gtable, (void)gout, (void)ids, (void)id_dt;
}
static double plan_cross_entropy(vram_dtype dt, int64_t rows, int64_t n, const void *logits, const void *targets,
                                 vram_dtype tdt, void *lse) {
    (void)dt, (void)rows, (void)n, (void)logits, (void)targets, (void)tdt, (void)lse;
    return 0;
}
static void plan_cross_entropy_backward(vram_dtype dt, int64_t rows, int64_t n, double scale, void *glogits,
                                        const void *logits, const void *targets, vram_dtype tdt, const void *lse) {
    (void)dt, (void)rows, (void)n, (void)scale, (void)glogits, (void)logits, (void)targets, (void)tdt, (void)lse;
}
static void plan_mask_scale(vram_dtype dt, int64_t n, void *out, const void *x, const uint8_t *mask, double scale) {
    (void)dt, (void)n, (void)out, (void)x, (void)mask, (void)scale;
}
static void plan_im2col(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                        int64_t oh, int64_t ow, const void *x, void *col) {
    (void)dt, (void)c, (void)h, (void)w, (void)kh, (void)kw, (void)stride, (void)pad, (void)oh, (void)ow, (void)x, (void)col;
}
static void plan_col2im(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                        int64_t oh, int64_t ow, const void *col, void *gx) {
    (void)dt, (void)c, (void)h, (void)w, (void)kh, (void)kw, (void)stride, (void)pad, (void)oh, (void)ow, (void)col, (void)gx;
}
static void plan_pool2d(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride, int64_t oh,
                        int64_t ow, void *out, const void *x, int32_t *argmax) {
    (void)dt, (void)is_max, (void)planes, (void)h, (void)w, (void)k, (void)stride, (void)oh, (void)ow, (void)out, (void)x,
        (void)argmax;
}
static void plan_pool2d_backward(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride,
                                 int64_t oh, int64_t ow, void *gx, const void *gout, const int32_t *argmax) {
    (void)dt, (void)is_max, (void)planes, (void)h, (void)w, (void)k, (void)stride, (void)oh, (void)ow, (void)gx, (void)gout,
        (void)argmax;
}
static void plan_sgd_update(vram_dtype dt, int64_t n, void *p, const void *g, void *buf, double lr, double momentum,
                            double weight_decay, int first, const int32_t *skip) {
    (void)dt, (void)n, (void)p, (void)g, (void)buf, (void)lr, (void)momentum, (void)weight_decay, (void)first, (void)skip;
}
static void plan_adam_update(vram_dtype dt, int64_t n, void *p, const void *g, void *m, void *v, double lr, double b1,
                             double b2, double eps, double weight_decay, int decoupled, int64_t step, const int32_t *skip) {
    (void)dt, (void)n, (void)p, (void)g, (void)m, (void)v, (void)lr, (void)b1, (void)b2, (void)eps, (void)weight_decay,
        (void)decoupled, (void)step, (void)skip;
}
static void plan_adagrad_update(vram_dtype dt, int64_t n, void *p, const void *g, void *sum, double lr, double eps,
                                double weight_decay, int64_t step, double lr_decay, const int32_t *skip) {
    (void)dt, (void)n, (void)p, (void)g, (void)sum, (void)lr, (void)eps, (void)weight_decay, (void)step, (void)lr_decay,
        (void)skip;
}
static void plan_unscale(vram_dtype dt, int64_t n, void *x, const float *scale, int32_t *found_inf) {
    (void)dt, (void)n, (void)x, (void)scale, (void)found_inf;
}
static void plan_scaler_update(float *scale, int32_t *state, double growth, double backoff, int interval) {
    (void)scale, (void)state, (void)growth, (void)backoff, (void)interval;
}
static double plan_sum_squares(int count, const vram_dtype *dts, const int64_t *ns, const void *const *xs) {
    (void)count, (void)dts, (void)ns, (void)xs;
    return 0;
}
static void plan_scale_inplace(vram_dtype dt, int64_t n, void *x, double s) { (void)dt, (void)n, (void)x, (void)s; }
static void plan_upload(void *dst, const void *host_src, size_t n) { (void)dst, (void)host_src, (void)n; }
/* What the host reads back (a loss, an id the ops check) is zeros: defined, and a valid id. */
static void plan_download(void *host_dst, const void *src, size_t n) {
    (void)src;
    memset(host_dst, 0, n);
}
static void plan_zero(void *dst, size_t n) { (void)dst, (void)n; }
static int64_t plan_find_bad_id(int64_t n, const void *ids, vram_dtype dt, int64_t limit) {
    (void)n, (void)ids, (void)dt, (void)limit;
    return -1;
}
static vram_status plan_sync(void) { return VRAM_OK; }

/* The slots both tables share. */
#define PLAN_SHARED_SLOTS \
    .copy = plan_copy, \
    .fill = plan_fill, \
    .binary = plan_binary, \
    .accumulate = plan_accumulate, \
    .unary = plan_unary, \
    .unary_backward = plan_unary_backward, \
    .softmax = plan_softmax, \
    .softmax_backward = plan_softmax_backward, \
    .layer_norm = plan_layer_norm, \
    .layer_norm_backward = plan_layer_norm_backward, \
    .layer_norm_backward_adds_gx = 1, /* (as the CPU's and the GPU's: it changes what backward allocates) */ \
    .embedding = plan_embedding, \
    .embedding_backward = plan_embedding_backward, \
    .cross_entropy = plan_cross_entropy, \
    .cross_entropy_backward = plan_cross_entropy_backward, \
    .mask_scale = plan_mask_scale, \
    .im2col = plan_im2col, \
    .col2im = plan_col2im, \
    .pool2d = plan_pool2d, \
    .pool2d_backward = plan_pool2d_backward, \
    .sgd_update = plan_sgd_update, \
    .adam_update = plan_adam_update, \
    .adagrad_update = plan_adagrad_update, \
    .unscale = plan_unscale, \
    .scaler_update = plan_scaler_update, \
    .sum_squares = plan_sum_squares, \
    .scale_inplace = plan_scale_inplace, \
    .upload = plan_upload, \
    .download = plan_download, \
    .zero = plan_zero, \
    .find_bad_id = plan_find_bad_id, \
    .sync = plan_sync,

const vram_kernels vram_plan_kernels = {
    .name = "plan",
    .matmul = plan_matmul,
    PLAN_SHARED_SLOTS
};

/* ---- the GPU runtime's allocations (cuda_ops.c, cuda_blas.c) ---- */

static void plan_matmul_gpu(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K,
                            const void *A, int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b,
                            int64_t sb_k, int64_t sb_n, void *C, int accumulate) {
    (void)rt, (void)dt, (void)batch, (void)M, (void)N, (void)K, (void)A, (void)sa_b, (void)sa_m, (void)sa_k, (void)B;
    (void)sb_b, (void)sb_k, (void)sb_n, (void)C, (void)accumulate;
}
static void plan_matmul_lowp(vram_runtime *rt, vram_dtype ab_dt, vram_dtype c_dt, int64_t batch, int64_t M, int64_t N,
                             int64_t K, const void *A, int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B,
                             int64_t sb_b, int64_t sb_k, int64_t sb_n, void *C, int accumulate, const void *bias) {
    plan_matmul_gpu(rt, ab_dt, batch, M, N, K, A, sa_b, sa_m, sa_k, B, sb_b, sb_k, sb_n, C, accumulate);
    (void)c_dt, (void)bias;
}
/* The fused GELU products write buffers the ops allocated; their fallback allocates nothing either. */
static void plan_matmul_lowp_gelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                  int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *pre,
                                  void *out, const void *bias) {
    plan_matmul_gpu(rt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, pre, 0);
    (void)out, (void)bias;
}
static void plan_matmul_lowp_dgelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                   int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C,
                                   const void *pre) {
    plan_matmul_gpu(rt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, C, 0);
    (void)pre;
}
static void plan_cross_entropy_fused(vram_dtype dt, int64_t rows, int64_t n, int64_t ld, double scale, void *logits,
                                     const void *targets, vram_dtype tdt, double *loss_sum) {
    (void)dt, (void)rows, (void)n, (void)ld, (void)scale, (void)logits, (void)targets, (void)tdt, (void)loss_sum;
}
static void plan_flash_attention(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                 void *out, float *lse) {
    (void)rt, (void)dt, (void)B, (void)T, (void)H, (void)qkv, (void)out, (void)lse;
}
/* The backward's temporaries as cuda_ops.c takes them: the row sums (B*H*T floats) and, for
 * the one-pass backward, the fp32 dQ accumulator (B*T*H*64 floats), freed in reverse. */
static void plan_flash_attention_backward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H,
                                          const void *qkv, const void *out, const void *gout, const float *lse,
                                          void *gqkv) {
    (void)dt, (void)qkv, (void)out, (void)gout, (void)lse, (void)gqkv;
    void *dvec = NULL, *dq = NULL;
    size_t bytes = (size_t)(B * H * T) * sizeof(float), dq_bytes = (size_t)(B * T * H * 64) * sizeof(float);
    vram_status s = vram_allocator_malloc(rt->alloc, bytes ? bytes : 1, rt->stream, VRAM_TAG_TEMPORARY, &dvec);
    vram_runtime_observe(rt, s);
    if (s != VRAM_OK) return;
    if (vram_flash_bwd_atomic(vram_flash_backward_form())) {
        s = vram_allocator_malloc(rt->alloc, dq_bytes ? dq_bytes : 1, rt->stream, VRAM_TAG_TEMPORARY, &dq);
        vram_runtime_observe(rt, s);
        if (s == VRAM_OK) vram_allocator_free(rt->alloc, dq);
    }
    vram_allocator_free(rt->alloc, dvec);
}

static void plan_column_sum_lowp(vram_dtype dt, int64_t rows, int64_t n, int64_t ld, const void *g, float *out) {
    (void)dt, (void)rows, (void)n, (void)ld, (void)g, (void)out; /* allocates nothing */
}

/* The weight and bias gradients write buffers the op allocated; the fallback allocates nothing. */
static void plan_matmul_lowp_wgrad(vram_runtime *rt, vram_dtype dt, int64_t rows, int64_t out_f, int64_t in_f,
                                   const void *g, int64_t ld, const void *a, float *gw, float *gb) {
    (void)rt, (void)dt, (void)rows, (void)out_f, (void)in_f, (void)g, (void)ld, (void)a, (void)gw, (void)gb;
}

static void plan_add_layer_norm(vram_dtype dt, int64_t rows, int64_t n, double eps, void *h, void *out, const void *x,
                                const void *r, const void *w, const void *b, void *mean, void *rstd) {
    (void)dt, (void)rows, (void)n, (void)eps, (void)h, (void)out, (void)x, (void)r, (void)w, (void)b, (void)mean;
    (void)rstd; /* writes buffers the op allocated */
}

const vram_kernels vram_plan_cuda_kernels = {
    .name = "plan-cuda",
    .matmul = plan_matmul_gpu,
    .matmul_lowp = plan_matmul_lowp,
    .matmul_lowp_gelu = plan_matmul_lowp_gelu,
    .matmul_lowp_dgelu = plan_matmul_lowp_dgelu,
    .column_sum_lowp = plan_column_sum_lowp,
    .matmul_lowp_wgrad = plan_matmul_lowp_wgrad,
    .layer_norm_mixed = plan_layer_norm, /* (computes nothing, allocates nothing: as the plain ones) */
    .layer_norm_mixed_backward = plan_layer_norm_backward,
    .add_layer_norm = plan_add_layer_norm,
    .cross_entropy_fused = plan_cross_entropy_fused,
    .flash_attention = plan_flash_attention,
    .flash_attention_backward = plan_flash_attention_backward,
    PLAN_SHARED_SLOTS
};

