/* cuda_device_helpers.cuh — the small device helpers the runtime's kernels share: DISPATCH_ALL and
 * DISPATCH_LOWP (T and A per dtype), GRID_STRIDE, the m_* math overloads, 8-element vector
 * access (is_16bit, ld8/st8, aligned16), warp and block reductions (warp_sum/warp_max,
 * block_sum/block_max), load_id and row_lse.
 *
 * cuda_kernels.cu includes it before its kernels; it is a file of its own so that the
 * CPU-emulated kernel tests (tests/test_*_emulated.cpp over tests/flash_emulator.h, which
 * supplies the CUDA built-ins) compile these same definitions rather than copies of them, and so
 * test the helpers the GPU runs. Everything here is a macro, an inline function or a template, so
 * including it changes no code the kernels compile to.
 */

/* The kernels that low-precision training uses also take f16 and bf16 storage: T is how an
 * element is stored, A the type it is computed and accumulated in (float for the 16-bit types).
 * Weights, layer-norm statistics and cross-entropy's lse stay in A. */
#define DISPATCH_ALL(dt, ...)                                                                      \
    do {                                                                                           \
        if ((dt) == VK_BF16) {                                                                     \
            typedef __nv_bfloat16 T;                                                               \
            typedef float A;                                                                       \
            __VA_ARGS__                                                                            \
        } else if ((dt) == VK_F16) {                                                               \
            typedef __half T;                                                                      \
            typedef float A;                                                                       \
            __VA_ARGS__                                                                            \
        } else if ((dt) == VK_F32) {                                                               \
            typedef float T;                                                                       \
            typedef float A;                                                                       \
            __VA_ARGS__                                                                            \
        } else {                                                                                   \
            typedef double T;                                                                      \
            typedef double A;                                                                      \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_erf(float x) { return erff(x); }
__device__ __forceinline__ double m_erf(double x) { return erf(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
/* A product rounded on its own, never fused into a following add: a factor applied inside a
 * kernel gives the bits a separate scaling pass would have stored. */
__device__ __forceinline__ float m_mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double m_mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double m_log(double x) { return log(x); }

/* ---- 16-bit elementwise fast path: 8 elements per 16-byte access ----
 * Contiguous 16-bit operands (the mixed-precision activations) are read and written 8 at a
 * time (cuda_kernels.cu's VEC8_LOOP runs the vectors over a grid stride, the tail in a scalar loop). */
template <typename T> struct is_16bit { static constexpr bool value = false; };
template <> struct is_16bit<__nv_bfloat16> { static constexpr bool value = true; };
template <> struct is_16bit<__half> { static constexpr bool value = true; };

template <typename T> __device__ __forceinline__ void ld8(const T *p, float *f) {
    uint4 u = *(const uint4 *)p;
    const T *e = (const T *)&u;
    for (int k = 0; k < 8; k++) f[k] = (float)e[k];
}
template <typename T> __device__ __forceinline__ void st8(T *p, const float *f) {
    uint4 u;
    T *e = (T *)&u;
    for (int k = 0; k < 8; k++) e[k] = (T)f[k];
    *(uint4 *)p = u;
}
/* f32 rows in the same 8-element vectors (two 16-byte accesses): the f32 residual stream that
 * mixed precision's layer norm and add read beside 16-bit operands (vram_gpt_config.residual_f32). */
__device__ __forceinline__ void ld8(const float *p, float *f) {
    float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
__device__ __forceinline__ void st8(float *p, const float *f) {
    ((float4 *)p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    ((float4 *)p)[1] = make_float4(f[4], f[5], f[6], f[7]);
}
__device__ __forceinline__ bool aligned16(const void *a, const void *b, const void *c) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15) == 0;
}

/* DISPATCH_ALL's 16-bit half: T for dt, f16 or bf16. */
#define DISPATCH_LOWP(dt, ...)                                                                     \
    do {                                                                                           \
        if ((dt) == VK_BF16) {                                                                     \
            typedef __nv_bfloat16 T;                                                               \
            __VA_ARGS__                                                                            \
        } else {                                                                                   \
            typedef __half T;                                                                      \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)

/* ---- block reductions ---- */

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename T> __device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) {
        T w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* Sum (or max) over the block; every thread gets the result. `sh` holds 32 values. */
template <typename T> __device__ T block_sum(T v, T *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (T)0;
    return warp_sum(v);
}
template <typename T> __device__ T block_max(T v, T *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (T)-INFINITY;
    return warp_max(v);
}

__device__ __forceinline__ int64_t load_id(const char *ids, int dt, int64_t i) {
    return dt == VK_I64 ? ((const int64_t *)ids)[i] : ((const int32_t *)ids)[i];
}

/* log(sum(exp(x[0..n)))) of one row, by the whole block (every thread gets it). */
template <typename T, typename A> __device__ double row_lse(const T *x, int64_t n, double *sh) {
    A mx = (A)-INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = (A)x[j] > mx ? (A)x[j] : mx;
    mx = block_max(mx, (A *)sh);
    double s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += (double)m_exp((A)x[j] - mx);
    s = block_sum(s, sh);
    return (double)mx + log(s);
}
