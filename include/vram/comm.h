/* comm.h — collective communication between the ranks of a data parallel job.
 *
 * One process per rank. Where a process sits in the job comes from its launcher's environment
 * (vram_launch_read): Open MPI's mpirun (OMPI_COMM_WORLD_*), torchrun (RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, with
 * MASTER_ADDR and MASTER_PORT). A communicator runs one of two existing engines, each opened with
 * dlopen at run time so that vram builds and runs where neither is installed:
 *   MPI  (Open MPI's libmpi.so.40): host memory, the CPU runtime; needs ranks started by mpirun;
 *   NCCL (libnccl.so.2): GPU memory, the CUDA runtime; its unique id goes from rank 0 to the
 *        others over MPI when mpirun started the ranks, else over a TCP rendezvous at
 *        MASTER_ADDR:MASTER_PORT (comm_store.c; it carries the id only, never tensors).
 * Every wait is bounded by the communicator's timeout: a rank that died or hangs turns into an
 * error on the others (VRAM_ERR_IO, naming the operation), never a hang. Reductions are sums.
 */
#ifndef VRAM_COMM_H
#define VRAM_COMM_H

#include "vram/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vram_comm_engine { VRAM_COMM_MPI = 0, VRAM_COMM_NCCL = 1 } vram_comm_engine;

/* Where this process sits in the job. */
typedef struct vram_launch {
    char launcher[16];  /* "mpirun", "torchrun" or "slurm" */
    int rank, size, local_rank;
    char addr[256];     /* MASTER_ADDR (torchrun, slurm; empty under mpirun) */
    int port;           /* MASTER_PORT */
} vram_launch;

/* Reads the launcher's variables. VRAM_ERR_NOT_FOUND when no launcher set any; VRAM_ERR_INVALID_ARG
 * (the message names the variable) when one is missing, not a number or out of range. */
vram_status vram_launch_read(vram_launch *out);

typedef struct vram_comm vram_comm;

/* An operation under way. Filled by the i* calls; vram_comm_wait or a vram_comm_test that
 * returned 1 completes it. t_start and t_done (monotonic seconds) are when it was started and
 * when its completion was first seen. */
typedef struct vram_comm_request {
    void *handle;
    int active, done;
    double t_start, t_done;
    const char *what;
} vram_comm_request;

/* Opens `engine` for the job of `l`. rt is the runtime whose tensors will be communicated (its
 * device must suit the engine: host for MPI, GPU for NCCL). timeout_s bounds every wait. */
vram_status vram_comm_open(vram_comm_engine engine, const vram_launch *l, vram_runtime *rt, double timeout_s,
                           vram_comm **out);
void vram_comm_close(vram_comm *c);
int vram_comm_rank(const vram_comm *c);
int vram_comm_size(const vram_comm *c);
const char *vram_comm_engine_name(vram_comm_engine engine);
/* "MPI (Open MPI v4.1.4, ...)" or "NCCL 2.28.9": what the engine reports of itself. */
const char *vram_comm_describe(const vram_comm *c);

/* Blocking, bounded by the timeout. Buffers are the runtime device's addresses. */
vram_status vram_comm_broadcast(vram_comm *c, void *buf, int64_t count, vram_dtype dt, int root);
vram_status vram_comm_allreduce(vram_comm *c, void *buf, int64_t count, vram_dtype dt);
/* Sums n host doubles across the ranks, in place (losses, norms, statistics). */
vram_status vram_comm_allreduce_host(vram_comm *c, double *values, int n);
/* Gathers n host doubles of every rank into all[size * n] (rank-major). */
vram_status vram_comm_allgather_host(vram_comm *c, const double *values, int n, double *all);

/* Non-blocking: buf summed in place; recv[count] = the sum of every rank's send[rank * count ..];
 * recv[size * count] = every rank's send[count]. */
vram_status vram_comm_iallreduce(vram_comm *c, void *buf, int64_t count, vram_dtype dt, vram_comm_request *r);
vram_status vram_comm_ireduce_scatter(vram_comm *c, const void *send, void *recv, int64_t count, vram_dtype dt,
                                      vram_comm_request *r);
vram_status vram_comm_iallgather(vram_comm *c, const void *send, void *recv, int64_t count, vram_dtype dt,
                                 vram_comm_request *r);
/* Lets the engine progress r; 1 when it has completed, 0 while under way, negative on error. */
int vram_comm_test(vram_comm *c, vram_comm_request *r);
/* Waits for r, bounded by the timeout. */
vram_status vram_comm_wait(vram_comm *c, vram_comm_request *r);
/* Ends the whole job after an error on this rank (MPI_Abort, ncclCommAbort): the other ranks
 * stop rather than wait for this one. Prints nothing; the caller said why. */
void vram_comm_abort(vram_comm *c);

/* Test-only fault injection, so that the others' handling of a lost rank can be tested:
 * VRAM_DIST_FAULT="RANK:STEP" makes rank RANK end abruptly at step STEP, "RANK:STEP:hang" makes
 * it stop responding there. Returns 1 (die) or 2 (hang) for this rank at `step`, else 0. */
int vram_comm_fault_due(const vram_comm *c, int step);

#ifdef __cplusplus
}
#endif

#endif
