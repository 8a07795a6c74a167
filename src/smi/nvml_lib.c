/* nvml_lib.c — finding and opening NVML at run time, and resolving its entry points by name.
 *
 * Which file: VRAM_NVML_LIBRARY when set (tests point it at a fake); otherwise the driver's
 * libnvidia-ml.so.1, and only then the bare libnvidia-ml.so, which on many machines is the CUDA
 * toolkit's stub (its nvmlInit always fails): a library whose path holds "/stubs/" is refused.
 *
 * Which symbol: NVML keeps old plain symbols with old semantics (nvmlDeviceGetCount counts
 * differently from nvmlDeviceGetCount_v2, the plain process list writes 16-byte records), so
 * each entry point is asked for by its newest versioned name, then by older ones. Required
 * ones (init, count, handle) failing means "no usable NVML"; anything else may be NULL.
 */
#include "../core/file_open.h"
#include "nvml.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vram/vram.h"

/* dlsym returns void *; converting it to a function pointer is what POSIX requires to work. */
#define NVML_SYM(h, name) dlsym((h), (name))

static void *first_sym(void *h, const char *a, const char *b, const char *c, const char **found) {
    const char *names[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        if (!names[i]) continue;
        void *p = NVML_SYM(h, names[i]);
        if (p) {
            if (found) *found = names[i];
            return p;
        }
    }
    return NULL;
}

static void copy_text(char *dst, size_t cap, const char *src) {
    if (!cap) return;
    snprintf(dst, cap, "%s", src ? src : "");
}

/* The real path of a dlopen'ed handle, for messages and the stub check. */
static void handle_path(void *handle, const char *fallback, char *path, size_t cap) {
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0])
        copy_text(path, cap, map->l_name);
    else
        copy_text(path, cap, fallback);
}

int nvml_api_load(nvml_api *api, char *path, unsigned long path_cap) {
    memset(api, 0, sizeof *api);
    const char *override = getenv("VRAM_NVML_LIBRARY");
    void *h = NULL;
    char tried[600];
    if (override && override[0]) {
        /* dlopen() of a FIFO would wait for a writer for ever: the kind is checked first */
        const char *why = NULL;
        int fd = strchr(override, '/') ? vram_file_open_read(override, 0, &why) : -2;
        if (fd >= 0) close(fd);
        if (why)
            return vram_error(VRAM_ERR_NO_DEVICE, "cannot load NVML: VRAM_NVML_LIBRARY=%s %s; point it at the driver's "
                              "libnvidia-ml.so.1 or unset it", override, why);
        h = dlopen(override, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            return vram_error(VRAM_ERR_NO_DEVICE,
                              "cannot load NVML: tried VRAM_NVML_LIBRARY=%s: %s; point "
                              "VRAM_NVML_LIBRARY at the driver's libnvidia-ml.so.1 or unset it",
                              override, e ? e : "unknown error");
        }
        handle_path(h, override, path, path_cap);
    } else {
        h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h) {
            handle_path(h, "libnvidia-ml.so.1", path, path_cap);
        } else {
            const char *e = dlerror();
            snprintf(tried, sizeof tried, "libnvidia-ml.so.1 (%s)", e ? e : "unknown error");
            h = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
            if (h) {
                handle_path(h, "libnvidia-ml.so", path, path_cap);
                if (strstr(path, "/stubs/")) {
                    dlclose(h);
                    return vram_error(VRAM_ERR_NO_DEVICE,
                                      "cannot load NVML: tried %s, then libnvidia-ml.so, which is "
                                      "the CUDA toolkit's stub (%s); install the NVIDIA driver or "
                                      "set VRAM_NVML_LIBRARY to its libnvidia-ml.so.1",
                                      tried, path);
                }
            } else {
                e = dlerror();
                return vram_error(VRAM_ERR_NO_DEVICE,
                                  "cannot load NVML: tried %s and libnvidia-ml.so (%s); is the "
                                  "NVIDIA driver installed? (in a container: run with the NVIDIA "
                                  "runtime; or set VRAM_NVML_LIBRARY to libnvidia-ml.so.1)",
                                  tried, e ? e : "unknown error");
            }
        }
    }
    api->handle = h;
    api->error_string = (const char *(*)(nvml_return))NVML_SYM(h, "nvmlErrorString");
    api->init = (nvml_return(*)(void))first_sym(h, "nvmlInit_v2", "nvmlInit", NULL, &api->init_symbol);
    api->shutdown = (nvml_return(*)(void))NVML_SYM(h, "nvmlShutdown");
    api->device_count = (nvml_return(*)(unsigned *))first_sym(h, "nvmlDeviceGetCount_v2",
                                                              "nvmlDeviceGetCount", NULL, NULL);
    api->device_handle = (nvml_return(*)(unsigned, nvml_device *))first_sym(
        h, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex", NULL, NULL);
    if (!api->init || !api->device_count || !api->device_handle) {
        char loaded[512];
        copy_text(loaded, sizeof loaded, path);
        const char *missing = !api->init ? "nvmlInit_v2/nvmlInit"
                              : !api->device_count ? "nvmlDeviceGetCount_v2/nvmlDeviceGetCount"
                                                   : "nvmlDeviceGetHandleByIndex_v2/nvmlDeviceGetHandleByIndex";
        nvml_api_unload(api);
        return vram_error(VRAM_ERR_NO_DEVICE,
                          "cannot use NVML: %s has no %s; it is not a driver's libnvidia-ml.so.1",
                          loaded, missing);
    }
    api->driver_version = (nvml_return(*)(char *, unsigned))NVML_SYM(h, "nvmlSystemGetDriverVersion");
    api->name = (nvml_return(*)(nvml_device, char *, unsigned))NVML_SYM(h, "nvmlDeviceGetName");
    api->uuid = (nvml_return(*)(nvml_device, char *, unsigned))NVML_SYM(h, "nvmlDeviceGetUUID");
    api->memory_v1 = (nvml_return(*)(nvml_device, nvml_memory_v1 *))NVML_SYM(h, "nvmlDeviceGetMemoryInfo");
    api->memory_v2 = (nvml_return(*)(nvml_device, nvml_memory_v2 *))NVML_SYM(h, "nvmlDeviceGetMemoryInfo_v2");
    api->utilization = (nvml_return(*)(nvml_device, nvml_utilization *))NVML_SYM(h, "nvmlDeviceGetUtilizationRates");
    api->temperature = (nvml_return(*)(nvml_device, unsigned, unsigned *))NVML_SYM(h, "nvmlDeviceGetTemperature");
    api->power = (nvml_return(*)(nvml_device, unsigned *))NVML_SYM(h, "nvmlDeviceGetPowerUsage");
    api->power_limit = (nvml_return(*)(nvml_device, unsigned *))NVML_SYM(h, "nvmlDeviceGetEnforcedPowerLimit");
    api->compute_procs[1] = (nvml_process_fn)NVML_SYM(h, "nvmlDeviceGetComputeRunningProcesses");
    api->compute_procs[2] = (nvml_process_fn)NVML_SYM(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    api->compute_procs[3] = (nvml_process_fn)NVML_SYM(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    api->graphics_procs[1] = (nvml_process_fn)NVML_SYM(h, "nvmlDeviceGetGraphicsRunningProcesses");
    api->graphics_procs[2] = (nvml_process_fn)NVML_SYM(h, "nvmlDeviceGetGraphicsRunningProcesses_v2");
    api->graphics_procs[3] = (nvml_process_fn)NVML_SYM(h, "nvmlDeviceGetGraphicsRunningProcesses_v3");
    return VRAM_OK;
}

void nvml_api_unload(nvml_api *api) {
    if (api->handle) dlclose(api->handle);
    memset(api, 0, sizeof *api);
}

const char *nvml_api_error_string(const nvml_api *api, nvml_return code) {
    if (api && api->error_string) {
        const char *s = api->error_string(code);
        if (s && s[0]) return s;
    }
    switch (code) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_OPERATING_SYSTEM: return "Operating System Error";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    default: return "Unknown Error";
    }
}
