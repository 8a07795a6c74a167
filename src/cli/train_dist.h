/* train_dist.h — `vram train` as one rank of a data parallel job (train_dist.c): its flags, the
 * launcher, the communicator and DDP/ZeRO (ddp.h), and its report. train.c calls these at the
 * points of its loop; with no --dist flag everything here is a no-op (rank 0 of 1).
 */
#ifndef VRAM_CLI_TRAIN_DIST_H
#define VRAM_CLI_TRAIN_DIST_H

#include <stdint.h>

#include "vram/ddp.h"

typedef struct vram_train_dist {
    /* flags */
    const char *engine; /* NULL: one process; "mpi", "nccl" */
    int zero;
    double bucket_mb, timeout_s;
    int ranks; /* --ranks N: start N ranks under mpirun */
    /* the job */
    vram_launch launch;
    vram_comm *comm;
    vram_ddp *ddp;
    int rank, size;
    /* per step (ms), for the medians */
    double *comm_ms, *hidden_ms, *exposed_ms, *step_ms;
    int steps_seen, steps_cap;
} vram_train_dist;

#define VRAM_TRAIN_DIST_FLAGS "--dist", "--zero", "--bucket-mb", "--dist-timeout", "--ranks"
#define VRAM_TRAIN_DIST_USAGE                                                                                          \
    "  --dist ENGINE        data parallel: one process a rank, mpi (CPU, ranks from mpirun) or nccl (GPU,\n"        \
    "                       ranks from mpirun or torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT); --batch is\n" \
    "                       per rank (docs/data-parallel.md)\n"                                                      \
    "  --ranks N            start N ranks of this command under mpirun (implies --dist mpi)\n"                     \
    "  --zero 1             ZeRO-1: optimizer state sharded over the ranks (default 0)\n"                           \
    "  --bucket-mb X        gradient bucket size in MB (default 25)\n"                                              \
    "  --dist-timeout S     seconds any rank waits for the others before it ends the job (default 300)\n"

void vram_train_dist_defaults(vram_train_dist *d);
/* One of VRAM_TRAIN_DIST_FLAGS with its value: 1 parsed, 0 not a flag of ours, -1 bad (said). */
int vram_train_dist_parse(vram_train_dist *d, const char *flag, const char *value);
/* Flags that do not go together (said): 0 fine, 2 bad usage. */
int vram_train_dist_check(const vram_train_dist *d, int saving, int on_gpu, int loss_scaled);
/* --ranks N: runs mpirun with this command (without --ranks) and returns its exit status. */
int vram_train_dist_relaunch(const vram_train_dist *d, int argc, char **argv);
/* Reads the launcher (before the device is opened: LOCAL_RANK picks the GPU of `device`, a
 * plain "cuda") and from then on says so when the launcher stops this rank (SIGTERM). Returns
 * 0, or 2 with the message said. spec receives the device to open. */
int vram_train_dist_launch(vram_train_dist *d, const char *device, char *spec, size_t cap);
/* Joins the job and wraps the parameters in DDP (rank 0's weights broadcast). 0, or 1 (said). */
int vram_train_dist_start(vram_train_dist *d, vram_runtime *rt, vram_param_list *params);
/* The job's line under the run's header: ranks, the batch of all ranks, engine, buckets. */
void vram_train_dist_describe(const vram_train_dist *d, int batch);
/* Rows of this rank's shard: the batch of all ranks and this rank's first row. */
void vram_train_dist_rows(const vram_train_dist *d, int batch, int64_t *total, int64_t *first);
/* The mean over ranks of a host value (a loss): in place. */
int vram_train_dist_mean(vram_train_dist *d, double *value);
/* Records a step's communication statistics; prints them when `print`. */
void vram_train_dist_step(vram_train_dist *d, int step, double step_s, int print);
/* The end-of-run report (rank 0 prints what all ranks sent): timing medians, optimizer-state
 * and communication bytes and memory by category per rank. */
int vram_train_dist_report(vram_train_dist *d, vram_allocator *a, const vram_optimizer *opt);
/* VRAM_DIST_FAULT (comm.h): at `step` this rank ends abruptly or stops responding, for tests. */
void vram_train_dist_fault(const vram_train_dist *d, int step);
/* A failed run: ends the whole job so that no rank waits for this one. */
void vram_train_dist_abort(vram_train_dist *d);
void vram_train_dist_end(vram_train_dist *d);

#endif
