/* smi_proc.h — running `vram smi` as a child for the smi tests (test_smi.c, test_smi_listen.c):
 * start it with the fake NVML and an environment, wait for it with a timeout, collect its
 * stdout and stderr from files in `tmpdir`, and talk HTTP to its --listen port.
 *
 * VRAM_EXE and FAKE_NVML_PATH come from tests/extra.cmake; the including test creates tmpdir.
 */
#ifndef VRAM_TESTS_SMI_PROC_H
#define VRAM_TESTS_SMI_PROC_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FAKE_NVML_PATH
#error "FAKE_NVML_PATH is set by tests/extra.cmake"
#endif

static char tmpdir[256];

/* ---- running the command ----------------------------------------------------------------- */

typedef struct proc {
    pid_t pid;
    char out_path[300], err_path[300];
} proc;

typedef struct result {
    int status; /* exit status, or 128+signal */
    char *out, *err;
    size_t out_len;
} result;

static __attribute__((unused)) char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        char *e = calloc(1, 1);
        if (len) *len = 0;
        return e;
    }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t r;
    while ((r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) b = realloc(b, cap *= 2);
    }
    fclose(f);
    b[n] = '\0';
    if (len) *len = n;
    return b;
}

/* Starts `vram smi ARGS` with the environment: FAKE_NVML_* and VRAM_NVML_LIBRARY cleared, then
 * VRAM_NVML_LIBRARY=the fake, then `env` ("K=V"; "K=" unsets K). stdout goes to a file, or to
 * `out_fd` when >= 0. */
static __attribute__((unused)) proc start_at(const char *const *env, const char *const *args, int out_fd) {
    static int seq;
    proc p;
    memset(&p, 0, sizeof p);
    seq++;
    snprintf(p.out_path, sizeof p.out_path, "%s/out%d", tmpdir, seq);
    snprintf(p.err_path, sizeof p.err_path, "%s/err%d", tmpdir, seq);
    fflush(NULL);
    p.pid = fork();
    if (p.pid == 0) {
        extern char **environ;
        for (int again = 1; again;) {
            again = 0;
            for (char **e = environ; *e; e++) {
                if (!strncmp(*e, "FAKE_NVML_", 10) || !strncmp(*e, "VRAM_NVML_LIBRARY=", 18)) {
                    char name[128];
                    snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
                    unsetenv(name);
                    again = 1;
                    break;
                }
            }
        }
        setenv("VRAM_NVML_LIBRARY", FAKE_NVML_PATH, 1);
        for (size_t i = 0; env && env[i]; i++) {
            char name[128];
            const char *eq = strchr(env[i], '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
            if (eq[1]) setenv(name, eq + 1, 1);
            else unsetenv(name);
        }
        int o = out_fd >= 0 ? out_fd : open(p.out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(p.err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        if (o > 2) close(o);
        close(e);
        const char *argv[64] = {VRAM_EXE, "smi"};
        size_t n = 2;
        for (size_t i = 0; args && args[i] && n < 63; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(VRAM_EXE, (char *const *)argv);
        _exit(127);
    }
    return p;
}

static __attribute__((unused)) proc start(const char *const *env, const char *const *args) { return start_at(env, args, -1); }

/* Waits up to `timeout` seconds (then SIGKILL) and collects the outputs. */
static __attribute__((unused)) result finish(proc p, double timeout) {
    result r = {0};
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = 0;
    for (;;) {
        pid_t w = waitpid(p.pid, &st, WNOHANG);
        if (w == p.pid) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 > timeout) {
            kill(p.pid, SIGKILL);
            waitpid(p.pid, &st, 0);
            fprintf(stderr, "(timed out after %.1f s)\n", timeout);
            break;
        }
        struct timespec d = {0, 2000000};
        nanosleep(&d, NULL);
    }
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = slurp(p.out_path, &r.out_len);
    r.err = slurp(p.err_path, NULL);
    unlink(p.out_path);
    unlink(p.err_path);
    return r;
}

static __attribute__((unused)) result run(const char *const *env, const char *const *args) { return finish(start(env, args), 20.0); }

static __attribute__((unused)) void result_free(result *r) {
    free(r->out);
    free(r->err);
}

static __attribute__((unused)) size_t count_char(const char *s, char c) {
    size_t n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static __attribute__((unused)) void sleep_ms(long ms) {
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}


#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A TCP connection to 127.0.0.1:port, or -1. */
static __attribute__((unused)) int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A plain HTTP client: returns the whole response (headers and body). */
static __attribute__((unused)) char *http_get(int port, const char *request) {
    int fd = connect_to(port);
    if (fd < 0) return NULL;
    struct timeval tv = {10, 0}; /* a server that never answers fails the test, not hangs it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    send(fd, request, strlen(request), MSG_NOSIGNAL);
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    ssize_t got;
    while ((got = recv(fd, b + n, cap - n - 1, 0)) > 0) {
        n += (size_t)got;
        if (cap - n - 1 == 0) b = realloc(b, cap *= 2);
    }
    b[n] = '\0';
    close(fd);
    return b;
}

/* Waits for "...:PORT/metrics" in the server's stderr file. */
static __attribute__((unused)) int wait_port(const proc *p) {
    for (int i = 0; i < 500; i++) {
        char *e = slurp(p->err_path, NULL);
        char *at = strstr(e, "/metrics");
        int port = 0;
        if (at) {
            char *colon = at;
            while (colon > e && *colon != ':') colon--;
            port = atoi(colon + 1);
        }
        free(e);
        if (port) return port;
        if (waitpid(p->pid, NULL, WNOHANG) == p->pid) return 0;
        sleep_ms(10);
    }
    return 0;
}

#endif
