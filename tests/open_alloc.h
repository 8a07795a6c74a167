/* open_alloc.h — a device and an allocator on it for a test: the device spec (backend.h) and a
 * VRAM_ALLOC_CONF string over the defaults. NULL when any step fails (the caller checks). */
#ifndef VRAM_TESTS_OPEN_ALLOC_H
#define VRAM_TESTS_OPEN_ALLOC_H

#include "vram/alloc.h"
#include "vram/backend.h"

static inline vram_allocator *open_alloc(const char *spec, const char *conf, vram_device **dev) {
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    if (vram_alloc_config_parse(conf, &cfg) != VRAM_OK) return NULL;
    if (vram_device_open(spec, dev) != VRAM_OK) return NULL;
    vram_allocator *a = NULL;
    if (vram_allocator_new(*dev, &cfg, &a) != VRAM_OK) {
        vram_device_close(*dev);
        return NULL;
    }
    return a;
}

#endif
