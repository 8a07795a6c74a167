/* smi.h — GPU memory per device and per process, read from NVML (what py3nvml and nvidia-smi
 * show), for programs.
 *
 * A vram_smi session loads NVML at run time (dlopen of libnvidia-ml.so.1, or the file named
 * by the environment variable VRAM_NVML_LIBRARY), initialises it once and keeps the device
 * handles, so each query costs only the NVML reads themselves. No nvml.h is needed to build.
 *
 * A query fills a vram_smi_device by value. A field the device does not support, or that the
 * driver would not give, is not an error: its bit in `valid` is clear and tools print "N/A".
 * A device that cannot be read at all (NO_PERMISSION, GPU_IS_LOST) still gets a record, with
 * `nvml_error` set and its text in `error`. Only a missing library or a failed nvmlInit make
 * vram_smi_new fail, with a one-line detail in vram_last_error() that says what was tried,
 * what failed, and what to do.
 *
 *     vram_smi *smi;
 *     if (vram_smi_new(&smi) != VRAM_OK) { fprintf(stderr, "%s\n", vram_last_error()); ... }
 *     for (uint32_t i = 0; i < vram_smi_device_count(smi); i++) {
 *         vram_smi_device d;
 *         vram_smi_device_query(smi, i, &d);
 *         if (d.valid & VRAM_SMI_HAS_MEMORY) printf("%u: %llu bytes used\n", i, d.used_bytes);
 *         vram_smi_device_clear(&d);
 *     }
 *     vram_smi_free(smi);
 */
#ifndef VRAM_SMI_H
#define VRAM_SMI_H

#include <stddef.h>
#include <stdint.h>

#include "vram/vram.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bits of vram_smi_device.valid: which fields hold data. */
typedef enum vram_smi_field {
    VRAM_SMI_HAS_NAME = 1u << 0,
    VRAM_SMI_HAS_UUID = 1u << 1,
    VRAM_SMI_HAS_MEMORY = 1u << 2,        /* total_bytes, used_bytes, free_bytes */
    VRAM_SMI_HAS_RESERVED = 1u << 3,      /* reserved_bytes (NVML memory v2 only) */
    VRAM_SMI_HAS_UTILIZATION = 1u << 4,   /* utilization_gpu_pct, utilization_memory_pct */
    VRAM_SMI_HAS_TEMPERATURE = 1u << 5,
    VRAM_SMI_HAS_POWER = 1u << 6,
    VRAM_SMI_HAS_POWER_LIMIT = 1u << 7,
    VRAM_SMI_HAS_PROCESSES = 1u << 8      /* the process list could be read (it may be empty) */
} vram_smi_field;

/* Bits of vram_smi_process.kinds. */
typedef enum vram_smi_process_kind {
    VRAM_SMI_PROCESS_COMPUTE = 1u << 0,
    VRAM_SMI_PROCESS_GRAPHICS = 1u << 1
} vram_smi_process_kind;

typedef struct vram_smi_process {
    uint32_t pid;           /* host pid, as NVML reports it */
    uint32_t kinds;         /* vram_smi_process_kind bits */
    int32_t memory_known;   /* 0 when NVML reports the memory as not available */
    uint64_t used_bytes;    /* device memory of this process on this device (if memory_known) */
    char user[64];          /* owner of /proc/<pid>, "" when unknown (other namespace, exited) */
    char command[256];      /* /proc/<pid>/cmdline with spaces, "" when unknown */
} vram_smi_process;

typedef struct vram_smi_device {
    uint32_t index;               /* NVML index (PCI bus order) */
    uint32_t valid;               /* vram_smi_field bits */
    int32_t nvml_error;           /* 0, or the NVML code that made the device unreadable */
    char error[96];               /* nvmlErrorString of nvml_error, "" when 0 */
    char name[96];
    char uuid[96];
    uint64_t total_bytes;
    uint64_t used_bytes;          /* memory v2: allocated by contexts; v1: also the reserved */
    uint64_t reserved_bytes;      /* driver/firmware reservation (v2 only) */
    uint64_t free_bytes;
    uint32_t memory_version;      /* 2 when used excludes reserved (as nvidia-smi), 1 otherwise */
    uint32_t utilization_gpu_pct;
    uint32_t utilization_memory_pct; /* % of time memory was read or written, not capacity */
    uint32_t temperature_c;
    uint32_t power_mw;
    uint32_t power_limit_mw;
    size_t process_count;
    vram_smi_process *processes;  /* owned by the record: vram_smi_device_clear frees it */
} vram_smi_device;

typedef struct vram_smi vram_smi;

/* Loads NVML and initialises it. Fails with VRAM_ERR_NO_DEVICE (library missing, nvmlInit
 * failed, no GPU) with the one-line detail in vram_last_error(). */
vram_status vram_smi_new(vram_smi **out);

/* Shuts NVML down and unloads it. NULL is fine. */
void vram_smi_free(vram_smi *smi);

/* The number of devices NVML reports, readable or not. */
uint32_t vram_smi_device_count(const vram_smi *smi);

/* The driver version ("550.54.15"), or "" if NVML would not say. */
const char *vram_smi_driver_version(const vram_smi *smi);

/* The library file that was loaded. */
const char *vram_smi_library_path(const vram_smi *smi);

/* Reads device `index` into *out (which is overwritten; clear it after use). Returns
 * VRAM_ERR_NOT_FOUND for an index past the count; a device that NVML cannot read is VRAM_OK
 * with out->nvml_error set. */
vram_status vram_smi_device_query(vram_smi *smi, uint32_t index, vram_smi_device *out);

/* Frees the record's process list and zeroes it. */
void vram_smi_device_clear(vram_smi_device *dev);

/* The owner and command line of a process from /proc (the command made printable: control
 * characters and bytes that are not UTF-8 shown as '?'). Leaves "" in what it cannot read and
 * returns VRAM_ERR_NOT_FOUND when the process is not visible. */
vram_status vram_smi_process_describe(uint32_t pid, char *user, size_t user_cap, char *command,
                                      size_t command_cap);

/* NVML's text for a return code ("Insufficient Permissions"), from the loaded library when it
 * has nvmlErrorString, else a built-in table. */
const char *vram_smi_nvml_error_string(const vram_smi *smi, int32_t code);

#ifdef __cplusplus
}
#endif

#endif
