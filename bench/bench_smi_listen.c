/* bench_smi_listen.c — the scrape latency of `vram smi --listen` under load (issue 41).
 *
 *   bench_smi_listen VRAM_EXE FAKE_NVML_LIB [--clients N] [--slow N] [--seconds S] [--runs R]
 *                    [--bound-ms MS]
 *
 * Each run starts the server on 127.0.0.1 (an ephemeral port) with the fake NVML, then runs N
 * client threads for S seconds: N - slow of them fetch /metrics back to back, each on a new
 * connection; of the `slow` others, half connect and send nothing, half send a byte every 200
 * ms, and each reconnects when the server closes it. Meanwhile a scraper fetches /metrics every
 * 50 ms and times each answer from connect to the last byte (a scrape not answered in 2 s
 * fails). Then SIGTERM, with every client still at it. Printed per run: the scrapes' median,
 * p99 and max, the busy clients' requests/s and failures, and how long the server took to stop
 * (killed after 5 s). Exit status 1 when a scrape failed or took longer than --bound-ms (default
 * 100), or the stop took over 1 s; 2 for bad usage. Loopback only, bounded by S and the counts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop_clients;
static atomic_long busy_requests, busy_failures;
static int port;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int connect_local(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* One GET /metrics on a new connection; 1 when the answer is a whole 200 within 2 s (a server
 * that stalls is a failure, not a hang of the benchmark). */
static int fetch(void) {
    double deadline = now_s() + 2.0;
    int fd = connect_local();
    if (fd < 0) return 0;
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)sizeof req - 1) {
        close(fd);
        return 0;
    }
    char buf[16384];
    size_t n = 0;
    int ok = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)((deadline - now_s()) * 1000);
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        ssize_t r = recv(fd, buf + (n < 64 ? n : 64), sizeof buf - 64, 0);
        if (r <= 0) {
            ok = r == 0 && n >= 15 && !memcmp(buf, "HTTP/1.1 200 OK", 15);
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    return ok;
}

static void *busy_client(void *arg) {
    (void)arg;
    while (!atomic_load(&stop_clients)) {
        if (fetch()) atomic_fetch_add(&busy_requests, 1);
        else atomic_fetch_add(&busy_failures, 1);
    }
    return NULL;
}

/* Idle (arg NULL) or trickling: holds a connection until the server closes it, then another. */
static void *slow_client(void *arg) {
    int trickle = arg != NULL;
    while (!atomic_load(&stop_clients)) {
        int fd = connect_local();
        if (fd < 0) {
            usleep(50000);
            continue;
        }
        for (int sent = 0; !atomic_load(&stop_clients);) {
            struct pollfd p = {fd, POLLIN, 0};
            int pr = poll(&p, 1, 200);
            if (pr > 0) {
                char b[256];
                if (recv(fd, b, sizeof b, 0) <= 0) break; /* closed by the server: reconnect */
            }
            if (trickle && pr == 0) {
                if (send(fd, &"GET /metrics HTTP/1.1\r\nX-Slow: yes"[sent % 34], 1, MSG_NOSIGNAL) != 1) break;
                sent++;
            }
        }
        close(fd);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Starts the server; returns its pid and sets `port` (0 when it did not come up). */
static pid_t start_server(const char *exe, const char *nvml) {
    char errpath[] = "/tmp/bench_smi_listen_XXXXXX";
    int efd = mkstemp(errpath);
    if (efd < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("VRAM_NVML_LIBRARY", nvml, 1);
        setenv("FAKE_NVML_GPUS", "2", 1);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(efd, 2);
        execl(exe, exe, "smi", "--listen", "127.0.0.1:0", (char *)NULL);
        _exit(127);
    }
    port = 0;
    for (int i = 0; i < 500 && !port; i++) {
        usleep(10000);
        char text[512] = "";
        ssize_t n = pread(efd, text, sizeof text - 1, 0);
        if (n > 0) text[n] = '\0';
        char *at = strstr(text, "/metrics");
        while (at && at > text && *at != ':') at--;
        if (at && *at == ':') port = atoi(at + 1);
    }
    close(efd);
    unlink(errpath);
    return pid;
}

typedef struct run_result {
    double median_ms, p99_ms, max_ms, busy_per_s, stop_s;
    long scrapes, failed_scrapes, busy_failures;
    int clean_stop; /* exit status 0 after SIGTERM, within 5 s */
} run_result;

static int one_run(const char *exe, const char *nvml, int clients, int slow, double seconds, run_result *out) {
    pid_t pid = start_server(exe, nvml);
    if (pid <= 0 || !port) {
        fprintf(stderr, "bench_smi_listen: the server did not start (%s)\n", exe);
        if (pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
        return -1;
    }
    atomic_store(&stop_clients, 0);
    atomic_store(&busy_requests, 0);
    atomic_store(&busy_failures, 0);
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    for (int i = 0; i < clients; i++) {
        void *(*fn)(void *) = i < clients - slow ? busy_client : slow_client;
        void *arg = i < clients - slow ? NULL : (i % 2 ? (void *)1 : NULL);
        pthread_create(&th[i], &attr, fn, arg);
    }
    size_t cap = (size_t)(seconds / 0.05) + 16, n = 0;
    double *lat = calloc(cap, sizeof *lat), t_end = now_s() + seconds, t_busy = now_s();
    long failed = 0;
    usleep(200000); /* the clients connected */
    while (now_s() < t_end && n < cap) {
        double t0 = now_s();
        if (fetch()) lat[n++] = (now_s() - t0) * 1e3;
        else failed++;
        double left = 0.05 - (now_s() - t0);
        if (left > 0) usleep((useconds_t)(left * 1e6));
    }
    /* SIGTERM while the clients still connect, send and hang on: it must stop promptly anyway */
    double busy_s = now_s() - t_busy;
    long busy_done = atomic_load(&busy_requests), busy_failed = atomic_load(&busy_failures);
    double t_stop = now_s();
    kill(pid, SIGTERM);
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (now_s() - t_stop > 5.0) { /* not stopped in 5 s: recorded as such, then killed */
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        usleep(1000);
    }
    out->stop_s = now_s() - t_stop;
    atomic_store(&stop_clients, 1);
    for (int i = 0; i < clients; i++) pthread_join(th[i], NULL);
    qsort(lat, n, sizeof *lat, cmp_double);
    out->scrapes = (long)n;
    out->failed_scrapes = failed;
    out->median_ms = n ? lat[n / 2] : 0;
    out->p99_ms = n ? lat[(size_t)((double)(n - 1) * 0.99)] : 0;
    out->max_ms = n ? lat[n - 1] : 0;
    out->busy_per_s = (double)busy_done / busy_s; /* (those cut by the stop not counted) */
    out->busy_failures = busy_failed;
    free(lat);
    free(th);
    pthread_attr_destroy(&attr);
    out->clean_stop = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    return 0;
}

static void print_machine(int argc, char **argv) {
    struct utsname u;
    uname(&u);
    char model[256] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            snprintf(model, sizeof model, "%.200s", c ? c + 2 : line);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    if (f) fclose(f);
    printf("# machine: %s %s %s, %ld cores (%s)\n# command:", u.sysname, u.release, u.machine,
           sysconf(_SC_NPROCESSORS_ONLN), model);
    for (int i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    int clients = 200, slow = 50, runs = 3;
    double seconds = 5, bound_ms = 100;
    if (argc < 3) {
        fprintf(stderr, "usage: bench_smi_listen VRAM_EXE FAKE_NVML_LIB [--clients N] [--slow N] [--seconds S] "
                        "[--runs R] [--bound-ms MS]\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        if (i + 1 >= argc) return fprintf(stderr, "bench_smi_listen: %s needs a value\n", argv[i]), 2;
        double v = atof(argv[i + 1]);
        if (!strcmp(argv[i], "--clients")) clients = (int)v;
        else if (!strcmp(argv[i], "--slow")) slow = (int)v;
        else if (!strcmp(argv[i], "--seconds")) seconds = v;
        else if (!strcmp(argv[i], "--runs")) runs = (int)v;
        else if (!strcmp(argv[i], "--bound-ms")) bound_ms = v;
        else return fprintf(stderr, "bench_smi_listen: unknown option %s\n", argv[i]), 2;
        i++;
    }
    if (clients < 1 || clients > 1000 || slow < 0 || slow > clients || seconds <= 0 || seconds > 120 || runs < 1 ||
        runs > 20 || bound_ms <= 0)
        return fprintf(stderr, "bench_smi_listen: out of range (clients 1-1000, slow <= clients, seconds <= 120, runs 1-20)\n"), 2;
    signal(SIGPIPE, SIG_IGN);
    print_machine(argc, argv);
    printf("# %d clients (%d busy, %d idle or trickling) for %.1f s a run; a scrape every 50 ms\n", clients,
           clients - slow, slow, seconds);
    printf("run | scrapes | failed | median ms | p99 ms | max ms | busy req/s | busy failed | stop s\n");
    fflush(stdout);
    int bad = 0;
    double worst = 0;
    for (int r = 1; r <= runs; r++) {
        run_result x;
        if (one_run(argv[1], argv[2], clients, slow, seconds, &x) != 0) {
            fprintf(stderr, "bench_smi_listen: run %d: the server did not start\n", r);
            bad = 1;
            continue;
        }
        printf("%d | %ld | %ld | %.2f | %.2f | %.2f | %.0f | %ld | %.3f%s\n", r, x.scrapes, x.failed_scrapes, x.median_ms,
               x.p99_ms, x.max_ms, x.busy_per_s, x.busy_failures, x.stop_s, x.clean_stop ? "" : " (not stopped: killed)");
        fflush(stdout);
        if (x.failed_scrapes || x.max_ms > bound_ms || x.stop_s > 1.0 || !x.scrapes || !x.clean_stop) bad = 1;
        if (x.max_ms > worst) worst = x.max_ms;
    }
    printf("slowest scrape %.2f ms, bound %.0f ms: %s\n", worst, bound_ms, bad ? "FAILED" : "ok");
    return bad;
}
