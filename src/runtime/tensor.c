/* tensor.c — the runtime (allocator + kernel table + random state) and tensors: storage blocks
 * from the caching allocator, reference counted, and strided views over them.
 *
 * Storage: {data, nbytes, tag, refs}. A tensor holds one reference to its storage; views made
 * by vram_tensor_view_new share it. When the last reference goes, the block returns to the
 * allocator (vram_allocator_free), which caches it for the next request of that size.
 * A shape-only runtime (the planner's) allocates the same blocks but never touches their bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_rt.h"
#include "dtype_conv.h"
#include "rt_internal.h"

static const struct {
    size_t size;
    const char *name;
} dtype_info[VRAM_DTYPE_COUNT] = {
    {8, "f64"}, {4, "f32"}, {2, "f16"}, {2, "bf16"}, {4, "i32"}, {8, "i64"}, {1, "i8"}, {1, "u8"},
};

size_t vram_dtype_size(vram_dtype dt) { return (unsigned)dt < VRAM_DTYPE_COUNT ? dtype_info[dt].size : 0; }
const char *vram_dtype_name(vram_dtype dt) { return (unsigned)dt < VRAM_DTYPE_COUNT ? dtype_info[dt].name : "?"; }
int vram_dtype_is_float(vram_dtype dt) { return dt <= VRAM_DTYPE_BF16; }

/* ---- runtime ---- */

static void runtime_init(vram_runtime *rt, vram_allocator *a, int threads) {
    rt->alloc = a;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    rt->threads = threads > 0 ? threads : (n > 0 ? (int)n : 1);
    if (rt->threads > 64) rt->threads = 64;
    vram_runtime_seed(rt, 0x5eed);
}

vram_status vram_runtime_new(vram_allocator *a, int threads, vram_runtime **out) {
    if (!a || !out) return vram_error(VRAM_ERR_INVALID_ARG, "runtime: null argument");
    vram_status bad = vram_check_switches();
    if (bad != VRAM_OK) return bad;
    vram_device *dev = vram_allocator_device(a);
    int cuda = dev && !strcmp(dev->kind, "cuda");
    if (!dev || (!dev->host_accessible && !cuda))
        return vram_error(VRAM_ERR_UNSUPPORTED, "runtime: device '%s' has no kernel table (the CPU kernels run on the "
                          "host device, the GPU kernels on cuda devices)", dev ? dev->name : "?");
    vram_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return vram_error(VRAM_ERR_HOST_MEMORY, "runtime: out of host memory");
    rt->alloc = a;
    rt->k = &vram_cpu_kernels;
    if (cuda) {
        vram_status s = vram_cuda_runtime_open(rt, dev->index);
        if (s != VRAM_OK) {
            free(rt);
            return s;
        }
        rt->k = &vram_cuda_kernels;
        rt->on_gpu = 1;
    }
    runtime_init(rt, a, threads);
    *out = rt;
    return VRAM_OK;
}

vram_status vram_runtime_new_shape_only(vram_allocator *a, int threads, vram_runtime **out) {
    if (!a || !out) return vram_error(VRAM_ERR_INVALID_ARG, "runtime: null argument");
    vram_status bad = vram_check_switches();
    if (bad != VRAM_OK) return bad;
    vram_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return vram_error(VRAM_ERR_HOST_MEMORY, "runtime: out of host memory");
    rt->k = &vram_plan_kernels;
    rt->shape_only = 1;
    runtime_init(rt, a, threads);
    *out = rt;
    return VRAM_OK;
}

vram_status vram_runtime_new_shape_only_gpu(vram_allocator *a, vram_runtime **out) {
    vram_runtime *rt = NULL;
    vram_status s = vram_runtime_new_shape_only(a, 1, &rt);
    if (s != VRAM_OK) return s;
    rt->k = &vram_plan_cuda_kernels;
    /* in the CUDA runtime's order: the kernels' scratch, then cuBLASLt's workspace */
    s = vram_allocator_malloc(a, CUDA_SCRATCH_BYTES, rt->stream, VRAM_TAG_OTHER, &rt->plan_held[0]);
    if (s == VRAM_OK) s = vram_allocator_malloc(a, CUDA_WORKSPACE_BYTES, rt->stream, VRAM_TAG_OTHER, &rt->plan_held[1]);
    if (s != VRAM_OK) {
        vram_runtime_free(rt);
        return s;
    }
    *out = rt;
    return VRAM_OK;
}

void vram_runtime_free(vram_runtime *rt) {
    if (!rt) return;
    for (int i = 0; i < 2; i++)
        if (rt->plan_held[i]) vram_allocator_free(rt->alloc, rt->plan_held[i]);
    if (rt->on_gpu) vram_cuda_runtime_close(rt);
    free(rt);
}

void vram_runtime_set_alloc_observer(vram_runtime *rt, void (*fn)(void *ctx, vram_status status), void *ctx) {
    rt->on_alloc = fn;
    rt->on_alloc_ctx = ctx;
}

vram_status vram_runtime_sync(vram_runtime *rt) { return rt->k->sync(); }
int vram_runtime_on_gpu(const vram_runtime *rt) { return rt->on_gpu; }
vram_allocator *vram_runtime_allocator(vram_runtime *rt) { return rt->alloc; }
const char *vram_runtime_device_name(vram_runtime *rt) { return vram_allocator_device(rt->alloc)->name; }

const char *vram_runtime_attention_report(vram_runtime *rt, char *buf, size_t cap) {
    if (!rt || !buf || !cap || !rt->k->attention_report) return NULL;
    return rt->k->attention_report(buf, cap);
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void vram_runtime_seed(vram_runtime *rt, uint64_t seed) {
    for (int i = 0; i < 4; i++) rt->rng[i] = splitmix(&seed);
}
void vram_runtime_rng_get(vram_runtime *rt, uint64_t s[4]) { memcpy(s, rt->rng, sizeof rt->rng); }
void vram_runtime_rng_set(vram_runtime *rt, const uint64_t s[4]) { memcpy(rt->rng, s, sizeof rt->rng); }

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double vram_runtime_uniform(vram_runtime *rt) { return (double)(rng_next(rt->rng) >> 11) * 0x1.0p-53; }

double vram_runtime_normal(vram_runtime *rt) {
    double u1 = vram_runtime_uniform(rt), u2 = vram_runtime_uniform(rt);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- tensors ---- */

int64_t vram_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

const char *vram_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap) {
    size_t used = 0;
    used += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

vram_status vram_tensor_empty(vram_runtime *rt, vram_dtype dt, int ndim, const int64_t *shape, vram_tag tag,
                              vram_tensor **out) {
    if (!rt || !out || (ndim > 0 && !shape)) return vram_error(VRAM_ERR_INVALID_ARG, "tensor: null argument");
    if ((unsigned)dt >= VRAM_DTYPE_COUNT) return vram_error(VRAM_ERR_INVALID_ARG, "tensor: unknown dtype %d", (int)dt);
    if (ndim < 0 || ndim > MAXD)
        return vram_error(VRAM_ERR_INVALID_ARG, "tensor: %d dimensions (at most %d)", ndim, MAXD);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return vram_error(VRAM_ERR_SHAPE, "tensor: negative dimension %lld", (long long)shape[i]);
        if (shape[i] && n > INT64_MAX / 16 / shape[i]) return vram_error(VRAM_ERR_SHAPE, "tensor: shape too large");
        n *= shape[i];
    }
    vram_storage *st = calloc(1, sizeof *st);
    vram_tensor *t = calloc(1, sizeof *t);
    if (!st || !t) {
        free(st);
        free(t);
        return vram_error(VRAM_ERR_HOST_MEMORY, "tensor: out of host memory for the tensor header");
    }
    size_t nbytes = (size_t)n * vram_dtype_size(dt);
    vram_status s = vram_allocator_malloc(rt->alloc, nbytes, rt->stream, tag, &st->data);
    vram_runtime_observe(rt, s);
    if (s != VRAM_OK) {
        free(st);
        free(t);
        char sh[96];
        if (s == VRAM_ERR_OUT_OF_MEMORY)
            return vram_error(s, "out of memory allocating a %s %s tensor (%zu bytes, tag %s)",
                              vram_dtype_name(dt), vram_shape_str(ndim, shape, sh, sizeof sh), nbytes,
                              vram_allocator_tag_name(rt->alloc, tag));
        return s;
    }
    st->rt = rt;
    st->nbytes = nbytes;
    st->tag = tag;
    atomic_init(&st->refs, 1);
    atomic_init(&t->refs, 1);
    t->rt = rt;
    t->st = st;
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    contiguous_strides(ndim, shape, t->strides);
    *out = t;
    return VRAM_OK;
}

vram_status vram_tensor_empty_like(const vram_tensor *t, vram_tag tag, vram_tensor **out) {
    return vram_tensor_empty(t->rt, t->dtype, t->ndim, t->shape, tag, out);
}

vram_status vram_tensor_new(vram_runtime *rt, vram_dtype dt, int ndim, const int64_t *shape, vram_tag tag,
                            vram_tensor **out) {
    vram_status s = vram_tensor_empty(rt, dt, ndim, shape, tag, out);
    if (s == VRAM_OK) rt->k->zero((*out)->st->data, (*out)->st->nbytes);
    return s;
}

/* A "0"/"1" switch: its value, dflt where unset or empty, -1 for anything else. */
static int env_switch(const char *name, int dflt) {
    const char *e = getenv(name);
    if (!e || !*e) return dflt;
    return !strcmp(e, "1") ? 1 : !strcmp(e, "0") ? 0 : -1;
}

int vram_fewer_launches(void) { return env_switch("VRAM_FEWER_LAUNCHES", 1) != 0; }

int vram_grad_adopt(void) { return env_switch("VRAM_GRAD_ADOPT", 1) != 0; }

vram_status vram_check_switches(void) {
    static const char *const names[] = {"VRAM_FEWER_LAUNCHES", "VRAM_GRAD_ADOPT"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (env_switch(names[i], 0) < 0)
            return vram_error(VRAM_ERR_INVALID_ARG, "%s=%s: expected 0 or 1", names[i], getenv(names[i]));
    return VRAM_OK;
}

vram_status vram_tensor_from_data(vram_runtime *rt, vram_dtype dt, int ndim, const int64_t *shape, vram_tag tag,
                                  const void *data, vram_tensor **out) {
    if (!data) return vram_error(VRAM_ERR_INVALID_ARG, "tensor_from_data: null data");
    vram_status s = vram_tensor_empty(rt, dt, ndim, shape, tag, out);
    if (s == VRAM_OK) rt->k->upload((*out)->st->data, data, (*out)->st->nbytes);
    return s;
}

void vram_tensor_write_host(vram_tensor *t, const void *host) {
    if (t->st->lowp) { /* a parameter with a kept 16-bit copy: drop it, the next use casts anew */
        vram_tensor_free(t->st->lowp);
        t->st->lowp = NULL;
    }
    t->rt->k->upload(vram_tensor_data(t), host, (size_t)vram_tensor_numel(t) * vram_dtype_size(t->dtype));
}

void vram_tensor_read_host(const vram_tensor *t, void *host) {
    t->rt->k->download(host, vram_tensor_data(t), (size_t)vram_tensor_numel(t) * vram_dtype_size(t->dtype));
}

vram_tensor *vram_tensor_view_new(const vram_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                                  int64_t offset) {
    vram_tensor *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    atomic_init(&v->refs, 1);
    v->rt = t->rt;
    v->st = t->st;
    atomic_fetch_add(&t->st->refs, 1);
    v->dtype = t->dtype;
    v->ndim = ndim;
    if (ndim) {
        memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
        memcpy(v->strides, strides, sizeof(int64_t) * (size_t)ndim);
    }
    v->offset = offset;
    return v;
}

vram_tensor *vram_tensor_retain(vram_tensor *t) {
    if (t) atomic_fetch_add(&t->refs, 1);
    return t;
}

void vram_node_unref(vram_node *n); /* autograd.c */

static void storage_unref(vram_storage *st) {
    if (atomic_fetch_sub(&st->refs, 1) == 1) {
        vram_tensor_free(st->lowp);
        vram_tensor_free(st->gelu);
        vram_allocator_free(st->rt->alloc, st->data);
        free(st);
    }
}

void vram_tensor_free(vram_tensor *t) {
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    vram_tensor_free(t->grad);
    if (t->grad_fn) vram_node_unref(t->grad_fn);
    storage_unref(t->st);
    free(t);
}

vram_runtime *vram_tensor_runtime(const vram_tensor *t) { return t->rt; }
vram_dtype vram_tensor_dtype(const vram_tensor *t) { return t->dtype; }
int vram_tensor_ndim(const vram_tensor *t) { return t->ndim; }
const int64_t *vram_tensor_shape(const vram_tensor *t) { return t->shape; }
const int64_t *vram_tensor_strides(const vram_tensor *t) { return t->strides; }
int64_t vram_tensor_numel(const vram_tensor *t) { return vram_shape_numel(t->ndim, t->shape); }
void *vram_tensor_data(const vram_tensor *t) {
    return (char *)t->st->data + t->offset * (int64_t)vram_dtype_size(t->dtype);
}
size_t vram_tensor_storage_bytes(const vram_tensor *t) { return t->st->nbytes; }
vram_tag vram_tensor_tag(const vram_tensor *t) { return t->st->tag; }

vram_status vram_tensor_set_tag(vram_tensor *t, vram_tag tag) {
    vram_status s = vram_allocator_set_tag(t->rt->alloc, t->st->data, tag);
    if (s == VRAM_OK) t->st->tag = tag;
    return s;
}

int vram_tensor_is_contiguous(const vram_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

int vram_shape_equal(const vram_tensor *a, const vram_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

void vram_kview_of(const vram_tensor *t, vram_kview *v) {
    v->data = vram_tensor_data(t);
    v->dtype = t->dtype;
    v->ndim = t->ndim;
    memcpy(v->shape, t->shape, sizeof v->shape);
    memcpy(v->strides, t->strides, sizeof v->strides);
}

static vram_status index_offset(const vram_tensor *t, const int64_t *index, int64_t *off) {
    int64_t o = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (index[i] < 0 || index[i] >= t->shape[i])
            return vram_error(VRAM_ERR_INVALID_ARG, "tensor index %lld out of range for dimension %d of size %lld",
                              (long long)index[i], i, (long long)t->shape[i]);
        o += index[i] * t->strides[i];
    }
    *off = o;
    return VRAM_OK;
}

vram_status vram_tensor_get(const vram_tensor *t, const int64_t *index, double *value) {
    int64_t o = 0;
    vram_status s = index_offset(t, index, &o);
    if (s == VRAM_OK) {
        char one[8];
        t->rt->k->download(one, (char *)vram_tensor_data(t) + o * (int64_t)vram_dtype_size(t->dtype),
                           vram_dtype_size(t->dtype));
        *value = vram_load(one, t->dtype);
    }
    return s;
}

vram_status vram_tensor_set(vram_tensor *t, const int64_t *index, double value) {
    int64_t o = 0;
    vram_status s = index_offset(t, index, &o);
    if (s == VRAM_OK) {
        char one[8];
        vram_store(one, t->dtype, value);
        t->rt->k->upload((char *)vram_tensor_data(t) + o * (int64_t)vram_dtype_size(t->dtype), one,
                         vram_dtype_size(t->dtype));
    }
    return s;
}

double vram_tensor_item(const vram_tensor *t) {
    char one[8];
    t->rt->k->download(one, vram_tensor_data(t), vram_dtype_size(t->dtype));
    return vram_load(one, t->dtype);
}

vram_status vram_tensor_to_f64(const vram_tensor *t, double *out) {
    if (t->rt->on_gpu) { /* converted on the device, then read back */
        vram_tensor *c = NULL;
        vram_status st = vram_tensor_cast(t, VRAM_DTYPE_F64, VRAM_TAG_TEMPORARY, &c);
        if (st != VRAM_OK) return st;
        vram_tensor_read_host(c, out);
        vram_tensor_free(c);
        return t->rt->k->sync();
    }
    vram_kview d, s;
    vram_kview_of(t, &s);
    d = s;
    d.data = (char *)out;
    d.dtype = VRAM_DTYPE_F64;
    contiguous_strides(t->ndim, t->shape, d.strides);
    t->rt->k->copy(&d, &s);
    return VRAM_OK;
}

vram_status vram_tensor_fill(vram_tensor *t, double value) {
    vram_kview v;
    vram_kview_of(t, &v);
    t->rt->k->fill(&v, value);
    return VRAM_OK;
}

vram_status vram_tensor_copy(vram_tensor *dst, const vram_tensor *src) {
    if (!vram_shape_equal(dst, src)) {
        char a[96], b[96];
        return vram_error(VRAM_ERR_SHAPE, "copy: destination %s and source %s differ", SHAPE_STR(dst, a),
                          SHAPE_STR(src, b));
    }
    vram_kview d, s;
    vram_kview_of(dst, &d);
    vram_kview_of(src, &s);
    dst->rt->k->copy(&d, &s);
    return VRAM_OK;
}

vram_status vram_tensor_cast(const vram_tensor *t, vram_dtype dt, vram_tag tag, vram_tensor **out) {
    vram_tensor *o = NULL;
    vram_status s = vram_tensor_empty(t->rt, dt, t->ndim, t->shape, tag, &o);
    if (s != VRAM_OK) return s;
    vram_tensor_copy(o, t);
    *out = o;
    return VRAM_OK;
}

vram_status vram_tensor_contig(vram_tensor *t, vram_tensor **out) {
    if (vram_tensor_is_contiguous(t)) {
        *out = vram_tensor_retain(t);
        return VRAM_OK;
    }
    vram_tensor *o = NULL;
    vram_status s = vram_tensor_empty(t->rt, t->dtype, t->ndim, t->shape, VRAM_TAG_TEMPORARY, &o);
    if (s != VRAM_OK) return s;
    vram_tensor_copy(o, t);
    *out = o;
    return VRAM_OK;
}
