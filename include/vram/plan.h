/* plan.h — the memory planner: what a `vram train` configuration will need, before running it.
 *
 * vram_plan_run() runs the training step of `vram train` (zero_grad, accum micro-batches of
 * forward + backward, clipping, the optimizer step) through the runtime's own code on a
 * shape-only runtime: the real models, autograd and optimizers with a kernel table that computes
 * nothing, over the caching allocator on a simulated device of the given capacity. So the
 * allocation stream is the runtime's own, allocation for allocation, and the allocator that
 * serves it is vram's own: the prediction includes its rounding, caching and fragmentation,
 * and costs only the allocator's bookkeeping (no arithmetic, no memory behind the addresses).
 *
 * Steps repeat until one leaves every figure as the step before left it (the allocator's state
 * has settled), so the peaks hold for a run of any length from `steady_from` steps on; a fixed
 * `steps` runs exactly that many (to compare with a run of that length).
 */
#ifndef VRAM_PLAN_H
#define VRAM_PLAN_H

#include "vram/nn.h"
#include "vram/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_plan_config {
    vram_gpt_config gpt;
    int batch, accum;          /* sequences per micro-batch, micro-batches per step (>= 1) */
    int checkpoint;            /* checkpoint every block */
    vram_optim_kind optimizer; /* the state it keeps: Adam/AdamW 2x, Adagrad 1x, SGD 0 (1x with momentum) */
    double momentum;           /* SGD */
    double clip;               /* > 0: clip to global norm (as vram train; allocates nothing) */
    int threads;               /* matrix-product threads of the run planned (0 = online CPUs, as vram train) */
    int steps;                 /* 0: until settled (at most VRAM_PLAN_MAX_STEPS); else exactly this many */
    uint64_t capacity;         /* device bytes; 0 = the host's physical memory (vram train's default) */
    int gpu;                   /* plan the GPU runtime (vram train --device cuda) on a simulated CUDA device;
                                * gpt.precision F16/BF16 plans mixed precision, which needs it */
} vram_plan_config;

enum { VRAM_PLAN_MAX_STEPS = 16 };
/* The GPU memory a plan of the GPU runtime assumes without a capacity: 80 GiB. */
#define VRAM_PLAN_GPU_CAPACITY (80ull << 30)

typedef enum vram_plan_phase {
    VRAM_PLAN_SETUP = 0, /* model creation */
    VRAM_PLAN_FORWARD,
    VRAM_PLAN_BACKWARD,
    VRAM_PLAN_OPTIMIZER, /* clipping and the optimizer step */
    VRAM_PLAN_PHASES
} vram_plan_phase;
const char *vram_plan_phase_name(vram_plan_phase p);

/* The allocator at one moment of the planned run. */
typedef struct vram_plan_moment {
    int64_t tags[VRAM_TAG_BUILTIN_COUNT]; /* allocated bytes by category (block sizes) */
    int64_t allocated, reserved;          /* reserved - allocated: reserved but free (cached) */
    int step;                             /* 1-based; 0 during setup */
    int micro;                            /* micro-batch within the step, 1-based (0 outside) */
    vram_plan_phase phase;
} vram_plan_moment;

typedef struct vram_plan_result {
    int64_t peak_allocated, peak_reserved, peak_requested;
    int64_t tag_peak[VRAM_TAG_BUILTIN_COUNT];   /* each category's own peak */
    vram_plan_moment at_peak_allocated;         /* the first moment allocated bytes peaked */
    vram_plan_moment at_peak_reserved;          /* the first moment reserved bytes peaked */
    int64_t parameters;                         /* parameter count */
    uint64_t capacity;                          /* the device's bytes */
    int steps;                                  /* steps run */
    int steady_from;                            /* first step after which nothing changed (0: not settled) */
    uint64_t allocations;                       /* allocator calls made */
    double seconds;
    /* Out of memory: the run stopped; the moment of the failure and what failed. */
    int oom;
    vram_plan_moment at_oom;
    char oom_detail[256];
} vram_plan_result;

/* The allocator's bytes by category now (for a failure of a real run, as of a planned one). */
void vram_plan_moment_read(vram_allocator *a, vram_plan_moment *m);

/* vram train's defaults: GPT 4 layers, 4 heads, width 128, context 64, vocab 256; batch 16,
 * accum 1, AdamW, clip 1.0, threads 0, steps 0, capacity 0. */
void vram_plan_config_default(vram_plan_config *c);

/* Plans `c`. VRAM_OK: it fits, `res` has the figures. VRAM_ERR_OUT_OF_MEMORY: it does not fit
 * in the capacity; res->oom and res->at_oom say where it failed (the peaks are those reached
 * before). VRAM_ERR_INVALID_ARG (or another error) for a configuration that cannot run, with
 * vram_last_error(). */
vram_status vram_plan_run(const vram_plan_config *c, vram_plan_result *res);

/* The largest batch in [1, max_batch] that fits c->capacity (c->batch is ignored): doubling
 * from 1, then bisection, each try a plan. *best gets it and `at_best` its plan (may be NULL);
 * `tries` (may be NULL) the number of plans run. VRAM_ERR_OUT_OF_MEMORY when batch 1 does not
 * fit (at_best then holds batch 1's failed plan). Assumes memory grows with the batch. */
vram_status vram_plan_fit(const vram_plan_config *c, int max_batch, int *best, vram_plan_result *at_best, int *tries);

/* What else would fit: the remedies for an out-of-memory failure of `c`, each planned. */
typedef struct vram_plan_remedy {
    char name[64];      /* "batch halved", "gradient accumulation", "checkpointing", "sgd instead of adamw" ... */
    char flags[96];     /* the vram train flags that apply it ("--batch 8 --accum 2") */
    vram_plan_config config;
    vram_plan_result result; /* planned at c->capacity */
    int fits;
    int64_t peak_reserved;   /* planned peak reserved: at c->capacity where it fits, else on a device
                                VRAM_PLAN_REMEDY_ROOM times larger; -1 when it does not fit there either */
} vram_plan_remedy;
enum { VRAM_PLAN_REMEDY_ROOM = 8 };

/* Fills up to `max` remedies for `c` into `out` (those that apply: halving needs a batch > 1,
 * checkpointing that it is off, a leaner optimizer one that keeps state; on the GPU runtime also
 * bf16 for fp32, cast for kept 16-bit weights, recomputation for kept outputs, a 16-bit residual
 * stream for an f32 one) and returns how many,
 * or a negative vram_status when a plan fails for another reason than memory. */
int vram_plan_remedies(const vram_plan_config *c, vram_plan_remedy *out, int max);

#ifdef __cplusplus
}
#endif

#endif
