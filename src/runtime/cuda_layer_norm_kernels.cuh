/* cuda_layer_norm_kernels.cuh — layer norm's GPU kernels, forward and backward (included by
 * cuda_row_kernels.cuh at its place among the row kernels, so the fatbin is as before; on its own
 * so that tests/test_ln_emulated.cpp can compile it for the CPU over tests/flash_emulator.h).
 * It uses cuda_device_helpers.cuh (DISPATCH_ALL and DISPATCH_LOWP, ld8/st8, aligned16,
 * is_16bit, warp_sum, block_sum, GRID_STRIDE, m_sqrt). The forward normalises a row
 * per warp (16-bit rows of a width that fits a warp's registers) or per block; the backward is a
 * pair (input gradient by rows, weight and bias gradients by column sums) or, for 16-bit gout
 * rows up to VK_LN_WARP_MAX, one pass; gx_add makes the input gradient add into gx.
 */

/* Layer norm. The input rows are TI, the output rows TO: both T, or f32 in and 16-bit out
 * (the _mixed kernels: mixed precision's f32 residual stream normalised for the 16-bit product
 * after it; kernels of their own, so that the plain ones keep their register counts); the
 * weight, bias, mean and rstd are in A. In backward the output gradient is TO and the input
 * gradient TI. */
/* Layer norm's 16-bit fast path: one warp a row held in registers (n a multiple of 256 up to
 * VK_LN_WARP_MAX), 8 elements per access; the statistics as the block path computes them. */
__device__ __forceinline__ bool ln_warp_rows(int dt, int64_t n) {
    return (dt == VK_BF16 || dt == VK_F16) && n % 256 == 0 && n <= VK_LN_WARP_MAX;
}

/* ADD (vk_add_layer_norm): the rows normalised are in + res, stored to hout first (the residual
 * stream) and normalised as stored, rounded to TI, as a separate add then layer norm would. */
template <typename TI, typename TO, bool ADD = false>
__device__ void layer_norm_warp_rows(int64_t rows, int n, float eps, TO *out, const TI *in, const float *w, const float *b,
                                     float *mean, float *rstd, TI *hout = nullptr, const TI *res = nullptr) {
    constexpr int MAXV = VK_LN_WARP_MAX / 256;
    int lane = threadIdx.x & 31, nw = blockDim.x >> 5, nv = n / 256;
    for (int64_t r = blockIdx.x * (int64_t)nw + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * nw) {
        const TI *x = in + r * n;
        float v[MAXV][8], s = 0, q = 0;
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k < nv) {
                ld8(x + (k * 32 + lane) * 8, v[k]);
                if constexpr (ADD) {
                    float u[8];
                    ld8(res + r * n + (k * 32 + lane) * 8, u);
                    for (int e = 0; e < 8; e++) v[k][e] = (float)(TI)(v[k][e] + u[e]);
                    st8(hout + r * n + (k * 32 + lane) * 8, v[k]);
                }
                for (int e = 0; e < 8; e++) s += v[k][e];
            }
        float m = warp_sum(s) / (float)n;
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k < nv)
                for (int e = 0; e < 8; e++) q += (v[k][e] - m) * (v[k][e] - m);
        float rs = 1.0f / sqrtf(warp_sum(q) / (float)n + eps);
        if (lane == 0) mean[r] = m, rstd[r] = rs;
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k < nv) {
                int j0 = (k * 32 + lane) * 8;
                for (int e = 0; e < 8; e++) {
                    float h = (v[k][e] - m) * rs;
                    v[k][e] = (w ? h * w[j0 + e] : h) + (b ? b[j0 + e] : 0.0f);
                }
                st8(out + r * n + j0, v[k]);
            }
    }
}

/* Layer norm, one block a row (rows off the fast path's widths, f32 and f64); ADD as the warp
 * path's (each thread reads back only the sums it stored). */
template <typename TI, typename TO, typename A, bool ADD = false>
__device__ void layer_norm_block_rows(int64_t rows, int64_t n, double eps, TO *out, const TI *in, const A *w, const A *b,
                                      A *mean, A *rstd, A *sh, TI *hout = nullptr, const TI *res = nullptr) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const TI *x = in + r * n;
        TO *y = out + r * n;
        A m = 0;
        if constexpr (ADD) {
            TI *h = hout + r * n;
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
                h[j] = (TI)((A)x[j] + (A)res[r * n + j]);
                m += (A)h[j];
            }
            x = h;
        } else {
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m += (A)x[j];
        }
        m = block_sum(m, sh) / (A)n;
        A v = 0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) v += ((A)x[j] - m) * ((A)x[j] - m);
        v = block_sum(v, sh) / (A)n;
        A rs = (A)1 / m_sqrt(v + (A)eps);
        if (threadIdx.x == 0) {
            mean[r] = m;
            rstd[r] = rs;
        }
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            A h = ((A)x[j] - m) * rs;
            y[j] = (TO)((w ? h * w[j] : h) + (b ? b[j] : (A)0));
        }
    }
}

template <typename TI, typename TO, typename A, bool ADD = false>
__device__ void layer_norm_rows(int dt, int64_t rows, int64_t n, double eps, char *out, const char *in, const char *wv,
                                const char *bv, char *meanv, char *rstdv, A *sh, char *hout = nullptr,
                                const char *res = nullptr) {
    if constexpr (is_16bit<TO>::value) {
        if (ln_warp_rows(dt, n) && aligned16(out, in, in) && (!ADD || aligned16(hout, res, res))) {
            layer_norm_warp_rows<TI, TO, ADD>(rows, (int)n, (float)eps, (TO *)out, (const TI *)in, (const float *)wv,
                                              (const float *)bv, (float *)meanv, (float *)rstdv, (TI *)hout,
                                              (const TI *)res);
            return;
        }
    }
    layer_norm_block_rows<TI, TO, A, ADD>(rows, n, eps, (TO *)out, (const TI *)in, (const A *)wv, (const A *)bv,
                                          (A *)meanv, (A *)rstdv, sh, (TI *)hout, (const TI *)res);
}

extern "C" __global__ void vk_layer_norm(int dt, int64_t rows, int64_t n, double eps, char *out, const char *in,
                                         const char *wv, const char *bv, char *meanv, char *rstdv) {
    __shared__ double shd[32];
    DISPATCH_ALL(dt, { layer_norm_rows<T, T, A>(dt, rows, n, eps, out, in, wv, bv, meanv, rstdv, (A *)shd); });
}

/* The residual add and the layer norm after it in one pass: hout = in + res (the residual
 * stream, in dt), out = layer_norm(hout) in dt; one read of in and res, none of hout. out may
 * be res (each element is read before it is written, by the thread that writes it). */
extern "C" __global__ void __launch_bounds__(1024)
vk_add_layer_norm(int dt, int64_t rows, int64_t n, double eps, char *hout, char *out, const char *in, const char *res,
                  const char *wv, const char *bv, char *meanv, char *rstdv) {
    __shared__ double shd[32];
    DISPATCH_ALL(dt, {
        layer_norm_rows<T, T, A, true>(dt, rows, n, eps, out, in, wv, bv, meanv, rstdv, (A *)shd, hout, res);
    });
}

/* f32 rows in, rows of the 16-bit dt out. */
extern "C" __global__ void vk_layer_norm_mixed(int dt, int64_t rows, int64_t n, double eps, char *out, const char *in,
                                               const char *wv, const char *bv, char *meanv, char *rstdv) {
    __shared__ double shd[32];
    DISPATCH_LOWP(dt, { layer_norm_rows<float, T, float>(dt, rows, n, eps, out, in, wv, bv, meanv, rstdv, (float *)shd); });
}

/* gx's element from the layer norm's value v when the kernel adds into gx (gx_add): the sum a
 * separate accumulate gives, v rounded to gx's type first and an add that no multiply fuses into. */
__device__ __forceinline__ float gx_add_rn(float old, float v) { return __fadd_rn(old, v); }
__device__ __forceinline__ double gx_add_rn(double old, double v) { return __dadd_rn(old, v); }
template <typename TI, typename A> __device__ __forceinline__ A gx_sum(TI old, A v) {
    return gx_add_rn((A)old, (A)(TI)v);
}

/* gx of layer norm for one warp a row in registers (the fast path's shape, ln_warp_rows):
 * gout in TO (16-bit), x and gx in TI; gx_add: added to gx (gx_sum). */
template <typename TI, typename TO>
__device__ void layer_norm_backward_x_warp_rows(int64_t rows, int n, TI *gx, int gx_add, const TO *gout, const TI *xin,
                                                const float *w, const float *mean, const float *rstd) {
    constexpr int MAXV = VK_LN_WARP_MAX / 256;
    int lane = threadIdx.x & 31, nw = blockDim.x >> 5, nv = n / 256;
    for (int64_t r = blockIdx.x * (int64_t)nw + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * nw) {
        float h[MAXV][8], dh[MAXV][8], m = mean[r], rs = rstd[r], s1 = 0, s2 = 0;
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k < nv) {
                int j0 = (k * 32 + lane) * 8;
                ld8(xin + r * n + j0, h[k]);
                ld8(gout + r * n + j0, dh[k]);
                for (int e = 0; e < 8; e++) {
                    h[k][e] = (h[k][e] - m) * rs;
                    if (w) dh[k][e] *= w[j0 + e];
                    s1 += dh[k][e];
                    s2 += dh[k][e] * h[k][e];
                }
            }
        float a = warp_sum(s1) / (float)n, c = warp_sum(s2) / (float)n;
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k < nv) {
                for (int e = 0; e < 8; e++) dh[k][e] = rs * (dh[k][e] - a - h[k][e] * c);
                if (gx_add) {
                    float old[8];
                    ld8(gx + r * n + (k * 32 + lane) * 8, old);
                    for (int e = 0; e < 8; e++) dh[k][e] = gx_add_rn(old[e], (float)(TI)dh[k][e]);
                }
                st8(gx + r * n + (k * 32 + lane) * 8, dh[k]);
            }
    }
}

/* The input gradient of layer norm, one block a row. */
template <typename TI, typename TO, typename A>
__device__ void layer_norm_backward_x_block_rows(int64_t rows, int64_t n, TI *gxv, int gx_add, const TO *gout,
                                                 const TI *xv, const A *w, const A *meanv, const A *rstdv, A *sh) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const TO *g = gout + r * n;
        const TI *x = xv + r * n;
        A m = meanv[r], rs = rstdv[r];
        A s1 = 0, s2 = 0;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            A h = ((A)x[j] - m) * rs, dh = w ? (A)g[j] * w[j] : (A)g[j];
            s1 += dh;
            s2 += dh * h;
        }
        s1 = block_sum(s1, sh);
        s2 = block_sum(s2, sh);
        A a = s1 / (A)n, c = s2 / (A)n;
        TI *gr = gxv + r * n;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            A h = ((A)x[j] - m) * rs, dh = w ? (A)g[j] * w[j] : (A)g[j];
            A v = rs * (dh - a - h * c);
            gr[j] = gx_add ? (TI)gx_sum<TI, A>(gr[j], v) : (TI)v;
        }
    }
}

template <typename TI, typename TO, typename A>
__device__ void layer_norm_backward_x_rows(int dt, int64_t rows, int64_t n, char *gxv, int gx_add, const char *gout,
                                           const char *xv, const char *wv, const char *meanv, const char *rstdv,
                                           A *sh) {
    if constexpr (is_16bit<TO>::value) {
        if (ln_warp_rows(dt, n) && aligned16(gxv, gout, xv)) {
            layer_norm_backward_x_warp_rows<TI, TO>(rows, (int)n, (TI *)gxv, gx_add, (const TO *)gout, (const TI *)xv,
                                                    (const float *)wv, (const float *)meanv, (const float *)rstdv);
            return;
        }
    }
    layer_norm_backward_x_block_rows<TI, TO, A>(rows, n, (TI *)gxv, gx_add, (const TO *)gout, (const TI *)xv,
                                                (const A *)wv, (const A *)meanv, (const A *)rstdv, sh);
}

/* Zeroes the weight and bias gradients (zw, zb: `words` 32-bit words each, either may be NULL)
 * that the column-sum kernel launched after this one adds to: their memsets' launches saved. */
__device__ __forceinline__ void zero_wb_words(char *zw, char *zb, int64_t words) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < words; i += (int64_t)gridDim.x * blockDim.x) {
        if (zw) ((uint32_t *)zw)[i] = 0;
        if (zb) ((uint32_t *)zb)[i] = 0;
    }
}

extern "C" __global__ void vk_layer_norm_backward_x(int dt, int64_t rows, int64_t n, char *gxv, int gx_add,
                                                    const char *gout, const char *xv, const char *wv, const char *meanv,
                                                    const char *rstdv, char *zw, char *zb, int64_t zwords) {
    __shared__ double shd[32];
    zero_wb_words(zw, zb, zwords);
    DISPATCH_ALL(dt, {
        layer_norm_backward_x_rows<T, T, A>(dt, rows, n, gxv, gx_add, gout, xv, wv, meanv, rstdv, (A *)shd);
    });
}

/* gout in the 16-bit dt, x and gx f32. */
extern "C" __global__ void vk_layer_norm_mixed_backward_x(int dt, int64_t rows, int64_t n, char *gxv, int gx_add,
                                                          const char *gout, const char *xv, const char *wv,
                                                          const char *meanv, const char *rstdv, char *zw, char *zb,
                                                          int64_t zwords) {
    __shared__ double shd[32];
    zero_wb_words(zw, zb, zwords);
    DISPATCH_LOWP(dt, {
        layer_norm_backward_x_rows<float, T, float>(dt, rows, n, gxv, gx_add, gout, xv, wv, meanv, rstdv, (float *)shd);
    });
}

/* The weight and bias gradients of layer norm (+=, in A): column sums over chunks of rows. */
template <typename TI, typename TO, typename A>
__device__ void layer_norm_backward_wb_cols(int64_t rows, int64_t n, int64_t chunk, A *gw, A *gb, const TO *gout,
                                            const TI *x, const A *mean, const A *rstd) {
    int64_t chunks = (rows + chunk - 1) / chunk;
    GRID_STRIDE(i, n * chunks) {
        int64_t j = i % n, c = i / n, lo = c * chunk, hi = lo + chunk < rows ? lo + chunk : rows;
        A aw = 0, ab = 0;
        for (int64_t r = lo; r < hi; r++) {
            A g = (A)gout[r * n + j];
            aw += g * (((A)x[r * n + j] - mean[r]) * rstd[r]);
            ab += g;
        }
        if (gw) atomicAdd(gw + j, aw);
        if (gb) atomicAdd(gb + j, ab);
    }
}

extern "C" __global__ void vk_layer_norm_backward_wb(int dt, int64_t rows, int64_t n, int64_t chunk, char *gwv, char *gbv,
                                                     const char *gout, const char *xv, const char *meanv,
                                                     const char *rstdv) {
    DISPATCH_ALL(dt, {
        layer_norm_backward_wb_cols<T, T, A>(rows, n, chunk, (A *)gwv, (A *)gbv, (const T *)gout, (const T *)xv,
                                             (const A *)meanv, (const A *)rstdv);
    });
}

/* gout in the 16-bit dt, x f32. */
extern "C" __global__ void vk_layer_norm_mixed_backward_wb(int dt, int64_t rows, int64_t n, int64_t chunk, char *gwv,
                                                           char *gbv, const char *gout, const char *xv, const char *meanv,
                                                           const char *rstdv) {
    DISPATCH_LOWP(dt, {
        layer_norm_backward_wb_cols<float, T, float>(rows, n, chunk, (float *)gwv, (float *)gbv, (const T *)gout,
                                                     (const float *)xv, (const float *)meanv, (const float *)rstdv);
    });
}

/* 8 elements of a row as loaded, for the one-pass backward to hold a row's x and gout in
 * registers between its two passes: 16-bit ones packed (four registers), f32 ones as they are. */
template <typename T> struct raw8 {
    uint4 u;
    __device__ __forceinline__ void load(const T *p) { u = *(const uint4 *)p; }
    __device__ __forceinline__ float operator[](int e) const { return (float)((const T *)&u)[e]; }
};
template <> struct raw8<float> {
    float f[8];
    __device__ __forceinline__ void load(const float *p) { ld8(p, f); }
    __device__ __forceinline__ float operator[](int e) const { return f[e]; }
};

/* Layer norm's backward in one pass (vk_layer_norm_backward_fused and _mixed_, the default for
 * 16-bit gout rows of a width that is a multiple of 8 up to VK_LN_WARP_MAX): one warp a row, x
 * and gout read once in 16-byte vectors and held in registers as loaded, gx written once. Lane
 * l owns the 8-element vectors l, l + 32, ... of every row it visits, so its share of the
 * weight and bias gradients (column sums) stays in registers across its rows; the warps of a
 * block then add theirs into shared memory and the block adds the n column sums to gw and gb
 * with atomics (+=, as the column kernel; no scratch memory). The pair of kernels it replaces
 * reads x and gout twice. */
template <typename TI, typename TO>
__device__ void layer_norm_backward_fused_rows(int64_t rows, int n, TI *gx, int gx_add, float *gw, float *gb,
                                               const TO *gout, const TI *xin, const float *w, const float *mean,
                                               const float *rstd, float *shw, float *shb) {
    constexpr int MAXV = VK_LN_WARP_MAX / 256;
    int lane = threadIdx.x & 31, nw = blockDim.x >> 5, nv = n / 8;
    float aw[MAXV][8], ab[MAXV][8];
#pragma unroll
    for (int k = 0; k < MAXV; k++)
        for (int e = 0; e < 8; e++) aw[k][e] = ab[k][e] = 0.0f;
    for (int64_t r = blockIdx.x * (int64_t)nw + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * nw) {
        raw8<TI> xr[MAXV];
        raw8<TO> gr[MAXV];
        float m = mean[r], rs = rstd[r], s1 = 0, s2 = 0;
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k * 32 + lane < nv) {
                xr[k].load(xin + r * n + (k * 32 + lane) * 8);
                gr[k].load(gout + r * n + (k * 32 + lane) * 8);
            }
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k * 32 + lane < nv) {
                const float *wk = w + (k * 32 + lane) * 8;
                for (int e = 0; e < 8; e++) {
                    float h = (xr[k][e] - m) * rs, g = gr[k][e], dh = w ? g * wk[e] : g;
                    aw[k][e] += g * h;
                    ab[k][e] += g;
                    s1 += dh;
                    s2 += dh * h;
                }
            }
        float a = warp_sum(s1) / (float)n, c = warp_sum(s2) / (float)n;
#pragma unroll
        for (int k = 0; k < MAXV; k++)
            if (k * 32 + lane < nv) {
                const float *wk = w + (k * 32 + lane) * 8;
                float o[8];
                for (int e = 0; e < 8; e++) {
                    float h = (xr[k][e] - m) * rs, dh = w ? gr[k][e] * wk[e] : gr[k][e];
                    o[e] = rs * (dh - a - h * c);
                }
                if (gx_add) {
                    float old[8];
                    ld8(gx + r * n + (k * 32 + lane) * 8, old);
                    for (int e = 0; e < 8; e++) o[e] = gx_add_rn(old[e], (float)(TI)o[e]);
                }
                st8(gx + r * n + (k * 32 + lane) * 8, o);
            }
    }
    for (int j = threadIdx.x; j < n; j += blockDim.x) shw[j] = shb[j] = 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < MAXV; k++)
        if (k * 32 + lane < nv)
            for (int e = 0; e < 8; e++) {
                atomicAdd(shw + (k * 32 + lane) * 8 + e, aw[k][e]);
                atomicAdd(shb + (k * 32 + lane) * 8 + e, ab[k][e]);
            }
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        if (gw) atomicAdd(gw + j, shw[j]);
        if (gb) atomicAdd(gb + j, shb[j]);
    }
}

/* x, gx and gout in the 16-bit dt; w, mean, rstd, gw and gb f32. The host launches it (and the
 * _mixed one) only for its shapes (layer_norm_fused_ok, cuda_ops.c), one block an SM: 16 warps
 * here, 8 in the _mixed one (f32 x takes more registers); fewer, larger blocks, fewer atomics. */
extern "C" __global__ void __launch_bounds__(512, 1)
vk_layer_norm_backward_fused(int dt, int64_t rows, int64_t n, char *gxv, int gx_add, char *gwv, char *gbv,
                             const char *gout, const char *xv, const char *wv, const char *meanv, const char *rstdv) {
    __shared__ float shw[VK_LN_WARP_MAX], shb[VK_LN_WARP_MAX];
    DISPATCH_LOWP(dt, {
        layer_norm_backward_fused_rows<T, T>(rows, (int)n, (T *)gxv, gx_add, (float *)gwv, (float *)gbv,
                                             (const T *)gout, (const T *)xv, (const float *)wv, (const float *)meanv,
                                             (const float *)rstdv, shw, shb);
    });
}

/* x and gx f32 (the f32 residual stream), gout in the 16-bit dt. */
extern "C" __global__ void __launch_bounds__(256)
vk_layer_norm_mixed_backward_fused(int dt, int64_t rows, int64_t n, char *gxv, int gx_add, char *gwv, char *gbv,
                                   const char *gout, const char *xv, const char *wv, const char *meanv,
                                   const char *rstdv) {
    __shared__ float shw[VK_LN_WARP_MAX], shb[VK_LN_WARP_MAX];
    DISPATCH_LOWP(dt, {
        layer_norm_backward_fused_rows<float, T>(rows, (int)n, (float *)gxv, gx_add, (float *)gwv, (float *)gbv,
                                                 (const T *)gout, (const float *)xv, (const float *)wv,
                                                 (const float *)meanv, (const float *)rstdv, shw, shb);
    });
}
