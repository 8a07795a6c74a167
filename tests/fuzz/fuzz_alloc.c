/* fuzz_alloc.c — libFuzzer target: the fuzzer's bytes drive a sequence of allocator operations
 * (malloc of any size, free of live, stale and wild pointers, record_stream, empty_cache,
 * limits, peak resets, private pools begun, ended and released in any order) on the sim device,
 * or on the simulated CUDA device with 4 MiB chunks and its GPU's work trailing the calls (the
 * fuzzer queues and completes that work too: events pending, pages moved and aliased across three
 * streams); captures record every stream or, as the device tells, some of them; the invariant
 * checker must hold after every operation and no call may crash. Build with -DVRAM_FUZZ=ON and
 * clang (see tests/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vram/alloc.h"

#define SLOTS 64

/* The streams a capture records (bit s: stream s), chosen by the fuzzer at each begin_pool; 0:
 * the device cannot tell, so every allocation during the capture is the pool's. */
static unsigned capture_mask;
static vram_status fuzz_stream_capturing(vram_device *d, vram_stream s, int *capturing) {
    (void)d;
    if (!capture_mask) return VRAM_ERR_STATE;
    *capturing = s < 8 && (capture_mask >> s & 1);
    return VRAM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vram_device *dev;
    int cuda = size && (data[0] & 2); /* the simulated CUDA device, its GPU 3 steps behind */
    if (vram_device_open(cuda ? "cudasim:4GiB,lag=3" : "sim:4GiB", &dev) != VRAM_OK) return 0;
    const vram_device_ops *own_ops = dev->ops;
    vram_device_ops ops = *own_ops;
    ops.stream_capturing = fuzz_stream_capturing;
    dev->ops = &ops;
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    if (size && (data[0] & 1)) cfg.expandable_segments = 0;
    if (cuda) cfg.chunk_size = 4u << 20; /* small chunks: pages move, busy ones by aliasing */
    vram_allocator *a;
    if (vram_allocator_new(dev, &cfg, &a) != VRAM_OK) abort();
    void *slots[SLOTS] = {0};
    uint64_t capturing = 0;
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
            if (arg % 3 == 0 && vram_allocator_begin_pool(a, id) == VRAM_OK) {
                capturing = id;
                capture_mask = (arg >> 8) & 7; /* which of the three streams it records, if it can tell */
            } else if (arg % 3 == 1 && vram_allocator_end_pool(a, capturing ? capturing : id) == VRAM_OK) capturing = 0;
            else if (arg % 3 == 2) vram_allocator_release_pool(a, id);
            break;
        }
        }
        if (vram_allocator_check(a) != VRAM_OK) abort();
    }
    if (capturing && vram_allocator_end_pool(a, capturing) != VRAM_OK) abort();
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
