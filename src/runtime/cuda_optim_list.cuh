/* cuda_optim_list.cuh — the vector forms of the two multi-tensor kernels of an f32 optimizer
 * step: AdamW over every parameter (vk_adam_update_list_vec) and the gradients' sum of squares
 * for clipping (vk_list_sum_squares_vec). Included by cuda_kernels.cu (m_sqrt, m_mul_rn,
 * block_sum); cuda_ops.c launches them for f32 lists unless VRAM_OPTIM_KERNEL=old.
 *
 * Layout: the host pads each tensor's start in the concatenation to a whole number of
 * VK_LIST_CHUNK elements (the table keeps one entry a tensor, as the scalar kernels' does), so
 * chunk c lies in exactly one tensor: the last whose start is <= c * VK_LIST_CHUNK, at offset
 * c * VK_LIST_CHUNK - start. A chunk's pointers are then as aligned as its tensor's, and where
 * all of them are (16 bytes for f32, 8 for the 16-bit copy) a thread moves four elements per
 * access: float4 loads and stores, four 16-bit values in one 8-byte store. Other chunks, and
 * the last n % 4 elements of a tensor, take the scalar path, which computes each element with
 * the same function (adam_elem), so both paths give the same bits.
 */

/* The tensor of a padded list that holds chunk start x (entries sorted by start; a tensor of
 * no elements shares its successor's start, and the search takes the last such entry). */
template <typename E> __device__ __forceinline__ int chunk_tensor(const E *tab, int count, int64_t x) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tab[mid].start <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* One element of AdamW (vk_adam_update_list's formula, in the same order). */
__device__ __forceinline__ float adam_elem(const vk_adam_consts &k, float &p, float g, float &m, float &v) {
    float gi = m_mul_rn(g, k.gc), pi = p; /* (as clipping's own pass) */
    if (k.decoupled) pi *= k.decay;
    else gi += k.wd * pi;
    float mi = k.b1 * m + (1 - k.b1) * gi, vi = k.b2 * v + (1 - k.b2) * gi * gi;
    m = mi;
    v = vi;
    pi -= k.ss * mi / (m_sqrt(vi) / k.sb + k.eps);
    p = pi;
    return pi;
}

__device__ __forceinline__ void store_lowp(char *lowp, int lowp_dt, int64_t j, float x) {
    if (lowp_dt == VK_BF16) ((__nv_bfloat16 *)lowp)[j] = __float2bfloat16(x);
    else ((__half *)lowp)[j] = __float2half(x);
}

/* Four 16-bit copies of a, b, c, d in one 8-byte store (the same rounding as store_lowp). */
__device__ __forceinline__ void store_lowp4(char *lowp, int lowp_dt, int64_t j, float a, float b, float c, float d) {
    uint2 w;
    if (lowp_dt == VK_BF16) {
        __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
        w.x = *(unsigned *)&lo, w.y = *(unsigned *)&hi;
    } else {
        __half2 lo = __floats2half2_rn(a, b), hi = __floats2half2_rn(c, d);
        w.x = *(unsigned *)&lo, w.y = *(unsigned *)&hi;
    }
    *(uint2 *)(lowp + 2 * j) = w;
}

/* adam_elem on the four elements of float4 group i, already loaded, then their stores and the
 * 16-bit copy's. */
__device__ __forceinline__ void adam_store4(const vk_adam_consts &k, float *p, float *m, float *v, char *lowp,
                                            int lowp_dt, int64_t i, float4 pa, float4 ga, float4 ma, float4 va) {
    adam_elem(k, pa.x, ga.x, ma.x, va.x);
    adam_elem(k, pa.y, ga.y, ma.y, va.y);
    adam_elem(k, pa.z, ga.z, ma.z, va.z);
    adam_elem(k, pa.w, ga.w, ma.w, va.w);
    ((float4 *)p)[i] = pa, ((float4 *)m)[i] = ma, ((float4 *)v)[i] = va;
    if (lowp) store_lowp4(lowp, lowp_dt, 4 * i, pa.x, pa.y, pa.z, pa.w);
}

/* AdamW on vectors i and i2 (four elements each; i2 < 0: none) of a chunk. Both vectors' loads
 * come before either's stores: the compiler cannot tell that p, m and v do not overlap, so it
 * would not move a later load above a store itself. */
__device__ __forceinline__ void adam_vec2(const vk_adam_consts &k, float *p, const float *g, float *m, float *v,
                                          char *lowp, int lowp_dt, int64_t i, int64_t i2) {
    float4 pa = ((float4 *)p)[i], ma = ((float4 *)m)[i], va = ((float4 *)v)[i], ga = ((const float4 *)g)[i];
    float4 pb, mb, vb, gb;
    if (i2 >= 0) pb = ((float4 *)p)[i2], mb = ((float4 *)m)[i2], vb = ((float4 *)v)[i2], gb = ((const float4 *)g)[i2];
    adam_store4(k, p, m, v, lowp, lowp_dt, i, pa, ga, ma, va);
    if (i2 >= 0) adam_store4(k, p, m, v, lowp, lowp_dt, i2, pb, gb, mb, vb);
}

/* AdamW over an f32 list, one block a chunk (the hardware hands chunks to SMs as they free up,
 * so chunks cut short at a tensor's end cost no waiting). skip: the grad scaler's flag, read
 * once a thread; when set nothing is written. */
extern "C" __global__ void __launch_bounds__(256, 4) vk_adam_update_list_vec(int count, const vk_adam_entry *tab,
                                                                         int64_t nchunks, vk_adam_consts k,
                                                                         const int32_t *skip, int lowp_dt) {
    if (skip && *skip) return;
    for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        int64_t x = c * VK_LIST_CHUNK;
        const vk_adam_entry *e = tab + chunk_tensor(tab, count, x);
        int64_t j0 = x - e->start, len = e->n - j0 < VK_LIST_CHUNK ? e->n - j0 : VK_LIST_CHUNK;
        float *p = (float *)e->p + j0, *m = (float *)e->m + j0, *v = (float *)e->v + j0;
        const float *g = (const float *)e->g + j0;
        char *lowp = e->lowp ? e->lowp + 2 * j0 : NULL;
        uintptr_t a = (uintptr_t)p | (uintptr_t)m | (uintptr_t)v | (uintptr_t)g;
        int64_t n4 = (a & 15) == 0 && ((uintptr_t)lowp & 7) == 0 ? len / 4 : 0;
        int64_t i = threadIdx.x;
        for (; i + blockDim.x < n4; i += 2 * blockDim.x) /* two vectors' loads in flight before any store */
            adam_vec2(k, p, g, m, v, lowp, lowp_dt, i, i + blockDim.x);
        if (i < n4) adam_vec2(k, p, g, m, v, lowp, lowp_dt, i, -1);
        for (int64_t j = 4 * n4 + threadIdx.x; j < len; j += blockDim.x) { /* unaligned chunks, tails */
            float pj = p[j], mj = m[j], vj = v[j];
            adam_elem(k, pj, g[j], mj, vj);
            p[j] = pj, m[j] = mj, v[j] = vj;
            if (lowp) store_lowp(lowp, lowp_dt, j, pj);
        }
    }
}

/* *out += the sum of squares of an f32 list: a fixed grid walks the chunks (so that one atomic a
 * block stays few); each thread sums a chunk's at most VK_LIST_CHUNK / blockDim.x squares in
 * float, then adds that to its double total, which the block reduces and adds once. */
extern "C" __global__ void __launch_bounds__(256) vk_list_sum_squares_vec(int count, const vk_list_entry *tab,
                                                                         int64_t nchunks, double *out) {
    __shared__ double sh[32];
    double s = 0;
    for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        int64_t x = c * VK_LIST_CHUNK;
        const vk_list_entry *e = tab + chunk_tensor(tab, count, x);
        int64_t j0 = x - e->start, len = e->n - j0 < VK_LIST_CHUNK ? e->n - j0 : VK_LIST_CHUNK;
        const float *g = (const float *)e->x + j0;
        int64_t n4 = ((uintptr_t)g & 15) == 0 ? len / 4 : 0;
        float f = 0;
#pragma unroll 4
        for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 q = ((const float4 *)g)[i];
            f += q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
        }
        for (int64_t j = 4 * n4 + threadIdx.x; j < len; j += blockDim.x) f += g[j] * g[j];
        s += (double)f;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0 && s != 0) atomicAdd(out, s);
}
