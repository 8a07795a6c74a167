/* cpu_kernels.c — the CPU kernel table (vram_cpu_kernels): every slot of vram_kernels except
 * the matrix product (cpu_matmul.c), for f32 and f64.
 *
 * Strided kernels walk the outer dimensions with an index vector and run the innermost one as
 * a plain loop, with a unit-stride fast path the compiler vectorises. Row kernels (softmax,
 * layer norm, cross-entropy) take contiguous rows; ops make inputs contiguous first.
 * DISPATCH instantiates a body for float and double: T is the element type inside it.
 */
#include <math.h>
#include <string.h>

#include "dtype_conv.h"
#include "float_dispatch.h"
#include "grad_scaler_rule.h"
#include "rt_internal.h"

#define DISPATCH(dt, ...) VRAM_FLOAT_DISPATCH((dt) == VRAM_DTYPE_F32, __VA_ARGS__)

/* erf for f32 without a call or a branch, so GELU loops vectorise: a rational approximation
 * (odd degree-13 numerator, degree-8 denominator in x, input clamped to [-4, 4]); the largest
 * error against the double erf is 3.8e-7, about that of erff itself. */
static inline float fast_erff(float x) {
    x = x > 4.0f ? 4.0f : x < -4.0f ? -4.0f : x;
    float x2 = x * x;
    float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
    p = x2 * p + -2.10102402082508e-06f;
    p = x2 * p + -5.69250639462346e-05f;
    p = x2 * p + -7.34990630326855e-04f;
    p = x2 * p + -2.95459980854025e-03f;
    p = x2 * p + -1.60960333262415e-02f;
    p = x * p;
    float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
    q = x2 * q + -1.68282697438203e-03f;
    q = x2 * q + -7.37332916720468e-03f;
    q = x2 * q + -1.42647390514189e-02f;
    return p / q;
}

/* exp for f32 without a call: 2^(x log2 e) split into 2^n (built in the exponent bits) times
 * a degree-7 polynomial for 2^f, f in [-0.5, 0.5]; relative error below 4e-6 (from rounding x log2 e
 * to f32 at the ends of the range; ~1e-6 where softmax lives, x <= 0) over the range
 * where expf is finite and normal; inputs clamped to [-87, 88]. */
static inline float fast_expf(float x) {
    x = x > 88.0f ? 88.0f : x < -87.0f ? -87.0f : x;
    float t = x * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 pushes out the fraction */
    float f = t - n;
    float p = 1.5252734e-5f; /* Taylor series of 2^f: ln2^k / k! */
    p = p * f + 1.5403530e-4f;
    p = p * f + 1.3333558e-3f;
    p = p * f + 9.6181291e-3f;
    p = p * f + 5.5504109e-2f;
    p = p * f + 2.4022651e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}

/* Compiled for AVX-512, AVX2 and the baseline, picked at load time: the elementwise loops of
 * GELU, softmax and cross-entropy are where the time goes outside the matrix product. */
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/* Math in the element type: float kernels call fast_erff/fast_expf/tanhf (several times faster than the
 * double versions and accurate to f32), double kernels the double functions (gradient checks). */
#define M_EXP(x) _Generic((x), float: fast_expf, default: exp)(x)
#define M_ERF(x) _Generic((x), float: fast_erff, default: erf)(x)
#define M_TANH(x) _Generic((x), float: tanhf, default: tanh)(x)
#define M_LOG(x) _Generic((x), float: logf, default: log)(x)
#define M_SQRT(x) _Generic((x), float: sqrtf, default: sqrt)(x)

/* Advances idx over dims [0, nd-1) (the last dim is the inner loop); returns 0 at the end. */
static inline int next_outer(int nd, const int64_t *shape, int64_t *idx) {
    for (int d = nd - 2; d >= 0; d--) {
        if (++idx[d] < shape[d]) return 1;
        idx[d] = 0;
    }
    return 0;
}

static inline int64_t outer_off(int nd, const int64_t *idx, const int64_t *strides) {
    int64_t o = 0;
    for (int d = 0; d < nd - 1; d++) o += idx[d] * strides[d];
    return o;
}

static int has_zero(int nd, const int64_t *shape) {
    for (int d = 0; d < nd; d++)
        if (shape[d] == 0) return 1;
    return 0;
}

static void cpu_copy(const vram_kview *dst, const vram_kview *src) {
    int nd = src->ndim;
    if (has_zero(nd, src->shape)) return;
    int64_t idx[MAXD] = {0};
    int64_t inner = nd ? src->shape[nd - 1] : 1;
    int64_t ds = nd ? dst->strides[nd - 1] : 1, ss = nd ? src->strides[nd - 1] : 1;
    size_t de = vram_dtype_size(dst->dtype), se = vram_dtype_size(src->dtype);
    do {
        char *d = dst->data + outer_off(nd, idx, dst->strides) * (int64_t)de;
        const char *s = src->data + outer_off(nd, idx, src->strides) * (int64_t)se;
        if (dst->dtype == src->dtype) {
            if (ds == 1 && ss == 1) {
                memcpy(d, s, (size_t)inner * de);
            } else if (de == 4) {
                for (int64_t i = 0; i < inner; i++) ((uint32_t *)d)[i * ds] = ((const uint32_t *)s)[i * ss];
            } else if (de == 8) {
                for (int64_t i = 0; i < inner; i++) ((uint64_t *)d)[i * ds] = ((const uint64_t *)s)[i * ss];
            } else {
                for (int64_t i = 0; i < inner; i++) memcpy(d + i * ds * (int64_t)de, s + i * ss * (int64_t)se, de);
            }
        } else {
            for (int64_t i = 0; i < inner; i++)
                vram_store(d + i * ds * (int64_t)de, dst->dtype, vram_load(s + i * ss * (int64_t)se, src->dtype));
        }
    } while (next_outer(nd, src->shape, idx));
}

static void cpu_fill(const vram_kview *dst, double v) {
    int nd = dst->ndim;
    if (has_zero(nd, dst->shape)) return;
    int64_t idx[MAXD] = {0};
    int64_t inner = nd ? dst->shape[nd - 1] : 1, ds = nd ? dst->strides[nd - 1] : 1;
    size_t de = vram_dtype_size(dst->dtype);
    char one[8];
    vram_store(one, dst->dtype, v);
    do {
        char *d = dst->data + outer_off(nd, idx, dst->strides) * (int64_t)de;
        if (dst->dtype == VRAM_DTYPE_F32 && ds == 1) {
            float f = (float)v;
            for (int64_t i = 0; i < inner; i++) ((float *)d)[i] = f;
        } else {
            for (int64_t i = 0; i < inner; i++) memcpy(d + i * ds * (int64_t)de, one, de);
        }
    } while (next_outer(nd, dst->shape, idx));
}

VEC_CLONES
static void cpu_binary(int op, const vram_kview *out, const vram_kview *a, const vram_kview *b) {
    int nd = out->ndim;
    if (has_zero(nd, out->shape)) return;
    DISPATCH(out->dtype, {
        int64_t idx[MAXD] = {0};
        int64_t inner = nd ? out->shape[nd - 1] : 1;
        int64_t as = nd ? a->strides[nd - 1] : 1, bs = nd ? b->strides[nd - 1] : 1;
        do {
            T *o = (T *)out->data + outer_off(nd, idx, out->strides);
            const T *x = (const T *)a->data + outer_off(nd, idx, a->strides);
            const T *y = (const T *)b->data + outer_off(nd, idx, b->strides);
            if (as == 1 && bs == 1) {
                switch (op) {
                case VRAM_BIN_ADD: for (int64_t i = 0; i < inner; i++) o[i] = x[i] + y[i]; break;
                case VRAM_BIN_SUB: for (int64_t i = 0; i < inner; i++) o[i] = x[i] - y[i]; break;
                case VRAM_BIN_MUL: for (int64_t i = 0; i < inner; i++) o[i] = x[i] * y[i]; break;
                default: for (int64_t i = 0; i < inner; i++) o[i] = x[i] / y[i]; break;
                }
            } else {
                switch (op) {
                case VRAM_BIN_ADD: for (int64_t i = 0; i < inner; i++) o[i] = x[i * as] + y[i * bs]; break;
                case VRAM_BIN_SUB: for (int64_t i = 0; i < inner; i++) o[i] = x[i * as] - y[i * bs]; break;
                case VRAM_BIN_MUL: for (int64_t i = 0; i < inner; i++) o[i] = x[i * as] * y[i * bs]; break;
                default: for (int64_t i = 0; i < inner; i++) o[i] = x[i * as] / y[i * bs]; break;
                }
            }
        } while (next_outer(nd, out->shape, idx));
    });
}

VEC_CLONES
static void cpu_accumulate(const vram_kview *dst, const vram_kview *src) {
    int nd = src->ndim;
    if (has_zero(nd, src->shape)) return;
    DISPATCH(src->dtype, {
        int64_t idx[MAXD] = {0};
        int64_t inner = nd ? src->shape[nd - 1] : 1;
        int64_t ds = nd ? dst->strides[nd - 1] : 1, ss = nd ? src->strides[nd - 1] : 1;
        do {
            T *d = (T *)dst->data + outer_off(nd, idx, dst->strides);
            const T *s = (const T *)src->data + outer_off(nd, idx, src->strides);
            if (ds == 1 && ss == 1) {
                for (int64_t i = 0; i < inner; i++) d[i] += s[i];
            } else if (ds == 0) {
                T acc = 0;
                for (int64_t i = 0; i < inner; i++) acc += s[i * ss];
                d[0] += acc;
            } else {
                for (int64_t i = 0; i < inner; i++) d[i * ds] += s[i * ss];
            }
        } while (next_outer(nd, src->shape, idx));
    });
}

VEC_CLONES
static void cpu_unary(int op, double p, vram_dtype dt, int64_t n, void *out, const void *in) {
    DISPATCH(dt, {
        T *o = out;
        const T *x = in;
        switch (op) {
        case VRAM_UN_RELU: for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0 ? x[i] : 0; break;
        case VRAM_UN_GELU:
            for (int64_t i = 0; i < n; i++) o[i] = (T)0.5 * x[i] * ((T)1 + M_ERF(x[i] * (T)0.70710678118654752440));
            break;
        case VRAM_UN_TANH: for (int64_t i = 0; i < n; i++) o[i] = M_TANH(x[i]); break;
        case VRAM_UN_GELU_TANH: /* 0.5 x (1 + tanh(u)) = x sigmoid(2u): one exp, so the loop vectorises */
            for (int64_t i = 0; i < n; i++) {
                T xi = x[i], u2 = (T)1.5957691216057307 * (xi + (T)0.044715 * xi * xi * xi);
                o[i] = xi / ((T)1 + M_EXP(-u2));
            }
            break;
        default: {
            T s = (T)p;
            for (int64_t i = 0; i < n; i++) o[i] = x[i] * s;
        }
        }
    });
}

VEC_CLONES
static void cpu_unary_backward(int op, double p, vram_dtype dt, int64_t n, void *gin, const void *gout,
                               const void *saved) {
    DISPATCH(dt, {
        T *gi = gin;
        const T *g = gout, *x = saved;
        switch (op) {
        case VRAM_UN_RELU: for (int64_t i = 0; i < n; i++) gi[i] = x[i] > 0 ? g[i] : 0; break;
        case VRAM_UN_GELU:
            for (int64_t i = 0; i < n; i++) {
                T xi = x[i], cdf = (T)0.5 * ((T)1 + M_ERF(xi * (T)0.70710678118654752440));
                T pdf = (T)0.39894228040143267794 * M_EXP((T)-0.5 * xi * xi);
                gi[i] = g[i] * (cdf + xi * pdf);
            }
            break;
        case VRAM_UN_TANH: for (int64_t i = 0; i < n; i++) gi[i] = g[i] * (1 - x[i] * x[i]); break;
        case VRAM_UN_GELU_TANH: /* with s = sigmoid(2u): s + 2 x s (1 - s) u' */
            for (int64_t i = 0; i < n; i++) {
                T xi = x[i], x2 = xi * xi, u2 = (T)1.5957691216057307 * (xi + (T)0.044715 * x2 * xi);
                T sg = (T)1 / ((T)1 + M_EXP(-u2)), du2 = (T)1.5957691216057307 * ((T)1 + (T)0.134145 * x2);
                gi[i] = g[i] * (sg + xi * sg * ((T)1 - sg) * du2);
            }
            break;
        default: {
            T s = (T)p;
            for (int64_t i = 0; i < n; i++) gi[i] = g[i] * s;
        }
        }
    });
}

VEC_CLONES
static void cpu_softmax(vram_dtype dt, int64_t rows, int64_t n, int64_t causal_t, int log_, void *out, const void *in) {
    DISPATCH(dt, {
        for (int64_t r = 0; r < rows; r++) {
            const T *x = (const T *)in + r * n;
            T *y = (T *)out + r * n;
            int64_t valid = causal_t > 0 ? (r % causal_t) + 1 : n;
            if (valid > n) valid = n;
            T mx = (T)-INFINITY;
            for (int64_t j = 0; j < valid; j++) mx = x[j] > mx ? x[j] : mx;
            double sum = 0;
            if (log_) {
                for (int64_t j = 0; j < valid; j++) sum += M_EXP(x[j] - mx);
                double lse = mx + log(sum);
                for (int64_t j = 0; j < valid; j++) y[j] = (T)(x[j] - lse);
                for (int64_t j = valid; j < n; j++) y[j] = (T)-INFINITY;
            } else {
                for (int64_t j = 0; j < valid; j++) {
                    T e = M_EXP(x[j] - mx);
                    y[j] = e;
                    sum += e;
                }
                T inv = (T)(1.0 / sum);
                for (int64_t j = 0; j < valid; j++) y[j] *= inv;
                for (int64_t j = valid; j < n; j++) y[j] = 0;
            }
        }
    });
}

VEC_CLONES
static void cpu_softmax_backward(vram_dtype dt, int64_t rows, int64_t n, int log_, void *gin, const void *gout,
                                 const void *yv) {
    DISPATCH(dt, {
        for (int64_t r = 0; r < rows; r++) {
            const T *g = (const T *)gout + r * n, *y = (const T *)yv + r * n;
            T *gi = (T *)gin + r * n;
            if (log_) {
                double s = 0;
                for (int64_t j = 0; j < n; j++) s += g[j];
                for (int64_t j = 0; j < n; j++) gi[j] = (T)(g[j] - M_EXP(y[j]) * (T)s);
            } else {
                double s = 0;
                for (int64_t j = 0; j < n; j++) s += (double)g[j] * y[j];
                for (int64_t j = 0; j < n; j++) gi[j] = (T)(y[j] * (g[j] - s));
            }
        }
    });
}

VEC_CLONES
static void cpu_layer_norm(vram_dtype dt, int64_t rows, int64_t n, double eps, void *out, const void *in,
                           const void *wv, const void *bv, void *meanv, void *rstdv) {
    DISPATCH(dt, {
        const T *w = wv, *b = bv;
        for (int64_t r = 0; r < rows; r++) {
            const T *x = (const T *)in + r * n;
            T *y = (T *)out + r * n;
            /* sums in the element type (vectorisable); rows are short (the model width) */
            T m = 0, v = 0;
            for (int64_t j = 0; j < n; j++) m += x[j];
            m /= (T)n;
            for (int64_t j = 0; j < n; j++) v += (x[j] - m) * (x[j] - m);
            v /= (T)n;
            T rs = (T)1 / M_SQRT(v + (T)eps);
            ((T *)meanv)[r] = m;
            ((T *)rstdv)[r] = rs;
            T mt = m, rt = rs;
            for (int64_t j = 0; j < n; j++) {
                T h = (x[j] - mt) * rt;
                y[j] = (w ? h * w[j] : h) + (b ? b[j] : 0);
            }
        }
    });
}

VEC_CLONES
static void cpu_layer_norm_backward(vram_dtype dt, int64_t rows, int64_t n, void *gxv, int gx_add, void *gwv,
                                    void *gbv, const void *gout, const void *xv, const void *wv, const void *meanv,
                                    const void *rstdv) {
    DISPATCH(dt, {
        T *gx = gxv, *gw = gwv, *gb = gbv;
        const T *w = wv;
        for (int64_t r = 0; r < rows; r++) {
            const T *g = (const T *)gout + r * n, *x = (const T *)xv + r * n;
            T m = ((const T *)meanv)[r], rs = ((const T *)rstdv)[r];
            T s1 = 0, s2 = 0;
            for (int64_t j = 0; j < n; j++) {
                T h = (x[j] - m) * rs;
                T dh = w ? g[j] * w[j] : g[j];
                s1 += dh;
                s2 += dh * h;
            }
            if (gw)
                for (int64_t j = 0; j < n; j++) gw[j] += g[j] * ((x[j] - m) * rs);
            if (gb)
                for (int64_t j = 0; j < n; j++) gb[j] += g[j];
            if (gx) {
                T a = s1 / (T)n, c = s2 / (T)n;
                T *gr = gx + r * n;
                if (gx_add) {
                    for (int64_t j = 0; j < n; j++) {
                        T h = (x[j] - m) * rs;
                        T dh = w ? g[j] * w[j] : g[j];
                        volatile T v = rs * (dh - a - h * c); /* (stored first: no fused add, as accumulate sees it) */
                        gr[j] += v;
                    }
                } else {
                    for (int64_t j = 0; j < n; j++) {
                        T h = (x[j] - m) * rs;
                        T dh = w ? g[j] * w[j] : g[j];
                        gr[j] = rs * (dh - a - h * c);
                    }
                }
            }
        }
    });
}

static inline int64_t load_id(const void *ids, vram_dtype dt, int64_t i) {
    return dt == VRAM_DTYPE_I64 ? ((const int64_t *)ids)[i] : ((const int32_t *)ids)[i];
}

static void cpu_embedding(vram_dtype dt, int64_t n_ids, int64_t c, void *out, const void *table, const void *ids,
                          vram_dtype id_dt) {
    size_t es = vram_dtype_size(dt);
    for (int64_t i = 0; i < n_ids; i++)
        memcpy((char *)out + i * c * (int64_t)es, (const char *)table + load_id(ids, id_dt, i) * c * (int64_t)es,
               (size_t)c * es);
}

static void cpu_embedding_backward(vram_dtype dt, int64_t n_ids, int64_t c, void *gtable, const void *gout,
                                   const void *ids, vram_dtype id_dt) {
    DISPATCH(dt, {
        for (int64_t i = 0; i < n_ids; i++) {
            T *d = (T *)gtable + load_id(ids, id_dt, i) * c;
            const T *s = (const T *)gout + i * c;
            for (int64_t j = 0; j < c; j++) d[j] += s[j];
        }
    });
}

VEC_CLONES
static double cpu_cross_entropy(vram_dtype dt, int64_t rows, int64_t n, const void *logits, const void *targets,
                                vram_dtype tdt, void *lse) {
    double total = 0;
    DISPATCH(dt, {
        for (int64_t r = 0; r < rows; r++) {
            const T *x = (const T *)logits + r * n;
            T mx = (T)-INFINITY;
            double s = 0;
            for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
            for (int64_t j = 0; j < n; j++) s += M_EXP(x[j] - mx);
            double l = mx + log(s);
            ((T *)lse)[r] = (T)l;
            total += l - x[load_id(targets, tdt, r)];
        }
    });
    return rows ? total / (double)rows : 0;
}

VEC_CLONES
static void cpu_cross_entropy_backward(vram_dtype dt, int64_t rows, int64_t n, double scale, void *glogits,
                                       const void *logits, const void *targets, vram_dtype tdt, const void *lse) {
    DISPATCH(dt, {
        T sc = (T)scale;
        for (int64_t r = 0; r < rows; r++) {
            const T *x = (const T *)logits + r * n;
            T *g = (T *)glogits + r * n;
            T l = ((const T *)lse)[r];
            for (int64_t j = 0; j < n; j++) g[j] = M_EXP(x[j] - l) * sc;
            g[load_id(targets, tdt, r)] -= sc;
        }
    });
}

static void cpu_mask_scale(vram_dtype dt, int64_t n, void *out, const void *in, const uint8_t *mask, double scale) {
    DISPATCH(dt, {
        T *o = out;
        const T *x = in;
        T s = (T)scale;
        for (int64_t i = 0; i < n; i++) o[i] = mask[i] ? x[i] * s : 0;
    });
}

static void cpu_im2col(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                       int64_t oh, int64_t ow, const void *xv, void *colv) {
    DISPATCH(dt, {
        const T *x = xv;
        T *col = colv;
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t ki = 0; ki < kh; ki++)
                for (int64_t kj = 0; kj < kw; kj++) {
                    T *row = col + ((ci * kh + ki) * kw + kj) * oh * ow;
                    for (int64_t y = 0; y < oh; y++) {
                        int64_t iy = y * stride - pad + ki;
                        for (int64_t xx = 0; xx < ow; xx++) {
                            int64_t ix = xx * stride - pad + kj;
                            row[y * ow + xx] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[(ci * h + iy) * w + ix] : 0;
                        }
                    }
                }
    });
}

static void cpu_col2im(vram_dtype dt, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride, int pad,
                       int64_t oh, int64_t ow, const void *colv, void *gxv) {
    DISPATCH(dt, {
        const T *col = colv;
        T *gx = gxv;
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t ki = 0; ki < kh; ki++)
                for (int64_t kj = 0; kj < kw; kj++) {
                    const T *row = col + ((ci * kh + ki) * kw + kj) * oh * ow;
                    for (int64_t y = 0; y < oh; y++) {
                        int64_t iy = y * stride - pad + ki;
                        if (iy < 0 || iy >= h) continue;
                        for (int64_t xx = 0; xx < ow; xx++) {
                            int64_t ix = xx * stride - pad + kj;
                            if (ix >= 0 && ix < w) gx[(ci * h + iy) * w + ix] += row[y * ow + xx];
                        }
                    }
                }
    });
}

static void cpu_pool2d(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride, int64_t oh,
                       int64_t ow, void *outv, const void *xv, int32_t *argmax) {
    DISPATCH(dt, {
        for (int64_t p = 0; p < planes; p++) {
            const T *x = (const T *)xv + p * h * w;
            T *o = (T *)outv + p * oh * ow;
            for (int64_t y = 0; y < oh; y++)
                for (int64_t xx = 0; xx < ow; xx++) {
                    double best = -INFINITY, sum = 0;
                    int32_t arg = 0;
                    for (int ki = 0; ki < k; ki++)
                        for (int kj = 0; kj < k; kj++) {
                            int64_t iy = y * stride + ki, ix = xx * stride + kj;
                            double v = x[iy * w + ix];
                            sum += v;
                            if (v > best) {
                                best = v;
                                arg = (int32_t)(iy * w + ix);
                            }
                        }
                    o[y * ow + xx] = (T)(is_max ? best : sum / (k * k));
                    if (is_max) argmax[p * oh * ow + y * ow + xx] = arg;
                }
        }
    });
}

static void cpu_pool2d_backward(vram_dtype dt, int is_max, int64_t planes, int64_t h, int64_t w, int k, int stride,
                                int64_t oh, int64_t ow, void *gxv, const void *goutv, const int32_t *argmax) {
    DISPATCH(dt, {
        for (int64_t p = 0; p < planes; p++) {
            T *gx = (T *)gxv + p * h * w;
            const T *g = (const T *)goutv + p * oh * ow;
            for (int64_t y = 0; y < oh; y++)
                for (int64_t xx = 0; xx < ow; xx++) {
                    T gv = g[y * ow + xx];
                    if (is_max) {
                        gx[argmax[p * oh * ow + y * ow + xx]] += gv;
                    } else {
                        T share = gv / (T)(k * k);
                        for (int ki = 0; ki < k; ki++)
                            for (int kj = 0; kj < k; kj++) gx[(y * stride + ki) * w + xx * stride + kj] += share;
                    }
                }
        }
    });
}

/* PyTorch's SGD: g += wd p; buf = g (first step) or momentum buf + g; p -= lr buf. */
VEC_CLONES
static void cpu_sgd_update(vram_dtype dt, int64_t n, void *pv, const void *gv, void *bufv, double lr, double momentum,
                           double wd, int first, const int32_t *skip) {
    if (skip && *skip) return;
    DISPATCH(dt, {
        T *p = pv, *buf = bufv;
        const T *g = gv;
        for (int64_t i = 0; i < n; i++) {
            T d = g[i] + (T)wd * p[i];
            if (buf) {
                buf[i] = first ? d : (T)momentum * buf[i] + d;
                d = buf[i];
            }
            p[i] -= (T)lr * d;
        }
    });
}

/* PyTorch's Adam (L2 decay in the gradient) and AdamW (decoupled: p *= 1 - lr wd). */
VEC_CLONES
static void cpu_adam_update(vram_dtype dt, int64_t n, void *pv, const void *gv, void *mv, void *vv, double lr, double b1,
                            double b2, double eps, double wd, int decoupled, int64_t step, const int32_t *skip) {
    if (skip && *skip) return;
    double bc1 = 1 - pow(b1, (double)step), bc2 = 1 - pow(b2, (double)step);
    DISPATCH(dt, {
        T *p = pv, *m = mv, *v = vv;
        const T *g = gv;
        T step_size = (T)(lr / bc1), sbc2 = (T)sqrt(bc2), tb1 = (T)b1, tb2 = (T)b2, te = (T)eps;
        T decay = (T)(1 - lr * wd);
        for (int64_t i = 0; i < n; i++) {
            T gi = g[i];
            if (decoupled) {
                p[i] *= decay;
            } else {
                gi += (T)wd * p[i];
            }
            m[i] = tb1 * m[i] + (1 - tb1) * gi;
            v[i] = tb2 * v[i] + (1 - tb2) * gi * gi;
            p[i] -= step_size * m[i] / (M_SQRT(v[i]) / sbc2 + te);
        }
    });
}

VEC_CLONES
static void cpu_adagrad_update(vram_dtype dt, int64_t n, void *pv, const void *gv, void *sv, double lr, double eps,
                               double wd, int64_t step, double lr_decay, const int32_t *skip) {
    if (skip && *skip) return;
    double clr = lr / (1 + (double)(step - 1) * lr_decay);
    DISPATCH(dt, {
        T *p = pv, *s = sv;
        const T *g = gv;
        for (int64_t i = 0; i < n; i++) {
            T gi = g[i] + (T)wd * p[i];
            s[i] += gi * gi;
            p[i] -= (T)clr * gi / (M_SQRT(s[i]) + (T)eps);
        }
    });
}

static void cpu_unscale(vram_dtype dt, int64_t n, void *xv, const float *scale, int32_t *found_inf) {
    DISPATCH(dt, {
        T *x = xv, inv = (T)(1.0 / (double)*scale);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            x[i] *= inv;
            bad |= !isfinite(x[i]);
        }
        if (bad) *found_inf = 1;
    });
}

static void cpu_scaler_update(float *scale, int32_t *state, double growth, double backoff, int interval) {
    vram_scaler_rule(scale, state, growth, backoff, interval);
}

static double cpu_sum_squares(int count, const vram_dtype *dts, const int64_t *ns, const void *const *xs) {
    double s = 0;
    for (int k = 0; k < count; k++) {
        int64_t n = ns[k];
        DISPATCH(dts[k], {
            const T *x = xs[k];
            for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
        });
    }
    return s;
}

static void cpu_scale_inplace(vram_dtype dt, int64_t n, void *xv, double s) {
    DISPATCH(dt, {
        T *x = xv;
        T f = (T)s;
        for (int64_t i = 0; i < n; i++) x[i] *= f;
    });
}

static void cpu_upload(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

static void cpu_zero(void *dst, size_t n) {
    if (n) memset(dst, 0, n);
}

static int64_t cpu_find_bad_id(int64_t n, const void *ids, vram_dtype dt, int64_t limit) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v = load_id(ids, dt, i);
        if (v < 0 || v >= limit) return i;
    }
    return -1;
}

static vram_status cpu_sync(void) { return VRAM_OK; }

void vram_cpu_matmul(vram_runtime *rt, vram_dtype dt, int64_t batch, int64_t M, int64_t N, int64_t K, const void *A,
                     int64_t sa_b, int64_t sa_m, int64_t sa_k, const void *B, int64_t sb_b, int64_t sb_k, int64_t sb_n,
                     void *C, int accumulate);

/* cpu_infer.c */
void vram_cpu_linear_lowp(vram_runtime *rt, int fmt, int64_t M, int64_t N, int64_t K, const float *x, const void *w,
                          const float *bias, float *y);
void vram_cpu_embedding_lowp(int fmt, int64_t n_ids, int64_t c, int64_t rows, float *out, const void *table,
                             const int32_t *ids);
void vram_cpu_kv_attention(vram_runtime *rt, int64_t n, int64_t T, int64_t H, int64_t D, const float *qkv, float *kc,
                           float *vc, int64_t cap, const int64_t *lens, float *out, float *scores);
void vram_cpu_gelu_tanh(int64_t n, float *out, const float *x);

const vram_kernels vram_cpu_kernels = {
    .name = "cpu",
    .copy = cpu_copy,
    .fill = cpu_fill,
    .binary = cpu_binary,
    .accumulate = cpu_accumulate,
    .unary = cpu_unary,
    .unary_backward = cpu_unary_backward,
    .matmul = vram_cpu_matmul,
    .softmax = cpu_softmax,
    .softmax_backward = cpu_softmax_backward,
    .layer_norm = cpu_layer_norm,
    .layer_norm_backward = cpu_layer_norm_backward,
    .layer_norm_backward_adds_gx = 1,
    .embedding = cpu_embedding,
    .embedding_backward = cpu_embedding_backward,
    .cross_entropy = cpu_cross_entropy,
    .cross_entropy_backward = cpu_cross_entropy_backward,
    .mask_scale = cpu_mask_scale,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .pool2d = cpu_pool2d,
    .pool2d_backward = cpu_pool2d_backward,
    .sgd_update = cpu_sgd_update,
    .adam_update = cpu_adam_update,
    .adagrad_update = cpu_adagrad_update,
    .unscale = cpu_unscale,
    .scaler_update = cpu_scaler_update,
    .sum_squares = cpu_sum_squares,
    .scale_inplace = cpu_scale_inplace,
    .upload = cpu_upload,
    .download = cpu_upload,
    .zero = cpu_zero,
    .find_bad_id = cpu_find_bad_id,
    .sync = cpu_sync,
    .linear_lowp = vram_cpu_linear_lowp,
    .embedding_lowp = vram_cpu_embedding_lowp,
    .kv_attention = vram_cpu_kv_attention,
    .gelu_tanh = vram_cpu_gelu_tanh,
};
