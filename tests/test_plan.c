/* test_plan.c — the memory planner (plan.h) and the shape-only runtime under it.
 *
 * What is checked: a shape-only runtime runs on a simulated device (no memory behind it) and
 * allocates what the CPU runtime allocates, op for op (a forward and backward on both, block
 * statistics compared); the planned categories follow from the model and the optimizer (the
 * parameters' bytes computed here from their shapes; Adam/AdamW state 2x, Adagrad and momentum
 * 1x, SGD 0); checkpointing cuts activations; at the peaks the categories add up to the
 * allocated bytes; a plan that does not fit fails at a moment whose categories add up too;
 * --fit's batch fits and the next does not; the remedies; bad configurations.
 * (tests/plan_check.py compares plans with real `vram train` runs.)
 */
#include <string.h>

#include "check.h"
#include "vram/plan.h"

static vram_plan_config small_config(void) {
    vram_plan_config c;
    vram_plan_config_default(&c);
    c.gpt = (vram_gpt_config){.layers = 2, .heads = 2, .width = 64, .vocab = 256, .context = 32, .dropout = 0};
    c.batch = 8;
    c.threads = 1;
    c.capacity = 1ull << 30;
    return c;
}

static int64_t sum_tags(const vram_plan_moment *m) {
    int64_t s = 0;
    for (int t = 0; t < VRAM_TAG_BUILTIN_COUNT; t++) s += m->tags[t];
    return s;
}

/* The bytes the allocator gives the model's parameters: each tensor's bytes rounded up to the
 * allocator's 512-byte blocks (all of these are small-pool requests). */
static int64_t param_bytes(const vram_gpt_config *g) {
    int64_t C = g->width, V = g->vocab, T = g->context, total = 0;
    int64_t sizes[] = {V * C, T * C};
    for (int i = 0; i < 2; i++) total += (sizes[i] * 4 + 511) / 512 * 512;
    int64_t block[] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    for (int l = 0; l < g->layers; l++)
        for (size_t i = 0; i < sizeof block / sizeof *block; i++) total += (block[i] * 4 + 511) / 512 * 512;
    total += 2 * ((C * 4 + 511) / 512 * 512) + (V * C * 4 + 511) / 512 * 512; /* ln_f, lm_head */
    return total;
}

/* The shape-only runtime allocates as the CPU runtime does: the same forward and backward on a
 * host device and on a simulated one leave the same allocator statistics. */
static void test_shape_only_matches_cpu(void) {
    vram_stats st[1];
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_gpt *g = NULL;
    vram_optimizer *opt = NULL;
    CHECK_OK(vram_device_open("host:1GiB", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &a));
    CHECK_OK(vram_runtime_new(a, 1, &rt));
    vram_gpt_config gc = {.layers = 2, .heads = 2, .width = 64, .vocab = 256, .context = 32, .dropout = 0};
    CHECK_OK(vram_gpt_new(rt, &gc, &g));
    vram_param_list *params = vram_gpt_params(g);
    vram_optim_config oc;
    vram_optim_config_parse("adamw", &oc);
    CHECK_OK(vram_optimizer_new(rt, params, &oc, &opt));
    int64_t shape[2] = {8, 32};
    vram_tensor *ids = NULL, *tg = NULL, *loss = NULL;
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, &ids));
    CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, &tg));
    vram_param_list_zero_grad(params, 1);
    CHECK_OK(vram_gpt_forward(g, ids, tg, 1, NULL, &loss));
    vram_tensor_free(ids);
    vram_tensor_free(tg);
    CHECK_OK(vram_backward(loss, NULL));
    vram_tensor_free(loss);
    CHECK_OK(vram_clip_grad_norm(params, 1.0, NULL));
    CHECK_OK(vram_optimizer_step(opt));
    vram_allocator_get_stats(a, &st[0]);
    vram_optimizer_free(opt);
    vram_gpt_free(g);
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);

    vram_plan_config c = small_config();
    c.steps = 1;
    vram_plan_result r;
    CHECK_OK(vram_plan_run(&c, &r));
    /* (the CPU run zero-filled its ids, valid token ids, with vram_tensor_new where the plan
     * takes vram_tensor_empty as vram train's batches do: the same blocks either way) */
    CHECK(r.peak_allocated == st[0].allocated_bytes[VRAM_POOL_ALL].peak, "peak allocated %lld planned, %lld on the CPU",
          (long long)r.peak_allocated, (long long)st[0].allocated_bytes[VRAM_POOL_ALL].peak);
    CHECK(r.peak_reserved == st[0].reserved_bytes[VRAM_POOL_ALL].peak, "peak reserved %lld planned, %lld on the CPU",
          (long long)r.peak_reserved, (long long)st[0].reserved_bytes[VRAM_POOL_ALL].peak);
    for (int t = 0; t < VRAM_TAG_BUILTIN_COUNT; t++)
        CHECK(r.tag_peak[t] == st[0].tags[t].allocated_bytes.peak, "tag %d: peak %lld planned, %lld on the CPU", t,
              (long long)r.tag_peak[t], (long long)st[0].tags[t].allocated_bytes.peak);
    CHECK(r.allocations > 100, "%llu allocations observed", (unsigned long long)r.allocations);
}

static void test_categories(void) {
    vram_plan_config c = small_config();
    vram_plan_result r;
    CHECK_OK(vram_plan_run(&c, &r));
    int64_t pb = param_bytes(&c.gpt);
    CHECK(r.tag_peak[VRAM_TAG_PARAMETER] == pb, "parameters %lld, expected %lld", (long long)r.tag_peak[VRAM_TAG_PARAMETER],
          (long long)pb);
    CHECK(r.tag_peak[VRAM_TAG_GRADIENT] == pb, "gradients %lld", (long long)r.tag_peak[VRAM_TAG_GRADIENT]);
    CHECK(r.tag_peak[VRAM_TAG_OPTIMIZER_STATE] == 2 * pb, "adamw state %lld", (long long)r.tag_peak[VRAM_TAG_OPTIMIZER_STATE]);
    CHECK(r.tag_peak[VRAM_TAG_ACTIVATION] > 0 && r.tag_peak[VRAM_TAG_OTHER] == 0, "activations %lld",
          (long long)r.tag_peak[VRAM_TAG_ACTIVATION]);
    CHECK(sum_tags(&r.at_peak_allocated) == r.peak_allocated, "categories at the peak: %lld of %lld",
          (long long)sum_tags(&r.at_peak_allocated), (long long)r.peak_allocated);
    CHECK(r.at_peak_reserved.reserved == r.peak_reserved && sum_tags(&r.at_peak_reserved) == r.at_peak_reserved.allocated,
          "at peak reserved");
    CHECK(r.peak_reserved >= r.peak_allocated && r.peak_allocated >= r.peak_requested, "peaks in order");
    CHECK(r.steady_from >= 1 && r.steps == r.steady_from + 1, "settled after %d of %d steps", r.steady_from, r.steps);
    CHECK(r.at_peak_allocated.step >= 1 && r.at_peak_allocated.phase != VRAM_PLAN_SETUP, "peak in a step");
    int64_t C = c.gpt.width;
    int64_t count = 256 * C + 32 * C + c.gpt.layers * (12 * C * C + 13 * C) + 2 * C + 256 * C;
    CHECK(r.parameters == count, "parameter count %lld, expected %lld", (long long)r.parameters, (long long)count);

    static const struct {
        vram_optim_kind kind;
        double momentum;
        int states;
    } opts[] = {{VRAM_OPTIM_SGD, 0, 0}, {VRAM_OPTIM_SGD, 0.9, 1}, {VRAM_OPTIM_ADAGRAD, 0, 1}, {VRAM_OPTIM_ADAM, 0, 2}};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        vram_plan_config o = c;
        o.optimizer = opts[i].kind;
        o.momentum = opts[i].momentum;
        vram_plan_result ro;
        CHECK_OK(vram_plan_run(&o, &ro));
        CHECK(ro.tag_peak[VRAM_TAG_OPTIMIZER_STATE] == opts[i].states * pb, "%s (momentum %g): state %lld",
              vram_optim_kind_name(opts[i].kind), opts[i].momentum, (long long)ro.tag_peak[VRAM_TAG_OPTIMIZER_STATE]);
    }
    vram_plan_config k = c;
    k.checkpoint = 1;
    vram_plan_result rk;
    CHECK_OK(vram_plan_run(&k, &rk));
    CHECK(rk.tag_peak[VRAM_TAG_ACTIVATION] < r.tag_peak[VRAM_TAG_ACTIVATION], "checkpointing: activations %lld vs %lld",
          (long long)rk.tag_peak[VRAM_TAG_ACTIVATION], (long long)r.tag_peak[VRAM_TAG_ACTIVATION]);
    /* accumulation: micro-batches of 4 peak at about half the activations of 8 */
    vram_plan_config acc = c;
    acc.batch = 4;
    acc.accum = 2;
    vram_plan_result ra;
    CHECK_OK(vram_plan_run(&acc, &ra));
    CHECK(ra.tag_peak[VRAM_TAG_ACTIVATION] * 10 < r.tag_peak[VRAM_TAG_ACTIVATION] * 6, "accum: activations %lld vs %lld",
          (long long)ra.tag_peak[VRAM_TAG_ACTIVATION], (long long)r.tag_peak[VRAM_TAG_ACTIVATION]);
}

static void test_oom_and_fit(void) {
    vram_plan_config c = small_config();
    vram_plan_result r;
    CHECK_OK(vram_plan_run(&c, &r));
    /* a capacity below the planned peak reserved: out of memory, where and with what */
    vram_plan_config tight = c;
    tight.capacity = 4ull << 20;
    tight.batch = 64;
    vram_plan_result rt;
    CHECK(vram_plan_run(&tight, &rt) == VRAM_ERR_OUT_OF_MEMORY, "tight capacity fails");
    CHECK(rt.oom && rt.at_oom.step >= 1 && sum_tags(&rt.at_oom) == rt.at_oom.allocated, "oom at step %d, %lld of %lld",
          rt.at_oom.step, (long long)sum_tags(&rt.at_oom), (long long)rt.at_oom.allocated);
    CHECK(rt.at_oom.reserved <= (int64_t)tight.capacity && strstr(rt.oom_detail, "out of memory"), "oom detail '%s'",
          rt.oom_detail);

    vram_plan_config f = c;
    f.capacity = 24ull << 20;
    int best = 0, tries = 0;
    vram_plan_result at;
    CHECK_OK(vram_plan_fit(&f, 1 << 20, &best, &at, &tries));
    CHECK(best > 1 && tries > 2 && tries < 40, "fit: batch %d in %d plans", best, tries);
    CHECK(at.peak_reserved <= (int64_t)f.capacity && !at.oom, "fit's plan fits: %lld", (long long)at.peak_reserved);
    f.batch = best;
    CHECK_OK(vram_plan_run(&f, &r));
    f.batch = best + 1;
    CHECK(vram_plan_run(&f, &r) == VRAM_ERR_OUT_OF_MEMORY, "batch %d does not fit", best + 1);
    int capped = 0;
    CHECK_OK(vram_plan_fit(&f, 3, &capped, NULL, NULL));
    CHECK(capped == 3, "--max-batch 3: %d", capped);
    f.capacity = 2ull << 20; /* below the model's own state */
    CHECK(vram_plan_fit(&f, 1 << 20, &best, &at, &tries) == VRAM_ERR_OUT_OF_MEMORY && at.oom,
          "capacity too small for batch 1");
    CHECK(strstr(vram_last_error(), "batch 1 does not fit") != NULL, "message: %s", vram_last_error());
}

static void test_remedies(void) {
    vram_plan_config c = small_config();
    c.batch = 12;
    c.capacity = 8ull << 20;
    vram_plan_remedy rem[8];
    int n = vram_plan_remedies(&c, rem, 8);
    CHECK(n == 5, "%d remedies", n);
    const char *names[] = {"batch halved", "gradient accumulation (2 micro-batches)", "checkpointing",
                           "adagrad instead of adamw", "sgd instead of adamw"};
    for (int i = 0; i < n && i < 5; i++) {
        CHECK(!strcmp(rem[i].name, names[i]), "remedy %d: %s", i, rem[i].name);
        CHECK(rem[i].peak_reserved > 0, "%s: peak %lld", rem[i].name, (long long)rem[i].peak_reserved);
        CHECK(!rem[i].fits || (rem[i].peak_reserved <= (int64_t)c.capacity && !rem[i].result.oom), "%s fits", rem[i].name);
    }
    CHECK(rem[1].config.batch == 6 && rem[1].config.accum == 2 && !strcmp(rem[1].flags, "--batch 6 --accum 2"), "accum %s",
          rem[1].flags);
    /* SGD never keeps more than Adagrad, which never keeps more than AdamW */
    CHECK(rem[4].peak_reserved <= rem[3].peak_reserved, "sgd %lld adagrad %lld", (long long)rem[4].peak_reserved,
          (long long)rem[3].peak_reserved);
    CHECK(n >= 3 && rem[0].config.batch == 6 && rem[2].config.checkpoint, "configs");
    /* a prime batch accumulates in micro-batches of 1 */
    c.batch = 7;
    n = vram_plan_remedies(&c, rem, 2);
    CHECK(n == 2 && rem[1].config.batch == 1 && rem[1].config.accum == 7, "batch 7: %d remedies, %s", n, rem[1].flags);
    /* nothing left to try */
    c.batch = 1;
    c.checkpoint = 1;
    c.optimizer = VRAM_OPTIM_SGD;
    c.momentum = 0;
    CHECK(vram_plan_remedies(&c, rem, 8) == 0, "no remedy for batch 1, checkpointed, plain SGD");
}

/* The GPU runtime's remedies (planned on the simulated device): bf16 for fp32, cast for kept
 * 16-bit weights, recomputation for kept outputs; each planned below what it replaces. */
static void test_gpu_remedies(void) {
    vram_plan_config c = small_config();
    c.gpt = (vram_gpt_config){.layers = 2, .heads = 4, .width = 256, .vocab = 256, .context = 128,
                              .precision = VRAM_DTYPE_F32}; /* activations well above the workspace */
    c.gpu = 1;
    c.batch = 16;
    c.capacity = 256ull << 20; /* cuBLASLt's workspace, 32 MiB, beside the model */
    vram_plan_result base;
    CHECK(vram_plan_run(&c, &base) == VRAM_OK, "fp32 plan: %s", vram_last_error());
    vram_plan_remedy rem[8];
    int n = vram_plan_remedies(&c, rem, 8);
    CHECK(n == 6 && !strcmp(rem[5].name, "mixed precision (bf16)") && !strcmp(rem[5].flags, "--precision bf16") &&
              rem[5].config.gpt.precision == VRAM_DTYPE_BF16,
          "fp32 on the GPU: %d remedies, the last %s", n, n > 0 ? rem[n - 1].name : "");
    CHECK(n == 6 && rem[5].peak_reserved > 0 && rem[5].peak_reserved < base.peak_reserved, "bf16 %lld < fp32 %lld",
          n == 6 ? (long long)rem[5].peak_reserved : -1, (long long)base.peak_reserved);
    c.gpt.precision = VRAM_DTYPE_BF16;
    c.gpt.keep_lowp_weights = 1;
    c.gpt.keep = VRAM_GPT_KEEP_GELU | VRAM_GPT_KEEP_LAYERNORM;
    CHECK(vram_plan_run(&c, &base) == VRAM_OK, "bf16 plan: %s", vram_last_error());
    n = vram_plan_remedies(&c, rem, 8);
    CHECK(n == 7 && !strcmp(rem[5].flags, "--lowp-weights cast") && !rem[5].config.gpt.keep_lowp_weights &&
              !strcmp(rem[6].flags, "--recompute gelu,layernorm") && rem[6].config.gpt.keep == 0,
          "bf16 with kept weights and outputs: %d remedies", n);
    for (int i = 5; i < n && n == 7; i++)
        CHECK(rem[i].peak_reserved > 0 && rem[i].peak_reserved < base.peak_reserved, "%s: %lld < %lld", rem[i].name,
              (long long)rem[i].peak_reserved, (long long)base.peak_reserved);
    c.checkpoint = 1; /* whole blocks recomputed: nothing kept to recompute */
    n = vram_plan_remedies(&c, rem, 8);
    CHECK(n == 5 && !strcmp(rem[n - 1].flags, "--lowp-weights cast"), "checkpointed: %d remedies", n);
}

static void test_bad_input(void) {
    vram_plan_config c = small_config();
    vram_plan_result r;
    c.batch = 0;
    CHECK(vram_plan_run(&c, &r) == VRAM_ERR_INVALID_ARG, "batch 0");
    c = small_config();
    c.gpt.heads = 3;
    CHECK(vram_plan_run(&c, &r) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "heads"), "width 64, 3 heads: %s",
          vram_last_error());
    c = small_config();
    c.capacity = 1ull << 50;
    CHECK(vram_plan_run(&c, &r) == VRAM_ERR_INVALID_ARG, "capacity above the simulated device's");
    CHECK(vram_plan_run(NULL, &r) == VRAM_ERR_INVALID_ARG, "null config");
    CHECK(vram_plan_remedies(NULL, NULL, 1) < 0, "null remedies");
}

int main(void) {
    test_shape_only_matches_cpu();
    test_categories();
    test_oom_and_fit();
    test_remedies();
    test_gpu_remedies();
    test_bad_input();
    return check_done();
}
