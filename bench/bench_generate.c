/* bench_generate.c — generation on the CPU with f32, bf16 and INT8 (Q8_0, Q8_R) weights, side by side,
 * and what each costs in memory by category; then the same forward with and without gradients.
 *
 *   bench_generate [--layers N] [--heads N] [--width N] [--vocab N] [--context N] [--batch B]
 *                  [--prompt P] [--tokens N] [--repeat R] [--threads T] [--seed S]
 *
 * The model has random weights (generation speed and memory do not depend on their values; the
 * held-out perplexity of a trained model is `vram generate --eval`'s job). The f32 model is
 * converted to each format; R rounds then run one greedy generation of N tokens after B prompts
 * of P random tokens per format in turn, and the decode tokens/s (all rows) is the median of the
 * R runs. Memory by category comes from the allocator's per-tag statistics over one untimed
 * generation per format: weights (parameter), KV cache, activations and temporaries (peak, on
 * top of what was live before). Weights twice: the bytes of the format, and what the allocator
 * holds for them (its parameter tag, rounded to its block sizes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"
#include "vram/bench.h"
#include "vram/infer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double mib(int64_t b) { return (double)b / (1024.0 * 1024.0); }

typedef struct opts {
    vram_gpt_config cfg;
    int batch, prompt, tokens, repeat, threads;
    uint64_t seed;
} opts;

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){.cfg = {.layers = 8, .heads = 8, .width = 512, .vocab = 256, .context = 256},
                .batch = 4, .prompt = 32, .tokens = 64, .repeat = 5, .threads = 0, .seed = 1};
    struct {
        const char *flag;
        int *v;
    } f[] = {{"--layers", &o->cfg.layers}, {"--heads", &o->cfg.heads}, {"--width", &o->cfg.width},
             {"--vocab", &o->cfg.vocab},   {"--context", &o->cfg.context}, {"--batch", &o->batch},
             {"--prompt", &o->prompt},     {"--tokens", &o->tokens},   {"--repeat", &o->repeat},
             {"--threads", &o->threads}};
    for (int i = 1; i < argc; i++) {
        int hit = 0;
        for (size_t k = 0; k < sizeof f / sizeof *f && !hit; k++) {
            if (strcmp(argv[i], f[k].flag)) continue;
            char *end;
            errno = 0;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || errno || *end || v < 0 || v > 1 << 24) {
                fprintf(stderr, "bench_generate: %s needs a non-negative integer\n", argv[i]);
                return 2;
            }
            *f[k].v = (int)v;
            i++;
            hit = 1;
        }
        if (!hit) {
            fprintf(stderr, "usage: bench_generate [--layers N] [--heads N] [--width N] [--vocab N] [--context N] "
                            "[--batch B] [--prompt P] [--tokens N] [--repeat R] [--threads T]\n");
            return 2;
        }
    }
    if (o->batch < 1 || o->prompt < 1 || o->tokens < 2 || o->repeat < 1 || o->prompt + o->tokens > o->cfg.context + 1) {
        fprintf(stderr, "bench_generate: batch, prompt >= 1, tokens >= 2, repeat >= 1, prompt + tokens <= context + 1\n");
        return 2;
    }
    return 0;
}

/* One generation of every row; 0 or 1 after a message. */
static int generate_once(vram_lm *m, const opts *o, int32_t **prompts, int64_t *lens, vram_generate_stats *gs) {
    int32_t *out = calloc((size_t)o->batch * (size_t)o->tokens, sizeof *out);
    vram_generate_opts go = {.tokens = o->tokens, .temperature = 0, .seed = o->seed};
    vram_status s = out ? vram_lm_generate(m, o->batch, (const int32_t *const *)prompts, lens, &go, out, gs) : VRAM_ERR_OUT_OF_MEMORY;
    free(out);
    if (s != VRAM_OK) fprintf(stderr, "bench_generate: %s\n", vram_last_error());
    return s != VRAM_OK;
}

/* The formats: converted copies of g; an untimed generation each for its memory by
 * category (peaks reset before it), then R rounds that time one generation of each format in
 * turn, so a slow spell of a shared machine hits every format alike. */
static int run_formats(vram_allocator *a, vram_gpt *g, const opts *o, int32_t **prompts, int64_t *lens) {
    enum { NF = 4 };
    vram_wfmt fmts[NF] = {VRAM_WFMT_F32, VRAM_WFMT_BF16, VRAM_WFMT_Q8_0, VRAM_WFMT_Q8_R};
    vram_lm *m[NF] = {0};
    double *tps[NF] = {0}, prefill[NF] = {0}, mem[NF][5] = {{0}};
    int rc = 0;
    for (int f = 0; f < NF && !rc; f++) {
        vram_stats st0, st1;
        vram_allocator_get_stats(a, &st0);
        tps[f] = calloc((size_t)o->repeat, sizeof *tps[f]);
        if (!tps[f] || vram_lm_from_gpt(g, &m[f]) != VRAM_OK ||
            (fmts[f] != VRAM_WFMT_F32 && vram_lm_quantize(m[f], fmts[f], NULL) != VRAM_OK)) {
            fprintf(stderr, "bench_generate: %s\n", vram_last_error());
            rc = 1;
        }
        vram_allocator_get_stats(a, &st1); /* the weights as the allocator holds them (rounded) */
        mem[f][4] = mib(st1.tags[VRAM_TAG_PARAMETER].allocated_bytes.current - st0.tags[VRAM_TAG_PARAMETER].allocated_bytes.current);
    }
    for (int f = 0; f < NF && !rc; f++) {
        vram_stats st;
        vram_allocator_reset_peak_stats(a);
        vram_allocator_get_stats(a, &st);
        int64_t base_temp = st.tags[VRAM_TAG_TEMPORARY].allocated_bytes.current;
        vram_generate_stats gs;
        rc = generate_once(m[f], o, prompts, lens, &gs);
        vram_allocator_get_stats(a, &st);
        mem[f][0] = mib((int64_t)vram_lm_weight_bytes(m[f]));
        mem[f][1] = mib(st.tags[VRAM_TAG_KV_CACHE].allocated_bytes.peak);
        mem[f][2] = mib(st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.peak);
        mem[f][3] = mib(st.tags[VRAM_TAG_TEMPORARY].allocated_bytes.peak - base_temp);
    }
    for (int r = 0; r < o->repeat && !rc; r++)
        for (int f = 0; f < NF && !rc; f++) {
            vram_generate_stats gs;
            rc = generate_once(m[f], o, prompts, lens, &gs);
            tps[f][r] = (double)o->batch * (o->tokens - 1) / gs.decode_s;
            prefill[f] += gs.prefill_s * 1e3 / o->repeat;
        }
    for (int f = 0; f < NF && !rc; f++) {
        qsort(tps[f], (size_t)o->repeat, sizeof *tps[f], cmp_double);
        printf("| %-5s | %9.2f | %6.4f | %9.2f | %6.4f | %8.3f | %8.3f | %8.3f | %9.1f | %9.1f | %9.1f | %7.1f |\n",
               vram_wfmt_name(fmts[f]), mem[f][0], mem[f][0] / mem[0][0], mem[f][4], mem[f][4] / mem[0][4], mem[f][1], mem[f][2], mem[f][3], tps[f][0], tps[f][o->repeat / 2],
               tps[f][o->repeat - 1], prefill[f]);
    }
    for (int f = 0; f < NF; f++) {
        vram_lm_free(m[f]);
        free(tps[f]);
    }
    return rc;
}

/* The training GPT's forward on [batch, prompt] tokens with and without gradients. */
static int grad_vs_no_grad(vram_allocator *a, vram_runtime *rt, vram_gpt *g, const opts *o, int32_t **prompts) {
    int32_t *ids = calloc((size_t)o->batch * (size_t)o->prompt, sizeof *ids);
    for (int b = 0; ids && b < o->batch; b++) memcpy(ids + b * o->prompt, prompts[b], sizeof *ids * (size_t)o->prompt);
    printf("\nThe training GPT's forward on [%d, %d] tokens (logits kept), memory by category:\n\n", o->batch, o->prompt);
    printf("| mode    | activations MiB (end of forward) | temporaries MiB (peak) |\n|---|---|---|\n");
    int rc = 0;
    for (int ng = 0; ng < 2 && !rc; ng++) {
        vram_tensor *x = NULL, *lg = NULL;
        vram_allocator_reset_peak_stats(a);
        vram_stats st0, st;
        vram_allocator_get_stats(a, &st0);
        if (ng) vram_no_grad_enter();
        vram_status s = vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, (int64_t[]){o->batch, o->prompt}, VRAM_TAG_TEMPORARY, ids, &x);
        if (s == VRAM_OK) s = vram_gpt_forward(g, x, NULL, 0, &lg, NULL);
        if (ng) vram_no_grad_exit();
        vram_allocator_get_stats(a, &st);
        if (s != VRAM_OK) {
            fprintf(stderr, "bench_generate: %s\n", vram_last_error());
            rc = 1;
        } else {
            printf("| %-7s | %32.3f | %22.3f |\n", ng ? "no_grad" : "grad", mib(st.tags[VRAM_TAG_ACTIVATION].allocated_bytes.current),
                   mib(st.tags[VRAM_TAG_TEMPORARY].allocated_bytes.peak - st0.tags[VRAM_TAG_TEMPORARY].allocated_bytes.current));
        }
        vram_tensor_free(lg);
        vram_tensor_free(x);
    }
    free(ids);
    return rc;
}

int main(int argc, char **argv) {
    opts o;
    if (parse(argc, argv, &o)) return 2;
    vram_machine_print(stdout, argc, argv);
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_gpt *g = NULL;
    if (vram_device_open("host", &dev) != VRAM_OK || vram_allocator_new(dev, NULL, &a) != VRAM_OK ||
        vram_runtime_new(a, o.threads, &rt) != VRAM_OK || (vram_runtime_seed(rt, o.seed), vram_gpt_new(rt, &o.cfg, &g)) != VRAM_OK) {
        fprintf(stderr, "bench_generate: %s\n", vram_last_error());
        return 1;
    }
    int32_t *prompts[256] = {0};
    int64_t lens[256];
    int rc = o.batch > 256 ? 2 : 0;
    for (int b = 0; b < o.batch && !rc; b++) {
        prompts[b] = malloc(sizeof(int32_t) * (size_t)o.prompt);
        lens[b] = o.prompt;
        for (int t = 0; prompts[b] && t < o.prompt; t++) prompts[b][t] = (int32_t)(vram_runtime_uniform(rt) * o.cfg.vocab);
    }
    printf("model: GPT %d layers, %d heads, width %d, vocab %d, context %d (%.1f M parameters); batch %d, prompt %d, "
           "%d new tokens, greedy, %d runs\n\n", o.cfg.layers, o.cfg.heads, o.cfg.width, o.cfg.vocab, o.cfg.context,
           (double)vram_param_list_numel(vram_gpt_params(g)) / 1e6, o.batch, o.prompt, o.tokens, o.repeat);
    printf("| weights | weights MiB | of f32 | allocated MiB | of f32 | kv cache MiB | activations MiB | temporaries MiB (peak) "
           "| decode tok/s min | median | max | prefill ms (mean) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    if (!rc) rc = run_formats(a, g, &o, prompts, lens);
    if (!rc) rc = grad_vs_no_grad(a, rt, g, &o, prompts);
    for (int b = 0; b < o.batch && b < 256; b++) free(prompts[b]);
    vram_gpt_free(g);
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return rc;
}
