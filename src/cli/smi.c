/* smi.c — `vram smi`: GPU memory per device and per process, once or live, as a table, CSV in
 * nvidia-smi's shape, JSON lines, Prometheus text, or over HTTP for a scraper.
 *
 * The command opens one vram_smi session (NVML loaded and initialised once, handles kept) and
 * takes samples from it: once, every -l SEC / --loop-ms MS on an absolute schedule (so the
 * period does not drift by the time a sample takes), or once per HTTP request with --listen.
 *
 * Output discipline: everything a sample produces is rendered into a buffer and written with
 * one write() per piece: a whole table frame, a whole JSON line, a sample's CSV rows. A reader
 * of the stream, or a file after `kill -9`, then holds complete lines only. SIGINT, SIGTERM and
 * SIGHUP only set a flag; the loop notices it (the sleep returns early) and leaves the terminal
 * as it found it (cursor shown again). A closed pipe (`| head`) ends the loop quietly.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "smi_out.h"
#include "vram/smi.h"

#define HIST_MAX 60

enum smi_mode { MODE_TABLE, MODE_CSV, MODE_JSON, MODE_PROMETHEUS };
enum log_format { LOG_NONE, LOG_CSV, LOG_JSON };

typedef struct smi_opts {
    int mode;
    int64_t interval_ms; /* 0: one sample */
    int64_t count;       /* samples to take in loop mode, 0: until stopped */
    smi_csv csv;
    int csv_fields_given;
    const char *ids;
    int64_t pid;         /* -1: all processes */
    const char *listen;
    int allow_remote;
    const char *log_path;
    int log_format;
    int ascii;
} smi_opts;

typedef struct smi_run {
    vram_smi *smi;
    uint32_t *indices;
    size_t n;
    vram_smi_device *devs;
    int64_t pid;
} smi_run;

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) { stop_flag = sig; }

static void usage(FILE *out) {
    fprintf(out,
            "usage: vram smi [options]\n"
            "\n"
            "GPU memory per device and per process (from NVML, loaded at run time).\n"
            "\n"
            "  -l, --loop SEC          sample every SEC seconds (default 1 with a bare -l), refreshed in place\n"
            "  --loop-ms MS, -lms MS   sample every MS milliseconds\n"
            "  --count N               stop after N samples (with -l)\n"
            "  -i, --id N[,M...]       only these GPUs (NVML indices, or UUIDs / UUID prefixes GPU-...)\n"
            "  --pid PID               only this process; with -l, stop when it exits\n"
            "  --json                  one JSON object per sample, one per line (a stream with -l)\n"
            "  --csv[=noheader,nounits]  CSV in nvidia-smi's shape (memory.used [MiB], ...)\n"
            "  --format=csv[,noheader][,nounits]  the same, spelled as nvidia-smi does\n"
            "  --query-gpu=F,...       CSV fields per GPU: timestamp, index, name, uuid, driver_version,\n"
            "                          memory.total, memory.reserved, memory.used, memory.free,\n"
            "                          utilization.gpu, utilization.memory, temperature.gpu, power.draw,\n"
            "                          power.limit\n"
            "  --query-compute-apps=F,...  CSV rows per process: timestamp, gpu_index, gpu_uuid, gpu_name,\n"
            "                          pid, process_name, command, user, type, used_memory\n"
            "  --noheader, --nounits   CSV switches\n"
            "  --prometheus            Prometheus text exposition format (one sample)\n"
            "  --listen ADDR:PORT      serve /metrics over HTTP (loopback only unless --allow-remote)\n"
            "  --allow-remote          allow --listen on an address other than 127.0.0.0/8 or ::1\n"
            "  --log FILE              with -l, also append each sample to FILE (.csv, or .json/.jsonl)\n"
            "  --log-format csv|json   the log's format when the extension does not say\n"
            "  --ascii                 draw the history with ASCII instead of Unicode blocks\n"
            "  -h, --help              this text\n"
            "\n"
            "VRAM_NVML_LIBRARY=PATH loads NVML from PATH instead of libnvidia-ml.so.1.\n"
            "Memory used is NVML's v2 figure (as nvidia-smi), without the driver's reservation, which\n"
            "is shown as memory.reserved; N/A marks what a GPU does not report.\n");
}

static int bad(const char *fmt, const char *arg) {
    fprintf(stderr, "vram smi: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(try 'vram smi --help')\n");
    return 2;
}

/* Parses a non-negative integer that must fill the whole string. */
static int parse_int(const char *t, int64_t max, int64_t *out) {
    if (!t || !*t || strspn(t, "0123456789") != strlen(t) || strlen(t) > 18) return -1;
    int64_t v = strtoll(t, NULL, 10);
    if (v > max) return -1;
    *out = v;
    return 0;
}

/* Whether -i's list is well formed before any GPU is asked: every comma-separated item is an
 * index or a UUID (prefix) starting GPU- or MIG-, none empty. 0 or -1. */
static int ids_syntax(const char *ids) {
    for (const char *p = ids;; p++) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char item[256];
        if (!n || n >= sizeof item) return -1;
        memcpy(item, p, n);
        item[n] = '\0';
        int64_t idx;
        if (strncmp(item, "GPU-", 4) && strncmp(item, "MIG-", 4) && parse_int(item, UINT32_MAX, &idx) != 0) return -1;
        if (!comma) return 0;
        p = comma;
    }
}

/* Whether the argument after a bare -l is its value: anything but an option, and a negative
 * number too ("-l -1" is a bad interval, not an unknown option '-1'). */
static int loop_value(const char *next) {
    return next[0] != '-' || isdigit((unsigned char)next[1]) || next[1] == '.';
}

static int parse_seconds(const char *t, int64_t *ms) {
    char *end;
    errno = 0;
    double s = strtod(t, &end);
    if (end == t || *end || errno || !(s > 0) || s > 86400.0) return -1;
    *ms = (int64_t)(s * 1000.0 + 0.5);
    return *ms >= 10 ? 0 : -1;
}

static int csv_switches(smi_opts *o, const char *list, int from_format) {
    char *copy = strdup(list); /* (whole: a cut copy would not see a bad option at its end) */
    if (!copy) return bad("%s", "out of host memory");
    int saw_csv = 0, rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "csv")) saw_csv = 1;
        else if (!strcmp(tok, "noheader")) o->csv.header = 0;
        else if (!strcmp(tok, "nounits")) o->csv.units = 0;
        else rc = bad("unknown CSV option '%s' (use csv, noheader, nounits)", tok);
    }
    free(copy);
    if (rc) return rc;
    if (from_format && !saw_csv) return bad("--format=%s: only csv is supported (e.g. --format=csv,noheader,nounits)", list);
    return 0;
}

/* "--name=value" or "--name value": returns the value or NULL (and sets *bad_arg). */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) == 0 && a[n] == '=') return a + n + 1;
    if (strcmp(a, name) == 0) {
        if (*i + 1 < argc) return argv[++*i];
        *missing = 1;
    }
    return NULL;
}

static int parse_args(int argc, char **argv, smi_opts *o) {
    memset(o, 0, sizeof *o);
    o->pid = -1;
    o->csv.header = 1;
    o->csv.units = 1;
    int json = 0, csv = 0, prom = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        char err[1200];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "-l") || !strcmp(a, "--loop") || !strncmp(a, "--loop=", 7)) {
            const char *val = !strncmp(a, "--loop=", 7) ? a + 7 : i + 1 < argc && loop_value(argv[i + 1]) ? argv[++i] : "1";
            if (parse_seconds(val, &o->interval_ms) != 0)
                return bad("bad -l interval '%s': expected seconds such as 1 or 0.5, from 0.01 to 86400 (a day)", val);
        } else if ((v = opt_value(argc, argv, &i, "--loop-ms", &missing)) || (v = opt_value(argc, argv, &i, "-lms", &missing))) {
            int64_t ms;
            if (parse_int(v, 86400000, &ms) != 0 || ms < 10)
                return bad("bad --loop-ms '%s': expected whole milliseconds from 10 to 86400000 (a day)", v);
            o->interval_ms = ms;
        } else if ((v = opt_value(argc, argv, &i, "--count", &missing)) || (v = opt_value(argc, argv, &i, "-c", &missing))) {
            if (parse_int(v, INT64_MAX / 2, &o->count) != 0 || o->count == 0)
                return bad("bad --count '%s': expected a number of samples >= 1", v);
        } else if ((v = opt_value(argc, argv, &i, "-i", &missing)) || (v = opt_value(argc, argv, &i, "--id", &missing))) {
            o->ids = v;
        } else if ((v = opt_value(argc, argv, &i, "--pid", &missing))) {
            if (parse_int(v, 4194304, &o->pid) != 0 || o->pid == 0) return bad("bad --pid '%s': expected a process id", v);
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--csv")) {
            csv = 1;
        } else if (!strncmp(a, "--csv=", 6)) {
            csv = 1;
            if (csv_switches(o, a + 6, 0)) return 2;
        } else if ((v = opt_value(argc, argv, &i, "--format", &missing))) {
            csv = 1;
            if (csv_switches(o, v, 1)) return 2;
        } else if (!strcmp(a, "--noheader")) {
            o->csv.header = 0;
        } else if (!strcmp(a, "--nounits")) {
            o->csv.units = 0;
        } else if ((v = opt_value(argc, argv, &i, "--query-gpu", &missing))) {
            csv = 1;
            if (o->csv_fields_given && o->csv.apps)
                return bad("%s", "choose one of --query-gpu and --query-compute-apps");
            o->csv.apps = 0;
            if (smi_csv_parse_fields(&o->csv, v, err, sizeof err) != 0) return bad("%s", err);
            o->csv_fields_given = 1;
        } else if ((v = opt_value(argc, argv, &i, "--query-compute-apps", &missing))) {
            csv = 1;
            if (o->csv_fields_given && !o->csv.apps)
                return bad("%s", "choose one of --query-gpu and --query-compute-apps");
            o->csv.apps = 1;
            if (smi_csv_parse_fields(&o->csv, v, err, sizeof err) != 0) return bad("%s", err);
            o->csv_fields_given = 1;
        } else if (!strcmp(a, "--prometheus")) {
            prom = 1;
        } else if ((v = opt_value(argc, argv, &i, "--listen", &missing))) {
            o->listen = v;
        } else if (!strcmp(a, "--allow-remote")) {
            o->allow_remote = 1;
        } else if ((v = opt_value(argc, argv, &i, "--log", &missing))) {
            o->log_path = v;
        } else if ((v = opt_value(argc, argv, &i, "--log-format", &missing))) {
            if (!strcmp(v, "csv")) o->log_format = LOG_CSV;
            else if (!strcmp(v, "json")) o->log_format = LOG_JSON;
            else return bad("bad --log-format '%s': use csv or json", v);
        } else if (!strcmp(a, "--ascii")) {
            o->ascii = 1;
        } else if (missing) {
            return bad("%s needs a value", a);
        } else {
            static const char *const flags[] = {"--help", "--loop", "--loop-ms", "--count", "--id", "--pid", "--json",
                                                "--csv", "--format", "--noheader", "--nounits", "--query-gpu",
                                                "--query-compute-apps", "--prometheus", "--listen", "--allow-remote",
                                                "--log", "--log-format", "--ascii"};
            vram_cli_unknown("vram smi", "option", a, flags, sizeof flags / sizeof *flags, "vram smi --help");
            return 2;
        }
        if (missing) return bad("%s needs a value", a);
    }
    if (json + csv + prom > 1) return bad("%s", "choose one of --json, --csv and --prometheus");
    o->mode = json ? MODE_JSON : csv ? MODE_CSV : prom ? MODE_PROMETHEUS : MODE_TABLE;
    if (o->listen && (json || csv || o->interval_ms || o->log_path))
        return bad("%s", "--listen serves Prometheus text on each request; it takes no -l, --json, --csv or --log");
    if (o->allow_remote && !o->listen) return bad("%s", "--allow-remote only goes with --listen");
    if (o->listen && smi_http_check(o->listen, o->allow_remote)) return 2;
    if (o->ids && ids_syntax(o->ids) != 0)
        return bad("bad -i '%s': expected GPU indices or UUIDs such as 0, 0,2 or GPU-32d536a6", o->ids);
    if (prom && o->interval_ms)
        return bad("%s", "--prometheus prints one sample; use --listen ADDR:PORT to serve it to a scraper");
    if (o->count && !o->interval_ms) return bad("%s", "--count goes with -l or --loop-ms");
    if (o->mode == MODE_CSV && !o->csv_fields_given) smi_csv_default_fields(&o->csv, 0);
    if (o->log_path && !o->log_format) {
        const char *dot = strrchr(o->log_path, '.');
        if (dot && !strcasecmp(dot, ".csv")) o->log_format = LOG_CSV;
        else if (dot && (!strcasecmp(dot, ".json") || !strcasecmp(dot, ".jsonl") || !strcasecmp(dot, ".ndjson")))
            o->log_format = LOG_JSON;
        else return bad("cannot tell the format of --log %s from its name: end it in .csv or .jsonl, or give --log-format csv|json", o->log_path);
    }
    return 0;
}

/* Writes all of p with as few write() calls as the kernel allows (one, unless interrupted).
 * Returns 0, or -1 with errno. */
static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static vram_status take_sample(smi_run *r, smi_sample *s) {
    double t0 = mono_s();
    s->time_ms = now_ms();
    s->driver = vram_smi_driver_version(r->smi);
    s->count = r->n;
    s->devs = r->devs;
    for (size_t i = 0; i < r->n; i++) {
        vram_smi_device_clear(&r->devs[i]);
        vram_status st = vram_smi_device_query(r->smi, r->indices[i], &r->devs[i]);
        if (st != VRAM_OK) return st;
        if (r->pid >= 0) { /* keep only the followed process */
            vram_smi_device *d = &r->devs[i];
            size_t k = 0;
            for (size_t j = 0; j < d->process_count; j++)
                if (d->processes[j].pid == (uint32_t)r->pid) d->processes[k++] = d->processes[j];
            d->process_count = k;
        }
    }
    s->duration_s = mono_s() - t0;
    return VRAM_OK;
}

static int render_metrics(void *ctx, smi_buf *body) {
    smi_sample s;
    if (take_sample(ctx, &s) != VRAM_OK) return -1;
    smi_render_prometheus(body, &s);
    return 0;
}

static int select_devices(smi_run *r, const char *ids) {
    uint32_t count = vram_smi_device_count(r->smi);
    r->indices = calloc(count ? count : 1, sizeof *r->indices);
    r->devs = calloc(count ? count : 1, sizeof *r->devs);
    if (!r->indices || !r->devs) {
        fprintf(stderr, "vram smi: out of host memory\n");
        return 2;
    }
    if (!ids) {
        for (uint32_t i = 0; i < count; i++) r->indices[r->n++] = i;
        return 0;
    }
    char *copy = strdup(ids); /* (any length: a list of full UUIDs is long) */
    if (!copy) {
        fprintf(stderr, "vram smi: out of host memory\n");
        return 2;
    }
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t idx = -1;
        if (!strncmp(tok, "GPU-", 4) || !strncmp(tok, "MIG-", 4)) { /* a UUID, or a prefix of one, as nvidia-smi -i */
            uint32_t matches = 0;
            for (uint32_t i = 0; i < count; i++) {
                vram_smi_device d;
                if (vram_smi_device_query(r->smi, i, &d) == VRAM_OK && (d.valid & VRAM_SMI_HAS_UUID) &&
                    !strncmp(d.uuid, tok, strlen(tok))) {
                    if (!matches++) idx = i;
                }
                vram_smi_device_clear(&d);
            }
            if (idx < 0) {
                fprintf(stderr, "vram smi: no GPU has the UUID %s\n", tok);
                rc = 2;
                break;
            }
            if (matches > 1) {
                fprintf(stderr, "vram smi: -i %s: %u GPUs have UUIDs starting so; give more of the UUID\n", tok, matches);
                rc = 2;
                break;
            }
        } else {
            parse_int(tok, UINT32_MAX, &idx); /* well formed: parse_args checked the list (ids_syntax) */
        }
        if ((uint64_t)idx >= count) {
            fprintf(stderr, "vram smi: no GPU %lld: NVML reports %u GPU%s (indices 0-%u)\n", (long long)idx, count,
                    count == 1 ? "" : "s", count - 1);
            rc = 2;
            break;
        }
        int dup = 0;
        for (size_t j = 0; j < r->n; j++) dup |= r->indices[j] == (uint32_t)idx;
        if (!dup && r->n < count) r->indices[r->n++] = (uint32_t)idx;
    }
    free(copy);
    if (!rc && !r->n) return bad("bad -i '%s': no GPU index given", ids);
    return rc;
}

static int utf8_locale(void) {
    const char *vars[3] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return strcasestr(v, "utf-8") || strcasestr(v, "utf8");
    }
    return 0;
}

static int pid_alive(int64_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld", (long long)pid);
    struct stat st;
    return stat(path, &st) == 0;
}

static int run_loop(smi_run *r, const smi_opts *o) {
    int in_place = o->mode == MODE_TABLE && o->interval_ms && isatty(STDOUT_FILENO);
    const char *term = getenv("TERM");
    if (term && !strcmp(term, "dumb")) in_place = 0;
    int log_fd = -1, log_header = 0;
    if (o->log_path) {
        log_fd = open(o->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (log_fd < 0) {
            fprintf(stderr, "vram smi: cannot open --log %s: %s\n", o->log_path, strerror(errno));
            return 2;
        }
        struct stat st;
        log_header = fstat(log_fd, &st) == 0 && st.st_size == 0;
    }
    smi_csv log_csv = {0};
    log_csv.header = 1;
    log_csv.units = 1;
    smi_csv_default_fields(&log_csv, 1);

    double *hist_store = NULL;
    const double **hist = NULL;
    if (o->mode == MODE_TABLE && o->interval_ms) {
        hist_store = malloc(r->n * HIST_MAX * sizeof *hist_store);
        hist = malloc(r->n * sizeof *hist);
        if (!hist_store || !hist) {
            free(hist_store);
            free(hist);
            if (log_fd >= 0) close(log_fd);
            fprintf(stderr, "vram smi: out of host memory\n");
            return 2;
        }
        for (size_t i = 0; i < r->n * HIST_MAX; i++) hist_store[i] = -1.0;
        for (size_t i = 0; i < r->n; i++) hist[i] = hist_store + i * HIST_MAX;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int utf8 = !o->ascii && utf8_locale();

    int rc = 0, first = 1;
    int64_t taken = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    smi_buf out = {0};
    while (!stop_flag) {
        smi_sample s;
        vram_status st = take_sample(r, &s);
        if (st != VRAM_OK) {
            fprintf(stderr, "vram smi: %s\n", vram_last_error());
            rc = 1;
            break;
        }
        out.len = 0;
        switch (o->mode) {
        case MODE_TABLE: {
            int width = 0;
            struct winsize ws;
            if (in_place && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) width = ws.ws_col;
            size_t spark = 0;
            if (hist) {
                spark = width > 40 ? (size_t)(width - 40) : 20;
                if (spark > HIST_MAX) spark = HIST_MAX;
                for (size_t i = 0; i < r->n; i++) { /* shift the history left, newest at the end */
                    double *h = hist_store + i * HIST_MAX;
                    memmove(h, h + 1, (HIST_MAX - 1) * sizeof *h);
                    const vram_smi_device *d = &r->devs[i];
                    h[HIST_MAX - 1] = (d->valid & VRAM_SMI_HAS_MEMORY) && d->total_bytes
                                          ? (double)d->used_bytes / (double)d->total_bytes : -1.0;
                    hist[i] = h + HIST_MAX - spark;
                }
            }
            smi_table_opts to = {hist, spark, width, utf8, in_place ? "\033[K\n" : "\n", host};
            if (in_place) smi_buf_put(&out, first ? "\033[?25l\033[H\033[2J" : "\033[H", first ? 13 : 3);
            else if (!first) smi_buf_put(&out, "\n", 1);
            smi_render_table(&out, &s, &to);
            if (in_place) smi_buf_put(&out, "\033[J", 3);
            break;
        }
        case MODE_CSV:
            if (first && o->csv.header) smi_render_csv_header(&out, &o->csv);
            smi_render_csv_rows(&out, &o->csv, &s);
            break;
        case MODE_JSON: smi_render_json(&out, &s); break;
        case MODE_PROMETHEUS: smi_render_prometheus(&out, &s); break;
        }
        if (out.failed) {
            fprintf(stderr, "vram smi: out of host memory\n");
            rc = 1;
            break;
        }
        if (out.len && write_all(STDOUT_FILENO, out.data, out.len) != 0) {
            if (errno != EPIPE) {
                fprintf(stderr, "vram smi: writing the output: %s\n", strerror(errno));
                rc = 1;
            }
            break;
        }
        if (log_fd >= 0) {
            smi_buf lb = {0};
            if (o->log_format == LOG_JSON) {
                smi_render_json(&lb, &s);
            } else {
                if (log_header) smi_render_csv_header(&lb, &log_csv);
                log_header = 0;
                smi_render_csv_rows(&lb, &log_csv, &s);
            }
            int wr = lb.failed ? -1 : write_all(log_fd, lb.data, lb.len);
            smi_buf_free(&lb);
            if (wr != 0) {
                fprintf(stderr, "vram smi: writing --log %s: %s\n", o->log_path, lb.failed ? "out of host memory" : strerror(errno));
                rc = 1;
                break;
            }
        }
        first = 0;
        taken++;
        if (!o->interval_ms || (o->count && taken >= o->count)) break;
        if (o->pid >= 0 && !pid_alive(o->pid)) {
            fprintf(stderr, "vram smi: process %lld has exited\n", (long long)o->pid);
            break;
        }
        /* Absolute deadlines: the period stays the interval however long a sample took. */
        next.tv_sec += o->interval_ms / 1000;
        next.tv_nsec += (o->interval_ms % 1000) * 1000000L;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) next = now; /* late: no burst */
        while (!stop_flag && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
        }
    }
    if (in_place && !first) write_all(STDOUT_FILENO, "\033[?25h", 6); /* the cursor back */
    smi_buf_free(&out);
    free(hist_store);
    free(hist);
    if (log_fd >= 0) close(log_fd);
    return rc;
}

int vram_cmd_smi(int argc, char **argv) {
    smi_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc == 1) return 0; /* --help */
    if (prc) return prc;

    vram_smi *smi = NULL;
    if (vram_smi_new(&smi) != VRAM_OK) {
        fprintf(stderr, "vram smi: %s\n", vram_last_error());
        return 2;
    }
    if (vram_smi_device_count(smi) == 0) {
        fprintf(stderr, "vram smi: NVML (%s, driver %s) reports no NVIDIA GPU; check nvidia-smi, and in a container "
                        "that the GPUs are passed in (--gpus all)\n",
                vram_smi_library_path(smi), vram_smi_driver_version(smi)[0] ? vram_smi_driver_version(smi) : "?");
        vram_smi_free(smi);
        return 2;
    }
    smi_run r = {smi, NULL, 0, NULL, o.pid};
    int rc = select_devices(&r, o.ids);
    if (!rc && o.pid >= 0 && !pid_alive(o.pid)) {
        fprintf(stderr, "vram smi: no process %lld (not in /proc)\n", (long long)o.pid);
        rc = 2;
    }
    if (!rc) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal; /* no SA_RESTART: the sleep and poll must return */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        if (o.listen) rc = smi_http_serve(o.listen, o.allow_remote, render_metrics, &r, &stop_flag);
        else rc = run_loop(&r, &o);
    }
    for (size_t i = 0; i < r.n; i++) vram_smi_device_clear(&r.devs[i]);
    free(r.devs);
    free(r.indices);
    vram_smi_free(smi);
    return rc;
}
