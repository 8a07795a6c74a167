/* comm.c — the communicator (comm.h): the launcher's variables, the engine table, and the
 * bounded waits every engine shares.
 *
 * An operation is started by the engine (i* slots, a handle in the request) and completed by
 * polling the engine's test slot: vram_comm_wait polls until done or until the communicator's
 * timeout, sleeping a little more between polls the longer it waits (a rank oversubscribed on
 * few cores must leave the core to the rank it waits for). Polling is also what progresses
 * MPI's non-blocking collectives: data parallel training calls vram_comm_test whenever a
 * gradient becomes ready, so the reductions move while backward still runs.
 * Host scalars on a GPU engine go through a small device tensor (`scratch`).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"

double vram_comm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *vram_comm_engine_name(vram_comm_engine e) { return e == VRAM_COMM_NCCL ? "nccl" : "mpi"; }

/* An integer variable in [lo, hi]: 0 with *out set, 1 when unset, -1 (with the error set) when bad. */
static int env_int(const char *launcher, const char *name, long lo, long hi, int *out) {
    const char *v = getenv(name);
    if (!v) return 1;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        vram_error(VRAM_ERR_INVALID_ARG, "launcher (%s): %s='%s' is not a number in [%ld, %ld]", launcher, name, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* Requires an integer variable: 0, or -1 with the error set. */
static int env_need(const char *launcher, const char *name, long lo, long hi, int *out) {
    int r = env_int(launcher, name, lo, hi, out);
    if (r == 1) vram_error(VRAM_ERR_INVALID_ARG, "launcher (%s): %s is not set", launcher, name);
    return r ? -1 : 0;
}

static vram_status read_master(vram_launch *l) {
    const char *addr = getenv("MASTER_ADDR");
    if (!addr || !*addr)
        return vram_error(VRAM_ERR_INVALID_ARG, "launcher (%s): MASTER_ADDR is not set (the host of rank 0)", l->launcher);
    if (strlen(addr) >= sizeof l->addr)
        return vram_error(VRAM_ERR_INVALID_ARG, "launcher (%s): MASTER_ADDR is longer than %zu bytes", l->launcher,
                          sizeof l->addr - 1);
    snprintf(l->addr, sizeof l->addr, "%s", addr);
    if (env_need(l->launcher, "MASTER_PORT", 1, 65535, &l->port)) return VRAM_ERR_INVALID_ARG;
    return VRAM_OK;
}

vram_status vram_launch_read(vram_launch *l) {
    memset(l, 0, sizeof *l);
    if (getenv("OMPI_COMM_WORLD_SIZE")) {
        snprintf(l->launcher, sizeof l->launcher, "mpirun");
        if (env_need("mpirun", "OMPI_COMM_WORLD_SIZE", 1, INT_MAX, &l->size) ||
            env_need("mpirun", "OMPI_COMM_WORLD_RANK", 0, l->size - 1, &l->rank) ||
            env_int("mpirun", "OMPI_COMM_WORLD_LOCAL_RANK", 0, INT_MAX, &l->local_rank) < 0)
            return VRAM_ERR_INVALID_ARG;
        return VRAM_OK;
    }
    /* (MASTER_ADDR and MASTER_PORT alone do not say torchrun: Slurm jobs set them too) */
    static const char *const torchrun[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK"};
    int any = 0;
    for (size_t i = 0; i < sizeof torchrun / sizeof *torchrun; i++) any |= getenv(torchrun[i]) != NULL;
    if (any) {
        snprintf(l->launcher, sizeof l->launcher, "torchrun");
        if (env_need("torchrun", "WORLD_SIZE", 1, INT_MAX, &l->size)) return VRAM_ERR_INVALID_ARG;
        int r = env_int("torchrun", "RANK", 0, INT_MAX, &l->rank);
        if (r == 1) return vram_error(VRAM_ERR_INVALID_ARG, "launcher (torchrun): RANK is not set");
        if (r < 0) return VRAM_ERR_INVALID_ARG;
        if (l->rank >= l->size)
            return vram_error(VRAM_ERR_INVALID_ARG, "launcher (torchrun): RANK=%d is not below WORLD_SIZE=%d", l->rank,
                              l->size);
        l->local_rank = l->rank;
        if (env_int("torchrun", "LOCAL_RANK", 0, INT_MAX, &l->local_rank) < 0) return VRAM_ERR_INVALID_ARG;
        return read_master(l);
    }
    if (getenv("SLURM_PROCID")) {
        snprintf(l->launcher, sizeof l->launcher, "slurm");
        if (env_need("slurm", "SLURM_NTASKS", 1, INT_MAX, &l->size) ||
            env_need("slurm", "SLURM_PROCID", 0, l->size - 1, &l->rank) ||
            env_int("slurm", "SLURM_LOCALID", 0, INT_MAX, &l->local_rank) < 0)
            return VRAM_ERR_INVALID_ARG;
        return read_master(l);
    }
    return vram_error(VRAM_ERR_NOT_FOUND, "no launcher: start the ranks with `mpirun -n N vram train ...` (or `vram "
                                          "train --ranks N`), or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                                          "as torchrun does");
}

vram_status vram_comm_open(vram_comm_engine engine, const vram_launch *l, vram_runtime *rt, double timeout_s,
                           vram_comm **out) {
    if (!l || !rt || !out || !(timeout_s > 0))
        return vram_error(VRAM_ERR_INVALID_ARG, "comm: bad arguments (timeout %g s)", timeout_s);
    int gpu = vram_runtime_on_gpu(rt);
    if (engine == VRAM_COMM_MPI && gpu)
        return vram_error(VRAM_ERR_UNSUPPORTED, "comm: the MPI engine communicates host memory; a GPU runtime uses nccl");
    if (engine == VRAM_COMM_NCCL && !gpu)
        return vram_error(VRAM_ERR_UNSUPPORTED, "comm: the NCCL engine communicates GPU memory; the CPU runtime uses mpi");
    vram_comm *c = calloc(1, sizeof *c);
    if (!c) return vram_error(VRAM_ERR_HOST_MEMORY, "comm: out of host memory");
    c->ops = engine == VRAM_COMM_NCCL ? &vram_comm_nccl_ops : &vram_comm_mpi_ops;
    c->engine = engine;
    c->launch = *l;
    c->rt = rt;
    c->timeout_s = timeout_s;
    vram_status s = c->ops->open(c);
    if (s != VRAM_OK) {
        free(c);
        return s;
    }
    *out = c;
    return VRAM_OK;
}

void vram_comm_close(vram_comm *c) {
    if (!c) return;
    vram_tensor_free(c->scratch);
    c->ops->close(c);
    free(c);
}

int vram_comm_rank(const vram_comm *c) { return c->rank; }
int vram_comm_size(const vram_comm *c) { return c->size; }
const char *vram_comm_describe(const vram_comm *c) { return c->desc; }

static vram_status begin(vram_comm_request *r, const char *what) {
    memset(r, 0, sizeof *r);
    r->what = what;
    r->t_start = vram_comm_now();
    return VRAM_OK;
}

static vram_status started(vram_comm_request *r, vram_status s) {
    r->active = s == VRAM_OK;
    return s;
}

static vram_status check_count(vram_comm *c, int64_t n, vram_dtype dt, const char *what) {
    if (dt != VRAM_DTYPE_F32 && dt != VRAM_DTYPE_F64)
        return vram_error(VRAM_ERR_INVALID_ARG, "comm %s: %s elements (f32 or f64 only)", what, vram_dtype_name(dt));
    if (n < 0 || n > INT_MAX / (c->size > 0 ? c->size : 1))
        return vram_error(VRAM_ERR_INVALID_ARG, "comm %s: %lld elements (at most %d per call)", what, (long long)n,
                          INT_MAX / (c->size > 0 ? c->size : 1));
    return VRAM_OK;
}

vram_status vram_comm_iallreduce(vram_comm *c, void *buf, int64_t n, vram_dtype dt, vram_comm_request *r) {
    vram_status s = check_count(c, n, dt, "all-reduce");
    if (s == VRAM_OK) s = begin(r, "all-reduce");
    return s == VRAM_OK ? started(r, c->ops->iallreduce(c, buf, n, dt, &r->handle)) : s;
}

vram_status vram_comm_ireduce_scatter(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt,
                                      vram_comm_request *r) {
    vram_status s = check_count(c, n, dt, "reduce-scatter");
    if (s == VRAM_OK) s = begin(r, "reduce-scatter");
    return s == VRAM_OK ? started(r, c->ops->ireduce_scatter(c, send, recv, n, dt, &r->handle)) : s;
}

vram_status vram_comm_iallgather(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt,
                                 vram_comm_request *r) {
    vram_status s = check_count(c, n, dt, "all-gather");
    if (s == VRAM_OK) s = begin(r, "all-gather");
    return s == VRAM_OK ? started(r, c->ops->iallgather(c, send, recv, n, dt, &r->handle)) : s;
}

int vram_comm_test(vram_comm *c, vram_comm_request *r) {
    if (r->done || !r->active) return 1;
    int t = c->ops->test(c, &r->handle);
    if (t == 1) {
        r->done = 1;
        r->active = 0;
        r->t_done = vram_comm_now();
    }
    return t;
}

vram_status vram_comm_wait(vram_comm *c, vram_comm_request *r) {
    double deadline = vram_comm_now() + c->timeout_s;
    long nap_ns = 1000;
    for (;;) {
        int t = vram_comm_test(c, r);
        if (t == 1) return VRAM_OK;
        if (t < 0) return (vram_status)t;
        if (vram_comm_now() > deadline)
            return vram_error(VRAM_ERR_IO, "rank %d of %d: %s did not complete within %g s: another rank died, hangs "
                                           "or is far behind (--dist-timeout sets the bound)",
                              c->rank, c->size, r->what ? r->what : "an operation", c->timeout_s);
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 200000) nap_ns *= 2;
    }
}

vram_status vram_comm_broadcast(vram_comm *c, void *buf, int64_t n, vram_dtype dt, int root) {
    vram_comm_request r;
    vram_status s = check_count(c, n, dt, "broadcast");
    if (s == VRAM_OK && (root < 0 || root >= c->size))
        s = vram_error(VRAM_ERR_INVALID_ARG, "comm broadcast: root %d of %d ranks", root, c->size);
    if (s == VRAM_OK) s = begin(&r, "broadcast");
    if (s == VRAM_OK) s = started(&r, c->ops->ibroadcast(c, buf, n, dt, root, &r.handle));
    return s == VRAM_OK ? vram_comm_wait(c, &r) : s;
}

vram_status vram_comm_allreduce(vram_comm *c, void *buf, int64_t n, vram_dtype dt) {
    vram_comm_request r;
    vram_status s = vram_comm_iallreduce(c, buf, n, dt, &r);
    return s == VRAM_OK ? vram_comm_wait(c, &r) : s;
}

/* Where host doubles are communicated: themselves on the CPU, a device tensor on the GPU. */
static vram_status scratch_for(vram_comm *c, int64_t n, void **dev) {
    if (!vram_runtime_on_gpu(c->rt)) return VRAM_OK;
    if (!c->scratch || vram_tensor_numel(c->scratch) < n) {
        vram_tensor_free(c->scratch);
        c->scratch = NULL;
        int64_t shape[1] = {n < 64 ? 64 : n};
        vram_status s = vram_tensor_new(c->rt, VRAM_DTYPE_F64, 1, shape, VRAM_TAG_OTHER, &c->scratch);
        if (s != VRAM_OK) return s;
    }
    *dev = vram_tensor_data(c->scratch);
    return VRAM_OK;
}

static void scratch_io(vram_comm *c, void *host, int64_t n, int to_device) {
    vram_kernels const *k = c->rt->k;
    if (to_device) k->upload(vram_tensor_data(c->scratch), host, (size_t)n * sizeof(double));
    else k->download(host, vram_tensor_data(c->scratch), (size_t)n * sizeof(double));
}

vram_status vram_comm_allreduce_host(vram_comm *c, double *v, int n) {
    void *dev = v;
    vram_status s = scratch_for(c, n, &dev);
    if (s != VRAM_OK) return s;
    if (dev != v) scratch_io(c, v, n, 1);
    s = vram_comm_allreduce(c, dev, n, VRAM_DTYPE_F64);
    if (s == VRAM_OK && dev != v) {
        scratch_io(c, v, n, 0);
        s = vram_runtime_sync(c->rt);
    }
    return s;
}

vram_status vram_comm_allgather_host(vram_comm *c, const double *v, int n, double *all) {
    int64_t total = (int64_t)n * (c->size + 1);
    void *dev = NULL;
    vram_status s = scratch_for(c, total, &dev);
    if (s != VRAM_OK) return s;
    vram_comm_request r;
    if (!dev) { /* host memory */
        s = vram_comm_iallgather(c, v, all, n, VRAM_DTYPE_F64, &r);
        return s == VRAM_OK ? vram_comm_wait(c, &r) : s;
    }
    double *d = dev;
    c->rt->k->upload(d, v, (size_t)n * sizeof *v);
    s = vram_comm_iallgather(c, d, d + n, n, VRAM_DTYPE_F64, &r);
    if (s == VRAM_OK) s = vram_comm_wait(c, &r);
    if (s == VRAM_OK) {
        c->rt->k->download(all, d + n, (size_t)n * c->size * sizeof *all);
        s = vram_runtime_sync(c->rt);
    }
    return s;
}

void vram_comm_abort(vram_comm *c) {
    if (c) c->ops->abort(c);
}

int vram_comm_fault_due(const vram_comm *c, int step) {
    const char *f = getenv("VRAM_DIST_FAULT");
    int rank, at, used = 0;
    if (!f || sscanf(f, "%d:%d%n", &rank, &at, &used) != 2 || rank != c->rank || at != step) return 0;
    return strcmp(f + used, ":hang") == 0 ? 2 : 1;
}
