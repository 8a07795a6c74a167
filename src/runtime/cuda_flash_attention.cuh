/* cuda_flash_attention.cuh — causal self-attention that never stores the T x T scores, for f16
 * and bf16 on tensor cores (included by cuda_kernels.cu, the one translation unit of the fatbin).
 *
 * Inputs are the packed projection qkv [B, T, 3C] (q, k, v side by side; C = H heads x 64) and
 * the output is [B, T, C] with the heads merged, as ops_attention.c's op. A block of 4 warps
 * owns 64 rows of one (batch, head); each warp owns 16 of them, keeps them in registers as
 * mma.sync A fragments, and loops over 64-wide tiles of the other side, which cp.async stages
 * into shared memory one tile ahead of the one being multiplied. Scores, probabilities and
 * accumulators stay in registers: a product's accumulator fragment is repacked in place as the
 * next product's A fragment (the m16n8k16 layouts line up), so no score tile touches memory.
 *
 * Forward is FlashAttention-2's one pass with the online softmax (the running max rescales the
 * output); it keeps lse [B*H, T] (fp32) for backward (vk_flash_forward32: 2 warps of 32 rows,
 * each B fragment serving two row tiles). Backward recomputes P from lse, with dvec =
 * rowsum(dO * O). The default is FlashAttention-2's one pass (backward_fused): one block per
 * key block accumulates dK and dV over the query tiles and adds each tile's dQ share, from the
 * same P and dS, into an fp32 [B, T, C] accumulator with atomics (their order varies, so dQ's
 * last bits do); a small kernel scales it into 16 bits. The split form adds nothing atomically:
 * a dK/dV kernel per key block and a dQ kernel per query block, each recomputing P. Blocks are
 * numbered longest causal loop first, across all heads.
 */

namespace fa {

constexpr int D = 64, TILE = 64, WARPS = 4, THREADS = WARPS * 32;
constexpr int LDT = D + 8;                /* row stride in elements: 144 bytes keeps ldmatrix conflict-free */
constexpr int TILE_ELEMS = TILE * LDT;    /* one 64 x 64 tile of 16-bit elements, padded */
constexpr int STAGES = 2;                 /* the tile being multiplied and the one in flight */
constexpr int SMEM_BYTES = STAGES * 2 * TILE_ELEMS * 2 + STAGES * 2 * TILE * 4;
constexpr int SMEM_FUSED_BYTES = SMEM_BYTES + TILE_ELEMS * 2; /* + the key block's K, for dQ */
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

#ifndef VRAM_FA_EMULATED /* (tests/flash_emulator.h gives these on the CPU) */
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared without passing through registers; `valid` false writes zeros. */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

/* c (16 x 8, fp32) += a (16 x 16) b (16 x 8) on the tensor cores. */
template <typename T> __device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void mma<__nv_bfloat16>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma<__half>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

/* Two floats as one register of two 16-bit elements, the lower column in the low half. */
template <typename T> __device__ __forceinline__ uint32_t pack2(float x, float y);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float x, float y) {
    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *(uint32_t *)&v;
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float x, float y) {
    __half2 v = __floats2half2_rn(x, y);
    return *(uint32_t *)&v;
}

/* Starts copying rows [t0, t0 + 64) of a [.., T, stride] tensor, 64 columns from `src`, into
 * dst [64][LDT]; rows past T read as zeros. */
template <typename T, int NT = THREADS>
__device__ void load_tile_async(T *dst, const T *src, int64_t stride, int64_t t0, int64_t Tn) {
    for (int i = threadIdx.x; i < TILE * (D / 8); i += NT) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        bool ok = t0 + r < Tn;
        cp_async16(dst + r * LDT + c, src + (ok ? t0 + r : 0) * stride + c, ok);
    }
}

/* The warp's 16 rows [row0, row0 + 16) of a tile as A fragments, one per 16-column k-step. */
template <typename T> __device__ void load_a(uint32_t a[4][4], const T *tile, int row0) {
    int l = threadIdx.x & 31;
    for (int k = 0; k < 4; k++) ldsm_x4(a[k], tile + (row0 + (l & 7) + ((l >> 3) & 1) * 8) * LDT + k * 16 + (l >> 4) * 8);
}

/* The A fragments of columns [m0, m0 + 16) of a tile stored [k][m] (the transpose of rows
 * m0.. of a [m][k] tile): ldmatrix's .trans hands each lane the (m, k) pairs load_a would. */
template <typename T> __device__ void load_a_trans(uint32_t a[4][4], const T *tile, int m0) {
    int l = threadIdx.x & 31;
    for (int k = 0; k < 4; k++)
        ldsm_x4_trans(a[k], tile + (k * 16 + (l & 7) + (l >> 4) * 8) * LDT + m0 + ((l >> 3) & 1) * 8);
}

/* s (MT x 16 x 64) = a (MT x 16 x 64) times the tile transposed: the tile is stored [n][k];
 * each B fragment loaded serves the MT row tiles. */
template <typename T, int MT>
__device__ void product_nt_m(float s[MT][8][4], const uint32_t a[MT][4][4], const T *tile) {
    int l = threadIdx.x & 31;
    for (int m = 0; m < MT; m++)
        for (int j = 0; j < 8; j++) s[m][j][0] = s[m][j][1] = s[m][j][2] = s[m][j][3] = 0.0f;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 8; j += 2) {
            uint32_t b[4];
            ldsm_x4(b, tile + (j * 8 + (l & 7) + (l >> 4) * 8) * LDT + k * 16 + ((l >> 3) & 1) * 8);
#pragma unroll
            for (int m = 0; m < MT; m++) {
                mma<T>(s[m][j], a[m][k], b[0], b[1]);
                mma<T>(s[m][j + 1], a[m][k], b[2], b[3]);
            }
        }
}

/* o (MT x 16 x 64) += p (MT x 16 x 64) times the tile, stored [k][n]. */
template <typename T, int MT>
__device__ void product_nn_m(float o[MT][8][4], const uint32_t p[MT][4][4], const T *tile) {
    int l = threadIdx.x & 31;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 8; j += 2) {
            uint32_t b[4];
            ldsm_x4_trans(b, tile + (k * 16 + (l & 7) + ((l >> 3) & 1) * 8) * LDT + j * 8 + (l >> 4) * 8);
#pragma unroll
            for (int m = 0; m < MT; m++) {
                mma<T>(o[m][j], p[m][k], b[0], b[1]);
                mma<T>(o[m][j + 1], p[m][k], b[2], b[3]);
            }
        }
}

/* The same for one row tile. */
template <typename T> __device__ void product_nt(float s[8][4], const uint32_t a[4][4], const T *tile) {
    product_nt_m<T, 1>((float(*)[8][4])s, (const uint32_t(*)[4][4])a, tile);
}
template <typename T> __device__ void product_nn(float o[8][4], const uint32_t p[4][4], const T *tile) {
    product_nn_m<T, 1>((float(*)[8][4])o, (const uint32_t(*)[4][4])p, tile);
}

/* An accumulator (16 x 64) repacked as A fragments: n-tiles 2k and 2k+1 are k-step k. */
template <typename T> __device__ void to_a(uint32_t a[4][4], const float s[8][4]) {
    for (int k = 0; k < 4; k++) {
        a[k][0] = pack2<T>(s[2 * k][0], s[2 * k][1]);
        a[k][1] = pack2<T>(s[2 * k][2], s[2 * k][3]);
        a[k][2] = pack2<T>(s[2 * k + 1][0], s[2 * k + 1][1]);
        a[k][3] = pack2<T>(s[2 * k + 1][2], s[2 * k + 1][3]);
    }
}

/* Writes the warp's accumulator to rows [row0, row0 + 16) of dst (row stride `stride`, rows
 * past T skipped), the upper 8 rows times f1 and the lower 8 times f2. A thread holds rows
 * g and g + 8 and, of each 8-column n-tile, columns 2q and 2q + 1. */
template <typename T> __device__ void store_rows(T *dst, int64_t stride, int64_t row0, int64_t Tn, const float o[8][4],
                                                 float f1, float f2) {
    int l = threadIdx.x & 31, g = l >> 2, q = l & 3;
    for (int j = 0; j < 8; j++) {
        if (row0 + g < Tn) *(uint32_t *)(dst + (row0 + g) * stride + j * 8 + 2 * q) = pack2<T>(o[j][0] * f1, o[j][1] * f1);
        if (row0 + g + 8 < Tn)
            *(uint32_t *)(dst + (row0 + g + 8) * stride + j * 8 + 2 * q) = pack2<T>(o[j][2] * f2, o[j][3] * f2);
    }
}

/* Writes A fragments (16 x 64, as to_a packs them) to rows [row0, row0 + 16) of a tile. */
template <typename T> __device__ void store_a(T *tile, int row0, const uint32_t a[4][4]) {
    int l = threadIdx.x & 31, g = l >> 2, q = l & 3;
    for (int k = 0; k < 4; k++)
        for (int h = 0; h < 2; h++) {
            *(uint32_t *)(tile + (row0 + g) * LDT + (2 * k + h) * 8 + 2 * q) = a[k][2 * h];
            *(uint32_t *)(tile + (row0 + g + 8) * LDT + (2 * k + h) * 8 + 2 * q) = a[k][2 * h + 1];
        }
}

/* Adds the warp's accumulator to rows [row0, row0 + 16) of an fp32 dst (rows past T skipped),
 * two columns an atomic: Hopper adds a float2 in one operation. */
__device__ __forceinline__ void atomic_add2(float *p, float x, float y) {
#if __CUDA_ARCH__ >= 900
    atomicAdd((float2 *)p, make_float2(x, y));
#else
    atomicAdd(p, x);
    atomicAdd(p + 1, y);
#endif
}
__device__ void add_rows(float *dst, int64_t stride, int64_t row0, int64_t Tn, const float o[8][4]) {
    int l = threadIdx.x & 31, g = l >> 2, q = l & 3;
    for (int j = 0; j < 8; j++) {
        if (row0 + g < Tn) atomic_add2(dst + (row0 + g) * stride + j * 8 + 2 * q, o[j][0], o[j][1]);
        if (row0 + g + 8 < Tn) atomic_add2(dst + (row0 + g + 8) * stride + j * 8 + 2 * q, o[j][2], o[j][3]);
    }
}

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

struct shape {
    int64_t B, Tn, H;
};

/* What a block works on: its (batch, head) and its 64-row block; `longest_first` numbers the
 * blocks so that the ones with the most causal work start first across all heads. */
template <typename T> struct block_ctx {
    int64_t blk, nb, bh, b, h, C, stride;
    const T *base;   /* qkv at the block's (batch, head): q at +0, k at +C, v at +2C */
    const T *gbase;  /* the output gradient at (batch, head), [T, C] rows */
    int64_t gqkv_at; /* the element offset of (batch, head) in qkv and gqkv */
    int w, g, q;     /* warp, and the lane's row (g, g + 8) and column pair (2q) in a fragment */
};

template <typename T> __device__ block_ctx<T> block_setup(shape sh, const T *qkv, const T *gout, bool last_first) {
    block_ctx<T> c;
    int64_t BH = sh.B * sh.H;
    c.nb = (sh.Tn + TILE - 1) / TILE;
    c.blk = blockIdx.x / BH, c.bh = blockIdx.x % BH;
    if (last_first) c.blk = c.nb - 1 - c.blk;
    c.b = c.bh / sh.H, c.h = c.bh % sh.H, c.C = sh.H * D, c.stride = 3 * c.C;
    c.gqkv_at = c.b * sh.Tn * c.stride + c.h * D;
    c.base = qkv + c.gqkv_at;
    c.gbase = gout ? gout + c.b * sh.Tn * c.C + c.h * D : nullptr;
    c.w = threadIdx.x >> 5, c.g = (threadIdx.x & 31) >> 2, c.q = threadIdx.x & 3;
    return c;
}

/* Starts the copy of key tile kt's K and V into a stage (K, then V one tile after it). */
template <typename T, int NT = THREADS> __device__ void kv_tile_start(const block_ctx<T> &c, T *stage, int64_t kt, int64_t Tn) {
    load_tile_async<T, NT>(stage, c.base + c.C, c.stride, kt * TILE, Tn);
    load_tile_async<T, NT>(stage + TILE_ELEMS, c.base + 2 * c.C, c.stride, kt * TILE, Tn);
    cp_async_commit();
}

/* Key tile kt of the loop over tiles 0..last: starts the copy of tile kt + 1's K and V into
 * the other stage, then waits until tile kt's have landed (for every thread of the block). */
template <typename T, int NT = THREADS>
__device__ void kv_tile_ready(const block_ctx<T> &c, T *tiles, int64_t kt, int64_t last, int64_t Tn) {
    if (kt < last) {
        kv_tile_start<T, NT>(c, tiles + ((kt + 1) & 1) * 2 * TILE_ELEMS, kt + 1, Tn);
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
    __syncthreads();
}

/* One key tile of the online softmax for a 16-row tile whose first row is `row0`: s (scores)
 * becomes the probabilities against the running max m, which rescales l and o when it grows.
 * The diagonal tile (`diag`) masks the keys after each row. */
template <typename T>
__device__ __forceinline__ void online_softmax(float s[8][4], float m[2], float l[2], float o[8][4], bool diag, int64_t kt,
                                               int64_t row0, const block_ctx<T> &c, float sl2) {
    float mx[2] = {-INFINITY, -INFINITY};
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) {
            float v = s[j][e] * sl2;
            if (diag && kt * TILE + j * 8 + 2 * c.q + (e & 1) > row0 + c.g + (e >> 1) * 8) v = -INFINITY;
            s[j][e] = v;
            mx[e >> 1] = fmaxf(mx[e >> 1], v);
        }
    for (int i = 0; i < 2; i++) {
        float mn = fmaxf(m[i], quad_max(mx[i])); /* finite: a row's own key is never masked */
        float corr = exp2f(m[i] - mn);
        l[i] *= corr;
        for (int j = 0; j < 8; j++) o[j][2 * i] *= corr, o[j][2 * i + 1] *= corr;
        m[i] = mn;
    }
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) {
            float p = exp2f(s[j][e] - m[e >> 1]);
            s[j][e] = p;
            l[e >> 1] += p;
        }
}

/* The forward of one block of 64 query rows: 4 / MT warps of 16 MT rows each (MT = 2: each B
 * fragment of K and V loaded from shared memory serves two row tiles, half the loads a product). */
template <typename T, int MT> __device__ void forward(shape sh, const T *qkv, T *out, float *lse, float scale, char *smem) {
    constexpr int NT = THREADS / MT;
    block_ctx<T> c = block_setup(sh, qkv, (const T *)nullptr, true);
    T *tiles = (T *)smem; /* stage s: K at (2s) and V at (2s + 1) tiles */
    int64_t qb = c.blk, q0 = qb * TILE, row0 = q0 + c.w * 16 * MT, Tn = sh.Tn;
    const float sl2 = scale * LOG2E;

    load_tile_async<T, NT>(tiles + 2 * TILE_ELEMS, c.base, c.stride, q0, Tn); /* Q through stage 1 */
    cp_async_commit();
    kv_tile_start<T, NT>(c, tiles, 0, Tn);
    cp_async_wait<1>();
    __syncthreads();
    uint32_t fq[MT][4][4];
#pragma unroll
    for (int r = 0; r < MT; r++) load_a(fq[r], tiles + 2 * TILE_ELEMS, c.w * 16 * MT + 16 * r);
    __syncthreads();

    float m[MT][2], l[MT][2], o[MT][8][4];
#pragma unroll
    for (int r = 0; r < MT; r++) {
        m[r][0] = m[r][1] = -INFINITY, l[r][0] = l[r][1] = 0.0f;
        for (int j = 0; j < 8; j++) o[r][j][0] = o[r][j][1] = o[r][j][2] = o[r][j][3] = 0.0f;
    }
    for (int64_t kt = 0; kt <= qb; kt++) {
        T *ks = tiles + (kt & 1) * 2 * TILE_ELEMS, *vs = ks + TILE_ELEMS;
        kv_tile_ready<T, NT>(c, tiles, kt, qb, Tn);
        float s[MT][8][4];
        uint32_t pa[MT][4][4];
        product_nt_m<T, MT>(s, fq, ks);
#pragma unroll
        for (int r = 0; r < MT; r++) {
            online_softmax(s[r], m[r], l[r], o[r], kt == qb, kt, row0 + 16 * r, c, sl2);
            to_a<T>(pa[r], s[r]);
        }
        product_nn_m<T, MT>(o, pa, vs);
        __syncthreads(); /* the stage is refilled next iteration */
    }
#pragma unroll
    for (int r = 0; r < MT; r++) {
        for (int i = 0; i < 2; i++) {
            l[r][i] = quad_sum(l[r][i]);
            int64_t row = row0 + 16 * r + c.g + i * 8;
            if (c.q == 0 && row < Tn) lse[c.bh * Tn + row] = (m[r][i] + log2f(l[r][i])) * LN2;
        }
        store_rows(out + c.b * Tn * c.C + c.h * D, c.C, row0 + 16 * r, Tn, o[r], 1.0f / l[r][0], 1.0f / l[r][1]);
    }
}

/* Starts the copy of query tile qt (Q and dO) into stage buffers qs/dos, and loads its lse (in
 * log2 units) and dvec rows, zeros past T. */
template <typename T> __device__ void load_query_tile(const block_ctx<T> &c, shape sh, int64_t qt, T *qs, T *dos,
                                                      float *lse_s, float *dv_s, const float *lse, const float *dvec) {
    int64_t q0 = qt * TILE;
    load_tile_async(qs, c.base, c.stride, q0, sh.Tn);
    load_tile_async(dos, c.gbase, c.C, q0, sh.Tn);
    cp_async_commit();
    for (int i = threadIdx.x; i < TILE; i += THREADS) {
        bool ok = q0 + i < sh.Tn;
        lse_s[i] = ok ? lse[c.bh * sh.Tn + q0 + i] * LOG2E : 0.0f;
        dv_s[i] = ok ? dvec[c.bh * sh.Tn + q0 + i] : 0.0f;
    }
}

/* One query tile of a key block's backward (backward_kv's and backward_fused's loop body): P^T
 * from S^T = K Q^T (masked only on the diagonal tile and the last), dV += P^T dO, dS^T =
 * P^T * (V dO^T - dvec), dK += dS^T Q; leaves dS^T as A fragments in `ds`. */
template <typename T>
__device__ __forceinline__ void key_tile_grads(const block_ctx<T> &c, const uint32_t fk[4][4], const uint32_t fv[4][4],
                                               const T *qs, const T *dos, const float *lse_s, const float *dv_s,
                                               int64_t qt, int64_t kb, int64_t Tn, float sl2, float dk[8][4],
                                               float dv[8][4], uint32_t ds[4][4]) {
    int64_t krow0 = kb * TILE + c.w * 16;
    float s[8][4], dp[8][4];
    product_nt<T>(s, fk, qs); /* S^T: keys x queries */
    if (qt == kb || (qt + 1) * TILE > Tn) {
        for (int j = 0; j < 8; j++)
            for (int e = 0; e < 4; e++) {
                int col = j * 8 + 2 * c.q + (e & 1);
                int64_t qi = qt * TILE + col, kj = krow0 + c.g + (e >> 1) * 8;
                s[j][e] = kj <= qi && qi < Tn ? exp2f(s[j][e] * sl2 - lse_s[col]) : 0.0f;
            }
    } else {
        for (int j = 0; j < 8; j++)
            for (int e = 0; e < 4; e++) s[j][e] = exp2f(s[j][e] * sl2 - lse_s[j * 8 + 2 * c.q + (e & 1)]);
    }
    to_a<T>(ds, s);
    product_nn<T>(dv, ds, dos); /* dV += P^T dO */
    product_nt<T>(dp, fv, dos); /* dP^T = V dO^T */
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) dp[j][e] = s[j][e] * (dp[j][e] - dv_s[j * 8 + 2 * c.q + (e & 1)]);
    to_a<T>(ds, dp);
    product_nn<T>(dk, ds, qs); /* dK += dS^T Q (scaled when stored) */
}

/* dK and dV of one block of 64 keys, over the query tiles at or after it. */
template <typename T> __device__ void backward_kv(shape sh, const T *qkv, const T *gout, const float *lse,
                                                  const float *dvec, T *gqkv, float scale, char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, gout, false);
    T *tiles = (T *)smem; /* stage s: Q at (2s) and dO at (2s + 1) tiles */
    float *rows = (float *)(tiles + STAGES * 2 * TILE_ELEMS); /* stage s: lse at (2s), dvec at (2s + 1) */
    int64_t kb = c.blk, k0 = kb * TILE, krow0 = k0 + c.w * 16, Tn = sh.Tn, nq = c.nb;
    const float sl2 = scale * LOG2E;

    load_tile_async(tiles + 2 * TILE_ELEMS, c.base + c.C, c.stride, k0, Tn); /* K and V through stage 1 */
    load_tile_async(tiles + 3 * TILE_ELEMS, c.base + 2 * c.C, c.stride, k0, Tn);
    cp_async_commit();
    load_query_tile(c, sh, kb, tiles, tiles + TILE_ELEMS, rows, rows + TILE, lse, dvec);
    cp_async_wait<1>();
    __syncthreads();
    uint32_t fk[4][4], fv[4][4];
    load_a(fk, tiles + 2 * TILE_ELEMS, c.w * 16);
    load_a(fv, tiles + 3 * TILE_ELEMS, c.w * 16);
    __syncthreads();

    float dk[8][4], dv[8][4];
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.0f;
    for (int64_t qt = kb; qt < nq; qt++) {
        int st = (int)((qt - kb) & 1);
        T *qs = tiles + st * 2 * TILE_ELEMS, *dos = qs + TILE_ELEMS;
        const float *lse_s = rows + st * 2 * TILE, *dv_s = lse_s + TILE;
        if (qt + 1 < nq) {
            T *next = tiles + (st ^ 1) * 2 * TILE_ELEMS;
            float *next_rows = rows + (st ^ 1) * 2 * TILE;
            load_query_tile(c, sh, qt + 1, next, next + TILE_ELEMS, next_rows, next_rows + TILE, lse, dvec);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        uint32_t ds[4][4];
        key_tile_grads(c, fk, fv, qs, dos, lse_s, dv_s, qt, kb, Tn, sl2, dk, dv, ds);
        __syncthreads();
    }
    T *gb = gqkv + c.gqkv_at;
    store_rows(gb + c.C, c.stride, krow0, Tn, dk, scale, scale);
    store_rows(gb + 2 * c.C, c.stride, krow0, Tn, dv, 1.0f, 1.0f);
}

/* FlashAttention-2's one-pass backward: dK and dV of one block of 64 keys as backward_kv, and
 * each query tile's share of dQ (dS K over this block's keys) added into dq_acc [B, T, C]
 * (fp32, zeroed, unscaled). Each iteration's dS^T goes through shared memory, into the dO
 * buffer it no longer needs, so that the warps can take it by query rows: warp w multiplies
 * queries [16w, 16w + 16) of dS by the block's K (kept in shared memory) and adds the result. */
template <typename T> __device__ void backward_fused(shape sh, const T *qkv, const T *gout, const float *lse,
                                                     const float *dvec, T *gqkv, float *dq_acc, float scale,
                                                     char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, gout, false);
    T *tiles = (T *)smem, *ks = tiles + 4 * TILE_ELEMS; /* stage s: Q at (2s), dO at (2s + 1); K at 4 */
    float *rows = (float *)(tiles + 5 * TILE_ELEMS);    /* stage s: lse at (2s), dvec at (2s + 1) */
    int64_t kb = c.blk, k0 = kb * TILE, krow0 = k0 + c.w * 16, Tn = sh.Tn, nq = c.nb;
    const float sl2 = scale * LOG2E;
    float *dq_at = dq_acc + c.b * Tn * c.C + c.h * D;

    load_tile_async(ks, c.base + c.C, c.stride, k0, Tn); /* K to its place, V through stage 1 */
    load_tile_async(tiles + 2 * TILE_ELEMS, c.base + 2 * c.C, c.stride, k0, Tn);
    cp_async_commit();
    load_query_tile(c, sh, kb, tiles, tiles + TILE_ELEMS, rows, rows + TILE, lse, dvec);
    cp_async_wait<1>();
    __syncthreads();
    uint32_t fv[4][4];
    load_a(fv, tiles + 2 * TILE_ELEMS, c.w * 16);

    float dk[8][4], dv[8][4];
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.0f;
    for (int64_t qt = kb; qt < nq; qt++) {
        int st = (int)((qt - kb) & 1);
        T *qs = tiles + st * 2 * TILE_ELEMS, *dos = qs + TILE_ELEMS;
        const float *lse_s = rows + st * 2 * TILE, *dv_s = lse_s + TILE;
        cp_async_wait<0>();
        __syncthreads(); /* tile qt has landed, and every warp is done with the other stage */
        if (qt + 1 < nq) {
            T *next = tiles + (st ^ 1) * 2 * TILE_ELEMS;
            float *next_rows = rows + (st ^ 1) * 2 * TILE;
            load_query_tile(c, sh, qt + 1, next, next + TILE_ELEMS, next_rows, next_rows + TILE, lse, dvec);
        }
        uint32_t fk[4][4], a[4][4];
        load_a(fk, ks, c.w * 16); /* the warp's K rows (read again each tile: fewer registers held) */
        key_tile_grads(c, fk, fv, qs, dos, lse_s, dv_s, qt, kb, Tn, sl2, dk, dv, a);
        __syncthreads(); /* every warp is done reading dO: its buffer takes dS^T */
        store_a<T>(dos, c.w * 16, a);
        __syncthreads();
        float dq[8][4];
        for (int j = 0; j < 8; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
        load_a_trans(a, dos, c.w * 16); /* dS for the warp's 16 queries, all 64 keys */
        product_nn<T>(dq, a, ks);        /* dQ (this key block's share) = dS K */
        add_rows(dq_at, c.C, qt * TILE + c.w * 16, Tn, dq);
    }
    T *gb = gqkv + c.gqkv_at;
    store_rows(gb + c.C, c.stride, krow0, Tn, dk, scale, scale);
    store_rows(gb + 2 * c.C, c.stride, krow0, Tn, dv, 1.0f, 1.0f);
}

/* One key tile's share of a warp's 16 dQ rows: S = Q K^T and dP = dO V^T on the tile, P
 * recomputed from the rows' lse (masked past the diagonal and the sequence's end), dS = P (dP -
 * dvec), dQ += dS K. The split dQ kernels over 64 and 128 queries share it, so that their dQ
 * comes out in the same bits. */
template <typename T>
__device__ __forceinline__ void dq_tile(float dq[8][4], const uint32_t fq[4][4], const uint32_t fdo[4][4], const T *ks,
                                        const T *vs, int64_t kt, int64_t row0, const block_ctx<T> &c, float sl2,
                                        const float row_lse[2], const float row_dv[2], int64_t Tn) {
    float s[8][4], dp[8][4];
    uint32_t a[4][4];
    product_nt<T>(s, fq, ks);   /* S = Q K^T */
    product_nt<T>(dp, fdo, vs); /* dP = dO V^T */
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) {
            int i = e >> 1;
            int64_t key = kt * TILE + j * 8 + 2 * c.q + (e & 1), row = row0 + c.g + i * 8;
            float p = key <= row && row < Tn ? exp2f(s[j][e] * sl2 - row_lse[i]) : 0.0f;
            s[j][e] = p * (dp[j][e] - row_dv[i]);
        }
    to_a<T>(a, s);
    product_nn<T>(dq, a, ks); /* dQ += dS K (scaled when stored) */
}

/* dQ of one block of 64 queries, over the key tiles at or before it. */
template <typename T> __device__ void backward_q(shape sh, const T *qkv, const T *gout, const float *lse,
                                                 const float *dvec, T *gqkv, float scale, char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, gout, true);
    T *tiles = (T *)smem; /* stage s: K at (2s) and V at (2s + 1) tiles */
    int64_t qb = c.blk, q0 = qb * TILE, row0 = q0 + c.w * 16, Tn = sh.Tn;
    const float sl2 = scale * LOG2E;
    float row_lse[2], row_dv[2];
    for (int i = 0; i < 2; i++) {
        int64_t row = row0 + c.g + i * 8;
        row_lse[i] = row < Tn ? lse[c.bh * Tn + row] * LOG2E : 0.0f;
        row_dv[i] = row < Tn ? dvec[c.bh * Tn + row] : 0.0f;
    }

    load_tile_async(tiles + 2 * TILE_ELEMS, c.base, c.stride, q0, Tn); /* Q and dO through stage 1 */
    load_tile_async(tiles + 3 * TILE_ELEMS, c.gbase, c.C, q0, Tn);
    cp_async_commit();
    kv_tile_start(c, tiles, 0, Tn);
    cp_async_wait<1>();
    __syncthreads();
    uint32_t fq[4][4], fdo[4][4];
    load_a(fq, tiles + 2 * TILE_ELEMS, c.w * 16);
    load_a(fdo, tiles + 3 * TILE_ELEMS, c.w * 16);
    __syncthreads();

    float dq[8][4];
    for (int j = 0; j < 8; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
    for (int64_t kt = 0; kt <= qb; kt++) {
        T *ks = tiles + (kt & 1) * 2 * TILE_ELEMS, *vs = ks + TILE_ELEMS;
        kv_tile_ready(c, tiles, kt, qb, Tn);
        dq_tile<T>(dq, fq, fdo, ks, vs, kt, row0, c, sl2, row_lse, row_dv, Tn);
        __syncthreads();
    }
    store_rows(gqkv + c.gqkv_at, c.stride, row0, Tn, dq, scale, scale);
}

} /* namespace fa */

/* `call` with T the kernel's 16-bit type, bf16 or f16 by dt. */
#define FA_TYPED(dt, call)                                                                         \
    do {                                                                                           \
        if ((dt) == VK_BF16) {                                                                     \
            typedef __nv_bfloat16 T;                                                               \
            call;                                                                                  \
        } else {                                                                                   \
            typedef __half T;                                                                      \
            call;                                                                                  \
        }                                                                                          \
    } while (0)

/* The same, with `bytes` of static shared memory named smem. */
#define FA_DISPATCH(dt, bytes, call)                                                               \
    do {                                                                                           \
        __shared__ __align__(128) char smem[bytes];                                                \
        FA_TYPED(dt, call);                                                                        \
    } while (0)

/* Grid: ceil(T / 64) * B * H blocks of 128 threads (the same for the backward kernels). */
extern "C" __global__ void __launch_bounds__(fa::THREADS) vk_flash_forward(int dt, int64_t B, int64_t Tn, int64_t H,
                                                                           const char *qkv, char *out, float *lse,
                                                                           float scale) {
    FA_DISPATCH(dt, fa::SMEM_BYTES, (fa::forward<T, 1>({B, Tn, H}, (const T *)qkv, (T *)out, lse, scale, smem)));
}

/* The same with 2 warps of 32 rows (64 threads a block). */
extern "C" __global__ void __launch_bounds__(fa::THREADS / 2) vk_flash_forward32(int dt, int64_t B, int64_t Tn, int64_t H,
                                                                                const char *qkv, char *out, float *lse,
                                                                                float scale) {
    FA_DISPATCH(dt, fa::SMEM_BYTES, (fa::forward<T, 2>({B, Tn, H}, (const T *)qkv, (T *)out, lse, scale, smem)));
}

/* dvec[b, h, t] = sum over d of dO * O, both [B, T, C]: one warp a row. dq_zero, when not
 * null, is the fused backward's [B, T, C] fp32 accumulator, zeroed here on the way. */
extern "C" __global__ void vk_flash_dot(int dt, int64_t B, int64_t Tn, int64_t H, const char *gout, const char *out,
                                        float *dvec, float *dq_zero) {
    int lane = threadIdx.x & 31;
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5, warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t row = warp; row < B * H * Tn; row += warps) {
        int64_t t = row % Tn, bh = row / Tn, b = bh / H, h = bh % H, at = (b * Tn + t) * H * fa::D + h * fa::D;
        float acc = 0;
        DISPATCH_ALL(dt, { /* two neighbouring elements a lane: one 32-bit load each in 16 bits */
            const T *gp = (const T *)gout + at + 2 * lane, *op = (const T *)out + at + 2 * lane;
            T g2[2], o2[2];
            if (sizeof(T) == 2) {
                uint32_t gv = *(const uint32_t *)gp, ov = *(const uint32_t *)op;
                memcpy(g2, &gv, 4), memcpy(o2, &ov, 4);
            } else {
                g2[0] = gp[0], g2[1] = gp[1], o2[0] = op[0], o2[1] = op[1];
            }
            acc = (float)g2[0] * (float)o2[0] + (float)g2[1] * (float)o2[1];
        });
        acc = warp_sum(acc);
        if (lane == 0) dvec[row] = acc;
        if (dq_zero) dq_zero[at + lane] = dq_zero[at + lane + 32] = 0.0f;
    }
}

extern "C" __global__ void __launch_bounds__(fa::THREADS)
    vk_flash_backward_kv(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout, const float *lse,
                         const float *dvec, char *gqkv, float scale) {
    FA_DISPATCH(dt, fa::SMEM_BYTES, fa::backward_kv<T>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv, scale, smem));
}

extern "C" __global__ void __launch_bounds__(fa::THREADS)
    vk_flash_backward_q(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout, const float *lse,
                        const float *dvec, char *gqkv, float scale) {
    FA_DISPATCH(dt, fa::SMEM_BYTES, fa::backward_q<T>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv, scale, smem));
}

/* Grid: ceil(T / 64) * B * H blocks of 128 threads, one per key block; dq_acc as vk_flash_dot
 * leaves it (zeroed). vk_flash_backward3 is the same kernel held to 168 registers a thread so
 * that three blocks share an SM instead of two (at the price of a few spilled values). */
#define FA_BACKWARD_FUSED                                                                           \
    FA_DISPATCH(dt, fa::SMEM_FUSED_BYTES,                                                         \
                fa::backward_fused<T>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv, dq_acc, scale, smem))
extern "C" __global__ void __launch_bounds__(fa::THREADS)
    vk_flash_backward(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout, const float *lse,
                      const float *dvec, char *gqkv, float *dq_acc, float scale) {
    FA_BACKWARD_FUSED;
}
extern "C" __global__ void __launch_bounds__(fa::THREADS, 3)
    vk_flash_backward3(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout, const float *lse,
                       const float *dvec, char *gqkv, float *dq_acc, float scale) {
    FA_BACKWARD_FUSED;
}

/* The q third of gqkv [B, T, 3C] = scale * dq_acc [B, T, C] in 16 bits, four elements a thread
 * (C is a multiple of 64). */
extern "C" __global__ void vk_flash_dq(int dt, int64_t B, int64_t Tn, int64_t H, const float *dq_acc, char *gqkv,
                                       float scale) {
    int64_t C = H * fa::D, n4 = B * Tn * C / 4;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = 4 * i, bt = e / C, col = e % C;
        float4 v = *(const float4 *)(dq_acc + e);
        uint32_t lo, hi;
        if (dt == VK_BF16) {
            lo = fa::pack2<__nv_bfloat16>(v.x * scale, v.y * scale), hi = fa::pack2<__nv_bfloat16>(v.z * scale, v.w * scale);
        } else {
            lo = fa::pack2<__half>(v.x * scale, v.y * scale), hi = fa::pack2<__half>(v.z * scale, v.w * scale);
        }
        *(uint2 *)(gqkv + (bt * 3 * C + col) * 2) = make_uint2(lo, hi);
    }
}
