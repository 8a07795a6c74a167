/* alloc.h — the stream-ordered caching allocator.
 *
 * One allocator serves one device (backend.h). It hands out blocks rounded to 512 bytes from
 * two pools (small: requests up to 1 MiB; large: the rest), caches freed blocks for reuse, and
 * asks the device for memory only when its cache cannot serve a request. Two memory models:
 *
 *   pages     (default where the device supports it; VRAM_ALLOC_CONF expandable_segments:True)
 *             each pool owns one large virtual address range; physical pages (2 MiB) are mapped
 *             on demand under the blocks that need them, so free space coalesces across what
 *             would be separate segments, and fully free pages are moved to where they are
 *             needed instead of mapping new ones.
 *   segments  one device allocation per segment, as PyTorch's native allocator does.
 *
 * Streams: a block freed on stream S is reused at once by S; another stream may take it only
 * once the work S had queued before the free has finished (an event, polled, never waited on
 * in the allocation path). record_stream marks a block as used by another stream too; its free
 * then waits for that stream's work before the block is reused.
 *
 * When a request does not fit, the allocator releases its cache and retries; if it still fails
 * it returns VRAM_ERR_OUT_OF_MEMORY and an out-of-memory report (vram_allocator_oom_report).
 *
 * Every allocation carries a tag (stats.h); statistics are kept per pool and per tag.
 * All functions are thread safe.
 */
#ifndef VRAM_ALLOC_H
#define VRAM_ALLOC_H

#include "vram/backend.h"
#include "vram/config.h"
#include "vram/stats.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_allocator vram_allocator;

/* Creates an allocator over `dev` (which it does not own). `cfg` NULL means defaults plus
 * VRAM_ALLOC_CONF from the environment; a given `cfg` with a value outside the range its
 * VRAM_ALLOC_CONF key takes is VRAM_ERR_INVALID_ARG naming it (vram_alloc_config_check). */
vram_status vram_allocator_new(vram_device *dev, const vram_alloc_config *cfg, vram_allocator **out);

/* Returns every block and page to the device and frees the allocator. Live blocks are
 * released too (the caller is done with the device). */
void vram_allocator_destroy(vram_allocator *a);

vram_device *vram_allocator_device(vram_allocator *a);
/* The configuration in force. It changes under vram_allocator_set_config and the setters below
 * (memory fraction, caching, limit, history): a thread that reads it while another may call those
 * takes a copy with vram_allocator_get_config (made under the lock). */
const vram_alloc_config *vram_allocator_config(vram_allocator *a);
void vram_allocator_get_config(vram_allocator *a, vram_alloc_config *out);

/* Allocates `size` bytes (size 0 gives a unique 512-byte block) for use on `stream`. */
vram_status vram_allocator_malloc(vram_allocator *a, size_t size, vram_stream stream, vram_tag tag,
                                  void **ptr);

/* Frees a block. An unknown or already freed pointer returns VRAM_ERR_NOT_FOUND and changes
 * nothing. */
vram_status vram_allocator_free(vram_allocator *a, void *ptr);

/* Marks the block as used on `stream` as well as its allocation stream. */
vram_status vram_allocator_record_stream(vram_allocator *a, void *ptr, vram_stream stream);

/* Size (rounded), requested size and tag of a live block. */
vram_status vram_allocator_block_info(vram_allocator *a, const void *ptr, size_t *size,
                                      size_t *requested, vram_tag *tag);

/* Changes the tag of a live block (statistics move with it). */
vram_status vram_allocator_set_tag(vram_allocator *a, void *ptr, vram_tag tag);

/* Returns cached memory to the device: free segments (segments model) and fully free pages
 * (pages model). Waits for pending stream events first. */
vram_status vram_allocator_empty_cache(vram_allocator *a);

/* Turns caching off (every free returns its memory to the device at once, as the caching:False
 * option does; the cache is emptied first) or back on, at run time (PyTorch's
 * caching_allocator_enable). VRAM_ERR_STATE during a CUDA graph capture, nothing changed. */
vram_status vram_allocator_set_caching(vram_allocator *a, int on);

/* Puts configuration `want` in force at run time (PyTorch applies its allocator settings to a
 * running allocator the same way). Requests from then on follow it: rounding
 * (roundup_power2_divisions, small_classes), splitting (max_split_size, max_non_split_rounding;
 * the oversize statistics are counted again under the new threshold), the limit
 * (memory_fraction, max_reserved), garbage_collection_threshold, caching (off empties the cache
 * first, as set_caching), the pages model's policies, the history (set_history's rules) and
 * expandable_segments: off, new memory comes as segments while the pages already mapped keep
 * serving (PyTorch applies the setting to new segments); on again, pages grow again. The page
 * and chunk sizes shape memory already reserved and are fixed at creation, and an allocator that
 * started in the segments model has no address ranges for pages: a `want` that changes those is
 * VRAM_ERR_INVALID_ARG naming it, as is a value out of its range; changing caching,
 * garbage_collection_threshold or small_classes during a CUDA graph capture is VRAM_ERR_STATE. On
 * error the configuration stays as it was. */
vram_status vram_allocator_set_config(vram_allocator *a, const vram_alloc_config *want);

/* Caps reserved memory at fraction x device capacity, fraction in (0, 1]. */
vram_status vram_allocator_set_memory_fraction(vram_allocator *a, double fraction);
/* The fraction in force (the memory_fraction option, or the last set_memory_fraction; 1 for
 * none; 0 for a null allocator). */
double vram_allocator_memory_fraction(vram_allocator *a);

/* Caps reserved memory at `bytes` (0 removes the cap). */
vram_status vram_allocator_set_limit(vram_allocator *a, uint64_t bytes);

/* The cap in force, in bytes (device capacity when none is set). */
uint64_t vram_allocator_limit(vram_allocator *a);

/* Starts recording the last `entries` allocator events for snapshots (the history:N option, at
 * run time), or stops with 0; either way the events recorded so far are dropped. At most
 * VRAM_HISTORY_MAX entries (config.h). */
vram_status vram_allocator_set_history(vram_allocator *a, uint32_t entries);
/* How many events the history has recorded since it was (re)started by set_history, the
 * ones the ring no longer keeps included: a mark in the stream of events that a later
 * snapshot's history (its last min(count, entries) events) can be lined up with. 0 without a
 * history. */
uint64_t vram_allocator_history_count(vram_allocator *a);
/* The calling thread's context: a number its caller gives to what it is doing (the PyTorch
 * plug-in: the Python call stack allocating), which every history event that thread's
 * allocator calls record carries (vram_event.context) until it is set again; 0, the start,
 * is none. Thread-local, so threads that allocate at once keep theirs apart. */
void vram_set_context(uint32_t context);
uint32_t vram_context(void);

/* Private pools, for CUDA graphs (PyTorch's beginAllocateToPool / endAllocateToPool /
 * releasePool). A graph replays the addresses its capture used, so that memory must not serve
 * anything else while the graph exists. Between begin_pool(id) and end_pool(id) the allocations
 * of the capture's streams are made for pool `id` (id != 0): they come from the pool's own
 * blocks freed there on the same stream (best fit, split), else from the allocator as usual;
 * allocations on other streams are ordinary. A block of the pool, when freed, stays in the pool
 * (reserved, not allocated; empty_cache keeps it) for later captures into it. Each begin_pool
 * counts one use of the pool (one graph); release_pool(id) ends one, and when the last ends, the
 * pool's free blocks return to the allocator and its live ones return when they are freed.
 *
 * Up to 8 captures may be under way at once (in other threads, or interleaved): which capture
 * an allocation belongs to follows from its stream, as the device tells (backend.h,
 * stream_capture). bind_pool(id, stream), called once the capture into `id` has begun on
 * `stream`, names that capture, so that the allocations of concurrent captures go each to its
 * own pool; a capture not named takes the capturing streams that no named capture records (the
 * newest unnamed capture first), which is exact while it is the only one. end_pool ends the
 * oldest capture into `id`. bind_pool fails with VRAM_ERR_UNSUPPORTED where the device cannot
 * name captures, and with VRAM_ERR_STATE when no unnamed capture into `id` is under way, the
 * stream is not capturing or its capture is named for another pool.
 *
 * route_pool(id, stream), after begin_pool(id), gives the pool every allocation on `stream`
 * until end_pool(id), whether the stream captures or not (PyTorch's
 * beginAllocateCurrentStreamToPool, with which CUDA graph trees run a graph's warm-up and copy
 * its inputs into its pool); meanwhile, as during a capture, no event is recorded and no memory
 * is returned to the device. It fails with VRAM_ERR_STATE when no begun allocation into `id` is
 * left unnamed and unrouted, or `stream` is routed already. */
vram_status vram_allocator_begin_pool(vram_allocator *a, uint64_t id);
vram_status vram_allocator_bind_pool(vram_allocator *a, uint64_t id, vram_stream stream);
vram_status vram_allocator_route_pool(vram_allocator *a, uint64_t id, vram_stream stream);
vram_status vram_allocator_end_pool(vram_allocator *a, uint64_t id);
vram_status vram_allocator_release_pool(vram_allocator *a, uint64_t id);

/* Checkpoints of a private pool (PyTorch's getCheckpointState / setCheckpointPoolState, with
 * which CUDA graph trees go on recording after their graphs have replayed: the replays wrote
 * tensors into blocks the allocator had seen freed). A pool block as a checkpoint holds it: */
typedef struct vram_pool_block {
    uint64_t addr;
    uint64_t size;       /* the block's size (a multiple of 512) */
    uint64_t requested;  /* the bytes asked for (<= size) */
    vram_stream stream;
    vram_tag tag;
} vram_pool_block;

/* pool_blocks: the allocated blocks of pool `id`, by address within each memory region; up to
 * `cap` of them into `out`, how many there are into *n (call again with a larger `out` when
 * *n > cap). VRAM_ERR_NOT_FOUND when no graph uses the pool and none of its blocks is left.
 *
 * pool_recreate: makes the allocated blocks of pool `id` exactly `blocks` (a checkpoint from
 * pool_blocks): a listed block allocated as listed (same address and size) stays as it is
 * (created[i] = 0); one that is not is carved again out of the pool's free memory at its
 * address, with its size, requested bytes, stream and tag, and counted as allocated
 * (created[i] = 1; `created` may be NULL). It changes nothing and fails with VRAM_ERR_STATE when
 * a block of the pool is allocated (or freed and waiting for streams) but not listed, a listed
 * range is no longer free memory of the pool (the pool was released since, or another block
 * holds part of it), or a capture or routed stream allocates into the pool; with
 * VRAM_ERR_INVALID_ARG for blocks that overlap, are not 512-byte aligned, are empty or ask for
 * more than their size; VRAM_ERR_NOT_FOUND when no graph uses the pool. */
vram_status vram_allocator_pool_blocks(vram_allocator *a, uint64_t id, vram_pool_block *out, size_t cap, size_t *n);
vram_status vram_allocator_pool_recreate(vram_allocator *a, uint64_t id, const vram_pool_block *blocks, size_t n,
                                         unsigned char *created);

void vram_allocator_get_stats(vram_allocator *a, vram_stats *out);
void vram_allocator_reset_peak_stats(vram_allocator *a);
void vram_allocator_reset_accumulated_stats(vram_allocator *a);

/* Tags: names of the built-in tags are "parameter", "gradient", "optimizer_state",
 * "activation", "temporary", "other". Registering an existing name returns its tag. */
vram_status vram_allocator_tag_register(vram_allocator *a, const char *name, vram_tag *out);
const char *vram_allocator_tag_name(vram_allocator *a, vram_tag tag);

/* The report of the most recent out-of-memory failure ("" if none): what was requested, what
 * is allocated, reserved, cached, the limit, the largest free block and the biggest tags. */
const char *vram_allocator_oom_report(vram_allocator *a);

/* Checks every internal invariant (blocks tile their ranges without overlap, free lists match
 * blocks, statistics equal what they count). Returns VRAM_ERR_INTERNAL with a detail on the
 * first violation. Slow: O(blocks). For tests and debugging. */
vram_status vram_allocator_check(vram_allocator *a);

/* The largest block the allocator could hand out right now without asking the device. */
uint64_t vram_allocator_largest_free(vram_allocator *a);
/* The bytes it may still reserve from the device now: its limit less what it reserves, and no
 * more than the device says is free (0 for a null allocator). */
uint64_t vram_allocator_room(vram_allocator *a);

/* Where a pool's reserved memory lies now (pool: VRAM_POOL_ALL, _SMALL or _LARGE). The device
 * moves and releases memory only by whole chunks (pages model: one page_map; segments: one
 * segment), so free memory is told apart by what shares its chunk and page:
 * reserved_bytes = held_bytes + free_movable + free_pinned + free_in_page. For analysis
 * (bench_placement_waste): O(blocks + pages) under the allocator's lock. */
typedef struct vram_cache_breakdown {
    uint64_t reserved_bytes; /* mapped pages and segments */
    uint64_t held_bytes;     /* under blocks in use, waiting for streams, or kept by a graph's pool */
    uint64_t free_movable;   /* free, in chunks holding no held block: a move or release takes them */
    uint64_t free_pinned;    /* free whole pages in chunks that hold a held block: they stay */
    uint64_t free_in_page;   /* free bytes of pages that hold a held block */
    uint64_t chunks, chunks_free; /* chunks (segments), and those holding no held block */
} vram_cache_breakdown;
vram_status vram_allocator_cache_breakdown(vram_allocator *a, int pool, vram_cache_breakdown *out);

#ifdef __cplusplus
}
#endif

#endif
