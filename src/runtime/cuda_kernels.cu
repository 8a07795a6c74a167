/* cuda_kernels.cu — the runtime's GPU kernels, one per slot of the kernel table (rt_internal.h),
 * compiled by nvcc into a fatbin that the library embeds and loads through the driver API.
 *
 * Every kernel is extern "C" so the host finds it by name (cuModuleGetFunction). Float kernels
 * take the dtype as an argument and run the same body for float and double (DISPATCH, as in
 * cpu_kernels.c); the branch is uniform across the grid. Elementwise kernels use a grid-stride
 * loop (8 elements per access for contiguous 16-bit operands); row kernels (softmax, layer norm,
 * cross-entropy: cuda_row_kernels.cuh) reduce with warp shuffles; column sums (bias and
 * layer-norm weight gradients, broadcast reductions) split the rows into chunks whose partial
 * sums are added atomically; the optimizer step's f32 list kernels have vector forms
 * (cuda_optim_list.cuh); flash attention is cuda_flash_attention.cuh (and its 128-key
 * backward, cuda_flash_backward128.cuh). The math follows
 * cpu_kernels.c formula for formula, so a GPU op and its CPU op agree to rounding.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_abi.h"
#include "float_dispatch.h"
#include "grad_scaler_rule.h"

#define DISPATCH(dt, ...) VRAM_FLOAT_DISPATCH((dt) == VK_F32, __VA_ARGS__)

#include "cuda_device_helpers.cuh"

/* for (v = each 8-element vector of n) BODY, then `done` = the elements covered */
#define VEC8_LOOP(v, n, done, ...)                                                                 \
    int64_t done = ((n) / 8) * 8;                                                                  \
    for (int64_t v = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) * 8; v < done;              \
         v += (int64_t)gridDim.x * blockDim.x * 8) {                                               \
        __VA_ARGS__                                                                                \
    }
#define GRID_STRIDE_FROM(i, from, n)                                                               \
    for (int64_t i = (from) + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* One element of the unary ops and their gradients (op: 0 relu, 1 gelu (erf), 2 tanh, 4 gelu (tanh
 * approximation, as x sigmoid(2u), the CPU's formula), else scale). */
template <typename A> __device__ __forceinline__ A unary_op(int op, A v, double p) {
    switch (op) {
    case 0: return v > 0 ? v : (A)0;
    case 1: return (A)0.5 * v * ((A)1 + m_erf(v * (A)0.70710678118654752440));
    case 2: return m_tanh(v);
    case 4: return v / ((A)1 + m_exp((A)-1.5957691216057307 * (v + (A)0.044715 * v * v * v)));
    default: return v * (A)p;
    }
}
template <typename A> __device__ __forceinline__ A unary_grad(int op, A gv, A xi, double p) {
    switch (op) {
    case 0: return xi > 0 ? gv : (A)0;
    case 1: {
        A cdf = (A)0.5 * ((A)1 + m_erf(xi * (A)0.70710678118654752440));
        A pdf = (A)0.39894228040143267794 * m_exp((A)-0.5 * xi * xi);
        return gv * (cdf + xi * pdf);
    }
    case 2: return gv * (1 - xi * xi);
    case 4: {
        A x2 = xi * xi, sg = (A)1 / ((A)1 + m_exp((A)-1.5957691216057307 * (xi + (A)0.044715 * x2 * xi)));
        return gv * (sg + xi * sg * ((A)1 - sg) * ((A)1.5957691216057307 * ((A)1 + (A)0.134145 * x2)));
    }
    default: return gv * (A)p;
    }
}
template <typename A> __device__ __forceinline__ A binary_op(int op, A x, A y) {
    return op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
}

__device__ __forceinline__ double ld_any(const char *p, int dt) {
    switch (dt) {
    case VK_F64: return *(const double *)p;
    case VK_F32: return *(const float *)p;
    case VK_F16: return __half2float(*(const __half *)p);
    case VK_BF16: return __bfloat162float(*(const __nv_bfloat16 *)p);
    case VK_I32: return *(const int32_t *)p;
    case VK_I64: return (double)*(const int64_t *)p;
    case VK_I8: return *(const int8_t *)p;
    default: return *(const uint8_t *)p;
    }
}

__device__ __forceinline__ void st_any(char *p, int dt, double v) {
    switch (dt) {
    case VK_F64: *(double *)p = v; break;
    case VK_F32: *(float *)p = (float)v; break;
    case VK_F16: *(__half *)p = __double2half(v); break;
    case VK_BF16: *(__nv_bfloat16 *)p = __double2bfloat16(v); break;
    case VK_I32: *(int32_t *)p = (int32_t)v; break;
    case VK_I64: *(int64_t *)p = (int64_t)v; break;
    case VK_I8: *(int8_t *)p = (int8_t)v; break;
    default: *(uint8_t *)p = (uint8_t)v; break;
    }
}

__device__ __forceinline__ int elem_size(int dt) {
    return dt == VK_F64 || dt == VK_I64 ? 8 : dt == VK_F32 || dt == VK_I32 ? 4 : dt == VK_F16 || dt == VK_BF16 ? 2 : 1;
}

/* Element offsets of linear index i in each of `ops` operands (32-bit division where it fits). */
__device__ __forceinline__ void unravel(const vk_geom &g, int64_t i, int ops, int64_t *off) {
    off[0] = off[1] = off[2] = 0;
    if (g.n <= 0xffffffffLL) {
        uint32_t r = (uint32_t)i;
        for (int d = g.nd - 1; d >= 0; d--) {
            uint32_t s = (uint32_t)g.shape[d], q = r / s, idx = r - q * s;
            r = q;
            for (int o = 0; o < ops; o++) off[o] += (int64_t)idx * g.st[o][d];
        }
    } else {
        for (int d = g.nd - 1; d >= 0; d--) {
            int64_t idx = i % g.shape[d];
            i /= g.shape[d];
            for (int o = 0; o < ops; o++) off[o] += idx * g.st[o][d];
        }
    }
}

/* ---- copy, fill ---- */

extern "C" __global__ void vk_copy(vk_geom g, char *dst, int ddt, const char *src, int sdt) {
    int de = elem_size(ddt), se = elem_size(sdt);
    GRID_STRIDE(i, g.n) {
        int64_t off[3];
        unravel(g, i, 2, off);
        char *d = dst + off[0] * de;
        const char *s = src + off[1] * se;
        if (ddt == sdt) {
            if (de == 4) *(uint32_t *)d = *(const uint32_t *)s;
            else if (de == 8) *(uint64_t *)d = *(const uint64_t *)s;
            else if (de == 2) *(uint16_t *)d = *(const uint16_t *)s;
            else *d = *s;
        } else if (sdt == VK_F32 && ddt == VK_BF16) { /* the mixed products' weight casts */
            *(__nv_bfloat16 *)d = __float2bfloat16(*(const float *)s);
        } else if (sdt == VK_F32 && ddt == VK_F16) {
            *(__half *)d = __float2half(*(const float *)s);
        } else {
            st_any(d, ddt, ld_any(s, sdt));
        }
    }
}

/* A same-dtype copy in 16-byte units (the geometry counts units: the host checked alignment). */
extern "C" __global__ void vk_copy16(vk_geom g, char *dst, const char *src) {
    GRID_STRIDE(i, g.n) {
        int64_t off[3];
        unravel(g, i, 2, off);
        ((uint4 *)dst)[off[0]] = ((const uint4 *)src)[off[1]];
    }
}

extern "C" __global__ void vk_fill(vk_geom g, char *dst, int dt, double v) {
    int de = elem_size(dt);
    GRID_STRIDE(i, g.n) {
        int64_t off[3];
        unravel(g, i, 1, off);
        st_any(dst + off[0] * de, dt, v);
    }
}

/* ---- elementwise arithmetic ---- */

/* out = a op b with out and a f32 and b 16-bit (TB): a 16-bit branch added to mixed precision's
 * f32 residual stream, computed in f32. */
template <typename TB> __device__ void binary_f32_lowp(const vk_geom &g, int op, float *out, const float *a, const TB *b) {
    int64_t from = 0;
    if (g.nd == 1 && g.st[0][0] == 1 && g.st[1][0] == 1 && g.st[2][0] == 1 && aligned16(out, a, b)) {
        VEC8_LOOP(v, g.n, done, {
            float x[8], y[8];
            ld8(a + v, x);
            ld8(b + v, y);
            for (int k = 0; k < 8; k++) x[k] = binary_op(op, x[k], y[k]);
            st8(out + v, x);
        });
        from = done;
    }
    GRID_STRIDE_FROM(i, from, g.n) {
        int64_t off[3];
        unravel(g, i, 3, off);
        out[off[0]] = binary_op(op, a[off[1]], (float)b[off[2]]);
    }
}

/* bdt: b's dtype, dt's but for a mixed add (dt f32, bdt f16/bf16). */
extern "C" __global__ void vk_binary(vk_geom g, int op, int dt, char *out, const char *a, const char *b, int bdt) {
    if (bdt != dt) {
        if (bdt == VK_BF16) binary_f32_lowp(g, op, (float *)out, (const float *)a, (const __nv_bfloat16 *)b);
        else binary_f32_lowp(g, op, (float *)out, (const float *)a, (const __half *)b);
        return;
    }
    DISPATCH_ALL(dt, {
        int64_t from = 0;
        if (is_16bit<T>::value && g.nd == 1 && g.st[0][0] == 1 && g.st[1][0] == 1 && g.st[2][0] == 1 && aligned16(out, a, b)) {
            VEC8_LOOP(v, g.n, done, { /* same shape, contiguous */
                float x[8], y[8];
                ld8((const T *)a + v, x);
                ld8((const T *)b + v, y);
                for (int k = 0; k < 8; k++) x[k] = binary_op(op, x[k], y[k]);
                st8((T *)out + v, x);
            });
            from = done;
        }
        GRID_STRIDE_FROM(i, from, g.n) {
            int64_t off[3];
            unravel(g, i, 3, off);
            ((T *)out)[off[0]] = (T)binary_op(op, (A)((const T *)a)[off[1]], (A)((const T *)b)[off[2]]);
        }
    });
}

/* dst += src, where no two elements of src land on one element of dst. */
extern "C" __global__ void vk_accumulate(vk_geom g, int dt, char *dst, const char *src) {
    DISPATCH_ALL(dt, {
        int64_t from = 0;
        if (is_16bit<T>::value && g.nd == 1 && g.st[0][0] == 1 && g.st[1][0] == 1 && aligned16(dst, src, src)) {
            VEC8_LOOP(v, g.n, done, {
                float x[8], y[8];
                ld8((const T *)dst + v, x);
                ld8((const T *)src + v, y);
                for (int k = 0; k < 8; k++) x[k] += y[k];
                st8((T *)dst + v, x);
            });
            from = done;
        }
        GRID_STRIDE_FROM(i, from, g.n) {
            int64_t off[3];
            unravel(g, i, 2, off);
            T *d = (T *)dst + off[0];
            *d = (T)((A)*d + (A)((const T *)src)[off[1]]);
        }
    });
}

/* dst += src summed over the reduced dimensions (dst stride 0). The geometry lists the kept
 * dimensions (nd, shape, strides [0] dst and [1] src); the reduced ones are flattened into
 * `rshape`/`rst` (src strides, up to VK_MAXD). Each thread sums `chunk` reduced positions of one
 * kept element and adds its partial sum atomically. */
extern "C" __global__ void vk_reduce_add(vk_geom g, vk_red r, int64_t chunk, int dt, char *dst, const char *src) {
    int64_t chunks = (r.n + chunk - 1) / chunk;
    DISPATCH_ALL(dt, {
        GRID_STRIDE(i, g.n * chunks) {
            int64_t keep = i % g.n, c = i / g.n;
            int64_t off[3];
            unravel(g, keep, 2, off);
            int64_t lo = c * chunk, hi = lo + chunk < r.n ? lo + chunk : r.n;
            A acc = 0;
            for (int64_t j = lo; j < hi; j++) {
                int64_t rem = j, so = 0;
                if (r.nd == 1) {
                    so = j * r.st[0];
                } else {
                    for (int d = r.nd - 1; d >= 0; d--) {
                        int64_t idx = rem % r.shape[d];
                        rem /= r.shape[d];
                        so += idx * r.st[d];
                    }
                }
                acc += (A)((const T *)src)[off[1] + so];
            }
            atomicAdd((T *)dst + off[0], (T)acc);
        }
    });
}

/* out[j] += sum of g[r * ld + j] over a chunk of rows, for j < n (16-bit g, f32 out): thread i
 * takes column group i % groups (8 columns when the rows allow 16-byte access, else one) and
 * chunk i / groups, and adds its partial sums atomically. */
/* Column sums of g [rows, n] (row stride ld) added into out (f32, zeroed by the caller). With
 * `vec` (16-bit, n and ld multiples of 8, 16-byte aligned) a block of 256 threads takes 256
 * columns (32 lanes of 8) of one chunk of rows, 8 row lanes striding through it, and sums the
 * lanes in shared memory, so each column gets one atomic add a block; else a thread sums one
 * column of one chunk. */
extern "C" __global__ void vk_column_sum_lowp(int dt, int vec, int64_t rows, int64_t n, int64_t ld, int64_t chunk,
                                              const char *gv, float *out) {
    __shared__ float part[8][257];
    DISPATCH_ALL(dt, {
        const T *g = (const T *)gv;
        if (is_16bit<T>::value && vec) {
            int64_t col_blocks = (n / 8 + 31) / 32, cb = blockIdx.x % col_blocks, r0 = blockIdx.x / col_blocks * chunk;
            int64_t r1 = r0 + chunk < rows ? r0 + chunk : rows, j0 = cb * 256 + (threadIdx.x & 31) * 8;
            int ty = threadIdx.x >> 5;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (j0 < n)
                for (int64_t r = r0 + ty; r < r1; r += 8) {
                    float f[8];
                    ld8(g + r * ld + j0, f);
                    for (int e = 0; e < 8; e++) acc[e] += f[e];
                }
            for (int e = 0; e < 8; e++) part[ty][(threadIdx.x & 31) * 8 + e] = acc[e];
            __syncthreads();
            int64_t j = cb * 256 + threadIdx.x;
            float sum = 0;
            for (int k = 0; k < 8; k++) sum += part[k][threadIdx.x];
            if (j < n) atomicAdd(out + j, sum);
            return;
        }
        int64_t chunks = (rows + chunk - 1) / chunk;
        GRID_STRIDE(i, n * chunks) {
            int64_t j = i % n, r0 = i / n * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
            float acc = 0;
            for (int64_t r = r0; r < r1; r++) acc += (float)g[r * ld + j];
            atomicAdd(out + j, acc);
        }
    });
}

extern "C" __global__ void vk_unary(int op, double p, int dt, int64_t n, char *out, const char *in) {
    DISPATCH_ALL(dt, {
        const T *x = (const T *)in;
        T *o = (T *)out;
        int64_t from = 0;
        if (is_16bit<T>::value && aligned16(x, o, o)) {
            VEC8_LOOP(v, n, done, {
                float f[8];
                ld8(x + v, f);
                for (int k = 0; k < 8; k++) f[k] = unary_op(op, f[k], p);
                st8(o + v, f);
            });
            from = done;
        }
        GRID_STRIDE_FROM(i, from, n) o[i] = (T)unary_op(op, (A)x[i], p);
    });
}
extern "C" __global__ void vk_unary_backward(int op, double p, int dt, int64_t n, char *gin, const char *gout,
                                             const char *saved) {
    DISPATCH_ALL(dt, {
        const T *g = (const T *)gout, *x = (const T *)saved; /* scale (3) keeps nothing: x NULL */
        T *gi = (T *)gin;
        int64_t from = 0;
        if (is_16bit<T>::value && op != 3 && aligned16(g, x, gi)) {
            VEC8_LOOP(v, n, done, {
                float gv[8], xv[8];
                ld8(g + v, gv);
                ld8(x + v, xv);
                for (int k = 0; k < 8; k++) gv[k] = unary_grad(op, gv[k], xv[k], p);
                st8(gi + v, gv);
            });
            from = done;
        }
        GRID_STRIDE_FROM(i, from, n) gi[i] = (T)unary_grad(op, (A)g[i], op != 3 ? (A)x[i] : (A)0, p);
    });
}

extern "C" __global__ void vk_mask_scale(int dt, int64_t n, char *out, const char *in, const uint8_t *mask, double scale) {
    DISPATCH_ALL(dt, {
        GRID_STRIDE(i, n) ((T *)out)[i] = (T)(mask[i] ? (A)((const T *)in)[i] * (A)scale : (A)0);
    });
}

extern "C" __global__ void vk_scale_inplace(int dt, int64_t n, char *x, double s) {
    DISPATCH_ALL(dt, {
        GRID_STRIDE(i, n) ((T *)x)[i] = (T)((A)((T *)x)[i] * (A)s);
    });
}

#include "cuda_row_kernels.cuh"

/* ---- convolution helpers and pooling ---- */

extern "C" __global__ void vk_im2col(int dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                                     int64_t oh, int64_t ow, const char *xv, char *colv) {
    DISPATCH(dt, {
        GRID_STRIDE(i, c * kh * kw * oh * ow) {
            int64_t xx = i % ow, y = (i / ow) % oh, row = i / (ow * oh);
            int64_t kj = row % kw, ki = (row / kw) % kh, ci = row / (kw * kh);
            int64_t iy = y * stride - pad + ki, ix = xx * stride - pad + kj;
            ((T *)colv)[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? ((const T *)xv)[(ci * h + iy) * w + ix] : (T)0;
        }
    });
}

extern "C" __global__ void vk_col2im(int dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                                     int64_t oh, int64_t ow, const char *colv, char *gxv) {
    DISPATCH(dt, {
        GRID_STRIDE(i, c * kh * kw * oh * ow) {
            int64_t xx = i % ow, y = (i / ow) % oh, row = i / (ow * oh);
            int64_t kj = row % kw, ki = (row / kw) % kh, ci = row / (kw * kh);
            int64_t iy = y * stride - pad + ki, ix = xx * stride - pad + kj;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w) atomicAdd((T *)gxv + (ci * h + iy) * w + ix, ((const T *)colv)[i]);
        }
    });
}

extern "C" __global__ void vk_pool2d(int dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride,
                                     int64_t oh, int64_t ow, char *outv, const char *xv, int32_t *argmax) {
    DISPATCH(dt, {
        GRID_STRIDE(i, planes * oh * ow) {
            int64_t xx = i % ow, y = (i / ow) % oh, p = i / (ow * oh);
            const T *x = (const T *)xv + p * h * w;
            double best = -INFINITY, sum = 0;
            int32_t arg = 0;
            for (int ki = 0; ki < k; ki++)
                for (int kj = 0; kj < k; kj++) {
                    int64_t iy = y * stride + ki, ix = xx * stride + kj;
                    double v = x[iy * w + ix];
                    sum += v;
                    if (v > best) {
                        best = v;
                        arg = (int32_t)(iy * w + ix);
                    }
                }
            ((T *)outv)[i] = (T)(is_max ? best : sum / (k * k));
            if (is_max) argmax[i] = arg;
        }
    });
}

extern "C" __global__ void vk_pool2d_backward(int dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride,
                                              int64_t oh, int64_t ow, char *gxv, const char *goutv, const int32_t *argmax) {
    DISPATCH(dt, {
        GRID_STRIDE(i, planes * oh * ow) {
            int64_t xx = i % ow, y = (i / ow) % oh, p = i / (ow * oh);
            T *gx = (T *)gxv + p * h * w;
            T gv = ((const T *)goutv)[i];
            if (is_max) {
                atomicAdd(gx + argmax[i], gv);
            } else {
                T share = gv / (T)(k * k);
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++) atomicAdd(gx + (y * stride + ki) * w + xx * stride + kj, share);
            }
        }
    });
}

/* ---- optimizers (the formulas of cpu_kernels.c; step-dependent constants come from the host) ---- */

extern "C" __global__ void vk_sgd_update(int dt, int64_t n, char *pv, const char *gv, char *bufv, double lr,
                                         double momentum, double wd, int first, const int32_t *skip) {
    if (skip && *skip) return;
    DISPATCH(dt, {
        T *p = (T *)pv, *buf = (T *)bufv;
        const T *g = (const T *)gv;
        GRID_STRIDE(i, n) {
            T d = g[i] + (T)wd * p[i];
            if (buf) {
                buf[i] = first ? d : (T)momentum * buf[i] + d;
                d = buf[i];
            }
            p[i] -= (T)lr * d;
        }
    });
}

extern "C" __global__ void vk_adam_update(int dt, int64_t n, char *pv, const char *gv, char *mv, char *vv, double step_size,
                                          double sbc2, double b1, double b2, double eps, double decay, double wd,
                                          int decoupled, const int32_t *skip) {
    if (skip && *skip) return;
    DISPATCH(dt, {
        T *p = (T *)pv, *m = (T *)mv, *v = (T *)vv;
        const T *g = (const T *)gv;
        T ss = (T)step_size, sb = (T)sbc2, tb1 = (T)b1, tb2 = (T)b2, te = (T)eps, dec = (T)decay;
        GRID_STRIDE(i, n) {
            T gi = g[i], pi = p[i];
            if (decoupled) {
                pi *= dec;
            } else {
                gi += (T)wd * pi;
            }
            T mi = tb1 * m[i] + (1 - tb1) * gi;
            T vi = tb2 * v[i] + (1 - tb2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            p[i] = pi - ss * mi / (m_sqrt(vi) / sb + te);
        }
    });
}

/* AdamW over a list of tensors (vk_adam_entry, sorted by start): each block takes chunks of
 * `chunk` elements of the concatenation, finds the chunk's first tensor by binary search, and
 * walks into the next tensors where the chunk crosses into them. */
extern "C" __global__ void vk_adam_update_list(int dt, int count, const vk_adam_entry *tab, int64_t total, int64_t chunk,
                                               double step_size, double sbc2, double b1, double b2, double eps,
                                               double decay, double wd, int decoupled, const int32_t *skip, int lowp_dt,
                                               double gcoef) {
    __shared__ int first;
    if (skip && *skip) return;
    DISPATCH(dt, {
        T ss = (T)step_size, sb = (T)sbc2, tb1 = (T)b1, tb2 = (T)b2, te = (T)eps, dec = (T)decay, gc = (T)gcoef;
        for (int64_t c0 = blockIdx.x * chunk; c0 < total; c0 += (int64_t)gridDim.x * chunk) {
            if (threadIdx.x == 0) {
                int lo = 0, hi = count - 1;
                while (lo < hi) {
                    int mid = (lo + hi + 1) / 2;
                    if (tab[mid].start <= c0) lo = mid;
                    else hi = mid - 1;
                }
                first = lo;
            }
            __syncthreads();
            int t = first;
            int64_t end = c0 + chunk < total ? c0 + chunk : total;
            for (int64_t i = c0 + threadIdx.x; i < end; i += blockDim.x) {
                while (i >= tab[t].start + tab[t].n) t++;
                int64_t j = i - tab[t].start;
                T *p = (T *)tab[t].p, *m = (T *)tab[t].m, *v = (T *)tab[t].v;
                T gi = m_mul_rn(((const T *)tab[t].g)[j], gc), pi = p[j]; /* (as clipping's own pass) */
                if (decoupled) pi *= dec;
                else gi += (T)wd * pi;
                T mi = tb1 * m[j] + (1 - tb1) * gi, vi = tb2 * v[j] + (1 - tb2) * gi * gi;
                m[j] = mi;
                v[j] = vi;
                pi -= ss * mi / (m_sqrt(vi) / sb + te);
                p[j] = pi;
                if (tab[t].lowp) {
                    if (lowp_dt == VK_BF16) ((__nv_bfloat16 *)tab[t].lowp)[j] = __float2bfloat16((float)pi);
                    else ((__half *)tab[t].lowp)[j] = __float2half((float)pi);
                }
            }
            __syncthreads();
        }
    });
}

extern "C" __global__ void vk_adagrad_update(int dt, int64_t n, char *pv, const char *gv, char *sv, double clr, double eps,
                                             double wd, const int32_t *skip) {
    if (skip && *skip) return;
    DISPATCH(dt, {
        T *p = (T *)pv, *s = (T *)sv;
        const T *g = (const T *)gv;
        GRID_STRIDE(i, n) {
            T gi = g[i] + (T)wd * p[i];
            s[i] += gi * gi;
            p[i] -= (T)clr * gi / (m_sqrt(s[i]) + (T)eps);
        }
    });
}

/* Loss scaling: x /= *scale; *found_inf = 1 where a result is inf or NaN (grad_scaler.c). */
extern "C" __global__ void vk_unscale(int dt, int64_t n, char *xv, const float *scale, int32_t *found_inf) {
    DISPATCH(dt, {
        T *x = (T *)xv, inv = (T)(1.0 / (double)*scale);
        int bad = 0;
        GRID_STRIDE(i, n) {
            x[i] *= inv;
            bad |= !isfinite(x[i]);
        }
        if (bad) *found_inf = 1;
    });
}

/* The scaler's step, one thread: state = {growth tracker, found_inf}. */
extern "C" __global__ void vk_scaler_update(float *scale, int32_t *state, double growth, double backoff, int interval) {
    vram_scaler_rule(scale, state, growth, backoff, interval);
}

/* *out += sum of squares of x (a double accumulator the host reads back). */
extern "C" __global__ void vk_sum_squares(int dt, int64_t n, const char *xv, double *out) {
    __shared__ double sh[32];
    double s = 0;
    DISPATCH_ALL(dt, {
        const T *x = (const T *)xv;
        GRID_STRIDE(i, n) s += (double)(A)x[i] * (double)(A)x[i];
    });
    s = block_sum(s, sh);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

/* The tensor of a list (sorted by start) that holds element i of their concatenation. */
__device__ __forceinline__ int list_find(const vk_list_entry *tab, int count, int64_t i) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tab[mid].start <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* *out += the sum of squares of every tensor of the list, one launch (the global gradient norm):
 * each thread walks its grid-stride elements in order, moving to the next tensor as it goes. */
extern "C" __global__ void vk_list_sum_squares(int dt, int count, const vk_list_entry *tab, int64_t total, double *out) {
    __shared__ double sh[32];
    double s = 0;
    int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int t = i0 < total ? list_find(tab, count, i0) : 0;
    DISPATCH_ALL(dt, {
        GRID_STRIDE(i, total) {
            while (i >= tab[t].start + tab[t].n) t++;
            double v = (double)(A)((const T *)tab[t].x)[i - tab[t].start];
            s += v * v;
        }
    });
    s = block_sum(s, sh);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

extern "C" __global__ void vk_list_scale(int dt, int count, const vk_list_entry *tab, int64_t total, double s) {
    int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int t = i0 < total ? list_find(tab, count, i0) : 0;
    DISPATCH_ALL(dt, {
        GRID_STRIDE(i, total) {
            while (i >= tab[t].start + tab[t].n) t++;
            T *x = (T *)tab[t].x + (i - tab[t].start);
            *x = (T)((A)*x * (A)s);
        }
    });
}

#include "cuda_optim_list.cuh"

/* ids outside [0, limit) set *bad to 1 (the host checks it before using the ids). */
extern "C" __global__ void vk_check_ids(int64_t n, const char *ids, int id_dt, int64_t limit, int *bad) {
    GRID_STRIDE(i, n) {
        int64_t v = load_id(ids, id_dt, i);
        if (v < 0 || v >= limit) atomicMin(bad, (int)(i < 0x7fffffff ? i : 0x7ffffffe));
    }
}

#include "cuda_flash_attention.cuh"
#include "cuda_flash_backward128.cuh"
