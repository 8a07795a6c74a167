/* cuda_rt.h — the runtime's CUDA state, shared by the files of its GPU kernel table:
 * cuda_context.c (driver, module, stream, errors, copies), cuda_ops.c (the table's kernels)
 * and cuda_blas.c (matrix products through cuBLASLt).
 *
 * Everything vendor-made is opened with dlopen: the driver (libcuda), cuBLASLt and (where
 * VRAM_ATTENTION=cudnn asks for it, cuda_cudnn_attention.c) cuDNN. One CUDA
 * runtime is open per process at a time (the table's slots take no runtime argument); it holds
 * the device's primary context (shared with the allocator's cuda backend and with PyTorch), a
 * non-blocking compute stream on which every kernel, copy and product is queued, and the
 * module loaded from the fatbin that the build embeds. Errors are sticky, as CUDA's are: the
 * first failed launch or copy is recorded, later work is skipped, and vram_runtime_sync (or
 * any read back to the host) returns it with its message.
 */
#ifndef VRAM_CUDA_RT_H
#define VRAM_CUDA_RT_H

#include "rt_internal.h"

/* Kernels of cuda_kernels.cu, by index into vram_cuda.fn. */
enum {
    CK_COPY, CK_FILL, CK_BINARY, CK_ACCUMULATE, CK_REDUCE_ADD, CK_UNARY, CK_UNARY_BACKWARD, CK_MASK_SCALE,
    CK_SCALE_INPLACE, CK_SOFTMAX, CK_SOFTMAX_BACKWARD, CK_LAYER_NORM, CK_LAYER_NORM_BACKWARD_X,
    CK_LAYER_NORM_BACKWARD_WB, CK_EMBEDDING, CK_EMBEDDING_BACKWARD, CK_CROSS_ENTROPY, CK_MEAN_ROWS,
    CK_CROSS_ENTROPY_BACKWARD, CK_IM2COL, CK_COL2IM, CK_POOL2D, CK_POOL2D_BACKWARD, CK_SGD_UPDATE,
    CK_ADAM_UPDATE, CK_ADAGRAD_UPDATE, CK_SUM_SQUARES, CK_CHECK_IDS, CK_COPY16, CK_FLASH_FORWARD, CK_FLASH_FORWARD32, CK_FLASH_DOT, CK_FLASH_BACKWARD_KV, CK_FLASH_BACKWARD_Q,
    CK_FLASH_BACKWARD, CK_FLASH_BACKWARD3, CK_FLASH_DQ, CK_FLASH_BACKWARD128, CK_FLASH_BACKWARD128_KV,
    CK_FLASH_BACKWARD128_Q, CK_FLASH_BACKWARD128P,
    CK_UNSCALE, CK_SCALER_UPDATE, CK_ADAM_UPDATE_LIST, CK_CROSS_ENTROPY_FUSED,
    CK_LIST_SUM_SQUARES, CK_LIST_SCALE, CK_COLUMN_SUM_LOWP, CK_LAYER_NORM_MIXED, CK_LAYER_NORM_MIXED_BACKWARD_X,
    CK_LAYER_NORM_MIXED_BACKWARD_WB, CK_ADD_LAYER_NORM, CK_LAYER_NORM_BACKWARD_FUSED,
    CK_LAYER_NORM_MIXED_BACKWARD_FUSED, CK_ADAM_UPDATE_LIST_VEC, CK_LIST_SUM_SQUARES_VEC, CK_CROSS_ENTROPY_ROWS,
    CK_COUNT,
    CK_PROF_MATMUL = CK_COUNT, CK_PROF_COPY, CK_PROF_CUDNN, CK_PROF_SLOTS /* profiler rows beside the kernels */
};

/* Scratch device memory the kernels share and cuBLASLt's workspace (from the allocator, tag
 * "other", held while the runtime is open). */
enum { CUDA_SCRATCH_BYTES = 1 << 20, CUDA_WORKSPACE_BYTES = 32 << 20 };

typedef struct vram_cuda {
    vram_runtime *rt;      /* the runtime the state belongs to */
    void *stream;          /* CUstream */
    void *fn[CK_COUNT];    /* CUfunction */
    int sm_count;
    void *scratch;         /* CUDA_SCRATCH_BYTES, device */
    vram_status error;     /* first error, sticky */
    char error_msg[512];
} vram_cuda;

extern vram_cuda vram_cuda_state;

/* VRAM_CUDA_PROFILE=1: GPU time per kernel (events around each launch, products and copies),
 * printed as a table on stderr when the runtime closes. prof_begin returns a token for end. */
int vram_cuda_prof_begin(void);
void vram_cuda_prof_end(int token, int row);
/* Milliseconds of GPU time between timer_start and timer_stop on the compute stream (waits for
 * it); a negative value when the events failed. */
void vram_cuda_timer_start(void);
double vram_cuda_timer_stop(void);
int vram_cuda_profiling(void);
/* Queues kernel `k` on the compute stream (skipped after an error). */
void vram_cuda_launch(int k, int64_t blocks, int threads, void **args);
/* Blocks for an elementwise launch over n elements. */
int64_t vram_cuda_blocks(int64_t n, int threads);
/* Records the first error; the message is printf-style. */
void vram_cuda_fail(vram_status s, const char *fmt, ...);
/* Device copies on the compute stream. */
void vram_cuda_upload(void *dst, const void *src, size_t n);
void vram_cuda_download(void *dst, const void *src, size_t n);
void vram_cuda_copy_d2d(void *dst, const void *src, size_t n);
void vram_cuda_zero(void *dst, size_t n);
/* Device-to-device copies and memsets queued since the process began, and their bytes (how the
 * tests see the launches that VRAM_FEWER_LAUNCHES removes). */
extern int64_t vram_cuda_copies, vram_cuda_copy_bytes, vram_cuda_zeros, vram_cuda_zero_bytes;
vram_status vram_cuda_sync(void);

/* A symbol to resolve into a table of function pointers, at byte offset `off`. */
typedef struct vram_cuda_sym {
    const char *name;
    size_t off;
} vram_cuda_sym;
/* Resolves every symbol of `syms` from `lib` into `table`; returns the first missing name, or
 * NULL when all were found. */
const char *vram_cuda_resolve(void *lib, const vram_cuda_sym *syms, size_t n, void *table);

/* cuBLASLt (cuda_blas.c). */
vram_status vram_cuda_blas_open(char *why, size_t cap);
void vram_cuda_blas_close(void);
void vram_cuda_matmul(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                      int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                      void *C, int accumulate);
void vram_cuda_matmul_bias(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa_m,
                           int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C, const void *bias);
void vram_cuda_matmul_lowp(vram_runtime *rt, vram_dtype ab_dt, vram_dtype c_dt, int64_t batch, int64_t M, int64_t N,
                           int64_t K, const void *A, int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b,
                           int64_t sb_k, int64_t sb_n, void *C, int accumulate, const void *bias);
void vram_cuda_matmul_lowp_gelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *pre, void *out,
                                const void *bias);
void vram_cuda_matmul_lowp_dgelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                 int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C,
                                 const void *pre);
void vram_cuda_matmul_lowp_wgrad(vram_runtime *rt, vram_dtype dt, int64_t rows, int64_t out_f, int64_t in_f,
                                 const void *g, int64_t ld, const void *a, float *gw, float *gb);
/* How many bias gradients came out of cuBLASLt's BGRADB epilogue (for the tests). */
extern int64_t vram_cuda_epilogue_bgrads;
/* Products whose timed best split their sum over K (the GPU tests check the split path ran). */
extern int64_t vram_cuda_splitk_chosen;
/* How many layer-norm backwards ran as the one-pass kernel (for the tests). */
extern int64_t vram_cuda_ln_fused_backwards;
/* How many fused cross-entropy launches took the register kernel, vk_cross_entropy_rows (for the
 * tests and the bench). */
extern int64_t vram_cuda_ce_row_launches;

/* cuDNN's fused flash attention (cuda_cudnn_attention.c), the default (VRAM_ATTENTION=auto or
 * cudnn): the flash_attention slots' arguments; each returns 1 where cuDNN ran the call and 0
 * where the caller runs its own kernels (cuDNN absent, without an engine for the shape, or
 * failing: said once on stderr when vram_cudnn_explicit, VRAM_ATTENTION=cudnn, asked for it).
 * Its stats are the flash kernels' lse (same quantity, same layout), and its backward takes the
 * same two temporaries as the flash kernels' one-pass backward, in the same order. */
extern int vram_cudnn_explicit;
int vram_cudnn_attention_forward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                 void *out, float *lse);
int vram_cudnn_attention_backward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                  const void *out, const void *gout, const float *lse, void *gqkv);
void vram_cudnn_close(void);
/* 1 when libcudnn and a handle are open, -1 when that failed, 0 before the first try; the
 * calls cuDNN ran (forward and backward); the last reason cuDNN was not used ("" if none). */
int vram_cudnn_state(void);
extern int64_t vram_cudnn_attention_calls;
const char *vram_cudnn_why(void);
/* Builds the tensor and operation descriptors of both graphs for a shape (and, with_graph, the
 * operation graphs, without a handle), no device needed: 1 when all finalized, 0 on the first
 * failure, -1 where cuDNN cannot be loaded; msg says which step and why. */
int vram_cudnn_selfcheck(vram_dtype dt, int64_t B, int64_t T, int64_t H, int with_graph, char *msg, size_t cap);

/* The table (cuda_ops.c) and opening/closing the state (cuda_context.c). */
extern const vram_kernels vram_cuda_kernels;
vram_status vram_cuda_runtime_open(vram_runtime *rt, int ordinal);
void vram_cuda_runtime_close(vram_runtime *rt);

#endif
