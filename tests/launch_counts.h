/* launch_counts.h — counting what a training step queues, for the tests of the switches that
 * remove launches and allocations (test_fewer_launches, test_grad_adopt).
 *
 * lc_wrap() puts a copy of a runtime's kernel table in front of it whose zero (calls and bytes),
 * copy, fill and accumulate count into lc_seen and then call the real ones. lc_gpt_step() runs one
 * forward and backward of a fresh GPT (same seed each time) with an environment switch set to 0
 * or 1, and returns what that step queued, the allocator's statistics around it, and on a runtime
 * with values the loss and every gradient. lc_open() opens a counted runtime: the CPU's, or the
 * planner's shape-only GPU runtime (the CUDA table's slots, no values), where lc_gpt2_124m() is
 * the step both tests count: GPT-2 124M in bf16 with kept weights. One test program includes
 * this once (the counts are static state).
 */
#ifndef VRAM_TESTS_LAUNCH_COUNTS_H
#define VRAM_TESTS_LAUNCH_COUNTS_H

#include <stdlib.h>
#include <string.h>

#include "../src/runtime/rt_internal.h"
#include "check.h"
#include "vram/alloc.h"
#include "vram/nn.h"

typedef struct lc_counts {
    int64_t zeros, zero_bytes, copies, fills, accumulates;
} lc_counts;

static lc_counts lc_seen;
static const vram_kernels *lc_inner;
static vram_kernels lc_wrapped;

static void lc_zero(void *dst, size_t n) {
    lc_seen.zeros++, lc_seen.zero_bytes += (int64_t)n;
    lc_inner->zero(dst, n);
}
static void lc_copy(const vram_kview *dst, const vram_kview *src) {
    lc_seen.copies++;
    lc_inner->copy(dst, src);
}
static void lc_fill(const vram_kview *dst, double v) {
    lc_seen.fills++;
    lc_inner->fill(dst, v);
}
static void lc_accumulate(const vram_kview *dst, const vram_kview *src) {
    lc_seen.accumulates++;
    lc_inner->accumulate(dst, src);
}

/* Counts what rt's kernel table queues; ln_writes_wb as the CUDA table has it, on the planner's. */
static void lc_wrap(vram_runtime *rt, int ln_writes_wb) {
    lc_inner = rt->k;
    lc_wrapped = *lc_inner;
    lc_wrapped.zero = lc_zero, lc_wrapped.copy = lc_copy, lc_wrapped.fill = lc_fill;
    lc_wrapped.accumulate = lc_accumulate;
    lc_wrapped.layer_norm_backward_writes_wb = ln_writes_wb;
    rt->k = &lc_wrapped;
}

/* What has been counted since `before`. */
static lc_counts lc_since(lc_counts before) {
    lc_counts c = { lc_seen.zeros - before.zeros, lc_seen.zero_bytes - before.zero_bytes,
                    lc_seen.copies - before.copies, lc_seen.fills - before.fills,
                    lc_seen.accumulates - before.accumulates };
    return c;
}

typedef struct lc_step {
    lc_counts c;
    int64_t peak, allocs, bytes_allocated;
    double loss;
    float *grads; /* every gradient, concatenated (NULL on the shape-only runtime) */
    int64_t n_grads;
} lc_step;

/* One forward and backward of a fresh GPT (same seed) on rt with the environment variable
 * `env` at "1" or "0" as `on` says (unset again after). ids and targets [B, T], or NULL on the
 * shape-only runtime (tensors without values). */
static void lc_gpt_step(vram_runtime *rt, vram_allocator *a, const vram_gpt_config *cfg, int64_t B, int64_t T,
                        const int32_t *ids, const int32_t *targets, const char *env, int on, lc_step *r) {
    memset(r, 0, sizeof *r);
    setenv(env, on ? "1" : "0", 1);
    vram_runtime_seed(rt, 7);
    vram_gpt *g = NULL;
    vram_tensor *ti = NULL, *tt = NULL, *loss = NULL;
    CHECK_OK(vram_gpt_new(rt, cfg, &g));
    int64_t bt[2] = { B, T };
    if (ids) {
        CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, bt, VRAM_TAG_OTHER, ids, &ti));
        CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_I32, 2, bt, VRAM_TAG_OTHER, targets, &tt));
    } else {
        CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_I32, 2, bt, VRAM_TAG_OTHER, &ti));
        CHECK_OK(vram_tensor_new(rt, VRAM_DTYPE_I32, 2, bt, VRAM_TAG_OTHER, &tt));
    }
    vram_allocator_reset_peak_stats(a);
    vram_stats s0, s1;
    vram_allocator_get_stats(a, &s0);
    lc_counts before = lc_seen;
    if (g && ti && tt) CHECK_OK(vram_gpt_forward(g, ti, tt, 1, NULL, &loss));
    if (loss) CHECK_OK(vram_backward(loss, NULL));
    vram_allocator_get_stats(a, &s1);
    r->c = lc_since(before);
    r->peak = s1.allocated_bytes[VRAM_POOL_ALL].peak;
    r->allocs = s1.allocation[VRAM_POOL_ALL].allocated - s0.allocation[VRAM_POOL_ALL].allocated;
    r->bytes_allocated = s1.allocated_bytes[VRAM_POOL_ALL].allocated - s0.allocated_bytes[VRAM_POOL_ALL].allocated;
    if (ids && loss) r->loss = vram_tensor_item(loss);
    vram_param_list *pl = g ? vram_gpt_params(g) : NULL;
    for (int i = 0; ids && pl && i < vram_param_list_count(pl); i++) {
        vram_tensor *gr = vram_tensor_grad(vram_param_list_get(pl, i));
        int64_t n = gr ? vram_tensor_numel(gr) : 0;
        float *p = realloc(r->grads, sizeof *p * (size_t)(r->n_grads + n));
        CHECK(p != NULL, "out of host memory");
        if (!p) break;
        r->grads = p;
        if (gr) vram_tensor_read_host(gr, r->grads + r->n_grads);
        r->n_grads += n;
    }
    vram_tensor_free(loss), vram_tensor_free(ti), vram_tensor_free(tt);
    vram_gpt_free(g);
    unsetenv(env);
}

/* A counted runtime (lc_wrap): the CPU's (2 threads) or, with `planner`, the planner's shape-only
 * GPU runtime on an 80 GiB simulated device with the CUDA table's layer norm. NULL, with the
 * failure CHECKed, when a step fails (*dev and *a then hold what opened, or NULL). */
static vram_runtime *lc_open(int planner, vram_device **dev, vram_allocator **a) {
    vram_runtime *rt = NULL;
    *dev = NULL, *a = NULL;
    CHECK_OK(vram_device_open(planner ? "cudasim:80GiB" : "host", dev));
    if (*dev) CHECK_OK(vram_allocator_new(*dev, NULL, a));
    if (*a && planner) CHECK_OK(vram_runtime_new_shape_only_gpu(*a, &rt));
    else if (*a) CHECK_OK(vram_runtime_new(*a, 2, &rt));
    if (rt) lc_wrap(rt, planner);
    return rt;
}

/* GPT-2 124M (tied, T=1024) in bf16 with kept low-precision weights. */
static vram_gpt_config lc_gpt2_124m(void) {
    vram_gpt_config cfg = { .layers = 12, .heads = 12, .width = 768, .vocab = 50257, .context = 1024, .tied = 1,
                            .init_std = 0.02, .precision = VRAM_DTYPE_BF16, .keep_lowp_weights = 1 };
    return cfg;
}

#endif
