/* test_gpu_infer.c — the GPU's inference kernels (cuda_infer_kernels.cu) against the CPU's
 * (cpu_infer.c), slot by slot, then the whole inference model on both devices.
 *
 * Each slot gets the same random inputs on both sides: linear_lowp in every stored format (Q8_0,
 * Q8_R, bf16) over shapes that take the GPU kernel's 4-wide path and its scalar path (K not a
 * multiple of 4), with and without a bias, 1 to 37 rows (partial row tiles); embedding_lowp in
 * every format (exact: the same conversions); kv_attention over rows of different cached lengths,
 * one and several new tokens, small and GPT-2 head sizes, a batch beyond one launch's rows
 * (VKI_MAX_ROWS), the caches compared too; gelu_tanh. f32 results agree to a relative error
 * (norm of the difference over the CPU's norm) of 1e-5; then a small GPT loaded on the host,
 * quantized, copied to the GPU (vram_lm_copy_to): logits within 1e-4 and the same greedy tokens.
 * Skipped (77) where no GPU or driver exists.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/runtime/cuda_infer_abi.h"
#include "../../src/runtime/dtype_conv.h"
#include "../../src/runtime/rt_internal.h"
#include "../check.h"
#include "runtime_sides.h"
#include "vram/alloc.h"
#include "vram/infer.h"
#include "vram/nn.h"

static side cpu, gpu;
static uint64_t rng = 0x243f6a8885a308d3ull;

static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

/* Device memory of n bytes holding host bytes h (a u8 tensor; freed by the caller). */
static vram_tensor *dev_bytes(const void *h, size_t n) {
    vram_tensor *t = NULL;
    int64_t len = (int64_t)(n ? n : 1);
    CHECK_OK(vram_tensor_empty(gpu.rt, VRAM_DTYPE_U8, 1, &len, VRAM_TAG_TEMPORARY, &t));
    if (t && n && h) vram_tensor_write_host(t, h);
    return t;
}

static void *dev_ptr(vram_tensor *t) { return t ? vram_tensor_data(t) : NULL; }

/* The GPU tensor's n floats in host memory (after a sync that must succeed). */
static float *host_floats(vram_tensor *t, size_t n) {
    float *h = calloc(n ? n : 1, sizeof *h);
    vram_tensor_read_host(t, h);
    CHECK_OK(vram_runtime_sync(gpu.rt));
    return h;
}

static double rel_err(const float *want, const float *got, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isinf(got[i])) return INFINITY;
        num += (double)(want[i] - got[i]) * (want[i] - got[i]);
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void random_floats(float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((2 * urand() - 1) * scale);
}

/* Random weights [N, K] stored in fmt (model_file.h's layouts); *bytes receives the size. */
static uint8_t *random_weights(int fmt, int64_t N, int64_t K, size_t *bytes) {
    *bytes = (size_t)vram_wfmt_bytes((vram_wfmt)fmt, N, K);
    uint8_t *w = malloc(*bytes);
    if (fmt == VRAM_WFMT_F32) {
        random_floats((float *)w, (size_t)(N * K), 0.5);
        return w;
    }
    if (fmt == VRAM_WFMT_BF16) {
        for (int64_t i = 0; i < N * K; i++) ((uint16_t *)(void *)w)[i] = vram_f32_to_bf16((float)(2 * urand() - 1));
        return w;
    }
    for (int64_t i = 0; i < N * K; i++) w[i] = (uint8_t)(int8_t)(int)(urand() * 255 - 127);
    if (fmt == VRAM_WFMT_Q8_0) {
        for (int64_t b = 0; b < N * K / 32; b++) {
            uint16_t h = vram_f32_to_f16((float)(0.001 + 0.01 * urand()));
            memcpy(w + N * K + 2 * b, &h, 2);
        }
    } else {
        for (int64_t r = 0; r < N; r++) {
            float d = (float)(0.001 + 0.01 * urand());
            memcpy(w + N * K + 4 * r, &d, 4);
        }
    }
    return w;
}

static void test_linear(int fmt, int64_t M, int64_t N, int64_t K, int with_bias) {
    size_t wb = 0;
    uint8_t *w = random_weights(fmt, N, K, &wb);
    float *x = malloc(sizeof *x * (size_t)(M * K)), *bias = malloc(sizeof *bias * (size_t)N);
    float *y = malloc(sizeof *y * (size_t)(M * N));
    random_floats(x, (size_t)(M * K), 1.0);
    random_floats(bias, (size_t)N, 1.0);
    vram_cpu_kernels.linear_lowp(cpu.rt, fmt, M, N, K, x, w, with_bias ? bias : NULL, y);
    vram_tensor *dw = dev_bytes(w, wb), *dx = dev_bytes(x, sizeof *x * (size_t)(M * K)),
                *db = dev_bytes(bias, sizeof *bias * (size_t)N), *dy = dev_bytes(NULL, sizeof *y * (size_t)(M * N));
    gpu.rt->k->linear_lowp(gpu.rt, fmt, M, N, K, dev_ptr(dx), dev_ptr(dw), with_bias ? dev_ptr(db) : NULL, dev_ptr(dy));
    float *g = host_floats(dy, (size_t)(M * N));
    double e = rel_err(y, g, (size_t)(M * N));
    CHECK(e < 1e-5, "linear_lowp %s M=%lld N=%lld K=%lld bias=%d: relative error %.3g", vram_wfmt_name((vram_wfmt)fmt),
          (long long)M, (long long)N, (long long)K, with_bias, e);
    free(g), free(w), free(x), free(bias), free(y);
    vram_tensor_free(dw), vram_tensor_free(dx), vram_tensor_free(db), vram_tensor_free(dy);
}

static void test_embedding(int fmt, int64_t rows, int64_t c, int64_t n_ids) {
    size_t tb = 0;
    uint8_t *table = random_weights(fmt, rows, c, &tb);
    int32_t *ids = malloc(sizeof *ids * (size_t)n_ids);
    for (int64_t i = 0; i < n_ids; i++) ids[i] = (int32_t)(urand() * (double)rows);
    ids[0] = (int32_t)(rows - 1); /* the last row (its Q8_0 scales at the end of the table) */
    float *want = malloc(sizeof *want * (size_t)(n_ids * c));
    vram_cpu_kernels.embedding_lowp(fmt, n_ids, c, rows, want, table, ids);
    vram_tensor *dt = dev_bytes(table, tb), *di = dev_bytes(ids, sizeof *ids * (size_t)n_ids),
                *dout = dev_bytes(want, sizeof *want * (size_t)(n_ids * c));
    gpu.rt->k->zero(dev_ptr(dout), sizeof *want * (size_t)(n_ids * c));
    gpu.rt->k->embedding_lowp(fmt, n_ids, c, rows, dev_ptr(dout), dev_ptr(dt), dev_ptr(di));
    float *got = host_floats(dout, (size_t)(n_ids * c));
    CHECK(!memcmp(want, got, sizeof *want * (size_t)(n_ids * c)), "embedding_lowp %s [%lld, %lld]: the GPU's rows "
          "differ from the CPU's", vram_wfmt_name((vram_wfmt)fmt), (long long)rows, (long long)c);
    free(got), free(table), free(ids), free(want);
    vram_tensor_free(dt), vram_tensor_free(di), vram_tensor_free(dout);
}

/* n rows of cached lengths lens (random caches), T new tokens each, H heads of D. */
static void test_kv_attention(int64_t n, int64_t T, int64_t H, int64_t D, int64_t cap) {
    int64_t C = H * D;
    size_t nq = (size_t)(n * T * 3 * C), nc = (size_t)(n * H * cap * D), no = (size_t)(n * T * C);
    float *qkv = malloc(sizeof(float) * nq), *kc = malloc(sizeof(float) * nc), *vc = malloc(sizeof(float) * nc);
    float *out = malloc(sizeof(float) * no), *scores = malloc(sizeof(float) * (size_t)cap);
    int64_t *lens = malloc(sizeof *lens * (size_t)n);
    random_floats(qkv, nq, 2.0);
    random_floats(kc, nc, 2.0);
    random_floats(vc, nc, 1.0);
    for (int64_t b = 0; b < n; b++) lens[b] = (int64_t)(urand() * (double)(cap - T + 1));
    lens[0] = 0;         /* an empty row: attends to its new tokens only */
    lens[n - 1] = cap - T; /* a full one */
    vram_tensor *dq = dev_bytes(qkv, sizeof(float) * nq), *dk = dev_bytes(kc, sizeof(float) * nc),
                *dv = dev_bytes(vc, sizeof(float) * nc), *dout = dev_bytes(out, sizeof(float) * no);
    vram_cpu_kernels.kv_attention(cpu.rt, n, T, H, D, qkv, kc, vc, cap, lens, out, scores);
    gpu.rt->k->kv_attention(gpu.rt, n, T, H, D, dev_ptr(dq), dev_ptr(dk), dev_ptr(dv), cap, lens, dev_ptr(dout), NULL);
    float *go = host_floats(dout, no), *gk = host_floats(dk, nc), *gv = host_floats(dv, nc);
    double e = rel_err(out, go, no);
    CHECK(e < 1e-5, "kv_attention n=%lld T=%lld H=%lld D=%lld cap=%lld: relative error %.3g", (long long)n, (long long)T,
          (long long)H, (long long)D, (long long)cap, e);
    CHECK(!memcmp(kc, gk, sizeof(float) * nc) && !memcmp(vc, gv, sizeof(float) * nc),
          "kv_attention n=%lld T=%lld: the GPU's caches after the append differ from the CPU's", (long long)n, (long long)T);
    free(go), free(gk), free(gv), free(qkv), free(kc), free(vc), free(out), free(scores), free(lens);
    vram_tensor_free(dq), vram_tensor_free(dk), vram_tensor_free(dv), vram_tensor_free(dout);
}

static void test_gelu(int64_t n) {
    float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n);
    random_floats(x, (size_t)n, 6.0);
    vram_cpu_kernels.gelu_tanh(n, y, x);
    vram_tensor *dx = dev_bytes(x, sizeof *x * (size_t)n), *dy = dev_bytes(y, sizeof *y * (size_t)n);
    gpu.rt->k->gelu_tanh(n, dev_ptr(dy), dev_ptr(dx));
    float *g = host_floats(dy, (size_t)n);
    double e = rel_err(y, g, (size_t)n);
    CHECK(e < 1e-6, "gelu_tanh n=%lld: relative error %.3g", (long long)n, e);
    free(g), free(x), free(y);
    vram_tensor_free(dx), vram_tensor_free(dy);
}

/* The logits of two prompts (all positions) and 12 greedy tokens of each, on one model. */
static void run_model(vram_lm *m, float *logits, int32_t *tokens) {
    static const int32_t p0[7] = {3, 17, 42, 8, 8, 91, 5}, p1[4] = {60, 2, 33, 71};
    int32_t ids[14];
    memcpy(ids, p0, sizeof p0);
    memcpy(ids + 7, p0, sizeof p0);
    ids[9] = 11; /* two rows of 7 that differ */
    vram_kv_cache *c = NULL;
    vram_tensor *lg = NULL;
    CHECK_OK(vram_kv_cache_new(m, 2, 7, &c));
    CHECK_OK(vram_lm_forward(m, c, 0, 2, 7, ids, 1, &lg));
    if (lg) vram_tensor_read_host(lg, logits);
    CHECK_OK(vram_runtime_sync(vram_lm_runtime(m)));
    vram_tensor_free(lg);
    vram_kv_cache_free(c);
    const int32_t *prompts[2] = {p0, p1};
    int64_t lens[2] = {7, 4};
    vram_generate_opts o = {.tokens = 12, .temperature = 0, .seed = 1};
    vram_generate_stats st;
    CHECK_OK(vram_lm_generate(m, 2, prompts, lens, &o, tokens, &st));
}

static void test_model(vram_wfmt fmt) {
    enum { V = 96 };
    vram_gpt_config cfg = {.layers = 2, .heads = 2, .width = 64, .vocab = V, .context = 32, .init_std = 0.02};
    vram_gpt *g = NULL;
    vram_lm *h = NULL, *d = NULL;
    CHECK_OK(vram_gpt_new(cpu.rt, &cfg, &g));
    if (!g) return;
    CHECK_OK(vram_lm_from_gpt(g, &h));
    vram_gpt_free(g);
    if (!h) return;
    if (fmt != VRAM_WFMT_F32) CHECK_OK(vram_lm_quantize(h, fmt, NULL));
    uint64_t bytes = 0;
    CHECK_OK(vram_lm_copy_to(h, gpu.rt, &d, &bytes));
    CHECK(bytes == vram_lm_weight_bytes(h), "copied %llu bytes, the model holds %llu", (unsigned long long)bytes,
          (unsigned long long)vram_lm_weight_bytes(h));
    if (!d) {
        vram_lm_free(h);
        return;
    }
    CHECK(vram_lm_format(d) == fmt, "the copy keeps the format %s", vram_wfmt_name(fmt));
    vram_lm *back = NULL;
    CHECK(vram_lm_copy_to(d, cpu.rt, &back, NULL) == VRAM_ERR_UNSUPPORTED, "copying from a GPU model is refused");
    static float lc[2 * 7 * V], lgpu[2 * 7 * V];
    int32_t tc[24], tg[24];
    run_model(h, lc, tc);
    run_model(d, lgpu, tg);
    double e = rel_err(lc, lgpu, 2 * 7 * V);
    CHECK(e < 1e-4, "model %s: GPU logits vs CPU relative error %.3g", vram_wfmt_name(fmt), e);
    CHECK(!memcmp(tc, tg, sizeof tc), "model %s: the GPU's greedy tokens equal the CPU's", vram_wfmt_name(fmt));
    vram_lm_free(d);
    vram_lm_free(h);
}

int main(void) {
    if (vram_device_open("cuda", &gpu.dev) != VRAM_OK) check_skip(vram_last_error());
    vram_device_close(gpu.dev);
    gpu.dev = NULL;
    if (!open_side(&cpu, "host") || !open_side(&gpu, "cuda")) return check_done();
    CHECK(gpu.rt->k->linear_lowp && gpu.rt->k->embedding_lowp && gpu.rt->k->kv_attention && gpu.rt->k->gelu_tanh,
          "the CUDA table fills the four inference slots");
    static const int fmts[3] = {VRAM_WFMT_Q8_0, VRAM_WFMT_Q8_R, VRAM_WFMT_BF16};
    static const int64_t rows[6] = {1, 3, 4, 5, 17, 37};
    for (int f = 0; f < 3; f++) {
        for (int r = 0; r < 6; r++) test_linear(fmts[f], rows[r], 33, 96, r & 1);
        test_linear(fmts[f], 2, 770, 768, 1); /* GPT-2's width */
        if (fmts[f] != VRAM_WFMT_Q8_0) test_linear(fmts[f], 3, 19, 50, 1); /* K % 4 != 0: the scalar path */
        test_embedding(fmts[f], 50, 64, 23);
    }
    test_embedding(VRAM_WFMT_F32, 40, 96, 9);
    test_kv_attention(3, 1, 2, 8, 16);
    test_kv_attention(2, 5, 3, 16, 40);
    test_kv_attention(2, 1, 12, 64, 300); /* GPT-2's heads, more keys than a chunk */
    test_kv_attention(70, 1, 1, 8, 4);    /* beyond one launch's VKI_MAX_ROWS rows */
    test_gelu(1000);
    test_gelu(1);
    test_model(VRAM_WFMT_F32);
    test_model(VRAM_WFMT_BF16);
    test_model(VRAM_WFMT_Q8_0);
    test_model(VRAM_WFMT_Q8_R);
    close_side(&gpu);
    close_side(&cpu);
    return check_done();
}
