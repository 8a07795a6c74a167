/* ddp_internal.h — the data parallel state shared by ddp.c (buckets, the gradient hook, the
 * reductions) and zero.c (ZeRO-1's sharded optimizer state, clipping and step).
 *
 * Parameter i lies in bucket bucket_of[i] at element offset_of[i] of the bucket's flat buffer.
 * A bucket has `padded` elements (numel rounded up to a multiple of the ranks under ZeRO, so
 * that its chunks are equal) and, under ZeRO, chunk = padded / size elements per rank.
 */
#ifndef VRAM_DDP_INTERNAL_H
#define VRAM_DDP_INTERNAL_H

#include "rt_internal.h"
#include "vram/ddp.h"

typedef struct ddp_bucket {
    int first, count;       /* its parameters: order[first .. first + count) */
    int64_t numel, padded, chunk;
    vram_tensor *flat;      /* [padded], tag communication */
    vram_tensor *shard_g;   /* ZeRO: [chunk] this rank's mean gradient (communication) */
    vram_tensor *shard_p;   /* ZeRO: [chunk] this rank's parameters, updated here (communication) */
    vram_tensor *s1, *s2;   /* ZeRO: [chunk] optimizer state (tag optimizer state), NULL until needed */
    int64_t step;           /* ZeRO: the optimizer's step count for these chunks */
    int ready;              /* parameters whose gradient is final in this backward */
    int launched;
    vram_comm_request req;
} ddp_bucket;

typedef struct ddp_index {
    const vram_tensor *t;
    int i;
} ddp_index;

struct vram_ddp {
    vram_comm *comm;
    vram_runtime *rt;
    vram_param_list *params;
    vram_ddp_config cfg;
    vram_dtype dt;
    vram_tag tag;           /* "communication" */
    int n;                  /* parameters */
    int *order;             /* bucket order: parameters from the last to the first */
    int *bucket_of;
    int64_t *offset_of;
    char *ready;            /* [n]: gradient final in this backward */
    ddp_index *index;       /* [n] sorted by tensor address, for the hook */
    ddp_bucket *b;
    int nb, next_launch;
    int sync;
    vram_ddp_stats last;
};

/* A 1-D view of n elements of t's storage from element `off` of t (t contiguous). */
vram_tensor *vram_ddp_view(vram_tensor *t, int64_t off, int64_t n);
/* Copies between the parameters' tensors (param data, or_grad: their gradients) and the flat
 * range [lo, hi) of bucket b's elements held in buf (buf[0] is element lo). to_buf: 1 from the
 * tensors into buf. A missing gradient reads as zeros. */
vram_status vram_ddp_copy_range(vram_ddp *d, ddp_bucket *b, int64_t lo, int64_t hi, vram_tensor *buf, int grads,
                                int to_buf);

/* zero.c */
vram_status vram_zero_alloc(vram_ddp *d);
vram_status vram_zero_clip(vram_ddp *d, double max_norm, double *total_norm);
vram_status vram_zero_step(vram_ddp *d, vram_optimizer *opt);
uint64_t vram_zero_state_bytes(const vram_ddp *d);

#endif
