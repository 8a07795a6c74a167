/* test_fewer_launches.c — VRAM_FEWER_LAUNCHES (rt_internal.h) changes no number and no
 * allocation, only the memsets and accumulates a training step queues.
 *
 * A kernel table wrapped around the runtime's (launch_counts.h) counts zero (memsets: calls and
 * bytes), copy, fill and accumulate. On the CPU: a small tied GPT in f32, one step with the
 * switch off and one with it on from the same weights: every gradient bit for bit when each token id occurs
 * once (the embedding's scatter then adds the same single value either way), within f32's
 * rounding when ids repeat; the same allocator statistics; one memset (V x C x 4 bytes) and one
 * accumulate fewer. On the planner's shape-only GPU runtime (the GPU's slots, no values), with
 * the table's layer_norm_backward_writes_wb as the CUDA table has it: GPT-2 124M's step at
 * B=8, T=1024 in bf16 with kept weights, the counts printed both ways (docs/runtime.md quotes
 * them), the same allocations, and the layer norms' 50 memsets plus the embedding's gone. All
 * with VRAM_GRAD_ADOPT=0, the allocations the switch keeps.
 */
#include <stdio.h>
#include <stdlib.h>

#include "launch_counts.h"

static void same_allocations(const char *what, const lc_step *off, const lc_step *on) {
    CHECK(off->peak == on->peak && off->allocs == on->allocs && off->bytes_allocated == on->bytes_allocated,
          "%s: the allocations changed: peak %lld -> %lld, %lld -> %lld allocations of %lld -> %lld bytes", what,
          (long long)off->peak, (long long)on->peak, (long long)off->allocs, (long long)on->allocs,
          (long long)off->bytes_allocated, (long long)on->bytes_allocated);
}

/* The CPU: distinct ids (bit for bit), then repeated ids (to f32's rounding). */
static void cpu(void) {
    enum { B = 2, T = 32, V = 97, C = 64 };
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt = lc_open(0, &dev, &a);
    if (!rt) return;
    vram_gpt_config cfg = {.layers = 2, .heads = 2, .width = C, .vocab = V, .context = T, .tied = 1, .init_std = 0.02};
    int32_t ids[B * T], targets[B * T];
    for (int repeat = 0; repeat < 2; repeat++) {
        for (int i = 0; i < B * T; i++) {
            ids[i] = repeat ? (int32_t)((i * 7) % 11) : (int32_t)((i * 13) % V); /* (13 is prime to V: distinct) */
            targets[i] = (int32_t)((i * 5 + 3) % V);
        }
        lc_step r[2];
        for (int on = 0; on < 2; on++)
            lc_gpt_step(rt, a, &cfg, B, T, ids, targets, "VRAM_FEWER_LAUNCHES", on, &r[on]);
        const char *what = repeat ? "CPU, repeated ids" : "CPU, distinct ids";
        same_allocations(what, &r[0], &r[1]);
        CHECK(r[0].loss == r[1].loss, "%s: loss %.9g, %.9g with the switch off", what, r[1].loss, r[0].loss);
        CHECK(r[0].n_grads == r[1].n_grads && r[0].n_grads > (int64_t)V * C, "%s: %lld and %lld gradient elements", what,
              (long long)r[0].n_grads, (long long)r[1].n_grads);
        int64_t differ = 0;
        double worst = 0;
        for (int64_t i = 0; r[0].n_grads == r[1].n_grads && i < r[0].n_grads; i++) {
            double d = (double)r[0].grads[i] - (double)r[1].grads[i];
            differ += d != 0;
            if (d < 0) d = -d;
            if (d > worst) worst = d;
        }
        if (!repeat) CHECK(differ == 0, "%s: %lld gradient elements differ (by up to %g)", what, (long long)differ, worst);
        else CHECK(worst <= 1e-6, "%s: gradients differ by up to %g", what, worst);
        CHECK(r[0].c.zeros - r[1].c.zeros == 1 && r[0].c.zero_bytes - r[1].c.zero_bytes == (int64_t)V * C * 4,
              "%s: %lld memsets of %lld bytes, %lld of %lld with the switch off", what, (long long)r[1].c.zeros,
              (long long)r[1].c.zero_bytes, (long long)r[0].c.zeros, (long long)r[0].c.zero_bytes);
        CHECK(r[0].c.accumulates - r[1].c.accumulates == 1, "%s: %lld accumulates, %lld with the switch off", what,
              (long long)r[1].c.accumulates, (long long)r[0].c.accumulates);
        CHECK(r[0].c.copies == r[1].c.copies, "%s: %lld copies, %lld with the switch off", what, (long long)r[1].c.copies,
              (long long)r[0].c.copies);
        free(r[0].grads), free(r[1].grads);
    }
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

/* The planner's GPU runtime: GPT-2 124M at B=8, T=1024, bf16 with kept weights. */
static void gpu_plan(void) {
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt = lc_open(1, &dev, &a);
    if (!rt) return;
    vram_gpt_config cfg = lc_gpt2_124m();
    lc_step r[2];
    for (int on = 0; on < 2; on++)
        lc_gpt_step(rt, a, &cfg, 8, 1024, NULL, NULL, "VRAM_FEWER_LAUNCHES", on, &r[on]);
    same_allocations("GPT-2 on the planner's GPU runtime", &r[0], &r[1]);
    for (int on = 0; on < 2; on++)
        printf("GPT-2 124M B=8 bf16, forward and backward, VRAM_FEWER_LAUNCHES=%d: %lld memsets (%.1f MiB), %lld copies, "
               "%lld fills, %lld accumulates\n", on, (long long)r[on].c.zeros, (double)r[on].c.zero_bytes / 1048576.0,
               (long long)r[on].c.copies, (long long)r[on].c.fills, (long long)r[on].c.accumulates);
    /* 25 layer norms (two a block, the final one), two memsets each; the tied table's scatter */
    CHECK(r[0].c.zeros - r[1].c.zeros == 51 && r[0].c.zero_bytes - r[1].c.zero_bytes == 50LL * 768 * 4 + 50257LL * 768 * 4,
          "GPT-2: %lld memsets (%lld bytes), %lld with the switch off (%lld bytes): want 51 fewer", (long long)r[1].c.zeros,
          (long long)r[1].c.zero_bytes, (long long)r[0].c.zeros, (long long)r[0].c.zero_bytes);
    CHECK(r[0].c.accumulates - r[1].c.accumulates == 1 && r[0].c.copies == r[1].c.copies,
          "GPT-2: %lld accumulates and %lld copies, %lld and %lld with the switch off", (long long)r[1].c.accumulates,
          (long long)r[1].c.copies, (long long)r[0].c.accumulates, (long long)r[0].c.copies);
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);
}

int main(void) {
    /* today's allocations: VRAM_GRAD_ADOPT (test_grad_adopt) drops the embedding's unused buffer */
    setenv("VRAM_GRAD_ADOPT", "0", 1);
    cpu();
    gpu_plan();
    return check_done();
}
