/* ddp.h — data parallel training over a communicator (comm.h): DistributedDataParallel's design,
 * and ZeRO stage 1.
 *
 * Every rank holds the whole model and trains on its own shard of each batch. vram_ddp_new
 * broadcasts rank 0's parameters and groups them into buckets of about `bucket_bytes`, last
 * parameter first (the order backward finishes them). In the backward pass of a step's last
 * micro-batch, autograd's gradient hook marks each final gradient; a complete bucket is copied
 * into its flat buffer (tag "communication") and its reduction starts at once, non-blocking,
 * while backward goes on. Earlier micro-batches communicate nothing (`no_sync`).
 *   zero = 0: all-reduce per bucket; every rank then runs the same optimizer step.
 *   zero = 1: rank r owns chunk r of each bucket cut into `size` equal chunks: reduce-scatter
 *     leaves it the mean gradient of its chunks, optimizer state exists for those only (1/size
 *     per rank), and after its update an all-gather per bucket brings all ranks every parameter.
 * vram_ddp_stats: how long the collectives were under way, the part before the end of backward
 * (hidden) and the time waited for them after it (exposed).
 */
#ifndef VRAM_DDP_H
#define VRAM_DDP_H

#include "vram/comm.h"
#include "vram/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_ddp_config {
    uint64_t bucket_bytes; /* 0: 25 MiB, as PyTorch's bucket_cap_mb */
    int zero;              /* 0 (plain DDP) or 1 (optimizer state sharded) */
} vram_ddp_config;

typedef struct vram_ddp_stats {
    double comm_s;    /* union of the intervals in which the step's collectives were under way */
    double hidden_s;  /* the part of comm_s before backward ended */
    double exposed_s; /* time spent waiting for collectives after backward (and ZeRO's all-gather) */
    int buckets;      /* collectives started in the step */
} vram_ddp_stats;

typedef struct vram_ddp vram_ddp;

/* Broadcasts rank 0's parameters, builds the buckets and installs the gradient hook on the
 * parameters' runtime. The parameters must share one floating dtype and be contiguous. */
vram_status vram_ddp_new(vram_comm *c, vram_param_list *params, const vram_ddp_config *cfg, vram_ddp **out);
void vram_ddp_free(vram_ddp *d); /* removes the hook and returns the buffers */

/* Before each micro-batch's backward: sync = 1 for the step's last micro-batch (its backward
 * starts the reductions), 0 for the others (their gradients only accumulate locally). */
void vram_ddp_begin_micro(vram_ddp *d, int sync);
/* After the last backward: starts any bucket not yet started, waits for all and leaves the mean
 * gradient (zero = 1: of this rank's chunks, inside the buckets). */
vram_status vram_ddp_finish(vram_ddp *d);
/* Global-norm clipping of the mean gradient (zero = 1: the chunks' squares summed over ranks). */
vram_status vram_ddp_clip_grad_norm(vram_ddp *d, double max_norm, double *total_norm);
/* The optimizer step: opt's own step (zero = 0), or the sharded update with opt's configuration
 * and learning rate, then the all-gather of the parameters (zero = 1). */
vram_status vram_ddp_step(vram_ddp *d, vram_optimizer *opt);

void vram_ddp_last_stats(const vram_ddp *d, vram_ddp_stats *out);
/* Optimizer-state bytes this rank holds (zero = 1: its shards; otherwise opt's). */
uint64_t vram_ddp_optimizer_state_bytes(const vram_ddp *d, const vram_optimizer *opt);
/* Bytes of the communication buffers, and their allocator tag ("communication"). */
uint64_t vram_ddp_comm_bytes(const vram_ddp *d);
vram_tag vram_ddp_comm_tag(const vram_ddp *d);
int vram_ddp_bucket_count(const vram_ddp *d);

#ifdef __cplusplus
}
#endif

#endif
