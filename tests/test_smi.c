/* test_smi.c — `vram smi` and the vram_smi C API against a fake NVML (tests/fakes/fake_nvml.c,
 * loaded through VRAM_NVML_LIBRARY), so every path runs on a machine without a GPU: several
 * GPUs, process lists that need the buffer grown, the v2 memory call missing (v1 fallback),
 * 535-era 32-byte process records, unsupported fields, NO_PERMISSION and GPU_IS_LOST devices,
 * a missing library, a failing nvmlInit, the toolkit stub, a process named with escapes and
 * bytes that are not UTF-8.
 *
 * The command runs as a child process with its stdout and stderr captured; the outputs are
 * parsed with tests/format_check.h (strict JSON, CSV, Prometheus readers) and checked field by
 * field against what the fake was told to report. The HTTP endpoint is asked by curl (when
 * installed) and by a C client; loop mode is checked on a pseudo-terminal (in-place redraw,
 * cursor restored on SIGINT) and under SIGKILL (the JSON stream keeps only complete lines).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "format_check.h"
#include "vram/smi.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

#include "smi_proc.h"

static char self_user[64];
static char err[2048];

/* A second opinion from Python's json and csv modules, where python3 runs (it is optional:
 * format_check.h is the check that always runs). Returns 1 when fine or when skipped. */
static int python_agrees(const char *kind, const char *text) {
    if (system("python3 -c 'import json, csv' >/dev/null 2>&1") != 0) return 1;
    char path[300], cmd[1024];
    snprintf(path, sizeof path, "%s/py_%s", tmpdir, kind);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fputs(text, f);
    fclose(f);
    if (!strcmp(kind, "json"))
        snprintf(cmd, sizeof cmd, "python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' %s", path);
    else
        snprintf(cmd, sizeof cmd, "python3 -c 'import csv, sys; rows = list(csv.reader(open(sys.argv[1]), skipinitialspace=True)); "
                                  "assert rows and all(len(r) == len(rows[0]) for r in rows), rows' %s", path);
    int rc = system(cmd);
    unlink(path);
    return rc == 0;
}

/* ---- JSON -------------------------------------------------------------------------------- */

static const jv *gpu_of(const jv *doc, size_t i) { return jat(jget(doc, "gpus"), i); }

static const jv *process_of(const jv *gpu, unsigned pid) {
    const jv *ps = jget(gpu, "processes");
    for (size_t i = 0; ps && ps->type == J_ARR && i < ps->n; i++)
        if (jis_u64(jget(&ps->items[i], "pid"), pid)) return &ps->items[i];
    return NULL;
}

static void test_json_full(void) {
    char procs[256];
    unsigned me = (unsigned)getpid();
    /* me on GPU 0 as compute and graphics; 4242 (not a process here) with unknown memory;
     * 4243 graphics only on GPU 1. */
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%u:%llu,0:%u:%llu:g,0:4242:na,1:4243:%llu:g", me, 300 * MiB, me,
             200 * MiB, 5 * MiB);
    result r = run(ENV(procs), ARGS("--json"));
    CHECK(r.status == 0, "--json exit %d, stderr %s", r.status, r.err);
    CHECK(count_char(r.out, '\n') == 1 && r.out_len && r.out[r.out_len - 1] == '\n', "one line: %s", r.out);
    jv doc;
    int ok = json_parse(r.out, &doc, err, sizeof err) == 0;
    CHECK(ok, "JSON parses: %s\n%s", err, r.out);
    CHECK(python_agrees("json", r.out), "python's json reads it too");
    if (ok) {
        CHECK(jis_str(jget(&doc, "driver_version"), "550.54.15"), "driver_version");
        const jv *ts = jget(&doc, "timestamp");
        CHECK(ts && ts->type == J_STR && strlen(ts->str) == 24 && ts->str[10] == 'T' && ts->str[23] == 'Z', "ISO timestamp");
        CHECK(jget(&doc, "time_ms") && jget(&doc, "time_ms")->num > 1.7e12, "time_ms");
        CHECK(jget(&doc, "gpus") && jget(&doc, "gpus")->n == 2, "two GPUs");
        for (unsigned g = 0; g < 2; g++) {
            const jv *d = gpu_of(&doc, g);
            char name[96], uuid[96];
            snprintf(name, sizeof name, "Fake GPU %u, \"test\" edition", g);
            snprintf(uuid, sizeof uuid, "GPU-fa4e0000-0000-0000-0000-%012u", g);
            unsigned long long used = (g + 1) * GiB + 3 * MiB;
            CHECK(jis_u64(jget(d, "index"), g), "index %u", g);
            CHECK(jis_null(jget(d, "error")), "no error on %u", g);
            CHECK(jis_str(jget(d, "name"), name), "name %u", g);
            CHECK(jis_str(jget(d, "uuid"), uuid), "uuid %u", g);
            CHECK(jis_u64(jget(d, "memory_total_bytes"), 24 * GiB), "total %u", g);
            CHECK(jis_u64(jget(d, "memory_used_bytes"), used), "used %u (v2: without reserved)", g);
            CHECK(jis_u64(jget(d, "memory_reserved_bytes"), 512 * MiB), "reserved %u", g);
            CHECK(jis_u64(jget(d, "memory_free_bytes"), 24 * GiB - 512 * MiB - used), "free %u", g);
            CHECK(jis_u64(jget(d, "memory_version"), 2), "memory v2 on %u", g);
            CHECK(jis_u64(jget(d, "utilization_gpu_percent"), 40 + g), "util %u", g);
            CHECK(jis_u64(jget(d, "utilization_memory_percent"), 10 + g), "mem util %u", g);
            CHECK(jis_u64(jget(d, "temperature_c"), 50 + g), "temp %u", g);
            const jv *pw = jget(d, "power_w");
            CHECK(pw && pw->type == J_NUM && fabs(pw->num - (123.456 + g)) < 1e-9, "power %u", g);
            CHECK(jget(d, "power_limit_w") && jget(d, "power_limit_w")->num == 700.0, "limit %u", g);
        }
        const jv *g0 = gpu_of(&doc, 0);
        CHECK(jget(g0, "processes") && jget(g0, "processes")->n == 2, "GPU 0: two processes (me merged)");
        const jv *p = process_of(g0, me);
        CHECK(p != NULL, "my pid listed");
        if (p) {
            CHECK(jis_str(jget(p, "type"), "C+G"), "compute+graphics merged");
            CHECK(jis_u64(jget(p, "used_memory_bytes"), 300 * MiB), "my memory");
            CHECK(jis_str(jget(p, "user"), self_user), "user is %s", self_user);
            const jv *c = jget(p, "command");
            CHECK(c && c->type == J_STR && strstr(c->str, "test_smi"), "command from /proc: %s", c && c->str ? c->str : "?");
        }
        p = process_of(g0, 4242);
        CHECK(p && jis_null(jget(p, "used_memory_bytes")), "unknown memory is null");
        CHECK(p && jis_null(jget(p, "user")) && jis_null(jget(p, "command")), "invisible process: user/command null");
        p = process_of(gpu_of(&doc, 1), 4243);
        CHECK(p && jis_str(jget(p, "type"), "G") && jis_u64(jget(p, "used_memory_bytes"), 5 * MiB), "graphics process on 1");
        jfree(&doc);
    }
    result_free(&r);

    /* The table shows the same. */
    r = run(ENV(procs), NULL);
    CHECK(r.status == 0, "table exit %d: %s", r.status, r.err);
    CHECK(strstr(r.out, "  0  Fake GPU 0, \"test\" editi ") != NULL, "table names GPU 0 (cut to 24 columns)");
    CHECK(strstr(r.out, "   1027 /   24576 MiB") != NULL, "table memory of GPU 0:\n%s", r.out);
    CHECK(strstr(r.out, "unknown") != NULL, "unknown process memory shown as unknown");
    CHECK(strstr(r.out, "300 MiB") && strstr(r.out, self_user), "my process row");
    CHECK(!strchr(r.out, '\033'), "no escape codes in a one-shot table");
    result_free(&r);
}

/* ---- CSV --------------------------------------------------------------------------------- */

static size_t split_lines(char *text, char **lines, size_t max) {
    size_t n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) lines[n++] = l;
    return n;
}

static void test_csv(void) {
    result r = run(ENV("FAKE_NVML_GPUS=3", "FAKE_NVML_UNSUPPORTED=2:temp,2:power,2:util"), ARGS("--csv"));
    CHECK(r.status == 0, "--csv exit %d: %s", r.status, r.err);
    CHECK(python_agrees("csv", r.out), "python's csv reads it with the same field count in every row");
    char *lines[16];
    size_t n = split_lines(r.out, lines, 16);
    CHECK(n == 4, "header + 3 rows, got %zu", n);
    if (n == 4) {
        CHECK(!strcmp(lines[0], "index, name, uuid, memory.used [MiB], memory.reserved [MiB], memory.free [MiB], "
                                "memory.total [MiB], utilization.gpu [%], utilization.memory [%], temperature.gpu, "
                                "power.draw [W], power.limit [W]"),
              "header: %s", lines[0]);
        csv_row row;
        for (unsigned g = 0; g < 3; g++) {
            CHECK(csv_parse_line(lines[g + 1], &row, err, sizeof err) == 0, "%s", err);
            CHECK(row.n == 12, "12 fields, got %zu", row.n);
            char want[96];
            snprintf(want, sizeof want, "%u", g);
            CHECK(!strcmp(row.f[0], want), "index");
            snprintf(want, sizeof want, "Fake GPU %u, \"test\" edition", g);
            CHECK(!strcmp(row.f[1], want), "name with comma and quotes survives: %s", row.f[1]);
            snprintf(want, sizeof want, "%llu MiB", (unsigned long long)((g + 1) * 1024 + 3));
            CHECK(!strcmp(row.f[3], want), "memory.used %s", row.f[3]);
            CHECK(!strcmp(row.f[4], "512 MiB"), "memory.reserved %s", row.f[4]);
            snprintf(want, sizeof want, "%llu MiB", (unsigned long long)(24576 - 512 - (g + 1) * 1024 - 3));
            CHECK(!strcmp(row.f[5], want), "memory.free %s", row.f[5]);
            CHECK(!strcmp(row.f[6], "24576 MiB"), "memory.total %s", row.f[6]);
            if (g < 2) {
                snprintf(want, sizeof want, "%u %%", 40 + g);
                CHECK(!strcmp(row.f[7], want), "utilization.gpu %s", row.f[7]);
                snprintf(want, sizeof want, "%u", 50 + g);
                CHECK(!strcmp(row.f[9], want), "temperature %s", row.f[9]);
                snprintf(want, sizeof want, "%.2f W", 123.456 + g);
                CHECK(!strcmp(row.f[10], want), "power.draw %s", row.f[10]);
            } else {
                CHECK(!strcmp(row.f[7], "[N/A]") && !strcmp(row.f[8], "[N/A]") && !strcmp(row.f[9], "[N/A]") &&
                          !strcmp(row.f[10], "[N/A]"),
                      "unsupported fields are [N/A]: %s", lines[3]);
                CHECK(!strcmp(row.f[11], "700.00 W"), "limit still there");
            }
        }
    }
    result_free(&r);

    /* nvidia-smi's own spelling of a query. */
    r = run(NULL, ARGS("--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits"));
    CHECK(r.status == 0 && !strcmp(r.out, "0, 1027, 24576\n1, 2051, 24576\n"), "noheader,nounits: [%s] %s", r.out, r.err);
    result_free(&r);

    char procs[128];
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%u:%llu,1:4242:na", (unsigned)getpid(), 300 * MiB);
    r = run(ENV(procs), ARGS("--query-compute-apps=gpu_uuid,pid,used_memory,user", "--format=csv"));
    char want[512];
    snprintf(want, sizeof want,
             "gpu_uuid, pid, used_gpu_memory [MiB], user\nGPU-fa4e0000-0000-0000-0000-000000000000, %u, 300 MiB, %s\n"
             "GPU-fa4e0000-0000-0000-0000-000000000001, 4242, [N/A], [N/A]\n",
             (unsigned)getpid(), self_user);
    CHECK(r.status == 0 && !strcmp(r.out, want), "apps CSV:\n%s\nwanted:\n%s%s", r.out, want, r.err);
    result_free(&r);

    /* The bytes the H200 run recorded (bench/results/2026-12-02-smi-gpu.md), where nvidia-smi
     * printed used 3691 and reserved 616: partial MiB round up, free rounds down. */
    r = run(ENV("FAKE_NVML_GPUS=1", "FAKE_NVML_MEM=0:150754820096:644939776:3870097408"),
            ARGS("--query-gpu=memory.used,memory.reserved,memory.total,memory.free", "--format=csv,noheader,nounits"));
    CHECK(r.status == 0 && !strcmp(r.out, "3691, 616, 143771, 139465\n"), "MiB rounding as nvidia-smi: %s", r.out);
    result_free(&r);

    r = run(NULL, ARGS("--query-gpu=index,memory.bogus"));
    CHECK(r.status == 2 && strstr(r.err, "unknown --query-gpu field 'memory.bogus'") && count_char(r.err, '\n') == 2,
          "bad field: %d %s", r.status, r.err);
    result_free(&r);
}

/* ---- unreadable devices, fallbacks ------------------------------------------------------- */

static void test_device_errors(void) {
    result r = run(ENV("FAKE_NVML_GPUS=4", "FAKE_NVML_HANDLE_ERROR=1:4", "FAKE_NVML_LOST=2",
                       "FAKE_NVML_UNSUPPORTED=3:memory,3:name,3:procs"),
                   ARGS("--json"));
    CHECK(r.status == 0, "errors are data, exit %d: %s", r.status, r.err);
    jv doc;
    if (json_parse(r.out, &doc, err, sizeof err) == 0) {
        CHECK(jget(&doc, "gpus")->n == 4, "four GPUs");
        CHECK(jis_u64(jget(gpu_of(&doc, 0), "memory_total_bytes"), 24 * GiB), "GPU 0 fine");
        const jv *g1 = gpu_of(&doc, 1), *g2 = gpu_of(&doc, 2), *g3 = gpu_of(&doc, 3);
        CHECK(jis_str(jget(g1, "error"), "Insufficient Permissions"), "NO_PERMISSION device");
        CHECK(jis_null(jget(g1, "memory_used_bytes")) && jis_null(jget(g1, "name")), "no data on 1");
        CHECK(jis_str(jget(g2, "error"), "GPU is lost"), "GPU_IS_LOST device");
        CHECK(jis_null(jget(g2, "processes")), "no processes on lost");
        CHECK(jis_null(jget(g3, "error")) && jis_null(jget(g3, "memory_used_bytes")) && jis_null(jget(g3, "name")),
              "unsupported memory/name are null");
        CHECK(jis_null(jget(g3, "processes")) && jis_u64(jget(g3, "temperature_c"), 53), "procs N/A, temp there");
        jfree(&doc);
    } else {
        CHECK(0, "JSON: %s", err);
    }
    result_free(&r);

    r = run(ENV("FAKE_NVML_GPUS=4", "FAKE_NVML_HANDLE_ERROR=1:4", "FAKE_NVML_LOST=2",
                "FAKE_NVML_UNSUPPORTED=3:memory,3:name,3:procs"),
            ARGS("--query-gpu=index,name,memory.used", "--format=csv,noheader"));
    CHECK(r.status == 0 && !strcmp(r.out, "0, \"Fake GPU 0, \"\"test\"\" edition\", 1027 MiB\n"
                                          "1, [Insufficient Permissions], [Insufficient Permissions]\n"
                                          "2, [GPU is lost], [GPU is lost]\n3, [N/A], [N/A]\n"),
          "CSV with errors:\n%s", r.out);
    result_free(&r);

    r = run(ENV("FAKE_NVML_GPUS=4", "FAKE_NVML_HANDLE_ERROR=1:4", "FAKE_NVML_LOST=2", "FAKE_NVML_UNSUPPORTED=3:memory,3:procs"), NULL);
    CHECK(r.status == 0 && strstr(r.out, "  1  [Insufficient Permissions]") && strstr(r.out, "  2  [GPU is lost]") &&
              strstr(r.out, "processes: N/A"),
          "table with errors:\n%s", r.out);
    result_free(&r);

    /* NO_PERMISSION on single fields (as in containers): only those fields are N/A. */
    r = run(ENV("FAKE_NVML_UNSUPPORTED=0:power:4,0:procs:4"), ARGS("--json"));
    if (json_parse(r.out, &doc, err, sizeof err) == 0) {
        const jv *g0 = gpu_of(&doc, 0);
        CHECK(jis_null(jget(g0, "error")) && jis_null(jget(g0, "power_w")) && jis_null(jget(g0, "processes")) &&
                  jis_u64(jget(g0, "memory_total_bytes"), 24 * GiB) && jis_u64(jget(g0, "temperature_c"), 50),
              "field-level NO_PERMISSION: %s", r.out);
        jfree(&doc);
    } else {
        CHECK(0, "JSON: %s", err);
    }
    result_free(&r);

    /* An old driver: no nvmlInit_v2 & co, no memory v2, process lists only as v1 records. */
    char procs[128];
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%u:%llu,1:777:%llu", (unsigned)getpid(), 64 * MiB, 65 * MiB);
    r = run(ENV("VRAM_NVML_LIBRARY=" FAKE_NVML_OLD_PATH, procs), ARGS("--json"));
    CHECK(r.status == 0, "old driver exit %d: %s", r.status, r.err);
    if (json_parse(r.out, &doc, err, sizeof err) == 0) {
        const jv *g0 = gpu_of(&doc, 0);
        CHECK(jis_u64(jget(g0, "memory_used_bytes"), 1 * GiB + 3 * MiB + 512 * MiB), "v1 used includes reserved");
        CHECK(jis_null(jget(g0, "memory_reserved_bytes")) && jis_u64(jget(g0, "memory_version"), 1), "v1: no reserved");
        const jv *p = process_of(g0, (unsigned)getpid());
        CHECK(p && jis_u64(jget(p, "used_memory_bytes"), 64 * MiB), "v1 16-byte records read right");
        p = process_of(gpu_of(&doc, 1), 777);
        CHECK(p && jis_u64(jget(p, "used_memory_bytes"), 65 * MiB), "v1 record on GPU 1");
        jfree(&doc);
    } else {
        CHECK(0, "JSON: %s", err);
    }
    result_free(&r);
    r = run(ENV("VRAM_NVML_LIBRARY=" FAKE_NVML_OLD_PATH), NULL);
    CHECK(r.status == 0 && strstr(r.out, "memory used includes the driver's reservation"), "v1 noted in table");
    result_free(&r);

    /* v2 refused on one device of a current driver: that device falls back to v1 alone. */
    r = run(ENV("FAKE_NVML_UNSUPPORTED=1:memory_v2"), ARGS("--query-gpu=memory.used,memory.reserved", "--format=csv,noheader,nounits"));
    CHECK(r.status == 0 && !strcmp(r.out, "1027, 512\n2563, [N/A]\n"), "per-device v1 fallback: %s", r.out);
    result_free(&r);

    /* Drivers 535.43-535.85 write 32-byte records from the _v3 call. */
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:1111:%llu,0:2222:%llu,0:3333:%llu", 10 * MiB, 20 * MiB, 30 * MiB);
    r = run(ENV("FAKE_NVML_DRIVER=535.54.03", procs), ARGS("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"));
    CHECK(r.status == 0 && !strcmp(r.out, "1111, 10\n2222, 20\n3333, 30\n"), "535 stride: %s", r.out);
    result_free(&r);
}

static void test_process_growth(void) {
    char calls[300];
    snprintf(calls, sizeof calls, "FAKE_NVML_CALLS=%s/calls", tmpdir);
    unlink(calls + 16);
    result r = run(ENV("FAKE_NVML_MANY=0:300", "FAKE_NVML_GROW=40", calls), ARGS("--query-compute-apps=gpu_index,pid,used_memory", "--format=csv,noheader,nounits"));
    CHECK(r.status == 0, "many processes exit %d: %s", r.status, r.err);
    char *log = slurp(calls + 16, NULL);
    size_t grown = 0;
    for (const char *p = log; (p = strstr(p, "v3 C 0 ")); p++)
        if (strstr(p, "-> 7") && strstr(p, "-> 7") < strchr(p, '\n')) grown++;
    CHECK(grown >= 1, "the first call was too small, so the buffer grew: %s", log);
    CHECK(!strstr(log, "v2 ") && !strstr(log, "v1 "), "v3 was enough: %s", log);
    size_t rows = count_char(r.out, '\n');
    CHECK(rows == 300 + 40 * grown, "%zu rows for 300 + 40 x %zu", rows, grown);
    int all_right = 1;
    char *lines = r.out;
    for (unsigned k = 0; k < 300; k++) {
        char want[64];
        snprintf(want, sizeof want, "0, %u, %u\n", 3000000 + k, k + 1);
        if (!strstr(lines, want)) all_right = 0;
    }
    CHECK(all_right, "each of the 300 has its pid and (k+1) MiB");
    free(log);
    result_free(&r);
}

/* ---- no library, no driver, no GPU ------------------------------------------------------- */

static void test_no_driver(void) {
    result r = run(ENV("VRAM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"), NULL);
    CHECK(r.status == 2, "missing library: exit %d", r.status);
    CHECK(count_char(r.err, '\n') == 1 && !strncmp(r.err, "vram smi: cannot load NVML: tried VRAM_NVML_LIBRARY=/nonexistent", 64) &&
              strstr(r.err, "cannot open shared object file") && strstr(r.err, "VRAM_NVML_LIBRARY"),
          "one clear line: %s", r.err);
    CHECK(r.out_len == 0, "nothing on stdout");
    result_free(&r);

    r = run(ENV("FAKE_NVML_INIT_ERROR=9"), ARGS("--json"));
    CHECK(r.status == 2 && count_char(r.err, '\n') == 1 && strstr(r.err, "nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)") &&
              strstr(r.err, "lsmod"),
          "init failure line: %s", r.err);
    result_free(&r);

    r = run(ENV("FAKE_NVML_GPUS=0"), NULL);
    CHECK(r.status == 2 && count_char(r.err, '\n') == 1 && strstr(r.err, "reports no NVIDIA GPU"), "no GPU: %s", r.err);
    result_free(&r);

    /* The default search, where this machine has no driver (CI). */
    void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
    if (h) {
        dlclose(h);
        printf("(a real libnvidia-ml.so.1 is here: default-search checks skipped)\n");
        return;
    }
    r = run(ENV("VRAM_NVML_LIBRARY=", "LD_LIBRARY_PATH="), NULL);
    CHECK(r.status == 2 && count_char(r.err, '\n') == 1 && strstr(r.err, "tried libnvidia-ml.so.1 (") &&
              strstr(r.err, "NVIDIA driver installed"),
          "no driver: %s", r.err);
    result_free(&r);

    /* The toolkit's stub found as libnvidia-ml.so is refused; libnvidia-ml.so.1 is taken. */
    char dir[400], link[500], env[520];
    snprintf(dir, sizeof dir, "%s/cuda/lib64/stubs", tmpdir);
    char mk[500];
    snprintf(mk, sizeof mk, "mkdir -p %s", dir);
    CHECK(system(mk) == 0, "mkdir");
    snprintf(link, sizeof link, "%s/libnvidia-ml.so", dir);
    CHECK(symlink(FAKE_NVML_PATH, link) == 0, "symlink stub");
    snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", dir);
    r = run(ENV("VRAM_NVML_LIBRARY=", env), NULL);
    CHECK(r.status == 2 && count_char(r.err, '\n') == 1 && strstr(r.err, "toolkit's stub"), "stub refused: %s", r.err);
    result_free(&r);
    snprintf(dir, sizeof dir, "%s/driver", tmpdir);
    mkdir(dir, 0755);
    snprintf(link, sizeof link, "%s/libnvidia-ml.so.1", dir);
    CHECK(symlink(FAKE_NVML_PATH, link) == 0, "symlink .so.1");
    snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", dir);
    r = run(ENV("VRAM_NVML_LIBRARY=", env), ARGS("--csv=noheader,nounits", "--query-gpu=index"));
    CHECK(r.status == 0 && !strcmp(r.out, "0\n1\n"), "libnvidia-ml.so.1 found by name: %d %s %s", r.status, r.out, r.err);
    result_free(&r);
}

/* ---- options ----------------------------------------------------------------------------- */

static void test_options(void) {
    result r = run(ENV("FAKE_NVML_GPUS=3"), ARGS("-i", "2,0", "--query-gpu=index", "--format=csv,noheader"));
    CHECK(r.status == 0 && !strcmp(r.out, "2\n0\n"), "-i 2,0: %s", r.out);
    result_free(&r);
    r = run(ENV("FAKE_NVML_GPUS=3"), ARGS("-i", "GPU-fa4e0000-0000-0000-0000-000000000001,0", "--query-gpu=index", "--format=csv,noheader"));
    CHECK(r.status == 0 && !strcmp(r.out, "1\n0\n"), "-i by UUID: %s %s", r.out, r.err);
    result_free(&r);
    r = run(ENV("FAKE_NVML_GPUS=3"), ARGS("-i", "GPU-fa4e", "--query-gpu=index", "--format=csv,noheader"));
    CHECK(r.status == 2 && strstr(r.err, "-i GPU-fa4e: 3 GPUs have UUIDs starting so") && !*r.out,
          "-i with a prefix of several UUIDs is refused, not the first taken: %d %s %s", r.status, r.out, r.err);
    result_free(&r);
    /* lists of any length, read whole: a list of full UUIDs longer than 512 characters lost its end
     * (the GPU named there silently left out), a --csv= list longer than 256 a bad option */
    {
        char ids[1200] = "", csv[600] = "--csv=noheader";
        for (int k = 0; k < 14; k++) strcat(ids, "GPU-fa4e0000-0000-0000-0000-000000000000,");
        strcat(ids, "GPU-fa4e0000-0000-0000-0000-000000000002");
        for (int k = 0; k < 40; k++) strcat(csv, ",nounits");
        strcat(csv, ",bogus");
        r = run(ENV("FAKE_NVML_GPUS=3"), ARGS("-i", ids, "--query-gpu=index", "--format=csv,noheader"));
        CHECK(r.status == 0 && !strcmp(r.out, "0\n2\n"), "-i with a long list of UUIDs: %d %s %s", r.status, r.out, r.err);
        result_free(&r);
        r = run(ENV("FAKE_NVML_GPUS=3"), ARGS(csv));
        CHECK(r.status == 2 && strstr(r.err, "unknown CSV option 'bogus'") && !*r.out, "a long --csv= list: %d %s",
              r.status, r.err);
        result_free(&r);
    }
    /* one message and status 2 each; option values are named before NVML is loaded, so with no
     * driver the bad value still comes first (no "NVML" in the message) */
    static const struct {
        const char *env, *args[3], *expect;
    } refused[] = {
        {"VRAM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1", {"-i", "0,,1"}, "bad -i '0,,1'"},
        {"VRAM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1", {"--listen", "127.0.0.1:99999"}, "bad --listen address"},
        {"FAKE_NVML_GPUS=3", {"-l", "-1"}, "bad -l interval '-1'"},
        {"FAKE_NVML_GPUS=3", {"-l", "86401"}, "bad -l interval '86401': expected seconds such as 1 or 0.5, from 0.01 to 86400"},
        {"FAKE_NVML_GPUS=3", {"--loop-ms", "86400001"}, "bad --loop-ms '86400001': expected whole milliseconds from 10 to 86400000"},
        {"FAKE_NVML_GPUS=3", {"--query-compute-apps=pid", "--query-gpu=index"},
         "choose one of --query-gpu and --query-compute-apps"},
        {"FAKE_NVML_GPUS=3", {"-i", "GPU-ffff"}, "no GPU has the UUID GPU-ffff"},
        {"FAKE_NVML_GPUS=3", {"-i", "3"}, "no GPU 3: NVML reports 3 GPUs (indices 0-2)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        r = run(ENV(refused[i].env), refused[i].args);
        CHECK(r.status == 2 && strstr(r.err, refused[i].expect) &&
                  (strncmp(refused[i].env, "VRAM_NVML_LIBRARY", 17) || !strstr(r.err, "NVML")),
              "%s %s: refused with '%s': %d %s", refused[i].args[0], refused[i].args[1], refused[i].expect, r.status,
              r.err);
        result_free(&r);
    }
    static const char *const bad[][4] = {
        {"-i", "x", NULL}, {"--loop-ms", "5", NULL}, {"-l", "abc", NULL}, {"--json", "--csv", NULL},
        {"--pid", "-3", NULL}, {"--bogus", NULL}, {"--listen", "127.0.0.1:9400", "--json", NULL},
        {"--prometheus", "-l", "1", NULL}, {"--log", "x.txt", "-l", NULL}, {"--format=json", NULL},
        {"--allow-remote", NULL}, {"--count", "3", NULL}, {"--listen", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = run(NULL, bad[i]);
        CHECK(r.status == 2 && !strncmp(r.err, "vram smi: ", 10) && r.out_len == 0, "bad usage %s %s: %d %s", bad[i][0],
              bad[i][1] ? bad[i][1] : "", r.status, r.err);
        result_free(&r);
    }
    r = run(NULL, ARGS("--help"));
    CHECK(r.status == 0 && strstr(r.out, "--query-compute-apps") && strstr(r.out, "VRAM_NVML_LIBRARY"), "--help");
    result_free(&r);

    /* --pid: only that process; a pid that does not exist is an error. */
    char procs[128], pidarg[32];
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%u:%llu,0:4242:%llu", (unsigned)getpid(), 7 * MiB, 8 * MiB);
    snprintf(pidarg, sizeof pidarg, "%u", (unsigned)getpid());
    r = run(ENV(procs), ARGS("--pid", pidarg, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"));
    char want[64];
    snprintf(want, sizeof want, "%u, 7\n", (unsigned)getpid());
    CHECK(r.status == 0 && !strcmp(r.out, want), "--pid filters: %s", r.out);
    result_free(&r);
    r = run(ENV(procs), ARGS("--pid", "4194300"));
    CHECK(r.status == 2 && strstr(r.err, "no process 4194300"), "--pid of no process: %s", r.err);
    result_free(&r);

    /* --pid with -l stops when the process exits. */
    pid_t child = fork();
    if (child == 0) {
        sleep_ms(300);
        _exit(0);
    }
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%d:%llu", (int)child, 9 * MiB);
    snprintf(pidarg, sizeof pidarg, "%d", (int)child);
    proc p = start(ENV(procs), ARGS("--pid", pidarg, "--loop-ms", "50", "--json"));
    sleep_ms(150);
    waitpid(child, NULL, 0); /* reaped: /proc/<child> is gone */
    r = finish(p, 10.0);
    CHECK(r.status == 0 && strstr(r.err, "has exited") && count_char(r.out, '\n') >= 2, "follow ends: %d %s", r.status, r.err);
    result_free(&r);
}

/* A process that names itself with a terminal escape and bytes that are not UTF-8 (any user can,
 * and the name reaches an admin's terminal, JSON readers and Prometheus scrapes): every format
 * shows it printable, with '?' for those bytes, and stays parseable. */
static void test_odd_command(void) {
    pid_t child = fork();
    if (child == 0) {
        execl("/bin/sleep", "sl\x1b[31m\xff\xc3" "ep", "5", (char *)NULL); /* (0xc3: a lead byte cut short) */
        _exit(127);
    }
    sleep_ms(100); /* (exec done: /proc/<child>/cmdline holds the new name) */
    char procs[128];
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%d:%llu", (int)child, 9 * MiB);
    static const struct { const char *arg, *want; } formats[] = {
        {"--json", "sl?[31m??ep 5"}, {"--query-compute-apps=pid,command", "sl?[31m??ep 5"},
        {"--prometheus", "command=\"sl?[31m??ep\""}, {NULL, "sl?[31m??ep 5"}}; /* (Prometheus: argv[0]) */
    for (int f = 0; f < 4; f++) {
        result r = formats[f].arg ? run(ENV(procs), ARGS(formats[f].arg)) : run(ENV(procs), ARGS("-i", "0"));
        const char *fmt = formats[f].arg ? formats[f].arg : "the table";
        CHECK(r.status == 0 && strstr(r.out, formats[f].want) && !strchr(r.out, '\x1b') && !strchr(r.out, '\xff'),
              "%s: the command shown printable: %s", fmt, r.out);
        if (f == 0) CHECK(python_agrees("json", r.out), "python's json reads it");
        if (f == 1) CHECK(python_agrees("csv", r.out), "python's csv reads it");
        if (f == 2) {
            prom_doc doc;
            int ok = prom_parse(r.out, &doc, err, sizeof err) == 0;
            CHECK(ok, "Prometheus parses: %s", err);
            prom_free(&doc);
        }
        result_free(&r);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

/* ---- Prometheus and HTTP ----------------------------------------------------------------- */

static void check_prometheus(const char *text, const char *what) {
    prom_doc doc;
    int ok = prom_parse(text, &doc, err, sizeof err) == 0;
    CHECK(ok, "%s parses as exposition format: %s\n%s", what, err, text);
    if (!ok) return;
    const prom_sample *s = prom_find(&doc, "vram_gpu_memory_used_bytes", "gpu", "0");
    CHECK(s && s->value == (double)(GiB + 3 * MiB), "%s: used bytes gpu 0", what);
    CHECK(s && prom_label(s, "uuid") && !strcmp(prom_label(s, "uuid"), "GPU-fa4e0000-0000-0000-0000-000000000000"), "%s: uuid label", what);
    CHECK(s && prom_label(s, "name") && !strcmp(prom_label(s, "name"), "Fake GPU 0, \"test\" edition"), "%s: escaped name label", what);
    s = prom_find(&doc, "vram_gpu_memory_total_bytes", "gpu", "1");
    CHECK(s && s->value == (double)(24 * GiB), "%s: total gpu 1", what);
    s = prom_find(&doc, "vram_gpu_memory_reserved_bytes", "gpu", "1");
    CHECK(s && s->value == (double)(512 * MiB), "%s: reserved", what);
    s = prom_find(&doc, "vram_gpu_utilization_ratio", "gpu", "1");
    CHECK(s && fabs(s->value - 0.41) < 1e-9, "%s: utilization ratio", what);
    s = prom_find(&doc, "vram_gpu_memory_used_ratio", "gpu", "0");
    CHECK(s && fabs(s->value - (double)(GiB + 3 * MiB) / (double)(24 * GiB)) < 1e-6, "%s: used ratio", what);
    s = prom_find(&doc, "vram_gpu_power_watts", "gpu", "0");
    CHECK(s && fabs(s->value - 123.456) < 1e-9, "%s: watts", what);
    CHECK(prom_find(&doc, "vram_gpu_temperature_celsius", "gpu", "2") == NULL, "%s: unsupported temperature absent", what);
    s = prom_find(&doc, "vram_gpu_up", "gpu", "3");
    CHECK(s && s->value == 0, "%s: lost GPU is down", what);
    s = prom_find(&doc, "vram_gpu_up", "gpu", "0");
    CHECK(s && s->value == 1, "%s: GPU 0 up", what);
    CHECK(prom_find(&doc, "vram_gpu_memory_used_bytes", "gpu", "3") == NULL, "%s: no memory of a lost GPU", what);
    char me[32];
    snprintf(me, sizeof me, "%u", (unsigned)getpid());
    s = prom_find(&doc, "vram_process_memory_used_bytes", "pid", me);
    CHECK(s && s->value == (double)(300 * MiB) && prom_label(s, "gpu") && !strcmp(prom_label(s, "gpu"), "0"), "%s: process series", what);
    CHECK(prom_find(&doc, "vram_process_memory_used_bytes", "pid", "4242") == NULL, "%s: unknown memory has no series", what);
    for (size_t i = 0; i < doc.n; i++) {
        const char *n = doc.s[i].name;
        size_t l = strlen(n);
        int unit = (l > 6 && !strcmp(n + l - 6, "_bytes")) || (l > 6 && !strcmp(n + l - 6, "_ratio")) ||
                   strstr(n, "_celsius") || strstr(n, "_watts") || strstr(n, "_seconds") || !strcmp(n, "vram_gpu_up") ||
                   !strcmp(n, "vram_gpu_info");
        CHECK(unit, "%s: %s has a base-unit suffix", what, n);
        CHECK(!strncmp(n, "vram_smi", 8) || (prom_label(&doc.s[i], "gpu") && prom_label(&doc.s[i], "uuid") && prom_label(&doc.s[i], "name")),
              "%s: %s has labels gpu, uuid, name", what, n);
    }
    prom_free(&doc);
}

static const char *const prom_env[] = {"FAKE_NVML_GPUS=4", "FAKE_NVML_UNSUPPORTED=2:temp", "FAKE_NVML_LOST=3", NULL, NULL};

static void test_prometheus(void) {
    char procs[128];
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%u:%llu,0:4242:na", (unsigned)getpid(), 300 * MiB);
    const char *env[5];
    memcpy(env, prom_env, sizeof env);
    env[3] = procs;
    result r = run(env, ARGS("--prometheus"));
    CHECK(r.status == 0, "--prometheus exit %d: %s", r.status, r.err);
    check_prometheus(r.out, "--prometheus");
    CHECK(strstr(r.out, "# HELP vram_gpu_memory_used_bytes ") && strstr(r.out, "# TYPE vram_gpu_memory_used_bytes gauge\n"),
          "HELP and TYPE lines");
    result_free(&r);
}

static void test_http(void) {
    char procs[128];
    snprintf(procs, sizeof procs, "FAKE_NVML_PROCS=0:%u:%llu,0:4242:na", (unsigned)getpid(), 300 * MiB);
    const char *env[5];
    memcpy(env, prom_env, sizeof env);
    env[3] = procs;
    proc p = start(env, ARGS("--listen", "127.0.0.1:0"));
    int port = wait_port(&p);
    CHECK(port > 0, "server announced its port");
    if (port > 0) {
        char *resp = http_get(port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n");
        CHECK(resp && !strncmp(resp, "HTTP/1.1 200 OK\r\n", 17), "200 from /metrics: %.80s", resp ? resp : "(none)");
        CHECK(resp && strstr(resp, "Content-Type: text/plain; version=0.0.4"), "exposition content type");
        char *body = resp ? strstr(resp, "\r\n\r\n") : NULL;
        if (body) {
            char *cl = strstr(resp, "Content-Length: ");
            CHECK(cl && (size_t)atol(cl + 16) == strlen(body + 4), "Content-Length matches");
            check_prometheus(body + 4, "HTTP /metrics");
        }
        free(resp);
        resp = http_get(port, "GET /nope HTTP/1.0\r\n\r\n");
        CHECK(resp && !strncmp(resp, "HTTP/1.1 404", 12), "404 elsewhere");
        free(resp);
        resp = http_get(port, "POST /metrics HTTP/1.0\r\n\r\n");
        CHECK(resp && !strncmp(resp, "HTTP/1.1 405", 12), "405 for POST");
        free(resp);
        resp = http_get(port, "garbage\r\n\r\n");
        CHECK(resp && !strncmp(resp, "HTTP/1.1 400", 12), "400 for garbage");
        free(resp);
        /* A real client, when this machine has curl. */
        if (system("command -v curl >/dev/null 2>&1") == 0) {
            char cmd[1024], out[300];
            snprintf(out, sizeof out, "%s/curl.out", tmpdir);
            snprintf(cmd, sizeof cmd, "curl -sS --max-time 5 -o %s -w '%%{http_code}' http://127.0.0.1:%d/metrics > %s.code", out, port, out);
            int rc = system(cmd);
            char codepath[320];
            snprintf(codepath, sizeof codepath, "%s.code", out);
            char *code = slurp(codepath, NULL);
            CHECK(rc == 0 && !strcmp(code, "200"), "curl got 200 (rc %d, code %s)", rc, code);
            char *text = slurp(out, NULL);
            check_prometheus(text, "curl /metrics");
            free(text);
            free(code);
        } else {
            printf("(curl not installed: only the C client asked)\n");
        }
    }
    kill(p.pid, SIGTERM);
    result r = finish(p, 5.0);
    CHECK(r.status == 0, "server stops cleanly on SIGTERM: %d %s", r.status, r.err);
    result_free(&r);

    r = run(NULL, ARGS("--listen", "0.0.0.0:0"));
    CHECK(r.status == 2 && strstr(r.err, "refusing to listen on 0.0.0.0:0") && strstr(r.err, "--allow-remote") &&
              count_char(r.err, '\n') == 1,
          "0.0.0.0 refused: %d %s", r.status, r.err);
    result_free(&r);
    r = run(NULL, ARGS("--listen", "[::]:0"));
    CHECK(r.status == 2 && strstr(r.err, "refusing"), "[::] refused: %s", r.err);
    result_free(&r);
    r = run(NULL, ARGS("--listen", "nonsense"));
    CHECK(r.status == 2 && strstr(r.err, "bad --listen address"), "bad address: %s", r.err);
    result_free(&r);
    p = start(NULL, ARGS("--listen", "0.0.0.0:0", "--allow-remote"));
    port = wait_port(&p);
    CHECK(port > 0, "--allow-remote binds 0.0.0.0");
    if (port > 0) {
        char *resp = http_get(port, "GET /metrics HTTP/1.0\r\n\r\n");
        CHECK(resp && !strncmp(resp, "HTTP/1.1 200", 12), "served on all addresses");
        free(resp);
    }
    kill(p.pid, SIGINT);
    r = finish(p, 5.0);
    CHECK(r.status == 0, "stops on SIGINT");
    result_free(&r);
}

/* ---- loop mode --------------------------------------------------------------------------- */

static void check_json_lines(const char *text, size_t len, const char *what, size_t *nlines) {
    *nlines = 0;
    CHECK(len == 0 || text[len - 1] == '\n', "%s: ends with a complete line", what);
    const char *p = text;
    int all_ok = 1;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        size_t n = (size_t)(nl - p);
        char *line = malloc(n + 1);
        memcpy(line, p, n);
        line[n] = '\0';
        jv doc;
        if (json_parse(line, &doc, err, sizeof err) != 0) {
            if (all_ok) CHECK(0, "%s line %zu: %s", what, *nlines + 1, err);
            all_ok = 0;
        } else {
            if (!(jget(&doc, "gpus") && jget(&doc, "gpus")->n == 2)) all_ok = 0;
            jfree(&doc);
        }
        free(line);
        (*nlines)++;
        p = nl + 1;
    }
    CHECK(all_ok, "%s: every line is a whole sample", what);
}

static void test_loop_json_kill(void) {
    /* 120 processes make each line ~12 KB, longer than a pipe's atomic size. */
    for (int sig = 0; sig < 2; sig++) {
        proc p = start(ENV("FAKE_NVML_MANY=0:120", "FAKE_NVML_VARY=1"), ARGS("--loop-ms", "10", "--json"));
        sleep_ms(400);
        kill(p.pid, sig ? SIGTERM : SIGKILL);
        result r = finish(p, 5.0);
        CHECK(sig ? r.status == 0 : r.status == 128 + SIGKILL, "exit after %s: %d", sig ? "SIGTERM" : "SIGKILL", r.status);
        size_t n;
        check_json_lines(r.out, r.out_len, sig ? "SIGTERM stream" : "SIGKILL stream", &n);
        CHECK(n >= 5, "a stream of samples (%zu)", n);
        result_free(&r);
    }
    /* --count with CSV: the header once. */
    result r = run(NULL, ARGS("--loop-ms", "10", "--count", "3", "--query-gpu=timestamp,index,memory.used", "--format=csv"));
    char *lines[16];
    size_t n = split_lines(r.out, lines, 16);
    CHECK(r.status == 0 && n == 7 && !strcmp(lines[0], "timestamp, index, memory.used [MiB]"), "3 samples x 2 GPUs + header: %zu", n);
    for (size_t i = 1; i < n; i++) {
        csv_row row;
        CHECK(csv_parse_line(lines[i], &row, err, sizeof err) == 0 && row.n == 3 && strlen(row.f[0]) == 23 && row.f[0][4] == '/',
              "row %zu: %s", i, lines[i]);
    }
    result_free(&r);
}

static void test_log(void) {
    char csvlog[300], jsonlog[300], arg[320];
    snprintf(csvlog, sizeof csvlog, "%s/samples.csv", tmpdir);
    snprintf(jsonlog, sizeof jsonlog, "%s/samples.jsonl", tmpdir);
    unlink(csvlog);
    unlink(jsonlog);
    for (int round = 0; round < 2; round++) {
        result r = run(NULL, ARGS("--loop-ms", "10", "--count", "3", "--json", "--log", csvlog));
        CHECK(r.status == 0 && count_char(r.out, '\n') == 3, "stdout still gets the samples");
        result_free(&r);
    }
    char *text = slurp(csvlog, NULL);
    char *lines[32];
    size_t n = split_lines(text, lines, 32);
    CHECK(n == 13, "CSV log: one header, 2 runs x 3 samples x 2 GPUs: %zu lines", n);
    CHECK(n && !strncmp(lines[0], "timestamp, index, name, uuid, memory.used [MiB]", 47), "log header: %s", n ? lines[0] : "");
    for (size_t i = 1; i < n; i++) {
        csv_row row;
        CHECK(csv_parse_line(lines[i], &row, err, sizeof err) == 0 && row.n == 13, "log row %zu: %s", i, lines[i]);
    }
    free(text);
    snprintf(arg, sizeof arg, "%s", jsonlog);
    result r = run(NULL, ARGS("--loop-ms", "10", "--count", "4", "--log", arg));
    CHECK(r.status == 0, "table + JSON log");
    result_free(&r);
    size_t len, lines_n;
    text = slurp(jsonlog, &len);
    check_json_lines(text, len, "JSON log", &lines_n);
    CHECK(lines_n == 4, "4 JSON log lines: %zu", lines_n);
    free(text);
}

static void test_tty(void) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) || unlockpt(master)) {
        printf("(no pseudo-terminal: in-place redraw not checked)\n");
        return;
    }
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    proc p = start_at(ENV("FAKE_NVML_VARY=1", "LANG=C.UTF-8", "LC_ALL=", "LC_CTYPE=", "TERM=xterm"), ARGS("--loop-ms", "20"), slave);
    close(slave);
    /* Read what it draws for a while, then Ctrl-C. */
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int sent = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double el = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
        if (!sent && el > 0.5) {
            kill(p.pid, SIGINT);
            sent = 1;
        }
        if (el > 5) break;
        struct pollfd pfd = {master, POLLIN, 0};
        if (poll(&pfd, 1, 50) > 0) {
            ssize_t r = read(master, buf + n, cap - n - 1);
            if (r <= 0) break; /* EIO once the child closed the slave */
            n += (size_t)r;
            if (n >= cap - 1) break;
        } else if (sent && waitpid(p.pid, NULL, WNOHANG) == p.pid) {
            p.pid = -1;
            break;
        }
    }
    buf[n] = '\0';
    if (p.pid > 0) {
        result r = finish(p, 3.0);
        CHECK(r.status == 0, "Ctrl-C exits 0: %d %s", r.status, r.err);
        result_free(&r);
    }
    close(master);
    CHECK(strstr(buf, "\033[?25l\033[H\033[2J") == buf, "first frame hides the cursor and clears");
    size_t homes = 0;
    for (const char *q = buf; (q = strstr(q, "\033[H")); q++) homes++;
    CHECK(homes >= 5, "redrawn in place (%zu frames)", homes);
    CHECK(n >= 6 && !strcmp(buf + n - 6, "\033[?25h"), "the cursor is back at the end");
    CHECK(strstr(buf, "\u2581") || strstr(buf, "\u2582") || strstr(buf, "\u2583"), "sparkline drawn with blocks");
    CHECK(strstr(buf, "memory history") != NULL, "history line");
    size_t clears = 0; /* a full clear (ESC [2J) in any later frame would flicker */
    for (const char *q = buf; (q = strstr(q, "\033[2J")); q++) clears++;
    CHECK(clears == 1, "no full clear after the first frame (%zu clears in %zu frames)", clears, homes);
    free(buf);
}

/* ---- CPU cost ---------------------------------------------------------------------------- */

static double child_cpu_s(const char *const *args) {
    struct rusage before, after;
    getrusage(RUSAGE_CHILDREN, &before);
    result r = run(ENV("FAKE_NVML_VARY=1"), args);
    getrusage(RUSAGE_CHILDREN, &after);
    CHECK(r.status == 0, "cpu run exit %d", r.status);
    result_free(&r);
    return (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) + (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6 +
           (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) + (after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
}

static void test_cpu_cost(void) {
    /* The cost of one sample: (51 samples - 1 sample) / 50, so start-up (dlopen, sanitizer
     * init) cancels out. At -l 1, 1% of a core is 10 ms per sample. */
    double one = child_cpu_s(ARGS("--loop-ms", "20", "--count", "1", "--json"));
    double many = child_cpu_s(ARGS("--loop-ms", "20", "--count", "51", "--json"));
    double per = (many - one) / 50.0;
    printf("cpu per sample: %.3f ms (1 sample run %.1f ms, 51 samples %.1f ms)\n", per * 1e3, one * 1e3, many * 1e3);
    CHECK(per < 0.010, "one sample costs %.3f ms of CPU, under 10 ms (1%% of a core at -l 1)", per * 1e3);
}

/* ---- the C API --------------------------------------------------------------------------- */

static void test_api(void) {
    setenv("VRAM_NVML_LIBRARY", FAKE_NVML_PATH, 1);
    setenv("FAKE_NVML_GPUS", "3", 1);
    setenv("FAKE_NVML_UNSUPPORTED", "1:power", 1);
    setenv("FAKE_NVML_HANDLE_ERROR", "2:4", 1);
    char procs[64];
    snprintf(procs, sizeof procs, "0:%u:%llu", (unsigned)getpid(), 11 * MiB);
    setenv("FAKE_NVML_PROCS", procs, 1);
    vram_smi *smi = NULL;
    CHECK_OK(vram_smi_new(&smi));
    if (smi) {
        CHECK(vram_smi_device_count(smi) == 3, "count");
        CHECK(!strcmp(vram_smi_driver_version(smi), "550.54.15"), "driver");
        CHECK(strstr(vram_smi_library_path(smi), "fake_nvml") != NULL, "path %s", vram_smi_library_path(smi));
        vram_smi_device d;
        CHECK_OK(vram_smi_device_query(smi, 0, &d));
        CHECK(d.valid & VRAM_SMI_HAS_MEMORY && d.used_bytes == GiB + 3 * MiB && d.total_bytes == 24 * GiB &&
                  d.reserved_bytes == 512 * MiB && d.memory_version == 2,
              "memory");
        CHECK(d.process_count == 1 && d.processes[0].pid == (uint32_t)getpid() && d.processes[0].used_bytes == 11 * MiB &&
                  d.processes[0].memory_known && !strcmp(d.processes[0].user, self_user),
              "process");
        vram_smi_device_clear(&d);
        CHECK(d.processes == NULL && d.process_count == 0, "clear");
        CHECK_OK(vram_smi_device_query(smi, 1, &d));
        CHECK(!(d.valid & VRAM_SMI_HAS_POWER) && (d.valid & VRAM_SMI_HAS_TEMPERATURE) && d.temperature_c == 51, "power N/A only");
        vram_smi_device_clear(&d);
        CHECK_OK(vram_smi_device_query(smi, 2, &d));
        CHECK(d.nvml_error == 4 && !strcmp(d.error, "Insufficient Permissions") && d.valid == 0, "no permission");
        vram_smi_device_clear(&d);
        CHECK(vram_smi_device_query(smi, 3, &d) == VRAM_ERR_NOT_FOUND && strstr(vram_last_error(), "no GPU 3"), "past count");
        CHECK(!strcmp(vram_smi_nvml_error_string(smi, 15), "GPU is lost"), "error string");
        vram_smi_free(smi);
    }
    setenv("FAKE_NVML_INIT_ERROR", "18", 1);
    smi = NULL;
    CHECK(vram_smi_new(&smi) == VRAM_ERR_NO_DEVICE && smi == NULL && strstr(vram_last_error(), "(NVML error 18)"), "init error: %s",
          vram_last_error());
    unsetenv("FAKE_NVML_INIT_ERROR");
    setenv("VRAM_NVML_LIBRARY", "/nonexistent.so", 1);
    CHECK(vram_smi_new(&smi) == VRAM_ERR_NO_DEVICE && strstr(vram_last_error(), "/nonexistent.so"), "missing library");
    CHECK(vram_smi_new(NULL) == VRAM_ERR_INVALID_ARG, "null out");
    vram_smi_free(NULL);
    unsetenv("VRAM_NVML_LIBRARY");
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_UNSUPPORTED");
    unsetenv("FAKE_NVML_HANDLE_ERROR");
    unsetenv("FAKE_NVML_PROCS");

    char user[64], cmd[256];
    CHECK_OK(vram_smi_process_describe((uint32_t)getpid(), user, sizeof user, cmd, sizeof cmd));
    CHECK(!strcmp(user, self_user) && strstr(cmd, "test_smi"), "describe self: %s %s", user, cmd);
    CHECK(vram_smi_process_describe(4194300, user, sizeof user, cmd, sizeof cmd) == VRAM_ERR_NOT_FOUND && !user[0] && !cmd[0],
          "describe missing");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vram_test_smi_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    struct passwd *pw = getpwuid(getuid());
    snprintf(self_user, sizeof self_user, "%s", pw ? pw->pw_name : "?");
    signal(SIGPIPE, SIG_IGN);

    test_api();
    test_json_full();
    test_csv();
    test_odd_command();
    test_device_errors();
    test_process_growth();
    test_no_driver();
    test_options();
    test_prometheus();
    test_http();
    test_loop_json_kill();
    test_log();
    test_tty();
    test_cpu_cost();

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_done();
}
