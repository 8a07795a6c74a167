/* cuda_ops.c — the CUDA kernel table (vram_cuda_kernels): each slot of vram_kernels as launches
 * of the kernels in cuda_kernels.cu on the runtime's compute stream; matrix products are
 * cuda_blas.c's, and flash attention is cuDNN's (cuda_cudnn_attention.c) wherever cuDNN can run
 * the shape, unless VRAM_ATTENTION=flash asks for the own kernels.
 *
 * Strided slots first merge dimensions: size-1 dimensions go, and two neighbours merge where
 * every operand walks them as one (stride[d] = stride[d+1] * shape[d+1]), so a contiguous
 * tensor is one dimension and the kernels' index arithmetic stays short. A same-dtype copy
 * that is contiguous on both sides is a plain device copy. Slots that return a number to the
 * host (cross-entropy's loss, the sum of squares) reduce on the device into scratch memory and
 * read back the one value.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_abi.h"
#include "cuda_infer.h"
#include "cuda_rt.h"

enum { THREADS = 256 };

/* Merges dims of `ops` operands (strides st[o]) over `shape` into g. */
static void geom_build(int nd, const int64_t *shape, int ops, const int64_t *const *st, vk_geom *g) {
    memset(g, 0, sizeof *g);
    g->n = 1;
    for (int d = 0; d < nd; d++) {
        g->n *= shape[d];
        if (shape[d] == 1) continue;
        int k = g->nd;
        if (k > 0) {
            int merge = 1;
            for (int o = 0; o < ops; o++) merge &= g->st[o][k - 1] == st[o][d] * shape[d];
            if (merge) {
                g->shape[k - 1] *= shape[d];
                for (int o = 0; o < ops; o++) g->st[o][k - 1] = st[o][d];
                continue;
            }
        }
        g->shape[k] = shape[d];
        for (int o = 0; o < ops; o++) g->st[o][k] = st[o][d];
        g->nd++;
    }
}

static int geom_contiguous(const vk_geom *g, int ops) {
    if (g->nd > 1) return 0;
    for (int o = 0; o < ops; o++)
        if (g->nd == 1 && g->st[o][0] != 1) return 0;
    return 1;
}

static void launch_geom(int k, vk_geom *g, void **rest_args, int n_rest) {
    void *args[8];
    args[0] = g;
    for (int i = 0; i < n_rest; i++) args[1 + i] = rest_args[i];
    vram_cuda_launch(k, vram_cuda_blocks(g->n, THREADS), THREADS, args);
}

/* Rewrites g in 16-byte units where both operands' inner dimension is contiguous and every
 * other stride, the inner length and both addresses are multiples of 16 bytes; else 0. */
static int copy16_geom(vk_geom *g, size_t es, const char *d, const char *s) {
    int64_t per = 16 / (int64_t)es, nd = g->nd;
    if (es > 16 || nd == 0 || ((uintptr_t)d | (uintptr_t)s) % 16 || g->shape[nd - 1] % per) return 0;
    for (int o = 0; o < 2; o++) {
        if (g->st[o][nd - 1] != 1) return 0;
        for (int k = 0; k < nd - 1; k++)
            if (g->st[o][k] % per) return 0;
    }
    g->shape[nd - 1] /= per;
    g->n /= per;
    for (int o = 0; o < 2; o++)
        for (int k = 0; k < nd - 1; k++) g->st[o][k] /= per;
    return 1;
}

static void cuda_copy(const vram_kview *dst, const vram_kview *src) {
    const int64_t *st[2] = {dst->strides, src->strides};
    vk_geom g;
    geom_build(src->ndim, src->shape, 2, st, &g);
    if (g.n == 0) return;
    if (dst->dtype == src->dtype && geom_contiguous(&g, 2)) {
        vram_cuda_copy_d2d(dst->data, src->data, (size_t)g.n * vram_dtype_size(dst->dtype));
        return;
    }
    int ddt = dst->dtype, sdt = src->dtype;
    char *d = dst->data;
    const char *s = src->data;
    if (dst->dtype == src->dtype && copy16_geom(&g, vram_dtype_size(dst->dtype), d, s)) {
        void *rest[] = {&d, &s};
        launch_geom(CK_COPY16, &g, rest, 2);
        return;
    }
    void *rest[] = {&d, &ddt, &s, &sdt};
    launch_geom(CK_COPY, &g, rest, 4);
}

static void cuda_fill(const vram_kview *dst, double v) {
    const int64_t *st[1] = {dst->strides};
    vk_geom g;
    geom_build(dst->ndim, dst->shape, 1, st, &g);
    if (g.n == 0) return;
    if (v == 0 && geom_contiguous(&g, 1)) {
        vram_cuda_zero(dst->data, (size_t)g.n * vram_dtype_size(dst->dtype));
        return;
    }
    int dt = dst->dtype;
    char *d = dst->data;
    void *rest[] = {&d, &dt, &v};
    launch_geom(CK_FILL, &g, rest, 3);
}

static void cuda_binary(int op, const vram_kview *out, const vram_kview *a, const vram_kview *b) {
    const int64_t *st[3] = {out->strides, a->strides, b->strides};
    vk_geom g;
    geom_build(out->ndim, out->shape, 3, st, &g);
    if (g.n == 0) return;
    int dt = out->dtype, bdt = b->dtype; /* (b f16/bf16 under f32 a and out: a mixed add) */
    char *o = out->data;
    const char *x = a->data, *y = b->data;
    void *rest[] = {&op, &dt, &o, &x, &y, &bdt};
    launch_geom(CK_BINARY, &g, rest, 6);
}

/* dst += src over src's shape; dims where dst's stride is 0 are summed (a broadcast's inverse). */
static void cuda_accumulate(const vram_kview *dst, const vram_kview *src) {
    int64_t kshape[MAXD] = {0}, kd[MAXD] = {0}, ks[MAXD] = {0};
    vk_red r;
    memset(&r, 0, sizeof r);
    r.n = 1;
    int nk = 0;
    for (int d = 0; d < src->ndim; d++) {
        if (src->shape[d] == 0) return;
        if (src->shape[d] == 1) continue;
        if (dst->strides[d] == 0) {
            r.shape[r.nd] = src->shape[d];
            r.st[r.nd++] = src->strides[d];
            r.n *= src->shape[d];
        } else {
            kshape[nk] = src->shape[d];
            kd[nk] = dst->strides[d];
            ks[nk++] = src->strides[d];
        }
    }
    const int64_t *st[2] = {kd, ks};
    vk_geom g;
    geom_build(nk, kshape, 2, st, &g);
    int dt = src->dtype;
    char *d = dst->data;
    const char *s = src->data;
    if (r.nd == 0) {
        void *rest[] = {&dt, &d, &s};
        launch_geom(CK_ACCUMULATE, &g, rest, 3);
        return;
    }
    /* enough (kept element, chunk of reduced positions) threads to fill the GPU */
    int64_t target = (int64_t)(vram_cuda_state.sm_count > 0 ? vram_cuda_state.sm_count : 132) * 2048;
    int64_t chunks = target / (g.n > 0 ? g.n : 1);
    if (chunks < 1) chunks = 1;
    if (chunks > r.n) chunks = r.n;
    int64_t chunk = (r.n + chunks - 1) / chunks;
    if (chunk < 16 && r.n >= 16) chunk = 16;
    chunks = (r.n + chunk - 1) / chunk;
    void *args[] = {&g, &r, &chunk, &dt, &d, &s};
    vram_cuda_launch(CK_REDUCE_ADD, vram_cuda_blocks(g.n * chunks, THREADS), THREADS, args);
}

static void cuda_unary(int op, double p, vram_dtype dt, int64_t n, void *out, const void *x) {
    int d = dt;
    void *args[] = {&op, &p, &d, &n, &out, &x};
    vram_cuda_launch(CK_UNARY, vram_cuda_blocks(n, THREADS), THREADS, args);
}

static void cuda_unary_backward(int op, double p, vram_dtype dt, int64_t n, void *gin, const void *gout,
                                const void *saved) {
    int d = dt;
    void *args[] = {&op, &p, &d, &n, &gin, &gout, &saved};
    vram_cuda_launch(CK_UNARY_BACKWARD, vram_cuda_blocks(n, THREADS), THREADS, args);
}

/* Threads per block for a row of n elements, and blocks for `rows` rows. */
static int row_threads(int64_t n) { return n >= 4096 ? 1024 : n >= 1024 ? 256 : n > 128 ? 128 : 64; }
static int64_t row_blocks(int64_t rows) {
    int64_t cap = (int64_t)(vram_cuda_state.sm_count > 0 ? vram_cuda_state.sm_count : 132) * 64;
    return rows < cap ? rows : cap;
}

static void cuda_softmax(vram_dtype dt, int64_t rows, int64_t n, int64_t causal_t, int log_, void *out, const void *x) {
    int d = dt;
    void *args[] = {&d, &rows, &n, &causal_t, &log_, &out, &x};
    vram_cuda_launch(CK_SOFTMAX, row_blocks(rows), row_threads(n), args);
}

static void cuda_softmax_backward(vram_dtype dt, int64_t rows, int64_t n, int log_, void *gin, const void *gout,
                                  const void *y) {
    int d = dt;
    void *args[] = {&d, &rows, &n, &log_, &gin, &gout, &y};
    vram_cuda_launch(CK_SOFTMAX_BACKWARD, row_blocks(rows), row_threads(n), args);
}

/* Blocks and threads of a layer-norm kernel: 8 rows a block (a warp each) on the kernels' 16-bit
 * fast path, else a block a row. */
static void layer_norm_shape(vram_dtype dt, int64_t rows, int64_t n, int64_t *blocks, int *threads) {
    if ((dt == VRAM_DTYPE_BF16 || dt == VRAM_DTYPE_F16) && n % 256 == 0 && n <= VK_LN_WARP_MAX) {
        *threads = 256;
        *blocks = row_blocks((rows + 7) / 8);
        return;
    }
    *threads = row_threads(n);
    *blocks = row_blocks(rows);
}

/* k: CK_LAYER_NORM, or CK_LAYER_NORM_MIXED (f32 x, out in the 16-bit dt). */
static void layer_norm_launch(int k, vram_dtype dt, int64_t rows, int64_t n, double eps, void *out, const void *x,
                              const void *w, const void *b, void *mean, void *rstd) {
    int d = dt;
    void *args[] = {&d, &rows, &n, &eps, &out, &x, &w, &b, &mean, &rstd};
    int64_t blocks;
    int threads;
    layer_norm_shape(dt, rows, n, &blocks, &threads);
    vram_cuda_launch(k, blocks, threads, args);
}

static void cuda_layer_norm(vram_dtype dt, int64_t rows, int64_t n, double eps, void *out, const void *x, const void *w,
                            const void *b, void *mean, void *rstd) {
    layer_norm_launch(CK_LAYER_NORM, dt, rows, n, eps, out, x, w, b, mean, rstd);
}

static void cuda_layer_norm_mixed(vram_dtype dt, int64_t rows, int64_t n, double eps, void *out, const void *x,
                                  const void *w, const void *b, void *mean, void *rstd) {
    layer_norm_launch(CK_LAYER_NORM_MIXED, dt, rows, n, eps, out, x, w, b, mean, rstd);
}

static void cuda_add_layer_norm(vram_dtype dt, int64_t rows, int64_t n, double eps, void *h, void *out, const void *x,
                                const void *r, const void *w, const void *b, void *mean, void *rstd) {
    int d = dt;
    void *args[] = {&d, &rows, &n, &eps, &h, &out, &x, &r, &w, &b, &mean, &rstd};
    int64_t blocks;
    int threads;
    layer_norm_shape(dt, rows, n, &blocks, &threads);
    vram_cuda_launch(CK_ADD_LAYER_NORM, blocks, threads, args);
}

/* Rows per chunk of a column sum over `rows`, so that n columns x chunks fill the GPU. */
static int64_t column_chunk(int64_t rows, int64_t n) {
    int64_t target = (int64_t)(vram_cuda_state.sm_count > 0 ? vram_cuda_state.sm_count : 132) * 2048;
    int64_t chunks = target / (n > 0 ? n : 1);
    if (chunks < 1) chunks = 1;
    int64_t chunk = (rows + chunks - 1) / chunks;
    return chunk < 8 ? 8 : chunk;
}

/* A kernel switch read at each launch (so a bench or test can time or check both forms in one
 * process): 1 where VAR is "old", 0 where it names the new form, the default (new_default: the
 * new form) where unset, -1 (the runtime's sticky error set, naming both values) for anything else. */
static int old_kernels(const char *var, const char *new_form, int new_default) {
    const char *e = getenv(var);
    if (!e || !*e) return !new_default;
    if (!strcmp(e, "old")) return 1;
    if (!strcmp(e, new_form)) return 0;
    vram_cuda_fail(VRAM_ERR_INVALID_ARG, "%s=%s: expected %s or old", var, e, new_form);
    return -1;
}

/* VRAM_LN_KERNEL=fused: layer norm's one-pass backward where it applies; unset or "old": the pair
 * of kernels (input gradient, then the weight and bias gradients' column sums), the default
 * (the one-pass kernel ran slower on a GPU). */
static int layer_norm_old_kernels(void) { return old_kernels("VRAM_LN_KERNEL", "fused", 0); }

int64_t vram_cuda_ln_fused_backwards;

/* Whether vk_layer_norm_backward_fused takes this backward: 16-bit gout rows of a width that is
 * a multiple of 8 up to VK_LN_WARP_MAX, the 16-byte vectors aligned, an input gradient wanted. */
static int layer_norm_fused_ok(vram_dtype dt, int64_t n, const void *gx, const void *gout, const void *x,
                               const void *w) {
    uintptr_t a = (uintptr_t)gx | (uintptr_t)gout | (uintptr_t)x | (uintptr_t)w;
    return (dt == VRAM_DTYPE_BF16 || dt == VRAM_DTYPE_F16) && gx && n > 0 && n % 8 == 0 && n <= VK_LN_WARP_MAX &&
           (a & 15) == 0;
}

/* mixed: the kernels for f32 x and gx, gout in the 16-bit dt. gx_add: the kernels add gx's rows
 * to what gx holds (each rounded to gx's dtype first, as a separate accumulate would). Under
 * vram_fewer_launches() gw and gb are written, not added to (layer_norm_backward_writes_wb): the
 * pair's input-gradient kernel zeroes them before the column sums run (one memset each where that
 * kernel does not run); the one-pass kernel adds its blocks' sums atomically, so a memset each
 * zeroes them first. */
static void layer_norm_backward_launch(int mixed, vram_dtype dt, int64_t rows, int64_t n, void *gx, int gx_add,
                                       void *gw, void *gb, const void *gout, const void *x, const void *w,
                                       const void *mean, const void *rstd) {
    int d = dt, write = vram_fewer_launches(), old = layer_norm_old_kernels();
    if (old < 0) return;
    size_t wb_bytes = (size_t)n * vram_dtype_size(mixed ? VRAM_DTYPE_F32 : vram_stat_dtype(dt));
    if (!old && layer_norm_fused_ok(dt, n, gx, gout, x, w)) {
        if (write && gw) vram_cuda_zero(gw, wb_bytes);
        if (write && gb) vram_cuda_zero(gb, wb_bytes);
        /* a warp a row, one block an SM (the kernels' launch bounds: 16 warps, 8 for f32 x's
         * registers), each block adding its column sums to gw and gb once */
        int threads = mixed ? 256 : 512, per = threads / 32;
        int64_t cap = vram_cuda_state.sm_count > 0 ? vram_cuda_state.sm_count : 132;
        int64_t blocks = (rows + per - 1) / per < cap ? (rows + per - 1) / per : cap;
        void *args[] = {&d, &rows, &n, &gx, &gx_add, &gw, &gb, &gout, &x, &w, &mean, &rstd};
        if (rows > 0)
            vram_cuda_launch(mixed ? CK_LAYER_NORM_MIXED_BACKWARD_FUSED : CK_LAYER_NORM_BACKWARD_FUSED, blocks, threads,
                             args);
        if (vram_cuda_state.error == VRAM_OK) vram_cuda_ln_fused_backwards++;
        return;
    }
    void *zw = write ? gw : NULL, *zb = write ? gb : NULL;
    int64_t zwords = write ? (int64_t)(wb_bytes / 4) : 0; /* (f32 or f64: whole words) */
    if ((!gx || rows <= 0) && write) { /* (no input-gradient kernel runs) */
        if (gw) vram_cuda_zero(gw, wb_bytes);
        if (gb) vram_cuda_zero(gb, wb_bytes);
    }
    if (gx) {
        void *args[] = {&d, &rows, &n, &gx, &gx_add, &gout, &x, &w, &mean, &rstd, &zw, &zb, &zwords};
        int64_t blocks;
        int threads;
        layer_norm_shape(dt, rows, n, &blocks, &threads);
        vram_cuda_launch(mixed ? CK_LAYER_NORM_MIXED_BACKWARD_X : CK_LAYER_NORM_BACKWARD_X, blocks, threads, args);
    }
    if (gw || gb) {
        int64_t chunk = column_chunk(rows, n), chunks = (rows + chunk - 1) / chunk;
        void *args[] = {&d, &rows, &n, &chunk, &gw, &gb, &gout, &x, &mean, &rstd};
        vram_cuda_launch(mixed ? CK_LAYER_NORM_MIXED_BACKWARD_WB : CK_LAYER_NORM_BACKWARD_WB,
                         vram_cuda_blocks(n * chunks, THREADS), THREADS, args);
    }
}

static void cuda_layer_norm_backward(vram_dtype dt, int64_t rows, int64_t n, void *gx, int gx_add, void *gw, void *gb,
                                     const void *gout, const void *x, const void *w, const void *mean,
                                     const void *rstd) {
    layer_norm_backward_launch(0, dt, rows, n, gx, gx_add, gw, gb, gout, x, w, mean, rstd);
}

static void cuda_layer_norm_mixed_backward(vram_dtype dt, int64_t rows, int64_t n, void *gx, int gx_add, void *gw,
                                           void *gb, const void *gout, const void *x, const void *w, const void *mean,
                                           const void *rstd) {
    layer_norm_backward_launch(1, dt, rows, n, gx, gx_add, gw, gb, gout, x, w, mean, rstd);
}

static void cuda_embedding(vram_dtype dt, int64_t n_ids, int64_t c, void *out, const void *table, const void *ids,
                           vram_dtype id_dt) {
    int d = dt, idt = id_dt;
    void *args[] = {&d, &n_ids, &c, &out, &table, &ids, &idt};
    vram_cuda_launch(CK_EMBEDDING, vram_cuda_blocks(n_ids * c, THREADS), THREADS, args);
}

static void cuda_embedding_backward(vram_dtype dt, int64_t n_ids, int64_t c, void *gtable, const void *gout,
                                    const void *ids, vram_dtype id_dt) {
    int d = dt, idt = id_dt;
    void *args[] = {&d, &n_ids, &c, &gtable, &gout, &ids, &idt};
    vram_cuda_launch(CK_EMBEDDING_BACKWARD, vram_cuda_blocks(n_ids * c, THREADS), THREADS, args);
}

/* Scratch layout: [0, 8) a double result, [8, 16) a double accumulator, [16, 20) an int flag,
 * [64, ...) per-row doubles. */
enum { SCRATCH_ROWS_OFF = 64 };

static double cuda_cross_entropy(vram_dtype dt, int64_t rows, int64_t n, const void *logits, const void *targets,
                                 vram_dtype tdt, void *lse) {
    vram_cuda *g = &vram_cuda_state;
    void *rows_buf = (char *)g->scratch + SCRATCH_ROWS_OFF, *own = NULL;
    if ((size_t)rows * sizeof(double) > CUDA_SCRATCH_BYTES - SCRATCH_ROWS_OFF) {
        if (vram_allocator_malloc(g->rt->alloc, (size_t)rows * sizeof(double), g->rt->stream, VRAM_TAG_TEMPORARY, &own) !=
            VRAM_OK) {
            vram_cuda_fail(VRAM_ERR_OUT_OF_MEMORY, "cross-entropy: no memory for %lld row losses", (long long)rows);
            return NAN;
        }
        rows_buf = own;
    }
    int d = dt, t = tdt;
    void *args[] = {&d, &rows, &n, &logits, &targets, &t, &lse, &rows_buf};
    vram_cuda_launch(CK_CROSS_ENTROPY, row_blocks(rows), row_threads(n), args);
    void *out = g->scratch;
    void *margs[] = {&rows, &rows_buf, &out};
    vram_cuda_launch(CK_MEAN_ROWS, 1, 1024, margs);
    double loss = NAN;
    vram_cuda_download(&loss, g->scratch, sizeof loss);
    if (own) vram_allocator_free(g->rt->alloc, own);
    return g->error == VRAM_OK ? loss : NAN;
}

static void cuda_cross_entropy_backward(vram_dtype dt, int64_t rows, int64_t n, double scale, void *glogits,
                                        const void *logits, const void *targets, vram_dtype tdt, const void *lse) {
    int d = dt, t = tdt;
    void *args[] = {&d, &rows, &n, &scale, &glogits, &logits, &targets, &t, &lse};
    vram_cuda_launch(CK_CROSS_ENTROPY_BACKWARD, vram_cuda_blocks(rows * n, THREADS), THREADS, args);
}

/* Column sums on the 16-bit fast path: blocks of 256 columns times chunks of rows, about eight
 * blocks an SM (vk_column_sum_lowp); else a thread a column of a 128-row chunk. */
static void cuda_column_sum_lowp(vram_dtype dt, int64_t rows, int64_t n, int64_t ld, const void *g, float *out) {
    vram_cuda_zero(out, (size_t)n * sizeof(float));
    if (rows <= 0 || n <= 0) return;
    int d = dt, vec = (dt == VRAM_DTYPE_BF16 || dt == VRAM_DTYPE_F16) && n % 8 == 0 && ld % 8 == 0 && (uintptr_t)g % 16 == 0;
    int64_t chunk = 128, blocks;
    if (vec) {
        int64_t col_blocks = (n / 8 + 31) / 32, sms = vram_cuda_state.sm_count > 0 ? vram_cuda_state.sm_count : 132;
        int64_t chunks = sms * 8 / col_blocks;
        if (chunks < 1) chunks = 1;
        chunk = (rows + chunks - 1) / chunks;
        chunk = chunk < 8 ? 8 : (chunk + 7) / 8 * 8;
        blocks = col_blocks * ((rows + chunk - 1) / chunk);
    } else {
        blocks = vram_cuda_blocks(n * ((rows + chunk - 1) / chunk), THREADS);
    }
    void *args[] = {&d, &vec, &rows, &n, &ld, &chunk, &g, &out};
    vram_cuda_launch(CK_COLUMN_SUM_LOWP, blocks, vec ? 256 : THREADS, args);
}

/* Unset or VRAM_CE_KERNEL=rows: the register kernel where it applies (the default, faster on the
 * GPU); "old": every fused cross-entropy through vk_cross_entropy_fused (two reads of each row). */
static int ce_old_kernel(void) { return old_kernels("VRAM_CE_KERNEL", "rows", 1); }

int64_t vram_cuda_ce_row_launches;

static void cuda_cross_entropy_fused(vram_dtype dt, int64_t rows, int64_t n, int64_t ld, double scale, void *logits,
                                     const void *targets, vram_dtype tdt, double *loss_sum) {
    int d = dt, t = tdt, old = ce_old_kernel();
    if (old < 0) return;
    void *args[] = {&d, &rows, &n, &ld, &scale, &logits, &targets, &t, &loss_sum};
    /* 16-bit rows of whole aligned vectors that fit the block's registers: one read of each row,
     * a block (of the kernel's fixed size) a row */
    int lowp = dt == VRAM_DTYPE_BF16 || dt == VRAM_DTYPE_F16;
    if (!old && lowp && ld % 8 == 0 && ((uintptr_t)logits & 15) == 0 && n <= ld &&
        ld / 8 <= (int64_t)VK_CE_REG_VPT * VK_CE_REG_THREADS && rows <= INT32_MAX) {
        if (rows > 0) vram_cuda_launch(CK_CROSS_ENTROPY_ROWS, rows, VK_CE_REG_THREADS, args);
        if (vram_cuda_state.error == VRAM_OK) vram_cuda_ce_row_launches++;
        return;
    }
    vram_cuda_launch(CK_CROSS_ENTROPY_FUSED, row_blocks(rows), row_threads(n), args);
}

static void cuda_mask_scale(vram_dtype dt, int64_t n, void *out, const void *x, const uint8_t *mask, double scale) {
    int d = dt;
    void *args[] = {&d, &n, &out, &x, &mask, &scale};
    vram_cuda_launch(CK_MASK_SCALE, vram_cuda_blocks(n, THREADS), THREADS, args);
}

static void cuda_im2col(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                        int64_t oh, int64_t ow, const void *x, void *col) {
    int d = dt;
    void *args[] = {&d, &c, &h, &w, &kh, &kw, &stride, &pad, &oh, &ow, &x, &col};
    vram_cuda_launch(CK_IM2COL, vram_cuda_blocks(c * kh * kw * oh * ow, THREADS), THREADS, args);
}

static void cuda_col2im(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                        int64_t oh, int64_t ow, const void *col, void *gx) {
    int d = dt;
    void *args[] = {&d, &c, &h, &w, &kh, &kw, &stride, &pad, &oh, &ow, &col, &gx};
    vram_cuda_launch(CK_COL2IM, vram_cuda_blocks(c * kh * kw * oh * ow, THREADS), THREADS, args);
}

static void cuda_pool2d(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride, int64_t oh,
                        int64_t ow, void *out, const void *x, int32_t *argmax) {
    int d = dt;
    void *args[] = {&d, &is_max, &planes, &h, &w, &k, &stride, &oh, &ow, &out, &x, &argmax};
    vram_cuda_launch(CK_POOL2D, vram_cuda_blocks(planes * oh * ow, THREADS), THREADS, args);
}

static void cuda_pool2d_backward(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride,
                                 int64_t oh, int64_t ow, void *gx, const void *gout, const int32_t *argmax) {
    int d = dt;
    void *args[] = {&d, &is_max, &planes, &h, &w, &k, &stride, &oh, &ow, &gx, &gout, &argmax};
    vram_cuda_launch(CK_POOL2D_BACKWARD, vram_cuda_blocks(planes * oh * ow, THREADS), THREADS, args);
}

static void cuda_sgd_update(vram_dtype dt, int64_t n, void *p, const void *g, void *buf, double lr, double momentum,
                            double wd, int first, const int32_t *skip) {
    int d = dt;
    void *args[] = {&d, &n, &p, &g, &buf, &lr, &momentum, &wd, &first, &skip};
    vram_cuda_launch(CK_SGD_UPDATE, vram_cuda_blocks(n, THREADS), THREADS, args);
}

static void cuda_adam_update(vram_dtype dt, int64_t n, void *p, const void *g, void *m, void *v, double lr, double b1,
                             double b2, double eps, double wd, int decoupled, int64_t step, const int32_t *skip) {
    double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step);
    double step_size = lr / bc1, sbc2 = sqrt(bc2), decay = 1 - lr * wd;
    int d = dt;
    void *args[] = {&d, &n, &p, &g, &m, &v, &step_size, &sbc2, &b1, &b2, &eps, &decay, &wd, &decoupled, &skip};
    vram_cuda_launch(CK_ADAM_UPDATE, vram_cuda_blocks(n, THREADS), THREADS, args);
}

/* Unset or VRAM_OPTIM_KERNEL=vec: the vector forms of the f32 list kernels (cuda_optim_list.cuh;
 * the default, faster on the GPU); "old": the scalar vk_adam_update_list and vk_list_sum_squares. */
static int optim_old_kernels(void) { return old_kernels("VRAM_OPTIM_KERNEL", "vec", 1); }

/* Where each tensor of a list starts in the concatenation (pad > 1: rounded up to a multiple of
 * pad, the vector kernels' chunks); returns the padded total. */
static int64_t list_starts(int count, const int64_t *ns, int64_t pad, int64_t *starts) {
    int64_t total = 0;
    for (int i = 0; i < count; i++) {
        starts[i] = total;
        total += pad > 1 ? (ns[i] + pad - 1) / pad * pad : ns[i];
    }
    return total;
}

static void cuda_adam_update_list(vram_dtype dt, int count, void *const *p, const void *const *g, void *const *m,
                                  void *const *v, const int64_t *n, double lr, double b1, double b2, double eps,
                                  double wd, int decoupled, int64_t step, const int32_t *skip, void *const *lowp,
                                  vram_dtype lowp_dt, double gcoef) {
    vram_cuda *st = &vram_cuda_state;
    int old = optim_old_kernels();
    if (old < 0) return;
    vk_adam_entry *tab = malloc(sizeof *tab * (size_t)(count > 0 ? count : 1));
    int64_t *starts = malloc(sizeof *starts * (size_t)(count > 0 ? count : 1));
    void *dtab = NULL;
    if (!tab || !starts || count < 1 ||
        vram_allocator_malloc(st->rt->alloc, sizeof *tab * (size_t)count, st->rt->stream, VRAM_TAG_TEMPORARY, &dtab) !=
            VRAM_OK) {
        free(tab); /* no table: one launch per tensor, and the kept copies cast after it */
        free(starts);
        for (int i = 0; i < count; i++) {
            if (gcoef != 1) vram_cuda_kernels.scale_inplace(dt, n[i], (void *)g[i], gcoef);
            cuda_adam_update(dt, n[i], p[i], g[i], m[i], v[i], lr, b1, b2, eps, wd, decoupled, step, skip);
            if (lowp && lowp[i]) {
                vram_kview d = {.data = lowp[i], .dtype = lowp_dt, .ndim = 1, .shape = {n[i]}, .strides = {1}};
                vram_kview s = {.data = p[i], .dtype = dt, .ndim = 1, .shape = {n[i]}, .strides = {1}};
                vram_cuda_kernels.copy(&d, &s);
            }
        }
        return;
    }
    int vec = dt == VRAM_DTYPE_F32 && !old;
    int64_t total = list_starts(count, n, vec ? VK_LIST_CHUNK : 1, starts);
    for (int i = 0; i < count; i++)
        tab[i] = (vk_adam_entry){(char *)p[i], (const char *)g[i], (char *)m[i], (char *)v[i],
                                 lowp ? (char *)lowp[i] : NULL, n[i], starts[i]};
    vram_cuda_upload(dtab, tab, sizeof *tab * (size_t)count);
    free(tab);
    free(starts);
    double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step);
    double step_size = lr / bc1, sbc2 = sqrt(bc2), decay = 1 - lr * wd;
    int d = dt, ld = lowp_dt;
    if (vec) { /* one block a chunk */
        vk_adam_consts k = {(float)step_size, (float)sbc2, (float)b1,    (float)b2,   (float)eps,
                            (float)decay,     (float)wd,   (float)gcoef, decoupled};
        int64_t nchunks = total / VK_LIST_CHUNK, blocks = nchunks < (1 << 30) ? nchunks : (1 << 30);
        void *args[] = {&count, &dtab, &nchunks, &k, &skip, &ld};
        if (nchunks > 0) vram_cuda_launch(CK_ADAM_UPDATE_LIST_VEC, blocks, THREADS, args);
    } else {
        int64_t chunk = 4 * THREADS;
        void *args[] = {&d,  &count, &dtab,  &total, &chunk,     &step_size, &sbc2, &b1,
                        &b2, &eps,   &decay, &wd,    &decoupled, &skip,      &ld,   &gcoef};
        vram_cuda_launch(CK_ADAM_UPDATE_LIST, vram_cuda_blocks((total + chunk - 1) / chunk * THREADS, THREADS), THREADS,
                         args);
    }
    vram_allocator_free(st->rt->alloc, dtab); /* stream order keeps it until the kernel has read it */
}

static void cuda_adagrad_update(vram_dtype dt, int64_t n, void *p, const void *g, void *sum, double lr, double eps,
                                double wd, int64_t step, double lr_decay, const int32_t *skip) {
    double clr = lr / (1 + (double)(step - 1) * lr_decay);
    int d = dt;
    void *args[] = {&d, &n, &p, &g, &sum, &clr, &eps, &wd, &skip};
    vram_cuda_launch(CK_ADAGRAD_UPDATE, vram_cuda_blocks(n, THREADS), THREADS, args);
}

/* A device table of `count` tensors (vk_list_entry) from the allocator, freed by the caller after
 * its launch (stream order); NULL when it could not be made. *total: their elements, each
 * tensor's start padded to a multiple of pad (list_starts). */
static void *list_table(int count, const int64_t *ns, const void *const *xs, int64_t pad, int64_t *total) {
    vram_cuda *g = &vram_cuda_state;
    vk_list_entry *tab = count > 0 ? malloc(sizeof *tab * (size_t)count) : NULL;
    int64_t *starts = count > 0 ? malloc(sizeof *starts * (size_t)count) : NULL;
    void *dtab = NULL;
    if (!tab || !starts ||
        vram_allocator_malloc(g->rt->alloc, sizeof *tab * (size_t)count, g->rt->stream, VRAM_TAG_TEMPORARY, &dtab) !=
            VRAM_OK) {
        free(tab);
        free(starts);
        return NULL;
    }
    *total = list_starts(count, ns, pad, starts);
    for (int i = 0; i < count; i++) tab[i] = (vk_list_entry){(char *)xs[i], ns[i], starts[i]};
    vram_cuda_upload(dtab, tab, sizeof *tab * (size_t)count);
    free(tab);
    free(starts);
    return dtab;
}

static int one_dtype(int count, const vram_dtype *dts) {
    for (int i = 1; i < count; i++)
        if (dts[i] != dts[0]) return 0;
    return count > 0;
}

static double cuda_sum_squares(int count, const vram_dtype *dts, const int64_t *ns, const void *const *xs) {
    vram_cuda *g = &vram_cuda_state;
    void *acc = (char *)g->scratch + 8, *tab = NULL;
    int64_t total = 0;
    int old = optim_old_kernels(), vec = count > 0 && dts[0] == VRAM_DTYPE_F32 && !old;
    if (old < 0) return NAN;
    vram_cuda_zero(acc, sizeof(double));
    if (one_dtype(count, dts) && (tab = list_table(count, ns, xs, vec ? VK_LIST_CHUNK : 1, &total)) != NULL) {
        int d = dts[0]; /* one launch for all */
        if (vec) { /* a fixed grid of about eight blocks an SM over the chunks */
            int64_t nchunks = total / VK_LIST_CHUNK, sms = g->sm_count > 0 ? g->sm_count : 132;
            int64_t blocks = nchunks < sms * 8 ? nchunks : sms * 8;
            void *args[] = {&count, &tab, &nchunks, &acc};
            if (nchunks > 0) vram_cuda_launch(CK_LIST_SUM_SQUARES_VEC, blocks, THREADS, args);
        } else {
            void *args[] = {&d, &count, &tab, &total, &acc};
            vram_cuda_launch(CK_LIST_SUM_SQUARES, vram_cuda_blocks(total, THREADS), THREADS, args);
        }
        vram_allocator_free(g->rt->alloc, tab);
        count = 0;
    }
    for (int k = 0; k < count; k++) { /* every tensor into one accumulator, read back once */
        int d = dts[k];
        int64_t n = ns[k];
        const void *x = xs[k];
        void *args[] = {&d, &n, &x, &acc};
        vram_cuda_launch(CK_SUM_SQUARES, vram_cuda_blocks(n, THREADS), THREADS, args);
    }
    double s = NAN;
    vram_cuda_download(&s, acc, sizeof s);
    return g->error == VRAM_OK ? s : NAN;
}

static void cuda_unscale(vram_dtype dt, int64_t n, void *x, const float *scale, int32_t *found_inf) {
    int d = dt;
    void *args[] = {&d, &n, &x, &scale, &found_inf};
    vram_cuda_launch(CK_UNSCALE, vram_cuda_blocks(n, THREADS), THREADS, args);
}

static void cuda_scaler_update(float *scale, int32_t *state, double growth, double backoff, int interval) {
    void *args[] = {&scale, &state, &growth, &backoff, &interval};
    vram_cuda_launch(CK_SCALER_UPDATE, 1, 1, args);
}

static void cuda_scale_inplace(vram_dtype dt, int64_t n, void *x, double s) {
    int d = dt;
    void *args[] = {&d, &n, &x, &s};
    vram_cuda_launch(CK_SCALE_INPLACE, vram_cuda_blocks(n, THREADS), THREADS, args);
}

static void cuda_scale_inplace_list(vram_dtype dt, int count, const int64_t *ns, void *const *xs, double s) {
    vram_cuda *g = &vram_cuda_state;
    int64_t total = 0;
    void *tab = list_table(count, ns, (const void *const *)xs, 1, &total);
    if (!tab) {
        for (int i = 0; i < count; i++) cuda_scale_inplace(dt, ns[i], xs[i], s);
        return;
    }
    int d = dt;
    void *args[] = {&d, &count, &tab, &total, &s};
    vram_cuda_launch(CK_LIST_SCALE, vram_cuda_blocks(total, THREADS), THREADS, args);
    vram_allocator_free(g->rt->alloc, tab);
}

static int64_t cuda_find_bad_id(int64_t n, const void *ids, vram_dtype dt, int64_t limit) {
    vram_cuda *g = &vram_cuda_state;
    void *flag = (char *)g->scratch + 16;
    int none = 0x7fffffff, first = 0x7fffffff;
    vram_cuda_upload(flag, &none, sizeof none);
    int idt = dt;
    void *args[] = {&n, &ids, &idt, &limit, &flag};
    vram_cuda_launch(CK_CHECK_IDS, vram_cuda_blocks(n, THREADS), THREADS, args);
    vram_cuda_download(&first, flag, sizeof first);
    if (g->error != VRAM_OK) return -1; /* the sticky error reports it */
    return first == 0x7fffffff ? -1 : first;
}

static vram_status cuda_sync(void) { return vram_cuda_sync(); }

enum { FLASH_TILE = 64, FLASH_THREADS = 128 };

static int64_t flash_calls; /* attention calls (forward and backward) the own kernels ran */

/* What ran the attention calls: cuDNN's count against the own kernels', and, where the own
 * kernels ran any, why cuDNN did not (VRAM_ATTENTION=flash, or cuDNN's last reason). */
static const char *cuda_attention_report(char *buf, size_t cap) {
    int64_t dnn = vram_cudnn_attention_calls;
    const char *e = getenv("VRAM_ATTENTION"), *why = e && !strcmp(e, "flash") ? "VRAM_ATTENTION=flash" : vram_cudnn_why();
    if (!dnn && !flash_calls) return NULL;
    if (!flash_calls) snprintf(buf, cap, "cuDNN's fused flash attention (%lld calls)", (long long)dnn);
    else if (!dnn) snprintf(buf, cap, "vram's flash kernels (%lld calls; %s)", (long long)flash_calls, *why ? why : "cuDNN did not take them");
    else
        snprintf(buf, cap, "cuDNN's fused flash attention (%lld calls) and vram's flash kernels (%lld calls; %s)",
                 (long long)dnn, (long long)flash_calls, *why ? why : "cuDNN did not take them");
    return buf;
}

/* VRAM_ATTENTION=auto (the default: cuDNN's fused attention, cuda_cudnn_attention.c, wherever it
 * can run the shape, else the kernels of cuda_flash_attention.cuh, silently), cudnn (the same,
 * saying on stderr why a shape falls back) or flash (always the own kernels); any other value
 * fails the call with a message (-1). Read per launch, as the flash forms are. */
static int attention_path(void) {
    const char *e = getenv("VRAM_ATTENTION");
    if (!e || !*e || !strcmp(e, "auto")) return vram_cudnn_explicit = 0, 1;
    if (!strcmp(e, "flash")) return 0;
    if (!strcmp(e, "cudnn")) return vram_cudnn_explicit = 1, 1;
    vram_cuda_fail(VRAM_ERR_INVALID_ARG, "VRAM_ATTENTION=%s: expected auto, cudnn or flash", e);
    return -1;
}

/* VRAM_FLASH_FWD=rows16 (the default: 4 warps of 16 query rows a block) or rows32 (2 warps of
 * 32 rows: each K and V fragment loaded serves two row tiles). */
static void cuda_flash_attention(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                 void *out, float *lse) {
    int path = attention_path();
    if (path < 0 || (path == 1 && vram_cudnn_attention_forward(rt, dt, B, T, H, qkv, out, lse))) return;
    flash_calls++;
    const char *form = getenv("VRAM_FLASH_FWD");
    int rows32 = form && !strcmp(form, "rows32");
    if (form && *form && !rows32 && strcmp(form, "rows16")) {
        vram_cuda_fail(VRAM_ERR_INVALID_ARG, "VRAM_FLASH_FWD=%s: expected rows16 or rows32", form);
        return;
    }
    int d = dt;
    float scale = 0.125f; /* 1 / sqrt(64): the kernels' head size */
    void *args[] = {&d, &B, &T, &H, &qkv, &out, &lse, &scale};
    vram_cuda_launch(rows32 ? CK_FLASH_FORWARD32 : CK_FLASH_FORWARD, (T + FLASH_TILE - 1) / FLASH_TILE * B * H,
                     rows32 ? FLASH_THREADS / 2 : FLASH_THREADS, args);
}

vram_flash_bwd vram_flash_backward_form(void) {
    const char *e = getenv("VRAM_FLASH_BWD");
    if (!e || !*e || !strcmp(e, "fused")) return VRAM_FLASH_BWD_FUSED;
    if (!strcmp(e, "fused3")) return VRAM_FLASH_BWD_FUSED3;
    if (!strcmp(e, "fused128")) return VRAM_FLASH_BWD_FUSED128;
    if (!strcmp(e, "split128")) return VRAM_FLASH_BWD_SPLIT128;
    if (!strcmp(e, "fused128p")) return VRAM_FLASH_BWD_FUSED128P;
    return !strcmp(e, "split") ? VRAM_FLASH_BWD_SPLIT : VRAM_FLASH_BWD_BAD;
}

/* dvec (the rows' dO . O) first, then a one-pass backward (with its fp32 dQ accumulator, zeroed
 * by the dvec kernel, scaled into gqkv's q third after) or a split pair. The 128-key kernels
 * run blocks of 256 threads, one per 128 keys. */
static void cuda_flash_attention_backward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H,
                                          const void *qkv, const void *out, const void *gout, const float *lse,
                                          void *gqkv) {
    int path = attention_path();
    if (path < 0 || (path == 1 && vram_cudnn_attention_backward(rt, dt, B, T, H, qkv, out, gout, lse, gqkv))) return;
    flash_calls++;
    vram_flash_bwd form = vram_flash_backward_form();
    int split = !vram_flash_bwd_atomic(form), wide = form >= VRAM_FLASH_BWD_FUSED128;
    if (form == VRAM_FLASH_BWD_BAD) {
        vram_cuda_fail(VRAM_ERR_INVALID_ARG, "VRAM_FLASH_BWD=%s: expected fused, fused3, split, fused128, fused128p or split128",
                       getenv("VRAM_FLASH_BWD"));
        return;
    }
    void *dvec = NULL, *dq = NULL;
    size_t bytes = (size_t)(B * H * T) * sizeof(float), dq_bytes = split ? 0 : (size_t)(B * T * H * 64) * sizeof(float);
    if (vram_allocator_malloc(rt->alloc, bytes ? bytes : 1, rt->stream, VRAM_TAG_TEMPORARY, &dvec) != VRAM_OK) {
        vram_cuda_fail(VRAM_ERR_OUT_OF_MEMORY, "flash attention backward: no memory for %zu bytes of row sums", bytes);
        return;
    }
    if (!split && vram_allocator_malloc(rt->alloc, dq_bytes ? dq_bytes : 1, rt->stream, VRAM_TAG_TEMPORARY, &dq) != VRAM_OK) {
        vram_allocator_free(rt->alloc, dvec);
        vram_cuda_fail(VRAM_ERR_OUT_OF_MEMORY, "flash attention backward: no memory for %zu bytes of fp32 dQ", dq_bytes);
        return;
    }
    int d = dt;
    float scale = 0.125f;
    void *dot_args[] = {&d, &B, &T, &H, &gout, &out, &dvec, &dq};
    vram_cuda_launch(CK_FLASH_DOT, vram_cuda_blocks(B * H * T * 32, THREADS), THREADS, dot_args);
    int64_t blocks = (T + FLASH_TILE - 1) / FLASH_TILE * B * H, blocks128 = (T + 2 * FLASH_TILE - 1) / (2 * FLASH_TILE) * B * H;
    if (split) {
        void *args[] = {&d, &B, &T, &H, &qkv, &gout, &lse, &dvec, &gqkv, &scale};
        if (wide) vram_cuda_launch(CK_FLASH_BACKWARD128_KV, blocks128, 2 * FLASH_THREADS, args);
        else vram_cuda_launch(CK_FLASH_BACKWARD_KV, blocks, FLASH_THREADS, args);
        if (wide) vram_cuda_launch(CK_FLASH_BACKWARD128_Q, blocks128, 2 * FLASH_THREADS, args);
        else vram_cuda_launch(CK_FLASH_BACKWARD_Q, blocks, FLASH_THREADS, args);
    } else {
        void *args[] = {&d, &B, &T, &H, &qkv, &gout, &lse, &dvec, &gqkv, &dq, &scale};
        if (wide)
            vram_cuda_launch(form == VRAM_FLASH_BWD_FUSED128P ? CK_FLASH_BACKWARD128P : CK_FLASH_BACKWARD128, blocks128,
                             2 * FLASH_THREADS, args);
        else vram_cuda_launch(form == VRAM_FLASH_BWD_FUSED3 ? CK_FLASH_BACKWARD3 : CK_FLASH_BACKWARD, blocks, FLASH_THREADS, args);
        void *dq_args[] = {&d, &B, &T, &H, &dq, &gqkv, &scale};
        vram_cuda_launch(CK_FLASH_DQ, vram_cuda_blocks(B * T * H * 16, THREADS), THREADS, dq_args);
        vram_allocator_free(rt->alloc, dq);
    }
    vram_allocator_free(rt->alloc, dvec); /* stream order keeps them until the kernels have read them */
}

const vram_kernels vram_cuda_kernels = {
    .name = "cuda",
    .copy = cuda_copy,
    .fill = cuda_fill,
    .binary = cuda_binary,
    .accumulate = cuda_accumulate,
    .unary = cuda_unary,
    .unary_backward = cuda_unary_backward,
    .matmul = vram_cuda_matmul,
    .matmul_bias = vram_cuda_matmul_bias,
    .matmul_lowp = vram_cuda_matmul_lowp,
    .matmul_lowp_gelu = vram_cuda_matmul_lowp_gelu,
    .matmul_lowp_dgelu = vram_cuda_matmul_lowp_dgelu,
    .column_sum_lowp = cuda_column_sum_lowp,
    .matmul_lowp_wgrad = vram_cuda_matmul_lowp_wgrad,
    .layer_norm_mixed = cuda_layer_norm_mixed,
    .layer_norm_mixed_backward = cuda_layer_norm_mixed_backward,
    .cross_entropy_fused = cuda_cross_entropy_fused,
    .flash_attention = cuda_flash_attention,
    .flash_attention_backward = cuda_flash_attention_backward,
    .attention_report = cuda_attention_report,
    .softmax = cuda_softmax,
    .softmax_backward = cuda_softmax_backward,
    .layer_norm = cuda_layer_norm,
    .add_layer_norm = cuda_add_layer_norm,
    .layer_norm_backward = cuda_layer_norm_backward,
    .embedding = cuda_embedding,
    .embedding_backward = cuda_embedding_backward,
    .cross_entropy = cuda_cross_entropy,
    .cross_entropy_backward = cuda_cross_entropy_backward,
    .mask_scale = cuda_mask_scale,
    .im2col = cuda_im2col,
    .col2im = cuda_col2im,
    .pool2d = cuda_pool2d,
    .pool2d_backward = cuda_pool2d_backward,
    .sgd_update = cuda_sgd_update,
    .adam_update = cuda_adam_update,
    .adagrad_update = cuda_adagrad_update,
    .adam_update_list = cuda_adam_update_list,
    .scale_inplace_list = cuda_scale_inplace_list,
    .unscale = cuda_unscale,
    .scaler_update = cuda_scaler_update,
    .sum_squares = cuda_sum_squares,
    .scale_inplace = cuda_scale_inplace,
    .upload = vram_cuda_upload,
    .download = vram_cuda_download,
    .zero = vram_cuda_zero,
    .layer_norm_backward_writes_wb = 1,
    .layer_norm_backward_adds_gx = 1,
    .find_bad_id = cuda_find_bad_id,
    .sync = cuda_sync,
    /* inference (cuda_infer_ops.c) */
    .linear_lowp = vram_cuda_linear_lowp,
    .embedding_lowp = vram_cuda_embedding_lowp,
    .kv_attention = vram_cuda_kv_attention,
    .gelu_tanh = vram_cuda_gelu_tanh,
};
