/* allocator.c — the allocator's public face: creation and destruction, malloc, free, and the
 * cache, limit and configuration API (include/vram/alloc.h).
 *
 * malloc serves an exact deferred block itself (the fast path: deferred.h's vi_recent_take);
 * otherwise malloc_locked tries a private pool's block, a held block, then the best fit in the
 * bins (search.h), and where that would need memory it has not got, vi_obtain (obtain.c). The
 * chosen block is split (block_carve) and counted. free puts a block used on one stream into a
 * recent slot (vi_recent_put), or, used on others, into the pending list until their events
 * complete. Every call takes the allocator's lock once. Which file owns which part of the
 * allocator's state: docs/allocator.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator_internal.h"
#include "deferred.h"
#include "live_map.h"
#include "pages.h"
#include "search.h"

/* A request's block size: 512 B steps, or (roundup_power2_divisions) steps of floor_pow2/d; with
 * small_classes, a request of 4 KiB to 1 MiB rounds to its class (vi_small_class). */
static uint64_t round_size(const vram_allocator *a, uint64_t size) {
    if (size < VRAM_BLOCK_ALIGN) return VRAM_BLOCK_ALIGN;
    if (size - 4097 < VRAM_SMALL_LIMIT - 4096 && a->held_pool == VRAM_POOL_SMALL) { /* 4 KiB < size <= 1 MiB */
        uint64_t step = 1ull << (63 - VRAM_CLASS_BITS - __builtin_clzll(size - 1)); /* a quarter of the power of two below */
        return ((size - 1) | (step - 1)) + 1;
    }
    uint32_t d = a->cfg.roundup_power2_divisions;
    if (d > 1 && size > VRAM_BLOCK_ALIGN * d) {
        uint64_t floor2 = 1ull << (63 - __builtin_clzll(size));
        if (floor2 == size) return size;
        uint64_t step = floor2 / d;
        return (size + step - 1) / step * step;
    }
    return (size + VRAM_BLOCK_ALIGN - 1) & ~(VRAM_BLOCK_ALIGN - 1);
}

static const char *const builtin_tags[VRAM_TAG_BUILTIN_COUNT] = {
    "other", "parameter", "gradient", "optimizer_state", "activation", "temporary", "kv_cache"};

static uint64_t compute_limit(const vram_allocator *a) {
    uint64_t limit = (uint64_t)((double)a->dev->capacity * a->cfg.memory_fraction);
    if (a->cfg.max_reserved && a->cfg.max_reserved < limit) limit = a->cfg.max_reserved;
    return limit;
}

/* Policies whose best value depends on what a page move costs (docs/alloc_conf.md), where `cfg`
 * leaves them auto: where chunks are larger than a page (CUDA), a move is a slow driver call, so
 * reserved memory may exceed the allocated peak a little (reserve_slack) before pages move, and
 * pages a stream may still use are moved by aliasing rather than new memory mapped
 * (docs/allocator-evidence.md §11). */
static void resolve_auto(const vram_allocator *a, vram_alloc_config *cfg) {
    if (cfg->move_busy_pages == VRAM_CONF_AUTO) cfg->move_busy_pages = a->can_alias;
    if (cfg->reserve_slack == VRAM_CONF_AUTO) cfg->reserve_slack = a->chunk_pages > 1 ? 0.03 : 0.0;
}

vram_status vram_allocator_new(vram_device *dev, const vram_alloc_config *cfg, vram_allocator **out) {
    if (!dev || !out) return vram_error(VRAM_ERR_INVALID_ARG, "allocator: null argument");
    *out = NULL;
    vram_alloc_config conf;
    if (cfg) {
        if (vram_alloc_config_check(cfg) != VRAM_OK)
            return vram_error(VRAM_ERR_INVALID_ARG, "allocator configuration: %s", vram_last_error());
        conf = *cfg;
    } else {
        vram_status st = vram_alloc_config_from_env(&conf);
        if (st != VRAM_OK) return st;
    }
    vram_allocator *a = calloc(1, sizeof *a);
    if (!a) return vram_error(VRAM_ERR_HOST_MEMORY, "allocator: host out of memory");
    vram_lock_init(&a->lock);
    a->dev = dev;
    a->cfg = conf;
    a->has_events = dev->ops->event_record && dev->ops->event_query && dev->ops->event_sync && dev->ops->event_destroy;
    a->pages_model = conf.expandable_segments && vram_device_has_pages(dev);
    a->can_alias = a->pages_model && a->has_events && dev->ops->page_alias && dev->ops->page_drop;
    vi_free_path_update(a);
    a->tag_solo = VRAM_TAG_OTHER; /* what PyTorch's plug-in and most callers use throughout */
    a->page_size = dev->page_size;
    if (a->pages_model && conf.page_size > dev->page_size && conf.page_size % dev->page_size == 0)
        a->page_size = conf.page_size;
    if (a->pages_model && (a->page_size & (a->page_size - 1))) {
        unsigned long long page = a->page_size;
        free(a);
        return vram_error(VRAM_ERR_UNSUPPORTED, "allocator: page size %llu of %s is not a power of two", page,
                          dev->name);
    }
    a->page_shift = a->page_size ? (unsigned)__builtin_ctzll(a->page_size) : 0;
    uint64_t chunk = conf.chunk_size ? conf.chunk_size : dev->chunk_size; /* 0: the device's default */
    a->chunk_pages = a->page_size && chunk > a->page_size ? chunk / a->page_size : 1;
    resolve_auto(a, &a->cfg);
    a->limit = compute_limit(a);
    a->stats.max_split_size = conf.max_split_size == UINT64_MAX ? -1 : (int64_t)conf.max_split_size;
    a->stats.num_tags = VRAM_TAG_BUILTIN_COUNT;
    for (int i = 0; i < VRAM_TAG_BUILTIN_COUNT; i++) snprintf(a->tag_names[i], sizeof a->tag_names[i], "%s", builtin_tags[i]);
    for (int p = 0; p < VRAM_POOL_COUNT; p++) a->pools[p].index = p;
    if (conf.history_entries) {
        a->history.ring = calloc(conf.history_entries, sizeof *a->history.ring);
        if (!a->history.ring) {
            free(a);
            return vram_error(VRAM_ERR_HOST_MEMORY, "allocator: host out of memory for history");
        }
    }
    if (a->pages_model) {
        /* Virtual ranges cost nothing physical: give each pool room to spare so that address
         * fragmentation never limits what the pages can hold. */
        uint64_t P = a->page_size;
        uint64_t sizes[VRAM_POOL_COUNT] = {0, dev->capacity + (1ull << 30), dev->capacity * 2 + (1ull << 30)};
        for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
            uint64_t size = (sizes[p] + P - 1) / P * P, base;
            vram_status st = dev->ops->va_reserve(dev, size, &base);
            if (st != VRAM_OK || !vi_region_new(a, p, base, size, 1)) {
                vram_allocator_destroy(a);
                return vram_error(st != VRAM_OK ? st : VRAM_ERR_HOST_MEMORY,
                                  "allocator: reserving %llu bytes of address space on %s failed%s",
                                  (unsigned long long)size, dev->name, st != VRAM_OK ? "" : ": host out of memory");
            }
        }
    }
    *out = a;
    return VRAM_OK;
}

void vram_allocator_destroy(vram_allocator *a) {
    if (!a) return;
    vi_pages_reap_zombies(a, 1);
    if (a->has_events) {
        vi_sync_all_streams(a);
        for (int i = 0; i < a->streams.n; i++)
            if (a->streams.state[i].event) a->dev->ops->event_destroy(a->dev, a->streams.state[i].event);
        for (vi_block *b = a->pending.head; b; b = b->fnext)
            for (int i = 0; i < b->nevents; i++) a->dev->ops->event_destroy(a->dev, b->events[i]);
    }
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        while (a->pools[p].regions) {
            vi_region *r = a->pools[p].regions;
            if (r->expandable) {
                uint64_t q = 0;
                while ((q = vi_bits_find(r->mapped, q, r->npages, 1)) < r->npages) {
                    uint64_t e = vi_bits_find(r->mapped, q, r->npages, 0);
                    a->dev->ops->page_unmap(a->dev, r->base + q * a->page_size, (e - q) * a->page_size);
                    q = e;
                }
                a->dev->ops->va_release(a->dev, r->base, r->size);
            } else {
                a->dev->ops->mem_free(a->dev, r->base, r->size);
            }
            for (vi_block *b = r->first; b;) {
                vi_block *n = b->next;
                free(b->uses);
                free(b->events);
                b = n;
            }
            vi_region_destroy(a, r);
        }
    }
    while (a->structs.slabs) {
        vi_block_slab *s = a->structs.slabs;
        a->structs.slabs = s->next;
        free(s);
    }
    vi_graph_pools_destroy(a);
    free(a->live.slots);
    free(a->history.ring);
    free(a);
}

vram_device *vram_allocator_device(vram_allocator *a) { return a->dev; }

const vram_alloc_config *vram_allocator_config(vram_allocator *a) { return &a->cfg; }

void vram_allocator_get_config(vram_allocator *a, vram_alloc_config *out) {
    vi_allocator_lock(a);
    *out = a->cfg;
    vi_allocator_unlock(a);
}

/* Whether a free block of `size` serving `rsize` should be split. */
static int should_split(const vram_allocator *a, const vi_block *b, uint64_t rsize) {
    uint64_t rest = b->size - rsize;
    if (b->region->expandable || b->region->pool == VRAM_POOL_SMALL) return rest >= VRAM_BLOCK_ALIGN;
    return rsize < a->cfg.max_split_size && rest > VRAM_SMALL_LIMIT;
}

/* How many mallocs may pass between two polls of pending frees and in-flight stream events: an
 * event query is dear while the GPU is busy (docs/allocator-evidence.md §9). The slow path asks
 * always. */
#define VRAM_POLL_EVERY 64

/* Takes [b->addr, b->addr + rsize) out of free block b (or its end, with PLACE_END). When b
 * is split, its struct stays in the indexes as the remainder and a new struct describes the
 * allocation. With PLACE_PREV, the free block before b grows by the head of b and is taken
 * whole.
 * Returns the block allocated, or NULL when the host has no memory for a new block struct.
 * Always inlined: malloc's only call. */
static inline __attribute__((always_inline)) vi_block *block_carve(vram_allocator *a, vi_block *b, uint64_t rsize,
                                                                   int place) {
    if (place == PLACE_PREV) {
        vi_block *x = b->prev;
        uint64_t head = rsize - x->size; /* b->size >= rsize > x->size: b keeps a remainder */
        vi_free_unlink(a, x);
        x->size = rsize;
        b->addr += head;
        b->size -= head;
        vi_rebin(a, b);
        return x;
    }
    if (should_split(a, b, rsize)) {
        vi_block *blk = vi_block_new(a);
        if (!blk) return NULL;
        blk->region = b->region;
        blk->pool = b->pool;
        if (place == PLACE_END) {
            blk->addr = b->addr + b->size - rsize;
            blk->size = rsize;
            blk->prev = b;
            blk->next = b->next;
            if (b->next) b->next->prev = blk;
            b->next = blk;
            b->size -= rsize;
            vi_rebin(a, b);
            return blk;
        }
        blk->addr = b->addr;
        blk->size = rsize;
        blk->region = b->region;
        blk->prev = b->prev;
        blk->next = b;
        if (b->prev) b->prev->next = blk;
        else b->region->first = blk;
        b->prev = blk;
        b->addr += rsize;
        b->size -= rsize;
        vi_rebin(a, b);
        return blk;
    }
    vi_free_unlink(a, b);
    return b;
}

/* malloc with the lock held and the arguments checked, where vram_allocator_malloc's fast
 * path (an exact deferred block, nothing pending or not ready) did not apply. Kept out of line
 * so that the fast path stays a small function. */
__attribute__((noinline)) static vram_status malloc_locked(vram_allocator *a, size_t size, uint64_t rsize,
                                                           vram_stream stream, vram_tag tag, void **ptr) {
    vi_block *b;
    int graph = vi_capturing(a) ? vi_graph_route(a, stream) : -1; /* a capture's pool takes it */
    if (!a->streams.poll_countdown && (a->pending.head || a->streams.not_ready) && !vi_capturing(a)) {
        /* pending frees and ready streams first when it is their turn (the fast path counts
         * down to it and, until then, has looked for an exact deferred block itself), then an
         * exact deferred block. (The countdown is asked first: on a device with events, frees
         * leave blocks not ready, and the countdown is then 0 on one malloc in 64.) */
        a->streams.poll_countdown = VRAM_POLL_EVERY;
        if (a->pending.head) vi_process_pending(a);
        if (a->streams.not_ready) vi_poll_streams(a, 0);
        if ((b = vi_recent_take(a, rsize, stream)) != NULL) goto live; /* its live map entry stayed */
    }
    if (a->streams_seen == STREAMS_NONE || (a->streams_seen == STREAMS_SOLO && stream != a->solo_stream))
        vi_streams_note(a, stream);
    if (graph >= 0 && (b = vi_graph_take(a, graph, rsize, stream)) != NULL) goto live;
    int pool = vi_pool_of(rsize);
    if (pool == a->held_pool && (b = vi_held_take(a, rsize, stream)) != NULL) goto live;
    vi_pool *p = &a->pools[pool];
    int retried = 0;
    vram_status err = VRAM_OK;
    int place = PLACE_START; /* where in free block b the allocation goes (pages model) */
    int mapped = 0;          /* every page under it mapped already (see vi_find_free) */
    b = vi_find_free_inline(a, p, rsize, stream, &place, &mapped);
    if (a->recent.mask && b && b->size != rsize) {
        /* b would be split: first let the search see the deferred blocks (see vi_recent_put) */
        if (vi_recent_flush(a, pool, rsize, b) || place == PLACE_PREV) /* b->prev may have grown */
            b = vi_find_free(a, p, rsize, stream, &place, &mapped);
    }
    if (!b || !mapped) b = vi_obtain(a, pool, rsize, stream, b, &place, &mapped, &retried, &err);
    if (retried) a->stats.num_alloc_retries++;
    if (err != VRAM_OK || !b) {
        if (err == VRAM_ERR_OUT_OF_MEMORY) {
            vi_oom_fail(a, size, rsize, stream, tag, retried ? "the cache was released and the request still does not fit"
                                                          : "the request does not fit");
        } else {
            vram_error(err, "malloc of %zu bytes on %s failed: %s", size, a->dev->name, vram_status_str(err));
        }
        vi_allocator_unlock(a);
        return err != VRAM_OK ? err : VRAM_ERR_OUT_OF_MEMORY;
    }
    b = block_carve(a, b, rsize, place);
    if (!b) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_HOST_MEMORY, "malloc: host out of memory for block metadata");
    }
    if (vi_live_put(&a->live, b) != 0) {
        b->state = BLOCK_FREE;
        b->ready = 1;
        vi_free_insert(a, b, b->addr, b->size);
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_HOST_MEMORY, "malloc: host out of memory for the block map");
    }
live:
    if (graph >= 0 && !b->graph) vi_graph_adopt(a, graph, b);
    vi_block_live(a, b, size, stream, tag);
    *ptr = (void *)(uintptr_t)b->addr;
    vi_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_malloc(vram_allocator *a, size_t size, vram_stream stream, vram_tag tag, void **ptr) {
    if (!a || !ptr) return vram_error(VRAM_ERR_INVALID_ARG, "malloc: null argument");
    *ptr = NULL;
    if (tag >= VRAM_TAG_MAX) return vram_error(VRAM_ERR_INVALID_ARG, "malloc: unknown tag %u", tag);
    if (size > (1ull << 52)) {
        /* Failed at once, with no retry, but an out-of-memory like any other: counted, in the
         * history and reported, as PyTorch counts the cudaMalloc failure of such a request. */
        vi_allocator_lock(a);
        vi_oom_fail(a, size, size, stream, tag, "it is larger than any device");
        vi_allocator_unlock(a);
        return VRAM_ERR_OUT_OF_MEMORY;
    }
    vi_allocator_lock(a);
    uint64_t rsize = round_size(a, size);
    /* The fast path: an exact deferred block, unless pending frees or not-ready blocks are due
     * to be looked at first (malloc_locked does that every VRAM_POLL_EVERY mallocs). During a
     * capture the slots stay empty (see graph_mode_update), so every request goes on. */
    vi_block *b;
    if ((!(a->pending.head || a->streams.not_ready) || (a->streams.poll_countdown && --a->streams.poll_countdown)) &&
        (b = vi_recent_take(a, rsize, stream)) != NULL) {
        vi_block_live(a, b, size, stream, tag);
        *ptr = (void *)(uintptr_t)b->addr;
        vi_allocator_unlock(a);
        return VRAM_OK;
    }
    return malloc_locked(a, size, rsize, stream, tag, ptr);
}

/* Counts block b into (dir 1) or out of (dir -1) the pending blocks, from which the active
 * statistics follow (allocator_internal.h). */
static void pending_count(vram_allocator *a, const vi_block *b, int dir) {
    int pool = b->pool;
    a->pending.blocks[pool] += dir;
    a->pending.blocks[0] += dir;
    a->pending.bytes[pool] += dir * (int64_t)b->size;
    a->pending.bytes[0] += dir * (int64_t)b->size;
    a->pending_requested += dir * (int64_t)b->requested;
}

/* Returns a LIVE or PENDING block to the free structures (PyTorch's free_block). Always
 * inlined: it is most of free's fast path. `slot`: where b's live map entry was just found
 * (vi_live_del_near), or UINT64_MAX. */
static inline __attribute__((always_inline)) void free_block(vram_allocator *a, vi_block *b, uint64_t slot) {
    int pool = b->pool;
    vi_stat_pool_down(a->stats.requested_bytes, pool, (int64_t)b->requested);
    vi_history_add(a, VRAM_EVENT_FREE_COMPLETED, b->addr, b->requested, b->stream, b->tag);
    if (b->uses) {
        free(b->uses);
        b->uses = NULL;
        b->nuses = 0;
    }
    if (b->events) {
        free(b->events);
        b->events = NULL;
        b->nevents = 0;
    }
    b->state = BLOCK_FREE;
    b->ready = !a->has_events;
    b->mapped_all = 1; /* a live block's pages are all mapped */
    b->free_seq = ++a->streams.free_seq;
    b->requested = 0;
    if (__builtin_expect(a->free_fast, 1)) {
        vi_recent_put(a, b, slot); /* keeps its live map entry */
    } else if ((a->graph_mode & GRAPH_BLOCKS) && b->graph && vi_graph_keep(a, b)) {
        return; /* kept in its private pool */
    } else if (vi_frees_deferred(a) && !vi_capturing(a)) {
        vi_recent_put(a, b, slot);
    } else { /* coalesced now (during a capture the slots stay empty) */
        vi_live_del_near(&a->live, b->addr, slot);
        vi_free_insert(a, b, b->addr, b->size);
        if (vi_capturing(a)) return; /* a capture waits for and releases nothing */
        if (!a->cfg.caching) {
            vi_sync_all_streams(a);
            vi_release_cache(a, UINT64_MAX);
        } else { /* garbage_collection_threshold */
            double high = a->cfg.garbage_collection_threshold * (double)a->limit;
            double reserved = (double)a->stats.reserved_bytes[0].current;
            if (reserved > high) vi_release_cache(a, (uint64_t)(reserved - high));
        }
    }
}

/* Completes pending frees whose events have all finished (FIFO). */
void vi_process_pending(vram_allocator *a) {
    vi_block *b = a->pending.head;
    while (b) {
        vi_block *next = b->fnext;
        while (b->nevents && a->dev->ops->event_query(a->dev, b->events[b->nevents - 1]) == VRAM_OK)
            a->dev->ops->event_destroy(a->dev, b->events[--b->nevents]);
        if (!b->nevents) {
            if (b->fprev) b->fprev->fnext = b->fnext;
            else a->pending.head = b->fnext;
            if (b->fnext) b->fnext->fprev = b->fprev;
            else a->pending.tail = b->fprev;
            b->fprev = b->fnext = NULL;
            pending_count(a, b, -1);
            free_block(a, b, UINT64_MAX);
        }
        b = next;
    }
}

/* Records an event on each stream block b was used on besides its own (record_stream), into
 * b->events, and returns how many: all of them, or 0 when one could not be recorded (then the
 * streams were waited for instead, and the block needs no event). */
static uint16_t use_events_record(vram_allocator *a, vi_block *b) {
    b->events = calloc(b->nuses, sizeof *b->events);
    int n = 0;
    while (b->events && n < b->nuses && a->dev->ops->event_record(a->dev, b->uses[n], &b->events[n]) == VRAM_OK) n++;
    if (n == b->nuses) return (uint16_t)n;
    /* no room for the events, or one could not be recorded: wait for those streams now instead */
    for (int i = 0; i < n; i++) a->dev->ops->event_destroy(a->dev, b->events[i]);
    for (int i = 0; i < b->nuses; i++) vi_stream_wait(a, b->uses[i]);
    return 0;
}

/* A freed block used on other streams (record_stream): records an event on each of them and
 * makes the block PENDING until they complete. Returns 0, the block left as it was, when no
 * event is needed after all (recording failed, and those streams were waited for instead).
 * During a capture no event can be recorded: the block stays pending with none, and
 * vi_pending_after_captures records them once the last capture has ended (as PyTorch's
 * allocator defers them), so that the work those streams queued before still covers it. */
static int free_pending(vram_allocator *a, vi_block *b) {
    if (!vi_capturing(a)) {
        b->nevents = use_events_record(a, b);
        if (!b->nevents) return 0;
    }
    b->state = BLOCK_PENDING;
    pending_count(a, b, 1);
    b->fnext = NULL;
    b->fprev = a->pending.tail;
    if (a->pending.tail) a->pending.tail->fnext = b;
    else a->pending.head = b;
    a->pending.tail = b;
    return 1;
}

void vi_pending_after_captures(vram_allocator *a) {
    for (vi_block *b = a->pending.head; b; b = b->fnext)
        if (!b->nevents && !b->events) b->nevents = use_events_record(a, b);
    vi_process_pending(a);
}

vram_status vram_allocator_free(vram_allocator *a, void *ptr) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "free: null allocator");
    vi_allocator_lock(a);
    uint64_t slot = UINT64_MAX;
    vi_block *b = vi_live_find(&a->live, (uint64_t)(uintptr_t)ptr, &slot);
    if (!b || b->state != BLOCK_LIVE) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "free of %p: not a live allocation of this allocator%s", ptr,
                          b && b->state == BLOCK_PENDING ? " (already freed, waiting for its streams)" : "");
    }
    int pool = b->pool;
    vi_stat_pool_down(a->stats.allocation, pool, 1);
    vi_stat_pool_down(a->stats.allocated_bytes, pool, (int64_t)b->size);
    if (b->size >= a->cfg.max_split_size) /* UINT64_MAX when unlimited: no block reaches it */
        vi_stat_down(&a->stats.oversize_allocations, 1);
    if (__builtin_expect((int)b->tag != a->tag_solo, 0)) vi_tag_stats_down(a, b->tag, b->size, b->requested);
    vi_history_add(a, VRAM_EVENT_FREE_REQUESTED, b->addr, b->requested, b->stream, b->tag);
    if (__builtin_expect(b->nuses != 0, 0) && a->has_events && free_pending(a, b)) {
        vi_allocator_unlock(a);
        return VRAM_OK;
    }
    free_block(a, b, slot);
    vi_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_record_stream(vram_allocator *a, void *ptr, vram_stream stream) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "record_stream: null allocator");
    vi_allocator_lock(a);
    vi_block *b = vi_live_get(&a->live, (uint64_t)(uintptr_t)ptr);
    vram_status st = VRAM_OK;
    if (!b || b->state != BLOCK_LIVE) {
        st = vram_error(VRAM_ERR_NOT_FOUND, "record_stream of %p: not a live allocation", ptr);
    } else if (stream != b->stream) {
        int known = 0;
        for (int i = 0; i < b->nuses; i++) known |= b->uses[i] == stream;
        if (!known) {
            vram_stream *u = realloc(b->uses, (b->nuses + 1u) * sizeof *u);
            if (!u || b->nuses == UINT16_MAX) {
                if (u) b->uses = u;
                st = u ? vram_error(VRAM_ERR_OUT_OF_MEMORY, "record_stream: too many streams for one block")
                       : vram_error(VRAM_ERR_HOST_MEMORY, "record_stream: host out of memory");
            } else {
                b->uses = u;
                b->uses[b->nuses++] = stream;
            }
        }
    }
    vi_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_block_info(vram_allocator *a, const void *ptr, size_t *size, size_t *requested,
                                      vram_tag *tag) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "block_info: null allocator");
    vi_allocator_lock(a);
    vi_block *b = vi_live_get(&a->live, (uint64_t)(uintptr_t)ptr);
    if (!b || b->state != BLOCK_LIVE) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "block_info of %p: not a live allocation", ptr);
    }
    if (size) *size = b->size;
    if (requested) *requested = b->requested;
    if (tag) *tag = b->tag;
    vi_allocator_unlock(a);
    return VRAM_OK;
}

vram_status vram_allocator_set_tag(vram_allocator *a, void *ptr, vram_tag tag) {
    if (!a || tag >= VRAM_TAG_MAX) return vram_error(VRAM_ERR_INVALID_ARG, "set_tag: bad argument");
    vi_allocator_lock(a);
    vi_block *b = vi_live_get(&a->live, (uint64_t)(uintptr_t)ptr);
    if (!b || b->state != BLOCK_LIVE) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_NOT_FOUND, "set_tag of %p: not a live allocation", ptr);
    }
    if (tag != b->tag) {
        vi_tag_stats_down(a, b->tag, b->size, b->requested);
        vi_tag_stats_up(a, tag, b->size, b->requested);
        b->tag = tag;
    }
    vi_allocator_unlock(a);
    return VRAM_OK;
}

/* empty_cache with the lock held and no capture under way. */
static vram_status empty_cache_locked(vram_allocator *a) {
    /* wait for the streams that pending frees were used on, as PyTorch's empty_cache does */
    for (vi_block *b = a->pending.head; b; b = b->fnext)
        for (int i = 0; i < b->nevents; i++) a->dev->ops->event_sync(a->dev, b->events[i]);
    if (a->pending.head) vi_process_pending(a);
    vram_status st = vi_sync_all_streams(a); /* flushes the deferred blocks first */
    vi_pages_reap_zombies(a, 1);
    if (st == VRAM_OK) {
        if (a->pages_model) {
            /* every free block, not only the cached list, so nothing mapped is missed */
            for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
                for (vi_region *r = a->pools[p].regions; r; r = r->next)
                    for (vi_block *b = r->first; b; b = b->next)
                        if (b->state == BLOCK_FREE && b->deferred != DEFER_GRAPH) vi_cached_add(a, b);
        }
        vi_release_cache(a, UINT64_MAX);
        a->pages_moved = 0; /* a fresh start for one-stream merges (mergeable) */
        /* and for the page budget: peaks from here on (allocator_internal.h) */
        vram_stat *al = &a->stats.allocated_bytes[0], *re = &a->stats.reserved_bytes[0];
        if (al->peak > a->allocated_peak_before) a->allocated_peak_before = al->peak;
        if (re->peak > a->reserved_peak_before) a->reserved_peak_before = re->peak;
        al->peak = al->current;
        re->peak = re->current;
        a->allocated_high = 0;
        vi_history_add(a, VRAM_EVENT_EMPTY_CACHE, 0, 0, 0, 0);
    }
    return st;
}

vram_status vram_allocator_empty_cache(vram_allocator *a) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "empty_cache: null allocator");
    vi_allocator_lock(a);
    if (vi_capturing(a)) {
        vi_allocator_unlock(a);
        return vram_error(VRAM_ERR_STATE, "empty_cache: not during a CUDA graph capture (it would wait for the GPU)");
    }
    vram_status st = empty_cache_locked(a);
    vi_allocator_unlock(a);
    return st;
}

/* Counts again, after max_split_size changed, the live blocks and the segments at or above it
 * (PyTorch's oversize statistics follow the threshold in force). */
static void oversize_recount(vram_allocator *a) {
    int64_t blocks = 0, segments = 0;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (vi_region *r = a->pools[p].regions; r; r = r->next) {
            if (!r->expandable && r->size >= a->cfg.max_split_size) segments++;
            for (vi_block *b = r->first; b; b = b->next)
                if (b->state == BLOCK_LIVE && b->size >= a->cfg.max_split_size) blocks++;
        }
    vram_stat *st[2] = {&a->stats.oversize_allocations, &a->stats.oversize_segments};
    int64_t now[2] = {blocks, segments};
    for (int i = 0; i < 2; i++) {
        st[i]->current = now[i];
        if (st[i]->peak < now[i]) st[i]->peak = now[i];
    }
    a->stats.max_split_size = a->cfg.max_split_size == UINT64_MAX ? -1 : (int64_t)a->cfg.max_split_size;
}

/* Puts configuration `next` (checked; its history_entries ignored: set_history changes the ring)
 * in force, with the lock held: what vram_allocator_set_config and set_caching share. */
static vram_status set_config_locked(vram_allocator *a, vram_alloc_config next) {
    const vram_alloc_config *now = &a->cfg;
    next.expandable_segments = !!next.expandable_segments;
    next.small_classes = !!next.small_classes;
    next.caching = !!next.caching;
    const char *fixed = next.page_size != now->page_size    ? "page_size"
                        : next.chunk_size != now->chunk_size ? "chunk_size"
                                                             : NULL;
    if (fixed)
        return vram_error(VRAM_ERR_INVALID_ARG, "set_config: %s is fixed when the allocator starts (it shapes the memory "
                                                "already reserved)", fixed);
    /* expandable_segments switches between growing by pages and by new segments, as PyTorch's
     * setting does for new segments; an allocator that started in the segments model on a device
     * with pages has no address ranges for them */
    if (next.expandable_segments && !now->expandable_segments && !a->pages_model && vram_device_has_pages(a->dev))
        return vram_error(VRAM_ERR_INVALID_ARG, "set_config: expandable_segments cannot be turned on for an allocator that "
                                                "started in the segments model (it has no address ranges for pages)");
    if (next.move_busy_pages != VRAM_CONF_AUTO) next.move_busy_pages = !!next.move_busy_pages;
    resolve_auto(a, &next);
    int path_changes = vi_config_defers(&next) != vi_frees_deferred(a) || next.small_classes != now->small_classes;
    if ((path_changes || next.caching != now->caching) && vi_capturing(a))
        return vram_error(VRAM_ERR_STATE, "caching, garbage_collection_threshold and small_classes do not "
                                          "change during a CUDA graph capture (deferred frees would be coalesced, and "
                                          "turning caching off empties the cache, which waits for the GPU)");
    vram_status st = VRAM_OK;
    if (now->caching && !next.caching) st = empty_cache_locked(a); /* coalesces deferred and held blocks too */
    else if (path_changes) vi_deferred_flush(a); /* blocks deferred under the old rule go to the bins */
    if (st != VRAM_OK) return st;
    int split_changes = next.max_split_size != now->max_split_size;
    next.history_entries = now->history_entries;
    a->cfg = next;
    vi_free_path_update(a);
    a->limit = compute_limit(a);
    if (split_changes) oversize_recount(a);
    return VRAM_OK;
}

vram_status vram_allocator_set_config(vram_allocator *a, const vram_alloc_config *want) {
    if (!a || !want) return vram_error(VRAM_ERR_INVALID_ARG, "set_config: null argument");
    if (vram_alloc_config_check(want) != VRAM_OK)
        return vram_error(VRAM_ERR_INVALID_ARG, "set_config: %s", vram_last_error());
    /* a new history ring is allocated before the lock is taken, and put in only with the rest */
    vram_alloc_config before;
    vram_allocator_get_config(a, &before);
    uint32_t entries = want->history_entries;
    vram_event *ring = entries != before.history_entries && entries ? calloc(entries, sizeof *ring) : NULL;
    if (entries != before.history_entries && entries && !ring)
        return vram_error(VRAM_ERR_HOST_MEMORY, "set_config: host out of memory for a history of %u events", entries);
    vi_allocator_lock(a);
    vram_status st = set_config_locked(a, *want);
    if (st == VRAM_OK && entries != a->cfg.history_entries && (ring || !entries)) ring = vi_history_install(a, ring, entries);
    vi_allocator_unlock(a);
    free(ring); /* the ring replaced, or the new one left unused */
    return st;
}

vram_status vram_allocator_set_caching(vram_allocator *a, int on) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "set_caching: null allocator");
    vi_allocator_lock(a);
    vram_alloc_config next = a->cfg;
    next.caching = on;
    vram_status st = set_config_locked(a, next);
    vi_allocator_unlock(a);
    return st;
}

vram_status vram_allocator_set_memory_fraction(vram_allocator *a, double fraction) {
    if (!a || !(fraction > 0.0) || fraction > 1.0)
        return vram_error(VRAM_ERR_INVALID_ARG, "memory fraction %g is not in (0, 1]", fraction);
    vi_allocator_lock(a);
    a->cfg.memory_fraction = fraction;
    a->limit = compute_limit(a);
    vi_allocator_unlock(a);
    return VRAM_OK;
}

double vram_allocator_memory_fraction(vram_allocator *a) {
    if (!a) return 0.0;
    vi_allocator_lock(a);
    double f = a->cfg.memory_fraction;
    vi_allocator_unlock(a);
    return f;
}

vram_status vram_allocator_set_limit(vram_allocator *a, uint64_t bytes) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "set_limit: null allocator");
    vi_allocator_lock(a);
    a->cfg.max_reserved = bytes;
    a->limit = compute_limit(a);
    vi_allocator_unlock(a);
    return VRAM_OK;
}

uint64_t vram_allocator_limit(vram_allocator *a) { return a ? a->limit : 0; }

uint64_t vram_allocator_room(vram_allocator *a) {
    if (!a) return 0;
    vi_allocator_lock(a);
    uint64_t room = vi_room(a);
    vi_allocator_unlock(a);
    return room;
}
