/* cuda_flash_backward128.cuh — flash attention's backward over blocks of 128 keys (8 warps a
 * block), the forms VRAM_FLASH_BWD=fused128, fused128p and split128 (included by
 * cuda_kernels.cu after cuda_flash_attention.cuh, whose fragments, tiles and helpers it uses).
 *
 * One block owns 128 keys of one (batch, head); warp w owns keys [16w, 16w + 16) of them and
 * loops over the 64-row query tiles at or after the block's first key, as the 64-key forms do
 * (S^T = K Q^T, P^T from lse, dV += P^T dO, dP^T = V dO^T, dS^T, dK += dS^T Q, all in
 * registers). Twice the keys a block means each Q and dO tile brought from memory, and each
 * tile's dQ share added atomically, serves twice the products of the 64-key forms. Every
 * query tile's Q, dO, lse and dvec arrive by cp.async one tile ahead (lse and dvec included,
 * four bytes a copy, so no thread waits on a plain global load).
 *
 * fused128 (vk_flash_backward128) also adds dQ: each warp stores its dS^T (16 keys x 64
 * queries) into a shared buffer of its own rows, and after one barrier warp w multiplies
 * queries [16(w % 4), +16) of dS, over all 128 keys, by K's columns [32(w / 4), +32) and adds
 * the result into the fp32 accumulator four floats an atomic (neighbouring lanes swap halves
 * so that each holds four adjacent columns of one row). Two barriers an iteration: one before
 * the tile (it has landed, and every warp is done with the last iteration's buffers) and one
 * between storing dS^T and reading it. fused128p (vk_flash_backward128p) stores each tile's
 * dS^T into one of two buffers and multiplies the previous tile's after the next iteration's
 * first barrier, which is then the only one. split128 (vk_flash_backward128_kv) is the same kernel
 * without dQ, then a dQ kernel per 128 queries (vk_flash_backward128_q: backward_q's warps,
 * 8 of them sharing each K and V tile): deterministic. Shared memory (dynamic, over 48 KiB):
 * K and the dS^T buffer(s) (128 padded rows each), two stages of Q and dO tiles, two stages of
 * lse and dvec rows; the dQ kernel's two stages of K and V tiles and its 128 Q and dO rows.
 */

namespace fa {

constexpr int KB = 128, WARPS8 = KB / 16, THREADS8 = WARPS8 * 32;
constexpr int KB_ELEMS = KB * LDT; /* 128 padded rows of 16-bit elements */
constexpr int SMEM128_BYTES = 2 * KB_ELEMS * 2 + STAGES * 2 * TILE_ELEMS * 2 + STAGES * 2 * TILE * 4;
constexpr int SMEM128P_BYTES = SMEM128_BYTES + KB_ELEMS * 2; /* + a second dS^T buffer */
static_assert(SMEM128_BYTES == VK_FLASH128_SMEM, "cuda_abi.h's VK_FLASH128_SMEM is the 128-key backward's shared memory");
static_assert(SMEM128P_BYTES == VK_FLASH128P_SMEM, "cuda_abi.h's VK_FLASH128P_SMEM: the same with two dS^T buffers");
static_assert(2 * STAGES * TILE_ELEMS * 2 + 2 * KB_ELEMS * 2 <= SMEM128_BYTES, "the dQ kernel's tiles fit the same");

#ifndef VRAM_FA_EMULATED
/* 4 bytes global -> shared, through L1 (cp.async's 16-byte .cg form needs 16-byte alignment,
 * which a row of lse at an odd T lacks); `valid` false writes zeros. */
__device__ __forceinline__ void cp_async4(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 4 : 0));
}
#define FA_DYN_SMEM(name, bytes) extern __shared__ __align__(128) char name[]
#else
#define FA_DYN_SMEM(name, bytes) static __align__(128) char name[bytes]
#endif

/* Adds four floats to p (16-byte aligned): one operation on Hopper. */
__device__ __forceinline__ void atomic_add4(float *p, float x, float y, float z, float w) {
#if __CUDA_ARCH__ >= 900
    atomicAdd((float4 *)p, make_float4(x, y, z, w));
#else
    atomicAdd(p, x);
    atomicAdd(p + 1, y);
    atomicAdd(p + 2, z);
    atomicAdd(p + 3, w);
#endif
}

/* Starts the copy of query tile qt (Q and dO) into stage buffers qs/dos and of its lse and
 * dvec rows into lse_s/dv_s (zeros past T), as one cp.async group. */
template <typename T> __device__ void query_tile_start128(const block_ctx<T> &c, shape sh, int64_t qt, T *qs, T *dos,
                                                         float *lse_s, float *dv_s, const float *lse, const float *dvec) {
    int64_t q0 = qt * TILE;
    load_tile_async<T, THREADS8>(qs, c.base, c.stride, q0, sh.Tn);
    load_tile_async<T, THREADS8>(dos, c.gbase, c.C, q0, sh.Tn);
    int i = threadIdx.x & (TILE - 1);
    bool ok = q0 + i < sh.Tn;
    int64_t at = c.bh * sh.Tn + (ok ? q0 + i : 0);
    if (threadIdx.x < TILE) cp_async4(lse_s + i, lse + at, ok);
    else if (threadIdx.x < 2 * TILE) cp_async4(dv_s + i, dvec + at, ok);
    cp_async_commit();
}

/* One query tile of a warp's 16 keys (first key krow0): P^T from S^T = K Q^T and lse (natural
 * log, scaled to log2 here), dV += P^T dO, dS^T = P^T * (V dO^T - dvec), dK += dS^T Q; leaves
 * dS^T as A fragments in `ds`. `mask`: some key of the warp is after some query of the tile,
 * or the tile runs past T. */
template <typename T>
__device__ __forceinline__ void key_tile_grads128(const block_ctx<T> &c, const uint32_t fk[4][4], const uint32_t fv[4][4],
                                                  const T *qs, const T *dos, const float *lse_s, const float *dv_s,
                                                  int64_t qt, int64_t krow0, int64_t Tn, bool mask, float sl2,
                                                  float dk[8][4], float dv[8][4], uint32_t ds[4][4]) {
    float s[8][4], dp[8][4];
    product_nt<T>(s, fk, qs); /* S^T: keys x queries */
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) {
            int col = j * 8 + 2 * c.q + (e & 1);
            float p = exp2f(fmaf(s[j][e], sl2, -LOG2E * lse_s[col]));
            if (mask) {
                int64_t qi = qt * TILE + col, kj = krow0 + c.g + (e >> 1) * 8;
                p = kj <= qi && qi < Tn ? p : 0.0f;
            }
            s[j][e] = p;
        }
    to_a<T>(ds, s);
    product_nn<T>(dv, ds, dos); /* dV += P^T dO */
    product_nt<T>(dp, fv, dos); /* dP^T = V dO^T */
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) dp[j][e] = s[j][e] * (dp[j][e] - dv_s[j * 8 + 2 * c.q + (e & 1)]);
    to_a<T>(ds, dp);
    product_nn<T>(dk, ds, qs); /* dK += dS^T Q (scaled when stored) */
}

/* dQ's share of one query tile from this block's 128 keys: queries [16(w % 4), +16) of dS (the
 * transpose of dst, stored [key][query]) times K's columns [32(w / 4), +32), added into dq_at
 * (rows past T skipped). */
template <typename T> __device__ void tile_dq128(const block_ctx<T> &c, const T *dst, const T *ks, float *dq_at,
                                                 int64_t qt, int64_t Tn) {
    int l = threadIdx.x & 31, m0 = (c.w & 3) * 16, n0 = (c.w >> 2) * 32;
    float dq[4][4];
    for (int j = 0; j < 4; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
    for (int k = 0; k < KB / 16; k++) {
        uint32_t a[4], b[4];
        ldsm_x4_trans(a, dst + (k * 16 + (l & 7) + (l >> 4) * 8) * LDT + m0 + ((l >> 3) & 1) * 8);
        for (int j = 0; j < 4; j += 2) {
            ldsm_x4_trans(b, ks + (k * 16 + (l & 7) + ((l >> 3) & 1) * 8) * LDT + n0 + j * 8 + (l >> 4) * 8);
            mma<T>(dq[j], a, b[0], b[1]);
            mma<T>(dq[j + 1], a, b[2], b[3]);
        }
    }
    /* lanes q and q ^ 1 swap halves: the even one takes row g's four columns, the odd row g + 8's */
    bool odd = c.q & 1;
    int64_t row = qt * TILE + m0 + c.g + (odd ? 8 : 0);
    for (int j = 0; j < 4; j++) {
        float s0 = odd ? dq[j][0] : dq[j][2], s1 = odd ? dq[j][1] : dq[j][3];
        float r0 = __shfl_xor_sync(0xffffffffu, s0, 1), r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
        float *p = dq_at + row * c.C + n0 + j * 8 + 2 * (c.q & ~1);
        if (row < Tn) {
            if (odd) atomic_add4(p, r0, r1, dq[j][2], dq[j][3]);
            else atomic_add4(p, dq[j][0], dq[j][1], r0, r1);
        }
    }
}

/* dK and dV of one block of 128 keys over the query tiles from its first key on, and, with DQ,
 * each tile's dQ share added into dq_acc [B, T, C] (fp32, zeroed, unscaled): DQ_SYNC after a
 * barrier in the tile's own iteration, DQ_BEHIND one iteration later (two dS^T buffers, so
 * the barrier that starts an iteration is the only one). */
enum { DQ_NONE, DQ_SYNC, DQ_BEHIND };
template <typename T, int DQ>
__device__ void backward128(shape sh, const T *qkv, const T *gout, const float *lse, const float *dvec, T *gqkv,
                            float *dq_acc, float scale, char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, gout, false);
    c.nb = (sh.Tn + KB - 1) / KB, c.blk = blockIdx.x / (sh.B * sh.H); /* 128-key blocks, longest loop first */
    constexpr int NDS = DQ == DQ_BEHIND ? 2 : 1; /* dS^T buffers */
    T *ks = (T *)smem, *dst = ks + KB_ELEMS, *tiles = dst + NDS * KB_ELEMS; /* stage s: Q at (2s), dO at (2s + 1) */
    float *rows = (float *)(tiles + STAGES * 2 * TILE_ELEMS);          /* stage s: lse at (2s), dvec at (2s + 1) */
    int64_t k0 = c.blk * KB, krow0 = k0 + c.w * 16, Tn = sh.Tn, nq = (Tn + TILE - 1) / TILE, q_first = k0 / TILE;
    const float sl2 = scale * LOG2E;
    float *dq_at = DQ != DQ_NONE ? dq_acc + c.b * Tn * c.C + c.h * D : nullptr;

    for (int half = 0; half < 2; half++) { /* K to its place, V through the dS^T buffer */
        load_tile_async<T, THREADS8>(ks + half * TILE_ELEMS, c.base + c.C, c.stride, k0 + half * TILE, Tn);
        load_tile_async<T, THREADS8>(dst + half * TILE_ELEMS, c.base + 2 * c.C, c.stride, k0 + half * TILE, Tn);
    }
    cp_async_commit();
    query_tile_start128(c, sh, q_first, tiles, tiles + TILE_ELEMS, rows, rows + TILE, lse, dvec);
    cp_async_wait<1>();
    __syncthreads();
    uint32_t fv[4][4];
    load_a(fv, dst, c.w * 16); /* (the first iteration's barrier comes before dS^T overwrites V) */

    float dk[8][4], dv[8][4];
    for (int j = 0; j < 8; j++)
        for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.0f;
    for (int64_t qt = q_first; qt < nq; qt++) {
        int st = (int)((qt - q_first) & 1);
        T *qs = tiles + st * 2 * TILE_ELEMS, *dos = qs + TILE_ELEMS;
        const float *lse_s = rows + st * 2 * TILE, *dv_s = lse_s + TILE;
        cp_async_wait<0>();
        __syncthreads(); /* tile qt has landed, and every warp is done with the other stage and dS^T */
        if (qt + 1 < nq) {
            T *next = tiles + (st ^ 1) * 2 * TILE_ELEMS;
            float *next_rows = rows + (st ^ 1) * 2 * TILE;
            query_tile_start128(c, sh, qt + 1, next, next + TILE_ELEMS, next_rows, next_rows + TILE, lse, dvec);
        }
        uint32_t fk[4][4], a[4][4];
        if (krow0 < (qt + 1) * TILE) {
            load_a(fk, ks, c.w * 16); /* the warp's K rows (read again each tile: fewer registers held) */
            bool mask = krow0 + 15 > qt * TILE || (qt + 1) * TILE > Tn;
            key_tile_grads128(c, fk, fv, qs, dos, lse_s, dv_s, qt, krow0, Tn, mask, sl2, dk, dv, a);
        } else { /* every key of the warp after every query of the tile: P and dS are 0 */
            for (int k = 0; k < 4; k++) a[k][0] = a[k][1] = a[k][2] = a[k][3] = 0u;
        }
        if (DQ == DQ_SYNC) {
            store_a<T>(dst, c.w * 16, a);
            __syncthreads(); /* every warp's dS^T rows are in place */
            tile_dq128(c, dst, ks, dq_at, qt, Tn);
        } else if (DQ == DQ_BEHIND) { /* the last tile's dS^T is complete since this iteration's barrier */
            store_a<T>(dst + st * KB_ELEMS, c.w * 16, a);
            if (qt > q_first) tile_dq128(c, dst + (st ^ 1) * KB_ELEMS, ks, dq_at, qt - 1, Tn);
        }
    }
    if (DQ == DQ_BEHIND) {
        __syncthreads();
        tile_dq128(c, dst + ((nq - 1 - q_first) & 1) * KB_ELEMS, ks, dq_at, nq - 1, Tn);
    }
    T *gb = gqkv + c.gqkv_at;
    store_rows(gb + c.C, c.stride, krow0, Tn, dk, scale, scale);
    store_rows(gb + 2 * c.C, c.stride, krow0, Tn, dv, 1.0f, 1.0f);
}

/* dQ of one block of 128 queries (warp w: rows [16w, 16w + 16)), over the 64-key tiles at or
 * before its last row, K and V double-buffered: each tile brought in serves 8 warps. A warp
 * whose rows all come before a tile skips it (its products would add zeros), so every row
 * sees the same products in the same order as in backward_q: the same bits. */
template <typename T> __device__ void backward_q128(shape sh, const T *qkv, const T *gout, const float *lse,
                                                    const float *dvec, T *gqkv, float scale, char *smem) {
    block_ctx<T> c = block_setup(sh, qkv, gout, false);
    c.nb = (sh.Tn + KB - 1) / KB, c.blk = c.nb - 1 - (int64_t)blockIdx.x / (sh.B * sh.H); /* longest loop first */
    T *tiles = (T *)smem, *qs = tiles + 2 * STAGES * TILE_ELEMS, *dos = qs + KB_ELEMS; /* stage s: K, V at (2s), (2s + 1) */
    int64_t q0 = c.blk * KB, row0 = q0 + c.w * 16, Tn = sh.Tn, last = ((q0 + KB < Tn ? q0 + KB : Tn) - 1) / TILE;
    const float sl2 = scale * LOG2E;
    float row_lse[2], row_dv[2];
    for (int i = 0; i < 2; i++) {
        int64_t row = row0 + c.g + i * 8;
        row_lse[i] = row < Tn ? lse[c.bh * Tn + row] * LOG2E : 0.0f;
        row_dv[i] = row < Tn ? dvec[c.bh * Tn + row] : 0.0f;
    }

    for (int half = 0; half < 2; half++) {
        load_tile_async<T, THREADS8>(qs + half * TILE_ELEMS, c.base, c.stride, q0 + half * TILE, Tn);
        load_tile_async<T, THREADS8>(dos + half * TILE_ELEMS, c.gbase, c.C, q0 + half * TILE, Tn);
    }
    cp_async_commit();
    kv_tile_start<T, THREADS8>(c, tiles, 0, Tn);
    cp_async_wait<1>();
    __syncthreads();
    uint32_t fq[4][4], fdo[4][4];
    load_a(fq, qs, c.w * 16);
    load_a(fdo, dos, c.w * 16);

    float dq[8][4];
    for (int j = 0; j < 8; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
    for (int64_t kt = 0; kt <= last; kt++) {
        T *ks = tiles + (kt & 1) * 2 * TILE_ELEMS, *vs = ks + TILE_ELEMS;
        kv_tile_ready<T, THREADS8>(c, tiles, kt, last, Tn);
        if (kt * TILE <= row0 + 15) dq_tile<T>(dq, fq, fdo, ks, vs, kt, row0, c, sl2, row_lse, row_dv, Tn);
        __syncthreads(); /* the stage is refilled next iteration */
    }
    store_rows(gqkv + c.gqkv_at, c.stride, row0, Tn, dq, scale, scale);
}

} /* namespace fa */

/* FA_DISPATCH with the shared memory granted at launch (dynamic). */
#define FA_DISPATCH_DYN(dt, bytes, call)                                                           \
    do {                                                                                           \
        FA_DYN_SMEM(smem, bytes);                                                                  \
        FA_TYPED(dt, call);                                                                        \
    } while (0)

/* Grid: ceil(T / 128) * B * H blocks of 256 threads with VK_FLASH128_SMEM bytes of dynamic
 * shared memory, one per 128 keys; dq_acc as vk_flash_dot leaves it (zeroed). */
extern "C" __global__ void __launch_bounds__(fa::THREADS8)
    vk_flash_backward128(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout, const float *lse,
                         const float *dvec, char *gqkv, float *dq_acc, float scale) {
    FA_DISPATCH_DYN(dt, fa::SMEM128_BYTES,
                    (fa::backward128<T, fa::DQ_SYNC>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv,
                                                     dq_acc, scale, smem)));
}

/* fused128p: the same grid with VK_FLASH128P_SMEM bytes; each tile's dQ one iteration behind
 * its dS^T (one barrier an iteration instead of two). */
extern "C" __global__ void __launch_bounds__(fa::THREADS8)
    vk_flash_backward128p(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout,
                          const float *lse, const float *dvec, char *gqkv, float *dq_acc, float scale) {
    FA_DISPATCH_DYN(dt, fa::SMEM128P_BYTES,
                    (fa::backward128<T, fa::DQ_BEHIND>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec,
                                                       (T *)gqkv, dq_acc, scale, smem)));
}

/* The same grid (VK_FLASH128_SMEM bytes); dK and dV only (split128's first kernel). */
extern "C" __global__ void __launch_bounds__(fa::THREADS8)
    vk_flash_backward128_kv(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout,
                            const float *lse, const float *dvec, char *gqkv, float scale) {
    FA_DISPATCH_DYN(dt, fa::SMEM128_BYTES,
                    (fa::backward128<T, fa::DQ_NONE>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv,
                                                     nullptr, scale, smem)));
}

/* split128's second kernel: the same grid (a block per 128 queries), dQ only. */
extern "C" __global__ void __launch_bounds__(fa::THREADS8)
    vk_flash_backward128_q(int dt, int64_t B, int64_t Tn, int64_t H, const char *qkv, const char *gout,
                           const float *lse, const float *dvec, char *gqkv, float scale) {
    FA_DISPATCH_DYN(dt, fa::SMEM128_BYTES,
                    (fa::backward_q128<T>({B, Tn, H}, (const T *)qkv, (const T *)gout, lse, dvec, (T *)gqkv, scale, smem)));
}
