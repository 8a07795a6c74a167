/* cpu_matmul.c — the CPU matrix product: a cache-blocked f32 kernel (GotoBLAS loop order) with
 * a 6x16 register tile, threaded with pthreads; a plain loop for f64 (gradient checks).
 *
 * Blocking: for each NC-wide column block of B and KC-deep slice of K, B is packed into
 * 16-column strips (k-major) that stay in L2; for each MC-high row block of A, A is packed
 * into 6-row strips (k-major) that stay in L1, unless its rows are contiguous, when the kernel
 * reads it in place; the micro-kernel then keeps a 6x16 tile of C in
 * twelve 8-float vector registers while it walks K. Packing also absorbs any strides (a
 * transposed operand costs nothing extra). Edge tiles go through a small local buffer.
 * The micro-kernel is compiled twice (AVX2+FMA and baseline) and picked on first use.
 *
 * Threads: work is cut into chunks of batch entries (attention) or of rows of C, taken from
 * an atomic counter; every element of C is computed by one thread in a fixed order, so results
 * do not depend on the thread count. Pack buffers are temporaries from the caching allocator,
 * one pair per thread, all taken by the calling thread before any worker starts and given back
 * after all have finished: the allocator sees the same calls in the same order on every run, so
 * the memory report of a command does not depend on how its threads happened to be scheduled
 * (and the planner's table, plan_kernels.c, repeats them: vram_cpu_matmul_workers).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "rt_internal.h"

#define MR 6
#define NR 16
#define MC 96
#define KC 256
#define NC 1024

typedef float v8f __attribute__((vector_size(32)));

/* The micro-kernel body, compiled for AVX2+FMA (acc += a * b becomes one fused multiply-add)
 * and for the baseline, each in two flavours of A: packed (k-major strips of MR rows) and
 * direct (row-major A read in place, which spares packing when A's rows are contiguous, the
 * common case of activations times weights). The dispatcher picks on first use. */
#define MICRO_BODY(A_AT)                                                                           \
    const int store = ldc < 0; /* first K block of a non-accumulating product: C is written */   \
    if (store) ldc = -ldc;                                                                         \
    v8f acc[MR][2];                                                                                \
    memset(acc, 0, sizeof acc);                                                                    \
    for (int64_t k = 0; k < kc; k++) {                                                             \
        v8f b0, b1;                                                                                \
        memcpy(&b0, bp + k * NR, 32);                                                              \
        memcpy(&b1, bp + k * NR + 8, 32);                                                          \
        for (int r = 0; r < MR; r++) {                                                             \
            float a = A_AT;                                                                        \
            v8f av = {a, a, a, a, a, a, a, a};                                                     \
            acc[r][0] += av * b0;                                                                  \
            acc[r][1] += av * b1;                                                                  \
        }                                                                                          \
    }                                                                                              \
    for (int r = 0; r < MR; r++) {                                                                 \
        float *cr = c + r * ldc;                                                                   \
        v8f c0, c1;                                                                                \
        if (store) {                                                                               \
            c0 = acc[r][0];                                                                        \
            c1 = acc[r][1];                                                                        \
        } else {                                                                                   \
            memcpy(&c0, cr, 32);                                                                   \
            memcpy(&c1, cr + 8, 32);                                                               \
            c0 += acc[r][0];                                                                       \
            c1 += acc[r][1];                                                                       \
        }                                                                                          \
        memcpy(cr, &c0, 32);                                                                       \
        memcpy(cr + 8, &c1, 32);                                                                   \
    }

/* lda: row stride of A for the direct flavour (ignored when packed). A negative ldc means
 * "store the tile" (C not yet initialised) rather than "add to it". */
typedef void (*micro_fn)(int64_t kc, const float *restrict ap, int64_t lda, const float *restrict bp, float *restrict c,
                         int64_t ldc);

__attribute__((target("avx2,fma"))) static void micro_fma(int64_t kc, const float *restrict ap, int64_t lda,
                                                          const float *restrict bp, float *restrict c, int64_t ldc) {
    (void)lda;
    MICRO_BODY(ap[k * MR + r])
}
__attribute__((target("avx2,fma"))) static void micro_fma_direct(int64_t kc, const float *restrict ap, int64_t lda,
                                                                 const float *restrict bp, float *restrict c, int64_t ldc) {
    MICRO_BODY(ap[r * lda + k])
}
static void micro_base(int64_t kc, const float *restrict ap, int64_t lda, const float *restrict bp, float *restrict c,
                       int64_t ldc) {
    (void)lda;
    MICRO_BODY(ap[k * MR + r])
}
static void micro_base_direct(int64_t kc, const float *restrict ap, int64_t lda, const float *restrict bp,
                              float *restrict c, int64_t ldc) {
    MICRO_BODY(ap[r * lda + k])
}

static _Atomic(micro_fn) micro_impl[2];

/* direct: A read in place with row stride lda; otherwise ap is a packed strip. */
static void micro_6x16(int direct, int64_t kc, const float *ap, int64_t lda, const float *bp, float *c, int64_t ldc) {
    micro_fn f = atomic_load_explicit(&micro_impl[direct], memory_order_relaxed);
    if (!f) {
        __builtin_cpu_init();
        int fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        f = direct ? (fma ? micro_fma_direct : micro_base_direct) : (fma ? micro_fma : micro_base);
        atomic_store_explicit(&micro_impl[direct], f, memory_order_relaxed);
    }
    f(kc, ap, lda, bp, c, ldc);
}

typedef struct mm_job {
    vram_runtime *rt;
    vram_dtype dt;
    int64_t b0, b1;  /* batch range */
    int64_t m0, m1;  /* row range */
    int64_t M, N, K;
    const void *A;
    int64_t sa_b, sa_m, sa_k;
    const void *B;
    int64_t sb_b, sb_k, sb_n;
    void *C;
    int accumulate;
} mm_job;

static void gemm_f64(const mm_job *j, const double *A, const double *B, double *C) {
    for (int64_t i = j->m0; i < j->m1; i++) {
        double *c = C + i * j->N;
        if (!j->accumulate) memset(c, 0, sizeof(double) * (size_t)j->N);
        for (int64_t k = 0; k < j->K; k++) {
            double a = A[i * j->sa_m + k * j->sa_k];
            const double *b = B + k * j->sb_k;
            if (j->sb_n == 1) {
                for (int64_t n = 0; n < j->N; n++) c[n] += a * b[n];
            } else {
                for (int64_t n = 0; n < j->N; n++) c[n] += a * b[n * j->sb_n];
            }
        }
    }
}

static void gemm_f32(const mm_job *j, const float *A, const float *B, float *C, float *apack, float *bpack) {
    int64_t N = j->N, K = j->K;
    if (K == 0) { /* an empty sum: C = 0 (or unchanged when accumulating) */
        for (int64_t i = j->m0; i < j->m1; i++)
            if (!j->accumulate) memset(C + i * N, 0, sizeof(float) * (size_t)N);
        return;
    }
    for (int64_t jc = 0; jc < N; jc += NC) {
        int64_t nc = N - jc < NC ? N - jc : NC;
        for (int64_t pc = 0; pc < K; pc += KC) {
            int64_t kc = K - pc < KC ? K - pc : KC;
            /* pack B[pc:pc+kc, jc:jc+nc] into NR-wide strips, zero padded */
            for (int64_t s = 0; s < nc; s += NR) {
                float *dst = bpack + (s / NR) * kc * NR;
                int64_t w = nc - s < NR ? nc - s : NR;
                for (int64_t k = 0; k < kc; k++) {
                    const float *src = B + (pc + k) * j->sb_k + (jc + s) * j->sb_n;
                    float *d = dst + k * NR;
                    if (j->sb_n == 1) {
                        memcpy(d, src, sizeof(float) * (size_t)w);
                    } else {
                        for (int64_t x = 0; x < w; x++) d[x] = src[x * j->sb_n];
                    }
                    for (int64_t x = w; x < NR; x++) d[x] = 0;
                }
            }
            for (int64_t ic = j->m0; ic < j->m1; ic += MC) {
                int64_t mc = j->m1 - ic < MC ? j->m1 - ic : MC;
                for (int64_t s = 0; s < mc; s += MR) {
                    /* k outer, rows inner: contiguous writes, and for a transposed A (sa_m == 1,
                     * the weight-gradient product) contiguous reads too */
                    float *dst = apack + (s / MR) * kc * MR;
                    int64_t h = mc - s < MR ? mc - s : MR;
                    const float *src = A + (ic + s) * j->sa_m + pc * j->sa_k;
                    if (h == MR && j->sa_k == 1) continue; /* read in place by the direct kernel */
                    if (h == MR) {
                        for (int64_t k = 0; k < kc; k++)
                            for (int64_t r = 0; r < MR; r++) dst[k * MR + r] = src[r * j->sa_m + k * j->sa_k];
                    } else {
                        for (int64_t k = 0; k < kc; k++)
                            for (int64_t r = 0; r < MR; r++) dst[k * MR + r] = r < h ? src[r * j->sa_m + k * j->sa_k] : 0;
                    }
                }
                for (int64_t s = 0; s < nc; s += NR) {
                    int64_t w = nc - s < NR ? nc - s : NR;
                    const float *bp = bpack + (s / NR) * kc * NR;
                    for (int64_t t = 0; t < mc; t += MR) {
                        int64_t h = mc - t < MR ? mc - t : MR;
                        int direct = h == MR && j->sa_k == 1;
                        const float *ap = direct ? A + (ic + t) * j->sa_m + pc : apack + (t / MR) * kc * MR;
                        float *c = C + (ic + t) * N + jc + s;
                        int first = pc == 0 && !j->accumulate;
                        if (h == MR && w == NR) {
                            micro_6x16(direct, kc, ap, j->sa_m, bp, c, first ? -N : N);
                        } else {
                            float tile[MR * NR];
                            micro_6x16(direct, kc, ap, j->sa_m, bp, tile, -(int64_t)NR);
                            for (int64_t r = 0; r < h; r++)
                                for (int64_t x = 0; x < w; x++)
                                    c[r * N + x] = first ? tile[r * NR + x] : c[r * N + x] + tile[r * NR + x];
                        }
                    }
                }
            }
        }
    }
}

/* Work shared by the threads of one call: chunks (batch entries or row blocks) are taken from
 * an atomic counter, so a thread slowed by a busy core simply takes fewer chunks. */
typedef struct mm_shared {
    mm_job base;
    int by_batch;
    int64_t chunk, nchunks;
    atomic_llong next;
} mm_shared;

static void run_one(const mm_job *j, float *apack, float *bpack) {
    size_t es = vram_dtype_size(j->dt);
    for (int64_t b = j->b0; b < j->b1; b++) {
        const char *A = (const char *)j->A + b * j->sa_b * (int64_t)es;
        const char *B = (const char *)j->B + b * j->sb_b * (int64_t)es;
        char *C = (char *)j->C + b * j->M * j->N * (int64_t)es;
        if (j->dt == VRAM_DTYPE_F32 && apack) {
            gemm_f32(j, (const float *)A, (const float *)B, (float *)C, apack, bpack);
        } else if (j->dt == VRAM_DTYPE_F32) {
            for (int64_t i = j->m0; i < j->m1; i++) {
                float *c = (float *)C + i * j->N;
                if (!j->accumulate) memset(c, 0, sizeof(float) * (size_t)j->N);
                for (int64_t k = 0; k < j->K; k++) {
                    float a = ((const float *)A)[i * j->sa_m + k * j->sa_k];
                    for (int64_t n = 0; n < j->N; n++) c[n] += a * ((const float *)B)[k * j->sb_k + n * j->sb_n];
                }
            }
        } else {
            gemm_f64(j, (const double *)A, (const double *)B, (double *)C);
        }
    }
}

/* One thread's share: the work and its own pack buffers (NULL: the unpacked loop). */
typedef struct mm_thread {
    mm_shared *sh;
    void *ab, *bb;
} mm_thread;

/* Takes a thread's pack buffers; with no room for them, none (the unpacked loop: slow, correct). */
static void pack_buffers_take(vram_allocator *al, vram_dtype dt, mm_thread *t) {
    t->ab = t->bb = NULL;
    if (dt != VRAM_DTYPE_F32) return;
    if (vram_allocator_malloc(al, sizeof(float) * MC * KC, 0, VRAM_TAG_TEMPORARY, &t->ab) != VRAM_OK ||
        vram_allocator_malloc(al, sizeof(float) * KC * (NC + NR), 0, VRAM_TAG_TEMPORARY, &t->bb) != VRAM_OK) {
        if (t->ab) vram_allocator_free(al, t->ab);
        t->ab = t->bb = NULL;
    }
}

static void *mm_worker(void *arg) {
    mm_thread *t = arg;
    mm_shared *sh = t->sh;
    void *ab = t->ab, *bb = t->bb;
    for (;;) {
        int64_t c = atomic_fetch_add(&sh->next, 1);
        if (c >= sh->nchunks) break;
        mm_job j = sh->base;
        if (sh->by_batch) {
            j.b0 = c * sh->chunk;
            j.b1 = j.b0 + sh->chunk < sh->base.b1 ? j.b0 + sh->chunk : sh->base.b1;
        } else {
            j.m0 = c * sh->chunk;
            j.m1 = j.m0 + sh->chunk < sh->base.M ? j.m0 + sh->chunk : sh->base.M;
        }
        run_one(&j, ab, bb);
    }
    return NULL;
}

/* How one call is cut: chunks of batch entries or of rows, and how many threads take them. */
static int mm_split(int threads, int64_t batch, int64_t M, int64_t N, int64_t K, mm_shared *sh) {
    double flops = 2.0 * (double)batch * (double)M * (double)N * (double)K;
    if (flops < 4e6 || threads <= 1) threads = 1;
    if (batch >= 2 * threads && threads > 1) {
        sh->by_batch = 1;
        sh->chunk = (batch + 4 * threads - 1) / (4 * threads);
        sh->nchunks = (batch + sh->chunk - 1) / sh->chunk;
    } else {
        sh->by_batch = 1;
        sh->chunk = batch;
        sh->nchunks = 1;
        if (threads > 1) { /* split rows: whole batches run in each chunk */
            sh->by_batch = 0;
            int64_t rows = (M + 4 * threads - 1) / (4 * threads);
            if (rows < MC) rows = MC;
            sh->chunk = (rows + MR - 1) / MR * MR;
            sh->nchunks = (M + sh->chunk - 1) / sh->chunk;
        }
    }
    if (sh->nchunks < threads) threads = (int)sh->nchunks;
    return threads < 64 ? threads : 64;
}

int vram_cpu_matmul_workers(int threads, int64_t batch, int64_t M, int64_t N, int64_t K) {
    if (batch <= 0 || M <= 0 || N <= 0) return 0;
    mm_shared sh;
    return mm_split(threads, batch, M, N, K, &sh);
}

void vram_cpu_matmul_pack_bytes(vram_dtype dt, size_t *a_bytes, size_t *b_bytes) {
    int packed = dt == VRAM_DTYPE_F32;
    *a_bytes = packed ? sizeof(float) * MC * KC : 0;
    *b_bytes = packed ? sizeof(float) * KC * (NC + NR) : 0;
}

void vram_cpu_matmul(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                     int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                     void *C, int accumulate) {
    if (batch <= 0 || M <= 0 || N <= 0) return;
    mm_shared sh = {.base = {rt, dt, 0, batch, 0, M, M, N, K, A, sa_b, sa_m, sa_k, B, sb_b, sb_k, sb_n, C, accumulate}};
    int threads = mm_split(rt->threads, batch, M, N, K, &sh);
    atomic_init(&sh.next, 0);
    pthread_t tid[64];
    int started[64] = {0};
    mm_thread per[64];
    for (int t = 0; t < threads; t++) {
        per[t].sh = &sh;
        pack_buffers_take(rt->alloc, dt, &per[t]);
    }
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&tid[t], NULL, mm_worker, &per[t]) == 0;
    mm_worker(&per[0]); /* the calling thread works too, and finishes whatever is left */
    for (int t = 1; t < threads; t++)
        if (started[t]) pthread_join(tid[t], NULL);
    for (int t = 0; t < threads; t++) {
        if (per[t].ab) vram_allocator_free(rt->alloc, per[t].ab);
        if (per[t].bb) vram_allocator_free(rt->alloc, per[t].bb);
    }
}
