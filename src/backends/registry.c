/* registry.c — the table of device backends, and opening a device by its spec string.
 *
 * A spec is "NAME[:ARGS]". The table maps NAME to the backend's open function; adding a
 * backend is one line here plus its own file.
 */
#include <stdio.h>
#include <string.h>

#include "vram/backend.h"

vram_status vram_sim_device_open(const char *args, vram_device **out);
vram_status vram_cudasim_device_open(const char *args, vram_device **out);
vram_status vram_host_device_open(const char *args, vram_device **out);
vram_status vram_cuda_device_open(const char *args, vram_device **out);

static const struct {
    const char *name;
    vram_device_open_fn open;
} backends[] = {
    {"sim", vram_sim_device_open},
    {"cudasim", vram_cudasim_device_open},
    {"host", vram_host_device_open},
    {"cuda", vram_cuda_device_open},
};

vram_status vram_device_open(const char *spec, vram_device **out) {
    if (!spec || !out) return vram_error(VRAM_ERR_INVALID_ARG, "device: null argument");
    *out = NULL;
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *args = colon ? colon + 1 : "";
    if (colon && !*args) /* "sim:" would silently be the default size */
        return vram_error(VRAM_ERR_INVALID_ARG, "device '%s': nothing after ':' (e.g. %.*s:80GiB, or %.*s alone)", spec,
                          (int)name_len, spec, (int)name_len, spec);
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        if (strlen(backends[i].name) == name_len && strncmp(backends[i].name, spec, name_len) == 0)
            return backends[i].open(args, out);
    }
    char known[128] = "";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, backends[i].name, sizeof known - strlen(known) - 1);
    }
    return vram_error(VRAM_ERR_INVALID_ARG, "unknown device '%s' (known: %s)", spec, known);
}

int vram_device_spec_is(const char *spec, const char *kind) {
    size_t n = spec ? strcspn(spec, ":") : 0;
    return spec && strlen(kind) == n && !strncmp(spec, kind, n);
}

int vram_device_spec_sized(const char *spec) {
    const char *colon = spec ? strchr(spec, ':') : NULL;
    if (!colon || !(vram_device_spec_is(spec, "sim") || vram_device_spec_is(spec, "cudasim") ||
                    vram_device_spec_is(spec, "host")))
        return 0;
    size_t first = strcspn(colon + 1, ","); /* the first argument: a size, or a key=value */
    return first > 0 && !memchr(colon + 1, '=', first);
}

void vram_device_close(vram_device *dev) {
    if (dev && dev->ops->close) dev->ops->close(dev);
}
