/* nvml.h — the part of NVML's ABI that vram smi uses, declared here so no nvml.h (and no CUDA
 * toolkit) is needed to build, and the table of entry points found in the loaded library.
 *
 * Layouts follow NVIDIA's nvml.h (natural alignment, x86-64/aarch64 LP64). NVML exports old
 * plain symbols with old semantics next to versioned ones, so each entry point is looked up by
 * its versioned name first, with the plain name as the fallback (see nvml_lib.c). Entry points
 * a driver lacks stay NULL and only turn their field off.
 */
#ifndef VRAM_SMI_NVML_H
#define VRAM_SMI_NVML_H

#include <stdint.h>

typedef int nvml_return;            /* nvmlReturn_t */
typedef struct nvml_device_st *nvml_device; /* nvmlDevice_t: opaque pointer */

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_UNKNOWN = 999
};

#define NVML_TEMPERATURE_GPU 0u
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ull)
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80

/* NVML_STRUCT_VERSION(type, ver) = sizeof(type) | ver << 24. */
#define NVML_STRUCT_VERSION(size, ver) ((unsigned)(size) | ((unsigned)(ver) << 24))

typedef struct nvml_memory_v1 {     /* nvmlMemory_t */
    unsigned long long total, free, used;
} nvml_memory_v1;

typedef struct nvml_memory_v2 {     /* nvmlMemory_v2_t */
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvml_memory_v2;
#define NVML_MEMORY_V2_VERSION NVML_STRUCT_VERSION(sizeof(nvml_memory_v2), 2) /* 0x02000028 */

typedef struct nvml_utilization {   /* nvmlUtilization_t */
    unsigned int gpu, memory;
} nvml_utilization;

typedef struct nvml_process_v1 {    /* nvmlProcessInfo_v1_t: the plain process symbols */
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvml_process_v1;

typedef struct nvml_process_v2 {    /* nvmlProcessInfo_v2_t = nvmlProcessInfo_t: _v2 and _v3 */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvml_process_v2;

/* What drivers 535.43–535.85 wrote for the _v3 process symbols (a 32-byte record). */
typedef struct nvml_process_535 {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} nvml_process_535;

_Static_assert(sizeof(nvml_memory_v1) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvml_memory_v2) == 40, "nvmlMemory_v2_t layout");
_Static_assert(NVML_MEMORY_V2_VERSION == 0x02000028u, "nvmlMemory_v2 version");
_Static_assert(sizeof(nvml_process_v1) == 16, "nvmlProcessInfo_v1_t layout");
_Static_assert(sizeof(nvml_process_v2) == 24, "nvmlProcessInfo_t layout");
_Static_assert(sizeof(nvml_process_535) == 32, "535 process record layout");

typedef nvml_return (*nvml_process_fn)(nvml_device, unsigned int *, void *);

/* The entry points found in the loaded library. Each process slot array is indexed by the
 * record version (1..3): [0] is unused. */
typedef struct nvml_api {
    void *handle;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*device_count)(unsigned int *);
    nvml_return (*device_handle)(unsigned int, nvml_device *);
    nvml_return (*driver_version)(char *, unsigned int);
    nvml_return (*name)(nvml_device, char *, unsigned int);
    nvml_return (*uuid)(nvml_device, char *, unsigned int);
    nvml_return (*memory_v1)(nvml_device, nvml_memory_v1 *);
    nvml_return (*memory_v2)(nvml_device, nvml_memory_v2 *);
    nvml_return (*utilization)(nvml_device, nvml_utilization *);
    nvml_return (*temperature)(nvml_device, unsigned int, unsigned int *);
    nvml_return (*power)(nvml_device, unsigned int *);
    nvml_return (*power_limit)(nvml_device, unsigned int *);
    nvml_process_fn compute_procs[4];
    nvml_process_fn graphics_procs[4];
    const char *init_symbol;  /* "nvmlInit_v2" or "nvmlInit", for messages */
} nvml_api;

/* Opens the library (VRAM_NVML_LIBRARY, else libnvidia-ml.so.1, else libnvidia-ml.so unless
 * it is the toolkit's stub) and resolves the entry points. On failure returns
 * VRAM_ERR_NO_DEVICE with the detail (what was tried, dlerror) in vram_last_error(); `path`
 * receives the file that was loaded. */
int nvml_api_load(nvml_api *api, char *path, unsigned long path_cap);

/* dlcloses the library and zeroes the table. */
void nvml_api_unload(nvml_api *api);

/* NVML's text for a code: the library's nvmlErrorString when present, else a built-in table. */
const char *nvml_api_error_string(const nvml_api *api, nvml_return code);

#endif
