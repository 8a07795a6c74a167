/* comm_mpi.c — the MPI engine: Open MPI's libmpi.so.40 opened with dlopen.
 *
 * No mpi.h at build time: the few entry points are resolved by name and Open MPI's handles are
 * the addresses of its predefined objects (ompi_mpi_comm_world, ompi_mpi_float, ...), which is
 * Open MPI's ABI (MPICH's handles are integers; its libmpi.so.12 is not opened). The library is
 * opened RTLD_GLOBAL because Open MPI's own plug-ins resolve symbols of libmpi. VRAM_LIBMPI
 * names another file. Errors return (MPI_ERRORS_RETURN) rather than abort, so a failed
 * collective is an error with MPI's message. MPI is initialised once per process (MPI cannot
 * be initialised again after MPI_Finalize): NCCL's bootstrap under mpirun shares it.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "cuda_rt.h" /* vram_cuda_resolve, vram_cuda_sym: resolving a table of symbols */

typedef void *MPI_Comm, *MPI_Datatype, *MPI_Op, *MPI_Request, *MPI_Errhandler;

static struct {
    void *lib;
    int (*Init)(int *, char ***);
    int (*Initialized)(int *);
    int (*Finalized)(int *);
    int (*Finalize)(void);
    int (*Abort)(MPI_Comm, int);
    int (*Comm_rank)(MPI_Comm, int *);
    int (*Comm_size)(MPI_Comm, int *);
    int (*Comm_set_errhandler)(MPI_Comm, MPI_Errhandler);
    int (*Error_string)(int, char *, int *);
    int (*Get_library_version)(char *, int *);
    int (*Iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*Ireduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*Iallgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Request *);
    int (*Ibcast)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
    int (*Test)(MPI_Request *, int *, void *);
    void *comm_world, *t_float, *t_double, *t_byte, *op_sum, *errors_return;
    int inited;
} mpi;

static char mpi_version[128];

static vram_status mpi_fail(int rc, const char *what) {
    char msg[512] = "";
    int len = 0;
    if (mpi.Error_string && mpi.Error_string(rc, msg, &len) != 0) snprintf(msg, sizeof msg, "error %d", rc);
    return vram_error(VRAM_ERR_DRIVER, "MPI: %s failed: %s", what, msg);
}

static vram_status mpi_load(void) {
    if (mpi.lib) return VRAM_OK;
    const char *path = getenv("VRAM_LIBMPI");
    if (!path || !*path) path = "libmpi.so.40";
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        return vram_error(VRAM_ERR_NO_DEVICE, "no MPI: dlopen(\"%s\") failed: %s; install Open MPI (Debian: apt-get "
                                              "install openmpi-bin) and start the ranks with mpirun",
                          path, dlerror());
    static const vram_cuda_sym syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(mpi), field)}
        SYM(Init, "MPI_Init"), SYM(Initialized, "MPI_Initialized"), SYM(Finalized, "MPI_Finalized"),
        SYM(Finalize, "MPI_Finalize"), SYM(Abort, "MPI_Abort"), SYM(Comm_rank, "MPI_Comm_rank"),
        SYM(Comm_size, "MPI_Comm_size"), SYM(Comm_set_errhandler, "MPI_Comm_set_errhandler"),
        SYM(Error_string, "MPI_Error_string"), SYM(Get_library_version, "MPI_Get_library_version"),
        SYM(Iallreduce, "MPI_Iallreduce"), SYM(Ireduce_scatter_block, "MPI_Ireduce_scatter_block"),
        SYM(Iallgather, "MPI_Iallgather"), SYM(Ibcast, "MPI_Ibcast"), SYM(Test, "MPI_Test"),
        SYM(comm_world, "ompi_mpi_comm_world"), SYM(t_float, "ompi_mpi_float"), SYM(t_double, "ompi_mpi_double"),
        SYM(t_byte, "ompi_mpi_byte"), SYM(op_sum, "ompi_mpi_op_sum"), SYM(errors_return, "ompi_mpi_errors_return"),
#undef SYM
    };
    const char *missing = vram_cuda_resolve(lib, syms, sizeof syms / sizeof *syms, &mpi);
    if (missing) {
        dlclose(lib);
        memset(&mpi, 0, sizeof mpi);
        return vram_error(VRAM_ERR_NO_DEVICE, "no MPI: '%s' lacks %s (vram uses Open MPI's libmpi.so.40)", path, missing);
    }
    mpi.lib = lib;
    return VRAM_OK;
}

/* Loads and initialises MPI once per process, for ranks that mpirun started. */
static vram_status mpi_start(const vram_launch *l) {
    if (mpi.inited) return VRAM_OK;
    if (strcmp(l->launcher, "mpirun") != 0 && !getenv("PMIX_RANK"))
        return vram_error(VRAM_ERR_INVALID_ARG, "the MPI engine needs ranks started by mpirun (the launcher here is "
                                                "%s): use `mpirun -n N vram train ...`, or --dist nccl on GPUs",
                          l->launcher);
    vram_status s = mpi_load();
    if (s != VRAM_OK) return s;
    int done = 0;
    mpi.Finalized(&done);
    if (done) return vram_error(VRAM_ERR_STATE, "MPI: already finalised in this process (it cannot start again)");
    int on = 0;
    mpi.Initialized(&on);
    if (!on) {
        int rc = mpi.Init(NULL, NULL);
        if (rc != 0) return mpi_fail(rc, "MPI_Init");
    }
    mpi.Comm_set_errhandler(mpi.comm_world, mpi.errors_return);
    int len = 0;
    char v[1024] = "";
    if (mpi.Get_library_version(v, &len) == 0) {
        v[strcspn(v, ",\n")] = '\0';
        v[sizeof mpi_version - 1] = '\0'; /* (its first line is enough) */
        memcpy(mpi_version, v, sizeof mpi_version);
    }
    mpi.inited = 1;
    return VRAM_OK;
}

static void mpi_stop(void) {
    int done = 0;
    if (mpi.inited && mpi.Finalized(&done) == 0 && !done) mpi.Finalize();
}

static vram_status m_open(vram_comm *c) {
    vram_status s = mpi_start(&c->launch);
    if (s != VRAM_OK) return s;
    int rank = -1, size = 0;
    mpi.Comm_rank(mpi.comm_world, &rank);
    mpi.Comm_size(mpi.comm_world, &size);
    if (rank != c->launch.rank || size != c->launch.size)
        return vram_error(VRAM_ERR_INVALID_ARG, "MPI sees rank %d of %d where the launcher said rank %d of %d", rank, size,
                          c->launch.rank, c->launch.size);
    c->rank = rank;
    c->size = size;
    snprintf(c->desc, sizeof c->desc, "MPI (%s)", mpi_version[0] ? mpi_version : "Open MPI");
    return VRAM_OK;
}

static void m_close(vram_comm *c) {
    (void)c;
    mpi_stop();
}

static void *dtype_of(vram_dtype dt) { return dt == VRAM_DTYPE_F64 ? mpi.t_double : mpi.t_float; }

static vram_status m_iallreduce(vram_comm *c, void *buf, int64_t n, vram_dtype dt, void **h) {
    (void)c;
    int rc = mpi.Iallreduce((void *)1 /* MPI_IN_PLACE */, buf, (int)n, dtype_of(dt), mpi.op_sum, mpi.comm_world, h);
    return rc ? mpi_fail(rc, "MPI_Iallreduce") : VRAM_OK;
}

static vram_status m_ireduce_scatter(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt, void **h) {
    (void)c;
    int rc = mpi.Ireduce_scatter_block(send, recv, (int)n, dtype_of(dt), mpi.op_sum, mpi.comm_world, h);
    return rc ? mpi_fail(rc, "MPI_Ireduce_scatter_block") : VRAM_OK;
}

static vram_status m_iallgather(vram_comm *c, const void *send, void *recv, int64_t n, vram_dtype dt, void **h) {
    (void)c;
    int rc = mpi.Iallgather(send, (int)n, dtype_of(dt), recv, (int)n, dtype_of(dt), mpi.comm_world, h);
    return rc ? mpi_fail(rc, "MPI_Iallgather") : VRAM_OK;
}

static vram_status m_ibroadcast(vram_comm *c, void *buf, int64_t n, vram_dtype dt, int root, void **h) {
    (void)c;
    int rc = mpi.Ibcast(buf, (int)n, dtype_of(dt), root, mpi.comm_world, h);
    return rc ? mpi_fail(rc, "MPI_Ibcast") : VRAM_OK;
}

static int m_test(vram_comm *c, void **h) {
    (void)c;
    int flag = 0;
    int rc = mpi.Test(h, &flag, NULL /* MPI_STATUS_IGNORE */);
    if (rc) return (int)mpi_fail(rc, "MPI_Test");
    return flag ? 1 : 0;
}

static void m_abort(vram_comm *c) {
    (void)c;
    if (mpi.inited) mpi.Abort(mpi.comm_world, 1);
}

const vram_comm_ops vram_comm_mpi_ops = {m_open, m_close, m_iallreduce, m_ireduce_scatter, m_iallgather, m_ibroadcast,
                                        m_test, m_abort};

vram_status vram_mpi_bootstrap_bcast(const vram_launch *l, void *bytes, int n, double timeout_s) {
    vram_status s = mpi_start(l);
    if (s != VRAM_OK) return s;
    void *req = NULL;
    int rc = mpi.Ibcast(bytes, n, mpi.t_byte, 0, mpi.comm_world, &req);
    if (rc) return mpi_fail(rc, "MPI_Ibcast");
    double deadline = vram_comm_now() + timeout_s;
    for (;;) {
        int flag = 0;
        rc = mpi.Test(&req, &flag, NULL);
        if (rc) return mpi_fail(rc, "MPI_Test");
        if (flag) return VRAM_OK;
        if (vram_comm_now() > deadline)
            return vram_error(VRAM_ERR_IO, "rank %d of %d: NCCL's id did not arrive over MPI within %g s", l->rank,
                              l->size, timeout_s);
    }
}

void vram_mpi_bootstrap_close(void) { mpi_stop(); }
