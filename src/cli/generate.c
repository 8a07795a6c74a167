/* generate.c — `vram generate` (sampling from a saved model with a KV cache, or its held-out
 * perplexity) and `vram quantize` (a model file's matrices to INT8 Q8_0 or bf16), on the CPU
 * through the caching allocator (infer.h).
 *
 * Tokens are bytes (the models `vram train` makes have a vocabulary of 256), or GPT-2's BPE
 * tokens with --tokenizer DIR (bpe.h), or ids given as such (--prompt-ids); each prompt is a row
 * of the batch; --device cuda:N loads the model on the host and runs it on GPU N. After the text
 * come the speed (prefill, and decode tokens/s over the batch) and the memory by category from
 * the allocator's per-tag statistics: weights, KV cache, activations (none: no graph is
 * recorded) and temporaries. Bad input (a corrupted or foreign
 * model file, a prompt longer than the context, --int8 on a quantized model) exits 2; a run that
 * fails part-way exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdint.h>

#include "cli.h"
#include "vram/alloc.h"
#include "vram/bpe.h"
#include "vram/data.h"
#include "vram/infer.h"

enum { MAX_PROMPTS = 64 };

typedef struct gen_opts {
    const char *model, *eval, *logits, *device, *tokenizer;
    vram_bpe *bpe; /* --tokenizer: text prompts are encoded, tokens decoded */
    const char *prompts[MAX_PROMPTS];
    int prompt_is_ids[MAX_PROMPTS]; /* --prompt-ids: a comma-separated list of token ids */
    int n_prompts, threads, top_k, eval_tokens, print_ids;
    vram_wfmt quant;
    vram_generate_opts g;
} gen_opts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: vram generate --model PATH --prompt TEXT [--prompt TEXT ...] [OPTIONS]\n"
            "Samples text from a model saved by `vram train --save` (or `vram quantize`, or a GPT-2 safetensors\n"
            "file), on the CPU or a GPU with a KV cache, and prints tokens/s and memory by category.\n\n"
            "  --model PATH       .vram model file or .safetensors (PyTorch GPT-2 names)\n"
            "  --prompt TEXT      a prompt (bytes are tokens); repeat for a batch\n"
            "  --prompt-ids LIST  a prompt given as token ids, e.g. 464,3290,318 (any vocabulary)\n"
            "  --tokenizer DIR    GPT-2's BPE: DIR/vocab.json and DIR/merges.txt encode the prompts and decode\n"
            "                     the tokens (without it, bytes are tokens)\n"
            "  --print-ids        also print each row's prompt and generated token ids\n"
            "  --device DEV       cpu (default) or cuda[:N]: load on the host, then run on GPU N\n"
            "  --tokens N         new tokens per prompt (default 64)\n"
            "  --temperature T    0 = greedy (default 0.8)\n"
            "  --top-k K          sample among the K likeliest (default 40; 0 = all)\n"
            "  --seed S           random seed (default 1337)\n"
            "  --int8             INT8 matrices, Q8_0: an f16 scale per 32 weights (converted while loading)\n"
            "  --int8-row         INT8 matrices, one f32 scale per output channel (Q8_R)\n"
            "  --bf16             store the matrices as bf16 after loading\n"
            "  --no-cache         recompute every prefix in full at each step (the KV cache's comparison)\n"
            "  --eval PATH        instead of generating: perplexity on the last 10%% of the text file PATH\n"
            "  --eval-tokens N    tokens to score with --eval (default 16384)\n"
            "  --logits FILE      write the first prompt's logits, float32 [tokens, vocab], to FILE\n"
            "  --threads N        threads for the products (default: online CPUs)\n");
}

static int parse_num(const char *flag, const char *v, double lo, double hi, double *out) {
    return vram_cli_number("generate", flag, v, lo, hi, out);
}

/* 0 run, 1 help printed, 2 bad usage. */
static int parse(int argc, char **argv, gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->g = (vram_generate_opts){.tokens = 64, .temperature = 0.8, .top_k = 40, .seed = 1337};
    o->eval_tokens = 16384;
    o->quant = VRAM_WFMT_F32;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        double x = 0;
        int ok = 1;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(f, "--int8") || !strcmp(f, "--int8-row") || !strcmp(f, "--bf16")) {
            vram_wfmt q = !strcmp(f, "--int8") ? VRAM_WFMT_Q8_0 : !strcmp(f, "--int8-row") ? VRAM_WFMT_Q8_R : VRAM_WFMT_BF16;
            if (o->quant != VRAM_WFMT_F32 && o->quant != q) {
                fprintf(stderr, "vram generate: --int8, --int8-row and --bf16 exclude each other\n");
                return 2;
            }
            o->quant = q;
            continue;
        } else if (!strcmp(f, "--no-cache")) {
            o->g.no_cache = 1;
            continue;
        } else if (!strcmp(f, "--print-ids")) {
            o->print_ids = 1;
            continue;
        }
        static const char *valued[] = {"--model", "--prompt", "--tokens", "--temperature", "--top-k", "--seed", "--eval",
                                       "--eval-tokens", "--logits", "--threads", "--prompt-ids", "--device",
                                       "--tokenizer"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(f, valued[k]);
        if (!known) {
            fprintf(stderr, "vram generate: unknown option '%s' (see vram generate --help)\n", f);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vram generate: %s needs a value\n", f);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(f, "--model")) o->model = v;
        else if (!strcmp(f, "--eval")) o->eval = v;
        else if (!strcmp(f, "--logits")) o->logits = v;
        else if (!strcmp(f, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(f, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "host") && strcmp(v, "cuda") && strncmp(v, "cuda:", 5)) {
                fprintf(stderr, "vram generate: --device: '%s' is not cpu or cuda[:N]\n", v);
                return 2;
            }
            o->device = strncmp(v, "cuda", 4) ? NULL : v;
        } else if (!strcmp(f, "--prompt") || !strcmp(f, "--prompt-ids")) {
            if (o->n_prompts == MAX_PROMPTS) {
                fprintf(stderr, "vram generate: at most %d prompts\n", MAX_PROMPTS);
                return 2;
            }
            o->prompt_is_ids[o->n_prompts] = !strcmp(f, "--prompt-ids");
            o->prompts[o->n_prompts++] = v;
        } else if (!strcmp(f, "--tokens")) ok = parse_num(f, v, 1, 1 << 20, &x), o->g.tokens = (int)x;
        else if (!strcmp(f, "--temperature")) ok = parse_num(f, v, 0, 100, &o->g.temperature);
        else if (!strcmp(f, "--top-k")) ok = parse_num(f, v, 0, 1 << 24, &x), o->g.top_k = (int)x;
        else if (!strcmp(f, "--seed")) ok = parse_num(f, v, 0, 9007199254740992.0, &x), o->g.seed = (uint64_t)x;
        else if (!strcmp(f, "--eval-tokens")) ok = parse_num(f, v, 1, 1e9, &x), o->eval_tokens = (int)x;
        else if (!strcmp(f, "--threads")) ok = parse_num(f, v, 1, 64, &x), o->threads = (int)x;
        if (!ok) return 2;
        if (x != floor(x)) {
            fprintf(stderr, "vram generate: %s needs an integer, not '%s'\n", f, v);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "vram generate: --model PATH is required\n");
        return 2;
    }
    if (o->eval && o->tokenizer) {
        fprintf(stderr, "vram generate: --eval scores the file's bytes as tokens; it does not take --tokenizer\n");
        return 2;
    }
    if (!o->eval && !o->n_prompts) {
        fprintf(stderr, "vram generate: give --prompt TEXT (or --eval PATH)\n");
        return 2;
    }
    return 0;
}

static double mib(int64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_memory(vram_allocator *a) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    static const struct {
        vram_tag tag;
        const char *label;
    } rows[] = {{VRAM_TAG_PARAMETER, "weights"},      {VRAM_TAG_KV_CACHE, "kv cache"}, {VRAM_TAG_ACTIVATION, "activations"},
                {VRAM_TAG_TEMPORARY, "temporaries"}, {VRAM_TAG_OTHER, "other"}};
    printf("\nMemory by category (allocator per-tag statistics)\n  %-14s %12s %12s\n", "category", "current", "peak");
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const vram_stat *s = &st.tags[rows[i].tag].allocated_bytes;
        printf("  %-14s %8.3f MiB %8.3f MiB\n", rows[i].label, mib(s->current), mib(s->peak));
    }
    printf("  %-14s %8.3f MiB %8.3f MiB\n", "allocator", mib(st.allocated_bytes[VRAM_POOL_ALL].current),
           mib(st.allocated_bytes[VRAM_POOL_ALL].peak));
}

/* Tokens as text: through the tokenizer (its bytes as they are; an id it lacks as <id>), else
 * bytes with the unprintable ones escaped. */
static void print_text(const vram_bpe *bpe, const int32_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int32_t c = ids[i];
        char *text = NULL;
        size_t len = 0;
        if (bpe && c < vram_bpe_vocab_size(bpe) && vram_bpe_decode(bpe, &c, 1, &text, &len) == VRAM_OK) {
            fwrite(text, 1, len, stdout);
            free(text);
        } else if (!bpe && (c == '\n' || (c >= 32 && c < 127))) putchar(c);
        else if (!bpe && c < 256) printf("\\x%02x", c);
        else printf("<%d>", c);
    }
}

/* Prompt b as token ids (malloc'd into *ids): its bytes, or the list of --prompt-ids. 0, or an exit
 * status after a message. */
static int prompt_to_ids(const gen_opts *o, int b, int32_t **ids, int64_t *n) {
    const char *s = o->prompts[b];
    size_t len = strlen(s);
    *ids = malloc(sizeof **ids * (len + 1));
    if (!*ids) {
        fprintf(stderr, "vram generate: out of host memory\n");
        return 1;
    }
    *n = 0;
    if (!o->prompt_is_ids[b] && o->bpe) {
        free(*ids);
        *ids = NULL;
        if (vram_bpe_encode(o->bpe, s, len, ids, n) == VRAM_OK) return 0;
        fprintf(stderr, "vram generate: prompt %d: %s\n", b + 1, vram_last_error());
        return 2;
    }
    if (!o->prompt_is_ids[b]) {
        for (size_t i = 0; i < len; i++) (*ids)[(*n)++] = (uint8_t)s[i];
        return 0;
    }
    for (const char *p = s; *p;) { /* a comma-separated list of ids (spaces allowed) */
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        while (*end == ' ') end++;
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "vram generate: --prompt-ids: '%s' is not a comma-separated list of token ids\n", s);
            free(*ids);
            *ids = NULL;
            return 2;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0) {
        fprintf(stderr, "vram generate: --prompt-ids: no token ids in '%s'\n", s);
        free(*ids);
        *ids = NULL;
        return 2;
    }
    return 0;
}

static int write_logits(vram_lm *m, const gen_opts *o, const char *path) {
    int64_t n = 0;
    int32_t *ids = NULL;
    float *host = NULL;
    if (!o->n_prompts) {
        fprintf(stderr, "vram generate: --logits needs a --prompt\n");
        return 2;
    }
    int rc = prompt_to_ids(o, 0, &ids, &n);
    if (rc) return rc;
    vram_kv_cache *c = NULL;
    vram_tensor *lg = NULL;
    vram_status s = vram_kv_cache_new(m, 1, n, &c);
    if (s == VRAM_OK) s = vram_lm_forward(m, c, 0, 1, n, ids, 1, &lg);
    size_t k = s == VRAM_OK ? (size_t)vram_tensor_numel(lg) : 0;
    if (s == VRAM_OK && !(host = malloc(sizeof *host * k))) s = vram_error(VRAM_ERR_HOST_MEMORY, "out of host memory");
    if (s == VRAM_OK) {
        vram_tensor_read_host(lg, host);
        s = vram_runtime_sync(vram_lm_runtime(m));
    }
    if (s != VRAM_OK) {
        fprintf(stderr, "vram generate: --logits: %s\n", vram_last_error());
        rc = s == VRAM_ERR_INVALID_ARG ? 2 : 1;
    } else {
        FILE *fp = fopen(path, "wb");
        if (!fp || fwrite(host, sizeof(float), k, fp) != k || fclose(fp) != 0) {
            fprintf(stderr, "vram generate: --logits: cannot write '%s'\n", path);
            rc = 1;
        }
    }
    vram_tensor_free(lg);
    vram_kv_cache_free(c);
    free(host);
    free(ids);
    return rc;
}

static int run_eval(vram_lm *m, const gen_opts *o) {
    vram_text_data *d = NULL;
    if (vram_text_data_open(o->eval, 0.1, &d) != VRAM_OK) {
        fprintf(stderr, "vram generate: --eval: %s\n", vram_last_error());
        return 2;
    }
    /* the validation split is the file's last 10%, as vram train's */
    uint64_t val = vram_text_data_split_size(d, VRAM_SPLIT_VAL), size = vram_text_data_size(d);
    FILE *fp = fopen(o->eval, "rb");
    uint8_t *buf = malloc(val ? val : 1);
    int rc = 0;
    if (!fp || !buf || fseek(fp, (long)(size - val), SEEK_SET) != 0 || fread(buf, 1, val, fp) != val) {
        fprintf(stderr, "vram generate: --eval: cannot read '%s'\n", o->eval);
        rc = 2;
    } else {
        double nll = 0;
        uint64_t n = 0;
        vram_status s = vram_lm_nll(m, buf, val, (uint64_t)o->eval_tokens, &nll, &n);
        if (s != VRAM_OK) {
            fprintf(stderr, "vram generate: --eval: %s\n", vram_last_error());
            rc = 1;
        } else {
            printf("held-out: %llu tokens of the last 10%% of '%s': loss %.6f nats, perplexity %.6f (weights %s)\n",
                   (unsigned long long)n, o->eval, nll, exp(nll), vram_wfmt_name(vram_lm_format(m)));
        }
    }
    if (fp) fclose(fp);
    free(buf);
    vram_text_data_close(d);
    return rc;
}

static void print_row(const gen_opts *o, int b, const int32_t *prompt, int64_t len, const int32_t *out) {
    printf("--- prompt %d\n", b + 1);
    print_text(o->bpe, prompt, len);
    print_text(o->bpe, out, o->g.tokens);
    printf("\n");
    if (!o->print_ids) return;
    printf("prompt ids %d:", b + 1);
    for (int64_t t = 0; t < len; t++) printf(" %d", prompt[t]);
    printf("\nids %d:", b + 1);
    for (int t = 0; t < o->g.tokens; t++) printf(" %d", out[t]);
    printf("\n");
}

static int run_generate(vram_lm *m, const gen_opts *o) {
    int n = o->n_prompts;
    int32_t *ids[MAX_PROMPTS] = {0};
    int64_t lens[MAX_PROMPTS];
    int32_t *out = calloc((size_t)n * (size_t)o->g.tokens, sizeof *out);
    int rc = out ? 0 : 1;
    for (int b = 0; b < n && !rc; b++) rc = prompt_to_ids(o, b, &ids[b], &lens[b]);
    vram_generate_stats st;
    vram_status s = rc ? VRAM_OK : vram_lm_generate(m, n, (const int32_t *const *)ids, lens, &o->g, out, &st);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram generate: %s\n", vram_last_error());
        rc = s == VRAM_ERR_INVALID_ARG ? 2 : 1;
    } else if (!rc) {
        for (int b = 0; b < n; b++) print_row(o, b, ids[b], lens[b], out + (int64_t)b * o->g.tokens);
        int64_t prompt_tokens = 0;
        for (int b = 0; b < n; b++) prompt_tokens += lens[b];
        double decoded = (double)n * (o->g.tokens - 1);
        vram_runtime *rt = vram_lm_runtime(m);
        char where[192] = "";
        if (o->device) snprintf(where, sizeof where, " on %s (%s)", o->device, vram_runtime_device_name(rt));
        printf("---\nprefill: %lld prompt tokens in %.2f ms; decode: %.0f tokens in %.2f ms = %.1f tokens/s (batch %d, %s, %s)%s\n",
               (long long)prompt_tokens, st.prefill_s * 1e3, decoded, st.decode_s * 1e3,
               st.decode_s > 0 ? decoded / st.decode_s : 0.0, n, o->g.no_cache ? "no cache" : "kv cache",
               vram_wfmt_name(vram_lm_format(m)), where);
        printf("kv cache: %.3f MiB for %d rows\n", mib((int64_t)st.kv_cache_bytes), n);
    }
    for (int b = 0; b < n; b++) free(ids[b]);
    free(out);
    return rc;
}

/* A device, its allocator and a runtime on it. */
typedef struct gen_side {
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt;
} gen_side;

/* Opens device `spec` ("host" or a cuda spec), its allocator and runtime; 0 or an exit status. */
static int setup(const char *spec, int threads, gen_side *sd, const char *tool) {
    vram_status s = vram_device_open(spec, &sd->dev);
    if (s == VRAM_OK) s = vram_allocator_new(sd->dev, NULL, &sd->a);
    if (s == VRAM_OK) s = vram_runtime_new(sd->a, threads, &sd->rt);
    if (s != VRAM_OK) {
        fprintf(stderr, "%s: cannot set up the device '%s': %s\n", tool, spec, vram_last_error());
        return 1;
    }
    return 0;
}

static void teardown(gen_side *sd) {
    vram_runtime_free(sd->rt);
    if (sd->a) vram_allocator_destroy(sd->a);
    vram_device_close(sd->dev);
}

/* Loads the model, converting its matrices to quant (f32: as stored) as they are read; 0 or an
 * exit status after a message. */
static int load(vram_runtime *rt, const char *path, vram_wfmt quant, const char *tool, vram_lm **m) {
    uint64_t bytes = 0;
    int kept = 0;
    vram_status s = vram_lm_load_as(rt, path, quant, m, &bytes, &kept);
    if (s != VRAM_OK) {
        if (s == VRAM_ERR_STATE)
            fprintf(stderr, "%s: %s: %s\n", tool, vram_wfmt_name(quant), vram_last_error());
        else
            fprintf(stderr, "%s: %s\n", tool, vram_last_error());
        return s == VRAM_ERR_OUT_OF_MEMORY || s == VRAM_ERR_HOST_MEMORY ? 1 : 2;
    }
    const vram_model_info *in = vram_lm_info(*m);
    printf("model '%s': GPT-2 layout, %d layers, %d heads, width %d, vocab %d, context %d, %s GELU; %.3f MiB read from "
           "the file into the host device; weights %s, %.3f MiB (%.4f of f32)%s\n",
           path, in->gpt.layers, in->gpt.heads, in->gpt.width, in->gpt.vocab, in->gpt.context,
           in->activation == VRAM_ACT_GELU_TANH ? "tanh" : "erf", mib((int64_t)bytes), vram_wfmt_name(vram_lm_format(*m)),
           mib((int64_t)vram_lm_weight_bytes(*m)), (double)vram_lm_weight_bytes(*m) / (double)vram_lm_f32_bytes(*m), kept ? " (some matrices kept f32: rows not a multiple of 32)" : "");
    return 0;
}

/* --device cuda: the host model's copy on the GPU (the host copy is freed); 0 or an exit status. */
static int to_gpu(gen_side *gpu, const gen_opts *o, vram_lm **m) {
    vram_lm *g = NULL;
    uint64_t bytes = 0;
    if (vram_lm_copy_to(*m, gpu->rt, &g, &bytes) != VRAM_OK) {
        fprintf(stderr, "vram generate: copying the model to %s: %s\n", o->device, vram_last_error());
        return 1;
    }
    printf("weights copied to %s (%s): %.3f MiB\n", o->device, vram_runtime_device_name(gpu->rt), mib((int64_t)bytes));
    vram_lm_free(*m);
    *m = g;
    return 0;
}

/* --tokenizer DIR: DIR/vocab.json and DIR/merges.txt; 0 or an exit status after a message. */
static int load_tokenizer(gen_opts *o) {
    char vocab[4096], merges[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab.json", o->tokenizer);
    snprintf(merges, sizeof merges, "%s/merges.txt", o->tokenizer);
    if (vram_bpe_load(vocab, merges, &o->bpe) != VRAM_OK) {
        fprintf(stderr, "vram generate: --tokenizer: %s\n", vram_last_error());
        return 2;
    }
    return 0;
}

int vram_cmd_generate(int argc, char **argv) {
    gen_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : 2;
    gen_side host = {0}, gpu = {0};
    vram_lm *m = NULL;
    rc = setup("host", o.threads, &host, "vram generate");
    if (!rc && o.device) rc = setup(o.device, o.threads, &gpu, "vram generate"); /* before the (long) load */
    if (!rc && o.tokenizer) rc = load_tokenizer(&o);
    if (!rc) rc = load(host.rt, o.model, o.quant, "vram generate", &m);
    if (!rc && o.bpe && vram_bpe_vocab_size(o.bpe) > vram_lm_info(m)->gpt.vocab) {
        fprintf(stderr, "vram generate: --tokenizer: its %d tokens exceed the model's vocabulary of %d\n",
                vram_bpe_vocab_size(o.bpe), vram_lm_info(m)->gpt.vocab);
        rc = 2;
    }
    if (!rc && o.device) rc = to_gpu(&gpu, &o, &m);
    if (!rc && o.logits) rc = write_logits(m, &o, o.logits);
    if (!rc && o.eval) rc = run_eval(m, &o);
    else if (!rc && o.n_prompts) rc = run_generate(m, &o);
    if (!rc) print_memory(o.device ? gpu.a : host.a);
    vram_lm_free(m);
    vram_bpe_free(o.bpe);
    teardown(&gpu);
    teardown(&host);
    return rc;
}

int vram_cmd_quantize(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    vram_wfmt fmt = VRAM_WFMT_Q8_0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: vram quantize IN OUT [--format q8_0|q8_r|bf16]\n"
                   "Writes the model IN (.vram f32, or GPT-2 .safetensors) with its matrices in INT8 to the .vram file OUT:\n"
                   "q8_0 (the default) one f16 scale per 32 weights, 8.5 bits a weight; q8_r one f32 scale per output\n"
                   "channel, 8 + 32/columns bits; or bf16.\n");
            return 0;
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "q8_0") || !strcmp(v, "int8")) fmt = VRAM_WFMT_Q8_0;
            else if (!strcmp(v, "q8_r")) fmt = VRAM_WFMT_Q8_R;
            else if (!strcmp(v, "bf16")) fmt = VRAM_WFMT_BF16;
            else {
                fprintf(stderr, "vram quantize: --format is q8_0, q8_r or bf16, not '%s'\n", v);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "vram quantize: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            fprintf(stderr, "vram quantize: one input and one output, not '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "usage: vram quantize IN OUT [--format q8_0|q8_r|bf16]\n");
        return 2;
    }
    gen_side host = {0};
    vram_lm *m = NULL;
    int rc = setup("host", 0, &host, "vram quantize");
    if (!rc) rc = load(host.rt, in, fmt, "vram quantize", &m);
    if (!rc && vram_lm_save(m, out) != VRAM_OK) {
        fprintf(stderr, "vram quantize: %s\n", vram_last_error());
        rc = 1;
    }
    if (!rc) printf("wrote '%s'\n", out);
    vram_lm_free(m);
    teardown(&host);
    return rc;
}
