/* cuda_blas.c — the runtime's matrix products on the GPU, through cuBLASLt opened at run time.
 *
 * The table's product is row-major: C[b] (M x N, contiguous) = A[b] (M x K) @ B[b] (K x N),
 * each input with its own strides. cuBLASLt is column-major, so the product it computes is
 * C^T (N x M, leading dimension N) = B^T @ A^T: each input is read in place, transposed or not,
 * when one of its strides is 1 and the other is a valid leading dimension; otherwise it is
 * first copied to a contiguous temporary (from the allocator). f32 computes in true fp32
 * (CUBLAS_COMPUTE_32F: no TF32), f64 in fp64, and f16/bf16 operands on tensor cores with fp32
 * accumulation, into a C of their own dtype or of f32 (a weight gradient kept in fp32).
 *
 * Descriptors, layouts and the algorithm are cached per shape, strides and pointer alignment (a
 * small open-addressed table), so a training step asks the heuristic once per distinct product.
 * The first time a product that overwrites its output runs, the heuristic's best candidates (and,
 * for long sums, the first few split over K, which fills the GPU where a weight gradient has few
 * output tiles) are each timed on the real operands and the fastest is kept
 * (VRAM_CUBLASLT_TUNE=N times N of the heuristic's, 0 keeps its first; the splits only with
 * VRAM_CUBLASLT_SPLITK=1, opt-in as they bought no time a step on the GPU, or =only: the
 * splits alone where there are any, for the tests). The workspace (32 MiB) comes from the allocator, tagged "other".
 * Epilogues: the bias (BIAS), and GPT-2's tanh GELU for 16-bit products (GELU_AUX_BIAS: the
 * output is gelu(pre), the aux matrix pre, kept for backward; DGELU: the output times
 * gelu'(aux)); where the heuristic has no algorithm for one, that is remembered in the cache
 * and the product runs without it, followed by the elementwise kernel (as with
 * VRAM_GELU_EPILOGUE=0, which measures and tests that path).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

#ifndef VRAM_HAVE_CUDA_H

vram_status vram_cuda_blas_open(char *why, size_t cap) {
    snprintf(why, cap, "built without CUDA headers");
    return VRAM_ERR_UNSUPPORTED;
}
void vram_cuda_blas_close(void) {}
void vram_cuda_matmul(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                      int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                      void *C, int accumulate) {
    (void)rt, (void)dt, (void)batch, (void)M, (void)N, (void)K, (void)A, (void)sa_b, (void)sa_m, (void)sa_k;
    (void)B, (void)sb_b, (void)sb_k, (void)sb_n, (void)C, (void)accumulate;
    vram_cuda_fail(VRAM_ERR_UNSUPPORTED, "no cuBLASLt in this build");
}
void vram_cuda_matmul_bias(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa_m,
                           int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C, const void *bias) {
    (void)bias;
    vram_cuda_matmul(rt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, C, 0);
}
void vram_cuda_matmul_lowp(vram_runtime *rt, vram_dtype ab_dt, vram_dtype c_dt, int64_t batch, int64_t M, int64_t N,
                           int64_t K, const void *A, int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b,
                           int64_t sb_k, int64_t sb_n, void *C, int accumulate, const void *bias) {
    (void)c_dt, (void)bias;
    vram_cuda_matmul(rt, ab_dt, batch, M, N, K, A, sa_b, sa_m, sa_k, B, sb_b, sb_k, sb_n, C, accumulate);
}
void vram_cuda_matmul_lowp_gelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *pre, void *out,
                                const void *bias) {
    (void)out, (void)bias;
    vram_cuda_matmul(rt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, pre, 0);
}
void vram_cuda_matmul_lowp_dgelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                 int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C,
                                 const void *pre) {
    (void)pre;
    vram_cuda_matmul(rt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, C, 0);
}
int64_t vram_cuda_epilogue_bgrads, vram_cuda_splitk_chosen;
void vram_cuda_matmul_lowp_wgrad(vram_runtime *rt, vram_dtype dt, int64_t rows, int64_t out_f, int64_t in_f,
                                 const void *g, int64_t ld, const void *a, float *gw, float *gb) {
    (void)rt, (void)dt, (void)rows, (void)out_f, (void)in_f, (void)g, (void)ld, (void)a, (void)gw, (void)gb;
    vram_cuda_fail(VRAM_ERR_UNSUPPORTED, "no cuBLASLt in this build");
}

#else

#include <cublasLt.h>

/* TUNE_ALGOS: the heuristic's candidates timed by default (VRAM_CUBLASLT_TUNE=N asks for N, up to
 * MAX_HEURISTIC); SPLITK_FROM: the first candidates also tried with their sum over K split. */
enum {
    WORKSPACE_BYTES = CUDA_WORKSPACE_BYTES,
    CACHE_SLOTS = 256,
    TUNE_ALGOS = 8,
    MAX_HEURISTIC = 32,
    SPLITK_FROM = 4,
    MAX_CANDIDATES = MAX_HEURISTIC + 3 * SPLITK_FROM,
    TUNE_RUNS = 3,
    KEY_LEN = 18
};
/* A product's epilogue: none, the bias, the tanh GELU's forward (with bias) and gradient, or
 * the bias gradient (BGRADB: the column sums of the product's right operand, cuBLASLt's B,
 * written to the bias pointer in C's dtype, or with _LOWP in the operands' 16-bit dtype).
 * Those from EPI_GELU_AUX on are optional: where the heuristic has none, the caller runs the
 * unfused kernels. */
enum { EPI_NONE, EPI_BIAS, EPI_GELU_AUX, EPI_GELU_AUX_BIAS, EPI_DGELU, EPI_BGRADB, EPI_BGRADB_LOWP };

static struct {
    void *lib;
    cublasStatus_t (*Create)(cublasLtHandle_t *);
    cublasStatus_t (*Destroy)(cublasLtHandle_t);
    const char *(*GetStatusName)(cublasStatus_t);
    cublasStatus_t (*DescCreate)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*DescDestroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*DescSet)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
    cublasStatus_t (*LayoutCreate)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*LayoutDestroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*LayoutSet)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, const void *, size_t);
    cublasStatus_t (*PrefCreate)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*PrefDestroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*PrefSet)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void *, size_t);
    cublasStatus_t (*Heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                cublasLtMatmulHeuristicResult_t[], int *);
    cublasStatus_t (*Matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
                             const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
                             void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
    /* optional (split-K variants are tried only where all four resolve) */
    cublasStatus_t (*CapGet)(const cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoCapAttributes_t, void *, size_t, size_t *);
    cublasStatus_t (*ConfigSet)(cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t, const void *, size_t);
    cublasStatus_t (*ConfigGet)(const cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t, void *, size_t,
                                size_t *);
    cublasStatus_t (*Check)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                            cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *,
                            cublasLtMatmulHeuristicResult_t *);
} lt;

/* One cached product: its key and what cuBLASLt needs to run it. */
typedef struct lt_plan {
    int used;
    int unsupported; /* an epilogue cuBLASLt has no algorithm for: the caller runs it unfused */
    int64_t key[KEY_LEN];
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lx, ly, ld;
    cublasLtMatmulAlgo_t algo;
    cublasLtMatmulAlgo_t *candidates; /* until they have been timed (malloc'd) */
    int *splits;                      /* each candidate's split over K (1: none) */
    int n_candidates;                 /* > 1 until the candidates have been timed */
} lt_plan;

static cublasLtHandle_t lt_handle;
static void *lt_workspace;
static lt_plan lt_cache[CACHE_SLOTS];

static const char *lt_status(cublasStatus_t s) {
    static __thread char buf[48];
    if (lt.GetStatusName) return lt.GetStatusName(s);
    snprintf(buf, sizeof buf, "cuBLAS status %d", (int)s);
    return buf;
}

vram_status vram_cuda_blas_open(char *why, size_t cap) {
    if (!lt.lib) {
        const char *env = getenv("VRAM_CUBLASLT");
        const char *tries[] = {env && *env ? env : NULL, "libcublasLt.so.13", "libcublasLt.so",
                               "/usr/local/cuda/lib64/libcublasLt.so.13"};
        void *lib = NULL;
        for (size_t i = 0; i < sizeof tries / sizeof *tries && !lib; i++)
            if (tries[i]) lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            snprintf(why, cap, "cuBLASLt not found (tried $VRAM_CUBLASLT, libcublasLt.so.13, libcublasLt.so and "
                               "/usr/local/cuda/lib64: install the CUDA toolkit's cuBLAS or set VRAM_CUBLASLT)");
            return VRAM_ERR_NO_DEVICE;
        }
        static const vram_cuda_sym syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(lt), field)}
            SYM(Create, "cublasLtCreate"), SYM(Destroy, "cublasLtDestroy"),
            SYM(DescCreate, "cublasLtMatmulDescCreate"), SYM(DescDestroy, "cublasLtMatmulDescDestroy"),
            SYM(DescSet, "cublasLtMatmulDescSetAttribute"), SYM(LayoutCreate, "cublasLtMatrixLayoutCreate"),
            SYM(LayoutDestroy, "cublasLtMatrixLayoutDestroy"), SYM(LayoutSet, "cublasLtMatrixLayoutSetAttribute"),
            SYM(PrefCreate, "cublasLtMatmulPreferenceCreate"), SYM(PrefDestroy, "cublasLtMatmulPreferenceDestroy"),
            SYM(PrefSet, "cublasLtMatmulPreferenceSetAttribute"), SYM(Heuristic, "cublasLtMatmulAlgoGetHeuristic"),
            SYM(Matmul, "cublasLtMatmul"),
#undef SYM
        };
        const char *missing = vram_cuda_resolve(lib, syms, sizeof syms / sizeof *syms, &lt);
        if (missing) {
            snprintf(why, cap, "cuBLASLt lacks %s (too old?)", missing);
            dlclose(lib);
            memset(&lt, 0, sizeof lt);
            return VRAM_ERR_NO_DEVICE;
        }
        *(void **)&lt.GetStatusName = dlsym(lib, "cublasLtGetStatusName");
        *(void **)&lt.CapGet = dlsym(lib, "cublasLtMatmulAlgoCapGetAttribute");
        *(void **)&lt.ConfigSet = dlsym(lib, "cublasLtMatmulAlgoConfigSetAttribute");
        *(void **)&lt.ConfigGet = dlsym(lib, "cublasLtMatmulAlgoConfigGetAttribute");
        *(void **)&lt.Check = dlsym(lib, "cublasLtMatmulAlgoCheck");
        lt.lib = lib;
    }
    cublasStatus_t st = lt.Create(&lt_handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, cap, "cublasLtCreate failed: %s", lt_status(st));
        return VRAM_ERR_DRIVER;
    }
    vram_runtime *rt = vram_cuda_state.rt;
    vram_status s = vram_allocator_malloc(rt->alloc, WORKSPACE_BYTES, rt->stream, VRAM_TAG_OTHER, &lt_workspace);
    if (s != VRAM_OK) {
        snprintf(why, cap, "no memory for cuBLASLt's %d MiB workspace: %s", WORKSPACE_BYTES >> 20, vram_last_error());
        lt.Destroy(lt_handle);
        return s;
    }
    return VRAM_OK;
}

static void plan_drop_candidates(lt_plan *p) {
    free(p->candidates);
    free(p->splits);
    p->candidates = NULL;
    p->splits = NULL;
    p->n_candidates = 0;
}

static void plan_release(lt_plan *p) {
    plan_drop_candidates(p);
    if (!p->used) return;
    p->used = 0;
    if (p->unsupported) return; /* its descriptors went when it was found unsupported */
    if (p->lx) lt.LayoutDestroy(p->lx);
    if (p->ly) lt.LayoutDestroy(p->ly);
    if (p->ld) lt.LayoutDestroy(p->ld);
    if (p->desc) lt.DescDestroy(p->desc);
    p->lx = p->ly = p->ld = NULL;
    p->desc = NULL;
}

void vram_cuda_blas_close(void) {
    for (int i = 0; i < CACHE_SLOTS; i++) plan_release(&lt_cache[i]);
    if (lt_workspace) vram_allocator_free(vram_cuda_state.rt->alloc, lt_workspace);
    lt_workspace = NULL;
    if (lt_handle) lt.Destroy(lt_handle);
    lt_handle = NULL;
}

/* How to read the column-major matrix P (rows x cols, P[i][j] at i*s_row + j*s_col) in place:
 * as stored (op N, leading dimension s_col) or as the transpose of a stored matrix (op T,
 * leading dimension s_row). Returns 0 when neither layout fits. */
static int pick_layout(int64_t rows, int64_t cols, int64_t s_row, int64_t s_col, int *op, int64_t *lrows, int64_t *lcols,
                       int64_t *ld) {
    /* a dimension of size 1 takes any stride: the one that makes the layout valid */
    int64_t ld_n = cols == 1 ? rows : s_col, ld_t = rows == 1 ? cols : s_row;
    if ((rows == 1 || s_row == 1) && ld_n >= rows) {
        *op = CUBLAS_OP_N, *lrows = rows, *lcols = cols, *ld = ld_n;
        return 1;
    }
    if ((cols == 1 || s_col == 1) && ld_t >= cols) {
        *op = CUBLAS_OP_T, *lrows = cols, *lcols = rows, *ld = ld_t;
        return 1;
    }
    return 0;
}

static int64_t alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int64_t al = 256;
    while (al > 1 && a % (uintptr_t)al) al >>= 1;
    return al;
}

static cudaDataType_t cuda_type(vram_dtype dt) {
    switch (dt) {
    case VRAM_DTYPE_F64: return CUDA_R_64F;
    case VRAM_DTYPE_F16: return CUDA_R_16F;
    case VRAM_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

/* How many of the heuristic's candidates to time: VRAM_CUBLASLT_TUNE (0 or 1: its first alone). */
static int tune_count(void) {
    const char *tune = getenv("VRAM_CUBLASLT_TUNE");
    if (!tune || !*tune) return TUNE_ALGOS;
    char *end;
    long n = strtol(tune, &end, 10);
    if (*end || n < 0) {
        vram_cuda_fail(VRAM_ERR_INVALID_ARG, "VRAM_CUBLASLT_TUNE=%s: expected a count of candidates (0: the heuristic's first)",
                       tune);
        return 1;
    }
    if (n < 1) return 1;
    return n > MAX_HEURISTIC ? MAX_HEURISTIC : (int)n;
}

/* Candidate c split over K into `splits` parts, reduced in the compute type (deterministic), if
 * the algorithm allows it and cuBLASLt accepts it for this product within the workspace. */
static int split_variant(lt_plan *p, const cublasLtMatmulAlgo_t *a, int32_t splits, cublasLtMatmulAlgo_t *out) {
    int32_t can = 0, now = 1;
    uint32_t schemes = 0, scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    size_t w = 0;
    if (lt.CapGet(a, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &can, sizeof can, &w) != CUBLAS_STATUS_SUCCESS || !can) return 0;
    if (lt.CapGet(a, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes, &w) != CUBLAS_STATUS_SUCCESS ||
        !(schemes & scheme))
        return 0;
    if (lt.ConfigGet(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &now, sizeof now, &w) != CUBLAS_STATUS_SUCCESS || now > 1) return 0;
    *out = *a;
    cublasLtMatmulHeuristicResult_t r;
    return lt.ConfigSet(out, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits) == CUBLAS_STATUS_SUCCESS &&
           lt.ConfigSet(out, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme) == CUBLAS_STATUS_SUCCESS &&
           lt.Check(lt_handle, p->desc, p->lx, p->ly, p->ld, p->ld, out, &r) == CUBLAS_STATUS_SUCCESS &&
           r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= WORKSPACE_BYTES;
}

/* The candidates to time: the heuristic's, then with VRAM_CUBLASLT_SPLITK=1 (for a long sum,
 * where a product has too few output tiles to fill the GPU) its first few split over K in 2, 3
 * and 4 parts. */
static void add_candidates(lt_plan *p, const cublasLtMatmulHeuristicResult_t *res, int found, int64_t K) {
    p->candidates = malloc(sizeof *p->candidates * MAX_CANDIDATES);
    p->splits = malloc(sizeof *p->splits * MAX_CANDIDATES);
    if (!p->candidates || !p->splits) { /* no room to tune: the heuristic's first */
        plan_drop_candidates(p);
        return;
    }
    for (int i = 0; i < found; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) {
            p->splits[p->n_candidates] = 1;
            p->candidates[p->n_candidates++] = res[i].algo;
        }
    const char *sk = getenv("VRAM_CUBLASLT_SPLITK");
    if (sk && *sk && strcmp(sk, "0") && strcmp(sk, "1") && strcmp(sk, "only")) {
        vram_cuda_fail(VRAM_ERR_INVALID_ARG, "VRAM_CUBLASLT_SPLITK=%s: expected 0, 1 or only", sk);
        return;
    }
    if (!sk || !*sk || !strcmp(sk, "0") || K < 2048 || !lt.CapGet || !lt.ConfigSet || !lt.ConfigGet || !lt.Check) return;
    int heuristic = p->n_candidates;
    for (int i = 0; i < heuristic && i < SPLITK_FROM; i++)
        for (int32_t parts = 2; parts <= 4 && p->n_candidates < MAX_CANDIDATES; parts++)
            if (split_variant(p, &p->candidates[i], parts, &p->candidates[p->n_candidates]))
                p->splits[p->n_candidates++] = parts;
    if (sk && !strcmp(sk, "only") && p->n_candidates > heuristic) { /* the tests' way onto the split path */
        memmove(p->candidates, p->candidates + heuristic, sizeof *p->candidates * (size_t)(p->n_candidates - heuristic));
        memmove(p->splits, p->splits + heuristic, sizeof *p->splits * (size_t)(p->n_candidates - heuristic));
        p->n_candidates -= heuristic;
        p->algo = p->candidates[0];
        if (p->n_candidates == 1) vram_cuda_splitk_chosen++; /* not timed: it runs as the only one */
    }
}

static lt_plan *plan_get(vram_dtype dt, vram_dtype c_dt, int64_t batch, int64_t M, int64_t N, int64_t K, int opx, int64_t xr, int64_t xc,
                         int64_t ldx, int64_t sx_b, int opy, int64_t yr, int64_t yc, int64_t ldy, int64_t sy_b,
                         int64_t alx, int64_t aly, int64_t alc, int epi, const void *aux, const void *bias) {
    int64_t key[KEY_LEN] = {dt,  batch, M,   N,   K,   opx,  ldx, sx_b, opy,
                            ldy, sy_b,  alx, aly, alc, epi, c_dt, aux ? alignment(aux) : 0, bias ? alignment(bias) : 0};
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < KEY_LEN; i++) h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    lt_plan *p = &lt_cache[h % CACHE_SLOTS];
    for (int probe = 0; probe < 8; probe++) {
        lt_plan *q = &lt_cache[(h + (uint64_t)probe) % CACHE_SLOTS];
        if (q->used && !memcmp(q->key, key, sizeof key)) return q;
        if (!q->used) {
            p = q;
            break;
        }
    }
    plan_release(p); /* a full neighbourhood: the first slot makes room */
    p->lx = p->ly = p->ld = NULL;
    p->desc = NULL;
    cudaDataType_t ty = cuda_type(dt), tc = cuda_type(c_dt);
    cublasComputeType_t ct = dt == VRAM_DTYPE_F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    cublasStatus_t st = lt.DescCreate(&p->desc, ct, dt == VRAM_DTYPE_F64 ? CUDA_R_64F : CUDA_R_32F);
    int32_t tx = opx, ty_op = opy;
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &tx, sizeof tx);
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &ty_op, sizeof ty_op);
    if (st == CUBLAS_STATUS_SUCCESS && epi != EPI_NONE) {
        cublasLtEpilogue_t e = epi == EPI_BIAS           ? CUBLASLT_EPILOGUE_BIAS
                               : epi == EPI_GELU_AUX      ? CUBLASLT_EPILOGUE_GELU_AUX
                               : epi == EPI_GELU_AUX_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                               : epi == EPI_DGELU         ? CUBLASLT_EPILOGUE_DGELU
                                                          : CUBLASLT_EPILOGUE_BGRADB;
        st = lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    }
    if (st == CUBLAS_STATUS_SUCCESS && epi == EPI_BGRADB_LOWP) {
        int32_t bt = (int32_t)ty;
        st = lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    }
    if (st == CUBLAS_STATUS_SUCCESS && aux) { /* the GELU's input: D's shape, contiguous, D's dtype */
        int64_t aux_ld = N;
        st = lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
        if (st == CUBLAS_STATUS_SUCCESS) st = lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    }
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.LayoutCreate(&p->lx, ty, (uint64_t)xr, (uint64_t)xc, ldx);
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.LayoutCreate(&p->ly, ty, (uint64_t)yr, (uint64_t)yc, ldy);
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.LayoutCreate(&p->ld, tc, (uint64_t)N, (uint64_t)M, N);
    if (st == CUBLAS_STATUS_SUCCESS && batch > 1) {
        int32_t b = (int32_t)batch;
        int64_t sd = M * N;
        lt.LayoutSet(p->lx, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b);
        lt.LayoutSet(p->ly, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b);
        lt.LayoutSet(p->ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b);
        lt.LayoutSet(p->lx, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sx_b, sizeof sx_b);
        lt.LayoutSet(p->ly, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sy_b, sizeof sy_b);
        st = lt.LayoutSet(p->ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sd, sizeof sd);
    }
    cublasLtMatmulPreference_t pref = NULL;
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.PrefCreate(&pref);
    if (st == CUBLAS_STATUS_SUCCESS) {
        uint64_t ws = WORKSPACE_BYTES;
        uint32_t ax = (uint32_t)alx, ay = (uint32_t)aly, ac = (uint32_t)alc;
        lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &ax, sizeof ax);
        lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ay, sizeof ay);
        lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac);
        lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof ac);
        cublasLtMatmulHeuristicResult_t res[MAX_HEURISTIC];
        int found = 0, want = tune_count();
        st = lt.Heuristic(lt_handle, p->desc, p->lx, p->ly, p->ld, p->ld, pref, want, res, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found < 1) st = CUBLAS_STATUS_NOT_SUPPORTED;
        if (st == CUBLAS_STATUS_SUCCESS) {
            p->algo = res[0].algo;
            if (want > 1) add_candidates(p, res, found, K);
        }
        lt.PrefDestroy(pref);
    }
    memcpy(p->key, key, sizeof key);
    p->used = 1;
    p->unsupported = 0;
    if (st != CUBLAS_STATUS_SUCCESS && epi >= EPI_GELU_AUX) { /* remembered: the caller runs it unfused */
        plan_release(p);
        p->used = p->unsupported = 1;
        const char *what = epi == EPI_BGRADB        ? "bias-gradient"
                           : epi == EPI_BGRADB_LOWP ? "16-bit bias-gradient"
                                                    : "GELU";
        if (vram_cuda_profiling())
            fprintf(stderr, "cuBLASLt has no %s epilogue for [%lld x %lld] @ [%lld x %lld] (%s into %s): %s; separate "
                    "kernels\n", what, (long long)M, (long long)K, (long long)K, (long long)N, vram_dtype_name(dt),
                    vram_dtype_name(c_dt), lt_status(st));
        return p;
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        plan_release(p);
        vram_cuda_fail(VRAM_ERR_DRIVER, "cuBLASLt has no product for %lld x [%lld x %lld] @ [%lld x %lld] (%s): %s",
                       (long long)batch, (long long)M, (long long)K, (long long)K, (long long)N, vram_dtype_name(dt),
                       lt_status(st));
        return NULL;
    }
    return p;
}

/* Times each candidate algorithm on the real operands (a warm-up run, then TUNE_RUNS) and keeps
 * the fastest. Only for products that overwrite C, which the timed runs write. */
static void tune_plan(lt_plan *p, const void *alpha, const void *beta, const void *A, const void *B, void *C,
                      int64_t batch, int64_t M, int64_t N, int64_t K) {
    double best = -1, first = -1;
    int won = 0;
    for (int c = 0; c < p->n_candidates; c++) {
        double ms = 0;
        for (int run = 0; run <= TUNE_RUNS && ms >= 0; run++) {
            if (run == 1) vram_cuda_timer_start();
            if (lt.Matmul(lt_handle, p->desc, alpha, B, p->lx, A, p->ly, beta, C, p->ld, C, p->ld, &p->candidates[c],
                          lt_workspace, WORKSPACE_BYTES, (cudaStream_t)vram_cuda_state.stream) != CUBLAS_STATUS_SUCCESS)
                ms = -1;
        }
        if (ms >= 0) ms = vram_cuda_timer_stop();
        if (c == 0) first = ms;
        if (ms >= 0 && (best < 0 || ms < best)) best = ms, p->algo = p->candidates[c], won = c;
    }
    if (best >= 0 && p->splits[won] > 1) vram_cuda_splitk_chosen++;
    if (vram_cuda_profiling())
        fprintf(stderr, "cuBLASLt %lld x [%lld x %lld] @ [%lld x %lld]: the heuristic's first %.1f us, the best of %d %.1f us "
                "(candidate %d, K split in %d)\n", (long long)batch, (long long)M, (long long)K, (long long)K, (long long)N,
                1e3 * first / TUNE_RUNS, p->n_candidates, 1e3 * best / TUNE_RUNS, won, p->splits[won]);
}

/* A contiguous [batch, rows, cols] copy of a strided operand, from the allocator. */
static void *contiguous_copy(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t rows, int64_t cols, const void *src,
                             int64_t s_b, int64_t s_r, int64_t s_c) {
    void *tmp = NULL;
    size_t bytes = (size_t)(batch * rows * cols) * vram_dtype_size(dt);
    if (vram_allocator_malloc(rt->alloc, bytes ? bytes : 1, rt->stream, VRAM_TAG_TEMPORARY, &tmp) != VRAM_OK) {
        vram_cuda_fail(VRAM_ERR_OUT_OF_MEMORY, "matrix product: no memory for a %zu-byte contiguous operand", bytes);
        return NULL;
    }
    vram_kview d = {.data = tmp, .dtype = dt, .ndim = 3, .shape = {batch, rows, cols}, .strides = {rows * cols, cols, 1}};
    vram_kview s = {.data = (char *)src, .dtype = dt, .ndim = 3, .shape = {batch, rows, cols}, .strides = {s_b, s_r, s_c}};
    vram_cuda_kernels.copy(&d, &s);
    return tmp;
}

/* C = A @ B (+ C if accumulate) (+ bias over columns when bias is not NULL: no batch, no accumulate).
 * A and B in dt, C and the bias in c_dt. With a GELU epilogue (gelu != EPI_NONE: 16-bit, no
 * batch, no accumulate, aux [M, N] contiguous in dt): EPI_GELU_AUX(_BIAS) writes the product
 * (+ bias) to aux and its GELU to C; EPI_DGELU multiplies the product by GELU's derivative at
 * aux. Returns 0 when cuBLASLt has no such fused product (nothing ran: the caller runs it
 * unfused), else 1. */
static int matmul(vram_runtime *rt, vram_dtype dt, vram_dtype c_dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                  int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                  void *C, int accumulate, const void *bias, int gelu, const void *aux) {
    if (vram_cuda_state.error != VRAM_OK || batch <= 0 || M <= 0 || N <= 0) return 1;
    /* "0": measure (and test) the unfused path */
    const char *off = gelu == EPI_NONE ? NULL : getenv(gelu >= EPI_BGRADB ? "VRAM_BGRAD_EPILOGUE" : "VRAM_GELU_EPILOGUE");
    if (gelu != EPI_NONE && (K <= 0 || (off && !strcmp(off, "0")))) return 0; /* (an empty sum: unfused too) */
    if (K <= 0) { /* an empty sum: C = 0 (or unchanged) */
        if (!accumulate) vram_cuda_zero(C, (size_t)(batch * M * N) * vram_dtype_size(c_dt));
        return 1;
    }
    int lowp = dt == VRAM_DTYPE_F16 || dt == VRAM_DTYPE_BF16;
    if (!(dt == VRAM_DTYPE_F32 || dt == VRAM_DTYPE_F64 || lowp) || !(c_dt == dt || (lowp && c_dt == VRAM_DTYPE_F32))) {
        vram_cuda_fail(VRAM_ERR_UNSUPPORTED, "matrix product: %s operands into %s on the GPU (f32, f64, or f16/bf16 into "
                       "their own dtype or f32)", vram_dtype_name(dt), vram_dtype_name(c_dt));
        return 1;
    }
    if (batch == 1) sa_b = sb_b = 0;
    /* X = B^T (N x K) is cuBLASLt's A; Y = A^T (K x M) its B */
    int opx, opy;
    int64_t xr, xc, ldx, yr, yc, ldy;
    void *tmp_a = NULL, *tmp_b = NULL;
    if (!pick_layout(N, K, sb_n, sb_k, &opx, &xr, &xc, &ldx)) {
        tmp_b = contiguous_copy(rt, dt, batch, K, N, B, sb_b, sb_k, sb_n);
        if (!tmp_b) return 1;
        B = tmp_b, sb_b = batch > 1 ? K * N : 0, sb_k = N, sb_n = 1;
        pick_layout(N, K, sb_n, sb_k, &opx, &xr, &xc, &ldx);
    }
    if (!pick_layout(K, M, sa_k, sa_m, &opy, &yr, &yc, &ldy)) {
        tmp_a = contiguous_copy(rt, dt, batch, M, K, A, sa_b, sa_m, sa_k);
        if (!tmp_a) {
            if (tmp_b) vram_allocator_free(rt->alloc, tmp_b);
            return 1;
        }
        A = tmp_a, sa_b = batch > 1 ? M * K : 0, sa_m = K, sa_k = 1;
        pick_layout(K, M, sa_k, sa_m, &opy, &yr, &yc, &ldy);
    }
    int epi = gelu != EPI_NONE ? gelu + (gelu == EPI_GELU_AUX && bias) : bias ? EPI_BIAS : EPI_NONE;
    lt_plan *p = plan_get(dt, c_dt, batch, M, N, K, opx, xr, xc, ldx, sb_b, opy, yr, yc, ldy, sa_b, alignment(B), alignment(A),
                          alignment(C), epi, aux, bias);
    int ran = !(p && p->unsupported);
    if (!ran) p = NULL;
    if (p && bias && lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) != CUBLAS_STATUS_SUCCESS) {
        vram_cuda_fail(VRAM_ERR_DRIVER, "cuBLASLt refused a bias pointer");
        p = NULL;
    }
    if (p && aux && lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux) != CUBLAS_STATUS_SUCCESS) {
        vram_cuda_fail(VRAM_ERR_DRIVER, "cuBLASLt refused an epilogue's aux pointer");
        p = NULL;
    }
    if (p) {
        float a32 = 1.0f, b32 = accumulate ? 1.0f : 0.0f;
        double a64 = 1.0, b64 = accumulate ? 1.0 : 0.0;
        const void *alpha = dt == VRAM_DTYPE_F64 ? (const void *)&a64 : (const void *)&a32;
        const void *beta = dt == VRAM_DTYPE_F64 ? (const void *)&b64 : (const void *)&b32;
        if (p->n_candidates > 1 && !accumulate) tune_plan(p, alpha, beta, A, B, C, batch, M, N, K);
        plan_drop_candidates(p);
        int tok = vram_cuda_prof_begin();
        cublasStatus_t st = lt.Matmul(lt_handle, p->desc, alpha, B, p->lx, A, p->ly, beta, C, p->ld, C, p->ld, &p->algo,
                                      lt_workspace, WORKSPACE_BYTES, (cudaStream_t)vram_cuda_state.stream);
        vram_cuda_prof_end(tok, CK_PROF_MATMUL);
        if (st != CUBLAS_STATUS_SUCCESS && epi >= EPI_GELU_AUX && st != CUBLAS_STATUS_EXECUTION_FAILED) {
            /* an optional epilogue the heuristic offered but the product refused: remembered as
             * unsupported, and the caller runs it unfused (these products overwrite their outputs) */
            if (vram_cuda_profiling())
                fprintf(stderr, "cuBLASLt refused the epilogue %d it offered for [%lld x %lld] @ [%lld x %lld]: %s; "
                        "separate kernels\n", epi, (long long)M, (long long)K, (long long)K, (long long)N, lt_status(st));
            plan_release(p);
            p->used = p->unsupported = 1;
            ran = 0;
        } else if (st != CUBLAS_STATUS_SUCCESS) {
            vram_cuda_fail(VRAM_ERR_DRIVER, "cuBLASLt product %lld x [%lld x %lld] @ [%lld x %lld] failed: %s",
                           (long long)batch, (long long)M, (long long)K, (long long)K, (long long)N, lt_status(st));
        }
    }
    /* stream order keeps the temporaries alive until the product has read them */
    if (tmp_a) vram_allocator_free(rt->alloc, tmp_a);
    if (tmp_b) vram_allocator_free(rt->alloc, tmp_b);
    return ran;
}

void vram_cuda_matmul(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                      int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                      void *C, int accumulate) {
    matmul(rt, dt, dt, batch, M, N, K, A, sa_b, sa_m, sa_k, B, sb_b, sb_k, sb_n, C, accumulate, NULL, EPI_NONE, NULL);
}

void vram_cuda_matmul_bias(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t sa_m,
                           int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C, const void *bias) {
    matmul(rt, dt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, C, 0, bias, EPI_NONE, NULL);
}

void vram_cuda_matmul_lowp(vram_runtime *rt, vram_dtype ab_dt, vram_dtype c_dt, int64_t batch, int64_t M, int64_t N,
                           int64_t K, const void *A, int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b,
                           int64_t sb_k, int64_t sb_n, void *C, int accumulate, const void *bias) {
    matmul(rt, ab_dt, c_dt, batch, M, N, K, A, sa_b, sa_m, sa_k, B, sb_b, sb_k, sb_n, C, accumulate, bias, EPI_NONE, NULL);
}

/* Where cuBLASLt has no fused product, the product and then the elementwise kernel (the same
 * buffers: nothing more is allocated either way). */
void vram_cuda_matmul_lowp_gelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *pre, void *out,
                                const void *bias) {
    if (matmul(rt, dt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, out, 0, bias, EPI_GELU_AUX, pre)) return;
    matmul(rt, dt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, pre, 0, bias, EPI_NONE, NULL);
    vram_cuda_kernels.unary(VRAM_UN_GELU_TANH, 0, dt, M * N, out, pre);
}

void vram_cuda_matmul_lowp_dgelu(vram_runtime *rt, vram_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                                 int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_k, int64_t sb_n, void *C,
                                 const void *pre) {
    if (matmul(rt, dt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, C, 0, NULL, EPI_DGELU, pre)) return;
    matmul(rt, dt, dt, 1, M, N, K, A, 0, sa_m, sa_k, B, 0, sb_k, sb_n, C, 0, NULL, EPI_NONE, NULL);
    vram_cuda_kernels.unary_backward(VRAM_UN_GELU_TANH, 0, dt, M * N, C, C, pre);
}

/* The count of bias gradients that came out of a weight gradient's product (the tests read it). */
int64_t vram_cuda_epilogue_bgrads, vram_cuda_splitk_chosen;

/* gw [out_f, in_f] (f32) = g^T @ a with g [rows, ld] and a [rows, in_f] 16-bit, and gb [out_f]
 * (f32, may be NULL) = the column sums of g's first out_f columns. The sums come out of the
 * product's BGRADB epilogue (cuBLASLt's B is g read transposed: its column sums over the "k"
 * dimension, rows): in f32, C's dtype, or where the heuristic has none for that, in the
 * 16-bit dtype into the scratch memory and widened by a copy. Where it has neither (or with
 * VRAM_BGRAD_EPILOGUE=0), the product runs plain and the column-sum kernel after it. Nothing
 * is allocated on any of the paths. */
void vram_cuda_matmul_lowp_wgrad(vram_runtime *rt, vram_dtype dt, int64_t rows, int64_t out_f, int64_t in_f,
                                 const void *g, int64_t ld, const void *a, float *gw, float *gb) {
    if (gb && rows > 0 && in_f > 0 &&
        matmul(rt, dt, VRAM_DTYPE_F32, 1, out_f, in_f, rows, g, 0, 1, ld, a, 0, in_f, 1, gw, 0, gb, EPI_BGRADB, NULL)) {
        if (vram_cuda_state.error == VRAM_OK) vram_cuda_epilogue_bgrads++;
        return;
    }
    void *lowp = vram_cuda_state.scratch;
    if (gb && rows > 0 && in_f > 0 && (size_t)out_f * 2 <= CUDA_SCRATCH_BYTES &&
        matmul(rt, dt, VRAM_DTYPE_F32, 1, out_f, in_f, rows, g, 0, 1, ld, a, 0, in_f, 1, gw, 0, lowp, EPI_BGRADB_LOWP,
               NULL)) {
        vram_kview dst = {.data = (char *)gb, .dtype = VRAM_DTYPE_F32, .ndim = 1, .shape = {out_f}, .strides = {1}};
        vram_kview src = {.data = (char *)lowp, .dtype = dt, .ndim = 1, .shape = {out_f}, .strides = {1}};
        vram_cuda_kernels.copy(&dst, &src);
        if (vram_cuda_state.error == VRAM_OK) vram_cuda_epilogue_bgrads++;
        return;
    }
    matmul(rt, dt, VRAM_DTYPE_F32, 1, out_f, in_f, rows, g, 0, 1, ld, a, 0, in_f, 1, gw, 0, NULL, EPI_NONE, NULL);
    if (gb) vram_cuda_kernels.column_sum_lowp(dt, rows, out_f, ld, g, gb);
}

#endif
