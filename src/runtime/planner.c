/* planner.c — the memory planner (plan.h): `vram train`'s step on a shape-only runtime over the
 * caching allocator on a simulated device, the batch search, and the out-of-memory remedies.
 *
 * A plan opens "sim:CAPACITY" and an allocator on it (VRAM_ALLOC_CONF applies, as it does to
 * the run planned), a shape-only runtime (the planner's kernel table, plan_kernels.c), and then
 * does what vram train does, in its order: the model, the optimizer, and per step zero_grad,
 * for each micro-batch the batch's ids and targets, forward with the loss, (the loss scaled by
 * 1/accum), backward, then clipping and the optimizer step. The runtime calls the planner after
 * every allocation (vram_runtime_set_alloc_observer), where it reads the allocator's statistics and keeps the
 * per-category bytes of the first moment allocated and reserved memory peaked; since bytes only
 * grow at an allocation, those are the peaks' own moments. Steps, and micro-batches from the
 * third, repeat the same allocations; once one leaves the allocator's figures as it found them
 * (no device call, the same peaks and current bytes), the rest are taken to repeat it.
 * Planning the GPU runtime (c->gpu) opens "cudasim:CAPACITY" (the CUDA device's chunks and
 * pages, simulated) and the CUDA table's shape-only twin, which also holds the runtime's own
 * blocks; fp16 runs with the loss scaler as vram train does.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"
#include "vram/plan.h"

void vram_plan_config_default(vram_plan_config *c) {
    memset(c, 0, sizeof *c);
    c->gpt = (vram_gpt_config){.layers = 4, .heads = 4, .width = 128, .vocab = 256, .context = 64, .dropout = 0};
    c->batch = 16;
    c->accum = 1;
    c->optimizer = VRAM_OPTIM_ADAMW;
    c->clip = 1.0;
}

const char *vram_plan_phase_name(vram_plan_phase p) {
    static const char *const names[VRAM_PLAN_PHASES] = {"setup", "forward", "backward", "optimizer"};
    return (unsigned)p < VRAM_PLAN_PHASES ? names[p] : "?";
}

/* What the allocation hook needs: where the run is, and the moments kept so far. */
typedef struct plan_watch {
    vram_allocator *a;
    vram_plan_moment now; /* step, micro, phase (bytes filled when read) */
    vram_plan_result *res;
    uint64_t allocations;
} plan_watch;

void vram_plan_moment_read(vram_allocator *a, vram_plan_moment *m) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    for (int t = 0; t < VRAM_TAG_BUILTIN_COUNT; t++) m->tags[t] = st.tags[t].allocated_bytes.current;
    m->allocated = st.allocated_bytes[VRAM_POOL_ALL].current;
    m->reserved = st.reserved_bytes[VRAM_POOL_ALL].current;
}

static void on_alloc(void *ctx, vram_status status) {
    plan_watch *w = ctx;
    w->allocations++;
    vram_plan_moment_read(w->a, &w->now);
    if (status == VRAM_ERR_OUT_OF_MEMORY) { /* the moment of the failure, before the ops unwind */
        if (!w->res->oom) w->res->at_oom = w->now;
        w->res->oom = 1;
        return;
    }
    if (w->now.allocated > w->res->at_peak_allocated.allocated) w->res->at_peak_allocated = w->now;
    if (w->now.reserved > w->res->at_peak_reserved.reserved) w->res->at_peak_reserved = w->now;
}

static vram_status check_config(const vram_plan_config *c) {
    if (c->batch < 1 || c->accum < 1)
        return vram_error(VRAM_ERR_INVALID_ARG, "plan: batch %d and accum %d must be at least 1", c->batch, c->accum);
    if (c->steps < 0 || c->threads < 0)
        return vram_error(VRAM_ERR_INVALID_ARG, "plan: steps %d and threads %d must not be negative", c->steps, c->threads);
    if ((unsigned)c->optimizer > VRAM_OPTIM_ADAGRAD || !(c->momentum >= 0) || !(c->clip >= 0))
        return vram_error(VRAM_ERR_INVALID_ARG, "plan: bad optimizer settings");
    if ((c->gpt.precision == VRAM_DTYPE_BF16 || c->gpt.precision == VRAM_DTYPE_F16) && !c->gpu)
        return vram_error(VRAM_ERR_INVALID_ARG, "plan: mixed precision runs on the GPU only: plan it with the GPU runtime");
    return VRAM_OK;
}

/* One micro-batch as vram train's micro_step does it: ids and targets, forward with the loss,
 * the loss over accum, backward. */
static vram_status micro_step(vram_gpt *g, vram_runtime *rt, const vram_plan_config *c, const vram_tensor *seed,
                              plan_watch *w) {
    int64_t shape[2] = {c->batch, c->gpt.context};
    vram_tensor *ids = NULL, *tg = NULL, *loss = NULL, *scaled = NULL;
    w->now.phase = VRAM_PLAN_FORWARD;
    vram_status s = vram_tensor_empty(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, &ids);
    if (s == VRAM_OK) s = vram_tensor_empty(rt, VRAM_DTYPE_I32, 2, shape, VRAM_TAG_TEMPORARY, &tg);
    if (s == VRAM_OK) s = vram_gpt_forward(g, ids, tg, 1, NULL, &loss);
    vram_tensor_free(ids);
    vram_tensor_free(tg);
    w->now.phase = VRAM_PLAN_BACKWARD;
    if (s == VRAM_OK && c->accum > 1) s = vram_scale(loss, 1.0 / c->accum, &scaled);
    if (s == VRAM_OK) s = vram_backward(scaled ? scaled : loss, seed);
    vram_tensor_free(scaled);
    vram_tensor_free(loss);
    return s;
}

/* The figures a step leaves; two equal in a row mean the allocator has settled. */
typedef struct step_mark {
    int64_t peak_alloc, peak_res, cur_alloc, cur_res;
    uint64_t device_allocs, device_frees;
} step_mark;

static step_mark mark_of(vram_allocator *a) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    return (step_mark){st.allocated_bytes[VRAM_POOL_ALL].peak, st.reserved_bytes[VRAM_POOL_ALL].peak,
                       st.allocated_bytes[VRAM_POOL_ALL].current, st.reserved_bytes[VRAM_POOL_ALL].current,
                       st.num_device_alloc, st.num_device_free};
}

/* A settled step adds no device calls and leaves peaks and current bytes as they were. */
static int settled(const step_mark *before, const step_mark *after) {
    return before->peak_alloc == after->peak_alloc && before->peak_res == after->peak_res &&
           before->cur_alloc == after->cur_alloc && before->cur_res == after->cur_res &&
           after->device_allocs - before->device_allocs == 0 && after->device_frees - before->device_frees == 0;
}

static vram_status train_steps(vram_runtime *rt, vram_gpt *g, vram_optimizer *opt, vram_grad_scaler *scaler,
                               const vram_plan_config *c, plan_watch *w, vram_plan_result *res) {
    vram_param_list *params = vram_gpt_params(g);
    int max = c->steps ? c->steps : VRAM_PLAN_MAX_STEPS;
    step_mark prev = mark_of(w->a);
    vram_status s = VRAM_OK;
    for (int step = 1; step <= max && s == VRAM_OK; step++) {
        w->now.step = step;
        vram_param_list_zero_grad(params, 1);
        step_mark before = mark_of(w->a);
        for (int m = 0; m < c->accum && s == VRAM_OK; m++) {
            w->now.micro = m + 1;
            s = micro_step(g, rt, c, scaler ? vram_grad_scaler_seed(scaler) : NULL, w);
            step_mark after = mark_of(w->a);
            /* The first micro-batch creates the gradients, the second adds to them; from the
             * third on each repeats the one before, so one that changed nothing stands for the
             * rest (a run with --accum 10^9 is planned in a few micro-batches). */
            if (m >= 2 && settled(&before, &after)) break;
            before = after;
        }
        w->now.micro = 0;
        w->now.phase = VRAM_PLAN_OPTIMIZER;
        double norm = 0;
        if (s == VRAM_OK && scaler) s = vram_grad_scaler_unscale(scaler, params);
        if (s == VRAM_OK) s = c->clip > 0 ? vram_optimizer_clip_step(opt, c->clip, &norm) : vram_optimizer_step(opt);
        if (s == VRAM_OK && scaler) s = vram_grad_scaler_update(scaler, NULL);
        if (s != VRAM_OK) break;
        res->steps = step;
        step_mark now = mark_of(w->a);
        /* step 1 creates the optimizer state, so settling is judged from step 2 on */
        if (step >= 2 && settled(&prev, &now)) {
            if (!res->steady_from) res->steady_from = step - 1;
            if (!c->steps) break;
        } else {
            res->steady_from = 0;
        }
        prev = now;
    }
    return s;
}

static uint64_t host_capacity(void) {
    vram_device *host = NULL;
    uint64_t cap = 8ull << 30;
    if (vram_device_open("host", &host) == VRAM_OK) {
        cap = host->capacity;
        vram_device_close(host);
    }
    return cap;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Fills the peaks from the allocator's statistics and notes an out-of-memory failure. */
static void finish(vram_allocator *a, vram_status s, plan_watch *w, vram_plan_result *res) {
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    res->peak_allocated = st.allocated_bytes[VRAM_POOL_ALL].peak;
    res->peak_reserved = st.reserved_bytes[VRAM_POOL_ALL].peak;
    res->peak_requested = st.requested_bytes[VRAM_POOL_ALL].peak;
    for (int t = 0; t < VRAM_TAG_BUILTIN_COUNT; t++) res->tag_peak[t] = st.tags[t].allocated_bytes.peak;
    res->allocations = w->allocations;
    if (s != VRAM_ERR_OUT_OF_MEMORY) res->oom = 0;
    if (s == VRAM_ERR_OUT_OF_MEMORY) {
        if (!res->oom) { /* a failure outside the runtime's tensors: what is left now */
            res->at_oom = w->now;
            vram_plan_moment_read(a, &res->at_oom);
        }
        res->oom = 1;
        snprintf(res->oom_detail, sizeof res->oom_detail, "%s", vram_last_error());
    }
}

vram_status vram_plan_run(const vram_plan_config *c, vram_plan_result *res) {
    if (!c || !res) return vram_error(VRAM_ERR_INVALID_ARG, "plan: null argument");
    memset(res, 0, sizeof *res);
    vram_status s = check_config(c);
    if (s != VRAM_OK) return s;
    double t0 = now_s();
    res->capacity = c->capacity ? c->capacity : c->gpu ? VRAM_PLAN_GPU_CAPACITY : host_capacity();
    char spec[48];
    snprintf(spec, sizeof spec, "%s:%llu", c->gpu ? "cudasim" : "sim", (unsigned long long)res->capacity);
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    vram_runtime *rt = NULL;
    vram_gpt *g = NULL;
    vram_optimizer *opt = NULL;
    vram_grad_scaler *scaler = NULL;
    plan_watch w = {.res = res};
    s = vram_device_open(spec, &dev);
    if (s == VRAM_OK) s = vram_allocator_new(dev, NULL, &a);
    if (s == VRAM_OK)
        s = c->gpu ? vram_runtime_new_shape_only_gpu(a, &rt) : vram_runtime_new_shape_only(a, c->threads, &rt);
    if (s != VRAM_OK) goto done;
    w.a = a;
    vram_runtime_set_alloc_observer(rt, on_alloc, &w);
    s = vram_gpt_new(rt, &c->gpt, &g);
    if (s != VRAM_OK) goto done;
    vram_gpt_set_checkpoint(g, c->checkpoint);
    res->parameters = vram_param_list_numel(vram_gpt_params(g));
    vram_optim_config oc;
    vram_optim_config_default(c->optimizer, &oc);
    oc.momentum = c->optimizer == VRAM_OPTIM_SGD ? c->momentum : 0;
    s = vram_optimizer_new(rt, vram_gpt_params(g), &oc, &opt);
    if (s == VRAM_OK && c->gpt.precision == VRAM_DTYPE_F16) s = vram_grad_scaler_new(rt, opt, NULL, &scaler);
    if (s == VRAM_OK) s = train_steps(rt, g, opt, scaler, c, &w, res);
done:
    if (a) finish(a, s, &w, res);
    vram_grad_scaler_free(scaler);
    vram_optimizer_free(opt);
    vram_gpt_free(g);
    vram_runtime_free(rt);
    if (a) vram_allocator_destroy(a);
    vram_device_close(dev);
    res->seconds = now_s() - t0;
    return s;
}

vram_status vram_plan_fit(const vram_plan_config *c, int max_batch, int *best, vram_plan_result *at_best, int *tries) {
    if (!c || !best || max_batch < 1) return vram_error(VRAM_ERR_INVALID_ARG, "plan fit: bad arguments");
    vram_plan_config t = *c;
    vram_plan_result r, good;
    int n = 0, lo = 0, hi = 0; /* lo fits (0: none yet); hi fails (0: none yet) */
    vram_status s = VRAM_OK;
    for (int b = 1;; b = b > max_batch / 2 ? max_batch : 2 * b) { /* doubling until one fails */
        t.batch = b;
        n++;
        s = vram_plan_run(&t, &r);
        if (s == VRAM_ERR_OUT_OF_MEMORY) {
            hi = b;
            break;
        }
        if (s != VRAM_OK) break;
        lo = b;
        good = r;
        if (b == max_batch) break;
    }
    while (s == VRAM_ERR_OUT_OF_MEMORY && lo && hi - lo > 1) { /* bisection */
        t.batch = lo + (hi - lo) / 2;
        n++;
        vram_status m = vram_plan_run(&t, &r);
        if (m == VRAM_OK) {
            lo = t.batch;
            good = r;
        } else if (m == VRAM_ERR_OUT_OF_MEMORY) {
            hi = t.batch;
        } else {
            s = m;
            break;
        }
    }
    if (tries) *tries = n;
    if (s != VRAM_OK && s != VRAM_ERR_OUT_OF_MEMORY) return s;
    if (!lo) {
        if (at_best) *at_best = r;
        return vram_error(VRAM_ERR_OUT_OF_MEMORY, "plan fit: batch 1 does not fit in %llu bytes: %s",
                          (unsigned long long)r.capacity, r.oom_detail);
    }
    *best = lo;
    if (at_best) *at_best = good;
    return VRAM_OK;
}

/* Plans one remedy: at the failing run's capacity, and where it does not fit there, on a device
 * VRAM_PLAN_REMEDY_ROOM times larger (bounded so that a hopeless remedy costs no more to plan
 * than one that nearly fits: the page bookkeeping grows with the capacity). */
static vram_status plan_remedy(vram_plan_remedy *r) {
    vram_status s = vram_plan_run(&r->config, &r->result);
    if (s == VRAM_OK) {
        r->fits = 1;
        r->peak_reserved = r->result.peak_reserved;
        return VRAM_OK;
    }
    if (s != VRAM_ERR_OUT_OF_MEMORY) return s;
    vram_plan_config open = r->config;
    uint64_t cap = r->result.capacity;
    open.capacity = cap < (1ull << 45) / VRAM_PLAN_REMEDY_ROOM ? cap * VRAM_PLAN_REMEDY_ROOM : 1ull << 45;
    vram_plan_result unbounded;
    s = vram_plan_run(&open, &unbounded);
    r->peak_reserved = s == VRAM_OK ? unbounded.peak_reserved : -1;
    return s == VRAM_ERR_OUT_OF_MEMORY ? VRAM_OK : s;
}

static int smallest_factor(int n) {
    for (int d = 2; d * d <= n; d++)
        if (n % d == 0) return d;
    return n;
}

/* The next remedy slot, a copy of c named `name` (NULL when all `max` are taken). */
static vram_plan_remedy *add_remedy(vram_plan_remedy *out, int *n, int max, const vram_plan_config *c, const char *name) {
    if (*n >= max) return NULL;
    vram_plan_remedy *r = &out[(*n)++];
    memset(r, 0, sizeof *r);
    r->config = *c;
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

int vram_plan_remedies(const vram_plan_config *c, vram_plan_remedy *out, int max) {
    if (!c || !out || max < 0) return vram_error(VRAM_ERR_INVALID_ARG, "plan remedies: bad arguments");
    int n = 0;
    char name[64];
    vram_plan_remedy *r;
    const char *opt = c->optimizer == VRAM_OPTIM_SGD && c->momentum > 0 ? "momentum" : vram_optim_kind_name(c->optimizer);
    if (c->batch > 1 && (r = add_remedy(out, &n, max, c, "batch halved"))) {
        r->config.batch = c->batch / 2;
        snprintf(r->flags, sizeof r->flags, "--batch %d", r->config.batch);
    }
    int d = smallest_factor(c->batch); /* the same sequences per step, in d times the micro-batches */
    snprintf(name, sizeof name, "gradient accumulation (%lld micro-batches)", (long long)c->accum * d);
    if (c->batch > 1 && c->accum <= INT_MAX / d && (r = add_remedy(out, &n, max, c, name))) {
        r->config.batch = c->batch / d;
        r->config.accum = c->accum * d;
        snprintf(r->flags, sizeof r->flags, "--batch %d --accum %d", r->config.batch, r->config.accum);
    }
    if (!c->checkpoint && (r = add_remedy(out, &n, max, c, "checkpointing"))) {
        r->config.checkpoint = 1;
        snprintf(r->flags, sizeof r->flags, "--checkpoint");
    }
    snprintf(name, sizeof name, "adagrad instead of %s", opt);
    if ((c->optimizer == VRAM_OPTIM_ADAM || c->optimizer == VRAM_OPTIM_ADAMW) && (r = add_remedy(out, &n, max, c, name))) {
        r->config.optimizer = VRAM_OPTIM_ADAGRAD;
        snprintf(r->flags, sizeof r->flags, "--optimizer adagrad");
    }
    snprintf(name, sizeof name, "sgd instead of %s", opt);
    if ((c->optimizer != VRAM_OPTIM_SGD || c->momentum > 0) && (r = add_remedy(out, &n, max, c, name))) {
        r->config.optimizer = VRAM_OPTIM_SGD;
        r->config.momentum = 0;
        snprintf(r->flags, sizeof r->flags, "--optimizer sgd");
    }
    /* the GPU runtime's own levers: mixed precision, casting the weights, the default recomputation */
    int mixed = c->gpt.precision == VRAM_DTYPE_BF16 || c->gpt.precision == VRAM_DTYPE_F16;
    if (c->gpu && !mixed && (r = add_remedy(out, &n, max, c, "mixed precision (bf16)"))) {
        r->config.gpt.precision = VRAM_DTYPE_BF16;
        snprintf(r->flags, sizeof r->flags, "--precision bf16");
    }
    if (c->gpu && mixed && c->gpt.keep_lowp_weights &&
        (r = add_remedy(out, &n, max, c, "16-bit weights cast, not kept"))) {
        r->config.gpt.keep_lowp_weights = 0;
        snprintf(r->flags, sizeof r->flags, "--lowp-weights cast");
    }
    if (c->gpu && c->gpt.keep && !c->checkpoint && (r = add_remedy(out, &n, max, c, "GELU and layer norm recomputed"))) {
        r->config.gpt.keep = 0;
        snprintf(r->flags, sizeof r->flags, "--recompute gelu,layernorm");
    }
    if (c->gpu && mixed && c->gpt.residual_f32 && (r = add_remedy(out, &n, max, c, "residual stream in 16 bits"))) {
        r->config.gpt.residual_f32 = 0;
        snprintf(r->flags, sizeof r->flags, "--residual lowp");
    }
    for (int i = 0; i < n; i++) {
        vram_status s = plan_remedy(&out[i]);
        if (s != VRAM_OK) return s;
    }
    return n;
}
