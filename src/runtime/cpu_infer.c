/* cpu_infer.c — the CPU kernels behind inference (generation.c): the product of activations with
 * low-precision weights read in place (Q8_0 and bf16), row lookup from such a table, attention
 * over a KV cache, and GPT-2's tanh GELU. They fill slots of the CPU kernel table; a CUDA
 * table brings its own.
 *
 * Q8_0 (model_file.h): a [N, K] matrix is int8 q[N*K] (row-major) followed by one f16 scale per
 * block of 32 along K; w[n, k] = q[n*K + k] * scale[(n*K + k) / 32]. Q8_R: int8 q[N*K], then
 * one f32 scale per row. For the few rows of a generation step the product walks one weight row
 * at a time, converting 8 int8 (or bf16) at a time to floats in registers, scaled, against a
 * tile of activation rows: the stored bytes are the only weight bytes read. For many rows (a
 * prompt) a panel of 64 weight rows at a time is converted into a temporary and goes through the
 * f32 product, whose register tiling is worth more than the bytes saved once each weight is
 * reused that often. Never a dequantised copy of a whole matrix. Output columns are split over
 * threads; the vector bodies are compiled for AVX2+FMA+F16C and the baseline, picked on first use.
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "dtype_conv.h"
#include "rt_internal.h"
#include "vram/model_file.h"

typedef float v8f __attribute__((vector_size(32)));
typedef int8_t v8i8 __attribute__((vector_size(8)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u __attribute__((vector_size(32)));

/* (by pointer: a vector passed by value to a function not built for AVX changes its ABI) */
static inline float hsum(const v8f *p) {
    v8f v = *p;
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* y[m, n] for n in [n0, n1): each block of 32 weights is converted to floats (times its scale)
 * once and used against a tile of TILE activation rows (a constant, so the accumulators stay in
 * registers): tiles of 4, then single rows. */
#define Q8_TILE(TILE)                                                                                   \
    for (; m0 + TILE <= M; m0 += TILE) {                                                                \
        const float *xr = x + m0 * K;                                                                   \
        v8f acc[TILE];                                                                                  \
        for (int r = 0; r < TILE; r++) acc[r] = (v8f){0};                                               \
        for (int64_t b = 0; b < nb; b++) {                                                              \
            float d = F16(sc[n * nb + b]);                                                              \
            v8f dv = {d, d, d, d, d, d, d, d};                                                          \
            for (int c = 0; c < 32; c += 8) {                                                           \
                v8f wv = LOAD8(qr + b * 32 + c) * dv;                                                   \
                for (int r = 0; r < TILE; r++) {                                                        \
                    v8f xv;                                                                             \
                    memcpy(&xv, xr + r * K + b * 32 + c, 32);                                           \
                    acc[r] += xv * wv;                                                                  \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
        for (int r = 0; r < TILE; r++) y[(m0 + r) * N + n] = hsum(&acc[r]) + (bias ? bias[n] : 0.0f);  \
    }

#define Q8_BODY                                                                                         \
    int64_t nb = K / 32;                                                                                \
    const int8_t *q = w;                                                                                \
    const uint16_t *sc = (const uint16_t *)((const int8_t *)w + N * K);                                 \
    for (int64_t n = n0; n < n1; n++) {                                                                 \
        const int8_t *qr = q + n * K;                                                                   \
        int64_t m0 = 0;                                                                                 \
        Q8_TILE(4)                                                                                      \
        Q8_TILE(1)                                                                                      \
    }

/* Q8_R: one f32 scale per weight row, applied once to the row's dot product. */
#define Q8R_TILE(TILE)                                                                                  \
    for (; m0 + TILE <= M; m0 += TILE) {                                                                \
        const float *xr = x + m0 * K;                                                                   \
        v8f acc[TILE];                                                                                  \
        for (int r = 0; r < TILE; r++) acc[r] = (v8f){0};                                               \
        int64_t k = 0;                                                                                  \
        for (; k + 8 <= K; k += 8) {                                                                    \
            v8f wv = LOAD8(qr + k);                                                                     \
            for (int r = 0; r < TILE; r++) {                                                            \
                v8f xv;                                                                                 \
                memcpy(&xv, xr + r * K + k, 32);                                                        \
                acc[r] += xv * wv;                                                                      \
            }                                                                                           \
        }                                                                                               \
        for (int r = 0; r < TILE; r++) {                                                                \
            float s = hsum(&acc[r]);                                                                    \
            for (int64_t j = k; j < K; j++) s += xr[r * K + j] * (float)qr[j];                          \
            float d;                                                                                    \
            memcpy(&d, scb + 4 * n, 4); /* rows*cols need not be a multiple of 4: unaligned */         \
            y[(m0 + r) * N + n] = s * d + (bias ? bias[n] : 0.0f);                                      \
        }                                                                                               \
    }

#define Q8R_BODY                                                                                        \
    const uint8_t *scb = (const uint8_t *)w + N * K;                                                    \
    for (int64_t n = n0; n < n1; n++) {                                                                 \
        const int8_t *qr = (const int8_t *)w + n * K;                                                   \
        int64_t m0 = 0;                                                                                 \
        Q8R_TILE(4)                                                                                     \
        Q8R_TILE(1)                                                                                     \
    }

#define BF16_BODY                                                                                       \
    const uint16_t *wb = w;                                                                             \
    for (int64_t n = n0; n < n1; n++) {                                                                 \
        const uint16_t *wr = wb + n * K;                                                                \
        for (int64_t m = 0; m < M; m++) {                                                               \
            const float *xr = x + m * K;                                                                \
            v8f acc = {0};                                                                              \
            int64_t k = 0;                                                                              \
            for (; k + 8 <= K; k += 8) {                                                                \
                v8u16 h;                                                                                \
                v8f xv, wv;                                                                             \
                memcpy(&h, wr + k, 16);                                                                 \
                v8u bits = __builtin_convertvector(h, v8u) << 16;                                       \
                memcpy(&wv, &bits, 32);                                                                 \
                memcpy(&xv, xr + k, 32);                                                                \
                acc += xv * wv;                                                                         \
            }                                                                                           \
            float s = hsum(&acc);                                                                        \
            for (; k < K; k++) s += xr[k] * vram_bf16_to_f32(wr[k]);                                    \
            y[m * N + n] = s + (bias ? bias[n] : 0.0f);                                                 \
        }                                                                                               \
    }

/* The f16 scale to f32, and 8 int8 weights to floats: single instructions in the AVX2 variant
 * (F16C's vcvtph2ps, vpmovsxbd + vcvtdq2ps), portable code else. */
#define load8_base(p)                                                                               \
    __extension__({                                                                                 \
        v8i8 qi_;                                                                                   \
        memcpy(&qi_, (p), 8);                                                                       \
        __builtin_convertvector(__builtin_convertvector(qi_, v8i), v8f);                            \
    })
#define F16(h) vram_f16_to_f32(h)
#define LOAD8(p) load8_base(p)
typedef void (*lowp_fn)(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float *restrict x,
                        const void *restrict w, const float *restrict bias, float *restrict y);

#undef F16
#undef LOAD8
#define F16(h) _cvtsh_ss(h)
#define LOAD8(p) ((v8f)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p)))))
__attribute__((target("avx2,fma,f16c"))) static void q8_avx2(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1,
                                                             const float *restrict x, const void *restrict w,
                                                             const float *restrict bias, float *restrict y) {
    Q8_BODY
}
__attribute__((target("avx2,fma,f16c"))) static void q8r_avx2(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1,
                                                              const float *restrict x, const void *restrict w,
                                                              const float *restrict bias, float *restrict y) {
    Q8R_BODY
}
#undef F16
#undef LOAD8
#define F16(h) vram_f16_to_f32(h)
#define LOAD8(p) load8_base(p)
static void q8r_base(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float *restrict x,
                     const void *restrict w, const float *restrict bias, float *restrict y) {
    Q8R_BODY
}
static void q8_base(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float *restrict x,
                    const void *restrict w, const float *restrict bias, float *restrict y) {
    Q8_BODY
}
__attribute__((target("avx2,fma"))) static void bf16_avx2(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1,
                                                          const float *restrict x, const void *restrict w,
                                                          const float *restrict bias, float *restrict y) {
    BF16_BODY
}
static void bf16_base(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float *restrict x,
                      const void *restrict w, const float *restrict bias, float *restrict y) {
    BF16_BODY
}

static lowp_fn pick(int fmt) {
    static _Atomic(int) have_avx2 = -1;
    int a = have_avx2;
    if (a < 0) {
        __builtin_cpu_init();
        a = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
        have_avx2 = a;
    }
    if (fmt == VRAM_WFMT_Q8_0) return a ? q8_avx2 : q8_base;
    if (fmt == VRAM_WFMT_Q8_R) return a ? q8r_avx2 : q8r_base;
    return a ? bf16_avx2 : bf16_base;
}

typedef struct lowp_job {
    lowp_fn fn;
    int64_t M, N, K, n0, n1;
    const float *x, *bias;
    const void *w;
    float *y;
} lowp_job;

static void *lowp_worker(void *arg) {
    lowp_job *j = arg;
    j->fn(j->M, j->N, j->K, j->n0, j->n1, j->x, j->w, j->bias, j->y);
    return NULL;
}

/* Rows [n0, n1) of W [N, K] in fmt as f32, into out [(n1 - n0), K]. */
static void dequantise_rows(int fmt, int64_t N, int64_t K, int64_t n0, int64_t n1, const void *w, float *out) {
    for (int64_t n = n0; n < n1; n++) {
        float *o = out + (n - n0) * K;
        if (fmt == VRAM_WFMT_Q8_0) {
            const int8_t *q = (const int8_t *)w + n * K;
            const uint16_t *sc = (const uint16_t *)((const int8_t *)w + N * K) + n * (K / 32);
            for (int64_t b = 0; b < K / 32; b++) {
                float d = vram_f16_to_f32(sc[b]);
                for (int k = 0; k < 32; k++) o[b * 32 + k] = (float)q[b * 32 + k] * d;
            }
        } else if (fmt == VRAM_WFMT_Q8_R) {
            const int8_t *q = (const int8_t *)w + n * K;
            float d;
            memcpy(&d, (const uint8_t *)w + N * K + 4 * n, 4);
            for (int64_t k = 0; k < K; k++) o[k] = (float)q[k] * d;
        } else {
            const uint16_t *h = (const uint16_t *)w + n * K;
            for (int64_t k = 0; k < K; k++) o[k] = vram_bf16_to_f32(h[k]);
        }
    }
}

/* Many activation rows (a prompt): a panel of PANEL weight rows at a time is converted to f32
 * and multiplied with the tuned f32 product, whose register tiling the direct loop lacks; the
 * panel and the product's output are temporaries from the allocator. Returns 0 when they could
 * not be had (the caller then takes the direct path). */
enum { PANEL = 64, PANEL_MIN_ROWS = 16 };
static int linear_by_panels(vram_runtime *rt, int fmt, int64_t M, int64_t N, int64_t K, const float *x, const void *w,
                            const float *bias, float *y) {
    void *panel = NULL, *c = NULL;
    if (vram_allocator_malloc(rt->alloc, sizeof(float) * PANEL * (size_t)K, 0, VRAM_TAG_TEMPORARY, &panel) != VRAM_OK)
        return 0;
    if (vram_allocator_malloc(rt->alloc, sizeof(float) * PANEL * (size_t)M, 0, VRAM_TAG_TEMPORARY, &c) != VRAM_OK) {
        vram_allocator_free(rt->alloc, panel);
        return 0;
    }
    for (int64_t n0 = 0; n0 < N; n0 += PANEL) {
        int64_t np = N - n0 < PANEL ? N - n0 : PANEL;
        dequantise_rows(fmt, N, K, n0, n0 + np, w, panel);
        /* c [M, np] = x [M, K] @ panel^T: B[k][j] = panel[j*K + k] */
        rt->k->matmul(rt, VRAM_DTYPE_F32, 1, M, np, K, x, 0, K, 1, panel, 0, 1, K, c, 0);
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < np; j++) y[m * N + n0 + j] = ((float *)c)[m * np + j] + (bias ? bias[n0 + j] : 0.0f);
    }
    vram_allocator_free(rt->alloc, c);
    vram_allocator_free(rt->alloc, panel);
    return 1;
}

/* Few activation rows (generation's steps): the direct loop, reading the stored bytes once.
 * Threads split the output columns (weight rows) evenly; small products stay on one thread,
 * as the f32 product does below the same size. */
void vram_cpu_linear_lowp(vram_runtime *rt, int fmt, int64_t M, int64_t N, int64_t K, const float *x, const void *w,
                          const float *bias, float *y) {
    if (M >= PANEL_MIN_ROWS && linear_by_panels(rt, fmt, M, N, K, x, w, bias, y)) return;
    lowp_fn fn = pick(fmt);
    int threads = rt->threads;
    if ((double)M * N * K < 4e6 || threads <= 1) threads = 1;
    if (threads > 64) threads = 64;
    lowp_job jobs[64];
    pthread_t tid[64];
    int started[64] = {0};
    for (int t = 0; t < threads; t++)
        jobs[t] = (lowp_job){fn, M, N, K, N * t / threads, N * (t + 1) / threads, x, bias, w, y};
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&tid[t], NULL, lowp_worker, &jobs[t]) == 0;
    lowp_worker(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else lowp_worker(&jobs[t]); /* no thread: do its share here */
    }
}

void vram_cpu_embedding_lowp(int fmt, int64_t n_ids, int64_t c, int64_t rows, float *out, const void *table,
                               const int32_t *ids) {
    for (int64_t i = 0; i < n_ids; i++) {
        int64_t r = ids[i];
        float *o = out + i * c;
        if (fmt == VRAM_WFMT_Q8_0) {
            const int8_t *q = (const int8_t *)table + r * c;
            const uint16_t *sc = (const uint16_t *)((const int8_t *)table + rows * c) + r * (c / 32);
            for (int64_t k = 0; k < c; k++) o[k] = (float)q[k] * vram_f16_to_f32(sc[k / 32]);
        } else if (fmt == VRAM_WFMT_Q8_R) {
            const int8_t *q = (const int8_t *)table + r * c;
            float d;
            memcpy(&d, (const uint8_t *)table + rows * c + 4 * r, 4);
            for (int64_t k = 0; k < c; k++) o[k] = (float)q[k] * d;
        } else if (fmt == VRAM_WFMT_BF16) {
            const uint16_t *h = (const uint16_t *)table + r * c;
            for (int64_t k = 0; k < c; k++) o[k] = vram_bf16_to_f32(h[k]);
        } else {
            memcpy(o, (const float *)table + r * c, sizeof(float) * (size_t)c);
        }
    }
}

/* For each row b of n, the T new tokens' keys and values (from qkv [n, T, 3C], C = H*D) go to
 * cache positions lens[b] .. lens[b]+T-1 of kc, vc ([n, H, cap, D] from the first row); query t
 * then attends to positions 0 .. lens[b]+t. out [n, T, C], heads side by side. */
void vram_cpu_kv_attention(vram_runtime *rt, int64_t n, int64_t T, int64_t H, int64_t D, const float *qkv, float *kc,
                             float *vc, int64_t cap, const int64_t *lens, float *out, float *scores) {
    int64_t C = H * D;
    float scale = 1.0f / sqrtf((float)D);
    for (int64_t b = 0; b < n; b++) {
        for (int64_t h = 0; h < H; h++) {
            float *kr = kc + (b * H + h) * cap * D, *vr = vc + (b * H + h) * cap * D;
            for (int64_t t = 0; t < T; t++) {
                const float *row = qkv + (b * T + t) * 3 * C;
                memcpy(kr + (lens[b] + t) * D, row + C + h * D, sizeof(float) * (size_t)D);
                memcpy(vr + (lens[b] + t) * D, row + 2 * C + h * D, sizeof(float) * (size_t)D);
            }
            for (int64_t t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * 3 * C + h * D;
                int64_t len = lens[b] + t + 1;
                float mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < len; j++) {
                    float s = 0;
                    for (int64_t d = 0; d < D; d++) s += q[d] * kr[j * D + d];
                    scores[j] = s * scale;
                    if (scores[j] > mx) mx = scores[j];
                }
                for (int64_t j = 0; j < len; j++) sum += scores[j] = expf(scores[j] - mx);
                float *o = out + (b * T + t) * C + h * D;
                memset(o, 0, sizeof(float) * (size_t)D);
                for (int64_t j = 0; j < len; j++) {
                    float p = scores[j] / sum;
                    for (int64_t d = 0; d < D; d++) o[d] += p * vr[j * D + d];
                }
            }
        }
    }
    (void)rt;
}

void vram_cpu_gelu_tanh(int64_t n, float *out, const float *x) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
