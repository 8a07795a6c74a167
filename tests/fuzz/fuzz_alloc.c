/* fuzz_alloc.c — libFuzzer target: the fuzzer's bytes drive a sequence of allocator operations
 * (malloc of any size, up to 2^63 bytes, free of live, stale and wild pointers, record_stream, empty_cache, caching
 * switched off and on, options changed at run time (set_config), limits, peak resets, private pools
 * begun, named, routed to a stream, checkpointed, recreated from a checkpoint, ended and released
 * in any order) on one of three devices: the sim device; the simulated CUDA device with 4 MiB
 * chunks (or page-sized ones and no reserve slack) and its GPU's work trailing the calls; or the
 * event device (event_device.h), with the same chunks, whose three streams' work the fuzzer submits
 * and completes itself. On the last, a shadow of what each stream may still use
 * (fakes/stream_hazards.h, with the device's physical page model) must never see a block handed to
 * another stream early, at its address or through pages moved elsewhere, nor pages taken from under
 * a live block or unfinished work (allocations made while a capture is under way belong to private
 * pools, whose reuse follows the graphs: they are left out of that shadow). Several captures may be
 * under way, and each allocation goes to one of them or none as the device tells (which capture a
 * stream records, whether it captures, or nothing). A second shadow, on every device, holds what
 * each private pool has handed out (the pool a block went to is the snapshot's graph_pool): while
 * any graph of that pool lives, no allocation outside the pool may overlap it and, on the event
 * device, no page under it may be unmapped or moved away (a replay of the graph would write there).
 * The invariant checker must hold after every operation and no call may crash. Build with
 * -DVRAM_FUZZ=ON and clang (see tests/CMakeLists.txt).
 *
 * regress_alloc/ holds inputs that once made it abort (CTest fuzz_alloc_regress):
 *   busy_edge: on the event device with page-sized chunks and no slack (first byte 10), stream 1
 *     allocates 12 MiB and 2.5 MiB, queues work, frees the 12 MiB block and allocates 12 MiB +
 *     4 KiB (its pages moved busy, its last page partly used); stream 2 then allocates 1.125 MiB
 *     in the rest of that page. Before the fix of bench/results/2026-12-04-busy-page-edges.md it
 *     got memory stream 1's work could still write.
 *   capture_use (29 bytes): on the event device, stream 2 allocates 17.75 MiB; a capture begins;
 *     stream 0 queues work, and the block is recorded on stream 0 and freed (pending, but no
 *     event can be recorded during a capture); the capture ends; stream 2 allocates again. Until
 *     2026-12-04 the end of the capture freed the block with no event, and stream 2 got its
 *     memory while stream 0's work was queued (test_private_pools: test_capture_free_waits_for_uses).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fakes/event_device.h"
#include "../fakes/stream_hazards.h"
#include "vram/alloc.h"
#include "vram/snapshot.h"

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

/* The shadow of the event device's runs: each slot's stream, block size, the streams it was
 * recorded on, and whether it was allocated while a capture was under way. */
static stream_hazards hazards;
static void *slots[SLOTS];
static size_t slot_size[SLOTS];
static unsigned slot_stream[SLOTS], slot_used[SLOTS], slot_captured[SLOTS];

/* The private pools' shadow: graphs alive per pool id (begin_pool counts one, release_pool ends
 * one) and the ranges each pool handed out since it last had none (a pool's memory serves only
 * the pool until then, freed or not). */
enum { POOLS = 3, OWNED = 2048 };
static unsigned pool_uses[POOLS + 1], nowned[POOLS + 1];
static struct {
    uint64_t lo, hi;
} owned[POOLS + 1][OWNED];

static int overlaps_graph_memory(uint64_t lo, uint64_t hi, uint64_t except_pool) {
    for (unsigned q = 1; q <= POOLS; q++)
        for (unsigned i = 0; q != except_pool && pool_uses[q] && i < nowned[q]; i++)
            if (lo < owned[q][i].hi && owned[q][i].lo < hi) return 1;
    return 0;
}

/* The private pool block p was allocated into (the snapshot's graph_pool), 0 for none. */
static uint64_t pool_of(vram_allocator *a, const void *p) {
    vram_snapshot *s;
    if (vram_allocator_snapshot(a, &s) != VRAM_OK) return 0;
    uint64_t pool = 0;
    for (size_t i = 0; i < s->num_blocks; i++)
        if (s->blocks[i].address == (uintptr_t)p) pool = s->blocks[i].graph_pool;
    vram_snapshot_free(s);
    return pool;
}

/* Checkpoints of the pools (pool_blocks), and their recreation: the blocks carved again go to
 * empty slots (or are freed at once when none is left); none may overlap another live graph's
 * memory. */
enum { CHECKPOINT = 32 };
static vram_pool_block checkpoint[POOLS + 1][CHECKPOINT];
static size_t ncheckpoint[POOLS + 1];

static void recreate(vram_allocator *a, uint64_t id) {
    unsigned char created[CHECKPOINT];
    if (vram_allocator_pool_recreate(a, id, checkpoint[id], ncheckpoint[id], created) != VRAM_OK) return;
    for (size_t j = 0; j < ncheckpoint[id]; j++) {
        const vram_pool_block *w = &checkpoint[id][j];
        if (!created[j]) continue;
        if (overlaps_graph_memory(w->addr, w->addr + w->size, id)) abort();
        int k = 0;
        while (k < SLOTS && slots[k]) k++;
        if (k == SLOTS) {
            if (vram_allocator_free(a, (void *)(uintptr_t)w->addr) != VRAM_OK) abort();
            continue;
        }
        slots[k] = (void *)(uintptr_t)w->addr;
        slot_size[k] = w->size;
        slot_stream[k] = (unsigned)w->stream;
        slot_used[k] = 0;
        slot_captured[k] = 1; /* a pool's: left out of the streams' shadow, as captured blocks */
    }
}

static void on_unmap(void *ctx, uint64_t addr, uint64_t size) {
    for (int k = 0; k < SLOTS; k++)
        if (slots[k] && (uintptr_t)slots[k] < addr + size && addr < (uintptr_t)slots[k] + slot_size[k]) abort();
    if (hazards_in_use(&hazards, ctx, addr, size)) abort();
    if (overlaps_graph_memory(addr, addr + size, 0)) abort(); /* pages taken from a live graph */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vram_device *dev;
    int kind = size ? (data[0] >> 1) % 3 : 0; /* 0 sim; 1 the simulated CUDA device, its GPU 3 steps behind; 2 events */
    int cuda = kind != 0, events = kind == 2;
    if ((events ? event_device_open("4GiB", &dev) : vram_device_open(kind ? "cudasim:4GiB,lag=3" : "sim:4GiB", &dev)) !=
        VRAM_OK)
        return 0;
    const vram_device_ops *own_ops = dev->ops;
    vram_device_ops ops = *own_ops;
    ops.stream_capture = fuzz_stream_capture;
    dev->ops = &ops;
    vram_alloc_config cfg;
    vram_alloc_config_default(&cfg);
    if (size && (data[0] & 1)) cfg.expandable_segments = 0;
    if (cuda) cfg.chunk_size = 4u << 20; /* small chunks: pages move, busy ones by aliasing */
    if (cuda && (data[0] & 8)) { /* page-sized chunks and no slack: every need beyond the peak moves pages */
        cfg.chunk_size = 2u << 20;
        cfg.move_min = 2u << 20;
        cfg.reserve_slack = 0;
    }
    vram_allocator *a;
    if (vram_allocator_new(dev, &cfg, &a) != VRAM_OK) abort();
    memset(slots, 0, sizeof slots);
    memset(capture_of, 0, sizeof capture_of);
    capture_tells = 0;
    memset(pool_uses, 0, sizeof pool_uses);
    memset(nowned, 0, sizeof nowned);
    memset(ncheckpoint, 0, sizeof ncheckpoint);
    hazards_init(&hazards);
    if (events) {
        event_device_state(dev)->phys.on_unmap = on_unmap;
        event_device_state(dev)->phys.ctx = dev;
    }
    int capturing = 0; /* captures under way (begin_pool .. end_pool) */
    int routed = 0;    /* some begin_pool was routed to a stream (route_pool) */
    for (size_t i = 1; i + 4 <= size; i += 4) {
        uint8_t op = data[i] % 9, k = data[i + 1] % SLOTS;
        uint32_t arg = (uint32_t)data[i + 2] << 8 | data[i + 3];
        switch (op) {
        case 0: case 1: case 2: {
            /* sizes up to 2^34; both size bytes 255 ask 2^52 to 2^64 - 1 by the slot (beyond any
             * device: the out-of-memory answers, counted and reported, the allocator consistent
             * after them), a pattern rare enough to leave the smoke test's programs as they were */
            size_t want = arg == 0xffff ? SIZE_MAX >> (k % 12) : (size_t)arg << (data[i + 2] % 19);
            if (!slots[k] &&
                vram_allocator_malloc(a, want, k % 3, k % VRAM_TAG_BUILTIN_COUNT, &slots[k]) == VRAM_OK) {
                size_t bsize = 0;
                if (vram_allocator_block_info(a, slots[k], &bsize, NULL, NULL) != VRAM_OK) abort();
                slot_size[k] = bsize;
                slot_stream[k] = k % 3;
                slot_used[k] = 0;
                slot_captured[k] = capturing > 0;
                uint64_t by_address = 0, by_page = 0;
                if (events && !capturing)
                    hazards_check_block(&hazards, dev, (uintptr_t)slots[k], bsize, k % 3, &by_address, &by_page);
                if (by_address || by_page) abort(); /* memory another stream may still use */
                uint64_t pool = capturing ? pool_of(a, slots[k]) : 0, lo = (uintptr_t)slots[k];
                if (pool > POOLS || (capturing && !routed && !pool && capture_tells == 0))
                    abort(); /* where the device cannot tell, every allocation during captures is a pool's */
                if (overlaps_graph_memory(lo, lo + bsize, pool)) abort(); /* a live graph's memory, handed out */
                if (pool && nowned[pool] < OWNED) {
                    owned[pool][nowned[pool]].lo = lo;
                    owned[pool][nowned[pool]++].hi = lo + bsize;
                }
            }
            break;
        }
        case 3: case 4: {
            if (slots[k] && events && !slot_captured[k]) { /* what the streams queued may still use it */
                hazards_add(&hazards, dev, (uintptr_t)slots[k], slot_size[k], slot_stream[k]);
                for (unsigned u = 0; u < 4; u++)
                    if (slot_used[k] & (1u << u)) hazards_add(&hazards, dev, (uintptr_t)slots[k], slot_size[k], u);
            }
            void *p = slots[k];
            slots[k] = NULL; /* before the free, which may unmap its pages at once */
            if (vram_allocator_free(a, p) != VRAM_OK) slots[k] = p;
            break;
        }
        case 5:
            vram_allocator_free(a, (void *)(uintptr_t)((uint64_t)arg << 20)); /* wild pointer: must be refused */
            if (vram_allocator_record_stream(a, slots[k], arg % 4) == VRAM_OK && arg % 4 != slot_stream[k])
                slot_used[k] |= 1u << (arg % 4);
            break;
        case 6:
            vram_allocator_set_limit(a, arg % 5 == 0 ? 0 : (uint64_t)arg << 16);
            break;
        case 7:
            if (arg % 4 >= 2 && events) { /* a stream's work: queued, or all done */
                if (arg % 4 == 2) event_device_submit(dev, k % 3);
                else event_device_complete(dev, k % 3);
            } else if (arg % 4 >= 2 && dev->ops->host_step) {
                dev->ops->host_step(dev, arg % 4 == 3); /* GPU work: queued, or all done */
            } else if (arg % 2) {
                vram_allocator_empty_cache(a);
            } else if ((arg >> 8) % 16 == 15) { /* caching switched at run time (PyTorch's caching_allocator_enable) */
                int on = !vram_allocator_config(a)->caching;
                if (vram_allocator_set_caching(a, on) == VRAM_OK && vram_allocator_config(a)->caching != on) abort();
            } else if ((arg >> 8) % 16 == 14) { /* the options PyTorch's settings change, at run time */
                static const double gc[] = {0.0, 0.5, 0.9};
                static const uint64_t split[] = {UINT64_MAX, 20ull << 20, 64ull << 20};
                vram_alloc_config want;
                vram_allocator_get_config(a, &want);
                want.garbage_collection_threshold = gc[((arg >> 2) & 3) % 3];
                want.small_classes = (arg >> 4) & 1;
                want.max_split_size = split[((arg >> 5) & 3) % 3];
                want.roundup_power2_divisions = (1u << ((arg >> 7 & 1) | (arg >> 11 & 2))) & ~1u; /* 0, 2, 4, 8 */
                want.max_non_split_rounding = (arg >> 13 & 1) ? 0 : 20ull << 20;
                if (arg >> 14 & 1) want.expandable_segments = !want.expandable_segments; /* pages or segments */
                vram_status st = vram_allocator_set_config(a, &want);
                /* STATE: switching the free path in a capture; INVALID_ARG: pages for an allocator
                 * that started with segments */
                if (st != VRAM_OK && st != VRAM_ERR_STATE && !(st == VRAM_ERR_INVALID_ARG && want.expandable_segments))
                    abort();
            } else {
                vram_allocator_reset_peak_stats(a);
            }
            break;
        default: { /* private pools: any call in any state gets a status, never a crash */
            uint64_t id = 1 + (uint64_t)(k % 3);
            vram_stream s = (vram_stream)((arg >> 8) % 4);
            if (arg % 4 == 0) {
                if (vram_allocator_begin_pool(a, id) == VRAM_OK) {
                    capturing++;
                    pool_uses[id]++;
                    capture_tells = (arg >> 8) % 3;
                    for (int t = 0; t < 4; t++) capture_of[t] = (arg >> (10 + 2 * t)) & 3; /* what each stream records */
                }
            } else if (arg % 4 == 1) {
                if (vram_allocator_end_pool(a, id) == VRAM_OK) capturing--;
            } else if (arg % 4 == 2) {
                if (vram_allocator_release_pool(a, id) == VRAM_OK && !--pool_uses[id])
                    nowned[id] = 0; /* no graph of it left: its memory may serve anything */
            } else if (((arg >> 10) & 3) == 1) {
                routed |= vram_allocator_route_pool(a, id, s) == VRAM_OK;
            } else if (((arg >> 10) & 3) == 2) {
                if (vram_allocator_pool_blocks(a, id, checkpoint[id], CHECKPOINT, &ncheckpoint[id]) != VRAM_OK ||
                    ncheckpoint[id] > CHECKPOINT)
                    ncheckpoint[id] = 0;
            } else if (((arg >> 10) & 3) == 3) {
                recreate(a, id);
            } else {
                vram_allocator_bind_pool(a, id, s);
            }
            break;
        }
        }
        if (vram_allocator_check(a) != VRAM_OK) abort();
    }
    for (uint64_t id = 1; id <= 3; id++)
        while (vram_allocator_end_pool(a, id) == VRAM_OK) {
        }
    if (events) { /* the end: all work done, no more checks */
        for (unsigned u = 0; u < 3; u++) event_device_complete(dev, u);
        event_device_state(dev)->phys.on_unmap = NULL;
    }
    if (vram_allocator_empty_cache(a) == VRAM_ERR_STATE) abort(); /* no capture may be left under way */
    for (uint64_t id = 1; id <= 3; id++)
        while (vram_allocator_release_pool(a, id) == VRAM_OK) {
        }
    for (int k = 0; k < SLOTS; k++)
        if (slots[k] && vram_allocator_free(a, slots[k]) != VRAM_OK) abort();
    hazards_free(&hazards);
    vram_allocator_empty_cache(a);
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    if (st.reserved_bytes[0].current != 0 || st.allocated_bytes[0].current != 0) abort();
    vram_allocator_destroy(a);
    dev->ops = own_ops;
    vram_device_close(dev);
    if (check_failed) abort(); /* the event device saw a page call the driver would refuse */
    return 0;
}
