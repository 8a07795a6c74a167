/* test_dist.c — the pieces of data parallel training that need no MPI and no GPU: the launcher's
 * variables (comm.h), the TCP rendezvous that hands NCCL's id to torchrun-launched ranks
 * (comm_store.c: forked ranks, a missing rank, a rank with another world size, no rank 0, all
 * bounded in time), the engines' refusals, and the autograd gradient hook DDP starts its
 * reductions from (once per leaf, when the gradient is final, checkpointed segments included).
 * The collectives themselves are tested end to end under mpirun by dist_check.py.
 */
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/runtime/comm_internal.h"
#include "check.h"
#include "vram/alloc.h"
#include "vram/ops.h"

static const char *const vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                   "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "PMIX_RANK"};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

static void test_launch(void) {
    vram_launch l;
    clear_env();
    CHECK(vram_launch_read(&l) == VRAM_ERR_NOT_FOUND, "no launcher");
    setenv("RANK", "1", 1), setenv("WORLD_SIZE", "4", 1), setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1), setenv("MASTER_PORT", "29400", 1);
    CHECK_OK(vram_launch_read(&l));
    CHECK(!strcmp(l.launcher, "torchrun") && l.rank == 1 && l.size == 4 && l.local_rank == 1 && l.port == 29400 &&
              !strcmp(l.addr, "127.0.0.1"),
          "torchrun: %s %d/%d local %d port %d", l.launcher, l.rank, l.size, l.local_rank, l.port);
    setenv("RANK", "4", 1);
    CHECK(vram_launch_read(&l) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "RANK=4 is not below WORLD_SIZE=4"),
          "rank out of range: %s", vram_last_error());
    setenv("RANK", "1", 1), setenv("MASTER_PORT", "0", 1);
    CHECK(vram_launch_read(&l) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "MASTER_PORT"), "port 0: %s",
          vram_last_error());
    unsetenv("MASTER_PORT");
    CHECK(vram_launch_read(&l) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "MASTER_PORT is not set"),
          "no port: %s", vram_last_error());
    setenv("MASTER_PORT", "29400", 1), setenv("WORLD_SIZE", "4x", 1);
    CHECK(vram_launch_read(&l) == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "WORLD_SIZE='4x'"), "4x: %s",
          vram_last_error());
    clear_env();
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1), setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    CHECK_OK(vram_launch_read(&l));
    CHECK(!strcmp(l.launcher, "mpirun") && l.rank == 2 && l.size == 3 && l.local_rank == 0, "mpirun %d/%d", l.rank, l.size);
    clear_env();
    setenv("SLURM_PROCID", "5", 1), setenv("SLURM_NTASKS", "8", 1), setenv("SLURM_LOCALID", "1", 1);
    setenv("MASTER_ADDR", "node1", 1), setenv("MASTER_PORT", "29400", 1);
    CHECK_OK(vram_launch_read(&l));
    CHECK(!strcmp(l.launcher, "slurm") && l.rank == 5 && l.size == 8 && l.local_rank == 1, "slurm %d/%d", l.rank, l.size);
    clear_env();
}

/* A port nobody listens on now (the kernel's pick, released). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, len) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static vram_launch launch_of(int rank, int size, int port) {
    vram_launch l = {.rank = rank, .size = size, .port = port};
    snprintf(l.launcher, sizeof l.launcher, "torchrun");
    snprintf(l.addr, sizeof l.addr, "127.0.0.1");
    return l;
}

/* Forks a rank that joins the rendezvous; it exits 0 when it received `want`. */
static pid_t fork_rank(int rank, int size, int port, const char *want) {
    pid_t pid = fork();
    if (pid == 0) {
        vram_launch l = launch_of(rank, size, port);
        char blob[128] = {0};
        vram_status s = vram_store_broadcast(&l, blob, sizeof blob, 10);
        _exit(s == VRAM_OK && !strcmp(blob, want) ? 0 : 1);
    }
    return pid;
}

static int child_ok(pid_t pid) {
    int st = 0;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_store(void) {
    int port = free_port();
    CHECK(port > 0, "a free port");
    pid_t a = fork_rank(1, 3, port, "nccl id"), b = fork_rank(2, 3, port, "nccl id");
    vram_launch l0 = launch_of(0, 3, port);
    char blob[128] = "nccl id";
    CHECK_OK(vram_store_broadcast(&l0, blob, sizeof blob, 10));
    CHECK(child_ok(a) && child_ok(b), "both ranks got rank 0's blob");

    /* a rank that never comes: rank 0 ends within its timeout, naming how many came */
    port = free_port();
    l0 = launch_of(0, 2, port);
    double t0 = vram_comm_now();
    vram_status s = vram_store_broadcast(&l0, blob, sizeof blob, 0.5);
    double dt = vram_comm_now() - t0;
    CHECK(s == VRAM_ERR_IO && strstr(vram_last_error(), "1 of 2 ranks reached rank 0") && dt < 3, "missing rank: %s (%.1f s)",
          vram_last_error(), dt);

    /* a rank told another world size */
    port = free_port();
    a = fork_rank(1, 3, port, "x");
    l0 = launch_of(0, 2, port);
    s = vram_store_broadcast(&l0, blob, sizeof blob, 5);
    CHECK(s == VRAM_ERR_INVALID_ARG && strstr(vram_last_error(), "WORLD_SIZE=3 where rank 0 has WORLD_SIZE=2"),
          "world size mismatch: %s", vram_last_error());
    CHECK(!child_ok(a), "the mismatched rank fails too");

    /* no rank 0 */
    vram_launch l1 = launch_of(1, 2, free_port());
    t0 = vram_comm_now();
    s = vram_store_broadcast(&l1, blob, sizeof blob, 0.5);
    dt = vram_comm_now() - t0;
    CHECK(s == VRAM_ERR_IO && strstr(vram_last_error(), "could not reach rank 0") && dt < 3, "no rank 0: %s",
          vram_last_error());
}

static void test_engines(vram_runtime *rt) {
    vram_launch l = launch_of(0, 1, free_port());
    vram_comm *c = NULL;
    CHECK(vram_comm_open(VRAM_COMM_NCCL, &l, rt, 5, &c) == VRAM_ERR_UNSUPPORTED && !c, "NCCL on the CPU runtime");
    CHECK(vram_comm_open(VRAM_COMM_MPI, &l, rt, 5, &c) == VRAM_ERR_INVALID_ARG &&
              strstr(vram_last_error(), "needs ranks started by mpirun"),
          "MPI without mpirun: %s", vram_last_error());
    CHECK(vram_comm_open(VRAM_COMM_MPI, &l, rt, 0, &c) == VRAM_ERR_INVALID_ARG, "no timeout");
}

typedef struct hook_log {
    int calls;
    vram_tensor *who[8];
    double grad_sum[8];
} hook_log;

static double sum_of(vram_tensor *t) {
    double v[64], s = 0;
    int64_t n = vram_tensor_numel(t);
    vram_tensor_to_f64(t, v);
    for (int64_t i = 0; i < n; i++) s += v[i];
    return s;
}

static vram_status record(void *ctx, vram_tensor *leaf) {
    hook_log *h = ctx;
    if (h->calls < 8) {
        h->who[h->calls] = leaf;
        h->grad_sum[h->calls] = vram_tensor_grad(leaf) ? sum_of(vram_tensor_grad(leaf)) : NAN;
    }
    h->calls++;
    return VRAM_OK;
}

static vram_status seg(void *ctx, int n, vram_tensor *const *in, vram_tensor **out) {
    return vram_mul(in[0], (vram_tensor *)ctx, out); /* the parameter ctx used inside a checkpoint */
}

static void test_grad_hook(vram_runtime *rt) {
    int64_t shape[1] = {4};
    double wv[4] = {1, 2, 3, 4}, xv[4] = {1, 1, 2, 2}, uv[4] = {3, 1, 4, 1};
    vram_tensor *w = NULL, *x = NULL, *u = NULL, *a = NULL, *b = NULL, *c = NULL, *ab = NULL, *abc = NULL, *loss = NULL;
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F64, 1, shape, VRAM_TAG_PARAMETER, wv, &w));
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F64, 1, shape, VRAM_TAG_PARAMETER, uv, &u));
    CHECK_OK(vram_tensor_from_data(rt, VRAM_DTYPE_F64, 1, shape, VRAM_TAG_TEMPORARY, xv, &x));
    vram_tensor_set_requires_grad(w, 1);
    vram_tensor_set_requires_grad(u, 1);
    hook_log h = {0};
    vram_runtime_set_grad_hook(rt, record, &h);
    /* loss = sum(a + w*w + checkpoint(a -> a*u)), a = w*x: w has three edges (one through the
     * segment's input), u is used only inside the segment (its inner backward pass) */
    CHECK_OK(vram_mul(w, x, &a));
    CHECK_OK(vram_mul(w, w, &b));
    CHECK_OK(vram_checkpoint(rt, seg, u, 1, &a, &c));
    CHECK_OK(vram_add(a, b, &ab));
    CHECK_OK(vram_add(ab, c, &abc));
    CHECK_OK(vram_sum(abc, &loss));
    CHECK_OK(vram_backward(loss, NULL));
    int seen_w = 0, seen_u = 0;
    for (int i = 0; i < h.calls && i < 8; i++) {
        if (h.who[i] == w) {
            seen_w++;
            CHECK(h.grad_sum[i] == 6 + 20 + 14, "w's gradient when final: %g", h.grad_sum[i]);
        }
        if (h.who[i] == u) {
            seen_u++;
            CHECK(h.grad_sum[i] == 17, "u's gradient when final: %g", h.grad_sum[i]);
        }
    }
    CHECK(seen_w == 1 && seen_u == 1, "once per parameter: w %d, u %d (of %d calls)", seen_w, seen_u, h.calls);
    vram_runtime_set_grad_hook(rt, NULL, NULL);
    vram_tensor *all[] = {w, x, u, a, b, c, ab, abc, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) vram_tensor_free(all[i]);
}

int main(void) {
    test_launch();
    test_store();
    vram_device *dev = NULL;
    vram_allocator *al = NULL;
    vram_runtime *rt = NULL;
    CHECK_OK(vram_device_open("host", &dev));
    CHECK_OK(vram_allocator_new(dev, NULL, &al));
    CHECK_OK(vram_runtime_new(al, 1, &rt));
    test_engines(rt);
    test_grad_hook(rt);
    vram_runtime_free(rt);
    vram_allocator_destroy(al);
    vram_device_close(dev);
    return check_done();
}
