/* host.c — the host device: real host memory behind the allocator, so CPU code (the training
 * runtime, tests that write every byte) uses the same caching allocator as a GPU would.
 *
 * Segments are anonymous mmaps. Pages: va_reserve maps a PROT_NONE, MAP_NORESERVE range;
 * page_map replaces part of it with fresh read-write memory (MAP_FIXED), page_unmap puts
 * PROT_NONE memory back, which returns the physical pages to the kernel. Work on the host is
 * synchronous, so there are no events. Spec: "host" (capacity = physical RAM) or "host:SIZE".
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vram/backend.h"

#define HOST_PAGE_SIZE (2ull << 20)

typedef struct host_state {
    uint64_t used;
} host_state;

static vram_status host_take(vram_device *dev, size_t size) {
    host_state *s = dev->impl;
    if (size > dev->capacity - s->used) return VRAM_ERR_OUT_OF_MEMORY;
    s->used += size;
    return VRAM_OK;
}

static vram_status host_mem_alloc(vram_device *dev, size_t size, uint64_t *addr) {
    vram_status st = host_take(dev, size);
    if (st != VRAM_OK) return st;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        ((host_state *)dev->impl)->used -= size;
        return VRAM_ERR_OUT_OF_MEMORY;
    }
    *addr = (uint64_t)(uintptr_t)p;
    return VRAM_OK;
}

static vram_status host_mem_free(vram_device *dev, uint64_t addr, size_t size) {
    host_state *s = dev->impl;
    if (munmap((void *)(uintptr_t)addr, size) != 0) return VRAM_ERR_DRIVER;
    s->used -= size;
    return VRAM_OK;
}

static vram_status host_va_reserve(vram_device *dev, size_t size, uint64_t *addr) {
    (void)dev;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return VRAM_ERR_OUT_OF_MEMORY;
    *addr = (uint64_t)(uintptr_t)p;
    return VRAM_OK;
}

static vram_status host_va_release(vram_device *dev, uint64_t addr, size_t size) {
    (void)dev;
    return munmap((void *)(uintptr_t)addr, size) == 0 ? VRAM_OK : VRAM_ERR_DRIVER;
}

static vram_status host_page_map(vram_device *dev, uint64_t addr, size_t size) {
    vram_status st = host_take(dev, size);
    if (st != VRAM_OK) return st;
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        ((host_state *)dev->impl)->used -= size;
        return VRAM_ERR_OUT_OF_MEMORY;
    }
    return VRAM_OK;
}

static vram_status host_page_unmap(vram_device *dev, uint64_t addr, size_t size) {
    host_state *s = dev->impl;
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return VRAM_ERR_DRIVER;
    s->used -= size;
    return VRAM_OK;
}

static vram_status host_mem_info(vram_device *dev, size_t *free_bytes, size_t *total_bytes) {
    host_state *s = dev->impl;
    *free_bytes = dev->capacity - s->used;
    *total_bytes = dev->capacity;
    return VRAM_OK;
}

static void host_close(vram_device *dev) {
    free(dev->impl);
    free(dev);
}

static const vram_device_ops host_ops = {
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .va_reserve = host_va_reserve,
    .va_release = host_va_release,
    .page_map = host_page_map,
    .page_unmap = host_page_unmap,
    .mem_info = host_mem_info,
    .close = host_close,
};

vram_status vram_host_device_open(const char *args, vram_device **out) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t capacity = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (8ull << 30);
    if (args && *args) {
        vram_status st = vram_parse_size(args, &capacity);
        if (st != VRAM_OK) return vram_error(st, "host device: %s", vram_last_error());
        if (capacity < HOST_PAGE_SIZE)
            return vram_error(VRAM_ERR_INVALID_ARG, "host device: capacity '%s' is below one 2 MiB page", args);
    }
    vram_device *dev = calloc(1, sizeof *dev);
    host_state *s = calloc(1, sizeof *s);
    if (!dev || !s) {
        free(dev);
        free(s);
        return vram_error(VRAM_ERR_HOST_MEMORY, "host device: host out of memory for its state");
    }
    dev->ops = &host_ops;
    dev->impl = s;
    snprintf(dev->kind, sizeof dev->kind, "host");
    char cap[32];
    snprintf(dev->name, sizeof dev->name, "host memory (%s)", vram_format_size(capacity, cap, sizeof cap));
    dev->page_size = HOST_PAGE_SIZE;
    dev->capacity = capacity;
    dev->host_accessible = 1;
    *out = dev;
    return VRAM_OK;
}
