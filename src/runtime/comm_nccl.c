/* comm_nccl.c — the NCCL engine: libnccl.so.2 opened with dlopen, for GPU tensors.
 *
 * Joining: rank 0 makes the unique id (ncclGetUniqueId); it reaches the others over MPI when
 * mpirun started the ranks, else over the TCP rendezvous of MASTER_ADDR:MASTER_PORT
 * (comm_store.c); then ncclCommInitRank. VRAM_LIBNCCL names another library file.
 * Overlap: collectives run on a stream of their own. Each one first waits (an event) for the
 * work queued so far on the runtime's compute stream, which wrote the buffer, and records an
 * event when done; vram_comm_test queries that event (and NCCL's asynchronous error), so
 * backward's kernels keep running while the reduction moves. The host touches a buffer again
 * only after it saw the event complete. Only the few NCCL types used are declared here; they
 * are NCCL 2's stable ABI (ncclUniqueId is 128 bytes; ncclFloat32 7, ncclFloat64 8, ncclSum 0).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "cuda_rt.h"

typedef struct {
    char internal[128];
} nccl_id;
typedef void *nccl_comm;
enum { NCCL_SUCCESS = 0, NCCL_IN_PROGRESS = 7, NCCL_FLOAT32 = 7, NCCL_FLOAT64 = 8, NCCL_SUM = 0 };
enum { CU_SUCCESS = 0, CU_NOT_READY = 600, CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DISABLE_TIMING = 2 };

static struct {
    void *lib, *cuda;
    int (*GetVersion)(int *);
    int (*GetUniqueId)(nccl_id *);
    int (*CommInitRank)(nccl_comm *, int, nccl_id, int);
    int (*CommDestroy)(nccl_comm);
    int (*CommAbort)(nccl_comm);
    int (*CommGetAsyncError)(nccl_comm, int *);
    const char *(*GetErrorString)(int);
    int (*AllReduce)(const void *, void *, size_t, int, int, nccl_comm, void *);
    int (*ReduceScatter)(const void *, void *, size_t, int, int, nccl_comm, void *);
    int (*AllGather)(const void *, void *, size_t, int, nccl_comm, void *);
    int (*Broadcast)(const void *, void *, size_t, int, int, nccl_comm, void *);
    int (*StreamCreate)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*EventCreate)(void **, unsigned);
    int (*EventRecord)(void *, void *);
    int (*EventQuery)(void *);
    int (*EventDestroy)(void *);
    int (*StreamWaitEvent)(void *, void *, unsigned);
} nc;

typedef struct nccl_state {
    nccl_comm comm;
    void *stream; /* CUstream of the collectives */
    int mpi_boot; /* MPI carried the id: finalise it at close */
} nccl_state;

static vram_status nccl_load(void) {
    if (nc.lib) return VRAM_OK;
    const char *path = getenv("VRAM_LIBNCCL");
    if (!path || !*path) path = "libnccl.so.2";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return vram_error(VRAM_ERR_NO_DEVICE, "no NCCL: dlopen(\"%s\") failed: %s; install NCCL (libnccl2) or point "
                                              "VRAM_LIBNCCL at a libnccl.so.2 (PyTorch's wheels carry one)",
                          path, dlerror());
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda) {
        dlclose(lib);
        return vram_error(VRAM_ERR_NO_DEVICE, "no CUDA driver for NCCL: %s", dlerror());
    }
    static const vram_cuda_sym syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(nc), field)}
        SYM(GetVersion, "ncclGetVersion"), SYM(GetUniqueId, "ncclGetUniqueId"), SYM(CommInitRank, "ncclCommInitRank"),
        SYM(CommDestroy, "ncclCommDestroy"), SYM(CommAbort, "ncclCommAbort"),
        SYM(CommGetAsyncError, "ncclCommGetAsyncError"), SYM(GetErrorString, "ncclGetErrorString"),
        SYM(AllReduce, "ncclAllReduce"), SYM(ReduceScatter, "ncclReduceScatter"), SYM(AllGather, "ncclAllGather"),
        SYM(Broadcast, "ncclBroadcast"),
    };
    static const vram_cuda_sym cu_syms[] = {
        SYM(StreamCreate, "cuStreamCreate"), SYM(StreamDestroy, "cuStreamDestroy_v2"),
        SYM(EventCreate, "cuEventCreate"), SYM(EventRecord, "cuEventRecord"), SYM(EventQuery, "cuEventQuery"),
        SYM(EventDestroy, "cuEventDestroy_v2"), SYM(StreamWaitEvent, "cuStreamWaitEvent"),
#undef SYM
    };
    const char *missing = vram_cuda_resolve(lib, syms, sizeof syms / sizeof *syms, &nc);
    if (!missing) missing = vram_cuda_resolve(cuda, cu_syms, sizeof cu_syms / sizeof *cu_syms, &nc);
    if (missing) {
        dlclose(lib);
        dlclose(cuda);
        memset(&nc, 0, sizeof nc);
        return vram_error(VRAM_ERR_NO_DEVICE, "no NCCL: '%s' or the CUDA driver lacks %s", path, missing);
    }
    nc.lib = lib;
    nc.cuda = cuda;
    return VRAM_OK;
}

static vram_status nccl_fail(int rc, const char *what) {
    return vram_error(VRAM_ERR_DRIVER, "NCCL: %s failed: %s", what, nc.GetErrorString ? nc.GetErrorString(rc) : "?");
}

static vram_status n_open(vram_comm *c) {
    vram_status s = nccl_load();
    if (s != VRAM_OK) return s;
    if (!vram_cuda_state.stream) return vram_error(VRAM_ERR_STATE, "NCCL: no CUDA runtime is open");
    nccl_state *st = calloc(1, sizeof *st);
    if (!st) return vram_error(VRAM_ERR_HOST_MEMORY, "NCCL: out of host memory");
    const vram_launch *l = &c->launch;
    nccl_id id;
    memset(&id, 0, sizeof id);
    int rc = l->rank == 0 ? nc.GetUniqueId(&id) : NCCL_SUCCESS;
    if (rc != NCCL_SUCCESS) s = nccl_fail(rc, "ncclGetUniqueId");
    if (s == VRAM_OK && !strcmp(l->launcher, "mpirun")) {
        st->mpi_boot = 1;
        s = vram_mpi_bootstrap_bcast(l, &id, (int)sizeof id, c->timeout_s);
    } else if (s == VRAM_OK) {
        s = vram_store_broadcast(l, &id, sizeof id, c->timeout_s);
    }
    if (s == VRAM_OK && (rc = nc.CommInitRank(&st->comm, l->size, id, l->rank)) != NCCL_SUCCESS)
        s = nccl_fail(rc, "ncclCommInitRank");
    if (s == VRAM_OK && nc.StreamCreate(&st->stream, CU_STREAM_NON_BLOCKING) != CU_SUCCESS)
        s = vram_error(VRAM_ERR_DRIVER, "NCCL: cuStreamCreate failed");
    if (s != VRAM_OK) {
        if (st->comm) nc.CommDestroy(st->comm);
        if (st->mpi_boot) vram_mpi_bootstrap_close();
        free(st);
        return s;
    }
    c->engine_state = st;
    c->rank = l->rank;
    c->size = l->size;
    int v = 0;
    nc.GetVersion(&v);
    snprintf(c->desc, sizeof c->desc, "NCCL %d.%d.%d (id over %s)", v / 10000, v / 100 % 100, v % 100,
             st->mpi_boot ? "MPI" : "the TCP rendezvous");
    return VRAM_OK;
}

static void n_close(vram_comm *c) {
    nccl_state *st = c->engine_state;
    if (!st) return;
    if (st->comm) nc.CommDestroy(st->comm);
    if (st->stream) nc.StreamDestroy(st->stream);
    if (st->mpi_boot) vram_mpi_bootstrap_close();
    free(st);
}

/* The collective's stream waits for the compute stream's work so far. */
static vram_status order_after_compute(nccl_state *st) {
    void *ev = NULL;
    if (nc.EventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CU_SUCCESS)
        return vram_error(VRAM_ERR_DRIVER, "NCCL: cuEventCreate failed");
    int bad = nc.EventRecord(ev, vram_cuda_state.stream) != CU_SUCCESS || nc.StreamWaitEvent(st->stream, ev, 0) != CU_SUCCESS;
    nc.EventDestroy(ev); /* (the wait is queued; the event may go) */
    return bad ? vram_error(VRAM_ERR_DRIVER, "NCCL: ordering after the compute stream failed") : VRAM_OK;
}

static vram_status finish_launch(nccl_state *st, int rc, const char *what, void **h) {
    if (rc != NCCL_SUCCESS && rc != NCCL_IN_PROGRESS) return nccl_fail(rc, what);
    void *ev = NULL;
    if (nc.EventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CU_SUCCESS || nc.EventRecord(ev, st->stream) != CU_SUCCESS) {
        if (ev) nc.EventDestroy(ev);
        return vram_error(VRAM_ERR_DRIVER, "NCCL: recording the end of %s failed", what);
    }
    *h = ev;
    return VRAM_OK;
}

static int nccl_dt(vram_dtype dt) { return dt == VRAM_DTYPE_F64 ? NCCL_FLOAT64 : NCCL_FLOAT32; }

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_BROADCAST };

/* Queues one collective on the communication stream, after the compute stream's work so far. */
static vram_status launch(vram_comm *c, int op, const void *send, void *recv, int64_t n, vram_dtype dt, int root,
                          void **h) {
    nccl_state *st = c->engine_state;
    vram_status s = order_after_compute(st);
    if (s != VRAM_OK) return s;
    int t = nccl_dt(dt), rc;
    const char *what;
    switch (op) {
    case OP_ALLREDUCE: rc = nc.AllReduce(send, recv, (size_t)n, t, NCCL_SUM, st->comm, st->stream), what = "ncclAllReduce"; break;
    case OP_REDUCE_SCATTER:
        rc = nc.ReduceScatter(send, recv, (size_t)n, t, NCCL_SUM, st->comm, st->stream), what = "ncclReduceScatter";
        break;
    case OP_ALLGATHER: rc = nc.AllGather(send, recv, (size_t)n, t, st->comm, st->stream), what = "ncclAllGather"; break;
    default: rc = nc.Broadcast(send, recv, (size_t)n, t, root, st->comm, st->stream), what = "ncclBroadcast"; break;
    }
    return finish_launch(st, rc, what, h);
}

static vram_status n_iallreduce(vram_comm *c, void *buf, int64_t n, vram_dtype dt, void **h) {
    return launch(c, OP_ALLREDUCE, buf, buf, n, dt, 0, h);
}

static vram_status n_ireduce_scatter(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt, void **h) {
    return launch(c, OP_REDUCE_SCATTER, send, recv, n, dt, 0, h);
}

static vram_status n_iallgather(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt, void **h) {
    return launch(c, OP_ALLGATHER, send, recv, n, dt, 0, h);
}

static vram_status n_ibroadcast(vram_comm *c, void *buf, int64_t n, vram_dtype dt, int root, void **h) {
    return launch(c, OP_BROADCAST, buf, buf, n, dt, root, h);
}

static int n_test(vram_comm *c, void **h) {
    nccl_state *st = c->engine_state;
    int q = nc.EventQuery(*h);
    if (q == CU_SUCCESS) {
        nc.EventDestroy(*h);
        *h = NULL;
        return 1;
    }
    if (q != CU_NOT_READY) return (int)vram_error(VRAM_ERR_DRIVER, "NCCL: the collective's stream failed (CUDA error %d)", q);
    int async = NCCL_SUCCESS;
    if (nc.CommGetAsyncError(st->comm, &async) == NCCL_SUCCESS && async != NCCL_SUCCESS && async != NCCL_IN_PROGRESS)
        return (int)nccl_fail(async, "a collective (asynchronous error)");
    return 0;
}

static void n_abort(vram_comm *c) {
    nccl_state *st = c->engine_state;
    if (st && st->comm) {
        nc.CommAbort(st->comm);
        st->comm = NULL;
    }
}

const vram_comm_ops vram_comm_nccl_ops = {n_open, n_close, n_iallreduce, n_ireduce_scatter, n_iallgather, n_ibroadcast,
                                         n_test, n_abort};
