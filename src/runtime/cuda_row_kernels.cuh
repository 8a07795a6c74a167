/* cuda_row_kernels.cuh — the runtime's row kernels (included by cuda_kernels.cu, the one
 * translation unit of the fatbin, at this point of it): softmax, layer norm (also fused with
 * the residual add before it), embeddings and cross-entropy. A row kernel runs one block a row
 * and reduces with block_sum/block_max (cuda_device_helpers.cuh); 16-bit layer-norm rows of a
 * width that fits a warp's registers take a warp each instead, and the fused classifier's 16-bit rows get their
 * log-sum-exp in one online pass over 8-element vectors (or, up to GPT-2's padded width, sit
 * whole in a block's registers: vk_cross_entropy_rows reads each row once; both classifier kernels
 * are in cuda_classifier_kernels.cuh, included below). Layer norm also takes f32 rows to
 * 16-bit ones (and back in backward): the f32 residual stream. Its 16-bit backward is one pass
 * (input, weight and bias gradients from one read of x and gout) where the width allows.
 */

/* ---- row kernels: one block per row ---- */

extern "C" __global__ void vk_softmax(int dt, int64_t rows, int64_t n, int64_t causal_t, int log_, char *out, const char *in) {
    __shared__ double shd[32];
    DISPATCH_ALL(dt, {
        A *sh = (A *)shd;
        for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
            const T *x = (const T *)in + r * n;
            T *y = (T *)out + r * n;
            int64_t valid = causal_t > 0 ? (r % causal_t) + 1 : n;
            if (valid > n) valid = n;
            A mx = (A)-INFINITY;
            for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) mx = (A)x[j] > mx ? (A)x[j] : mx;
            mx = block_max(mx, sh);
            A sum = 0;
            for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) sum += m_exp((A)x[j] - mx);
            sum = block_sum(sum, sh);
            if (log_) {
                A lse = mx + (A)m_log((double)sum);
                for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[j] = (T)(j < valid ? (A)x[j] - lse : (A)-INFINITY);
            } else {
                A inv = (A)1 / sum;
                for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[j] = (T)(j < valid ? m_exp((A)x[j] - mx) * inv : (A)0);
            }
        }
    });
}

extern "C" __global__ void vk_softmax_backward(int dt, int64_t rows, int64_t n, int log_, char *gin, const char *gout,
                                               const char *yv) {
    __shared__ double shd[32];
    DISPATCH_ALL(dt, {
        A *sh = (A *)shd;
        for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
            const T *g = (const T *)gout + r * n, *y = (const T *)yv + r * n;
            T *gi = (T *)gin + r * n;
            A s = 0;
            if (log_) {
                for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += (A)g[j];
                s = block_sum(s, sh);
                for (int64_t j = threadIdx.x; j < n; j += blockDim.x) gi[j] = (T)((A)g[j] - m_exp((A)y[j]) * s);
            } else {
                for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += (A)g[j] * (A)y[j];
                s = block_sum(s, sh);
                for (int64_t j = threadIdx.x; j < n; j += blockDim.x) gi[j] = (T)((A)y[j] * ((A)g[j] - s));
            }
        }
    });
}

#include "cuda_layer_norm_kernels.cuh"

extern "C" __global__ void vk_embedding(int dt, int64_t n_ids, int64_t c, char *out, const char *table, const char *ids,
                                        int id_dt) {
    DISPATCH_ALL(dt, {
        GRID_STRIDE(i, n_ids * c) {
            int64_t row = i / c, col = i - row * c;
            ((T *)out)[i] = ((const T *)table)[load_id(ids, id_dt, row) * c + col];
        }
    });
}

extern "C" __global__ void vk_embedding_backward(int dt, int64_t n_ids, int64_t c, char *gtable, const char *gout,
                                                 const char *ids, int id_dt) {
    DISPATCH(dt, {
        GRID_STRIDE(i, n_ids * c) {
            int64_t row = i / c, col = i - row * c;
            atomicAdd((T *)gtable + load_id(ids, id_dt, row) * c + col, ((const T *)gout)[i]);
        }
    });
}

/* Cross-entropy, one block per row: lse[r] (in A) and the row's loss into loss_rows[r] (double). */
extern "C" __global__ void vk_cross_entropy(int dt, int64_t rows, int64_t n, const char *logits, const char *targets,
                                            int tdt, char *lse, double *loss_rows) {
    __shared__ double sh[32];
    DISPATCH_ALL(dt, {
        for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
            const T *x = (const T *)logits + r * n;
            double l = row_lse<T, A>(x, n, sh);
            if (threadIdx.x == 0) {
                ((A *)lse)[r] = (A)l;
                loss_rows[r] = l - (double)(A)x[load_id(targets, tdt, r)];
            }
        }
    });
}

/* The fused classifier's cross-entropy kernels (vk_cross_entropy_fused, vk_cross_entropy_rows). */
#include "cuda_classifier_kernels.cuh"

/* The mean of loss_rows[rows] into *out, by one block. */
extern "C" __global__ void vk_mean_rows(int64_t rows, const double *loss_rows, double *out) {
    __shared__ double sh[32];
    double s = 0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += loss_rows[r];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) *out = rows ? s / (double)rows : 0;
}

extern "C" __global__ void vk_cross_entropy_backward(int dt, int64_t rows, int64_t n, double scale, char *glogits,
                                                     const char *logits, const char *targets, int tdt, const char *lse) {
    DISPATCH_ALL(dt, {
        A sc = (A)scale;
        GRID_STRIDE(i, rows * n) {
            int64_t r = i / n, j = i - r * n;
            A v = m_exp((A)((const T *)logits)[i] - ((const A *)lse)[r]) * sc;
            if (j == load_id(targets, tdt, r)) v -= sc;
            ((T *)glogits)[i] = (T)v;
        }
    });
}
