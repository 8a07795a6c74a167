/* replay.c — `vram replay`: allocation traces through the allocator, vram's figures beside
 * PyTorch's.
 *
 * For each trace: load and validate it (a bad trace is one message naming the line, exit 2),
 * replay it on a fresh allocator over the device (sim, 80 GiB, unless told otherwise) and
 * print the peaks next to the ones PyTorch recorded in the trace's header. Options add the
 * smallest capacity that fits (--fit: a binary search of whole replays), the memory summary
 * and a snapshot at the moment reserved memory peaks (found by a second, tracking replay;
 * a third replay stops right after that event, so the allocator is in exactly that state;
 * the snapshot file is written whole or not at all).
 * A partial trace (its own peak below the peak its header records: a trace cut short, or one
 * recorded from a program that failed) is said to be one, and PyTorch's whole-run figures are
 * not shown beside it. With several traces, a closing table compares them all, with geometric
 * means each over one set of traces (print_means). A trace of
 * several programs run in one process ("# workload: NAME" lines, bench/torch_workloads.py
 * --trace) also gets a row per program, each replayed on a fresh allocator and measured from its
 * start (vram_trace_replay_range), as that process measured it.
 *
 * Exit status: 0 every trace ran; 1 a replay ran out of memory (its OOM report is printed) or the
 * output could not be written (said with its reason); 2 bad input or usage.
 */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "vram/replay.h"
#include "vram/snapshot.h"
#include "vram/summary.h"

/* Whether a file may be written at `path` (an existing file writable, not a folder, or a new one
 * creatable in its folder), so that a bad --snapshot path is refused before a long replay rather
 * than after. On failure errno tells why. */
static int path_writable(const char *path) {
    struct stat sb;
    if (!*path) {
        errno = ENOENT;
        return 0;
    }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        errno = EISDIR;
        return 0;
    }
    if (access(path, F_OK) == 0) return access(path, W_OK) == 0;
    char *copy = strdup(path);
    if (!copy) return 0;
    int ok = access(dirname(copy), W_OK | X_OK) == 0;
    free(copy);
    return ok;
}

typedef struct replay_args {
    int json, fit, summary;
    const char *device;
    const char *conf;
    const char *snapshot;
    uint64_t capacity;
    int capacity_given;
} replay_args;

/* What the closing comparison table needs of each trace. */
typedef struct replay_row {
    char name[64];
    uint64_t peak_requested, peak_reserved;
    double ratio, native_ratio, expandable_ratio; /* 0 = unknown */
    double fit_ratio;
    double events_per_second;
    int failed, partial;
} replay_row;

static void usage(FILE *f) {
    fprintf(f,
            "usage: vram replay [options] TRACE...\n"
            "\n"
            "Replays memtrace v1 allocation traces (plain, .gz, or - for stdin) through the vram\n"
            "allocator and prints its peak reserved memory beside PyTorch's recorded figures; a trace\n"
            "of several programs ('# workload: NAME' lines) also gets a row per program.\n"
            "\n"
            "options:\n"
            "  --json             one JSON object per trace, one line each\n"
            "  --capacity SIZE    device capacity, e.g. 80GiB (default 80GiB)\n"
            "  --device SPEC      device to replay on (default sim; e.g. sim:141GiB, host; cudasim:\n"
            "                     a simulated CUDA device: events, aliasing, 64 MiB chunks, as a GPU places;\n"
            "                     cudasim:lag=N: its GPU's work N replayed calls behind the host)\n"
            "  --conf STRING      VRAM_ALLOC_CONF options applied over the environment's\n"
            "  --fit              also find the smallest capacity with no out-of-memory error\n"
            "  --summary          print the memory summary at the peak of reserved memory\n"
            "  --snapshot FILE    write a JSON snapshot at the peak of reserved memory (one trace)\n"
            "  -h, --help         this help\n"
            "\n"
            "exit status: 0 ok, 1 a replay ran out of memory or the output could not be written,\n"
            "2 bad input or usage\n");
}

/* Matches "--name VALUE" and "--name=VALUE"; returns 1 and sets *value (advancing *i), 0 if
 * argv[*i] is another option, -1 when the value is missing. */
static int option_value(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *value = argv[++*i];
    return 1;
}

/* Prints a trace's own text (a header value) printable (vram_text_printable: control characters,
 * terminal escapes among them, and bytes that are not UTF-8 shown as '?'); returns the characters
 * printed (UTF-8 sequences counted once, for column alignment). */
static int put_text(FILE *f, const char *s) {
    char *text = strdup(s);
    if (!text) return fputs("?", f) >= 0; /* (host memory exhausted: the name is left out) */
    vram_text_printable(text);
    fputs(text, f);
    int n = 0;
    for (const char *p = text; *p; p++) n += ((unsigned char)*p & 0xc0) != 0x80;
    free(text);
    return n;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* A recorded figure of the header (bytes), when the trace has it and it is plausible beside
 * `near` bytes (within a factor of 100 of it, plus 1 GiB above for small traces, whose PyTorch
 * segments are larger than their peak): else 0, with a warning when it was there but
 * implausible (a hand-edited or corrupt header must not print PyTorch figures of 10^19 bytes). */
static uint64_t header_bytes(const vram_trace *t, const char *key, uint64_t near) {
    const char *text = vram_trace_header(t, key);
    uint64_t v = 0;
    if (!text) return 0;
    /* (near * 100 would overflow for peaks above 2^57 bytes: compare v / 100 instead) */
    if (vram_trace_header_u64(t, key, &v) != VRAM_OK || !near || (v > (1ull << 30) && (v - (1ull << 30)) / 100 > near) ||
        v < near / 100) {
        fprintf(stderr, "vram replay: %s: header '%s: ", vram_trace_name(t), key);
        put_text(stderr, text);
        fprintf(stderr, "' is not a plausible byte count beside the trace's peak of %llu live bytes; ignored\n",
                (unsigned long long)near);
        return 0;
    }
    return v;
}

static double header_ratio(const vram_trace *t, const char *key, uint64_t requested, uint64_t *value) {
    *value = header_bytes(t, key, requested);
    return *value && requested ? (double)*value / (double)requested : 0.0;
}

/* Writes the snapshot into f and closes it; 0, or the errno of a failed write (-1: the
 * snapshot's own error, in vram_last_error). */
static int put_snapshot(const vram_snapshot *snap, FILE *f) {
    errno = 0;
    vram_status st = vram_snapshot_write_json(snap, f);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && !err) err = errno;
    return err ? err : st != VRAM_OK ? -1 : 0;
}

/* Writes the snapshot to `path` whole or not at all: a regular file (or a new one) through a
 * temporary file beside it, renamed over it once complete, so that a full disk leaves no half
 * file and the previous one as it was; anything else (/dev/stdout, a pipe, a link), a file in a
 * folder that takes no new files, or one the folder does not let this user replace (another
 * user's file in /tmp), directly. Returns an exit status: 2 when `path` cannot be opened (bad
 * input), 1 when the writing fails (as for any output), after saying why. */
static int write_snapshot(const vram_snapshot *snap, const char *path) {
    struct stat sb;
    int exists = lstat(path, &sb) == 0;
    char *tmp = NULL;
    FILE *f = NULL;
    if ((!exists || S_ISREG(sb.st_mode)) && (tmp = malloc(strlen(path) + 8)) != NULL) {
        sprintf(tmp, "%s.XXXXXX", path);
        int fd = mkstemp(tmp);
        if (fd >= 0) {
            mode_t mask = umask(0);
            umask(mask);
            fchmod(fd, exists ? sb.st_mode & 07777 : 0666 & ~mask); /* the file's own mode, or fopen's */
            if (!(f = fdopen(fd, "w"))) {
                close(fd);
                unlink(tmp);
            }
        }
        if (!f) { /* (no temporary file: written in place) */
            free(tmp);
            tmp = NULL;
        }
    }
    int err = 0;
    if (f) {
        err = put_snapshot(snap, f);
        if (!err && rename(tmp, path) != 0) err = errno;
        unlink(tmp); /* (gone already once renamed) */
        free(tmp);
        if (err != EPERM && err != EACCES && err != EXDEV && err != EBUSY) goto done;
        err = 0; /* the folder would not let it be replaced: written in place */
    }
    if (!(f = fopen(path, "w"))) {
        fprintf(stderr, "vram replay: cannot write snapshot '%s': %s\n", path, strerror(errno));
        return 2;
    }
    err = put_snapshot(snap, f);
done:
    if (err) {
        fprintf(stderr, "vram replay: writing snapshot '%s' failed: %s\n", path, err > 0 ? strerror(err) : vram_last_error());
        return 1;
    }
    return 0;
}

/* Replays `t` on a fresh allocator, stopping right after event `stop`, and prints the summary
 * and/or writes the snapshot of that state. Returns an exit status. */
static int report_state_at(const vram_trace *t, const replay_args *ra, const vram_replay_options *ro, size_t stop,
                           char **summary_out) {
    vram_device *dev;
    vram_allocator *a;
    /* A snapshot is more use with its history (memory_viz draws timelines from it): unless the
     * configuration asks for a history of its own, record every event up to the stop. The
     * history does not change where blocks go, so the state is the same. */
    vram_replay_options with_history = *ro;
    char conf[4096 + 32]; /* the configuration (parsed below, so at most 4096 characters) and the history key */
    vram_alloc_config cfg;
    if (ra->snapshot && vram_alloc_config_from_env(&cfg) == VRAM_OK &&
        (!ro->conf || vram_alloc_config_parse(ro->conf, &cfg) == VRAM_OK) && cfg.history_entries == 0) {
        size_t entries = 3 * (stop < vram_trace_num_events(t) ? stop : vram_trace_num_events(t)) + 1024;
        if (entries > (1u << 21)) entries = 1u << 21;
        int n = snprintf(conf, sizeof conf, "%s%shistory:%zu", ro->conf ? ro->conf : "",
                         ro->conf && *ro->conf ? "," : "", entries);
        if (n <= 4096) { /* a --conf near the parser's limit leaves no room for the key: no history then */
            with_history.conf = conf;
            ro = &with_history;
        }
    }
    vram_status st = vram_replay_open(ro, 0, &dev, &a);
    if (st != VRAM_OK) {
        fprintf(stderr, "vram replay: %s\n", vram_last_error());
        return st == VRAM_ERR_HOST_MEMORY ? 1 : 2;
    }
    vram_replay_result r;
    st = vram_trace_replay(t, a, stop, 0, &r); /* may stop early at an OOM: that state is reported */
    int rc = 0;
    if (st != VRAM_OK && st != VRAM_ERR_OUT_OF_MEMORY) { /* any other failure leaves no state to report */
        fprintf(stderr, "vram replay: %s\n", vram_last_error());
        rc = 1;
    }
    if (ra->summary && rc == 0) {
        st = vram_memory_summary(a, 0, summary_out);
        if (st != VRAM_OK) {
            fprintf(stderr, "vram replay: summary: %s\n", vram_last_error());
            rc = 1;
        }
    }
    if (ra->snapshot && rc == 0) {
        vram_snapshot *snap = NULL;
        st = vram_allocator_snapshot(a, &snap);
        if (st != VRAM_OK) {
            fprintf(stderr, "vram replay: snapshot: %s\n", vram_last_error());
            rc = 1;
        } else {
            rc = write_snapshot(snap, ra->snapshot);
        }
        vram_snapshot_free(snap);
    }
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return rc;
}

/* The summary and/or snapshot of replay_one: at the failed event on `a` (where the replay r
 * stopped), else at the peak of reserved memory, found by another replay. Returns
 * report_state_at's exit status; a step that failed for another reason than the device's
 * memory leaves its message in no_answer. */
static int report_state(const vram_trace *t, const replay_args *ra, const vram_replay_options *ro, vram_allocator *a,
                        const vram_replay_result *r, char **summary, size_t *state_event, char *no_answer,
                        size_t cap) {
    if (r->failed) {
        *state_event = r->failed_event;
        if (ra->summary && vram_memory_summary(a, 0, summary) != VRAM_OK)
            snprintf(no_answer, cap, "summary: %s", vram_last_error());
        return ra->snapshot ? report_state_at(t, &(replay_args){.snapshot = ra->snapshot}, ro, r->failed_event + 1, NULL)
                            : 0;
    }
    vram_device *d2;
    vram_allocator *a2;
    vram_status pst = vram_replay_open(ro, 0, &d2, &a2);
    if (pst == VRAM_OK) {
        vram_replay_result tr;
        pst = vram_trace_replay(t, a2, SIZE_MAX, 1, &tr);
        *state_event = tr.peak_event;
        vram_allocator_destroy(a2);
        vram_device_close(d2);
    }
    if (pst != VRAM_OK) { /* it ran before on the same device: this failure is not the device's */
        snprintf(no_answer, cap, "finding the peak: %s", vram_last_error());
        return 0;
    }
    return report_state_at(t, ra, ro, *state_event + 1, summary);
}

/* A multi-program trace (its "# workload: NAME" lines): each program replayed on a fresh
 * allocator and measured from its start, as a process running them in turn measures each. */
#define MAX_WORKLOADS 64
typedef struct workload_row {
    const char *name;
    vram_replay_result r;
} workload_row;

/* Returns the number of rows, or sets *err (with the detail in vram_last_error) when a replay
 * failed for a reason other than the device's memory: the rows are then no answer. */
static size_t replay_workloads(const vram_trace *t, const vram_replay_options *ro, workload_row *rows,
                               vram_status *err) {
    vram_trace_workload w[MAX_WORKLOADS];
    size_t n = vram_trace_workloads(t, w, MAX_WORKLOADS);
    if (n > MAX_WORKLOADS) {
        fprintf(stderr, "vram replay: %s holds %zu workloads: the first %d are measured one by one\n",
                vram_trace_name(t), n, MAX_WORKLOADS);
        n = MAX_WORKLOADS;
    }
    for (size_t k = 0; k < n; k++) {
        vram_device *dev;
        vram_allocator *a;
        rows[k].name = w[k].name;
        memset(&rows[k].r, 0, sizeof rows[k].r);
        vram_status st = vram_replay_open(ro, 0, &dev, &a);
        if (st == VRAM_OK) {
            st = vram_trace_replay_range(t, a, w[k].start, w[k].end, 0, &rows[k].r); /* an OOM is in r */
            vram_allocator_destroy(a);
            vram_device_close(dev);
        }
        if (st != VRAM_OK && st != VRAM_ERR_OUT_OF_MEMORY) {
            *err = st;
            return k;
        }
    }
    return n;
}

static void print_workloads_json(FILE *o, const workload_row *rows, size_t n) {
    fputs(", \"workloads\": [", o);
    for (size_t k = 0; k < n; k++) {
        const vram_replay_result *r = &rows[k].r;
        fputs(k ? ", {\"name\": " : "{\"name\": ", o);
        vram_json_write_string(o, rows[k].name, SIZE_MAX);
        fprintf(o, ", \"events\": %llu, \"peak_requested_bytes\": %llu, \"peak_reserved_bytes\": %llu, "
                   "\"reserved_over_requested\": %.6f, \"oom\": %s}",
                (unsigned long long)r->events, (unsigned long long)r->peak_requested_bytes,
                (unsigned long long)r->peak_reserved_bytes, r->reserved_over_requested, r->failed ? "true" : "false");
    }
    fputc(']', o);
}

static void print_workloads_text(const workload_row *rows, size_t n) {
    printf("  per workload (each from its start: the cache emptied, the peaks reset):\n");
    for (size_t k = 0; k < n; k++) {
        char a[32], b[32];
        const vram_replay_result *r = &rows[k].r;
        fputs("    ", stdout);
        int w = put_text(stdout, rows[k].name);
        printf("%*s %14s %14s %8.3f%s\n", w < 26 ? 26 - w : 0, "", vram_format_size(r->peak_requested_bytes, a, sizeof a),
               vram_format_size(r->peak_reserved_bytes, b, sizeof b), r->reserved_over_requested,
               r->failed ? "  (stopped at OOM)" : "");
    }
}

/* What one trace's replay found, for its report. */
typedef struct replay_report {
    const vram_trace *t;
    const char *name;
    char device_name[96], settings[VRAM_ALLOC_CONF_FORMAT_MAX];
    uint64_t capacity;
    vram_replay_result r;
    char failure[512];
    char *oom_report, *summary;
    size_t state_event;
    workload_row workloads[MAX_WORKLOADS];
    size_t nworkloads;
    uint64_t fit, trace_peak, native, expandable, recorded_req;
    unsigned tries;
    int fit_ok, partial;
    char fit_error[512];
    double native_ratio, expandable_ratio, fit_ratio;
    char pb[2][32]; /* the partial trace's peak and the recorded one, formatted */
} replay_report;

/* One trace's report as one JSON object on one line. */
static void print_json(const replay_report *p, const replay_args *ra) {
    FILE *o = stdout;
    fputs("{\"trace\": ", o);
    vram_json_write_string(o, vram_trace_name(p->t), SIZE_MAX);
    fputs(", \"device\": ", o);
    vram_json_write_string(o, p->device_name, SIZE_MAX);
    fprintf(o, ", \"capacity_bytes\": %llu, \"alloc_conf\": ", (unsigned long long)p->capacity);
    vram_json_write_string(o, p->settings, SIZE_MAX);
    fprintf(o,
            ", \"events\": %llu, \"allocs\": %llu, \"empty_allocs\": %llu, \"frees\": %llu, \"peak_requested_bytes\": %llu, "
            "\"peak_allocated_bytes\": %llu, \"peak_reserved_bytes\": %llu, \"reserved_over_requested\": %.6f, "
            "\"device_allocs\": %llu, \"device_frees\": %llu, \"alloc_retries\": %llu, \"ooms\": %llu, "
            "\"seconds\": %.6f, \"events_per_second\": %.0f, \"read_seconds\": %.6f, \"parse_seconds\": %.6f, "
            "\"trace_events\": %zu, \"trace_allocs\": %zu, \"trace_peak_live_bytes\": %llu",
            (unsigned long long)p->r.events, (unsigned long long)p->r.allocs, (unsigned long long)p->r.empty_allocs,
            (unsigned long long)p->r.frees, (unsigned long long)p->r.peak_requested_bytes, (unsigned long long)p->r.peak_allocated_bytes,
            (unsigned long long)p->r.peak_reserved_bytes, p->r.reserved_over_requested,
            (unsigned long long)p->r.device_allocs, (unsigned long long)p->r.device_frees,
            (unsigned long long)p->r.alloc_retries, (unsigned long long)p->r.ooms, p->r.seconds, p->r.events_per_second,
            vram_trace_read_seconds(p->t), vram_trace_parse_seconds(p->t), vram_trace_num_events(p->t),
            vram_trace_num_allocs(p->t), (unsigned long long)p->trace_peak);
    if (p->partial) fprintf(o, ", \"partial\": true, \"recorded_peak_requested_bytes\": %llu", (unsigned long long)p->recorded_req);
    if (p->native) fprintf(o, ", \"pytorch_native_peak_reserved_bytes\": %llu, \"pytorch_native_over_requested\": %.6f",
                        (unsigned long long)p->native, p->native_ratio);
    if (p->expandable)
        fprintf(o, ", \"pytorch_expandable_segments_peak_reserved_bytes\": %llu, "
                   "\"pytorch_expandable_segments_over_requested\": %.6f",
                (unsigned long long)p->expandable, p->expandable_ratio);
    if (p->fit_ok)
        fprintf(o, ", \"fit_capacity_bytes\": %llu, \"fit_over_requested\": %.6f, \"fit_tries\": %u",
                (unsigned long long)p->fit, p->fit_ratio, p->tries);
    else if (ra->fit && p->fit_error[0]) {
        fputs(", \"fit_error\": ", o);
        vram_json_write_string(o, p->fit_error, SIZE_MAX);
    }
    if (p->nworkloads) print_workloads_json(o, p->workloads, p->nworkloads);
    fprintf(o, ", \"oom\": %s", p->r.failed ? "true" : "false");
    if (p->r.failed) {
        fprintf(o, ", \"failed_event\": %zu, \"failed_line\": %llu, \"error\": ", p->r.failed_event,
                (unsigned long long)p->r.failed_line);
        vram_json_write_string(o, p->failure, SIZE_MAX);
        fputs(", \"oom_report\": ", o);
        vram_json_write_string(o, p->oom_report ? p->oom_report : "", SIZE_MAX);
    }
    if (p->summary) {
        fprintf(o, ", \"summary_event\": %zu, \"summary\": ", p->state_event);
        vram_json_write_string(o, p->summary, SIZE_MAX);
    }
    fputs("}\n", o);
}

/* One trace's report for people: vram's figures beside PyTorch's, then what was asked for. */
static void print_text(const replay_report *p, const replay_args *ra) {
    char b[6][32];
    printf("%s: %zu allocations, %zu events", p->name, vram_trace_num_allocs(p->t), vram_trace_num_events(p->t));
    const char *source = vram_trace_header(p->t, "source");
    if (source) {
        fputs(" (", stdout);
        put_text(stdout, source);
        putchar(')');
    }
    printf("\n  device %s, VRAM_ALLOC_CONF %s\n", p->device_name, p->settings);
    printf("  %-28s %14s %12s\n", "", "peak reserved", "/ requested");
    printf("  %-28s %14s\n", "peak requested", vram_format_size(p->r.peak_requested_bytes, b[0], sizeof b[0]));
    if (p->partial)
        printf("  partial trace: the recorded run peaked at %s requested; PyTorch's figures are for that whole "
               "run, not comparable, and left out\n", p->pb[1]);
    else if (vram_trace_header(p->t, "partial")) { /* (recorded so: its figures are for the same part) */
        fputs("  partial trace, recorded as one: ", stdout);
        put_text(stdout, vram_trace_header(p->t, "partial"));
        putchar('\n');
    }
    printf("  %-28s %14s %12.3f%s\n", "vram", vram_format_size(p->r.peak_reserved_bytes, b[1], sizeof b[1]),
           p->r.reserved_over_requested, p->r.failed ? "  (stopped at OOM)" : "");
    if (p->native)
        printf("  %-28s %14s %12.3f\n", "PyTorch native", vram_format_size(p->native, b[2], sizeof b[2]), p->native_ratio);
    if (p->expandable)
        printf("  %-28s %14s %12.3f\n", "PyTorch expandable_segments",
               vram_format_size(p->expandable, b[3], sizeof b[3]), p->expandable_ratio);
    printf("  vram: peak allocated %s, %llu device allocs, %llu device frees, %llu retries, %llu OOMs\n",
           vram_format_size(p->r.peak_allocated_bytes, b[4], sizeof b[4]), (unsigned long long)p->r.device_allocs,
           (unsigned long long)p->r.device_frees, (unsigned long long)p->r.alloc_retries, (unsigned long long)p->r.ooms);
    if (p->r.empty_allocs)
        printf("  %llu request%s of 0 bytes (empty tensors) took no memory, as under PyTorch\n",
               (unsigned long long)p->r.empty_allocs, p->r.empty_allocs == 1 ? "" : "s");
    printf("  replay: %llu events in %.2f ms, %.2f M events/s (read %.2f ms, parse %.2f ms)\n",
           (unsigned long long)p->r.events, p->r.seconds * 1e3, p->r.events_per_second / 1e6,
           vram_trace_read_seconds(p->t) * 1e3, vram_trace_parse_seconds(p->t) * 1e3);
    if (p->nworkloads) print_workloads_text(p->workloads, p->nworkloads);
    if (p->fit_ok)
        printf("  fit: smallest capacity with no OOM %s = %.3f x peak requested (%u replays)\n",
               vram_format_size(p->fit, b[5], sizeof b[5]), p->fit_ratio, p->tries);
    else if (ra->fit && p->fit_error[0])
        printf("  fit: %s\n", p->fit_error);
    if (p->summary) {
        if (p->r.failed) printf("\nmemory summary at the failed allocation (event %zu):\n", p->state_event);
        else printf("\nmemory summary at the peak of reserved memory (event %zu, line %llu):\n", p->state_event,
                    (unsigned long long)vram_trace_event_line(p->t, p->state_event));
        fputs(p->summary, stdout);
    }
    printf("\n");
}

/* PyTorch's figures from the header, unless the trace is partial: the recording's peak is its
 * program's, and a trace that never reaches it holds only part of that run, so PyTorch's figures
 * (the whole run's) would be compared with a part of it. */
static void pytorch_figures(replay_report *p) {
    p->trace_peak = vram_trace_peak_live_bytes(p->t);
    p->partial = vram_trace_header_u64(p->t, "peak_requested_bytes", &p->recorded_req) == VRAM_OK &&
                 p->recorded_req > p->trace_peak;
    if (p->partial) {
        fprintf(stderr, "vram replay: %s is a partial trace: its peak of %s requested is below the %s its header records "
                        "for the whole run; PyTorch's figures are left out\n", vram_trace_name(p->t),
                vram_format_size(p->trace_peak, p->pb[0], sizeof p->pb[0]),
                vram_format_size(p->recorded_req, p->pb[1], sizeof p->pb[1]));
        return;
    }
    uint64_t pt_req = header_bytes(p->t, "peak_requested_bytes", p->trace_peak);
    if (!pt_req) pt_req = p->trace_peak;
    p->native_ratio = header_ratio(p->t, "pytorch_native_peak_reserved_bytes", pt_req, &p->native);
    p->expandable_ratio = header_ratio(p->t, "pytorch_expandable_segments_peak_reserved_bytes", pt_req, &p->expandable);
}

static void fill_row(const replay_report *p, replay_row *row) {
    snprintf(row->name, sizeof row->name, "%s", p->name);
    char *dot = strstr(row->name, ".trace");
    if (dot) *dot = '\0';
    row->peak_requested = p->r.peak_requested_bytes;
    row->peak_reserved = p->r.peak_reserved_bytes;
    row->ratio = p->r.reserved_over_requested;
    row->native_ratio = p->native_ratio;
    row->expandable_ratio = p->expandable_ratio;
    row->fit_ratio = p->fit_ratio;
    row->events_per_second = p->r.events_per_second;
    row->failed = p->r.failed;
    row->partial = p->partial;
}

static int replay_one(const char *path, const replay_args *ra, replay_row *row) {
    replay_report report, *p = &report;
    memset(p, 0, sizeof *p);
    vram_trace *t;
    vram_status st = vram_trace_load(path, &t);
    if (st != VRAM_OK) {
        fprintf(stderr, "vram replay: %s\n", vram_last_error());
        return 2;
    }
    p->t = t;
    vram_replay_options ro = {.device = ra->device, .capacity = ra->capacity, .conf = ra->conf};
    vram_device *dev;
    vram_allocator *a;
    if ((st = vram_replay_open(&ro, 0, &dev, &a)) != VRAM_OK) {
        fprintf(stderr, "vram replay: %s\n", vram_last_error());
        vram_trace_free(t);
        return 2;
    }
    snprintf(p->device_name, sizeof p->device_name, "%s", dev->name);
    vram_alloc_config_format(vram_allocator_config(a), p->settings, sizeof p->settings);
    p->capacity = vram_allocator_limit(a);

    st = vram_trace_replay(t, a, SIZE_MAX, 0, &p->r);
    /* Set when a step failed for a reason other than the device's memory (host memory ran out):
     * then no figure is printed, only this, and the status is 1. */
    char no_answer[512] = "";
    if (st != VRAM_OK) {
        snprintf(p->failure, sizeof p->failure, "%s", vram_last_error());
        if (st != VRAM_ERR_OUT_OF_MEMORY) snprintf(no_answer, sizeof no_answer, "%s", vram_last_error());
        else if (!(p->oom_report = strdup(vram_allocator_oom_report(a))))
            snprintf(no_answer, sizeof no_answer, "host out of memory for the out-of-memory report");
    }
    int rc = p->r.failed || st != VRAM_OK ? 1 : 0;
    /* the summary / snapshot: at the failure if the replay failed, else at the reserved peak */
    int state_rc = 0;
    if ((ra->summary || ra->snapshot) && !no_answer[0])
        state_rc = report_state(t, ra, &ro, a, &p->r, &p->summary, &p->state_event, no_answer, sizeof no_answer);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    if (!no_answer[0] && !state_rc) {
        vram_status wst = VRAM_OK;
        p->nworkloads = replay_workloads(t, &ro, p->workloads, &wst);
        if (wst != VRAM_OK) snprintf(no_answer, sizeof no_answer, "workloads: %s", vram_last_error());
    }
    if (ra->fit && !p->r.failed && !no_answer[0] && !state_rc) {
        st = vram_replay_fit(t, &ro, &p->fit, &p->tries);
        if (st == VRAM_OK) p->fit_ok = 1;
        else if (st == VRAM_ERR_OUT_OF_MEMORY) { /* no capacity fits: said, and not a success */
            snprintf(p->fit_error, sizeof p->fit_error, "%s", vram_last_error());
            rc = 1;
        } else {
            snprintf(no_answer, sizeof no_answer, "fit: %s", vram_last_error());
        }
    }
    if (no_answer[0] || state_rc) { /* (report_state_at said why) */
        if (no_answer[0]) fprintf(stderr, "vram replay: %s: no answer: %s\n", vram_trace_name(t), no_answer);
        free(p->summary);
        free(p->oom_report);
        vram_trace_free(t);
        return state_rc ? state_rc : 1;
    }
    p->name = base_name(vram_trace_name(t));
    pytorch_figures(p);
    p->fit_ratio = p->fit_ok && p->trace_peak ? (double)p->fit / (double)p->trace_peak : 0.0;
    fill_row(p, row);

    if (ra->json) print_json(p, ra);
    else print_text(p, ra);
    /* Each report as its replay ends; a write that failed is said here, while errno still says why
     * (main.c's final check would find only the stream's error flag). */
    errno = 0;
    int write_failed = fflush(stdout) != 0 || ferror(stdout);
    if (write_failed)
        fprintf(stderr, "vram replay: writing the output failed: %s\n", errno ? strerror(errno) : "write error");
    if (rc && p->failure[0]) {
        fprintf(stderr, "vram replay: %s\n", p->failure);
        if (p->r.failed && p->oom_report && *p->oom_report) fprintf(stderr, "%s\n", p->oom_report);
    }
    if (ra->snapshot && state_rc == 0 && !ra->json)
        fprintf(stderr, "vram replay: snapshot at event %zu written to %s\n", p->state_event, ra->snapshot);
    free(p->summary);
    free(p->oom_report);
    vram_trace_free(t);
    return rc ? rc : write_failed;
}

/* Which traces a mean row covers. */
typedef int (*row_filter)(const replay_row *);
static int vram_replayed(const replay_row *r) { return r->ratio > 0 && !r->failed; }
static int with_pytorch(const replay_row *r) { return vram_replayed(r) && r->native_ratio > 0; }

/* One row of geometric means over the traces `in` selects, each column only where every one of
 * them has its figure ("-" otherwise), so that no two columns of a row average different sets.
 * Returns how many traces it covers. */
static int print_means(const replay_row *rows, int n, int fit, const char *label, row_filter in) {
    double lv = 0, ln = 0, le = 0, lf = 0;
    int count = 0, cn = 0, ce = 0, cf = 0;
    for (int i = 0; i < n; i++) {
        if (!in(&rows[i])) continue;
        count++;
        lv += log(rows[i].ratio);
        if (rows[i].native_ratio > 0) ln += log(rows[i].native_ratio), cn++;
        if (rows[i].expandable_ratio > 0) le += log(rows[i].expandable_ratio), ce++;
        if (rows[i].fit_ratio > 0) lf += log(rows[i].fit_ratio), cf++;
    }
    printf("%-20s %14s %14s", label, "", "");
    if (count) printf(" %8.3f", exp(lv / count));
    else printf(" %8s", "-");
    if (count && cn == count) printf(" %9.3f", exp(ln / cn));
    else printf(" %9s", "-");
    if (count && ce == count) printf(" %11.3f", exp(le / ce));
    else printf(" %11s", "-");
    if (fit) {
        if (count && cf == count) printf(" %9.3f", exp(lf / cf));
        else printf(" %9s", "-");
    }
    printf("\n");
    return count;
}

static void print_comparison(const replay_row *rows, int n, int fit) {
    printf("%-20s %14s %14s %8s %9s %11s", "trace", "peak requested", "vram reserved", "vram", "PyTorch", "PyTorch");
    if (fit) printf(" %9s", "vram fit");
    printf(" %9s\n", "replay");
    printf("%-20s %14s %14s %8s %9s %11s", "", "", "", "ratio", "native", "expandable");
    if (fit) printf(" %9s", "ratio");
    printf(" %9s\n", "Mev/s");
    double worst = 0;
    int replayed = 0, pytorch = 0, partial = 0;
    for (int i = 0; i < n; i++) {
        char a[32], b[32];
        printf("%-20s %14s %14s %8.3f", rows[i].name, vram_format_size(rows[i].peak_requested, a, sizeof a),
               vram_format_size(rows[i].peak_reserved, b, sizeof b), rows[i].ratio);
        if (rows[i].native_ratio > 0) printf(" %9.3f", rows[i].native_ratio);
        else printf(" %9s", "-");
        if (rows[i].expandable_ratio > 0) printf(" %11.3f", rows[i].expandable_ratio);
        else printf(" %11s", "-");
        if (fit) {
            if (rows[i].fit_ratio > 0) printf(" %9.3f", rows[i].fit_ratio);
            else printf(" %9s", "-");
        }
        printf(" %9.2f%s%s\n", rows[i].events_per_second / 1e6, rows[i].failed ? "  OOM" : "",
               rows[i].partial ? "  partial" : "");
        if (vram_replayed(&rows[i]) && rows[i].ratio > worst) worst = rows[i].ratio;
        replayed += vram_replayed(&rows[i]);
        pytorch += with_pytorch(&rows[i]);
        partial += rows[i].partial;
    }
    char label[32];
    snprintf(label, sizeof label, "geomean, %d trace%s", replayed, replayed == 1 ? "" : "s");
    print_means(rows, n, fit, replayed == n ? "geometric mean" : label, vram_replayed);
    /* the traces that have PyTorch's figures, when they are not all of them: each side over those */
    if (pytorch && pytorch < replayed) print_means(rows, n, fit, "geomean w/ PyTorch", with_pytorch);
    printf("%-20s %14s %14s %8.3f\n", "worst", "", "", worst);
    if (pytorch && pytorch < replayed)
        printf("(the first means are over the %d traces vram replayed whole; the second row's, vram's and PyTorch's, "
               "over the %d of them that carry PyTorch's figures)\n", replayed, pytorch);
    if (partial)
        printf("(partial: a trace that stops before its recorded peak; PyTorch's whole-run figures are left out)\n");
}

int vram_cmd_replay(int argc, char **argv) {
    replay_args ra = {0};
    const char **traces = calloc((size_t)argc, sizeof *traces);
    if (!traces) {
        fprintf(stderr, "vram replay: host out of memory\n");
        return 1;
    }
    int ntraces = 0;
    int only_traces = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int m;
        if (only_traces || a[0] != '-' || strcmp(a, "-") == 0) {
            traces[ntraces++] = a;
        } else if (!strcmp(a, "--")) {
            only_traces = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(traces);
            return 0;
        } else if (!strcmp(a, "--json")) {
            ra.json = 1;
        } else if (!strcmp(a, "--fit")) {
            ra.fit = 1;
        } else if (!strcmp(a, "--summary")) {
            ra.summary = 1;
        } else if ((m = option_value(argc, argv, &i, "--capacity", &v)) != 0 ||
                   (m = option_value(argc, argv, &i, "--device", &v)) != 0 ||
                   (m = option_value(argc, argv, &i, "--conf", &v)) != 0 ||
                   (m = option_value(argc, argv, &i, "--snapshot", &v)) != 0) {
            if (m < 0) {
                fprintf(stderr, "vram replay: option '%s' needs a value\n", a);
                free(traces);
                return 2;
            }
            if (!strncmp(a, "--capacity", 10)) {
                if (vram_parse_size(v, &ra.capacity) != VRAM_OK) {
                    fprintf(stderr, "vram replay: --capacity: %s\n", vram_last_error());
                    free(traces);
                    return 2;
                }
                if (ra.capacity == 0) {
                    fprintf(stderr, "vram replay: --capacity '%s': must be above 0\n", v);
                    free(traces);
                    return 2;
                }
                ra.capacity_given = 1;
            } else if (!strncmp(a, "--device", 8)) {
                ra.device = v;
            } else if (!strncmp(a, "--conf", 6)) {
                ra.conf = v;
            } else {
                ra.snapshot = v;
            }
        } else {
            static const char *const flags[] = {"--help", "--json", "--capacity", "--device", "--conf",
                                                "--fit", "--summary", "--snapshot"};
            vram_cli_unknown("vram replay", "option", a, flags, sizeof flags / sizeof *flags, "vram replay --help");
            free(traces);
            return 2;
        }
    }
    if (ntraces == 0) {
        fprintf(stderr, "vram replay: no trace given\n");
        usage(stderr);
        free(traces);
        return 2;
    }
    /* Standard input can be read once: a second '-' would fail only after the first replay. */
    int stdins = 0;
    for (int i = 0; i < ntraces; i++) stdins += !strcmp(traces[i], "-");
    if (stdins > 1) {
        fprintf(stderr, "vram replay: standard input ('-') given %d times: it can be read only once\n", stdins);
        free(traces);
        return 2;
    }
    if (ra.snapshot && ntraces > 1) {
        fprintf(stderr, "vram replay: --snapshot takes one trace (%d given)\n", ntraces);
        free(traces);
        return 2;
    }
    if (ra.snapshot && !path_writable(ra.snapshot)) {
        fprintf(stderr, "vram replay: --snapshot '%s': cannot write there: %s\n", ra.snapshot, strerror(errno));
        free(traces);
        return 2;
    }
    /* A simulated device sized in its spec and --capacity would be two sizes for one device. */
    if (ra.capacity_given && ra.device && vram_device_spec_sized(ra.device)) {
        fprintf(stderr, "vram replay: --capacity and --device %s both give the device's size: give one\n", ra.device);
        free(traces);
        return 2;
    }
    /* The default 80 GiB is the plain sim device's size; any other device keeps its own. */
    if (!ra.capacity_given && (!ra.device || !strcmp(ra.device, "sim") || !strcmp(ra.device, "cudasim")))
        ra.capacity = 80ull << 30;
    /* Reject a bad configuration once, up front, before any trace is read. */
    {
        if (vram_cli_check_conf("vram replay", ra.conf)) {
            free(traces);
            return 2;
        }
    }
    replay_row *rows = calloc((size_t)ntraces, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "vram replay: host out of memory\n");
        free(traces);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < ntraces; i++) {
        int r = replay_one(traces[i], &ra, &rows[i]);
        if (r == 2) {
            rc = 2;
            break;
        }
        if (r > rc) rc = r;
        if (ferror(stdout)) break; /* (said by replay_one) */
    }
    if (rc != 2 && ntraces > 1 && !ra.json && !ferror(stdout)) print_comparison(rows, ntraces, ra.fit);
    free(rows);
    free(traces);
    return rc;
}
