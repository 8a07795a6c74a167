/* fake_nvml.c — a stand-in libnvidia-ml for the tests of `vram smi` on machines without a GPU,
 * loaded through VRAM_NVML_LIBRARY and configured by environment variables read at nvmlInit:
 *
 *   FAKE_NVML_GPUS=N                 number of devices (default 2)
 *   FAKE_NVML_INIT_ERROR=CODE        nvmlInit_v2 fails with CODE (e.g. 9 driver not loaded)
 *   FAKE_NVML_DRIVER=VER             driver version (default 550.54.15; 535.54.03 makes the _v3
 *                                    process symbols write 32-byte records, as those drivers did)
 *   FAKE_NVML_HANDLE_ERROR=I:CODE,.. nvmlDeviceGetHandleByIndex_v2(I) fails (4 no permission)
 *   FAKE_NVML_LOST=I,..              device I answers GPU_IS_LOST to every query
 *   FAKE_NVML_UNSUPPORTED=I:F[:CODE],..  field F of device I answers CODE (default 3,
 *                                    NOT_SUPPORTED); F is one of name, uuid, memory, memory_v2,
 *                                    util, temp, power, limit, procs
 *   FAKE_NVML_MEM=I:TOTAL:RESERVED:USED,..  bytes (default total 24 GiB, reserved 512 MiB,
 *                                    used (I+1) GiB + 3 MiB)
 *   FAKE_NVML_PROCS=I:PID:BYTES[:g],..  a compute (or with :g graphics) process on device I;
 *                                    BYTES "na" is NVML_VALUE_NOT_AVAILABLE
 *   FAKE_NVML_MANY=I:N               N more compute processes on device I, pids 3000000+k,
 *                                    (k+1) MiB each, so the caller's buffer must grow
 *   FAKE_NVML_GROW=K                 each INSUFFICIENT_SIZE answer adds K processes to the list
 *                                    (the race where processes start between two calls)
 *   FAKE_NVML_VARY=1                 used memory changes with each memory query
 *   FAKE_NVML_CALLS=FILE             appends one line per process-list call: "v3 C 0 count=16 -> 7"
 *
 * Built twice: as libfake_nvml.so (a current driver: every versioned symbol; the plain ones
 * answer FUNCTION_NOT_FOUND so a caller that uses them is caught) and, with FAKE_NVML_OLD, as
 * libfake_nvml_old.so (a pre-R510 driver: no _v2 memory, no _v2/_v3 process lists, only plain
 * init/count/handle). The memory v2 call checks the struct version like the real one (error 25).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned pid; unsigned long long usedGpuMemory; } proc_v1;
typedef struct { unsigned pid; unsigned long long usedGpuMemory; unsigned gi, ci; } proc_v2;
typedef struct { unsigned pid; unsigned long long usedGpuMemory; unsigned gi, ci; unsigned long long cc; } proc_535;

#define MAX_GPUS 16
#define MAX_PROCS 4096

enum { F_NAME, F_UUID, F_MEMORY, F_MEMORY_V2, F_UTIL, F_TEMP, F_POWER, F_LIMIT, F_PROCS, F_COUNT };
static const char *field_names[F_COUNT] = {"name", "uuid", "memory", "memory_v2", "util", "temp", "power", "limit", "procs"};

typedef struct fake_proc {
    unsigned pid;
    unsigned long long used;
    int graphics;
} fake_proc;

struct fake_device {
    unsigned index;
    int handle_error;
    int lost;
    int unsupported[F_COUNT];
    unsigned long long total, reserved, used;
    fake_proc procs[MAX_PROCS];
    unsigned nprocs;
};

static struct fake_device devices[MAX_GPUS];
static unsigned ngpus;
static int init_count;
static char driver[80];
static unsigned grow;
static int vary;
static unsigned long long memory_calls;
static const char *calls_file;

static void add_proc(unsigned g, unsigned pid, unsigned long long used, int graphics) {
    if (g >= MAX_GPUS || devices[g].nprocs >= MAX_PROCS) return;
    fake_proc *p = &devices[g].procs[devices[g].nprocs++];
    p->pid = pid;
    p->used = used;
    p->graphics = graphics;
}

static void configure(void) {
    memset(devices, 0, sizeof devices);
    const char *e = getenv("FAKE_NVML_GPUS");
    ngpus = e ? (unsigned)atoi(e) : 2;
    if (ngpus > MAX_GPUS) ngpus = MAX_GPUS;
    e = getenv("FAKE_NVML_DRIVER");
    snprintf(driver, sizeof driver, "%s", e ? e : "550.54.15");
    e = getenv("FAKE_NVML_GROW");
    grow = e ? (unsigned)atoi(e) : 0;
    e = getenv("FAKE_NVML_VARY");
    vary = e && atoi(e);
    calls_file = getenv("FAKE_NVML_CALLS");
    for (unsigned i = 0; i < MAX_GPUS; i++) {
        devices[i].index = i;
        devices[i].total = 24ull << 30;
        devices[i].reserved = 512ull << 20;
        devices[i].used = ((unsigned long long)(i + 1) << 30) + (3ull << 20);
    }
    char buf[8192], *save, *tok;
    if ((e = getenv("FAKE_NVML_HANDLE_ERROR"))) {
        snprintf(buf, sizeof buf, "%s", e);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            unsigned g, code;
            if (sscanf(tok, "%u:%u", &g, &code) == 2 && g < MAX_GPUS) devices[g].handle_error = (int)code;
        }
    }
    if ((e = getenv("FAKE_NVML_LOST"))) {
        snprintf(buf, sizeof buf, "%s", e);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            unsigned g = (unsigned)atoi(tok);
            if (g < MAX_GPUS) devices[g].lost = 1;
        }
    }
    if ((e = getenv("FAKE_NVML_UNSUPPORTED"))) {
        snprintf(buf, sizeof buf, "%s", e);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            unsigned g;
            int code = 3;
            char f[32];
            if (sscanf(tok, "%u:%31[^:]:%d", &g, f, &code) < 2 || g >= MAX_GPUS) continue;
            for (int k = 0; k < F_COUNT; k++)
                if (!strcmp(f, field_names[k])) devices[g].unsupported[k] = code;
        }
    }
    if ((e = getenv("FAKE_NVML_MEM"))) {
        snprintf(buf, sizeof buf, "%s", e);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            unsigned g;
            unsigned long long t, r, u;
            if (sscanf(tok, "%u:%llu:%llu:%llu", &g, &t, &r, &u) == 4 && g < MAX_GPUS) {
                devices[g].total = t;
                devices[g].reserved = r;
                devices[g].used = u;
            }
        }
    }
    if ((e = getenv("FAKE_NVML_PROCS"))) {
        snprintf(buf, sizeof buf, "%s", e);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            unsigned g, pid;
            char mem[32] = "", kind[8] = "";
            if (sscanf(tok, "%u:%u:%31[^:]:%7s", &g, &pid, mem, kind) < 3) continue;
            unsigned long long used = !strcmp(mem, "na") ? ~0ull : strtoull(mem, NULL, 10);
            add_proc(g, pid, used, kind[0] == 'g');
        }
    }
    if ((e = getenv("FAKE_NVML_MANY"))) {
        unsigned g, n;
        if (sscanf(e, "%u:%u", &g, &n) == 2)
            for (unsigned k = 0; k < n; k++) add_proc(g, 3000000 + k, (unsigned long long)(k + 1) << 20, 0);
    }
}

static void log_call(const char *ver, char kind, unsigned g, unsigned count, int r) {
    if (!calls_file) return;
    FILE *f = fopen(calls_file, "a");
    if (!f) return;
    fprintf(f, "%s %c %u count=%u -> %d\n", ver, kind, g, count, r);
    fclose(f);
}

static int check(nvmlDevice_t d, int field) {
    if (!init_count) return 1; /* UNINITIALIZED */
    if (!d) return 2;
    if (d->lost) return 15;
    if (field >= 0 && d->unsupported[field]) return d->unsupported[field];
    return 0;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 25: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t do_init(void) {
    const char *e = getenv("FAKE_NVML_INIT_ERROR");
    if (e && atoi(e)) return atoi(e);
    if (!init_count) configure();
    init_count++;
    return 0;
}

static nvmlReturn_t do_count(unsigned *n) {
    if (!init_count) return 1;
    if (!n) return 2;
    *n = ngpus;
    return 0;
}

static nvmlReturn_t do_handle(unsigned i, nvmlDevice_t *d) {
    if (!init_count) return 1;
    if (i >= ngpus || !d) return 2;
    if (devices[i].handle_error) return devices[i].handle_error;
    *d = &devices[i];
    return 0;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    if (!init_count) return 1;
    init_count--;
    return 0;
}

#ifdef FAKE_NVML_OLD
EXPORT nvmlReturn_t nvmlInit(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned *n) { return do_count(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t *d) { return do_handle(i, d); }
#else
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { return do_count(n); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) { return do_handle(i, d); }
/* The old plain symbols: a caller that picks them instead of the versioned ones fails. */
EXPORT nvmlReturn_t nvmlInit(void) { return 13; }
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned *n) { (void)n; return 13; }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t *d) { (void)i; (void)d; return 13; }
#endif

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len) {
    if (!buf || len < strlen(driver) + 1) return 7;
    memcpy(buf, driver, strlen(driver) + 1);
    return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned len) {
    int r = check(d, F_NAME);
    if (r) return r;
    char name[96];
    snprintf(name, sizeof name, "Fake GPU %u, \"test\" edition", d->index);
    if (len < strlen(name) + 1) return 7;
    memcpy(buf, name, strlen(name) + 1);
    return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned len) {
    int r = check(d, F_UUID);
    if (r) return r;
    char uuid[96];
    snprintf(uuid, sizeof uuid, "GPU-fa4e0000-0000-0000-0000-%012u", d->index);
    if (len < strlen(uuid) + 1) return 7;
    memcpy(buf, uuid, strlen(uuid) + 1);
    return 0;
}

static unsigned long long used_now(nvmlDevice_t d) {
    unsigned long long u = d->used;
    if (vary) u += (memory_calls++ % 8) * (256ull << 20);
    return u;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    int r = check(d, F_MEMORY);
    if (r) return r;
    if (!m) return 2;
    unsigned long long u = used_now(d);
    m->total = d->total;
    m->used = u + d->reserved; /* v1: used includes the reservation */
    m->free = d->total - d->reserved - u;
    return 0;
}

#ifndef FAKE_NVML_OLD
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    int r = check(d, F_MEMORY);
    if (r) return r;
    if (d->unsupported[F_MEMORY_V2]) return d->unsupported[F_MEMORY_V2];
    if (!m) return 2;
    if (m->version != (unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24))) return 25;
    unsigned long long u = used_now(d);
    m->total = d->total;
    m->reserved = d->reserved;
    m->used = u;
    m->free = d->total - d->reserved - u;
    return 0;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    int r = check(d, F_UTIL);
    if (r) return r;
    u->gpu = 40 + d->index;
    u->memory = 10 + d->index;
    return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, unsigned sensor, unsigned *t) {
    int r = check(d, F_TEMP);
    if (r) return r;
    if (sensor != 0) return 2;
    *t = 50 + d->index;
    return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw) {
    int r = check(d, F_POWER);
    if (r) return r;
    *mw = 123456 + d->index * 1000;
    return 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *mw) {
    int r = check(d, F_LIMIT);
    if (r) return r;
    *mw = 700000;
    return 0;
}

/* One process list call: `stride` is the record size this version writes. */
static nvmlReturn_t procs(nvmlDevice_t d, unsigned *count, void *buf, int graphics, size_t stride, const char *ver) {
    int r = check(d, F_PROCS);
    if (r) {
        log_call(ver, graphics ? 'G' : 'C', d ? d->index : 99, count ? *count : 0, r);
        return r;
    }
    if (!count) return 2;
    unsigned n = 0;
    for (unsigned i = 0; i < d->nprocs; i++) n += d->procs[i].graphics == graphics;
    if (*count < n) {
        unsigned asked = *count;
        *count = n;
        log_call(ver, graphics ? 'G' : 'C', d->index, asked, 7);
        /* The list grows before the caller comes back. */
        for (unsigned k = 0; k < grow && !graphics; k++)
            add_proc(d->index, 3500000 + d->nprocs, 1ull << 20, 0);
        return 7;
    }
    if (n && !buf) return 2;
    unsigned w = 0;
    for (unsigned i = 0; i < d->nprocs; i++) {
        const fake_proc *p = &d->procs[i];
        if (p->graphics != graphics) continue;
        unsigned char *rec = (unsigned char *)buf + (size_t)w * stride;
        memset(rec, 0, stride);
        memcpy(rec, &p->pid, sizeof p->pid);
        memcpy(rec + 8, &p->used, sizeof p->used);
        if (stride >= 24) {
            unsigned none = 0xFFFFFFFFu;
            memcpy(rec + 16, &none, 4);
            memcpy(rec + 20, &none, 4);
        }
        w++;
    }
    log_call(ver, graphics ? 'G' : 'C', d->index, *count, 0);
    *count = n;
    return 0;
}

#ifndef FAKE_NVML_OLD
static size_t v3_stride(void) {
    unsigned major = 0, minor = 0;
    sscanf(driver, "%u.%u", &major, &minor);
    return major == 535 && minor >= 43 && minor <= 85 ? sizeof(proc_535) : sizeof(proc_v2);
}

#endif

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned *c, void *b) { return procs(d, c, b, 0, sizeof(proc_v1), "v1"); }
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned *c, void *b) { return procs(d, c, b, 1, sizeof(proc_v1), "v1"); }
#ifndef FAKE_NVML_OLD
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned *c, void *b) { return procs(d, c, b, 0, sizeof(proc_v2), "v2"); }
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned *c, void *b) { return procs(d, c, b, 1, sizeof(proc_v2), "v2"); }
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *c, void *b) { return procs(d, c, b, 0, v3_stride(), "v3"); }
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned *c, void *b) { return procs(d, c, b, 1, v3_stride(), "v3"); }
#endif
