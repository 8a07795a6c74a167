/* comm_internal.h — what a communication engine brings to vram_comm (comm.c): a table of
 * functions, as a device brings its kernel table. comm_mpi.c and comm_nccl.c each define one;
 * comm_store.c is the TCP rendezvous that hands NCCL's unique id to the ranks without MPI.
 */
#ifndef VRAM_COMM_INTERNAL_H
#define VRAM_COMM_INTERNAL_H

#include "rt_internal.h"
#include "vram/comm.h"

typedef struct vram_comm_ops {
    /* Loads the library and joins the job; sets c->rank, c->size and c->desc. */
    vram_status (*open)(vram_comm *c);
    void (*close)(vram_comm *c);
    vram_status (*iallreduce)(vram_comm *c, void *buf, int64_t n, vram_dtype dt, void **h);
    vram_status (*ireduce_scatter)(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt, void **h);
    vram_status (*iallgather)(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt, void **h);
    vram_status (*ibroadcast)(vram_comm *c, void *buf, int64_t n, vram_dtype dt, int root, void **h);
    /* 1 done (the handle is released), 0 under way, or an error status (negative). */
    int (*test)(vram_comm *c, void **h);
    void (*abort)(vram_comm *c);
} vram_comm_ops;

struct vram_comm {
    const vram_comm_ops *ops;
    vram_comm_engine engine;
    vram_launch launch;
    vram_runtime *rt;
    int rank, size;
    double timeout_s;
    void *engine_state;
    char desc[160];
    vram_tensor *scratch; /* for the host scalars on a GPU engine: f64, grown as needed */
};

extern const vram_comm_ops vram_comm_mpi_ops;
extern const vram_comm_ops vram_comm_nccl_ops;

/* The MPI engine's blocking broadcast of host bytes, for NCCL's bootstrap under mpirun: loads
 * and initialises MPI if needed (comm_mpi.c). */
vram_status vram_mpi_bootstrap_bcast(const vram_launch *l, void *bytes, int n, double timeout_s);
void vram_mpi_bootstrap_close(void);

/* The TCP rendezvous (comm_store.c): rank 0 listens at l->addr:l->port until every other rank
 * has connected, then sends each of them blob[n]; the others connect (retrying while rank 0 is
 * not up yet) and receive it. Bounded by timeout_s; the message says which ranks were missing. */
vram_status vram_store_broadcast(const vram_launch *l, void *blob, size_t n, double timeout_s);

/* Seconds on the monotonic clock. */
double vram_comm_now(void);

#endif
