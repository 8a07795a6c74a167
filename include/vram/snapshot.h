/* snapshot.h — the allocator's state at one moment, and its recent history, as data and JSON.
 *
 * A snapshot lists segments (in the pages model: each mapped range of a pool) with the blocks
 * that tile them, and the bounded ring of allocator events (enabled with VRAM_ALLOC_CONF
 * history:N). The JSON follows PyTorch's torch.cuda.memory._snapshot() layout: "segments"
 * (address, total_size, allocated_size, active_size, requested_size, stream, segment_type,
 * is_expandable, blocks[{address, size, requested_size, state, tag, and graph_pool where not 0}])
 * and "device_traces" ([[{action, addr, size, stream, tag, time_us}]]), plus "allocator_settings".
 */
#ifndef VRAM_SNAPSHOT_H
#define VRAM_SNAPSHOT_H

#include <stdio.h>

#include "vram/alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vram_block_state {
    VRAM_BLOCK_ACTIVE_ALLOCATED = 0,
    VRAM_BLOCK_ACTIVE_PENDING_FREE = 1, /* freed, waiting for other streams' work */
    VRAM_BLOCK_INACTIVE = 2             /* free, cached */
} vram_block_state;

typedef struct vram_snapshot_block {
    uint64_t address;
    uint64_t size;
    uint64_t requested_size;
    vram_block_state state;
    vram_tag tag;
    uint64_t graph_pool; /* the private pool (CUDA graph) holding the block: its id, or 0 for none */
} vram_snapshot_block;

typedef struct vram_snapshot_segment {
    uint64_t address;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t active_size;
    uint64_t requested_size;
    vram_stream stream;
    int pool; /* VRAM_POOL_SMALL or VRAM_POOL_LARGE */
    int is_expandable;
    size_t first_block; /* index into vram_snapshot.blocks */
    size_t num_blocks;
} vram_snapshot_segment;

typedef enum vram_event_action {
    VRAM_EVENT_ALLOC = 0,
    VRAM_EVENT_FREE_REQUESTED,
    VRAM_EVENT_FREE_COMPLETED,
    VRAM_EVENT_SEGMENT_ALLOC,
    VRAM_EVENT_SEGMENT_FREE,
    VRAM_EVENT_SEGMENT_MAP,
    VRAM_EVENT_SEGMENT_UNMAP,
    VRAM_EVENT_OOM,
    VRAM_EVENT_EMPTY_CACHE
} vram_event_action;

typedef struct vram_event {
    vram_event_action action;
    uint64_t addr; /* for OOM: bytes free on the device */
    uint64_t size;
    vram_stream stream;
    vram_tag tag;
    uint32_t context; /* the recording thread's vram_context() (0: none) */
    int64_t time_us;  /* Unix microseconds */
} vram_event;

typedef struct vram_snapshot {
    vram_snapshot_segment *segments;
    size_t num_segments;
    vram_snapshot_block *blocks;
    size_t num_blocks;
    vram_event *events; /* oldest first */
    size_t num_events;
    int device_index;
    char settings[VRAM_ALLOC_CONF_FORMAT_MAX]; /* the allocator's VRAM_ALLOC_CONF string */
    char tag_names[VRAM_TAG_MAX][32];
} vram_snapshot;

vram_status vram_allocator_snapshot(vram_allocator *a, vram_snapshot **out);
void vram_snapshot_free(vram_snapshot *s);

const char *vram_event_action_name(vram_event_action action);
const char *vram_block_state_name(vram_block_state state);

/* Writes the snapshot as one JSON object. */
vram_status vram_snapshot_write_json(const vram_snapshot *s, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
