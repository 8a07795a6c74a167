/* session.c — the vram_smi session: NVML initialised once, device handles kept, and one query per
 * device that turns NVML's answers into a vram_smi_device record.
 *
 * Every field is read on its own and sets its `valid` bit only on success, so a device that
 * does not support power or temperature still shows its memory. Two codes mean the device as a
 * whole is unreadable: NO_PERMISSION (usually from the handle) and GPU_IS_LOST (from any read);
 * they go to `nvml_error` and the record keeps only its index. NO_PERMISSION on a single field
 * (common in containers) only turns that field off.
 *
 * Memory: nvmlDeviceGetMemoryInfo_v2 with version 0x02000028 gives used without the driver's
 * reservation (what nvidia-smi shows); if the symbol is missing or refuses, v1 is used, whose
 * `used` includes the reservation (memory_version 1 tells tools which one they got).
 *
 * Processes: compute and graphics lists, each tried as v3, v2, v1 (record strides 24, 24, 16;
 * 32 for v3 on drivers 535.43–535.85, which wrote a longer record). The buffer is kept across
 * queries and grown whenever NVML answers INSUFFICIENT_SIZE (the list can grow between the
 * calls, so a few rounds are allowed). A pid on both lists is one process with both kinds.
 */
#include "vram/smi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

#define SMI_PROCESS_RECORD_MAX 32 /* bytes of the longest record any driver writes */
#define SMI_GROW_ROUNDS 8

typedef struct smi_handle {
    nvml_device dev;
    nvml_return error; /* from nvmlDeviceGetHandleByIndex; retried on the next query */
} smi_handle;

struct vram_smi {
    nvml_api api;
    char path[512];
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    uint32_t count;
    smi_handle *handles;
    size_t v3_stride;
    unsigned char *buf;  /* process records, reused across queries */
    unsigned buf_entries;
};

/* Drivers 535.43 to 535.85 wrote 32-byte records from the _v3 process symbols. */
static size_t v3_stride_for(const char *driver) {
    unsigned major = 0, minor = 0;
    if (sscanf(driver, "%u.%u", &major, &minor) == 2 && major == 535 && minor >= 43 && minor <= 85)
        return sizeof(nvml_process_535);
    return sizeof(nvml_process_v2);
}

vram_status vram_smi_new(vram_smi **out) {
    if (!out) return vram_error(VRAM_ERR_INVALID_ARG, "vram_smi_new: null out");
    *out = NULL;
    vram_smi *s = calloc(1, sizeof *s);
    if (!s) return vram_error(VRAM_ERR_HOST_MEMORY, "vram_smi_new: out of host memory");
    vram_status st = (vram_status)nvml_api_load(&s->api, s->path, sizeof s->path);
    if (st != VRAM_OK) {
        free(s);
        return st;
    }
    nvml_return r = s->api.init();
    if (r != NVML_SUCCESS) {
        char why[128]; /* copied: the text lives in the library that is closed below */
        snprintf(why, sizeof why, "%s", nvml_api_error_string(&s->api, r));
        char path[512];
        snprintf(path, sizeof path, "%s", s->path);
        const char *hint = r == NVML_ERROR_DRIVER_NOT_LOADED ? "is the NVIDIA kernel driver loaded (lsmod | grep nvidia)?"
                           : r == NVML_ERROR_NO_PERMISSION   ? "check the permissions of /dev/nvidia*"
                           : r == NVML_ERROR_LIB_RM_VERSION_MISMATCH
                               ? "the driver library and kernel module differ: reboot or reload the module"
                               : "check that the NVIDIA driver works (nvidia-smi)";
        int init_failed_code = r;
        const char *sym = s->api.init_symbol;
        nvml_api_unload(&s->api);
        free(s);
        return vram_error(VRAM_ERR_NO_DEVICE, "NVML loaded from %s but %s failed: %s (NVML error %d); %s",
                          path, sym, why, init_failed_code, hint);
    }
    unsigned count = 0;
    r = s->api.device_count(&count);
    if (r != NVML_SUCCESS) {
        vram_error(VRAM_ERR_NO_DEVICE, "NVML loaded from %s but nvmlDeviceGetCount_v2 failed: %s (NVML error %d); check that the NVIDIA driver works (nvidia-smi)",
                   s->path, nvml_api_error_string(&s->api, r), r);
        char keep[512];
        snprintf(keep, sizeof keep, "%s", vram_last_error());
        vram_smi_free(s);
        return vram_error(VRAM_ERR_NO_DEVICE, "%s", keep);
    }
    if (s->api.driver_version && s->api.driver_version(s->driver, sizeof s->driver) != NVML_SUCCESS)
        s->driver[0] = '\0';
    s->driver[sizeof s->driver - 1] = '\0';
    s->v3_stride = v3_stride_for(s->driver);
    s->count = count;
    if (count) {
        s->handles = calloc(count, sizeof *s->handles);
        if (!s->handles) {
            vram_smi_free(s);
            return vram_error(VRAM_ERR_HOST_MEMORY, "vram_smi_new: out of host memory");
        }
        for (unsigned i = 0; i < count; i++) s->handles[i].error = s->api.device_handle(i, &s->handles[i].dev);
    }
    *out = s;
    return VRAM_OK;
}

void vram_smi_free(vram_smi *smi) {
    if (!smi) return;
    if (smi->api.shutdown) smi->api.shutdown();
    nvml_api_unload(&smi->api);
    free(smi->handles);
    free(smi->buf);
    free(smi);
}

uint32_t vram_smi_device_count(const vram_smi *smi) { return smi ? smi->count : 0; }

const char *vram_smi_driver_version(const vram_smi *smi) { return smi ? smi->driver : ""; }

const char *vram_smi_library_path(const vram_smi *smi) { return smi ? smi->path : ""; }

const char *vram_smi_nvml_error_string(const vram_smi *smi, int32_t code) {
    return nvml_api_error_string(smi ? &smi->api : NULL, code);
}

void vram_smi_device_clear(vram_smi_device *dev) {
    if (!dev) return;
    free(dev->processes);
    memset(dev, 0, sizeof *dev);
}

/* A lost GPU answers nothing more; a field refused for permission is only that field's N/A
 * (containers often deny power or process queries), but trying older versions of it is
 * pointless. */
static int device_fatal(nvml_return r) { return r == NVML_ERROR_GPU_IS_LOST; }
static int stop_trying(nvml_return r) { return r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_NO_PERMISSION; }

static vram_status grow_buffer(vram_smi *s, unsigned entries) {
    if (entries <= s->buf_entries) return VRAM_OK;
    unsigned char *p = realloc(s->buf, (size_t)entries * SMI_PROCESS_RECORD_MAX);
    if (!p) return vram_error(VRAM_ERR_HOST_MEMORY, "process list of %u entries: out of host memory", entries);
    s->buf = p;
    s->buf_entries = entries;
    return VRAM_OK;
}

/* Adds one NVML record to the device's list, merging a pid seen on the other list. */
static vram_status add_process(vram_smi_device *d, size_t *cap, uint32_t pid, uint64_t used, uint32_t kind) {
    int known = used != NVML_VALUE_NOT_AVAILABLE_ULL;
    /* A value above the device's memory is garbage from a confused driver, not a measurement. */
    if (known && (d->valid & VRAM_SMI_HAS_MEMORY) && used > d->total_bytes) known = 0;
    for (size_t i = 0; i < d->process_count; i++) {
        vram_smi_process *p = &d->processes[i];
        if (p->pid != pid) continue;
        p->kinds |= kind;
        if (known && (!p->memory_known || used > p->used_bytes)) {
            p->used_bytes = used;
            p->memory_known = 1;
        }
        return VRAM_OK;
    }
    if (d->process_count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        vram_smi_process *np = realloc(d->processes, ncap * sizeof *np);
        if (!np) return vram_error(VRAM_ERR_HOST_MEMORY, "process list: out of host memory");
        d->processes = np;
        *cap = ncap;
    }
    vram_smi_process *p = &d->processes[d->process_count++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->kinds = kind;
    p->memory_known = known;
    p->used_bytes = known ? used : 0;
    return VRAM_OK;
}

/* Reads one list (compute or graphics) trying v3, v2, v1. Returns the NVML code of the last
 * attempt: SUCCESS when some version answered. */
static nvml_return read_list(vram_smi *s, nvml_device dev, nvml_process_fn fns[4], uint32_t kind,
                             vram_smi_device *d, size_t *cap, vram_status *st) {
    nvml_return last = NVML_ERROR_FUNCTION_NOT_FOUND;
    for (int ver = 3; ver >= 1; ver--) {
        if (!fns[ver]) continue;
        size_t stride = ver == 1 ? sizeof(nvml_process_v1) : ver == 2 ? sizeof(nvml_process_v2) : s->v3_stride;
        if ((*st = grow_buffer(s, 16)) != VRAM_OK) return NVML_ERROR_UNKNOWN;
        for (int round = 0; round < SMI_GROW_ROUNDS; round++) {
            /* The buffer holds buf_entries records of the longest stride, so count may say so. */
            unsigned count = (unsigned)((size_t)s->buf_entries * SMI_PROCESS_RECORD_MAX / stride);
            nvml_return r = fns[ver](dev, &count, s->buf);
            last = r;
            if (r == NVML_SUCCESS) {
                size_t fits = (size_t)s->buf_entries * SMI_PROCESS_RECORD_MAX / stride;
                if (count > fits) count = (unsigned)fits;
                for (unsigned i = 0; i < count; i++) {
                    const unsigned char *rec = s->buf + (size_t)i * stride;
                    unsigned pid;
                    unsigned long long used;
                    memcpy(&pid, rec, sizeof pid);
                    memcpy(&used, rec + 8, sizeof used); /* same offset in every version */
                    if ((*st = add_process(d, cap, pid, used, kind)) != VRAM_OK) return NVML_ERROR_UNKNOWN;
                }
                return NVML_SUCCESS;
            }
            if (r != NVML_ERROR_INSUFFICIENT_SIZE) break;
            unsigned want = count > s->buf_entries ? count : s->buf_entries;
            if (want > (1u << 20)) break; /* a driver asking for a million records is wrong */
            /* Headroom, since processes can start between this call and the next. */
            if ((*st = grow_buffer(s, want + want / 2 + 8)) != VRAM_OK) return NVML_ERROR_UNKNOWN;
        }
        if (stop_trying(last)) return last;
    }
    return last;
}

vram_status vram_smi_device_query(vram_smi *smi, uint32_t index, vram_smi_device *out) {
    if (!smi || !out) return vram_error(VRAM_ERR_INVALID_ARG, "vram_smi_device_query: null argument");
    memset(out, 0, sizeof *out);
    out->index = index;
    if (index >= smi->count)
        return vram_error(VRAM_ERR_NOT_FOUND, "no GPU %u: NVML reports %u device%s", index, smi->count,
                          smi->count == 1 ? "" : "s");
    nvml_api *a = &smi->api;
    smi_handle *h = &smi->handles[index];
    if (h->error != NVML_SUCCESS) h->error = a->device_handle(index, &h->dev);
    nvml_return r = h->error;
    if (r != NVML_SUCCESS) goto unreadable;
    nvml_device dev = h->dev;

    if (a->name) {
        r = a->name(dev, out->name, sizeof out->name);
        if (device_fatal(r)) goto unreadable;
        if (r == NVML_SUCCESS) out->valid |= VRAM_SMI_HAS_NAME;
        out->name[sizeof out->name - 1] = '\0';
        if (r != NVML_SUCCESS) out->name[0] = '\0';
    }
    if (a->uuid) {
        r = a->uuid(dev, out->uuid, sizeof out->uuid);
        if (device_fatal(r)) goto unreadable;
        if (r == NVML_SUCCESS) out->valid |= VRAM_SMI_HAS_UUID;
        out->uuid[sizeof out->uuid - 1] = '\0';
        if (r != NVML_SUCCESS) out->uuid[0] = '\0';
    }
    r = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (a->memory_v2) {
        nvml_memory_v2 m;
        memset(&m, 0, sizeof m);
        m.version = NVML_MEMORY_V2_VERSION;
        r = a->memory_v2(dev, &m);
        if (device_fatal(r)) goto unreadable;
        if (r == NVML_SUCCESS && m.total > 0) {
            out->total_bytes = m.total;
            out->used_bytes = m.used;
            out->reserved_bytes = m.reserved;
            out->free_bytes = m.free;
            out->memory_version = 2;
            out->valid |= VRAM_SMI_HAS_MEMORY | VRAM_SMI_HAS_RESERVED;
        }
    }
    if (!(out->valid & VRAM_SMI_HAS_MEMORY) && a->memory_v1) {
        nvml_memory_v1 m;
        memset(&m, 0, sizeof m);
        r = a->memory_v1(dev, &m);
        if (device_fatal(r)) goto unreadable;
        /* total 0 (or NOT_SUPPORTED) is an integrated GPU sharing host memory: no number. */
        if (r == NVML_SUCCESS && m.total > 0) {
            out->total_bytes = m.total;
            out->used_bytes = m.used;
            out->free_bytes = m.free;
            out->memory_version = 1;
            out->valid |= VRAM_SMI_HAS_MEMORY;
        }
    }
    if (a->utilization) {
        nvml_utilization u = {0, 0};
        r = a->utilization(dev, &u);
        if (device_fatal(r)) goto unreadable;
        if (r == NVML_SUCCESS && u.gpu <= 100 && u.memory <= 100) {
            out->utilization_gpu_pct = u.gpu;
            out->utilization_memory_pct = u.memory;
            out->valid |= VRAM_SMI_HAS_UTILIZATION;
        }
    }
    if (a->temperature) {
        unsigned t = 0;
        r = a->temperature(dev, NVML_TEMPERATURE_GPU, &t);
        if (device_fatal(r)) goto unreadable;
        if (r == NVML_SUCCESS) {
            out->temperature_c = t;
            out->valid |= VRAM_SMI_HAS_TEMPERATURE;
        }
    }
    if (a->power) {
        unsigned p = 0;
        r = a->power(dev, &p);
        if (device_fatal(r)) goto unreadable;
        if (r == NVML_SUCCESS) {
            out->power_mw = p;
            out->valid |= VRAM_SMI_HAS_POWER;
        }
    }
    if (a->power_limit) {
        unsigned p = 0;
        r = a->power_limit(dev, &p);
        if (device_fatal(r)) goto unreadable;
        if (r == NVML_SUCCESS) {
            out->power_limit_mw = p;
            out->valid |= VRAM_SMI_HAS_POWER_LIMIT;
        }
    }
    size_t cap = 0;
    vram_status st = VRAM_OK;
    nvml_return rc = read_list(smi, dev, a->compute_procs, VRAM_SMI_PROCESS_COMPUTE, out, &cap, &st);
    if (st != VRAM_OK) {
        vram_smi_device_clear(out);
        return st;
    }
    if (rc == NVML_ERROR_GPU_IS_LOST) {
        r = rc;
        goto unreadable;
    }
    nvml_return rg = read_list(smi, dev, a->graphics_procs, VRAM_SMI_PROCESS_GRAPHICS, out, &cap, &st);
    if (st != VRAM_OK) {
        vram_smi_device_clear(out);
        return st;
    }
    if (rg == NVML_ERROR_GPU_IS_LOST) {
        r = rg;
        goto unreadable;
    }
    if (rc == NVML_SUCCESS || rg == NVML_SUCCESS) out->valid |= VRAM_SMI_HAS_PROCESSES;
    for (size_t i = 0; i < out->process_count; i++) {
        vram_smi_process *p = &out->processes[i];
        vram_smi_process_describe(p->pid, p->user, sizeof p->user, p->command, sizeof p->command);
    }
    vram_error_clear();
    return VRAM_OK;

unreadable:
    vram_smi_device_clear(out);
    out->index = index;
    out->nvml_error = r;
    snprintf(out->error, sizeof out->error, "%s", nvml_api_error_string(a, r));
    return VRAM_OK;
}
