/* fuzz_alloc.c — libFuzzer target: the fuzzer's bytes drive a sequence of allocator operations
 * (malloc of any size, free of live, stale and wild pointers, record_stream, empty_cache,
 * limits, peak resets, private pools begun, ended and released in any order) on the sim device,
 * or on the simulated CUDA device with 4 MiB chunks and its GPU's work trailing the calls (the
 * fuzzer queues and completes that work too: events pending, pages moved and aliased across three
 * streams); several captures may be under way, and each allocation goes to one of them or none as
 * the device tells (which capture a stream records, whether it captures, or nothing); the invariant
 * checker must hold after every operation and no call may crash. Build with -DVRAM_FUZZ=ON and
 * clang (see tests/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"

#define SLOTS 64

/* The capture each stream records as the fuzzer sets it (an id 1-3, 0: none), and how much the
 * device tells of it: 0 nothing (an error, so every allocation during captures is a capture's),
 * 1 whether the stream captures (VRAM_CAPTURE_UNNAMED), 2 which capture. */
static uint64_t capture_of[8];
static int capture_tells;
static vram_status fuzz_stream_capture(vram_device *d, vram_stream s, uint64_t *capture) {
    (void)d;
    if (!capture_tells) return VRAM_ERR_STATE;
    uint64_t c = s < 8 ? capture_of[s] : 0;
    *capture = c && capture_tells == 1 ? VRAM_CAPTURE_UNNAMED : c;
    return VRAM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vram_device *dev;
    int cuda = size && (data[0] & 2); /* the simulated CUDA device, its GPU 3 steps behind */
    if (vram_device_open(cuda ? "cudasim:4GiB,lag=3" : "sim:4GiB", &dev) != VRAM_OK) return 0;
    const vram_device_ops *own_ops = dev->ops;
    vram_device_ops ops = *own_ops;
    ops.stream_capture = fuzz_stream_capture;
    dev->ops = &ops;
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    if (size && (data[0] & 1)) cfg.expandable_segments = 0;
    if (cuda) cfg.chunk_size = 4u << 20; /* small chunks: pages move, busy ones by aliasing */
    vram_allocator *a;
    if (vram_allocator_new(dev, &cfg, &a) != VRAM_OK) abort();
    void *slots[SLOTS] = {0};
    memset(capture_of, 0, sizeof capture_of);
    capture_tells = 0;
    for (size_t i = 1; i + 4 <= size; i += 4) {
        uint8_t op = data[i] % 9, k = data[i + 1] % SLOTS;
        uint32_t arg = (uint32_t)data[i + 2] << 8 | data[i + 3];
        switch (op) {
        case 0: case 1: case 2:
            if (!slots[k]) vram_allocator_malloc(a, (size_t)arg << (data[i + 2] % 19), k % 3, k % VRAM_TAG_BUILTIN_COUNT, &slots[k]);
            break;
        case 3: case 4:
            if (vram_allocator_free(a, slots[k]) == VRAM_OK) slots[k] = NULL;
            break;
        case 5:
            vram_allocator_free(a, (void *)(uintptr_t)((uint64_t)arg << 20)); /* wild pointer: must be refused */
            vram_allocator_record_stream(a, slots[k], arg % 4);
            break;
        case 6:
            vram_allocator_set_limit(a, arg % 5 == 0 ? 0 : (uint64_t)arg << 16);
            break;
        case 7:
            if (arg % 4 >= 2 && dev->ops->host_step) dev->ops->host_step(dev, arg % 4 == 3); /* GPU work: queued, or all done */
            else if (arg % 2) vram_allocator_empty_cache(a);
            else vram_allocator_reset_peak_stats(a);
            break;
        default: { /* private pools: any call in any state gets a status, never a crash */
            uint64_t id = 1 + (uint64_t)(k % 3);
            if (arg % 4 == 0 && vram_allocator_begin_pool(a, id) == VRAM_OK) {
                capture_tells = (arg >> 8) % 3;
                for (int s = 0; s < 4; s++) capture_of[s] = (arg >> (10 + 2 * s)) & 3; /* what each stream records */
            } else if (arg % 4 == 1) vram_allocator_end_pool(a, id);
            else if (arg % 4 == 2) vram_allocator_release_pool(a, id);
            else vram_allocator_bind_pool(a, id, (vram_stream)((arg >> 8) % 4));
            break;
        }
        }
        if (vram_allocator_check(a) != VRAM_OK) abort();
    }
    for (uint64_t id = 1; id <= 3; id++)
        while (vram_allocator_end_pool(a, id) == VRAM_OK) {
        }
    if (vram_allocator_empty_cache(a) == VRAM_ERR_STATE) abort(); /* no capture may be left under way */
    for (uint64_t id = 1; id <= 3; id++)
        while (vram_allocator_release_pool(a, id) == VRAM_OK) {
        }
    for (int k = 0; k < SLOTS; k++)
        if (slots[k] && vram_allocator_free(a, slots[k]) != VRAM_OK) abort();
    vram_allocator_empty_cache(a);
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    if (st.reserved_bytes[0].current != 0 || st.allocated_bytes[0].current != 0) abort();
    vram_allocator_destroy(a);
    dev->ops = own_ops;
    vram_device_close(dev);
    return 0;
}
