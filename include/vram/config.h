/* config.h — allocator options, parsed from VRAM_ALLOC_CONF.
 *
 * The string has PYTORCH_CUDA_ALLOC_CONF's shape: comma-separated key:value pairs, e.g.
 *   VRAM_ALLOC_CONF="expandable_segments:False,max_split_size_mb:256,memory_fraction:0.9"
 * Unknown keys and bad values are errors naming the key (see docs/alloc_conf.md).
 */
#ifndef VRAM_CONFIG_H
#define VRAM_CONFIG_H

#include "vram/vram.h"

#ifdef __cplusplus
extern "C" {
#endif

/* move_busy_pages and reserve_slack: let the allocator choose by device (see the fields). */
#define VRAM_CONF_AUTO (-1)

/* The most events the history ring may keep (history:N, vram_allocator_set_history): 16 Mi
 * events, ~640 MiB of host memory. */
#define VRAM_HISTORY_MAX (1u << 24)

/* The allocator embeds this struct near its start, so its size moves the allocator's hot fields:
 * a new field goes into existing padding where it can (as small_classes does), and any change is
 * checked with `bench/run_gpu.sh latrounds` (see allocator_internal.h). */
typedef struct vram_alloc_config {
    int expandable_segments;        /* 1: page model (default where the device has pages) */
    int small_classes;              /* 1 (default): requests of 4 KiB to 1 MiB are rounded to
                                     * four size classes per power of two, and small blocks
                                     * freed are held per class for reuse without search or
                                     * merge; 0: rounded to 512 B, as PyTorch does */
    uint64_t page_size;             /* page granularity for the page model (default 2 MiB) */
    uint64_t chunk_size;            /* pages model: the most memory one physical allocation
                                     * (mapped, moved and unmapped whole) may hold; 0 = the
                                     * device's default (64 MiB on CUDA, one page elsewhere) */
    uint64_t max_split_size;        /* blocks >= this are never split (UINT64_MAX = unlimited) */
    uint64_t max_non_split_rounding;/* an oversize block serves requests up to this much smaller */
    uint32_t roundup_power2_divisions; /* 0/1 = round to 512 B; else to floor_pow2/d steps */
    uint32_t chunk_headroom;        /* pages model: near the limit a chunk holds at most 1/N of
                                     * the memory left under the limit and on the device, so that
                                     * the last memory before an out-of-memory can move in small
                                     * pieces; 0 = off (default 64) */
    double garbage_collection_threshold; /* 0 = off; else (0,1): reclaim cache above this share */
    double memory_fraction;         /* share of the device capacity the allocator may hold (0,1] */
    uint64_t max_reserved;          /* absolute cap on reserved bytes (0 = none) */
    uint32_t history_entries;       /* event ring size for snapshots (0 = off; at most VRAM_HISTORY_MAX) */
    int caching;                    /* 0 = every free goes back to the device (debugging) */
    int move_busy_pages;            /* 1: move pages a stream may still use whenever that keeps
                                     * reserved memory in its budget; 0: only under the limit;
                                     * -1 (auto, default): 1 where the device can alias pages (CUDA) */
    int large_moves;                /* pages model, 1 (default), far from the limit: a request
                                     * of at least twice move_min moves cached pages for what it
                                     * lacks from a quarter of move_min on, and while one stream
                                     * allocates a chunk moved busy may reach past the block into
                                     * free unmapped pages; 0: neither (the placement before
                                     * 2026-12-06) */
    double reserve_slack;           /* pages model: reserved memory may grow to this share above
                                     * the peak of allocated memory before cached pages are moved
                                     * (moves cost driver time); -1 (auto, default): 0.03 where a
                                     * chunk is larger than a page (CUDA), else 0 */
    uint64_t move_min;              /* pages model: pages move only to serve a need of at least
                                     * this many bytes; 0 (default) = one chunk */
    uint32_t chunk_divisor;         /* pages model: a request's pages are mapped in chunks of at
                                     * most 1/N of its size (a power of two of pages, never below
                                     * an eighth of chunk_size), and a move for a need takes no
                                     * chunk smaller than 1/(4N) of it (at most a quarter chunk);
                                     * 0 = chunk_size for every request (the placement before);
                                     * default 16 (docs/alloc_conf.md) */
    uint64_t chunk_min;             /* pages model, with chunk_divisor: the smallest chunk a
                                     * request's pages are mapped in (bytes, a power of two,
                                     * rounded up to a page); 0 (default) = an eighth of
                                     * chunk_size (docs/alloc_conf.md) */
} vram_alloc_config;

/* The defaults, before any string is applied. */
void vram_alloc_config_default(vram_alloc_config *cfg);

/* Applies a VRAM_ALLOC_CONF string on top of `cfg` (NULL or "" changes nothing). On error
 * `cfg` is left unchanged and the detail names the key and value. */
vram_status vram_alloc_config_parse(const char *text, vram_alloc_config *cfg);

/* Checks a configuration built as a struct against the ranges the string's keys take (counts,
 * fractions, shares; 0 for an off garbage_collection_threshold and auto where a key accepts it):
 * VRAM_ERR_INVALID_ARG naming the option and value (the caller's prefix added). vram_allocator_new
 * and vram_allocator_set_config call it. */
vram_status vram_alloc_config_check(const vram_alloc_config *cfg);

/* Defaults plus the VRAM_ALLOC_CONF environment variable, if set. */
vram_status vram_alloc_config_from_env(vram_alloc_config *cfg);

/* The longest string vram_alloc_config_format writes, its terminating NUL included (every
 * option set, each at its longest value; checked by tests/test_alloc_config.c and fuzz_config). */
#define VRAM_ALLOC_CONF_FORMAT_MAX 512

/* Writes the configuration back as a VRAM_ALLOC_CONF string that parses back (from the
 * defaults) to exactly `cfg`, in at most `cap` bytes (VRAM_ALLOC_CONF_FORMAT_MAX always suffice). */
void vram_alloc_config_format(const vram_alloc_config *cfg, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
