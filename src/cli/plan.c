/* plan.c — `vram plan`: the memory a `vram train` configuration will need, predicted before
 * running it, by category; the largest batch that fits (--fit); what would fit when it does not.
 *
 * It takes vram train's flags for the model and the step (so a train command line can be
 * planned as it is), plus --model gpt:LxW[xH], --fit, --max-batch, --json. The prediction is
 * vram_plan_run (plan.h): the runtime's own step on a shape-only runtime over the caching
 * allocator on a simulated device of --capacity bytes, so rounding, caching and fragmentation
 * are in it. Exit status: 0 it fits (with --fit: some batch fits), 1 it does not (the report
 * says where it failed and plans the remedies), 2 bad input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vram/plan.h"

typedef struct plan_opts {
    vram_plan_config cfg;
    int fit, json, max_batch;
    vram_dtype precision; /* applied after the flags: --model resets the model's fields */
    int residual;         /* --residual: 1 fp32, 0 lowp, -1 not given */
    int keep;             /* --recompute's VRAM_GPT_KEEP_* bits, applied after them too */
    int keep_lowp;        /* --lowp-weights keep */
    int activation;       /* --activation: VRAM_ACT_*, or -1: the model's */
} plan_opts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: vram plan [OPTIONS]\n"
            "Predicts the memory `vram train` with the same flags will need: peak allocated and peak reserved, by\n"
            "category, from the runtime's own allocation stream replayed through the allocator (no arithmetic).\n\n"
            "  --model NAME         as vram train: tiny, gpt2, gpt2-medium, gpt2-large, gpt2-xl, or gpt:LxW[xH]\n"
            "                       (layers x width [x heads])\n"
            "  --layers N --heads N --width N --context N --vocab N --dropout P   as vram train\n"
            "  --device DEV         cpu (default) or cuda[:N]: the GPU runtime, on a simulated CUDA device of\n"
            "                       --capacity (default 80GiB) with the GPU's chunks and the runtime's own blocks\n"
            "  --batch N --accum K  sequences per micro-batch, micro-batches per step (default 16, 1)\n"
            "  --optimizer NAME     sgd | momentum | adam | adamw | adagrad (default adamw)\n"
            "  --checkpoint         checkpoint every transformer block\n"
            "  --recompute WHAT     as vram train: gelu,layernorm (default), gelu, layernorm, none or block\n"
            "  --clip X             as vram train (default 1.0; allocates nothing)\n"
            "  --precision P        fp32 (default), or bf16 / fp16 (mixed precision, with --device cuda)\n"
            "  --residual WHERE     as vram train: lowp (default) or fp32 (the residual stream kept fp32)\n"
            "  --lowp-weights HOW   as vram train: cast (default) or keep\n"
            "  --activation A       as vram train: the model's (gpt2: gelu_tanh), or gelu_erf\n"
            "  --threads N          matrix-product threads of the run planned (default: online CPUs, as vram train)\n"
            "  --capacity SIZE      device memory, e.g. 24GiB (default: physical memory, as vram train)\n"
            "  --steps N            plan exactly N steps (default: until a step changes nothing)\n"
            "  --fit                print the largest batch that fits in --capacity\n"
            "  --max-batch N        the largest batch --fit tries (default 1048576)\n"
            "  --json               one JSON object\n"
            "  --lr, --seed, --data are accepted and ignored (they change no allocation)\n");
}

enum { F_INT, F_DOUBLE, F_SIZE, F_OPTIM, F_MODEL, F_PRECISION, F_DEVICE, F_RECOMPUTE, F_LOWP_WEIGHTS, F_ACTIVATION, F_IGNORED,
       F_RESIDUAL };

typedef struct flag {
    const char *name;
    int kind;
    void *dst;
    double lo, hi;
} flag;

static int set_flag(const flag *f, const char *v, plan_opts *o) {
    char *end, err[200];
    errno = 0;
    switch (f->kind) {
    case F_INT: {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < f->lo || x > f->hi) break;
        *(int *)f->dst = (int)x;
        return 0;
    }
    case F_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= f->lo && x <= f->hi)) break;
        *(double *)f->dst = x;
        return 0;
    }
    case F_SIZE:
        if (vram_parse_size(v, &o->cfg.capacity) != VRAM_OK || o->cfg.capacity == 0) {
            fprintf(stderr, "vram plan: --capacity: '%s' is not a size above zero (e.g. 24GiB)\n", v);
            return 2;
        }
        return 0;
    case F_OPTIM: {
        vram_optim_config oc;
        if (vram_optim_config_parse(v, &oc) != VRAM_OK) {
            fprintf(stderr, "vram plan: --optimizer: %s\n", vram_last_error());
            return 2;
        }
        o->cfg.optimizer = oc.kind;
        o->cfg.momentum = oc.momentum;
        return 0;
    }
    case F_MODEL:
        if (vram_cli_model_spec(v, &o->cfg.gpt, err, sizeof err)) {
            fprintf(stderr, "vram plan: --model: %s\n", err);
            return 2;
        }
        return 0;
    case F_PRECISION:
        if (!strcmp(v, "f32") || !strcmp(v, "fp32")) o->precision = VRAM_DTYPE_F32;
        else if (!strcmp(v, "bf16")) o->precision = VRAM_DTYPE_BF16;
        else if (!strcmp(v, "fp16") || !strcmp(v, "f16")) o->precision = VRAM_DTYPE_F16;
        else {
            fprintf(stderr, "vram plan: --precision %s: not fp32, bf16 or fp16\n", v);
            return 2;
        }
        return 0;
    case F_DEVICE:
        if (!strcmp(v, "cpu") || !strcmp(v, "host")) o->cfg.gpu = 0;
        else if (!strcmp(v, "cuda") || (!strncmp(v, "cuda:", 5) && v[5] >= '0' && v[5] <= '9')) o->cfg.gpu = 1;
        else {
            fprintf(stderr, "vram plan: --device %s: not cpu or cuda[:N]\n", v);
            return 2;
        }
        return 0;
    case F_RECOMPUTE:
        if (vram_cli_recompute(v, &o->keep, &o->cfg.checkpoint)) {
            fprintf(stderr, "vram plan: --recompute: '%s' is not gelu,layernorm, gelu, layernorm, none or block\n", v);
            return 2;
        }
        return 0;
    case F_RESIDUAL:
        if (vram_cli_residual(v, &o->residual)) {
            fprintf(stderr, "vram plan: --residual: '%s' is not fp32 or lowp\n", v);
            return 2;
        }
        return 0;
    case F_LOWP_WEIGHTS:
        if (vram_cli_lowp_weights(v, &o->keep_lowp)) {
            fprintf(stderr, "vram plan: --lowp-weights: '%s' is not cast or keep\n", v);
            return 2;
        }
        return 0;
    case F_ACTIVATION:
        if (vram_cli_activation(v, &o->activation)) {
            fprintf(stderr, "vram plan: --activation: '%s' is not gelu_tanh or gelu_erf\n", v);
            return 2;
        }
        return 0;
    case F_IGNORED:
        return 0;
    }
    if (f->kind == F_INT)
        fprintf(stderr, "vram plan: %s needs an integer in [%.0f, %.0f], not '%s'\n", f->name, f->lo, f->hi, v);
    else
        fprintf(stderr, "vram plan: %s needs a number in [%g, %g], not '%s'\n", f->name, f->lo, f->hi, v);
    return 2;
}

/* Returns 0 to plan, 1 when --help was printed, 2 on bad usage. */
static int parse(int argc, char **argv, plan_opts *o) {
    memset(o, 0, sizeof *o);
    o->precision = VRAM_DTYPE_F32;
    o->activation = -1;
    vram_plan_config_default(&o->cfg);
    o->max_batch = 1 << 20;
    o->residual = -1;
    vram_plan_config *c = &o->cfg;
    /* bounds as vram train's */
    const flag flags[] = {
        {"--batch", F_INT, &c->batch, 1, 1e9},         {"--accum", F_INT, &c->accum, 1, 1e9},
        {"--steps", F_INT, &c->steps, 1, VRAM_PLAN_MAX_STEPS * 64}, {"--layers", F_INT, &c->gpt.layers, 1, 4096},
        {"--heads", F_INT, &c->gpt.heads, 1, 4096},    {"--width", F_INT, &c->gpt.width, 1, 1 << 20},
        {"--context", F_INT, &c->gpt.context, 1, 1 << 20}, {"--threads", F_INT, &c->threads, 1, 64},
        {"--max-batch", F_INT, &o->max_batch, 1, 1e9}, {"--dropout", F_DOUBLE, &c->gpt.dropout, 0, 0.99},
        {"--clip", F_DOUBLE, &c->clip, 0, 1e9},        {"--capacity", F_SIZE, NULL, 0, 0},
        {"--optimizer", F_OPTIM, NULL, 0, 0},          {"--model", F_MODEL, NULL, 0, 0},
        {"--precision", F_PRECISION, NULL, 0, 0},      {"--lr", F_IGNORED, NULL, 0, 0},
        {"--vocab", F_INT, &c->gpt.vocab, 256, 1 << 24}, {"--device", F_DEVICE, NULL, 0, 0},
        {"--residual", F_RESIDUAL, NULL, 0, 0},
        {"--seed", F_IGNORED, NULL, 0, 0},             {"--data", F_IGNORED, NULL, 0, 0},
        {"--recompute", F_RECOMPUTE, NULL, 0, 0},      {"--lowp-weights", F_LOWP_WEIGHTS, NULL, 0, 0},
        {"--activation", F_ACTIVATION, NULL, 0, 0},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        int *sw = !strcmp(a, "--fit")          ? &o->fit
                  : !strcmp(a, "--json")       ? &o->json
                  : !strcmp(a, "--checkpoint") ? &c->checkpoint
                                               : NULL;
        if (sw) {
            *sw = 1;
            continue;
        }
        const flag *f = NULL;
        for (size_t k = 0; k < sizeof flags / sizeof *flags && !f; k++)
            if (!strcmp(a, flags[k].name)) f = &flags[k];
        if (!f) {
            fprintf(stderr, "vram plan: unknown option '%s' (see vram plan --help)\n", a);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vram plan: %s needs a value\n", a);
            return 2;
        }
        int rc = set_flag(f, argv[++i], o);
        if (rc) return rc;
    }
    c->gpt.precision = o->precision;
    c->gpt.residual_f32 = o->residual == 1;
    c->gpt.keep = o->keep;
    c->gpt.keep_lowp_weights = o->keep_lowp;
    if (o->activation >= 0) c->gpt.activation = o->activation;
    if (o->keep_lowp && o->precision == VRAM_DTYPE_F32) {
        fprintf(stderr, "vram plan: --lowp-weights keep keeps 16-bit weight copies for mixed precision: add --precision "
                        "bf16 or fp16\n");
        return 2;
    }
    if (o->residual == 0 && o->precision == VRAM_DTYPE_F32) {
        fprintf(stderr, "vram plan: --residual lowp is for mixed precision: add --precision bf16 or fp16\n");
        return 2;
    }
    if (o->precision != VRAM_DTYPE_F32 && !c->gpu) {
        fprintf(stderr, "vram plan: --precision %s is mixed precision, which runs on the GPU: add --device cuda\n",
                o->precision == VRAM_DTYPE_BF16 ? "bf16" : "fp16");
        return 2;
    }
    if (c->gpt.width % c->gpt.heads) {
        fprintf(stderr, "vram plan: width %d is not a multiple of %d heads\n", c->gpt.width, c->gpt.heads);
        return 2;
    }
    return 0;
}

static const char *mib(int64_t b, char *buf, size_t cap) {
    snprintf(buf, cap, "%.2f MiB", (double)b / (1024.0 * 1024.0));
    return buf;
}

static const char *optim_name(const vram_plan_config *c) {
    return c->optimizer == VRAM_OPTIM_SGD && c->momentum > 0 ? "momentum" : vram_optim_kind_name(c->optimizer);
}

static void print_header(const vram_plan_config *c, const vram_plan_result *r) {
    char b[32];
    printf("vram plan: GPT %d layers, %d heads, width %d, context %d, vocab %d: %lld parameters\n", c->gpt.layers,
           c->gpt.heads, c->gpt.width, c->gpt.context, c->gpt.vocab, (long long)r->parameters);
    char th[16];
    snprintf(th, sizeof th, "%d", c->threads);
    printf("  batch %d x accum %d, %s, checkpoint %s, matrix-product threads %s; device of %s\n", c->batch, c->accum,
           optim_name(c), c->checkpoint ? "every block" : "off", c->threads ? th : "as online CPUs",
           mib((int64_t)r->capacity, b, sizeof b));
}

static const char *where(const vram_plan_moment *m, char *buf, size_t cap) {
    if (m->micro && m->phase != VRAM_PLAN_OPTIMIZER)
        snprintf(buf, cap, "step %d, micro-batch %d, %s", m->step, m->micro, vram_plan_phase_name(m->phase));
    else
        snprintf(buf, cap, "step %d, %s", m->step, vram_plan_phase_name(m->phase));
    return buf;
}

static void print_text(const vram_plan_config *c, const vram_plan_result *r) {
    char b1[32], b2[32], b3[32], w[96];
    print_header(c, r);
    printf("  planned %d step%s in %.3f s (%llu allocations, nothing computed); ", r->steps, r->steps == 1 ? "" : "s",
           r->seconds, (unsigned long long)r->allocations);
    if (r->steady_from)
        printf("settled after step %d: the peaks hold for a run of %d steps or more\n", r->steady_from, r->steady_from);
    else
        printf("not settled: the peaks are those of exactly %d steps\n", r->steps);
    printf("\npeak reserved   %14s   (%s)\n", mib(r->peak_reserved, b1, sizeof b1),
           where(&r->at_peak_reserved, w, sizeof w));
    printf("peak allocated  %14s   (%s)\n", mib(r->peak_allocated, b1, sizeof b1),
           where(&r->at_peak_allocated, w, sizeof w));
    printf("\n  %-18s %14s %18s %18s\n", "category", "own peak", "at peak allocated", "at peak reserved");
    for (int i = 0; i < VRAM_CLI_CATEGORIES; i++) {
        vram_tag t = vram_cli_categories[i].tag;
        printf("  %-18s %14s %18s %18s\n", vram_cli_categories[i].label, mib(r->tag_peak[t], b1, sizeof b1),
               mib(r->at_peak_allocated.tags[t], b2, sizeof b2), mib(r->at_peak_reserved.tags[t], b3, sizeof b3));
    }
    printf("  %-18s %14s %18s %18s\n", "reserved but free", "",
           mib(r->at_peak_allocated.reserved - r->at_peak_allocated.allocated, b2, sizeof b2),
           mib(r->at_peak_reserved.reserved - r->at_peak_reserved.allocated, b3, sizeof b3));
    printf("  %-18s %14s %18s %18s\n", "reserved", "", mib(r->at_peak_allocated.reserved, b2, sizeof b2),
           mib(r->at_peak_reserved.reserved, b3, sizeof b3));
}

static void json_moment(const char *key, const vram_plan_moment *m) {
    printf(",\"%s\":{\"step\":%d,\"micro_batch\":%d,\"phase\":\"%s\",\"allocated\":%lld,\"reserved\":%lld", key, m->step,
           m->micro, vram_plan_phase_name(m->phase), (long long)m->allocated, (long long)m->reserved);
    for (int i = 0; i < VRAM_CLI_CATEGORIES; i++)
        printf(",\"%s\":%lld", vram_cli_categories[i].key, (long long)m->tags[vram_cli_categories[i].tag]);
    printf("}");
}

static void print_json(const vram_plan_config *c, const vram_plan_result *r, int fit_batch, int fit_tries) {
    printf("{\"model\":{\"layers\":%d,\"heads\":%d,\"width\":%d,\"context\":%d,\"vocab\":%d,\"parameters\":%lld}",
           c->gpt.layers, c->gpt.heads, c->gpt.width, c->gpt.context, c->gpt.vocab, (long long)r->parameters);
    printf(",\"batch\":%d,\"accum\":%d,\"optimizer\":\"%s\",\"checkpoint\":%s,\"threads\":%d,\"capacity\":%llu", c->batch,
           c->accum, optim_name(c), c->checkpoint ? "true" : "false", c->threads, (unsigned long long)r->capacity);
    if (fit_batch >= 0) printf(",\"fit_batch\":%d,\"fit_tries\":%d", fit_batch, fit_tries);
    printf(",\"fits\":%s,\"steps\":%d,\"steady_from\":%d,\"allocations\":%llu,\"seconds\":%.6f", r->oom ? "false" : "true",
           r->steps, r->steady_from, (unsigned long long)r->allocations, r->seconds);
    printf(",\"peak_allocated\":%lld,\"peak_reserved\":%lld,\"peak_requested\":%lld", (long long)r->peak_allocated,
           (long long)r->peak_reserved, (long long)r->peak_requested);
    printf(",\"category_peaks\":{");
    for (int i = 0; i < VRAM_CLI_CATEGORIES; i++)
        printf("%s\"%s\":%lld", i ? "," : "", vram_cli_categories[i].key,
               (long long)r->tag_peak[vram_cli_categories[i].tag]);
    printf("}");
    json_moment("at_peak_allocated", &r->at_peak_allocated);
    json_moment("at_peak_reserved", &r->at_peak_reserved);
    if (r->oom) {
        json_moment("at_oom", &r->at_oom);
        printf(",\"oom\":");
        vram_json_write_string(stdout, r->oom_detail, SIZE_MAX);
    }
    printf("}\n");
}

/* A plan that did not fit: where it failed and what would. */
static int report_oom(const plan_opts *o, const vram_plan_result *r) {
    char b[32], w[96];
    if (o->json) {
        print_json(&o->cfg, r, -1, 0);
    } else {
        print_header(&o->cfg, r);
        printf("\ndoes not fit in %s: out of memory at %s: %s\n", mib((int64_t)r->capacity, b, sizeof b),
               where(&r->at_oom, w, sizeof w), r->oom_detail);
    }
    vram_cli_explain_oom(o->json ? stderr : stdout, "vram plan", &r->at_oom, &o->cfg,
                         r->at_oom.step ? NULL : vram_cli_model_too_big);
    return 1;
}

static int run_fit(const plan_opts *o) {
    int best = 0, tries = 0;
    vram_plan_result r;
    vram_status s = vram_plan_fit(&o->cfg, o->max_batch, &best, &r, &tries);
    char b1[32], b2[32];
    if (s == VRAM_ERR_OUT_OF_MEMORY) {
        fprintf(stderr, "vram plan: --fit: %s\n", vram_last_error());
        vram_plan_config one = o->cfg;
        one.batch = 1;
        vram_cli_explain_oom(stderr, "vram plan", &r.at_oom, &one, r.at_oom.step ? NULL : vram_cli_model_too_big);
        return 1;
    }
    if (s != VRAM_OK) {
        fprintf(stderr, "vram plan: %s\n", vram_last_error());
        return 2;
    }
    vram_plan_config at = o->cfg;
    at.batch = best;
    if (o->json) {
        print_json(&at, &r, best, tries);
        return 0;
    }
    printf("largest batch that fits in %s: %d (accum %d: %lld sequences per step), peak reserved %s, %d plans\n",
           mib((int64_t)r.capacity, b1, sizeof b1), best, at.accum, (long long)best * at.accum,
           mib(r.peak_reserved, b2, sizeof b2), tries);
    if (best == o->max_batch) printf("(the --max-batch limit: larger batches were not tried)\n");
    printf("\n");
    print_text(&at, &r);
    return 0;
}

int vram_cmd_plan(int argc, char **argv) {
    plan_opts o;
    int pr = parse(argc, argv, &o);
    if (pr == 1) return 0;
    if (pr == 2) return 2;
    if (vram_cli_check_conf("vram plan", NULL)) return 2;
    if (o.fit) return run_fit(&o);
    vram_plan_result r;
    vram_status s = vram_plan_run(&o.cfg, &r);
    if (s == VRAM_ERR_OUT_OF_MEMORY) return report_oom(&o, &r);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram plan: %s\n", vram_last_error());
        return 2;
    }
    if (o.json)
        print_json(&o.cfg, &r, -1, 0);
    else
        print_text(&o.cfg, &r);
    return 0;
}
