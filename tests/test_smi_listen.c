/* test_smi_listen.c — `vram smi --listen` under clients that misbehave and limits that bite
 * (issue 41): a client trickling a byte at a time, dozens of idle connections, a request too
 * large, a stop signal while clients hang on, and a process out of file descriptors. Each
 * check is timed: /metrics must answer within SCRAPE_MS while the others hold their
 * connections, and the server must close a trickling client at its one deadline (5 s from its
 * connect), stop within a second of SIGTERM, and not spin when accept() fails with EMFILE.
 *
 * The server runs as a child with the fake NVML (tests/smi_proc.h). The test is one thread:
 * the slow client's bytes are sent between the timed scrapes.
 */
#include <errno.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "check.h"
#include "smi_proc.h"

#define SCRAPE_MS 500.0 /* generous for a loaded test machine; the load bench measures the real figure */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* GET /metrics; returns the seconds it took, or -1 when the answer is not a 200. */
static double timed_scrape(int port) {
    double t0 = now_s();
    char *r = http_get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    double dt = now_s() - t0;
    int ok = r && !strncmp(r, "HTTP/1.1 200 OK", 15) && strstr(r, "vram_gpu_memory_used_bytes");
    free(r);
    return ok ? dt : -1;
}

/* 1 when the server has closed fd (EOF or reset) within `secs`. */
static int closed_within(int fd, double secs) {
    double end = now_s() + secs;
    for (;;) {
        int left = (int)((end - now_s()) * 1000);
        if (left <= 0) return 0;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, left) > 0) {
            char b[4096];
            ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN)) return 1;
        }
    }
}

static double cpu_seconds(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *s = slurp(path, NULL);
    char *p = strrchr(s, ')');
    unsigned long long ut = 0, st = 0;
    /* fields after the command: state(3) ... utime(14) stime(15) */
    if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st);
    free(s);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void stop_server(proc p, const char *what) {
    double t0 = now_s();
    kill(p.pid, SIGTERM);
    result r = finish(p, 5.0);
    double dt = now_s() - t0;
    CHECK(r.status == 0 && dt < 1.0, "%s: SIGTERM stops it cleanly in %.3f s (status %d): %s", what, dt, r.status, r.err);
    result_free(&r);
}

/* A trickling client and 40 idle ones: scrapes stay fast, the trickler meets its deadline, and
 * SIGTERM with all of them connected stops the server at once. */
static void test_slow_and_idle(void) {
    proc p = start(ENV("FAKE_NVML_GPUS=2"), ARGS("--listen", "127.0.0.1:0"));
    int port = wait_port(&p);
    CHECK(port > 0, "server announced its port");
    if (port <= 0) {
        stop_server(p, "no port");
        return;
    }
    int slow = connect_to(port);
    double t_slow = now_s(), worst = 0;
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: trickle\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    size_t sent = 0;
    int all_ok = 1, closed = 0;
    double life = 0;
    /* the trickler sends a byte every 250 ms (before issue 41 this held /metrics for seconds)
     * until the server closes it, which each turn looks for first, so `life` is when it did */
    for (int i = 0; i < 40 && !closed; i++) {
        if ((closed = closed_within(slow, 0.01))) break;
        life = now_s() - t_slow;
        if (send(slow, req + sent % (sizeof req - 1), 1, MSG_NOSIGNAL) == 1) sent++;
        double dt = timed_scrape(port);
        if (dt < 0) all_ok = 0;
        if (dt > worst) worst = dt;
        sleep_ms(250);
    }
    CHECK(all_ok && worst * 1e3 < SCRAPE_MS, "scrapes beside a trickling client: all 200, slowest %.1f ms", worst * 1e3);
    CHECK(closed && life >= 4.5 && life < 7.0,
          "the trickling client is closed at its deadline: last seen open after %.2f s (%zu bytes)", life, sent);
    close(slow);

    int idle[40];
    for (int i = 0; i < 40; i++) idle[i] = connect_to(port);
    worst = 0;
    all_ok = 1;
    for (int i = 0; i < 5; i++) {
        double dt = timed_scrape(port);
        if (dt < 0) all_ok = 0;
        if (dt > worst) worst = dt;
    }
    CHECK(all_ok && worst * 1e3 < SCRAPE_MS, "scrapes beside 40 idle connections: all 200, slowest %.1f ms", worst * 1e3);

    /* a request past the 8 KiB limit gets 431 and the connection closed */
    char big[9000];
    memset(big, 'a', sizeof big - 1);
    memcpy(big, "GET /metrics HTTP/1.1\r\nX-Big: ", 30);
    big[sizeof big - 1] = '\0';
    char *r = http_get(port, big);
    CHECK(r && !strncmp(r, "HTTP/1.1 431", 12), "an oversized request is refused with 431: %.40s", r ? r : "(none)");
    free(r);

    slow = connect_to(port);
    send(slow, "GE", 2, MSG_NOSIGNAL);
    stop_server(p, "40 idle and a half-sent request");
    for (int i = 0; i < 40; i++) close(idle[i]);
    close(slow);
}

/* The lowest descriptor number the process does not hold: its next open() or accept() gets
 * it, so an RLIMIT_NOFILE of that number makes the next one fail with EMFILE. */
static int lowest_free_fd(pid_t pid) {
    char path[64];
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
        struct stat st;
        if (lstat(path, &st) != 0) return fd;
    }
    return 4096;
}

/* Once serving, the server's RLIMIT_NOFILE is lowered (prlimit) to its lowest free descriptor, so
 * every accept() fails with EMFILE. It must not spin (before issue 41: 100% of a core), and it
 * closes the waiting clients rather than leave them hanging in the backlog. */
static void test_out_of_descriptors(void) {
    proc p = start(ENV("FAKE_NVML_GPUS=1"), ARGS("--listen", "127.0.0.1:0"));
    int port = wait_port(&p);
    CHECK(port > 0, "server announced its port");
    if (port <= 0) {
        stop_server(p, "no port");
        return;
    }
    int held = lowest_free_fd(p.pid);
    struct rlimit old = {0, 0}, low;
    prlimit(p.pid, RLIMIT_NOFILE, NULL, &old);
    low = old;
    low.rlim_cur = (rlim_t)held; /* the soft limit only, so it can be raised again */
    CHECK(held > 3 && prlimit(p.pid, RLIMIT_NOFILE, &low, NULL) == 0, "RLIMIT_NOFILE of the server lowered to %d", held);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_to(port);
        send(fds[i], "GET /metrics HTTP/1.0\r\n\r\n", 25, MSG_NOSIGNAL);
    }
    double c0 = cpu_seconds(p.pid);
    sleep_ms(1000);
    double cpu = cpu_seconds(p.pid) - c0;
    CHECK(cpu < 0.2, "RLIMIT_NOFILE=%d: %.2f s of CPU in 1 s with accept() failing (no spin)", held, cpu);
    int n = 0;
    for (int i = 0; i < 4; i++) n += closed_within(fds[i], 0.5);
    CHECK(n == 4, "RLIMIT_NOFILE=%d: %d of 4 clients closed, none left hanging", held, n);
    for (int i = 0; i < 4; i++) close(fds[i]);
    CHECK(prlimit(p.pid, RLIMIT_NOFILE, &old, NULL) == 0, "RLIMIT_NOFILE raised again: %s", strerror(errno));
    double dt = timed_scrape(port);
    CHECK(dt >= 0 && dt * 1e3 < SCRAPE_MS, "with descriptors again, /metrics answers (%.1f ms)", dt * 1e3);
    stop_server(p, "out of descriptors");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vram_test_smi_listen_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    test_slow_and_idle();
    test_out_of_descriptors();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_done();
}
