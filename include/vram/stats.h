/* stats.h — the allocator's statistics, with PyTorch's names and meaning.
 *
 * A vram_stat is {current, peak, allocated, freed}: an increase raises current and allocated
 * and lifts peak; a decrease lowers current and raises freed. Most statistics come as an array
 * indexed by pool: [VRAM_POOL_ALL, VRAM_POOL_SMALL, VRAM_POOL_LARGE], as PyTorch's StatArray.
 * On top of PyTorch's set, the same byte and count statistics are kept per tag (parameter,
 * gradient, optimizer state, ...), so a report can say where memory goes.
 *
 * Statistics belong to the allocator; clients read a copy with vram_allocator_get_stats().
 */
#ifndef VRAM_STATS_H
#define VRAM_STATS_H

#include "vram/vram.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vram_stat {
    int64_t current;
    int64_t peak;
    int64_t allocated; /* total ever added */
    int64_t freed;     /* total ever removed */
} vram_stat;

enum { VRAM_POOL_ALL = 0, VRAM_POOL_SMALL = 1, VRAM_POOL_LARGE = 2, VRAM_POOL_COUNT = 3 };

/* Tags: what an allocation is for. Values below VRAM_TAG_BUILTIN_COUNT are built in;
 * vram_allocator_tag_register() adds user tags up to VRAM_TAG_MAX. */
typedef uint32_t vram_tag;
enum {
    VRAM_TAG_OTHER = 0,
    VRAM_TAG_PARAMETER = 1,
    VRAM_TAG_GRADIENT = 2,
    VRAM_TAG_OPTIMIZER_STATE = 3,
    VRAM_TAG_ACTIVATION = 4,
    VRAM_TAG_TEMPORARY = 5,
    VRAM_TAG_KV_CACHE = 6, /* attention keys and values kept across generation steps */
    VRAM_TAG_BUILTIN_COUNT = 7,
    VRAM_TAG_MAX = 32
};

typedef struct vram_tag_stats {
    vram_stat allocation;      /* live allocations with this tag */
    vram_stat allocated_bytes; /* bytes handed out (rounded sizes) */
    vram_stat requested_bytes; /* bytes asked for */
} vram_tag_stats;

typedef struct vram_stats {
    vram_stat allocation[VRAM_POOL_COUNT];
    vram_stat segment[VRAM_POOL_COUNT];
    vram_stat active[VRAM_POOL_COUNT];
    vram_stat inactive_split[VRAM_POOL_COUNT];
    vram_stat allocated_bytes[VRAM_POOL_COUNT];
    vram_stat reserved_bytes[VRAM_POOL_COUNT];
    vram_stat active_bytes[VRAM_POOL_COUNT];
    vram_stat inactive_split_bytes[VRAM_POOL_COUNT];
    vram_stat requested_bytes[VRAM_POOL_COUNT];
    vram_stat oversize_allocations;
    vram_stat oversize_segments;
    uint64_t num_alloc_retries;
    uint64_t num_ooms;
    uint64_t num_sync_all_streams;
    uint64_t num_device_alloc; /* device allocations, or page maps in the page model */
    uint64_t num_device_free;  /* device frees, or page unmaps */
    int64_t max_split_size;    /* -1 when unlimited, as PyTorch reports it */
    uint32_t num_tags;         /* tags in use: built-in plus registered */
    vram_tag_stats tags[VRAM_TAG_MAX];
} vram_stats;

/* Helpers used by the allocator (and tests): apply a change to a stat. */
static inline void vram_stat_add(vram_stat *s, int64_t amount) {
    s->current += amount;
    s->allocated += amount;
    if (s->current > s->peak) s->peak = s->current;
}
static inline void vram_stat_sub(vram_stat *s, int64_t amount) {
    s->current -= amount;
    s->freed += amount;
}

#ifdef __cplusplus
}
#endif

#endif
