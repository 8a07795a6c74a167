/* train_dist.c — `vram train` as one rank of a data parallel job (train_dist.h).
 *
 * --ranks N re-runs the command under `mpirun -n N` (adding what Open MPI needs as root and on
 * fewer cores than ranks); otherwise the ranks come from the launcher's variables (comm.h).
 * Rank 0 prints; the others keep only stderr (their stdout goes to /dev/null), and what they
 * measured reaches rank 0 for the report. Each rank trains on rows [rank*b, (rank+1)*b) of the
 * batch of N*b that one process would draw, so N ranks of --batch b follow the one-process run
 * of --batch N*b. Anything that fails on one rank ends the job (vram_comm_abort): the others do
 * not wait for it. A rank that mpirun stops (SIGTERM, because another rank died) says so before
 * it ends; a rank that died without mpirun shows in the others' bounded waits (--dist-timeout).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "train_dist.h"
#include "vram/alloc.h"

void vram_train_dist_defaults(vram_train_dist *d) {
    memset(d, 0, sizeof *d);
    d->bucket_mb = 25;
    d->timeout_s = 300;
    d->size = 1;
}

int vram_train_dist_parse(vram_train_dist *d, const char *f, const char *v) {
    int ok = 1;
    if (!strcmp(f, "--dist")) {
        d->engine = v;
        if (strcmp(v, "mpi") && strcmp(v, "nccl")) {
            fprintf(stderr, "vram train: --dist: '%s' is not mpi or nccl\n", v);
            ok = 0;
        }
    } else if (!strcmp(f, "--zero")) {
        ok = vram_cli_integer("train", f, v, 0, 1, &d->zero);
    } else if (!strcmp(f, "--bucket-mb")) {
        ok = vram_cli_number("train", f, v, 1e-3, 1e5, &d->bucket_mb);
    } else if (!strcmp(f, "--dist-timeout")) {
        ok = vram_cli_number("train", f, v, 0.1, 1e6, &d->timeout_s);
    } else if (!strcmp(f, "--ranks")) {
        ok = vram_cli_integer("train", f, v, 1, 4096, &d->ranks);
    } else {
        return 0;
    }
    return ok ? 1 : -1;
}

int vram_train_dist_check(const vram_train_dist *d, int saving, int on_gpu, int loss_scaled) {
    if (!d->engine && !d->ranks) {
        if (d->zero) fprintf(stderr, "vram train: --zero 1 shards over data parallel ranks: it needs --dist or --ranks\n");
        return d->zero ? 2 : 0;
    }
    if (d->ranks && d->engine && strcmp(d->engine, "mpi")) {
        fprintf(stderr, "vram train: --ranks starts the ranks with mpirun for --dist mpi; for --dist %s start them "
                        "yourself (mpirun, torchrun)\n", d->engine);
        return 2;
    }
    if (saving) {
        fprintf(stderr, "vram train: --save and --resume are not supported with --dist yet\n");
        return 2;
    }
    if (loss_scaled && d->zero) {
        fprintf(stderr, "vram train: --zero 1 with loss scaling (fp16) is not supported yet: use --precision bf16 or "
                        "--loss-scale off, or plain data parallel\n");
        return 2;
    }
    const char *engine = d->engine ? d->engine : "mpi";
    if (on_gpu != !strcmp(engine, "nccl")) {
        fprintf(stderr, "vram train: --dist %s communicates %s memory: use --dist %s with --device %s\n", engine,
                on_gpu ? "host" : "GPU", on_gpu ? "nccl" : "mpi", on_gpu ? "cuda[:N]" : "cpu");
        return 2;
    }
    return 0;
}

int vram_train_dist_relaunch(const vram_train_dist *d, int argc, char **argv) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "vram train: --ranks: cannot find this program's path: %s\n", strerror(errno));
        return 1;
    }
    exe[n] = '\0';
    char **args = calloc((size_t)argc + 12, sizeof *args);
    char count[16];
    if (!args) {
        fprintf(stderr, "vram train: --ranks: out of host memory\n");
        return 1;
    }
    snprintf(count, sizeof count, "%d", d->ranks);
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "-n";
    args[k++] = count;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0 && d->ranks > cpus) args[k++] = "--oversubscribe";
    if (geteuid() == 0) { /* Open MPI refuses root without both */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    args[k++] = exe;
    args[k++] = "train";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks")) {
            i++;
            continue;
        }
        args[k++] = argv[i];
    }
    if (!d->engine) args[k++] = "--dist", args[k++] = "mpi";
    fflush(stdout);
    execvp("mpirun", args);
    int e = errno;
    free(args);
    if (e == ENOENT)
        fprintf(stderr, "vram train: --ranks %d: mpirun is not installed (not on PATH): install Open MPI (Debian: "
                        "apt-get install openmpi-bin), or start the ranks yourself\n", d->ranks);
    else
        fprintf(stderr, "vram train: --ranks %d: cannot run mpirun: %s\n", d->ranks, strerror(e));
    return 1;
}

static char term_msg[256];
static size_t term_len;

/* mpirun stops the other ranks with SIGTERM when one dies: say so, then end. */
static void on_term(int sig) {
    (void)sig;
    ssize_t w = write(STDERR_FILENO, term_msg, term_len);
    (void)w;
    _exit(1);
}

int vram_train_dist_launch(vram_train_dist *d, const char *device, char *spec, size_t cap) {
    if (!d->engine) return 0;
    vram_status s = vram_launch_read(&d->launch);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: --dist %s: %s\n", d->engine, vram_last_error());
        return 2;
    }
    d->rank = d->launch.rank;
    d->size = d->launch.size;
    if (!strcmp(device, "cuda")) snprintf(spec, cap, "cuda:%d", d->launch.local_rank); /* one GPU a rank */
    term_len = (size_t)snprintf(term_msg, sizeof term_msg,
                                "vram train: rank %d of %d: stopped by the launcher (SIGTERM): another rank ended "
                                "first; its message says why\n", d->rank, d->size);
    if (term_len >= sizeof term_msg) term_len = sizeof term_msg - 1;
    signal(SIGTERM, on_term);
    return 0;
}

int vram_train_dist_start(vram_train_dist *d, vram_runtime *rt, vram_param_list *params) {
    if (!d->engine) return 0;
    vram_comm_engine e = !strcmp(d->engine, "nccl") ? VRAM_COMM_NCCL : VRAM_COMM_MPI;
    vram_status s = vram_comm_open(e, &d->launch, rt, d->timeout_s, &d->comm);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: rank %d of %d: --dist %s: %s\n", d->rank, d->size, d->engine, vram_last_error());
        return 1;
    }
    if (d->rank > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "vram train: rank %d: cannot quiet stdout: %s\n", d->rank, strerror(errno));
        return 1;
    }
    vram_ddp_config cfg = {(uint64_t)(d->bucket_mb * 1e6), d->zero};
    s = vram_ddp_new(d->comm, params, &cfg, &d->ddp);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: rank %d of %d: data parallel set-up: %s\n", d->rank, d->size, vram_last_error());
        return 1;
    }
    return 0;
}

void vram_train_dist_describe(const vram_train_dist *d, int batch) {
    if (!d->ddp) return;
    int nb = vram_ddp_bucket_count(d->ddp);
    printf("data parallel: %d ranks x batch %d = %d sequences a micro-batch (launcher %s), %s, %s, %d bucket%s of up "
           "to %g MB, communication buffers %.2f MiB per rank\n", d->size, batch, d->size * batch, d->launch.launcher,
           vram_comm_describe(d->comm), d->zero ? "ZeRO-1" : "DDP", nb, nb == 1 ? "" : "s", d->bucket_mb,
           vram_ddp_comm_bytes(d->ddp) / 1048576.0);
}

void vram_train_dist_rows(const vram_train_dist *d, int batch, int64_t *total, int64_t *first) {
    *total = (int64_t)batch * d->size;
    *first = (int64_t)batch * d->rank;
}

int vram_train_dist_mean(vram_train_dist *d, double *v) {
    if (!d->comm) return 0;
    vram_status s = vram_comm_allreduce_host(d->comm, v, 1);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: rank %d of %d: %s\n", d->rank, d->size, vram_last_error());
        return 1;
    }
    *v /= d->size;
    return 0;
}

static int grow(vram_train_dist *d) {
    if (d->steps_seen < d->steps_cap) return 1;
    int cap = d->steps_cap ? d->steps_cap * 2 : 256;
    double **arrays[4] = {&d->comm_ms, &d->hidden_ms, &d->exposed_ms, &d->step_ms};
    for (int i = 0; i < 4; i++) {
        double *p = realloc(*arrays[i], sizeof *p * (size_t)cap);
        if (!p) return 0;
        *arrays[i] = p;
    }
    d->steps_cap = cap;
    return 1;
}

void vram_train_dist_step(vram_train_dist *d, int step, double step_s, int print) {
    if (!d->ddp) return;
    vram_ddp_stats st;
    vram_ddp_last_stats(d->ddp, &st);
    if (grow(d)) {
        int i = d->steps_seen++;
        d->comm_ms[i] = st.comm_s * 1e3, d->hidden_ms[i] = st.hidden_s * 1e3;
        d->exposed_ms[i] = st.exposed_s * 1e3, d->step_ms[i] = step_s * 1e3;
    }
    if (print)
        printf("dist step %d: step %.1f ms = compute %.1f ms + exposed communication %.1f ms | communication %.1f ms, "
               "%.0f%% hidden behind backward\n", step, step_s * 1e3, (step_s - st.exposed_s) * 1e3, st.exposed_s * 1e3,
               st.comm_s * 1e3, st.comm_s > 0 ? 100.0 * st.hidden_s / st.comm_s : 0.0);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of v[1..n) (the first step also allocates: left out when there are others). */
static double median_after_first(double *v, int n) {
    if (n > 1) v++, n--;
    if (n < 1) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { CATS = VRAM_CLI_CATEGORIES + 1, FIELDS = CATS + 2 };

int vram_train_dist_report(vram_train_dist *d, vram_allocator *a, const vram_optimizer *opt) {
    if (!d->ddp) {
        printf("optimizer state: %llu bytes\n", (unsigned long long)vram_optimizer_state_bytes(opt));
        return 0;
    }
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    double mine[FIELDS], *all = calloc((size_t)FIELDS * (size_t)d->size, sizeof *all);
    if (!all) {
        fprintf(stderr, "vram train: rank %d: out of host memory for the report\n", d->rank);
        return 1;
    }
    for (int i = 0; i < VRAM_CLI_CATEGORIES; i++) mine[i] = (double)st.tags[vram_cli_categories[i].tag].allocated_bytes.peak;
    mine[CATS - 1] = (double)st.tags[vram_ddp_comm_tag(d->ddp)].allocated_bytes.peak;
    mine[CATS] = (double)vram_ddp_optimizer_state_bytes(d->ddp, opt);
    mine[CATS + 1] = (double)vram_ddp_comm_bytes(d->ddp);
    vram_status s = vram_comm_allgather_host(d->comm, mine, FIELDS, all);
    if (s != VRAM_OK) {
        fprintf(stderr, "vram train: rank %d of %d: gathering the report: %s\n", d->rank, d->size, vram_last_error());
        free(all);
        return 1;
    }
    int n = d->steps_seen;
    double step = median_after_first(d->step_ms, n), comm = median_after_first(d->comm_ms, n);
    double hidden = median_after_first(d->hidden_ms, n), exposed = median_after_first(d->exposed_ms, n);
    printf("data parallel (rank 0, medians over steps after the first): step %.1f ms = compute %.1f ms + exposed "
           "communication %.1f ms; communication %.1f ms, of it %.1f ms (%.0f%%) hidden behind backward\n",
           step, step - exposed, exposed, comm, hidden, comm > 0 ? 100.0 * hidden / comm : 0.0);
    printf("\nPer rank (peak bytes by category, allocator per-tag statistics)\n  %-16s", "category");
    for (int r = 0; r < d->size; r++) printf(" %14s%-3d", "rank ", r);
    printf("\n");
    for (int i = 0; i < FIELDS; i++) {
        const char *label = i < VRAM_CLI_CATEGORIES ? vram_cli_categories[i].label
                            : i == CATS - 1         ? "communication"
                            : i == CATS             ? "opt state now"
                                                    : "comm buffers";
        printf("  %-16s", label);
        for (int r = 0; r < d->size; r++) printf(" %17.0f", all[(size_t)r * FIELDS + (size_t)i]);
        printf("\n");
    }
    printf("optimizer state: %.0f bytes on rank 0 (%s)\n", all[CATS], d->zero ? "its shard" : "a whole copy");
    free(all);
    return 0;
}

void vram_train_dist_fault(const vram_train_dist *d, int step) {
    int f = vram_comm_fault_due(d->comm, step);
    if (!f) return;
    fprintf(stderr, "vram train: rank %d: VRAM_DIST_FAULT: %s at step %d\n", d->rank, f == 2 ? "hanging" : "ending abruptly",
            step);
    if (f == 1) _exit(3);
    for (;;) pause(); /* (until a signal ends it: the launcher's, once another rank gave up on it) */
}

void vram_train_dist_abort(vram_train_dist *d) {
    if (!d->comm) return;
    fflush(stdout);
    fflush(stderr);
    vram_comm_abort(d->comm);
}

void vram_train_dist_end(vram_train_dist *d) {
    vram_ddp_free(d->ddp);
    d->ddp = NULL;
    vram_comm_close(d->comm);
    d->comm = NULL;
    free(d->comm_ms);
    free(d->hidden_ms);
    free(d->exposed_ms);
    free(d->step_ms);
    d->comm_ms = d->hidden_ms = d->exposed_ms = d->step_ms = NULL;
}
