/* cuda_cudnn_attention.c — causal attention through cuDNN's fused flash attention, the
 * GPU's default attention (VRAM_ATTENTION=auto or cudnn; cuda_ops.c asks here first and runs the
 * runtime's own kernels, cuda_flash_attention.cuh, wherever this declines; VRAM_ATTENTION=flash
 * skips it).
 *
 * libcudnn.so.9 is opened with dlopen, as cuBLASLt is, and driven through its C backend API
 * (cudnn_graph.h): no C++ frontend. For each (dtype, B, T, H) two operation graphs are built,
 * the ones cuDNN's frontend lowers its sdpa and sdpa_backward nodes to for a causal mask on
 * cuDNN 9 before 9.21 (its "composite" form), and each gets an engine from the heuristics
 * (mode A, then B) whose execution plan finalizes. Q, K and V are read in place from the packed
 * qkv [B, T, 3C] (strides b: T*3C, h: 64, t: 3C, d: 1; K and V enter the products transposed,
 * as [B, H, 64, T] views), the output is [B, T, C] and the gradients go straight into the
 * slices of gqkv. The row statistics are [B, H, T, 1] fp32, the natural-log log-sum-exp of
 * the scaled, masked scores: the same quantity in the same layout as the flash kernels' lse,
 * so a backward may follow a forward of either path (the GPU test crosses them).
 *
 * Forward:  S = Q K^T (fp32) * scale; causal mask (row index >= column index, else -inf);
 *           M = rowmax S, E = exp(S - M), Z = rowsum E, stats = M + log Z, P = E / Z (16-bit);
 *           O = P V.
 * Backward: D = rowsum(dO * O) (fp32, a temporary); S as above minus stats, masked,
 *           P = exp(S); dV = P^T dO; dS = P * (dO V^T - D) * scale; dK = dS^T Q;
 *           dQ = dS K through an fp32 accumulator (a temporary).
 * Plans are cached in a small table and kept with every descriptor they were built from. The
 * plans' own workspace comes from the allocator, tagged "other", grown when a plan needs more,
 * and freed when the runtime closes; the backward's two fp32 buffers are temporaries taken and
 * given back around each call, as the flash kernels' one-pass backward takes them. Where cuDNN
 * is absent, has no engine for a graph or fails to run, one line on stderr says which step
 * failed and why (cudnnGetErrorString and cuDNN's last error message), and the caller runs its
 * own kernels. VRAM_CUDNN_DEBUG=1 prints every stage.
 */
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

int64_t vram_cudnn_attention_calls;
int vram_cudnn_explicit;
static char dnn_why[768];

const char *vram_cudnn_why(void) { return dnn_why; }

#if !defined(VRAM_HAVE_CUDA_H) || !defined(VRAM_HAVE_CUDNN_H)

int vram_cudnn_state(void) { return -1; }

static void declined(void) {
    static int said;
    if (!said && vram_cudnn_explicit) fprintf(stderr, "vram: VRAM_ATTENTION=cudnn: %s; running vram's flash kernels\n", dnn_why);
    said = 1;
}

int vram_cudnn_attention_forward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                 void *out, float *lse) {
    (void)rt, (void)dt, (void)B, (void)T, (void)H, (void)qkv, (void)out, (void)lse;
    snprintf(dnn_why, sizeof dnn_why, "this build has no cuDNN headers (cudnn_graph.h was not found at configure time)");
    declined();
    return 0;
}
int vram_cudnn_attention_backward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                  const void *out, const void *gout, const float *lse, void *gqkv) {
    (void)gout, (void)gqkv;
    return vram_cudnn_attention_forward(rt, dt, B, T, H, qkv, (void *)out, (float *)lse);
}
void vram_cudnn_close(void) {}
int vram_cudnn_selfcheck(vram_dtype dt, int64_t B, int64_t T, int64_t H, int with_graph, char *msg, size_t cap) {
    (void)dt, (void)B, (void)T, (void)H, (void)with_graph;
    snprintf(msg, cap, "this build has no cuDNN headers");
    return -1;
}

#else

#include <cudnn_graph.h>

enum { KEEP = 200, MAX_OPS = 32, MAX_CFGS = 16, ENTRIES = 16, D = 64 };

static struct {
    void *lib;
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(cudnnStatus_t);
    void (*GetLastErrorString)(char *, size_t); /* optional */
    cudnnStatus_t (*Create)(cudnnHandle_t *);
    cudnnStatus_t (*Destroy)(cudnnHandle_t);
    cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*CreateDesc)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
    cudnnStatus_t (*DestroyDesc)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*Finalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*SetAttr)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t, int64_t,
                             const void *);
    cudnnStatus_t (*GetAttr)(cudnnBackendDescriptor_t const, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t,
                             int64_t, int64_t *, void *);
    cudnnStatus_t (*Execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
} dnn;

/* One execution plan and every descriptor it was built from (kept alive as long as it is). */
typedef struct dnn_plan {
    cudnnBackendDescriptor_t plan;
    int64_t ws; /* the plan's own workspace bytes */
    cudnnBackendDescriptor_t keep[KEEP];
    int n_keep;
} dnn_plan;

typedef struct dnn_entry {
    int used, bad; /* bad: cuDNN declined this shape, the flash kernels run it */
    vram_dtype dt;
    int64_t B, T, H;
    uint64_t last_use;
    dnn_plan fwd, bwd;
} dnn_entry;

static int dnn_open_state;    /* 0 not tried, 1 open, -1 unavailable (dnn_why says why) */
static size_t dnn_version;
static int dnn_debug;
static cudnnHandle_t dnn_handle;
static void *dnn_ws;
static size_t dnn_ws_bytes;
static dnn_entry dnn_cache[ENTRIES];
static uint64_t dnn_clock;

int vram_cudnn_state(void) { return dnn_open_state; }

static const char *dnn_status(cudnnStatus_t st) {
    static __thread char buf[48];
    if (dnn.GetErrorString) return dnn.GetErrorString(st);
    snprintf(buf, sizeof buf, "cuDNN status %d", (int)st);
    return buf;
}

/* ---- building graphs: every call is skipped after the first failure, which is kept ---- */

typedef struct gb {
    cudnnStatus_t st;
    char step[360], detail[320];
    dnn_plan *p; /* the descriptors go into its keep list */
    cudnnBackendDescriptor_t ops[MAX_OPS];
    int n_ops;
    int64_t next_uid;
} gb;

static void gb_fail(gb *g, cudnnStatus_t st, const char *what, const char *attr) {
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    g->st = st;
    snprintf(g->step, sizeof g->step, "%s%s%s", what, attr ? " " : "", attr ? attr : "");
    g->detail[0] = 0;
    if (dnn.GetLastErrorString) dnn.GetLastErrorString(g->detail, sizeof g->detail);
}

static cudnnBackendDescriptor_t gb_make(gb *g, cudnnBackendDescriptorType_t type, const char *what) {
    cudnnBackendDescriptor_t d = NULL;
    if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
    if (g->p->n_keep == KEEP) {
        gb_fail(g, CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, what, "(vram's descriptor list is full)");
        return NULL;
    }
    cudnnStatus_t st = dnn.CreateDesc(type, &d);
    if (st != CUDNN_STATUS_SUCCESS) {
        gb_fail(g, st, what, "cudnnBackendCreateDescriptor");
        return NULL;
    }
    g->p->keep[g->p->n_keep++] = d;
    return d;
}

static void gb_set(gb *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, const char *name_str,
                   cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *what) {
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t st = dnn.SetAttr(d, name, type, n, v);
    if (st != CUDNN_STATUS_SUCCESS) gb_fail(g, st, what, name_str);
}
#define SET(g, d, name, type, n, v, what) gb_set(g, d, name, #name, type, n, v, what)

static void gb_finalize(gb *g, cudnnBackendDescriptor_t d, const char *what) {
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t st = dnn.Finalize(d);
    if (st != CUDNN_STATUS_SUCCESS) gb_fail(g, st, what, "cudnnBackendFinalize");
}

/* A 4-d tensor. uid < 0 takes the next virtual uid. by_value: a host scalar in the variant pack. */
static cudnnBackendDescriptor_t gb_tensor(gb *g, const char *what, int64_t uid, cudnnDataType_t dt, int64_t d0,
                                          int64_t d1, int64_t d2, int64_t d3, int64_t s0, int64_t s1, int64_t s2,
                                          int64_t s3, bool is_virtual, bool by_value) {
    cudnnBackendDescriptor_t t = gb_make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t dim[4] = {d0, d1, d2, d3}, str[4] = {s0, s1, s2, s3}, align = 16;
    if (uid < 0) uid = g->next_uid++;
    SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, what);
    SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, what);
    SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str, what);
    SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
    SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, what);
    SET(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, what);
    if (by_value) SET(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, what);
    gb_finalize(g, t, what);
    return t;
}

/* A virtual [B, H, r, c] fp32 (or dt) tensor, packed row-major. */
static cudnnBackendDescriptor_t gb_virt(gb *g, const char *what, cudnnDataType_t dt, int64_t B, int64_t H, int64_t r,
                                        int64_t c) {
    return gb_tensor(g, what, -1, dt, B, H, r, c, H * r * c, r * c, c, 1, true, false);
}

/* A [1, 1, 1, 1] fp32 scalar passed by value. */
static cudnnBackendDescriptor_t gb_scalar(gb *g, const char *what, int64_t uid) {
    return gb_tensor(g, what, uid, CUDNN_DATA_FLOAT, 1, 1, 1, 1, 1, 1, 1, 1, false, true);
}

static void gb_add_op(gb *g, cudnnBackendDescriptor_t op, const char *what) {
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    if (g->n_ops == MAX_OPS) {
        gb_fail(g, CUDNN_STATUS_BAD_PARAM, what, "(vram's operation list is full)");
        return;
    }
    g->ops[g->n_ops++] = op;
}

/* y = mode(x [, b [, t]]) computed in prec; axis >= 0 for GEN_INDEX. */
static void gb_pointwise(gb *g, const char *what, cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis,
                         cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                         cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t pw = gb_make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    SET(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, what);
    SET(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, what);
    if (axis >= 0) SET(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, what);
    gb_finalize(g, pw, what);
    cudnnBackendDescriptor_t op = gb_make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    float one = 1.0f;
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, what);
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, what);
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, what);
    if (b) SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    if (t) SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, what);
    gb_finalize(g, op, what);
    gb_add_op(g, op, what);
}

/* y = reduce(x) over the dimensions where y has extent 1, in fp32. */
static void gb_reduce(gb *g, const char *what, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                      cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t rd = gb_make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    SET(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, what);
    SET(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
    gb_finalize(g, rd, what);
    cudnnBackendDescriptor_t op = gb_make(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, what);
    gb_finalize(g, op, what);
    gb_add_op(g, op, what);
}

/* c = a @ b over the last two dimensions, batched over the first two, fp32 accumulation. */
static void gb_matmul(gb *g, const char *what, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                      cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t md = gb_make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    SET(g, md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, what);
    gb_finalize(g, md, what);
    cudnnBackendDescriptor_t op = gb_make(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, what);
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, what);
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, what);
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &md, what);
    gb_finalize(g, op, what);
    gb_add_op(g, op, what);
}

/* y is x seen through other dimensions and strides (a transpose, here). */
static void gb_reshape(gb *g, const char *what, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = gb_make(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
    SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
    SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
    gb_finalize(g, op, what);
    gb_add_op(g, op, what);
}

/* The causal mask over scores x [B, H, T, T]: x where row >= column, else the by-value -inf. */
static cudnnBackendDescriptor_t gb_causal(gb *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t neg_inf,
                                          int64_t B, int64_t H, int64_t T) {
    cudnnBackendDescriptor_t row = gb_virt(g, "row index", CUDNN_DATA_INT32, B, H, T, T);
    cudnnBackendDescriptor_t col = gb_virt(g, "column index", CUDNN_DATA_INT32, B, H, T, T);
    cudnnBackendDescriptor_t keep = gb_virt(g, "causal mask", CUDNN_DATA_BOOLEAN, B, H, T, T);
    cudnnBackendDescriptor_t y = gb_virt(g, "masked scores", CUDNN_DATA_FLOAT, B, H, T, T);
    gb_pointwise(g, "gen_index rows", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 2, x, NULL, NULL, row);
    gb_pointwise(g, "gen_index columns", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 3, x, NULL, NULL, col);
    gb_pointwise(g, "row >= column", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, keep);
    gb_pointwise(g, "binary_select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, neg_inf, keep, y);
    return y;
}

/* Tensor uids of the variant packs (virtual tensors take 100 on). */
enum { U_Q = 1, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF, U_DO, U_DQ, U_DK, U_DV, U_ONE, U_DSUM, U_DQ_ACC };

static cudnnDataType_t dnn_type(vram_dtype dt) { return dt == VRAM_DTYPE_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16; }

/* Q, K^T, V (or V^T) read in place from qkv [B, T, 3C]. */
static void gb_qkv(gb *g, cudnnDataType_t io, int64_t B, int64_t T, int64_t H, int v_transposed,
                   cudnnBackendDescriptor_t *q, cudnnBackendDescriptor_t *kt, cudnnBackendDescriptor_t *v) {
    int64_t W = 3 * H * D;
    *q = gb_tensor(g, "Q", U_Q, io, B, H, T, D, T * W, D, W, 1, false, false);
    *kt = gb_tensor(g, "K^T", U_K, io, B, H, D, T, T * W, D, 1, W, false, false);
    *v = v_transposed ? gb_tensor(g, "V^T", U_V, io, B, H, D, T, T * W, D, 1, W, false, false)
                      : gb_tensor(g, "V", U_V, io, B, H, T, D, T * W, D, W, 1, false, false);
}

static void build_forward(gb *g, vram_dtype dt, int64_t B, int64_t T, int64_t H) {
    cudnnDataType_t io = dnn_type(dt), f32 = CUDNN_DATA_FLOAT;
    int64_t C = H * D;
    cudnnBackendDescriptor_t q, kt, v;
    gb_qkv(g, io, B, T, H, 0, &q, &kt, &v);
    cudnnBackendDescriptor_t o = gb_tensor(g, "O", U_O, io, B, H, T, D, T * C, D, C, 1, false, false);
    cudnnBackendDescriptor_t stats = gb_tensor(g, "stats", U_STATS, f32, B, H, T, 1, H * T, T, 1, 1, false, false);
    cudnnBackendDescriptor_t scale = gb_scalar(g, "attention scale", U_SCALE);
    cudnnBackendDescriptor_t neg_inf = gb_scalar(g, "-inf", U_NEG_INF);
    cudnnBackendDescriptor_t s = gb_virt(g, "S", f32, B, H, T, T), s1 = gb_virt(g, "S scaled", f32, B, H, T, T);
    gb_matmul(g, "Q K^T", q, kt, s);
    gb_pointwise(g, "S * scale", CUDNN_POINTWISE_MUL, f32, -1, s, scale, NULL, s1);
    cudnnBackendDescriptor_t s2 = gb_causal(g, s1, neg_inf, B, H, T);
    cudnnBackendDescriptor_t m = gb_virt(g, "row max", f32, B, H, T, 1), s3 = gb_virt(g, "S - max", f32, B, H, T, T);
    cudnnBackendDescriptor_t e = gb_virt(g, "exp", f32, B, H, T, T), z = gb_virt(g, "row sum", f32, B, H, T, 1);
    cudnnBackendDescriptor_t lz = gb_virt(g, "log row sum", f32, B, H, T, 1), p = gb_virt(g, "P", io, B, H, T, T);
    gb_reduce(g, "max", CUDNN_REDUCE_TENSOR_MAX, s2, m);
    gb_pointwise(g, "sub max", CUDNN_POINTWISE_SUB, f32, -1, s2, m, NULL, s3);
    gb_pointwise(g, "exp", CUDNN_POINTWISE_EXP, f32, -1, s3, NULL, NULL, e);
    gb_reduce(g, "sum", CUDNN_REDUCE_TENSOR_ADD, e, z);
    gb_pointwise(g, "log", CUDNN_POINTWISE_LOG, f32, -1, z, NULL, NULL, lz);
    gb_pointwise(g, "stats = max + log", CUDNN_POINTWISE_ADD, f32, -1, m, lz, NULL, stats);
    gb_pointwise(g, "P = exp / sum", CUDNN_POINTWISE_DIV, f32, -1, e, z, NULL, p);
    gb_matmul(g, "P V", p, v, o);
}

static void build_backward(gb *g, vram_dtype dt, int64_t B, int64_t T, int64_t H) {
    cudnnDataType_t io = dnn_type(dt), f32 = CUDNN_DATA_FLOAT;
    int64_t C = H * D, W = 3 * C;
    cudnnBackendDescriptor_t q, kt, vt;
    gb_qkv(g, io, B, T, H, 1, &q, &kt, &vt);
    cudnnBackendDescriptor_t o = gb_tensor(g, "O", U_O, io, B, H, T, D, T * C, D, C, 1, false, false);
    cudnnBackendDescriptor_t d_o = gb_tensor(g, "dO", U_DO, io, B, H, T, D, T * C, D, C, 1, false, false);
    cudnnBackendDescriptor_t stats = gb_tensor(g, "stats", U_STATS, f32, B, H, T, 1, H * T, T, 1, 1, false, false);
    cudnnBackendDescriptor_t dq = gb_tensor(g, "dQ", U_DQ, io, B, H, T, D, T * W, D, W, 1, false, false);
    cudnnBackendDescriptor_t dk = gb_tensor(g, "dK", U_DK, io, B, H, T, D, T * W, D, W, 1, false, false);
    cudnnBackendDescriptor_t dv = gb_tensor(g, "dV", U_DV, io, B, H, T, D, T * W, D, W, 1, false, false);
    cudnnBackendDescriptor_t scale = gb_scalar(g, "attention scale", U_SCALE);
    cudnnBackendDescriptor_t neg_inf = gb_scalar(g, "-inf", U_NEG_INF), one = gb_scalar(g, "one", U_ONE);
    /* D = rowsum(dO * O), kept in the workspace (the virtual product's strides as the frontend gives them) */
    cudnnBackendDescriptor_t doo = gb_tensor(g, "dO * O", -1, f32, B, H, T, D, H * T * D, T * D, H * D, 1, true, false);
    cudnnBackendDescriptor_t dsum_v = gb_virt(g, "rowsum(dO * O)", f32, B, H, T, 1);
    cudnnBackendDescriptor_t dsum = gb_tensor(g, "softmax sum", U_DSUM, f32, B, H, T, 1, H * T, T, 1, 1, false, false);
    gb_pointwise(g, "dO * O", CUDNN_POINTWISE_MUL, f32, -1, d_o, o, NULL, doo);
    gb_reduce(g, "rowsum(dO * O)", CUDNN_REDUCE_TENSOR_ADD, doo, dsum_v);
    gb_pointwise(g, "softmax sum * 1", CUDNN_POINTWISE_MUL, f32, -1, dsum_v, one, NULL, dsum);
    /* P recomputed from the stats */
    cudnnBackendDescriptor_t s = gb_virt(g, "S", f32, B, H, T, T), s1 = gb_virt(g, "S scaled", f32, B, H, T, T);
    cudnnBackendDescriptor_t s2 = gb_virt(g, "S - stats", f32, B, H, T, T);
    gb_matmul(g, "Q K^T", q, kt, s);
    gb_pointwise(g, "S * scale", CUDNN_POINTWISE_MUL, f32, -1, s, scale, NULL, s1);
    gb_pointwise(g, "S - stats", CUDNN_POINTWISE_SUB, f32, -1, s1, stats, NULL, s2);
    cudnnBackendDescriptor_t s3 = gb_causal(g, s2, neg_inf, B, H, T);
    cudnnBackendDescriptor_t p = gb_virt(g, "P", f32, B, H, T, T);
    gb_pointwise(g, "P = exp", CUDNN_POINTWISE_EXP, f32, -1, s3, NULL, NULL, p);
    /* dV = P^T dO */
    cudnnBackendDescriptor_t pt = gb_tensor(g, "P^T", -1, io, B, H, T, T, H * T * T, T * T, 1, T, true, false);
    gb_reshape(g, "P^T", p, pt);
    gb_matmul(g, "P^T dO", pt, d_o, dv);
    /* dS = P * (dO V^T - D) * scale */
    cudnnBackendDescriptor_t dp = gb_virt(g, "dP", f32, B, H, T, T), t1 = gb_virt(g, "dP - D", f32, B, H, T, T);
    cudnnBackendDescriptor_t t2 = gb_virt(g, "P (dP - D)", f32, B, H, T, T), ds = gb_virt(g, "dS", f32, B, H, T, T);
    gb_matmul(g, "dO V^T", d_o, vt, dp);
    gb_pointwise(g, "dP - D", CUDNN_POINTWISE_SUB, f32, -1, dp, dsum, NULL, t1);
    gb_pointwise(g, "P (dP - D)", CUDNN_POINTWISE_MUL, f32, -1, t1, p, NULL, t2);
    gb_pointwise(g, "dS * scale", CUDNN_POINTWISE_MUL, f32, -1, t2, scale, NULL, ds);
    /* dK = dS^T Q */
    cudnnBackendDescriptor_t dst = gb_tensor(g, "dS^T", -1, io, B, H, T, T, H * T * T, T * T, 1, T, true, false);
    gb_reshape(g, "dS^T", ds, dst);
    gb_matmul(g, "dS^T Q", dst, q, dk);
    /* dQ = dS K, accumulated in fp32 in the workspace, then written in 16 bits */
    cudnnBackendDescriptor_t k = gb_tensor(g, "K", -1, f32, B, H, T, D, T * W, D, W, 1, true, false);
    cudnnBackendDescriptor_t acc = gb_tensor(g, "dQ accumulator", U_DQ_ACC, f32, B, H, T, D, H * T * D, T * D, D, 1, false,
                                             false);
    gb_reshape(g, "K from K^T", kt, k);
    gb_matmul(g, "dS K", ds, k, acc);
    gb_pointwise(g, "dQ = accumulator", CUDNN_POINTWISE_IDENTITY, f32, -1, acc, NULL, NULL, dq);
}

/* The operation graph of g's operations, an engine from the heuristics (mode A, then B) whose
 * plan finalizes, and the plan's workspace size. */
static void gb_plan(gb *g, const char *name) {
    cudnnBackendDescriptor_t graph = gb_make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn_handle, "operation graph");
    SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, "operation graph");
    gb_finalize(g, graph, "operation graph");
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    if (dnn_debug) fprintf(stderr, "vram cudnn: %s: %d operations, graph finalized\n", name, g->n_ops);
    cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B};
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    char tried[240] = "";
    size_t used = 0;
    for (int m = 0; m < 2 && g->st == CUDNN_STATUS_SUCCESS; m++) {
        const char *mname = m ? "heuristic mode B" : "heuristic mode A";
        cudnnBackendDescriptor_t heur = gb_make(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mname), cfgs[MAX_CFGS];
        SET(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, mname);
        SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m], mname);
        for (int i = 0; i < MAX_CFGS; i++) cfgs[i] = gb_make(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, mname);
        if (g->st != CUDNN_STATUS_SUCCESS) return;
        /* a mode that cannot rank this graph is noted, and the next one asked */
        int64_t n = 0;
        const char *failed = "cudnnBackendFinalize";
        cudnnStatus_t st = dnn.Finalize(heur);
        if (st == CUDNN_STATUS_SUCCESS) {
            failed = "cudnnBackendGetAttribute CUDNN_ATTR_ENGINEHEUR_RESULTS";
            st = dnn.GetAttr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CFGS, &n, cfgs);
        }
        if (st != CUDNN_STATUS_SUCCESS) {
            last = st;
            if (dnn.GetLastErrorString) dnn.GetLastErrorString(g->detail, sizeof g->detail);
            if (dnn_debug) fprintf(stderr, "vram cudnn: %s: %s: %s failed: %s\n", name, mname, failed, dnn_status(st));
            used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s: %s failed", used ? ", " : "", mname, failed);
            if (used >= sizeof tried) used = sizeof tried - 1;
            continue;
        }
        if (n > MAX_CFGS) n = MAX_CFGS;
        if (dnn_debug) fprintf(stderr, "vram cudnn: %s: %s offers %lld engine configurations\n", name, mname, (long long)n);
        used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s: %lld configurations", used ? ", " : "", mname,
                                 (long long)n);
        if (used >= sizeof tried) used = sizeof tried - 1;
        for (int64_t i = 0; i < n; i++) {
            cudnnBackendDescriptor_t plan = gb_make(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
            SET(g, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn_handle, "execution plan");
            SET(g, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i], "execution plan");
            if (g->st != CUDNN_STATUS_SUCCESS) return;
            st = dnn.Finalize(plan);
            if (dnn_debug) fprintf(stderr, "vram cudnn: %s: %s configuration %lld: plan %s\n", name, mname, (long long)i,
                                   st == CUDNN_STATUS_SUCCESS ? "finalized" : dnn_status(st));
            if (st != CUDNN_STATUS_SUCCESS) {
                last = st;
                if (dnn.GetLastErrorString) dnn.GetLastErrorString(g->detail, sizeof g->detail);
                continue;
            }
            int64_t ws = 0, cnt = 0;
            st = dnn.GetAttr(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt, &ws);
            if (st != CUDNN_STATUS_SUCCESS) {
                gb_fail(g, st, "execution plan", "cudnnBackendGetAttribute CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE");
                return;
            }
            if (dnn_debug) {
                /* the plan's JSON names the engine and its knobs */
                int64_t jn = 0;
                char *json = NULL;
                if (dnn.GetAttr(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &jn, NULL) ==
                        CUDNN_STATUS_SUCCESS && jn > 0 && (json = calloc((size_t)jn + 1, 1)) &&
                    dnn.GetAttr(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, jn, &jn, json) !=
                        CUDNN_STATUS_SUCCESS)
                    json[0] = 0;
                fprintf(stderr, "vram cudnn: %s: plan of configuration %lld, workspace %lld bytes: %.600s\n", name,
                        (long long)i, (long long)ws, json ? json : "(no JSON)");
                free(json);
            }
            g->p->plan = plan;
            g->p->ws = ws;
            return;
        }
    }
    if (g->st == CUDNN_STATUS_SUCCESS) {
        char step[300];
        snprintf(step, sizeof step, "no engine configuration made a plan (%s)", tried);
        gb_fail(g, last, step, NULL);
    }
}

/* ---- the library, the plans' table, the workspace ---- */

static void plan_release(dnn_plan *p) {
    for (int i = p->n_keep - 1; i >= 0; i--) dnn.DestroyDesc(p->keep[i]);
    p->n_keep = 0;
    p->plan = NULL;
    p->ws = 0;
}

/* Says once per process why cuDNN is not in use at all. */
static void declined(void) {
    static int said;
    if (!said && (vram_cudnn_explicit || dnn_debug))
        fprintf(stderr, "vram: VRAM_ATTENTION=cudnn: %s; running vram's flash kernels\n", dnn_why);
    said = 1;
}

/* Opens libcudnn (once a process). Returns 1 when loaded; otherwise dnn_why says why. */
static int dnn_load(void) {
    const char *dbg = getenv("VRAM_CUDNN_DEBUG");
    dnn_debug = dbg && *dbg && strcmp(dbg, "0");
    if (!dnn.lib) {
        const char *env = getenv("VRAM_LIBCUDNN");
        const char *tries[] = {env && *env ? env : NULL, "libcudnn.so.9", "libcudnn.so", "/usr/local/cuda/lib64/libcudnn.so.9",
                               "/usr/local/cuda/lib/libcudnn.so.9", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"};
        char first[240] = "";
        void *lib = NULL;
        for (size_t i = 0; i < sizeof tries / sizeof *tries && !lib; i++) {
            if (!tries[i]) continue;
            lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
            const char *err = lib ? NULL : dlerror();
            if (err && !first[0]) snprintf(first, sizeof first, "%s", err);
            if (dnn_debug) fprintf(stderr, "vram cudnn: dlopen(\"%s\"): %s\n", tries[i], lib ? "opened" : err ? err : "failed");
        }
        if (!lib) {
            snprintf(dnn_why, sizeof dnn_why, "cuDNN not found (tried $VRAM_LIBCUDNN, libcudnn.so.9, libcudnn.so and the "
                     "CUDA toolkit's folders; first error: %s)", first);
            return 0;
        }
        static const vram_cuda_sym syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(dnn), field)}
            SYM(GetVersion, "cudnnGetVersion"), SYM(GetErrorString, "cudnnGetErrorString"), SYM(Create, "cudnnCreate"),
            SYM(Destroy, "cudnnDestroy"), SYM(SetStream, "cudnnSetStream"),
            SYM(CreateDesc, "cudnnBackendCreateDescriptor"), SYM(DestroyDesc, "cudnnBackendDestroyDescriptor"),
            SYM(Finalize, "cudnnBackendFinalize"), SYM(SetAttr, "cudnnBackendSetAttribute"),
            SYM(GetAttr, "cudnnBackendGetAttribute"), SYM(Execute, "cudnnBackendExecute"),
#undef SYM
        };
        const char *missing = vram_cuda_resolve(lib, syms, sizeof syms / sizeof *syms, &dnn);
        if (missing) {
            snprintf(dnn_why, sizeof dnn_why, "the cuDNN library lacks %s (older than cuDNN 9?)", missing);
            dlclose(lib);
            memset(&dnn, 0, sizeof dnn);
            return 0;
        }
        *(void **)&dnn.GetLastErrorString = dlsym(lib, "cudnnGetLastErrorString");
        dnn.lib = lib;
    }
    dnn_version = dnn.GetVersion();
    if (dnn_version < 90000) {
        snprintf(dnn_why, sizeof dnn_why, "cuDNN %zu is older than 9.0, whose graph API this path uses", dnn_version);
        return 0;
    }
    return 1;
}

/* "; cuDNN says: <its last error message>", or "" where it has none. */
static const char *last_detail(void) {
    static char buf[360];
    char msg[320] = "";
    if (dnn.GetLastErrorString) dnn.GetLastErrorString(msg, sizeof msg);
    snprintf(buf, sizeof buf, "%s%s", msg[0] ? "; cuDNN says: " : "", msg);
    return buf;
}

/* libcudnn and a handle on the runtime's stream (once a runtime). Returns 1 when open;
 * otherwise dnn_why says why. */
static int dnn_open(void) {
    if (dnn_open_state) return dnn_open_state > 0;
    dnn_open_state = -1;
    if (!dnn_load()) return 0;
    cudnnStatus_t st = dnn.Create(&dnn_handle);
    if (st == CUDNN_STATUS_SUCCESS) {
        st = dnn.SetStream(dnn_handle, (cudaStream_t)vram_cuda_state.stream);
        if (st != CUDNN_STATUS_SUCCESS) {
            snprintf(dnn_why, sizeof dnn_why, "cudnnSetStream failed: %s%s", dnn_status(st), last_detail());
            dnn.Destroy(dnn_handle);
            dnn_handle = NULL;
            return 0;
        }
    } else {
        snprintf(dnn_why, sizeof dnn_why, "cudnnCreate failed: %s%s", dnn_status(st), last_detail());
        dnn_handle = NULL;
        return 0;
    }
    if (dnn_debug) fprintf(stderr, "vram cudnn: cuDNN %zu open, handle on the runtime's stream\n", dnn_version);
    dnn_open_state = 1;
    return 1;
}

/* Says (once per shape: the entry stays, marked bad) why a shape runs on the flash kernels. */
static void shape_declined(dnn_entry *e, const char *what, cudnnStatus_t st, const char *step, const char *detail) {
    snprintf(dnn_why, sizeof dnn_why, "no cuDNN attention for B=%lld T=%lld H=%lld %s (%s): %s%s%s%s%s", (long long)e->B,
             (long long)e->T, (long long)e->H, vram_dtype_name(e->dt), what, step, st != CUDNN_STATUS_SUCCESS ? ": " : "",
             st != CUDNN_STATUS_SUCCESS ? dnn_status(st) : "", detail && *detail ? "; cuDNN says: " : "",
             detail && *detail ? detail : "");
    if (vram_cudnn_explicit || dnn_debug)
        fprintf(stderr, "vram: VRAM_ATTENTION=cudnn: %s; running vram's flash kernels for this shape\n", dnn_why);
    e->bad = 1;
    plan_release(&e->fwd);
    plan_release(&e->bwd);
}

/* The cached plans of a shape, built on first use (both directions at once, so that a shape
 * runs forward and backward on the same path). */
static dnn_entry *entry_for(vram_dtype dt, int64_t B, int64_t T, int64_t H) {
    dnn_entry *e = NULL;
    for (int i = 0; i < ENTRIES; i++) {
        dnn_entry *c = &dnn_cache[i];
        if (c->used && c->dt == dt && c->B == B && c->T == T && c->H == H) {
            c->last_use = ++dnn_clock;
            return c;
        }
        if (!e || (e->used && (!c->used || c->last_use < e->last_use))) e = c; /* a free slot, else the oldest */
    }
    plan_release(&e->fwd);
    plan_release(&e->bwd);
    memset(e, 0, sizeof *e);
    e->used = 1, e->dt = dt, e->B = B, e->T = T, e->H = H, e->last_use = ++dnn_clock;
    if (dnn_version <= 91500 && T % 128) {
        /* the frontend adds a padding mask for these on cuDNN 9.15 and older; this path does not */
        shape_declined(e, "backward", CUDNN_STATUS_SUCCESS, "cuDNN 9.15 and older need a sequence length that is a multiple of "
                       "128 here", NULL);
        return e;
    }
    for (int dir = 0; dir < 2 && !e->bad; dir++) {
        gb g = {.st = CUDNN_STATUS_SUCCESS, .p = dir ? &e->bwd : &e->fwd, .next_uid = 100};
        if (dir) build_backward(&g, dt, B, T, H);
        else build_forward(&g, dt, B, T, H);
        if (g.st == CUDNN_STATUS_SUCCESS) gb_plan(&g, dir ? "backward" : "forward");
        if (g.st != CUDNN_STATUS_SUCCESS) shape_declined(e, dir ? "backward" : "forward", g.st, g.step, g.detail);
    }
    if (dnn_debug && !e->bad)
        fprintf(stderr, "vram cudnn: B=%lld T=%lld H=%lld %s: forward and backward plans ready\n", (long long)B, (long long)T,
                (long long)H, vram_dtype_name(dt));
    return e;
}

static size_t round256(size_t n) { return (n + 255) & ~(size_t)255; }

/* The workspace, at least `bytes` (from the allocator, tag "other"; stream order keeps the old
 * block until the work queued on it is done). NULL where memory is short. */
static char *workspace(vram_runtime *rt, size_t bytes) {
    if (dnn_ws && bytes <= dnn_ws_bytes) return dnn_ws;
    if (dnn_ws) vram_allocator_free(rt->alloc, dnn_ws);
    dnn_ws = NULL, dnn_ws_bytes = 0;
    bytes = round256(bytes > 0 ? bytes : 1);
    if (vram_allocator_malloc(rt->alloc, bytes, rt->stream, VRAM_TAG_OTHER, &dnn_ws) != VRAM_OK) return NULL;
    dnn_ws_bytes = bytes;
    if (dnn_debug) fprintf(stderr, "vram cudnn: workspace of %zu bytes\n", bytes);
    return dnn_ws;
}

/* Runs a plan with the tensors' pointers (scalars as host pointers) on the runtime's stream. */
static cudnnStatus_t execute(dnn_plan *p, int n, const int64_t *uids, void *const *ptrs, void *ws, const char **step) {
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t st = dnn.CreateDesc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    *step = "variant pack: cudnnBackendCreateDescriptor";
    if (st != CUDNN_STATUS_SUCCESS) return st;
    st = dnn.SetAttr(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    *step = "variant pack: CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS";
    if (st == CUDNN_STATUS_SUCCESS) {
        st = dnn.SetAttr(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
        *step = "variant pack: CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS";
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        st = dnn.SetAttr(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
        *step = "variant pack: CUDNN_ATTR_VARIANT_PACK_WORKSPACE";
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        st = dnn.Finalize(vp);
        *step = "variant pack: cudnnBackendFinalize";
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        int tok = vram_cuda_prof_begin();
        st = dnn.Execute(dnn_handle, p->plan, vp);
        vram_cuda_prof_end(tok, CK_PROF_CUDNN);
        *step = "cudnnBackendExecute";
    }
    dnn.DestroyDesc(vp);
    return st;
}

/* The entry of a shape whose plans are ready, or NULL (the caller runs its own kernels). */
static dnn_entry *ready(vram_dtype dt, int64_t B, int64_t T, int64_t H) {
    if (vram_cuda_state.error != VRAM_OK) return NULL; /* the caller's launches are skipped too */
    if (!dnn_open()) {
        declined();
        return NULL;
    }
    dnn_entry *e = entry_for(dt, B, T, H);
    return e->bad ? NULL : e;
}

static void run_failed(dnn_entry *e, const char *what, cudnnStatus_t st, const char *step) {
    char detail[320] = "";
    if (dnn.GetLastErrorString) dnn.GetLastErrorString(detail, sizeof detail);
    shape_declined(e, what, st, step, detail);
}

/* VRAM_CUDNN_DEBUG: the first call that ran in each direction (later ones are not reported). */
static void first_run(const dnn_entry *e, const char *what) {
    static int said[2];
    int d = what[0] == 'b';
    if (!dnn_debug || said[d]) return;
    said[d] = 1;
    fprintf(stderr, "vram cudnn: %s B=%lld T=%lld H=%lld %s queued on the stream (later calls are not reported)\n", what,
            (long long)e->B, (long long)e->T, (long long)e->H, vram_dtype_name(e->dt));
}

/* The plans declare 16-byte aligned tensors: a call whose pointers are not runs on the flash
 * kernels (the runtime's own tensors always are). */
static int misaligned(const void *a, const void *b, const void *c, const void *d, const void *e) {
    uintptr_t any = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e;
    if (any % 16 && dnn_debug) fprintf(stderr, "vram cudnn: a tensor is not 16-byte aligned: the flash kernels run this call\n");
    return any % 16 != 0;
}

int vram_cudnn_attention_forward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                 void *out, float *lse) {
    size_t third = (size_t)(H * D) * vram_dtype_size(dt);
    if (misaligned(qkv, (char *)qkv + third, out, lse, NULL)) return 0;
    dnn_entry *e = ready(dt, B, T, H);
    if (!e) return 0;
    char *ws = workspace(rt, (size_t)e->fwd.ws);
    if (!ws) {
        fprintf(stderr, "vram: VRAM_ATTENTION=cudnn: no memory for cuDNN's %lld-byte workspace; the flash kernels run this "
                "call\n", (long long)e->fwd.ws);
        return 0;
    }
    float scale = 1.0f / sqrtf((float)D), neg_inf = dnn_version >= 91000 ? -INFINITY : -FLT_MAX;
    int64_t uids[7] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF};
    void *ptrs[7] = {(char *)qkv, (char *)qkv + third, (char *)qkv + 2 * third, out, lse, &scale, &neg_inf};
    const char *step = "";
    cudnnStatus_t st = execute(&e->fwd, 7, uids, ptrs, ws, &step);
    if (st != CUDNN_STATUS_SUCCESS) {
        run_failed(e, "forward", st, step);
        return 0;
    }
    first_run(e, "forward");
    vram_cudnn_attention_calls++;
    return 1;
}

int vram_cudnn_attention_backward(vram_runtime *rt, vram_dtype dt, int64_t B, int64_t T, int64_t H, const void *qkv,
                                  const void *out, const void *gout, const float *lse, void *gqkv) {
    size_t third = (size_t)(H * D) * vram_dtype_size(dt);
    if (misaligned(qkv, (char *)qkv + third, out, gout, lse) || misaligned(gqkv, (char *)gqkv + third, NULL, NULL, NULL))
        return 0;
    dnn_entry *e = ready(dt, B, T, H);
    if (!e) return 0;
    /* D = rowsum(dO * O) [B, H, T] and dQ's fp32 accumulator [B, H, T, 64]: the flash kernels'
     * two temporaries (the same sizes, tags and order), so that the allocations stay the ones the
     * planner predicts whichever path runs; the plan's own workspace beside them */
    size_t dsum = (size_t)(B * H * T) * sizeof(float), acc = (size_t)(B * H * T * D) * sizeof(float);
    char *ws = workspace(rt, (size_t)e->bwd.ws);
    void *dvec = NULL, *dq = NULL;
    if (ws && vram_allocator_malloc(rt->alloc, dsum ? dsum : 1, rt->stream, VRAM_TAG_TEMPORARY, &dvec) == VRAM_OK &&
        vram_allocator_malloc(rt->alloc, acc ? acc : 1, rt->stream, VRAM_TAG_TEMPORARY, &dq) != VRAM_OK) {
        vram_allocator_free(rt->alloc, dvec);
        dvec = NULL;
    }
    if (!dvec) {
        if (vram_cudnn_explicit || dnn_debug)
            fprintf(stderr, "vram: VRAM_ATTENTION=cudnn: no memory for the backward's %zu bytes of fp32 buffers; the flash "
                    "kernels run this call\n", dsum + acc);
        return 0;
    }
    if (dnn_version < 90600) vram_cuda_zero(dq, acc); /* (later versions clear it themselves) */
    float scale = 1.0f / sqrtf((float)D), neg_inf = dnn_version >= 91000 ? -INFINITY : -FLT_MAX, one = 1.0f;
    int64_t uids[14] = {U_Q, U_K, U_V, U_O, U_DO, U_STATS, U_DQ, U_DK, U_DV, U_SCALE, U_NEG_INF, U_ONE, U_DSUM, U_DQ_ACC};
    void *ptrs[14] = {(char *)qkv, (char *)qkv + third, (char *)qkv + 2 * third, (void *)out, (void *)gout, (void *)lse,
                      gqkv, (char *)gqkv + third, (char *)gqkv + 2 * third, &scale, &neg_inf, &one, dvec, dq};
    const char *step = "";
    cudnnStatus_t st = execute(&e->bwd, 14, uids, ptrs, ws, &step);
    vram_allocator_free(rt->alloc, dq); /* stream order keeps them until cuDNN's kernels have read them */
    vram_allocator_free(rt->alloc, dvec);
    if (st != CUDNN_STATUS_SUCCESS) {
        run_failed(e, "backward", st, step);
        return 0;
    }
    first_run(e, "backward");
    vram_cudnn_attention_calls++;
    return 1;
}

int vram_cudnn_selfcheck(vram_dtype dt, int64_t B, int64_t T, int64_t H, int with_graph, char *msg, size_t cap) {
    if (!dnn_load()) {
        snprintf(msg, cap, "%s", dnn_why);
        return -1;
    }
    static dnn_plan p;
    int ok = 1, n_ops[2] = {0, 0};
    for (int dir = 0; dir < 2 && ok; dir++) {
        memset(&p, 0, sizeof p);
        gb g = {.st = CUDNN_STATUS_SUCCESS, .p = &p, .next_uid = 100};
        if (dir) build_backward(&g, dt, B, T, H);
        else build_forward(&g, dt, B, T, H);
        if (with_graph && g.st == CUDNN_STATUS_SUCCESS) { /* (without a handle: a device-free check) */
            cudnnBackendDescriptor_t graph = gb_make(&g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
            SET(&g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g.n_ops, g.ops, "operation graph");
            gb_finalize(&g, graph, "operation graph");
        }
        if (g.st != CUDNN_STATUS_SUCCESS) {
            snprintf(msg, cap, "cuDNN %zu, %s graph: %s: %s%s%s", dnn_version, dir ? "backward" : "forward", g.step,
                     dnn_status(g.st), g.detail[0] ? "; cuDNN says: " : "", g.detail);
            ok = 0;
        } else {
            n_ops[dir] = g.n_ops;
            snprintf(msg, cap, "cuDNN %zu: %d forward and %d backward operations built", dnn_version, n_ops[0], n_ops[1]);
        }
        plan_release(&p);
    }
    return ok;
}

void vram_cudnn_close(void) {
    for (int i = 0; i < ENTRIES; i++) {
        plan_release(&dnn_cache[i].fwd);
        plan_release(&dnn_cache[i].bwd);
        memset(&dnn_cache[i], 0, sizeof dnn_cache[i]);
    }
    if (dnn_ws && vram_cuda_state.rt) vram_allocator_free(vram_cuda_state.rt->alloc, dnn_ws);
    dnn_ws = NULL, dnn_ws_bytes = 0;
    if (dnn_handle) dnn.Destroy(dnn_handle);
    dnn_handle = NULL;
    dnn_open_state = 0;
}

#endif
