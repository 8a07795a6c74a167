/* test_infer.c — model files, the inference model and its KV cache, INT8 and bf16 weights.
 *
 * - a GPT saved and loaded comes back bit for bit, with the bytes read reported; a resumed
 *   optimizer continues exactly as the uninterrupted one (same weights after more steps);
 * - a corrupted, truncated, foreign, other-version or other-shape file is a clear error;
 * - generation with the KV cache gives the same tokens (greedy and sampled) as recomputing
 *   every prefix with the training GPT's own forward, with logits within f32 tolerance;
 * - the Q8_0 and bf16 products equal a reference product over the dequantised weights, and
 *   Q8_0 weights take <= 0.27 of the f32 bytes (8.5 bits per matrix weight);
 * - the inference forward records no graph: no activation bytes, while the training forward
 *   of the same batch keeps activations.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "vram/alloc.h"
#include "vram/infer.h"
#include "vram/model_file.h"
#include "vram/optim.h"
#include "vram/stats.h"

static vram_device *dev;
static vram_allocator *al;
static vram_runtime *rt;
static char dir[256];

static const vram_gpt_config small = {.layers = 2, .heads = 2, .width = 32, .vocab = 256, .context = 24};

static void path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

/* One training step on a fixed batch drawn from the runtime's random state. */
static void train_step(vram_gpt *g, vram_optimizer *opt) {
    int32_t ids[2 * 8], tg[2 * 8];
    for (int i = 0; i < 16; i++) {
        ids[i] = (int32_t)(vram_runtime_uniform(rt) * 256);
        tg[i] = (ids[i] * 7 + 3) % 256;
    }
    vram_tensor *x = NULL, *y = NULL, *loss = NULL;
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, (int64_t[]){2, 8}, VRAM_TAG_TEMPORARY, ids, &x));
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, (int64_t[]){2, 8}, VRAM_TAG_TEMPORARY, tg, &y));
    vram_param_list_zero_grad(vram_gpt_params(g), 1);
    CHECK_OK(vram_gpt_forward(g, x, y, 1, NULL, &loss));
    CHECK_OK(vram_backward(loss, NULL));
    CHECK_OK(vram_optimizer_step(opt));
    vram_tensor_free(loss);
    vram_tensor_free(x);
    vram_tensor_free(y);
}

static int params_equal(vram_gpt *a, vram_gpt *b) {
    vram_param_list *pa = vram_gpt_params(a), *pb = vram_gpt_params(b);
    if (vram_param_list_count(pa) != vram_param_list_count(pb)) return 0;
    for (int i = 0; i < vram_param_list_count(pa); i++)
        if (memcmp(vram_tensor_data(vram_param_list_get(pa, i)), vram_tensor_data(vram_param_list_get(pb, i)),
                   (size_t)vram_tensor_numel(vram_param_list_get(pa, i)) * 4))
            return 0;
    return 1;
}

static void test_save_resume(void) {
    char p3[300], p5[300], r5[300];
    path(p3, sizeof p3, "s3.vram");
    path(p5, sizeof p5, "s5.vram");
    path(r5, sizeof r5, "r5.vram");
    vram_optim_config oc;
    vram_optim_config_parse("adamw", &oc);
    vram_gpt *g = NULL, *h = NULL, *w = NULL;
    vram_optimizer *opt = NULL, *opt2 = NULL;
    vram_runtime_seed(rt, 7);
    CHECK_OK(vram_gpt_new(rt, &small, &g));
    CHECK_OK(vram_optimizer_new(rt, vram_gpt_params(g), &oc, &opt));
    for (int s = 1; s <= 3; s++) train_step(g, opt);
    vram_train_state ts = {.step = 3, .data_bytes = 1234};
    CHECK_OK(vram_gpt_save(p3, g, opt, &ts));
    for (int s = 4; s <= 5; s++) train_step(g, opt);
    ts.step = 5;
    CHECK_OK(vram_gpt_save(p5, g, opt, &ts));

    /* weights only: a GPT loaded back is bit for bit the saved one */
    uint64_t bytes = 0;
    CHECK_OK(vram_gpt_load(rt, p5, &w, &bytes));
    CHECK(w && params_equal(g, w), "loaded weights equal the saved ones");
    CHECK(bytes == (uint64_t)vram_param_list_numel(vram_gpt_params(g)) * 4, "bytes read %llu", (unsigned long long)bytes);

    /* resume from step 3 in a fresh model (other init, other random state), run 2 more steps */
    vram_runtime_seed(rt, 99);
    CHECK_OK(vram_gpt_new(rt, &small, &h));
    CHECK_OK(vram_optimizer_new(rt, vram_gpt_params(h), &oc, &opt2));
    vram_train_state rs = {.data_bytes = 1234};
    CHECK_OK(vram_gpt_resume(p3, h, opt2, &rs, &bytes));
    CHECK(rs.step == 3, "resumed at step %llu", (unsigned long long)rs.step);
    CHECK(bytes == (uint64_t)vram_param_list_numel(vram_gpt_params(g)) * 4 * 3, "weights + 2 Adam states read: %llu",
          (unsigned long long)bytes);
    for (int s = 4; s <= 5; s++) train_step(h, opt2);
    CHECK(params_equal(g, h), "resumed run's weights after step 5 equal the uninterrupted run's bit for bit");
    rs.step = 5;
    CHECK_OK(vram_gpt_save(r5, h, opt2, &rs));
    FILE *a = fopen(p5, "rb"), *b = fopen(r5, "rb");
    int same = a && b;
    for (int ca = 0, cb = 0; same && (ca = fgetc(a)) != EOF;) same = (cb = fgetc(b)) == ca;
    CHECK(same && b && fgetc(b) == EOF, "the resumed run's step-5 file is byte-identical to the uninterrupted run's");
    if (a) fclose(a);
    if (b) fclose(b);

    /* mismatches are errors */
    vram_train_state other = {.data_bytes = 999};
    CHECK(vram_gpt_resume(p3, h, opt2, &other, NULL) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "corpus"),
          "other corpus: %s", vram_last_error());
    vram_gpt *wide = NULL;
    vram_gpt_config wc = small;
    wc.width = 64;
    vram_optimizer *o3 = NULL;
    CHECK_OK(vram_gpt_new(rt, &wc, &wide));
    CHECK_OK(vram_optimizer_new(rt, vram_gpt_params(wide), &oc, &o3));
    vram_train_state rs2 = {.data_bytes = 1234};
    CHECK(vram_gpt_resume(p3, wide, o3, &rs2, NULL) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "width 32"),
          "other shape: %s", vram_last_error());
    vram_optimizer *sgd = NULL;
    vram_optim_config sc;
    vram_optim_config_parse("sgd", &sc);
    CHECK_OK(vram_optimizer_new(rt, vram_gpt_params(h), &sc, &sgd));
    CHECK(vram_gpt_resume(p3, h, sgd, &rs2, NULL) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "adamw"),
          "other optimizer: %s", vram_last_error());
    vram_optimizer_free(sgd);
    vram_optimizer_free(o3);
    vram_gpt_free(wide);
    vram_optimizer_free(opt);
    vram_optimizer_free(opt2);
    vram_gpt_free(g);
    vram_gpt_free(h);
    vram_gpt_free(w);
}

/* Writes `src` to `dst` with byte `at` xor-ed (at < 0: none) and cut to `len` bytes. */
static void mangle(const char *src, const char *dst, long at, long len) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    int c;
    for (long i = 0; in && out && (c = fgetc(in)) != EOF && i < len; i++) fputc(i == at ? c ^ 0x10 : c, out);
    if (in) fclose(in);
    if (out) fclose(out);
}

static void expect_load_error(const char *file, vram_status want, const char *words, const char *what) {
    vram_gpt *g = NULL;
    vram_status s = vram_gpt_load(rt, file, &g, NULL);
    CHECK(s == want && strstr(vram_last_error(), words), "%s: status %d, '%s'", what, s, vram_last_error());
    CHECK(g == NULL, "%s: no model", what);
    vram_lm *m = NULL;
    s = vram_lm_load(rt, file, &m, NULL);
    CHECK(s != VRAM_OK && m == NULL, "%s: the inference loader refuses it too (%s)", what, vram_last_error());
}

static void test_bad_files(void) {
    char good[300], bad[300];
    path(good, sizeof good, "s5.vram");
    path(bad, sizeof bad, "bad.vram");
    FILE *f = fopen(good, "rb");
    long size = 0;
    if (f) fseek(f, 0, SEEK_END), size = ftell(f), fclose(f);
    mangle(good, bad, 4096, size);
    expect_load_error(bad, VRAM_ERR_PARSE, "checksum mismatch (corrupted", "a flipped data byte");
    mangle(good, bad, 30, size);
    expect_load_error(bad, VRAM_ERR_PARSE, "header checksum", "a flipped header byte");
    mangle(good, bad, -1, size - 1000);
    expect_load_error(bad, VRAM_ERR_PARSE, "truncated", "a truncated file");
    mangle(good, bad, -1, 100);
    expect_load_error(bad, VRAM_ERR_PARSE, "not a vram model file", "a file shorter than the header");
    f = fopen(bad, "wb");
    if (f) fputs("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
                 "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the "
                 "waters. And God said, Let there be light: and there was light.", f), fclose(f);
    expect_load_error(bad, VRAM_ERR_PARSE, "not a vram model file", "a text file");
    mangle(good, bad, 8, size); /* the version word: 1 ^ 0x10 = 17 */
    vram_gpt *g = NULL;
    vram_status s = vram_gpt_load(rt, bad, &g, NULL);
    CHECK(s == VRAM_ERR_PARSE && strstr(vram_last_error(), "version 17; this vram reads version 1"), "version: %s",
          vram_last_error());
    expect_load_error("/nonexistent/model.vram", VRAM_ERR_NOT_FOUND, "nonexistent", "a missing file");

    /* another architecture: a valid file whose header names it */
    vram_model_info info;
    vram_model_info_from_gpt(&info, &small);
    snprintf(info.arch, sizeof info.arch, "llama");
    vram_model_writer *w = NULL;
    CHECK_OK(vram_model_writer_open(bad, &info, &w));
    float x[4] = {1, 2, 3, 4};
    CHECK_OK(vram_model_writer_add(w, "tok_embeddings.weight", VRAM_MF_ROLE_PARAM, VRAM_WFMT_F32, 1, (int64_t[]){4}, 0, x, 16));
    CHECK_OK(vram_model_writer_close(w, 1));
    expect_load_error(bad, VRAM_ERR_UNSUPPORTED, "architecture 'llama'", "another architecture");
    /* gpt2 in the header, but tensors of another model */
    vram_model_info_from_gpt(&info, &small);
    CHECK_OK(vram_model_writer_open(bad, &info, &w));
    CHECK_OK(vram_model_writer_add(w, "tok_embeddings.weight", VRAM_MF_ROLE_PARAM, VRAM_WFMT_F32, 1, (int64_t[]){4}, 0, x, 16));
    CHECK_OK(vram_model_writer_close(w, 1));
    expect_load_error(bad, VRAM_ERR_PARSE, "has no tensor 'wte.weight'", "foreign tensors");
    unlink(bad);
}

/* Greedy and sampled generation with the cache equal the training forward's over each prefix. */
static void test_cache_matches_full_forward(void) {
    vram_gpt *g = NULL;
    vram_lm *m = NULL;
    vram_runtime_seed(rt, 3);
    CHECK_OK(vram_gpt_new(rt, &small, &g));
    CHECK_OK(vram_lm_from_gpt(g, &m));
    if (!m) return;
    const int32_t p0[] = {'I', 'n', ' ', 't', 'h', 'e'}, p1[] = {'A', 'n', 'd'};
    const int32_t *prompts[2] = {p0, p1};
    const int64_t lens[2] = {6, 3};
    enum { N = 12 };
    for (int sampled = 0; sampled < 2; sampled++) {
        vram_generate_opts o = {.tokens = N, .temperature = sampled ? 1.0 : 0, .top_k = sampled ? 20 : 0, .seed = 5};
        int32_t out[2 * N];
        vram_generate_stats st;
        CHECK_OK(vram_lm_generate(m, 2, prompts, lens, &o, out, &st));
        /* layers x {k, v} x rows x heads x (longest prompt + N - 1) x head size x 4 bytes */
        CHECK(st.kv_cache_bytes == 2ull * 2 * 2 * 2 * (6 + N - 1) * 16 * 4, "cache bytes %llu",
              (unsigned long long)st.kv_cache_bytes);
        /* the reference: the same sampling, logits from vram_gpt_forward over the whole prefix */
        vram_runtime_seed(rt, 5);
        int32_t seq[2][64], ref[2 * N];
        double maxdiff = 0;
        for (int b = 0; b < 2; b++) memcpy(seq[b], prompts[b], sizeof(int32_t) * (size_t)lens[b]);
        /* the generator samples the prompts' first tokens row by row, then each step row by row */
        for (int t = 0; t < N; t++) {
            for (int b = 0; b < 2; b++) {
                int64_t len = lens[b] + t;
                vram_tensor *ids = NULL, *logits = NULL;
                CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, (int64_t[]){1, len}, VRAM_TAG_TEMPORARY, seq[b], &ids));
                vram_no_grad_enter();
                CHECK_OK(vram_gpt_forward(g, ids, NULL, 0, &logits, NULL));
                vram_no_grad_exit();
                const float *last = (const float *)vram_tensor_data(logits) + (len - 1) * 256;
                ref[b * N + t] = vram_lm_sample(rt, last, 256, o.temperature, o.top_k);
                seq[b][len] = ref[b * N + t];
                /* the cached forward's logits for the same prefix */
                vram_kv_cache *c = NULL;
                vram_tensor *lg = NULL;
                CHECK_OK(vram_kv_cache_new(m, 1, len, &c));
                CHECK_OK(vram_lm_forward(m, c, 0, 1, len - 1, seq[b], 0, &lg));
                vram_tensor_free(lg);
                lg = NULL;
                CHECK_OK(vram_lm_forward(m, c, 0, 1, 1, seq[b] + len - 1, 0, &lg)); /* the last token through the cache */
                for (int v = 0; lg && v < 256; v++) {
                    double d = fabs(((const float *)vram_tensor_data(lg))[v] - last[v]);
                    maxdiff = d > maxdiff ? d : maxdiff;
                }
                vram_tensor_free(lg);
                vram_kv_cache_free(c);
                vram_tensor_free(ids);
                vram_tensor_free(logits);
            }
        }
        CHECK(!memcmp(out, ref, sizeof out), "%s: cached generation equals full recomputation token for token",
              sampled ? "sampled" : "greedy");
        CHECK(maxdiff < 2e-4, "cached logits within %g of the full forward's", maxdiff);
        /* and --no-cache (recompute each prefix through the inference forward) agrees too */
        o.no_cache = 1;
        int32_t out2[2 * N];
        CHECK_OK(vram_lm_generate(m, 2, prompts, lens, &o, out2, &st));
        CHECK(!memcmp(out, out2, sizeof out), "no_cache generation equals cached generation");
    }
    /* a prompt longer than the context */
    int32_t longp[40] = {0};
    const int32_t *lp[1] = {longp};
    int64_t ll[1] = {40};
    vram_generate_opts o = {.tokens = 1};
    int32_t out1[1];
    vram_generate_stats st;
    CHECK(vram_lm_generate(m, 1, lp, ll, &o, out1, &st) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "longer than the model's context of 24"),
          "long prompt: %s", vram_last_error());
    vram_lm_free(m);
    vram_gpt_free(g);
}

static float f16(uint16_t h) { /* reference half -> float, independent of the runtime's */
    int e = (h >> 10) & 31, man = h & 1023;
    double v = e ? ldexp(1024 + man, e - 25) : ldexp(man, -24);
    return (float)(h & 0x8000 ? -v : v);
}

/* An f32 copy of model file `src` with every bf16 or Q8_0 tensor dequantised by this test's own
 * decoding of the formats (docs/model-format.md). */
static void dequantise_file(const char *src, const char *dst) {
    vram_model_file *f = NULL;
    vram_model_writer *w = NULL;
    CHECK_OK(vram_model_file_open(src, &f));
    if (!f) return;
    vram_model_info info = *vram_model_file_info(f);
    info.flags &= ~(uint32_t)VRAM_MF_QUANTIZED;
    CHECK_OK(vram_model_writer_open(dst, &info, &w));
    for (int i = 0; i < vram_model_file_count(f); i++) {
        vram_model_entry e;
        vram_model_file_entry(f, i, &e);
        uint8_t *raw = malloc(e.nbytes);
        int64_t n = 1;
        for (int d = 0; d < e.ndim; d++) n *= e.shape[d];
        float *x = malloc(sizeof *x * (size_t)n);
        CHECK_OK(vram_model_file_read(f, i, raw, e.nbytes));
        for (int64_t k = 0; k < n; k++) {
            if (e.fmt == VRAM_WFMT_F32) {
                memcpy(&x[k], raw + 4 * k, 4);
            } else if (e.fmt == VRAM_WFMT_BF16) {
                uint32_t bits = (uint32_t)(raw[2 * k] | raw[2 * k + 1] << 8) << 16;
                memcpy(&x[k], &bits, 4);
            } else if (e.fmt == VRAM_WFMT_Q8_0) {
                const uint8_t *sc = raw + n + 2 * (k / 32);
                x[k] = (float)(int8_t)raw[k] * f16((uint16_t)(sc[0] | sc[1] << 8));
            } else { /* Q8_R: an f32 scale per row after the values */
                float d;
                memcpy(&d, raw + n + 4 * (k / e.shape[e.ndim - 1]), 4);
                x[k] = (float)(int8_t)raw[k] * d;
            }
        }
        CHECK_OK(vram_model_writer_add(w, e.name, e.role, VRAM_WFMT_F32, e.ndim, e.shape, e.step, x, (uint64_t)n * 4));
        free(raw);
        free(x);
    }
    CHECK_OK(vram_model_writer_close(w, 1));
    vram_model_file_close(f);
}

static double max_abs_diff(vram_tensor *a, vram_tensor *b) {
    double d = 0;
    const float *x = vram_tensor_data(a), *y = vram_tensor_data(b);
    for (int64_t i = 0; i < vram_tensor_numel(a); i++) d = fmax(d, fabs((double)x[i] - y[i]));
    return d;
}

/* 16 tokens: the products take the panel path (a prompt); 15 then 1: the direct one (steps). */
static void forward16(vram_lm *m, const int32_t *ids, vram_tensor **logits) {
    vram_kv_cache *c = NULL;
    CHECK_OK(vram_kv_cache_new(m, 1, 16, &c));
    CHECK_OK(vram_lm_forward(m, c, 0, 1, 16, ids, 1, logits));
    vram_kv_cache_free(c);
}

static void forward15_1(vram_lm *m, const int32_t *ids, vram_tensor **logits) {
    vram_kv_cache *c = NULL;
    vram_tensor *first = NULL;
    CHECK_OK(vram_kv_cache_new(m, 1, 16, &c));
    for (int i = 0; i < 15; i++) { /* one token at a time: every product has one row */
        vram_tensor_free(first);
        first = NULL;
        CHECK_OK(vram_lm_forward(m, c, 0, 1, 1, ids + i, 0, &first));
    }
    vram_tensor_free(first);
    CHECK_OK(vram_lm_forward(m, c, 0, 1, 1, ids + 15, 0, logits));
    vram_kv_cache_free(c);
}

/* The low-precision products and lookups against f32 ones over the dequantised weights, and the
 * memory the formats take. */
static void test_quantized(void) {
    vram_gpt_config cfg = {.layers = 2, .heads = 4, .width = 256, .vocab = 256, .context = 64};
    vram_gpt *g = NULL;
    vram_runtime_seed(rt, 11);
    CHECK_OK(vram_gpt_new(rt, &cfg, &g));
    vram_lm *f32 = NULL;
    CHECK_OK(vram_lm_from_gpt(g, &f32));
    if (!f32) return;
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = (i * 37 + 5) % 256;
    vram_tensor *l32 = NULL;
    forward16(f32, ids, &l32);
    uint64_t b32 = vram_lm_weight_bytes(f32);
    char qp[300], dp[300];
    path(qp, sizeof qp, "q.vram");
    path(dp, sizeof dp, "dq.vram");
    const vram_wfmt fmts[3] = {VRAM_WFMT_Q8_0, VRAM_WFMT_BF16, VRAM_WFMT_Q8_R};
    for (int f = 0; f < 3; f++) {
        vram_wfmt fmt = fmts[f];
        double limit = fmt == VRAM_WFMT_BF16 ? 0.51 : fmt == VRAM_WFMT_Q8_0 ? 0.27 : 0.26; /* 8 + 32/256 bits: 0.254 */
        vram_lm *m = NULL, *q = NULL, *dq = NULL;
        vram_stats st0, st1;
        vram_allocator_get_stats(al, &st0);
        CHECK_OK(vram_lm_from_gpt(g, &m));
        if (!m) return;
        CHECK_OK(vram_lm_quantize(m, fmt, NULL));
        CHECK(vram_lm_format(m) == fmt, "format");
        vram_allocator_get_stats(al, &st1);
        int64_t held = st1.tags[VRAM_TAG_PARAMETER].allocated_bytes.current - st0.tags[VRAM_TAG_PARAMETER].allocated_bytes.current;
        double ratio = (double)vram_lm_weight_bytes(m) / (double)b32, held_ratio = (double)held / (double)b32;
        printf("%s weights as the allocator holds them: %lld bytes = %.4f of f32\n", vram_wfmt_name(fmt), (long long)held,
               held_ratio);
        CHECK(held_ratio <= limit, "%s allocated ratio %.4f", vram_wfmt_name(fmt), held_ratio);
        printf("%s weights: %llu of %llu f32 bytes = %.4f\n", vram_wfmt_name(fmt), (unsigned long long)vram_lm_weight_bytes(m),
               (unsigned long long)b32, ratio);
        CHECK(ratio <= limit, "%s ratio %.4f", vram_wfmt_name(fmt), ratio);
        CHECK(vram_lm_quantize(m, VRAM_WFMT_Q8_0, NULL) == VRAM_ERR_STATE && strstr(vram_last_error(), "already"),
              "quantizing twice: %s", vram_last_error());
        CHECK_OK(vram_lm_save(m, qp));
        CHECK_OK(vram_lm_load(rt, qp, &q, NULL));
        dequantise_file(qp, dp);
        CHECK_OK(vram_lm_load(rt, dp, &dq, NULL));
        if (q && dq) {
            CHECK(vram_lm_format(q) == fmt && vram_lm_weight_bytes(q) == vram_lm_weight_bytes(m), "reloaded as %s",
                  vram_wfmt_name(fmt));
            vram_tensor *lq = NULL, *ld = NULL, *lm = NULL;
            forward16(m, ids, &lm);
            forward16(q, ids, &lq);
            forward16(dq, ids, &ld);
            double same = max_abs_diff(lq, ld), saved = max_abs_diff(lm, lq), err = max_abs_diff(lq, l32);
            printf("%s: |low-precision - dequantised f32| %.3g, |reloaded - in memory| %.3g, |quantized - f32| %.3g\n",
                   vram_wfmt_name(fmt), same, saved, err);
            CHECK(same < 1e-4, "%s kernels compute the dequantised product: %g", vram_wfmt_name(fmt), same);
            CHECK(saved == 0, "a saved and reloaded %s model computes the same logits", vram_wfmt_name(fmt));
            CHECK(err > 0 && err < (fmt == VRAM_WFMT_BF16 ? 0.1 : 0.05), "%s logits near f32's: %g", vram_wfmt_name(fmt), err);
            vram_tensor_free(lq);
            vram_tensor_free(ld);
            vram_tensor_free(lm);
            forward15_1(q, ids, &lq);
            forward15_1(dq, ids, &ld);
            same = max_abs_diff(lq, ld);
            printf("%s, one row at a time: |low-precision - dequantised f32| %.3g\n", vram_wfmt_name(fmt), same);
            CHECK(same < 1e-4, "%s direct kernel computes the dequantised product: %g", vram_wfmt_name(fmt), same);
            vram_tensor_free(lq);
            vram_tensor_free(ld);
        }
        vram_lm_free(q);
        vram_lm_free(dq);
        vram_lm_free(m);
    }
    /* the training loader refuses a quantized file; generation's takes it */
    vram_gpt *back = NULL;
    CHECK(vram_gpt_load(rt, qp, &back, NULL) == VRAM_ERR_UNSUPPORTED && strstr(vram_last_error(), "quantized"),
          "training load of a quantized file: %s", vram_last_error());
    vram_tensor_free(l32);
    vram_lm_free(f32);
    vram_gpt_free(g);
}

/* The same forward under no_grad (the inference model) and with gradients (the training GPT). */
static void test_no_grad_memory(void) {
    vram_gpt *g = NULL;
    vram_lm *m = NULL;
    CHECK_OK(vram_gpt_new(rt, &small, &g));
    CHECK_OK(vram_lm_from_gpt(g, &m));
    int32_t ids[2 * 16];
    for (int i = 0; i < 32; i++) ids[i] = i * 5 % 256;
    vram_stats st;
    vram_tensor *x = NULL, *lg = NULL;
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, (int64_t[]){2, 16}, VRAM_TAG_TEMPORARY, ids, &x));
    CHECK_OK(vram_gpt_forward(g, x, NULL, 0, &lg, NULL));
    vram_allocator_get_stats(al, &st);
    int64_t act_grad = st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.current;
    vram_tensor_free(lg);
    vram_allocator_get_stats(al, &st);
    CHECK(act_grad > 0 && st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.current == 0,
          "grad mode keeps %lld activation bytes until the output goes", (long long)act_grad);
    vram_kv_cache *c = NULL;
    int64_t peak_before = st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.peak;
    CHECK_OK(vram_kv_cache_new(m, 2, 16, &c));
    vram_allocator_get_stats(al, &st);
    CHECK(st.tags[VRAM_TAG_KV_CACHE].allocated_bytes.current == (int64_t)vram_kv_cache_bytes(c) &&
              vram_kv_cache_bytes(c) == 2ull * 2 * 2 * 16 * 32 * 4,
          "kv cache: %llu bytes under its own tag", (unsigned long long)vram_kv_cache_bytes(c));
    CHECK_OK(vram_lm_forward(m, c, 0, 2, 16, ids, 1, &lg));
    vram_allocator_get_stats(al, &st);
    CHECK(st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.peak == peak_before &&
              st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.current == 0,
          "the inference forward allocates no activations");
    vram_tensor_free(lg);
    vram_tensor_free(x);
    vram_kv_cache_free(c);
    vram_lm_free(m);
    vram_gpt_free(g);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/vram_test_infer_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) != 0) return 1;
    CHECK_OK(vram_device_open("host", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &al));
    CHECK_OK(vram_runtime_new(al, 2, &rt));
    test_save_resume();
    test_bad_files();
    test_cache_matches_full_forward();
    test_quantized();
    test_no_grad_memory();
    vram_runtime_free(rt);
    vram_allocator_destroy(al);
    vram_device_close(dev);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return check_done();
}
