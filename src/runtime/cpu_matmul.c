/* cpu_matmul.c — the CPU matrix product: a cache-blocked f32 kernel (GotoBLAS loop order) with
 * a 6x16 register tile, threaded with pthreads; a plain loop for f64 (gradient checks).
 *
 * Blocking: for each NC-wide column block of B and KC-deep slice of K, B is packed into
 * 16-column strips (k-major) that stay in L2; for each MC-high row block of A, A is packed
 * into 6-row strips (k-major) that stay in L1; the micro-kernel then keeps a 6x16 tile of C in
 * twelve 8-float vector registers while it walks K. Packing also absorbs any strides (a
 * transposed operand costs nothing extra). Edge tiles go through a small local buffer.
 * The micro-kernel is compiled twice (AVX2+FMA and baseline) and picked at load time.
 *
 * Threads: work is split by batch entries when there are enough of them (attention), else by
 * rows of C; every element of C is computed by one thread in a fixed order, so results do not
 * depend on the thread count. Pack buffers are temporaries from the caching allocator.
 */
#include <pthread.h>
#include <string.h>

#include "rt_internal.h"

#define MR 6
#define NR 16
#define MC 96
#define KC 256
#define NC 1024

typedef float v8f __attribute__((vector_size(32)));

__attribute__((target_clones("arch=haswell", "default")))
static void micro_6x16(int64_t kc, const float *restrict ap, const float *restrict bp, float *restrict c, int64_t ldc) {
    v8f acc[MR][2];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        v8f b0, b1;
        memcpy(&b0, bp + k * NR, 32);
        memcpy(&b1, bp + k * NR + 8, 32);
        for (int r = 0; r < MR; r++) {
            float a = ap[k * MR + r];
            v8f av = {a, a, a, a, a, a, a, a};
            acc[r][0] += av * b0;
            acc[r][1] += av * b1;
        }
    }
    for (int r = 0; r < MR; r++) {
        float *cr = c + r * ldc;
        v8f c0, c1;
        memcpy(&c0, cr, 32);
        memcpy(&c1, cr + 8, 32);
        c0 += acc[r][0];
        c1 += acc[r][1];
        memcpy(cr, &c0, 32);
        memcpy(cr + 8, &c1, 32);
    }
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
    for (int64_t i = j->m0; i < j->m1; i++)
        if (!j->accumulate) memset(C + i * N, 0, sizeof(float) * (size_t)N);
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
                    float *dst = apack + (s / MR) * kc * MR;
                    int64_t h = mc - s < MR ? mc - s : MR;
                    for (int64_t r = 0; r < MR; r++) {
                        if (r < h) {
                            const float *src = A + (ic + s + r) * j->sa_m + pc * j->sa_k;
                            for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = src[k * j->sa_k];
                        } else {
                            for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = 0;
                        }
                    }
                }
                for (int64_t s = 0; s < nc; s += NR) {
                    int64_t w = nc - s < NR ? nc - s : NR;
                    const float *bp = bpack + (s / NR) * kc * NR;
                    for (int64_t t = 0; t < mc; t += MR) {
                        int64_t h = mc - t < MR ? mc - t : MR;
                        const float *ap = apack + (t / MR) * kc * MR;
                        float *c = C + (ic + t) * N + jc + s;
                        if (h == MR && w == NR) {
                            micro_6x16(kc, ap, bp, c, N);
                        } else {
                            float tile[MR * NR] = {0};
                            micro_6x16(kc, ap, bp, tile, NR);
                            for (int64_t r = 0; r < h; r++)
                                for (int64_t x = 0; x < w; x++) c[r * N + x] += tile[r * NR + x];
                        }
                    }
                }
            }
        }
    }
}

static void *mm_run(void *arg) {
    mm_job *j = arg;
    size_t es = vram_dtype_size(j->dt);
    float *apack = NULL, *bpack = NULL;
    void *ab = NULL, *bb = NULL;
    if (j->dt == VRAM_DTYPE_F32) {
        if (vram_allocator_malloc(j->rt->alloc, sizeof(float) * MC * KC, 0, VRAM_TAG_TEMPORARY, &ab) != VRAM_OK ||
            vram_allocator_malloc(j->rt->alloc, sizeof(float) * KC * (NC + NR), 0, VRAM_TAG_TEMPORARY, &bb) != VRAM_OK) {
            /* No room for pack buffers: fall back to the unpacked loop (slow, but correct). */
            if (ab) vram_allocator_free(j->rt->alloc, ab);
            ab = NULL;
        }
        apack = ab;
        bpack = bb;
    }
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
    if (ab) vram_allocator_free(j->rt->alloc, ab);
    if (bb) vram_allocator_free(j->rt->alloc, bb);
    return NULL;
}

void vram_cpu_matmul(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                     int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                     void *C, int accumulate) {
    mm_job base = {rt, dt, 0, batch, 0, M, M, N, K, A, sa_b, sa_m, sa_k, B, sb_b, sb_k, sb_n, C, accumulate};
    if (batch <= 0 || M <= 0 || N <= 0) return;
    double flops = 2.0 * (double)batch * (double)M * (double)N * (double)K;
    int threads = rt->threads;
    if (flops < 4e6 || threads <= 1) {
        mm_run(&base);
        return;
    }
    mm_job jobs[64];
    pthread_t tid[64];
    int n = 0;
    if (batch >= threads) {
        for (int t = 0; t < threads; t++) {
            jobs[n] = base;
            jobs[n].b0 = batch * t / threads;
            jobs[n].b1 = batch * (t + 1) / threads;
            if (jobs[n].b1 > jobs[n].b0) n++;
        }
    } else {
        int64_t rows_per = (M + threads - 1) / threads;
        rows_per = (rows_per + MR - 1) / MR * MR;
        for (int64_t m0 = 0; m0 < M && n < threads; m0 += rows_per) {
            jobs[n] = base;
            jobs[n].m0 = m0;
            jobs[n].m1 = m0 + rows_per < M ? m0 + rows_per : M;
            n++;
        }
    }
    int started[64] = {0};
    for (int t = 1; t < n; t++) started[t] = pthread_create(&tid[t], NULL, mm_run, &jobs[t]) == 0;
    mm_run(&jobs[0]);
    for (int t = 1; t < n; t++) {
        if (started[t]) {
            pthread_join(tid[t], NULL);
        } else {
            mm_run(&jobs[t]); /* could not start a thread: do its share here */
        }
    }
}
