/* train.c — `vram train`: trains the GPT of nn.h on a byte-level text corpus on the CPU (host
 * device) or a GPU (--device cuda:N), every byte through the caching allocator, and reports
 * where memory went. --model gpt2 is GPT-2 124M (tied embedding, GPT-2's initialisation) and
 * its larger siblings; the corpus's bytes are its token ids (a vocabulary of 256 or more).
 *
 * One step: zero_grad (set_to_none), then --accum micro-batches of --batch sequences, each a
 * forward, loss / accum, backward (gradients add up), then gradient clipping and the
 * optimizer step. Progress: on a terminal one line rewritten in place each step (step of total,
 * loss, speed, peak, time left); in a log one line every --log-every steps (default: about 20
 * lines a run). --eval-every N runs the validation split under no_grad; its lines stay.
 * --report prints the allocator's summary and a table of memory by category (the allocator's
 * per-tag statistics), whose current bytes add up to the allocated bytes.
 * --save writes a model file (weights, optimizer state, step, random state: model_file.h) at the
 * end and every --save-every steps, --resume continues one exactly (train_ckpt.c).
 * Out of memory anywhere (e.g. under a small --capacity) ends the run with the allocator's
 * out-of-memory report and exit status 1; bad flags and a missing corpus exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "train_dist.h"
#include "vram/alloc.h"
#include "vram/data.h"
#include "vram/model_file.h"
#include "vram/nn.h"
#include "vram/optim.h"
#include "vram/plan.h"
#include "vram/summary.h"


typedef struct train_opts {
    const char *data;
    int batch, accum, steps, eval_every, eval_batches, threads, log_every;
    int checkpoint, report;
    double lr, clip;
    int lr_set;
    uint64_t seed, capacity;
    const char *optimizer;
    const char *device; /* "cpu" or a cuda spec */
    vram_gpt_config gpt;
    const char *save, *resume; /* model files (model_file.h) */
    const char *trace;         /* --trace: the run's allocations as a memtrace file (train_trace.c) */
    int save_every;
    vram_dtype precision; /* VRAM_DTYPE_F32, or F16/BF16 for mixed precision */
    int loss_scale;       /* dynamic loss scaling (GradScaler): 1 on, 0 off, -1 by precision (fp16) */
    int residual;         /* --residual: 1 fp32, 0 lowp, -1 not given (lowp under mixed precision) */
    int keep;             /* VRAM_GPT_KEEP_*: activations kept instead of recomputed */
    int keep_lowp;        /* --lowp-weights keep: 16-bit weight copies kept beside the f32 masters */
    int activation;       /* --activation: VRAM_ACT_*, or -1: the model's (applied after --model) */
    vram_train_dist dist; /* data parallel (train_dist.c) */
} train_opts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: vram train [OPTIONS]\n"
            "Trains a GPT on a byte-level text corpus on the CPU or a GPU, through the caching allocator.\n\n"
            "  --device DEV         cpu (default) or cuda[:N] (GPU N, kernels and cuBLASLt loaded at run time)\n"
            "  --model NAME         tiny (default: 4 layers, 4 heads, width 128, context 64), gpt2 (124M: 12,\n"
            "                       12, 768, 1024, vocabulary 50257, tied embedding), gpt2-medium, gpt2-large,\n"
            "                       gpt2-xl, or gpt:LAYERSxWIDTH[xHEADS]; later flags change single fields\n"
            "  --data PATH          corpus file (default build/data/kjv.txt from the repository, else the\n"
            "                       installed one, ../share/vram/kjv.txt beside this vram's bin/)\n"
            "  --batch N            sequences per micro-batch (default 16)\n"
            "  --accum K            micro-batches per step, gradients accumulated (default 1)\n"
            "  --steps N            optimizer steps (default 200)\n"
            "  --optimizer NAME     sgd | momentum | adam | adamw | adagrad (default adamw)\n"
            "  --lr X               learning rate (default: 2e-3 adam/adamw, 0.3 sgd, 0.1 momentum, 0.03 adagrad)\n"
            "  --clip X             clip gradients to global norm X (default 1.0; 0 = off)\n"
            "  --checkpoint         checkpoint every transformer block (recompute in backward)\n"
            "  --precision P        fp32 (default), bf16 or fp16: mixed precision on the GPU (products and\n"
            "                       attention in P on tensor cores, activations in P, weights, gradients and\n"
            "                       optimizer state in fp32)\n"
            "  --loss-scale MODE    dynamic (default with fp16: GradScaler's, from 2^16) or off\n"
            "  --residual WHERE     with bf16/fp16: lowp (default: the residual stream in P from the embeddings\n"
            "                       on, as llm.c) or fp32 (kept fp32 as PyTorch's autocast keeps it; layer norms\n"
            "                       read fp32 and give the products P)\n"
            "  --lowp-weights HOW   with bf16/fp16: cast (default: each product casts the fp32 weight into a\n"
            "                       temporary) or keep (a 16-bit copy of every weight, rewritten by AdamW)\n"
            "  --activation A       gelu_tanh (GPT-2's own, the gpt2 models' default; with bf16/fp16 on a GPU\n"
            "                       computed in the MLP's first product's epilogue) or gelu_erf (the\n"
            "                       default of the tiny model and specs: PyTorch's nn.GELU())\n"
            "  --recompute WHAT     gelu,layernorm (default: both outputs recomputed in backward), gelu,\n"
            "                       layernorm, none (kept for backward: more memory, less compute), or block\n"
            "                       (whole blocks: --checkpoint)\n"
            "  --eval-every N       validation loss every N steps, under no_grad (default 0 = off)\n"
            "  --eval-batches N     batches per evaluation (default 8)\n"
            "  --log-every N        a progress line every N steps when the output is not a terminal\n"
            "                       (default: steps / 20; on a terminal one line updates in place)\n"
            "  --layers N --heads N --width N --context N   model shape (default 4, 4, 128, 64)\n"
            "  --vocab N            vocabulary size, at least 256 (the corpus's bytes are the token ids)\n"
            "  --dropout P          dropout probability (default 0)\n"
            "  --capacity SIZE      memory the allocator may hold, e.g. 64MiB (default: the device's)\n"
            "  --threads N          matrix-product threads (default: online CPUs)\n"
            "  --seed N             random seed (default 1337)\n"
            "  --save PATH          save weights, optimizer state, step and random state at the end (.vram;\n"
            "                       a PATH ending in .safetensors saves the weights only, GPT-2 names)\n"
            "  --save-every N       also save every N steps\n"
            "  --resume PATH        continue a run saved with --save (same shape, optimizer and corpus) up to --steps\n"
            "  --report             end with the memory summary and the table of memory by category\n"
            "  --trace PATH         write the run's allocations (requested sizes, frees) as a memtrace v1 file,\n"
            "                       also after an out-of-memory failure: for vram replay, vram viz\n"
            VRAM_TRAIN_DIST_USAGE);
}

static int parse_int_in(const char *flag, const char *v, int lo, int hi, int *out) {
    return vram_cli_integer("train", flag, v, lo, hi, out);
}

static int parse_int(const char *flag, const char *v, int lo, int *out) {
    return parse_int_in(flag, v, lo, 1000000000, out);
}

/* The model's shape is bounded where its host-side tables (per layer, per head) stay small; the
 * tensors themselves go through the allocator, whose out-of-memory names --capacity. */
enum { MAX_LAYERS = 4096, MAX_HEADS = 4096, MAX_WIDTH = 1 << 20, MAX_CONTEXT = 1 << 20, MAX_VOCAB = 1 << 24 };

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
    return vram_cli_number("train", flag, v, lo, hi, out);
}

/* Returns 0 to run, 1 when --help was printed, 2 on bad usage. */
static int parse(int argc, char **argv, train_opts *o) {
    memset(o, 0, sizeof *o);
    o->data = NULL; /* default_corpus() */
    o->batch = 16;
    o->accum = 1;
    o->steps = 200;
    o->eval_batches = 8;
    o->clip = 1.0;
    o->seed = 1337;
    o->optimizer = "adamw";
    o->device = "cpu";
    o->precision = VRAM_DTYPE_F32;
    o->residual = -1;
    o->loss_scale = -1;
    o->activation = -1;
    vram_cli_model_spec("tiny", &o->gpt, NULL, 0); /* --model presets and specs: model_spec.c */
    vram_train_dist_defaults(&o->dist);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(f, "--checkpoint")) {
            o->checkpoint = 1;
            continue;
        }
        if (!strcmp(f, "--report")) {
            o->report = 1;
            continue;
        }
        static const char *const valued[] = {"--data", "--batch", "--accum", "--steps", "--optimizer", "--lr", "--clip",
                                             "--eval-every", "--eval-batches", "--log-every", "--layers", "--heads",
                                             "--width", "--context", "--dropout", "--capacity", "--threads", "--seed",
                                             "--device", "--model", "--vocab", "--save", "--save-every", "--resume", "--trace",
                                             "--precision", "--loss-scale", "--recompute", "--lowp-weights",
                                             "--residual", "--activation", VRAM_TRAIN_DIST_FLAGS};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(f, valued[k]);
        if (!known) {
            const char *all[sizeof valued / sizeof *valued + 3] = {"--help", "--checkpoint", "--report"};
            memcpy(all + 3, valued, sizeof valued);
            vram_cli_unknown("vram train", "option", f, all, sizeof all / sizeof *all, "vram train --help");
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vram train: %s needs a value\n", f);
            return 2;
        }
        const char *v = argv[++i];
        int ok = 1, tmp, dist = vram_train_dist_parse(&o->dist, f, v);
        if (dist) ok = dist > 0;
        else if (!strcmp(f, "--data")) o->data = v;
        else if (!strcmp(f, "--batch")) ok = parse_int(f, v, 1, &o->batch);
        else if (!strcmp(f, "--accum")) ok = parse_int(f, v, 1, &o->accum);
        else if (!strcmp(f, "--steps")) ok = parse_int(f, v, 1, &o->steps);
        else if (!strcmp(f, "--optimizer")) o->optimizer = v;
        else if (!strcmp(f, "--lr")) ok = parse_double(f, v, 0, 100, &o->lr), o->lr_set = 1;
        else if (!strcmp(f, "--clip")) ok = parse_double(f, v, 0, 1e9, &o->clip);
        else if (!strcmp(f, "--eval-every")) ok = parse_int(f, v, 0, &o->eval_every);
        else if (!strcmp(f, "--eval-batches")) ok = parse_int(f, v, 1, &o->eval_batches);
        else if (!strcmp(f, "--log-every")) ok = parse_int(f, v, 1, &o->log_every);
        else if (!strcmp(f, "--layers")) ok = parse_int_in(f, v, 1, MAX_LAYERS, &o->gpt.layers);
        else if (!strcmp(f, "--heads")) ok = parse_int_in(f, v, 1, MAX_HEADS, &o->gpt.heads);
        else if (!strcmp(f, "--width")) ok = parse_int_in(f, v, 1, MAX_WIDTH, &o->gpt.width);
        else if (!strcmp(f, "--context")) ok = parse_int_in(f, v, 1, MAX_CONTEXT, &o->gpt.context);
        else if (!strcmp(f, "--dropout")) ok = parse_double(f, v, 0, 0.99, &o->gpt.dropout);
        else if (!strcmp(f, "--save")) o->save = v;
        else if (!strcmp(f, "--resume")) o->resume = v;
        else if (!strcmp(f, "--trace")) o->trace = v;
        else if (!strcmp(f, "--save-every")) ok = parse_int(f, v, 1, &o->save_every);
        else if (!strcmp(f, "--threads")) ok = parse_int(f, v, 1, &o->threads);
        else if (!strcmp(f, "--seed")) ok = parse_int(f, v, 0, &tmp), o->seed = (uint64_t)tmp;
        else if (!strcmp(f, "--vocab")) ok = parse_int_in(f, v, 256, MAX_VOCAB, &o->gpt.vocab);
        else if (!strcmp(f, "--recompute")) {
            if (vram_cli_recompute(v, &o->keep, &o->checkpoint)) {
                fprintf(stderr, "vram train: --recompute: '%s' is not gelu,layernorm, gelu, layernorm, none or block\n", v);
                ok = 0;
            }
        } else if (!strcmp(f, "--lowp-weights")) {
            if (vram_cli_lowp_weights(v, &o->keep_lowp)) {
                fprintf(stderr, "vram train: --lowp-weights: '%s' is not cast or keep\n", v);
                ok = 0;
            }
        } else if (!strcmp(f, "--activation")) {
            if (vram_cli_activation(v, &o->activation)) {
                fprintf(stderr, "vram train: --activation: '%s' is not gelu_tanh or gelu_erf\n", v);
                ok = 0;
            }
        } else if (!strcmp(f, "--loss-scale")) {
            if (!strcmp(v, "dynamic")) o->loss_scale = 1;
            else if (!strcmp(v, "off")) o->loss_scale = 0;
            else {
                fprintf(stderr, "vram train: --loss-scale: '%s' is not dynamic or off\n", v);
                ok = 0;
            }
        } else if (!strcmp(f, "--precision")) {
            if (!strcmp(v, "fp32") || !strcmp(v, "f32")) o->precision = VRAM_DTYPE_F32;
            else if (!strcmp(v, "bf16")) o->precision = VRAM_DTYPE_BF16;
            else if (!strcmp(v, "fp16") || !strcmp(v, "f16")) o->precision = VRAM_DTYPE_F16;
            else {
                fprintf(stderr, "vram train: --precision: '%s' is not fp32, bf16 or fp16\n", v);
                ok = 0;
            }
        } else if (!strcmp(f, "--residual")) {
            if (vram_cli_residual(v, &o->residual)) {
                fprintf(stderr, "vram train: --residual: '%s' is not fp32 or lowp\n", v);
                ok = 0;
            }
        } else if (!strcmp(f, "--device")) {
            o->device = v;
            if (strcmp(v, "cpu") && strcmp(v, "host") && strcmp(v, "cuda") && strncmp(v, "cuda:", 5)) {
                fprintf(stderr, "vram train: --device: '%s' is not cpu or cuda[:N]\n", v);
                ok = 0;
            }
        } else if (!strcmp(f, "--model")) {
            char err[200];
            if (vram_cli_model_spec(v, &o->gpt, err, sizeof err)) {
                fprintf(stderr, "vram train: --model: %s\n", err);
                ok = 0;
            }
        }
        else if (!strcmp(f, "--capacity")) {
            if (vram_parse_size(v, &o->capacity) != VRAM_OK) {
                fprintf(stderr, "vram train: --capacity: %s\n", vram_last_error());
                ok = 0;
            } else if (o->capacity == 0) {
                fprintf(stderr, "vram train: --capacity: '%s' is zero bytes\n", v);
                ok = 0;
            }
        }
        if (!ok) return 2;
    }
    if (o->save_every && !o->save) {
        fprintf(stderr, "vram train: --save-every needs --save PATH\n");
        return 2;
    }
    if (o->trace && (o->dist.engine || o->dist.ranks)) { /* every rank would write the one file */
        fprintf(stderr, "vram train: --trace records one process: not with --dist or --ranks\n");
        return 2;
    }
    if (o->gpt.width % o->gpt.heads) {
        fprintf(stderr, "vram train: --width %d is not a multiple of --heads %d\n", o->gpt.width, o->gpt.heads);
        return 2;
    }
    vram_optim_config oc;
    if (vram_optim_config_parse(o->optimizer, &oc) != VRAM_OK) {
        fprintf(stderr, "vram train: --optimizer: %s\n", vram_last_error());
        return 2;
    }
    return vram_train_dist_check(&o->dist, o->save || o->resume, !strncmp(o->device, "cuda", 4),
                                 o->loss_scale == 1 || (o->loss_scale < 0 && o->precision == VRAM_DTYPE_F16));
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *mib(int64_t b, char *buf, size_t cap) {
    snprintf(buf, cap, "%.2f MiB", (double)b / (1024.0 * 1024.0));
    return buf;
}

/* "1 step", "2 steps": `word` with an "s", or "es" after a sibilant ("batches"). */
static const char *plural(long long n, const char *word, char *buf, size_t cap) {
    size_t len = strlen(word);
    int es = len > 1 && (!strcmp(word + len - 2, "ch") || !strcmp(word + len - 2, "sh") || word[len - 1] == 's');
    snprintf(buf, cap, "%lld %s%s", n, word, n == 1 ? "" : es ? "es" : "s");
    return buf;
}

/* Where progress goes: in place on a terminal, else every `every` steps. */
typedef struct progress {
    int tty, every;
    double start;
} progress;

/* "m:ss" (or "h:mm:ss") of a duration in seconds. */
static const char *clock_text(double s, char *buf, size_t cap) {
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

static void progress_step(const progress *p, int step, int steps, double loss, double tok_s, double dt,
                          int64_t peak) {
    if (!p->tty && step % p->every != 0 && step != steps) return;
    char b1[32], b2[32];
    double left = (now_s() - p->start) / step * (steps - step);
    printf("%sstep %*d/%d | loss %.4f | %7.0f tok/s | %6.1f ms | peak %s | %s left%s", p->tty ? "\r\033[K" : "",
           (int)snprintf(NULL, 0, "%d", steps), step, steps, loss, tok_s, dt * 1e3, mib(peak, b1, sizeof b1),
           clock_text(left, b2, sizeof b2), p->tty ? "" : "\n");
    fflush(stdout);
}

/* A line that stays (an evaluation): on a terminal it replaces the progress line, which the
 * next step draws again below it. */
static void progress_keep(const progress *p) {
    if (p->tty) fputs("\r\033[K", stdout);
}

/* Ends the progress line on a terminal (it stays), before the summary or an error's message. */
static void progress_end(const progress *p) {
    if (p->tty) {
        putchar('\n');
        fflush(stdout);
    }
}

/* The table of memory by category, from the allocator's per-tag statistics. `fwd` holds the
 * per-tag bytes at the end of the last forward pass (where activations peak). */
static void print_categories(vram_allocator *a, const int64_t *fwd) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    const vram_cli_category *rows = vram_cli_categories; /* (plan_oom.c) */
    char b1[32], b2[32], b3[32];
    printf("\nMemory by category (allocator per-tag statistics, bytes as allocated: rounded to block sizes)\n");
    printf("  %-16s %14s %14s %16s\n", "category", "current", "peak", "at end of fwd");
    int64_t sum = 0, sum_fwd = 0;
    for (int i = 0; i < VRAM_CLI_CATEGORIES; i++) {
        const vram_stat *s = &st.tags[rows[i].tag].allocated_bytes;
        sum += s->current;
        sum_fwd += fwd[rows[i].tag];
        printf("  %-16s %14s %14s %16s\n", rows[i].label, mib(s->current, b1, sizeof b1), mib(s->peak, b2, sizeof b2),
               mib(fwd[rows[i].tag], b3, sizeof b3));
    }
    for (uint32_t t = 0; t < st.num_tags && t < VRAM_TAG_MAX; t++) { /* tags without a row (kv cache, user tags) */
        int listed = 0;
        for (int i = 0; i < VRAM_CLI_CATEGORIES; i++) listed |= rows[i].tag == (vram_tag)t;
        if (!listed) sum += st.tags[t].allocated_bytes.current;
    }
    const vram_stat *all = &st.allocated_bytes[VRAM_POOL_ALL];
    printf("  %-16s %14s %14s %16s\n", "sum", mib(sum, b1, sizeof b1), "", mib(sum_fwd, b3, sizeof b3));
    printf("  %-16s %14s %14s\n", "allocator total", mib(all->current, b1, sizeof b1), mib(all->peak, b2, sizeof b2));
    printf("  categories add up to the allocator's allocated bytes: %s (%lld = %lld)\n",
           sum == all->current ? "yes" : "NO", (long long)sum, (long long)all->current);
}

/* ---- the out-of-memory explanation (the planner: plan_oom.c) ---- */
static const train_opts *explain_opts; /* the run's flags, for the remedies' plans */
static vram_plan_moment oom_moment;     /* the allocator at the failing allocation */
static int oom_seen;

/* The runtime's allocation observer: keeps the bytes by category of the first failure, before
 * the failing op unwinds and frees what it held. */
static void note_oom(void *ctx, vram_status status) {
    if (status != VRAM_ERR_OUT_OF_MEMORY || oom_seen) return;
    vram_plan_moment_read(vram_runtime_allocator(ctx), &oom_moment);
    oom_seen = 1;
}

static void explain_oom(const char *what, vram_allocator *a) {
    const train_opts *o = explain_opts;
    vram_plan_moment at = oom_moment;
    vram_plan_config c;
    vram_plan_config_default(&c);
    vram_optim_config oc;
    vram_optim_config_parse(o->optimizer, &oc);
    c.gpt = o->gpt;
    c.batch = o->batch;
    c.accum = o->accum;
    c.checkpoint = o->checkpoint;
    c.optimizer = oc.kind;
    c.momentum = oc.momentum;
    c.clip = o->clip;
    c.threads = o->threads;
    c.gpu = !strncmp(o->device, "cuda", 4);
    /* the GPU's own size where no --capacity was given: what this run could not exceed */
    c.capacity = o->capacity || !c.gpu ? o->capacity : vram_allocator_limit(a);
    const char *no_remedies = !strcmp(what, "creating the model") ? vram_cli_model_too_big : NULL;
    vram_cli_explain_oom(stderr, "vram train", &at, &c, no_remedies);
}
/* ---- end of the out-of-memory explanation ---- */

static int fail(vram_allocator *a, vram_status s, const char *what) {
    if (s == VRAM_ERR_OUT_OF_MEMORY) {
        fprintf(stderr, "vram train: out of memory while %s: %s\n", what, vram_last_error());
        const char *rep = a ? vram_allocator_oom_report(a) : "";
        if (rep && *rep) fprintf(stderr, "%s\n", rep);
        /* only where the allocator refused a tensor (not where host memory ran out) */
        if (a && explain_opts && oom_seen) explain_oom(what, a);
        fprintf(stderr, "vram train: try a smaller --batch (with --accum to keep the batch), --checkpoint, a smaller "
                        "model, or a larger --capacity\n");
    } else {
        fprintf(stderr, "vram train: %s failed: %s (%s)\n", what, vram_status_str(s), vram_last_error());
    }
    return 1;
}

/* Model FLOPs utilisation as llm.c counts it: 6 N + 6 L C T FLOPs a token (the products of
 * forward and backward, and attention's), against the GPU's dense bf16 peak, for mixed precision
 * on a GPU whose peak is known. */
static void print_mfu(const train_opts *o, int64_t params, double step_ms, const char *device) {
    static const struct {
        const char *name;
        double peak;
    } gpus[] = {{"H100", 989.4e12}, {"H200", 989.4e12}, {"A100", 312e12}, {"L40S", 362e12}, {"A10G", 70e12}};
    if (o->precision == VRAM_DTYPE_F32 || !(step_ms > 0)) return;
    for (size_t i = 0; i < sizeof gpus / sizeof *gpus; i++) {
        if (!strstr(device, gpus[i].name)) continue;
        double per_token = 6.0 * (double)params + 6.0 * o->gpt.layers * o->gpt.width * (double)o->gpt.context;
        double tokens = (double)o->batch * o->accum * o->gpt.context;
        printf("model FLOPs utilisation: %.1f%% of the %s's %.0f TFLOP/s dense bf16 peak (%.1f TFLOP/s; 6N + 6LCT a token)\n",
               100 * per_token * tokens / (step_ms * 1e-3) / gpus[i].peak, gpus[i].name, gpus[i].peak / 1e12,
               per_token * tokens / (step_ms * 1e-3) / 1e12);
        return;
    }
}

/* One micro-batch: forward, loss / accum, backward. Returns the loss. */
static vram_status micro_step(vram_gpt *g, vram_text_data *d, vram_runtime *rt, const train_opts *o, int last,
                              const vram_grad_scaler *scaler, int64_t *fwd_tags, double *loss_out) {
    vram_tensor *ids = NULL, *tg = NULL, *loss = NULL, *scaled = NULL;
    int64_t total, first; /* this rank's rows of the batch of all ranks */
    vram_train_dist_rows(&o->dist, o->batch, &total, &first);
    vram_status s = vram_text_data_batch_rows(d, rt, VRAM_SPLIT_TRAIN, total, first, o->batch, o->gpt.context, &ids, &tg);
    if (s == VRAM_OK) s = vram_gpt_forward(g, ids, tg, 1, NULL, &loss);
    vram_tensor_free(ids);
    vram_tensor_free(tg);
    if (s == VRAM_OK && last) {
        vram_stats st;
        vram_allocator_get_stats(vram_runtime_allocator(rt), &st);
        for (int t = 0; t < VRAM_TAG_BUILTIN_COUNT; t++) fwd_tags[t] = st.tags[t].allocated_bytes.current;
    }
    if (s == VRAM_OK) {
        *loss_out = vram_tensor_item(loss);
        s = o->accum > 1 ? vram_scale(loss, 1.0 / o->accum, &scaled) : VRAM_OK;
    }
    if (o->dist.ddp) vram_ddp_begin_micro(o->dist.ddp, last); /* only the last backward communicates */
    if (s == VRAM_OK) s = vram_backward(scaled ? scaled : loss, scaler ? vram_grad_scaler_seed(scaler) : NULL);
    vram_tensor_free(scaled);
    vram_tensor_free(loss);
    return s;
}

static vram_status evaluate(vram_gpt *g, vram_text_data *d, vram_runtime *rt, train_opts *o, double *out) {
    double total = 0;
    vram_status s = VRAM_OK;
    vram_no_grad_enter();
    for (int i = 0; i < o->eval_batches && s == VRAM_OK; i++) {
        vram_tensor *ids = NULL, *tg = NULL, *loss = NULL;
        int64_t total, first;
        vram_train_dist_rows(&o->dist, o->batch, &total, &first);
        s = vram_text_data_batch_rows(d, rt, VRAM_SPLIT_VAL, total, first, o->batch, o->gpt.context, &ids, &tg);
        if (s == VRAM_OK) s = vram_gpt_forward(g, ids, tg, 0, NULL, &loss);
        if (s == VRAM_OK) total += vram_tensor_item(loss);
        vram_tensor_free(ids);
        vram_tensor_free(tg);
        vram_tensor_free(loss);
    }
    vram_no_grad_exit();
    *out = total / o->eval_batches;
    if (s == VRAM_OK && vram_train_dist_mean(&o->dist, out))
        s = vram_error(VRAM_ERR_IO, "the validation loss of the ranks: %s", vram_last_error());
    return s;
}

/* The corpus when --data is not given: the build's (`make run` from the repository), else the
 * one `cmake --install` put in share/vram/ beside this executable's bin/. Fills `installed`
 * with the latter's path (for the message when neither exists) and returns the one to open. */
static const char *default_corpus(char *installed, size_t cap) {
    static const char *const built = "build/data/kjv.txt";
    installed[0] = '\0';
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0'; /* the bin folder */
        snprintf(installed, cap, "%s/../share/vram/kjv.txt", exe);
    }
    if (access(built, R_OK) == 0 || !installed[0] || access(installed, R_OK) != 0) return built;
    return installed;
}

/* "vram train ARGS" for the trace's source header: on one line, cut to fit `cap`. */
static void trace_source(int argc, char **argv, char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "vram train");
    for (int i = 1; i < argc && n < cap; i++) n += (size_t)snprintf(out + n, cap - n, " %s", argv[i]);
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

int vram_cmd_train(int argc, char **argv) {
    train_opts o;
    int pr = parse(argc, argv, &o);
    if (pr == 1) return 0;
    if (pr == 2) return 2;
    if (o.dist.ranks) return vram_train_dist_relaunch(&o.dist, argc, argv); /* (mpirun runs the ranks) */
    explain_opts = &o;
    char installed[4200];
    int defaulted = o.data == NULL;
    if (defaulted) o.data = default_corpus(installed, sizeof installed);
    vram_text_data *data = NULL;
    vram_status s = vram_text_data_open(o.data, 0.1, &data);
    if (s != VRAM_OK) {
        if (defaulted && s == VRAM_ERR_NOT_FOUND)
            fprintf(stderr, "vram train: no corpus: neither build/data/kjv.txt (build it with `make` in the "
                            "repository) nor an installed %s; pass --data PATH\n", installed[0] ? installed : "share/vram/kjv.txt");
        else
            fprintf(stderr, "vram train: cannot use corpus: %s\n", vram_last_error());
        return 2;
    }
    if (vram_text_data_split_size(data, VRAM_SPLIT_VAL) < (uint64_t)o.gpt.context + 1 ||
        vram_text_data_split_size(data, VRAM_SPLIT_TRAIN) < (uint64_t)o.gpt.context + 1) {
        fprintf(stderr, "vram train: corpus '%s' is too small for --context %d\n", o.data, o.gpt.context);
        vram_text_data_close(data);
        return 2;
    }
    if (vram_cli_check_conf("vram train", NULL)) { /* bad input: status 2, as replay and bench say */
        vram_text_data_close(data);
        return 2;
    }
    int on_gpu = !strncmp(o.device, "cuda", 4);
    if (o.precision != VRAM_DTYPE_F32 && !on_gpu) {
        fprintf(stderr, "vram train: --precision %s needs --device cuda: the CPU has no low-precision kernels\n",
                o.precision == VRAM_DTYPE_BF16 ? "bf16" : "fp16");
        vram_text_data_close(data);
        return 2;
    }
    if (o.keep_lowp && o.precision == VRAM_DTYPE_F32) { /* a flag that would change nothing is a mistake */
        fprintf(stderr, "vram train: --lowp-weights keep keeps 16-bit weight copies for mixed precision: add "
                        "--precision bf16 or fp16\n");
        vram_text_data_close(data);
        return 2;
    }
    if (o.residual == 0 && o.precision == VRAM_DTYPE_F32) { /* fp32 has no 16-bit stream to keep */
        fprintf(stderr, "vram train: --residual lowp is for mixed precision: add --precision bf16 or fp16\n");
        vram_text_data_close(data);
        return 2;
    }
    char spec[64] = "host";
    if (on_gpu) snprintf(spec, sizeof spec, "%s", o.device);
    else if (o.capacity) snprintf(spec, sizeof spec, "host:%llu", (unsigned long long)o.capacity);
    if (vram_train_dist_launch(&o.dist, o.device, spec, sizeof spec)) { /* (a GPU a rank: LOCAL_RANK) */
        vram_text_data_close(data);
        return 2;
    }
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_gpt *g = NULL;
    vram_optimizer *opt = NULL;
    vram_grad_scaler *scaler = NULL;
    int rc = 0, tracing = 0;
    s = vram_device_open(spec, &dev);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: %s: %s\n", on_gpu ? "--device" : "--capacity", vram_last_error());
        vram_text_data_close(data);
        return on_gpu && s == VRAM_ERR_NO_DEVICE ? 1 : 2;
    }
    s = vram_allocator_new(dev, NULL, &a);
    if (s == VRAM_OK && on_gpu && o.capacity) s = vram_allocator_set_limit(a, o.capacity);
    if (s != VRAM_OK && o.capacity) { /* the device's size is what could not be set up, not the training */
        fprintf(stderr, "vram train: --capacity: %s; give a smaller --capacity\n", vram_last_error());
        rc = 2;
        goto done;
    }
    if (s == VRAM_OK && o.trace) {
        if (vram_train_trace_start(a)) {
            rc = 1;
            goto done;
        }
        tracing = 1;
    }
    if (s == VRAM_OK) s = vram_runtime_new(a, o.threads, &rt);
    if (s != VRAM_OK) {
        rc = fail(a, s, on_gpu ? "setting up the GPU runtime" : "setting up the runtime");
        goto done;
    }
    vram_runtime_seed(rt, o.seed);
    vram_runtime_set_alloc_observer(rt, note_oom, rt); /* for the out-of-memory explanation */
    o.gpt.precision = o.precision;
    o.gpt.residual_f32 = o.residual == 1;
    o.gpt.keep = o.keep;
    o.gpt.keep_lowp_weights = o.keep_lowp;
    if (o.activation >= 0) o.gpt.activation = o.activation;
    s = vram_gpt_new(rt, &o.gpt, &g);
    if (s != VRAM_OK) {
        rc = fail(a, s, "creating the model");
        goto done;
    }
    vram_gpt_set_checkpoint(g, o.checkpoint);
    vram_param_list *params = vram_gpt_params(g);
    vram_optim_config oc;
    vram_optim_config_parse(o.optimizer, &oc);
    if (o.lr_set) {
        oc.lr = o.lr;
    } else {
        oc.lr = oc.kind == VRAM_OPTIM_SGD ? (oc.momentum > 0 ? 0.1 : 0.3) : oc.kind == VRAM_OPTIM_ADAGRAD ? 0.03 : 2e-3;
    }
    s = vram_optimizer_new(rt, params, &oc, &opt);
    if (s != VRAM_OK) {
        rc = fail(a, s, "creating the optimizer");
        goto done;
    }
    if (o.loss_scale == 1 || (o.loss_scale < 0 && o.precision == VRAM_DTYPE_F16)) {
        s = vram_grad_scaler_new(rt, opt, NULL, &scaler);
        if (s != VRAM_OK) {
            rc = fail(a, s, "creating the loss scaler");
            goto done;
        }
    }
    if (vram_train_dist_start(&o.dist, rt, params)) { /* rank 0's weights broadcast, DDP's buckets */
        rc = 1;
        goto done;
    }
    /* ---- resume (model_file.h): weights, optimizer state, step and random state ---- */
    int first_step = 1;
    if (o.resume) {
        rc = vram_train_resume(o.resume, g, opt, data, o.steps, &first_step);
        if (rc) goto done;
    }
    double unigram = vram_text_data_unigram_entropy(data);
    char b1[32];
    printf("vram train: %s, %.2f MB corpus '%s' (byte unigram entropy %.4f nats = %.3f bits)\n",
           vram_runtime_device_name(rt), vram_text_data_size(data) / 1e6, o.data, unigram, unigram / log(2.0));
    char b2[32], b3[32];
    printf("model: GPT %s, %s, width %d, context %d, vocab %d%s, %s GELU: %lld parameters (%s)\n",
           plural(o.gpt.layers, "layer", b2, sizeof b2), plural(o.gpt.heads, "head", b3, sizeof b3), o.gpt.width,
           o.gpt.context, o.gpt.vocab, o.gpt.tied ? ", tied embedding" : "",
           o.gpt.activation == VRAM_ACT_GELU_TANH ? "tanh" : "erf", (long long)vram_param_list_numel(params),
           mib(vram_param_list_numel(params) * 4, b1, sizeof b1));
    printf("training: batch %d x accum %d x context %d = %.0f tokens/step, %s lr %g, clip %g, checkpoint %s, %s%s%s, %s\n",
           o.batch, o.accum, o.gpt.context, (double)o.batch * o.accum * o.gpt.context, o.optimizer, oc.lr, o.clip,
           o.checkpoint ? "every block" : "off", o.precision == VRAM_DTYPE_F32 ? "fp32" : o.precision == VRAM_DTYPE_BF16 ?
           "mixed precision bf16" : "mixed precision fp16",
           o.precision != VRAM_DTYPE_F32 && o.keep_lowp ? " (16-bit weight copies kept)" : "",
           o.precision != VRAM_DTYPE_F32 && o.residual == 1 ? " (fp32 residual stream)" : "",
           plural(o.steps, "step", (char[32]){0}, 32));
    vram_train_dist_describe(&o.dist, o.batch);
    fflush(stdout);
    progress prog = {isatty(STDOUT_FILENO) && !o.dist.comm /* (mpirun's pty) */, o.log_every ? o.log_every : (o.steps + 19) / 20, now_s()};
    int64_t fwd_tags[VRAM_TAG_BUILTIN_COUNT] = {0};
    double t_start = now_s(), last_loss = NAN, last_val = NAN;
    double *step_ms = calloc((size_t)(o.steps - first_step) + 2, sizeof *step_ms);
    if (!step_ms) {
        rc = fail(a, vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory for %d step times", o.steps), "starting");
        goto done;
    }
    for (int step = first_step; step <= o.steps; step++) {
        if (o.dist.comm) vram_train_dist_fault(&o.dist, step); /* (a test's lost rank: docs/data-parallel.md) */
        double t0 = now_s(), loss_sum = 0;
        vram_param_list_zero_grad(params, 1);
        for (int m = 0; m < o.accum && s == VRAM_OK; m++) {
            double l = 0;
            s = micro_step(g, data, rt, &o, m == o.accum - 1, scaler, fwd_tags, &l);
            loss_sum += l;
        }
        double norm = 0;
        vram_ddp *ddp = o.dist.ddp; /* data parallel: the mean gradient over the ranks */
        if (s == VRAM_OK && ddp) s = vram_ddp_finish(ddp);
        if (s == VRAM_OK && scaler) s = vram_grad_scaler_unscale(scaler, params); /* before clipping, as PyTorch */
        if (s == VRAM_OK && ddp) {
            if (o.clip > 0) s = vram_ddp_clip_grad_norm(ddp, o.clip, &norm);
            if (s == VRAM_OK) s = vram_ddp_step(ddp, opt);
        } else if (s == VRAM_OK) { /* clipping folded into the update where it can be */
            s = o.clip > 0 ? vram_optimizer_clip_step(opt, o.clip, &norm) : vram_optimizer_step(opt);
        }
        if (s == VRAM_OK && scaler) s = vram_grad_scaler_update(scaler, NULL);
        if (s == VRAM_OK) s = vram_runtime_sync(rt); /* the step's GPU work done (and its errors seen) */
        if (s != VRAM_OK) {
            char what[64];
            snprintf(what, sizeof what, "training step %d", step);
            progress_end(&prog);
            rc = fail(a, s, what);
            free(step_ms);
            goto done;
        }
        double dt = now_s() - t0;
        step_ms[step - first_step] = dt * 1e3;
        last_loss = loss_sum / o.accum;
        if (vram_train_dist_mean(&o.dist, &last_loss)) { /* (the loss of the whole batch) */
            rc = 1;
            free(step_ms);
            goto done;
        }
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        progress_step(&prog, step, o.steps, last_loss, (double)o.batch * o.accum * o.gpt.context / dt, dt,
                      st.allocated_bytes[VRAM_POOL_ALL].peak);
        vram_train_dist_step(&o.dist, step, dt, !prog.tty && (step % prog.every == 0 || step == o.steps));
        if (o.eval_every && (step % o.eval_every == 0 || step == o.steps)) {
            s = evaluate(g, data, rt, &o, &last_val);
            if (s != VRAM_OK) {
                progress_end(&prog);
                rc = fail(a, s, "evaluating");
                free(step_ms);
                goto done;
            }
            progress_keep(&prog);
            printf("eval step %d/%d | val loss %.4f (no_grad, %s)\n", step, o.steps, last_val,
                   plural(o.eval_batches, "batch", b1, sizeof b1));
        }
        if (o.save && ((o.save_every && step % o.save_every == 0) || step == o.steps) &&
            vram_train_save(o.save, g, opt, data, step)) {
            rc = 1;
            free(step_ms);
            goto done;
        }
        fflush(stdout);
    }
    progress_end(&prog);
    double total = now_s() - t_start;
    printf("done: %s in %.1f s; final train loss %.4f%s", plural(o.steps - first_step + 1, "step", b1, sizeof b1), total,
           last_loss, isnan(last_val) ? "" : ", val loss ");
    if (!isnan(last_val)) printf("%.4f", last_val);
    printf(" (unigram entropy %.4f nats)\n", unigram);
    if (o.steps >= first_step) {
        /* median step time without the first step (which also allocates the optimizer state) */
        int ran = o.steps - first_step + 1;
        int n = ran > 1 ? ran - 1 : 1;
        double *t = ran > 1 ? step_ms + 1 : step_ms;
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        vram_stats st;
        vram_allocator_get_stats(a, &st);
        printf("summary: median step %.1f ms, %.0f tokens/s; peak allocated %s, peak reserved %s\n", med,
               (double)o.batch * o.accum * o.gpt.context / (med * 1e-3),
               mib(st.allocated_bytes[VRAM_POOL_ALL].peak, b1, sizeof b1),
               mib(st.reserved_bytes[VRAM_POOL_ALL].peak, (char[32]){0}, 32));
        print_mfu(&o, vram_param_list_numel(params), med, vram_runtime_device_name(rt));
    }
    char attn[512];
    if (vram_runtime_attention_report(rt, attn, sizeof attn)) printf("attention: %s\n", attn);
    if (scaler)
        printf("loss scaling: scale %g at the end, %lld of %d steps skipped for inf/NaN gradients\n",
               vram_grad_scaler_scale(scaler), (long long)vram_grad_scaler_skipped(scaler), o.steps - first_step + 1);
    free(step_ms);
    if (vram_train_dist_report(&o.dist, a, opt)) rc = 1;
    if (o.report) {
        printf("\n");
        char *sum = NULL;
        if (vram_memory_summary(a, 0, &sum) == VRAM_OK) {
            fputs(sum, stdout);
            free(sum);
        } else {
            printf("(memory summary failed: %s)\n", vram_last_error());
        }
        print_categories(a, fwd_tags);
    }
done:
    if (rc) vram_train_dist_abort(&o.dist); /* (no rank waits for this one) */
    vram_train_dist_end(&o.dist);
    vram_grad_scaler_free(scaler);
    vram_optimizer_free(opt);
    vram_gpt_free(g);
    vram_runtime_free(rt);
    if (tracing) { /* after everything is freed: the trace ends with nothing live */
        char source[512];
        trace_source(argc, argv, source, sizeof source);
        if (vram_train_trace_write(a, o.trace, source) && !rc) rc = 1;
    }
    if (a) vram_allocator_destroy(a);
    vram_device_close(dev);
    vram_text_data_close(data);
    return rc;
}
