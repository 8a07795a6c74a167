/* cuda_infer_kernels.cu — the GPU kernels behind inference (generation.c), the GPU side of
 * cpu_infer.c: the product with low-precision weights read in place (Q8_0, Q8_R, bf16), row
 * lookup from such a table, appending to the KV cache and attending over it, GPT-2's tanh GELU.
 * nvcc compiles this file into its own fatbin (CMakeLists.txt), loaded beside the main module
 * by cuda_infer_ops.c, which launches these kernels on the runtime's stream.
 *
 * vki_linear: one warp per (output column n, tile of MT activation rows): the lanes walk the
 * weight row, 4 stored values at a time where the row allows it, convert them to floats in
 * registers (times the block's f16 scale for Q8_0) and accumulate against the tile's rows; a
 * shuffle reduction ends each dot product. Weight bytes are the only weight bytes read: no
 * dequantised copy exists anywhere. vki_kv_attention: one block per (row, query, head), online
 * softmax over chunks of the cached keys (as flash attention does), so the scores never need
 * memory of the cache's length.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_infer_abi.h"

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float f16_at(const uint8_t *p) { return __half2float(*(const __half *)p); }
__device__ __forceinline__ float bf16_bits(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ float f32_at(const uint8_t *p) { /* Q8_R's scales may be unaligned */
    uint32_t b = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return __uint_as_float(b);
}

/* Weight w[n, k] (one value) as a float, in any stored format. */
__device__ __forceinline__ float w_at(int fmt, const uint8_t *w, int64_t N, int64_t K, int64_t n, int64_t k) {
    if (fmt == VKI_Q8_0) return (float)(int8_t)w[n * K + k] * f16_at(w + N * K + 2 * ((n * K + k) / 32));
    if (fmt == VKI_Q8_R) return (float)(int8_t)w[n * K + k] * f32_at(w + N * K + 4 * n);
    if (fmt == VKI_BF16) return bf16_bits(((const uint16_t *)w)[n * K + k]);
    return ((const float *)w)[n * K + k];
}

/* Four weights w[n, k..k+3] (k a multiple of 4, the row 4-aligned: vec mode), Q8_R's row scale
 * left out (applied once to the dot product). */
__device__ __forceinline__ void w4_at(int fmt, const uint8_t *w, int64_t N, int64_t K, int64_t n, int64_t k, float *o) {
    if (fmt == VKI_BF16) {
        uint2 h = *(const uint2 *)((const uint16_t *)w + n * K + k);
        o[0] = __uint_as_float(h.x << 16), o[1] = __uint_as_float(h.x & 0xffff0000u);
        o[2] = __uint_as_float(h.y << 16), o[3] = __uint_as_float(h.y & 0xffff0000u);
        return;
    }
    char4 q = *(const char4 *)(w + n * K + k);
    float d = fmt == VKI_Q8_0 ? f16_at(w + N * K + 2 * ((n * K + k) / 32)) : 1.0f;
    o[0] = q.x * d, o[1] = q.y * d, o[2] = q.z * d, o[3] = q.w * d;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* y[M, N] = x[M, K] W^T + bias. Warps: (N columns) x (ceil(M / MT) row tiles), grid-stride. vec:
 * K % 4 == 0 and x, w 16-byte aligned (the host checks), so 4 values a lane a step. */
extern "C" __global__ void vki_linear(int fmt, int64_t M, int64_t N, int64_t K, const float *__restrict__ x,
                                      const uint8_t *__restrict__ w, const float *__restrict__ bias, float *__restrict__ y,
                                      int vec) {
    const int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32), tiles = (M + VKI_MT - 1) / VKI_MT;
    for (int64_t job = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; job < N * tiles; job += warps) {
        int64_t n = job % N, m0 = (job / N) * VKI_MT;
        int rows = M - m0 < VKI_MT ? (int)(M - m0) : VKI_MT;
        float acc[VKI_MT];
#pragma unroll
        for (int r = 0; r < VKI_MT; r++) acc[r] = 0.0f;
        if (vec) {
            for (int64_t k = 4 * lane; k < K; k += 128) {
                float wv[4];
                w4_at(fmt, w, N, K, n, k, wv);
#pragma unroll
                for (int r = 0; r < VKI_MT; r++) {
                    if (r < rows) {
                        float4 xv = *(const float4 *)(x + (m0 + r) * K + k);
                        acc[r] += xv.x * wv[0] + xv.y * wv[1] + xv.z * wv[2] + xv.w * wv[3];
                    }
                }
            }
        } else {
            for (int64_t k = lane; k < K; k += 32) {
                float wv = fmt == VKI_Q8_R ? (float)(int8_t)w[n * K + k] : w_at(fmt, w, N, K, n, k);
#pragma unroll
                for (int r = 0; r < VKI_MT; r++)
                    if (r < rows) acc[r] += x[(m0 + r) * K + k] * wv;
            }
        }
        float scale = fmt == VKI_Q8_R ? f32_at(w + N * K + 4 * n) : 1.0f, b = bias ? bias[n] : 0.0f;
#pragma unroll
        for (int r = 0; r < VKI_MT; r++) {
            float s = warp_sum(acc[r]);
            if (lane == 0 && r < rows) y[(m0 + r) * N + n] = s * scale + b;
        }
    }
}

/* out[i, :] = row ids[i] of table [rows, c] in fmt. */
extern "C" __global__ void vki_embedding(int fmt, int64_t n_ids, int64_t c, int64_t rows, float *__restrict__ out,
                                         const uint8_t *__restrict__ table, const int32_t *__restrict__ ids) {
    GRID_STRIDE(i, n_ids * c) {
        int64_t r = ids[i / c], k = i % c;
        out[i] = w_at(fmt, table, rows, c, r, k);
    }
}

/* Keys and values of qkv [n, T, 3C] into kc, vc [n, H, cap, D] at positions lens[b] + t. */
extern "C" __global__ void vki_kv_append(int64_t n, int64_t T, int64_t H, int64_t D, const float *__restrict__ qkv,
                                         float *__restrict__ kc, float *__restrict__ vc, int64_t cap, vki_lens lens) {
    int64_t C = H * D;
    GRID_STRIDE(i, n * T * C) {
        int64_t b = i / (T * C), t = (i / C) % T, h = (i % C) / D, d = i % D;
        const float *row = qkv + (b * T + t) * 3 * C;
        int64_t at = ((b * H + h) * cap + lens.len[b] + t) * D + d;
        kc[at] = row[C + h * D + d];
        vc[at] = row[2 * C + h * D + d];
    }
}

__device__ __forceinline__ float block_reduce(float v, int is_max, float *red) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    int w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads(); /* red is reused by the next reduction */
    if ((threadIdx.x & 31) == 0) red[w] = v;
    __syncthreads();
    v = red[0];
    for (int i = 1; i < nw; i++) v = is_max ? fmaxf(v, red[i]) : v + red[i];
    return v;
}

/* One block of VKI_ATT_THREADS per (b, t, h): query t of row b attends to cache positions
 * 0 .. lens[b] + t of head h, a chunk of VKI_ATT_THREADS keys at a time (one score a thread),
 * with the running maximum and sum of online softmax; thread j owns output dims j, j + threads,
 * .... D <= VKI_MAX_D (the host checks). */
extern "C" __global__ void vki_kv_attention(int64_t n, int64_t T, int64_t H, int64_t D, const float *__restrict__ qkv,
                                            const float *__restrict__ kc, const float *__restrict__ vc, int64_t cap,
                                            vki_lens lens, float *__restrict__ out) {
    __shared__ float qs[VKI_MAX_D];
    __shared__ float ps[VKI_ATT_THREADS];
    __shared__ float red[32];
    const int tid = threadIdx.x, nt = blockDim.x;
    const float scale = 1.0f / sqrtf((float)D); /* as the CPU's */
    int64_t C = H * D;
    for (int64_t job = blockIdx.x; job < n * T * H; job += gridDim.x) {
        int64_t b = job / (T * H), t = (job / H) % T, h = job % H;
        const float *q = qkv + (b * T + t) * 3 * C + h * D;
        const float *kr = kc + (b * H + h) * cap * D, *vr = vc + (b * H + h) * cap * D;
        int64_t len = lens.len[b] + t + 1;
        __syncthreads(); /* the previous job's readers of qs and ps are done */
        for (int64_t d = tid; d < D; d += nt) qs[d] = q[d];
        __syncthreads();
        float acc[VKI_MAX_D / VKI_ATT_THREADS];
#pragma unroll
        for (int i = 0; i < VKI_MAX_D / VKI_ATT_THREADS; i++) acc[i] = 0.0f;
        float run_max = -INFINITY, run_sum = 0.0f;
        for (int64_t j0 = 0; j0 < len; j0 += nt) {
            int64_t j = j0 + tid;
            float s = -INFINITY;
            if (j < len) {
                float dot = 0.0f;
                for (int64_t d = 0; d < D; d++) dot += qs[d] * kr[j * D + d];
                s = dot * scale;
            }
            float new_max = fmaxf(run_max, block_reduce(s, 1, red));
            float p = j < len ? expf(s - new_max) : 0.0f;
            ps[tid] = p;
            float corr = expf(run_max - new_max); /* 0 on the first chunk (run_max is -inf) */
            run_sum = run_sum * corr + block_reduce(p, 0, red); /* (its barriers publish ps) */
            int64_t cnt = len - j0 < nt ? len - j0 : nt;
#pragma unroll
            for (int i = 0; i < VKI_MAX_D / VKI_ATT_THREADS; i++) {
                int64_t d = tid + (int64_t)i * nt;
                if (d < D) {
                    float a = acc[i] * corr;
                    for (int64_t jj = 0; jj < cnt; jj++) a += ps[jj] * vr[(j0 + jj) * D + d];
                    acc[i] = a;
                }
            }
            run_max = new_max;
            __syncthreads(); /* ps is rewritten by the next chunk */
        }
        float *o = out + (b * T + t) * C + h * D;
#pragma unroll
        for (int i = 0; i < VKI_MAX_D / VKI_ATT_THREADS; i++) {
            int64_t d = tid + (int64_t)i * nt;
            if (d < D) o[d] = acc[i] / run_sum;
        }
    }
}

extern "C" __global__ void vki_gelu_tanh(int64_t n, float *__restrict__ out, const float *__restrict__ x) {
    GRID_STRIDE(i, n) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
