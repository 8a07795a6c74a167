/* cuda_flash_attention.cuh — causal self-attention that never stores the T x T scores, for f16
 * and bf16 on tensor cores (included by cuda_kernels.cu, the one translation unit of the fatbin).
 *
 * Inputs are the packed projection qkv [B, T, 3C] (q, k, v side by side; C = H heads x 64) and
 * the output is [B, T, C] with the heads merged, as ops_attention.c's op. A block of 4 warps
 * owns 64 rows of one (batch, head); each warp owns 16 of them and loops over 64-wide tiles of
 * the other side, staged in shared memory. Products run on wmma 16x16x16 fragments with fp32
 * accumulation; the elementwise work (scale, causal mask, exp) is done in fp32 on a warp's
 * 16 x 64 score tile in shared memory, two lanes a row.
 *
 * Forward runs two passes over the keys (the row max and sum, then O = exp(S - lse) V), so the
 * output accumulates in registers without rescaling; it keeps lse [B*H, T] (fp32) for backward.
 * Backward is FlashAttention-2's, split in two kernels so that nothing is added atomically:
 * one per key block accumulates dK and dV over the query tiles, one per query block
 * accumulates dQ over the key tiles; both recompute P from lse, with dvec = rowsum(dO * O).
 */
#include <mma.h>

namespace fa {

using namespace nvcuda;

constexpr int D = 64, TILE = 64, WARPS = 4, LDT = TILE + 8, LDS = TILE + 4;
constexpr int TILE_BYTES = TILE * LDT * 2;           /* a 64 x 64 tile of 16-bit elements, padded */
constexpr int S_BYTES = WARPS * 16 * LDS * 4;        /* each warp's 16 x 64 fp32 scores */
constexpr int P_BYTES = WARPS * 16 * LDT * 2;        /* each warp's 16 x 64 probabilities in T */
constexpr int SMEM_BYTES = 2 * TILE_BYTES + S_BYTES + P_BYTES + 2 * TILE * 4;

template <typename T> using frag_a = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T> using frag_at = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::col_major>;
template <typename T> using frag_b = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <typename T> using frag_bt = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
using frag_c = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/* rows [t0, t0 + 64) of a [.., T, stride] tensor, 64 columns from `src`, into dst [64][LDT];
 * rows past T read as zeros. */
template <typename T> __device__ void load_tile(T *dst, const T *src, int64_t stride, int64_t t0, int64_t Tn) {
    for (int i = threadIdx.x; i < TILE * (D / 8); i += blockDim.x) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (t0 + r < Tn) v = *(const uint4 *)(src + (t0 + r) * stride + c);
        *(uint4 *)(dst + r * LDT + c) = v;
    }
}

/* acc[n] = a (16 x 64, four k-step fragments) @ the 64 x 64 tile `b` read transposed: b is
 * stored [n][k] (rows are the output's columns). Written to s (16 x 64, ld LDS). */
template <typename T> __device__ void product_bt(float *s, const frag_a<T> *a, const T *b) {
    for (int n = 0; n < 4; n++) {
        frag_c acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int k = 0; k < 4; k++) {
            frag_bt<T> fb;
            wmma::load_matrix_sync(fb, b + n * 16 * LDT + k * 16, LDT);
            wmma::mma_sync(acc, a[k], fb, acc);
        }
        wmma::store_matrix_sync(s + n * 16, acc, LDS, wmma::mem_row_major);
    }
}

/* acc[n] += p (16 x 64 in shared memory, ld LDT) @ the 64 x 64 tile b ([k][n], ld LDT). */
template <typename T> __device__ void product_acc(frag_c *acc, const T *p, const T *b) {
    for (int k = 0; k < 4; k++) {
        frag_a<T> fa;
        wmma::load_matrix_sync(fa, p + k * 16, LDT);
        for (int n = 0; n < 4; n++) {
            frag_b<T> fb;
            wmma::load_matrix_sync(fb, b + k * 16 * LDT + n * 16, LDT);
            wmma::mma_sync(acc[n], fa, fb, acc[n]);
        }
    }
}

template <typename T> __device__ void load_rows(frag_a<T> *f, const T *tile, int w) {
    for (int k = 0; k < 4; k++) wmma::load_matrix_sync(f[k], tile + w * 16 * LDT + k * 16, LDT);
}

/* Writes a warp's 16 x 64 accumulator (times scale) to rows [t0, t0 + 16) of dst (row stride
 * `stride`, rows past T skipped), through its score tile s. */
template <typename T> __device__ void store_rows(float *s, frag_c *acc, float scale, T *dst, int64_t stride, int64_t t0,
                                                 int64_t Tn, const float *row_div) {
    int lane = threadIdx.x & 31;
    for (int n = 0; n < 4; n++) wmma::store_matrix_sync(s + n * 16, acc[n], LDS, wmma::mem_row_major);
    __syncwarp();
    int r = lane >> 1, c0 = (lane & 1) * 32;
    if (t0 + r < Tn) {
        float f = row_div ? scale / row_div[r] : scale;
        for (int c = c0; c < c0 + 32; c++) dst[(t0 + r) * stride + c] = (T)(s[r * LDS + c] * f);
    }
    __syncwarp();
}

struct shape {
    int64_t B, Tn, H;
};

/* What a block works on: its (batch, head), the row block `blk` (counted from the last, so the
 * longest causal loops start first), and its warp's lane layout and scratch tiles. */
template <typename T> struct block_ctx {
    int64_t blk, bh, C, stride;
    const T *base;   /* qkv at the block's (batch, head): q at +0, k at +C, v at +2C */
    const T *gbase;  /* the output gradient at (batch, head), [T, C] rows */
    int64_t gqkv_at; /* the element offset of (batch, head) in qkv and gqkv */
    int w, lane, r, c0;
    float *s; /* the warp's 16 x 64 fp32 scores */
    T *p;     /* the warp's 16 x 64 probabilities */
};

template <typename T> __device__ block_ctx<T> block_setup(shape sh, const T *qkv, const T *gout, char *smem) {
    block_ctx<T> c;
    int64_t nb = (sh.Tn + TILE - 1) / TILE, b;
    c.blk = nb - 1 - blockIdx.x % nb, c.bh = blockIdx.x / nb;
    b = c.bh / sh.H, c.C = sh.H * D, c.stride = 3 * c.C;
    int64_t h = c.bh % sh.H;
    c.gqkv_at = b * sh.Tn * c.stride + h * D;
    c.base = qkv + c.gqkv_at;
    c.gbase = gout ? gout + b * sh.Tn * c.C + h * D : nullptr;
    c.w = threadIdx.x >> 5, c.lane = threadIdx.x & 31, c.r = c.lane >> 1, c.c0 = (c.lane & 1) * 32;
    c.s = (float *)(smem + 2 * TILE_BYTES) + c.w * 16 * LDS;
    c.p = (T *)(smem + 2 * TILE_BYTES + S_BYTES) + c.w * 16 * LDT;
    return c;
}

template <typename T> __device__ void forward(shape sh, const T *qkv, T *out, float *lse, float scale, char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, (const T *)nullptr, smem);
    int64_t qb = c.blk, bh = c.bh, C = c.C, stride = c.stride;
    const T *base = c.base;
    T *ks = (T *)smem, *vs = (T *)(smem + TILE_BYTES), *p = c.p;
    int w = c.w, lane = c.lane, r = c.r, c0 = c.c0;
    float *s = c.s;
    int64_t b = bh / sh.H, h = bh % sh.H, q0 = qb * TILE, qi = q0 + w * 16 + r;

    frag_a<T> fq[4];
    load_tile(ks, base, stride, q0, sh.Tn);
    __syncthreads();
    load_rows(fq, ks, w);
    __syncthreads();

    float m = -INFINITY, l = 0;
    for (int64_t kt = 0; kt <= qb; kt++) { /* pass 1: the row's max and sum of exponentials */
        load_tile(ks, base + C, stride, kt * TILE, sh.Tn);
        __syncthreads();
        product_bt(s, fq, ks);
        __syncwarp();
        float mx = -INFINITY;
        for (int c = c0; c < c0 + 32; c++)
            if (kt * TILE + c <= qi) mx = fmaxf(mx, s[r * LDS + c] * scale);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx), sum = 0;
        for (int c = c0; c < c0 + 32; c++)
            if (kt * TILE + c <= qi) sum += __expf(s[r * LDS + c] * scale - mn);
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = (m == -INFINITY ? 0 : l * __expf(m - mn)) + sum;
        m = mn;
        __syncthreads();
    }
    float row_lse = m + __logf(l);

    frag_c acc[4];
    for (int n = 0; n < 4; n++) wmma::fill_fragment(acc[n], 0.0f);
    for (int64_t kt = 0; kt <= qb; kt++) { /* pass 2: O = exp(S - lse) V */
        load_tile(ks, base + C, stride, kt * TILE, sh.Tn);
        load_tile(vs, base + 2 * C, stride, kt * TILE, sh.Tn);
        __syncthreads();
        product_bt(s, fq, ks);
        __syncwarp();
        for (int c = c0; c < c0 + 32; c++)
            p[r * LDT + c] = (T)(kt * TILE + c <= qi ? __expf(s[r * LDS + c] * scale - row_lse) : 0.0f);
        __syncwarp();
        product_acc(acc, p, vs);
        __syncthreads();
    }
    if (qi < sh.Tn && (lane & 1) == 0) lse[bh * sh.Tn + qi] = row_lse;
    store_rows(s, acc, 1.0f, out + b * sh.Tn * C + h * D, C, q0 + w * 16, sh.Tn, (const float *)nullptr);
}

/* dK and dV of one block of 64 keys, over the query tiles at or after it. */
template <typename T> __device__ void backward_kv(shape sh, const T *qkv, const T *gout, const float *lse,
                                                  const float *dvec, T *gqkv, float scale, char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, gout, smem);
    int64_t kb = c.blk, bh = c.bh, C = c.C, stride = c.stride;
    const T *base = c.base, *gbase = c.gbase;
    T *qs = (T *)smem, *dos = (T *)(smem + TILE_BYTES), *p = c.p;
    int w = c.w, r = c.r, c0 = c.c0;
    float *s = c.s;
    float *lse_s = (float *)(smem + 2 * TILE_BYTES + S_BYTES + P_BYTES), *dv_s = lse_s + TILE;
    int64_t k0 = kb * TILE, kj = k0 + w * 16 + r;

    frag_a<T> fk[4], fv[4];
    load_tile(qs, base + C, stride, k0, sh.Tn);
    load_tile(dos, base + 2 * C, stride, k0, sh.Tn);
    __syncthreads();
    load_rows(fk, qs, w);
    load_rows(fv, dos, w);
    __syncthreads();

    frag_c dk[4], dv[4];
    for (int n = 0; n < 4; n++) wmma::fill_fragment(dk[n], 0.0f), wmma::fill_fragment(dv[n], 0.0f);
    for (int64_t qt = kb; qt * TILE < sh.Tn; qt++) {
        int64_t q0 = qt * TILE;
        load_tile(qs, base, stride, q0, sh.Tn);
        load_tile(dos, gbase, C, q0, sh.Tn);
        for (int i = threadIdx.x; i < TILE; i += blockDim.x) {
            int ok = q0 + i < sh.Tn;
            lse_s[i] = ok ? lse[bh * sh.Tn + q0 + i] : 0.0f;
            dv_s[i] = ok ? dvec[bh * sh.Tn + q0 + i] : 0.0f;
        }
        __syncthreads();
        product_bt(s, fk, qs); /* S^T: keys x queries */
        __syncwarp();
        for (int c = c0; c < c0 + 32; c++) {
            int64_t qi = q0 + c;
            p[r * LDT + c] = (T)(kj <= qi && qi < sh.Tn ? __expf(s[r * LDS + c] * scale - lse_s[c]) : 0.0f);
        }
        __syncwarp();
        product_acc(dv, p, dos); /* dV += P^T dO */
        product_bt(s, fv, dos);  /* dP^T = V dO^T */
        __syncwarp();
        for (int c = c0; c < c0 + 32; c++) p[r * LDT + c] = (T)((float)p[r * LDT + c] * (s[r * LDS + c] - dv_s[c]));
        __syncwarp();
        product_acc(dk, p, qs); /* dK += dS^T Q (scaled at the end) */
        __syncthreads();
    }
    T *gb = gqkv + c.gqkv_at;
    store_rows(s, dk, scale, gb + C, stride, k0 + w * 16, sh.Tn, (const float *)nullptr);
    store_rows(s, dv, 1.0f, gb + 2 * C, stride, k0 + w * 16, sh.Tn, (const float *)nullptr);
}

/* dQ of one block of 64 queries, over the key tiles at or before it. */
template <typename T> __device__ void backward_q(shape sh, const T *qkv, const T *gout, const float *lse,
                                                 const float *dvec, T *gqkv, float scale, char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, gout, smem);
    int64_t qb = c.blk, bh = c.bh, C = c.C, stride = c.stride;
    const T *base = c.base, *gbase = c.gbase;
    T *ks = (T *)smem, *vs = (T *)(smem + TILE_BYTES), *p = c.p;
    int w = c.w, r = c.r, c0 = c.c0;
    float *s = c.s;
    int64_t q0 = qb * TILE, qi = q0 + w * 16 + r;
    float row_lse = qi < sh.Tn ? lse[bh * sh.Tn + qi] : 0.0f, row_dv = qi < sh.Tn ? dvec[bh * sh.Tn + qi] : 0.0f;

    frag_a<T> fq[4], fdo[4];
    load_tile(ks, base, stride, q0, sh.Tn);
    load_tile(vs, gbase, C, q0, sh.Tn);
    __syncthreads();
    load_rows(fq, ks, w);
    load_rows(fdo, vs, w);
    __syncthreads();

    frag_c dq[4];
    for (int n = 0; n < 4; n++) wmma::fill_fragment(dq[n], 0.0f);
    for (int64_t kt = 0; kt <= qb; kt++) {
        load_tile(ks, base + C, stride, kt * TILE, sh.Tn);
        load_tile(vs, base + 2 * C, stride, kt * TILE, sh.Tn);
        __syncthreads();
        product_bt(s, fq, ks); /* S = Q K^T */
        __syncwarp();
        for (int c = c0; c < c0 + 32; c++)
            p[r * LDT + c] = (T)(kt * TILE + c <= qi && qi < sh.Tn ? __expf(s[r * LDS + c] * scale - row_lse) : 0.0f);
        __syncwarp();
        product_bt(s, fdo, vs); /* dP = dO V^T */
        __syncwarp();
        for (int c = c0; c < c0 + 32; c++) p[r * LDT + c] = (T)((float)p[r * LDT + c] * (s[r * LDS + c] - row_dv));
        __syncwarp();
        product_acc(dq, p, ks); /* dQ += dS K (scaled at the end) */
        __syncthreads();
    }
    store_rows(s, dq, scale, gqkv + c.gqkv_at, stride, q0 + w * 16, sh.Tn, (const float *)nullptr);
}

} /* namespace fa */

#define FA_DISPATCH(dt, call)                                                                      \
    do {                                                                                           \
        __shared__ __align__(128) char smem[fa::SMEM_BYTES];                                       \
        if ((dt) == VK_BF16) {                                                                     \
            typedef __nv_bfloat16 T;                                                               \
            call;                                                                                  \
        } else {                                                                                   \
            typedef __half T;                                                                      \
            call;                                                                                  \
        }                                                                                          \
    } while (0)

/* Grid: ceil(T / 64) * B * H blocks of 128 threads (the same for the backward kernels). */
extern "C" __global__ void vk_flash_forward(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, char *out,
                                            float *lse, float scale) {
    FA_DISPATCH(dt, fa::forward<T>({B, Tn, H}, (const T *)qkv, (T *)out, lse, scale, smem));
}

/* dvec[b, h, t] = sum over d of dO * O, both [B, T, C]: one warp a row. */
extern "C" __global__ void vk_flash_dot(int dt, int64_t B, int64_t Tn, int64_t H, const char *gout, const char *out,
                                        float *dvec) {
    int lane = threadIdx.x & 31;
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5, warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t row = warp; row < B * H * Tn; row += warps) {
        int64_t t = row % Tn, bh = row / Tn, b = bh / H, h = bh % H, at = (b * Tn + t) * H * fa::D + h * fa::D;
        float acc = 0;
        DISPATCH_ALL(dt, {
            for (int d = lane; d < fa::D; d += 32) acc += (float)((const T *)gout)[at + d] * (float)((const T *)out)[at + d];
        });
        acc = warp_sum(acc);
        if (lane == 0) dvec[row] = acc;
    }
}

extern "C" __global__ void vk_flash_backward_kv(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout,
                                                const float *lse, const float *dvec, char *gqkv, float scale) {
    FA_DISPATCH(dt, fa::backward_kv<T>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv, scale, smem));
}

extern "C" __global__ void vk_flash_backward_q(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout,
                                               const float *lse, const float *dvec, char *gqkv, float scale) {
    FA_DISPATCH(dt, fa::backward_q<T>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv, scale, smem));
}
