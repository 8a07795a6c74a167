/* cuda_classifier_kernels.cuh — the fused classifier's cross-entropy kernels: vk_cross_entropy_fused
 * (any dtype; 16-bit rows get their log-sum-exp in one online pass over 8-element vectors, then a
 * second pass writes the gradient) and vk_cross_entropy_rows (16-bit rows up to
 * VK_CE_REG_VPT * VK_CE_REG_THREADS * 8 columns held whole in a block's registers, read once).
 * Included by cuda_row_kernels.cuh at this point of cuda_kernels.cu's one translation unit, so
 * the compiled code is what it was when they lived there; a file of its own so that
 * tests/test_ce_emulated.cpp can compile these two kernels for the CPU over tests/flash_emulator.h
 * with only what they use, cuda_device_helpers.cuh, before them.
 */

/* The classifier's cross-entropy, one block per row of [rows, ld] logits whose first n columns
 * are the classes: the row's loss added to *loss_sum, and with scale != 0 the logits replaced by
 * their gradient scale * (softmax - onehot), zero in the padding columns (no probabilities are
 * ever stored: llm.c's fused classifier). */
/* A 16-bit row's log-sum-exp in one pass: each thread keeps a running max and the sum of
 * exponentials below it over 8-element vectors (the online softmax), then the block combines
 * the pairs. Every thread gets the result. */
template <typename T> __device__ float row_lse_online(const T *x, int64_t n, float *sh) {
    float mx = -INFINITY, sum = 0.0f;
    int64_t nvec = n / 8;
    for (int64_t v = threadIdx.x; v <= nvec; v += blockDim.x) {
        float f[8];
        int cnt = 8;
        if (v < nvec) {
            ld8(x + v * 8, f);
        } else { /* the tail: n % 8 elements */
            cnt = (int)(n - nvec * 8);
            for (int e = 0; e < cnt; e++) f[e] = (float)x[nvec * 8 + e];
        }
        if (cnt == 0) continue;
        float vm = f[0];
        for (int e = 1; e < cnt; e++) vm = fmaxf(vm, f[e]);
        float nm = fmaxf(mx, vm);
        sum = sum * __expf(mx - nm); /* 0 while mx is -inf */
        for (int e = 0; e < cnt; e++) sum += __expf(f[e] - nm);
        mx = nm;
    }
    float bm = block_max(mx, sh);
    __syncthreads(); /* sh is reused */
    float part = mx == -INFINITY ? 0.0f : sum * __expf(mx - bm);
    return bm + logf(block_sum(part, sh));
}

extern "C" __global__ void vk_cross_entropy_fused(int dt, int64_t rows, int64_t n, int64_t ld, double scale, char *logits,
                                                  const char *targets, int tdt, double *loss_sum) {
    __shared__ double sh[32];
    DISPATCH_ALL(dt, {
        bool vec = is_16bit<T>::value && ld % 8 == 0 && aligned16(logits, logits, logits);
        for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
            T *x = (T *)logits + r * ld;
            int64_t tgt = load_id(targets, tdt, r);
            double lse = vec ? (double)row_lse_online<T>(x, n, (float *)sh) : row_lse<T, A>(x, n, sh);
            if (threadIdx.x == 0) atomicAdd(loss_sum, lse - (double)(A)x[tgt]);
            __syncthreads(); /* x[tgt] read before it is overwritten */
            if (scale == 0) continue;
            A l = (A)lse, sc = (A)scale;
            if (vec) { /* ld is a multiple of 8: whole vectors, the padding columns written as zeros */
                for (int64_t v = threadIdx.x; v < ld / 8; v += blockDim.x) {
                    float f[8];
                    ld8(x + v * 8, f);
                    for (int e = 0; e < 8; e++) {
                        int64_t j = v * 8 + e;
                        f[e] = j < n ? (__expf(f[e] - (float)l) - (j == tgt ? 1.0f : 0.0f)) * (float)sc : 0.0f;
                    }
                    st8(x + v * 8, f);
                }
            } else {
                for (int64_t j = threadIdx.x; j < ld; j += blockDim.x)
                    x[j] = (T)(j < n ? (m_exp((A)x[j] - l) - (j == tgt ? (A)1 : (A)0)) * sc : (A)0);
            }
            __syncthreads(); /* the block's shared scratch is reused by the next row */
        }
    });
}

/* Element i (0..7, a constant once unrolled) of 8 16-bit values in a uint4 as a float, and the
 * bits of a float rounded to T: shifts and masks, so that the vectors stay in registers (a
 * pointer cast of the uint4 would put them in local memory). */
__device__ __forceinline__ unsigned int u4_word(const uint4 &u, int i) {
    return i < 2 ? u.x : i < 4 ? u.y : i < 6 ? u.z : u.w;
}
template <typename T> __device__ __forceinline__ float u4_elem(const uint4 &u, int i);
template <> __device__ __forceinline__ float u4_elem<__nv_bfloat16>(const uint4 &u, int i) {
    unsigned int w = u4_word(u, i); /* a bf16 is the high half of its f32 */
    return __uint_as_float(i & 1 ? w & 0xffff0000u : w << 16);
}
template <> __device__ __forceinline__ float u4_elem<__half>(const uint4 &u, int i) {
    return __half2float(__ushort_as_half((unsigned short)(u4_word(u, i) >> ((i & 1) * 16))));
}
/* u ^ z for a z that is 0 but that the compiler cannot prove so: each pass over the registers
 * converts its own copy, where the compiler would otherwise keep the floats of one pass for the
 * next (twice the registers of the raw vectors) and spill. */
__device__ __forceinline__ uint4 u4_fresh(const uint4 &u, unsigned int z) {
    return make_uint4(u.x ^ z, u.y ^ z, u.z ^ z, u.w ^ z);
}
template <typename T> __device__ __forceinline__ unsigned int f_bits(float f);
template <> __device__ __forceinline__ unsigned int f_bits<__nv_bfloat16>(float f) {
    return __bfloat16_as_ushort(__float2bfloat16(f));
}
template <> __device__ __forceinline__ unsigned int f_bits<__half>(float f) {
    return __half_as_ushort(__float2half(f));
}
template <typename T> __device__ __forceinline__ unsigned int neg_inf_bits();
template <> __device__ __forceinline__ unsigned int neg_inf_bits<__nv_bfloat16>() { return 0xff80u; }
template <> __device__ __forceinline__ unsigned int neg_inf_bits<__half>() { return 0xfc00u; }
/* u with its elements from `keep` on (0..8) replaced by -inf */
template <typename T> __device__ __forceinline__ uint4 mask_tail(uint4 u, int keep) {
    unsigned int ni = neg_inf_bits<T>(), w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int h = 0; h < 4; h++) {
        if (2 * h >= keep) w[h] = (w[h] & 0xffff0000u) | ni;
        if (2 * h + 1 >= keep) w[h] = (w[h] & 0xffffu) | ni << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The fused classifier's 16-bit rows held in registers (the same results as
 * vk_cross_entropy_fused's vector path, which reads a row twice): a block a row, thread t
 * keeping the row's 16-byte vectors t, t + NT, ... (VPT of them, raw) from one round of
 * loads issued before any arithmetic, so the row comes from memory once. Columns from n on are
 * set to -inf as they arrive, so that the max, the sum of exponentials and the gradient need
 * no per-element masks (exp(-inf) = 0: the padding's gradient is 0). The thread holding the
 * target's vector adds the row's loss and subtracts the one-hot. The host launches it only
 * where ld / 8 <= VPT * NT, n <= ld, and the rows are 16-byte aligned. */
template <typename T, int VPT, int NT>
__device__ __forceinline__ void ce_row_reg(T *row, int tgt, int n, int nv, float sc, double *loss_sum, float *sh) {
    /* NT (the block size) a constant: slot k's address is one base plus an immediate offset */
    uint4 *x = (uint4 *)row + threadIdx.x, u[VPT];
    int left = nv - (int)threadIdx.x; /* slot k holds a vector where k * NT < left */
#pragma unroll
    for (int k = 0; k < VPT; k++) u[k] = k * NT < left ? __ldcs(x + k * NT) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        int keep = n - (int)(threadIdx.x + k * NT) * 8;
        if (keep < 8) u[k] = mask_tail<T>(u[k], keep); /* the vector with column n, the padding, the unused slots */
    }
    unsigned int z1 = (unsigned int)n >> 30, z2 = (unsigned int)nv >> 30; /* 0: n, nv < 2^16 here */
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < VPT; k++)
#pragma unroll
        for (int i = 0; i < 8; i++) mx = fmaxf(mx, u4_elem<T>(u[k], i));
    float bm = block_max(mx, sh), sum = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        uint4 c = u4_fresh(u[k], z1);
#pragma unroll
        for (int i = 0; i < 8; i++) sum += __expf(u4_elem<T>(c, i) - bm);
    }
    float lse = bm + logf(block_sum(sum, sh));
    /* the target's vector tv is thread tv % NT's slot tv / NT */
    int tv = tgt >> 3, kt = (int)threadIdx.x == tv % NT ? tv / NT : -1;
    if (kt >= 0) {
        uint4 w = u[0];
#pragma unroll
        for (int k = 1; k < VPT; k++)
            if (k == kt) w = u[k];
        atomicAdd(loss_sum, (double)lse - (double)u4_elem<T>(w, tgt & 7));
    }
    if (sc == 0.0f) return;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
        if (k * NT >= left) break;
        int ti = k == kt ? tgt & 7 : -1;
        uint4 c = u4_fresh(u[k], z2);
        unsigned int o[8];
#pragma unroll
        for (int i = 0; i < 8; i++) o[i] = f_bits<T>((__expf(u4_elem<T>(c, i) - lse) - (i == ti ? 1.0f : 0.0f)) * sc);
        x[k * NT] = make_uint4(o[0] | o[1] << 16, o[2] | o[3] << 16, o[4] | o[5] << 16, o[6] | o[7] << 16);
    }
}

/* A block a row (the grid is the row count: no loop state beside the row's registers). */
extern "C" __global__ void __launch_bounds__(VK_CE_REG_THREADS)
    vk_cross_entropy_rows(int dt, int64_t rows, int64_t n, int64_t ld, double scale, char *logits, const char *targets,
                          int tdt, double *loss_sum) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    if (r >= rows) return;
    DISPATCH_LOWP(dt, {
        ce_row_reg<T, VK_CE_REG_VPT, VK_CE_REG_THREADS>((T *)logits + r * ld, (int)load_id(targets, tdt, r), (int)n,
                                                        (int)(ld / 8), (float)scale, loss_sum, sh);
    });
}
