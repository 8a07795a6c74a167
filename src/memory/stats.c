/* stats.c — the allocator's statistics: what malloc and free keep, turned into PyTorch's meaning
 * on export, the resets, the per-tag statistics and the tag names.
 *
 * malloc and free update as little as they can (allocator_internal.h, "Statistics in the hot
 * path": `active` follows from the allocation statistics and the pending blocks; the pools' "all"
 * entry keeps no `allocated`; while a program uses one tag, that tag's statistics are the pools'):
 * vi_stats_export derives the rest when a caller asks. Everything here runs with the
 * allocator's lock held, taken by the public functions below or by their callers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator_internal.h"
#include "pages.h"

/* Active (allocated plus pending) exceeds allocated only while blocks are pending: lifts the
 * active peaks kept for that case after an allocation in `pool` (allocator_internal.h). */
void vi_stats_active_lift(vram_allocator *a, int pool) {
    int pools[2] = {0, pool};
    for (int i = 0; i < 2; i++) {
        int p = pools[i];
        int64_t n = a->stats.allocation[p].current + a->pending.blocks[p];
        int64_t bytes = a->stats.allocated_bytes[p].current + a->pending.bytes[p];
        if (n > a->stats.active[p].peak) a->stats.active[p].peak = n;
        if (bytes > a->stats.active_bytes[p].peak) a->stats.active_bytes[p].peak = bytes;
    }
}

/* Per-tag statistics. While every allocation so far has had one tag (a->tag_solo: the plug-in's
 * and most programs' case), that tag's allocation, allocated_bytes and requested_bytes
 * statistics are exactly the pools' "all" ones (same moves, same resets), so malloc and free
 * keep only those and vi_stats_export fills the tag's in: a third fewer statistics on the
 * reuse pair (PyTorch's own allocator has no tags to pay for). The first allocation or set_tag
 * with another tag writes the solo tag's statistics out (tags_split) and from then on every tag
 * keeps its own. */

/* The peaks a caller sees: the statistics' own, or those from before the last empty_cache. */
static void user_peaks(const vram_allocator *a, vram_stats *st) {
    if (a->allocated_peak_before > st->allocated_bytes[0].peak) st->allocated_bytes[0].peak = a->allocated_peak_before;
    if (a->reserved_peak_before > st->reserved_bytes[0].peak) st->reserved_bytes[0].peak = a->reserved_peak_before;
}

/* The internal statistic of the solo tag, from the pools' internal statistics (all, small,
 * large; see allocator_internal.h: the "all" entry keeps no `allocated`). */
static vram_stat solo_stat(const vram_stat *pools) {
    vram_stat s = pools[0];
    s.allocated = pools[VRAM_POOL_SMALL].allocated + pools[VRAM_POOL_LARGE].allocated;
    return s;
}

/* The solo tag's statistics from the pools'. A pending free (record_stream) has left the
 * allocations and allocated bytes but not yet the requested bytes of its pool, as PyTorch counts
 * them; a tag's statistics count live blocks only, so its requested bytes leave the pending ones
 * out (`pending_requested`). */
static void solo_tag_stats(const vram_stats *st, int64_t pending_requested, vram_tag_stats *out) {
    out->allocation = solo_stat(st->allocation);
    out->allocated_bytes = solo_stat(st->allocated_bytes);
    out->requested_bytes = solo_stat(st->requested_bytes);
    out->requested_bytes.current -= pending_requested;
}

static void tags_split(vram_allocator *a) {
    if (a->tag_solo < 0) return;
    vram_stats seen = a->stats;
    user_peaks(a, &seen);
    solo_tag_stats(&seen, a->pending_requested, &a->stats.tags[a->tag_solo]);
    a->tag_solo = -1;
}

/* malloc's and free's per-tag statistics for a tag other than the solo one. */
void vi_tag_stats_up(vram_allocator *a, vram_tag tag, uint64_t size, uint64_t requested) {
    tags_split(a);
    vram_tag_stats *ts = &a->stats.tags[tag];
    vi_stat_up(&ts->allocation, 1);
    vi_stat_up(&ts->allocated_bytes, (int64_t)size);
    vi_stat_up(&ts->requested_bytes, (int64_t)requested);
}

void vi_tag_stats_down(vram_allocator *a, vram_tag tag, uint64_t size, uint64_t requested) {
    tags_split(a);
    vram_tag_stats *ts = &a->stats.tags[tag];
    vi_stat_down(&ts->allocation, 1);
    vi_stat_down(&ts->allocated_bytes, (int64_t)size);
    vi_stat_down(&ts->requested_bytes, (int64_t)requested);
}

static void count_inactive_split(vram_allocator *a, vram_stats *out) {
    /* Non-releasable free space: free blocks inside split segments (segments model only, as
     * PyTorch excludes expandable segments). Counted on demand rather than on every split. */
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++) {
        out->inactive_split[p].current = out->inactive_split_bytes[p].current = 0;
        for (vi_region *r = a->pools[p].regions; r; r = r->next) {
            if (r->expandable || (!r->first->next)) continue;
            for (vi_block *b = r->first; b; b = b->next)
                if (b->state == BLOCK_FREE) {
                    out->inactive_split[p].current++;
                    out->inactive_split_bytes[p].current += (int64_t)b->size;
                }
        }
        if (out->inactive_split[p].current > out->inactive_split[p].peak)
            out->inactive_split[p].peak = out->inactive_split[p].current;
        if (out->inactive_split_bytes[p].current > out->inactive_split_bytes[p].peak)
            out->inactive_split_bytes[p].peak = out->inactive_split_bytes[p].current;
    }
    out->inactive_split[0].current = out->inactive_split[1].current + out->inactive_split[2].current;
    out->inactive_split_bytes[0].current = out->inactive_split_bytes[1].current + out->inactive_split_bytes[2].current;
    for (int p = 0; p < VRAM_POOL_COUNT; p++) {
        if (out->inactive_split[p].current > out->inactive_split[p].peak)
            out->inactive_split[p].peak = out->inactive_split[p].current;
        if (out->inactive_split_bytes[p].current > out->inactive_split_bytes[p].peak)
            out->inactive_split_bytes[p].peak = out->inactive_split_bytes[p].current;
    }
}

void vram_allocator_get_stats(vram_allocator *a, vram_stats *out) {
    vi_allocator_lock(a);
    if (!a->pages_model || a->segments_too) count_inactive_split(a, &a->stats);
    vi_stats_export(a, out);
    vi_allocator_unlock(a);
}

/* Calls fn on every statistic of st: the pool arrays, the oversize counts and the tags'. */
static void for_each_stat(vram_stats *st, void (*fn)(vram_stat *)) {
    vram_stat *arrays[] = {st->allocation, st->segment, st->active, st->allocated_bytes, st->reserved_bytes,
                           st->active_bytes, st->requested_bytes};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        for (int p = 0; p < VRAM_POOL_COUNT; p++) fn(&arrays[i][p]);
    fn(&st->oversize_allocations);
    fn(&st->oversize_segments);
    for (int t = 0; t < VRAM_TAG_MAX; t++) {
        fn(&st->tags[t].allocation);
        fn(&st->tags[t].allocated_bytes);
        fn(&st->tags[t].requested_bytes);
    }
}

static void export_stat(vram_stat *s) { s->freed = s->allocated + s->freed - s->current; }

void vi_stats_export(const vram_allocator *a, vram_stats *out) {
    *out = a->stats;
    user_peaks(a, out);
    if (a->tag_solo >= 0) solo_tag_stats(out, a->pending_requested, &out->tags[a->tag_solo]);
    for (int p = 0; p < VRAM_POOL_COUNT; p++) { /* active: allocated plus pending */
        const vram_stat *n = &out->allocation[p], *bytes = &out->allocated_bytes[p];
        vram_stat *an = &out->active[p], *abytes = &out->active_bytes[p];
        an->current = n->current + a->pending.blocks[p];
        an->allocated = n->allocated;
        if (n->peak > an->peak) an->peak = n->peak;
        abytes->current = bytes->current + a->pending.bytes[p];
        abytes->allocated = bytes->allocated;
        if (bytes->peak > abytes->peak) abytes->peak = bytes->peak;
    }
    vram_stat *arrays[] = {out->allocation, out->segment, out->active, out->allocated_bytes, out->reserved_bytes,
                           out->active_bytes, out->requested_bytes};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) /* "all" keeps no `allocated` */
        arrays[i][0].allocated = arrays[i][1].allocated + arrays[i][2].allocated;
    for_each_stat(out, export_stat);
}

/* Brings the internal active statistics' `current` up to date, for the resets below (which
 * start from it); malloc and free leave it stale (allocator_internal.h). */
static void active_current(vram_allocator *a) {
    for (int p = 0; p < VRAM_POOL_COUNT; p++) {
        a->stats.active[p].current = a->stats.allocation[p].current + a->pending.blocks[p];
        a->stats.active_bytes[p].current = a->stats.allocated_bytes[p].current + a->pending.bytes[p];
    }
}

static void reset_peak(vram_stat *s) { s->peak = s->current; }
static void reset_accum(vram_stat *s) {
    s->allocated = 0;
    s->freed = s->current; /* the internal reset base, see allocator_internal.h */
}


void vram_allocator_reset_peak_stats(vram_allocator *a) {
    vi_allocator_lock(a);
    if ((uint64_t)a->stats.allocated_bytes[0].peak > a->allocated_high)
        a->allocated_high = (uint64_t)a->stats.allocated_bytes[0].peak;
    a->allocated_peak_before = a->reserved_peak_before = 0;
    active_current(a);
    for_each_stat(&a->stats, reset_peak);
    vi_allocator_unlock(a);
}

void vram_allocator_reset_accumulated_stats(vram_allocator *a) {
    vi_allocator_lock(a);
    active_current(a);
    for_each_stat(&a->stats, reset_accum);
    a->stats.num_alloc_retries = a->stats.num_ooms = a->stats.num_sync_all_streams = 0;
    a->stats.num_device_alloc = a->stats.num_device_free = 0;
    vi_allocator_unlock(a);
}

vram_status vram_allocator_tag_register(vram_allocator *a, const char *name, vram_tag *out) {
    if (!a || !name || !out || !*name) return vram_error(VRAM_ERR_INVALID_ARG, "tag_register: bad argument");
    if (strlen(name) >= sizeof a->tag_names[0])
        return vram_error(VRAM_ERR_INVALID_ARG, "tag name '%s' is longer than 31 characters", name);
    vi_allocator_lock(a);
    vram_status st = VRAM_OK;
    uint32_t i;
    for (i = 0; i < a->stats.num_tags; i++)
        if (!strcmp(a->tag_names[i], name)) break;
    if (i == a->stats.num_tags) {
        if (i == VRAM_TAG_MAX) st = vram_error(VRAM_ERR_OUT_OF_MEMORY, "tag '%s': all %d tags are in use", name, VRAM_TAG_MAX);
        else {
            snprintf(a->tag_names[i], sizeof a->tag_names[i], "%s", name);
            a->stats.num_tags++;
        }
    }
    if (st == VRAM_OK) *out = i;
    vi_allocator_unlock(a);
    return st;
}

const char *vram_allocator_tag_name(vram_allocator *a, vram_tag tag) {
    return tag < a->stats.num_tags ? a->tag_names[tag] : "unknown";
}

/* ---------------------------------------------------------------------------------------- */
/* History.                                                                                  */

static _Thread_local uint32_t thread_context; /* vram_set_context */

void vram_set_context(uint32_t context) { thread_context = context; }
uint32_t vram_context(void) { return thread_context; }

/* Records an event in the history ring (out of line: malloc and free only test a->history.ring). */
void vi_history_record(vram_allocator *a, vram_event_action action, uint64_t addr, uint64_t size, vram_stream stream,
                         vram_tag tag) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    vram_event *e = &a->history.ring[a->history.next % a->cfg.history_entries];
    e->action = action;
    e->addr = addr;
    e->size = size;
    e->stream = stream;
    e->tag = tag;
    e->context = thread_context;
    e->time_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    a->history.next++;
}


/* The longest stretch of free block b that can serve a request without asking the device: all
 * of it in the segments model, its longest run of mapped pages in the pages model. */
static uint64_t cached_run(const vram_allocator *a, const vi_block *b) {
    const vi_region *r = b->region;
    if (!r->expandable) return b->size;
    uint64_t P = a->page_size, lo = b->addr - r->base, hi = lo + b->size, best = 0;
    uint64_t q1 = ((hi - 1) >> a->page_shift) + 1; /* one past the block's last page */
    for (uint64_t s = vi_bits_find(r->mapped, lo >> a->page_shift, q1, 1), e; s < q1; s = vi_bits_find(r->mapped, e, q1, 1)) {
        e = vi_bits_find(r->mapped, s, q1, 0);
        uint64_t from = s * P > lo ? s * P : lo, to = e * P < hi ? e * P : hi;
        if (to - from > best) best = to - from;
    }
    return best;
}

/* The largest request of `pool` (-1: either) that cached memory could serve as it lies. */
static uint64_t largest_cached(const vram_allocator *a, int pool) {
    uint64_t largest = 0;
    for (int p = VRAM_POOL_SMALL; p <= VRAM_POOL_LARGE; p++)
        for (const vi_region *r = a->pools[p].regions; r && (pool < 0 || p == pool); r = r->next)
            for (const vi_block *b = r->first; b; b = b->next)
                if (b->state == BLOCK_FREE) {
                    uint64_t c = cached_run(a, b);
                    if (c > largest) largest = c;
                }
    return largest;
}

static void oom_report(vram_allocator *a, uint64_t size, uint64_t rsize, const char *why) {
    char s1[32], s2[32], s3[32], s4[32], s5[32], s6[32], s7[32], s8[32], s9[32];
    const vram_stats *st = &a->stats;
    uint64_t allocated = (uint64_t)st->allocated_bytes[0].current, reserved = (uint64_t)st->reserved_bytes[0].current;
    size_t dfree = 0, dtotal = 0;
    if (a->dev->ops->mem_info) a->dev->ops->mem_info(a->dev, &dfree, &dtotal);
    int pool = vi_pool_of(rsize);
    uint64_t largest = largest_cached(a, pool);
    int n = snprintf(a->oom_report, sizeof a->oom_report,
                     "vram out of memory: tried to allocate %s (requested %s) on %s device %d (%s): %s. "
                     "Device capacity %s, of which %s is free; vram's limit is %s. "
                     "Allocated %s, reserved %s, of which %s is cached (reserved but unallocated); "
                     "the largest free cached block of the %s pool is %s.",
                     vram_format_size(rsize, s1, sizeof s1), vram_format_size(size, s2, sizeof s2), a->dev->kind,
                     a->dev->index, a->dev->name, why, vram_format_size(a->dev->capacity, s3, sizeof s3),
                     vram_format_size(dfree, s4, sizeof s4), vram_format_size(a->limit, s5, sizeof s5),
                     vram_format_size(allocated, s6, sizeof s6), vram_format_size(reserved, s7, sizeof s7),
                     vram_format_size(reserved - allocated, s8, sizeof s8), pool == VRAM_POOL_SMALL ? "small" : "large",
                     vram_format_size(largest, s9, sizeof s9));
    int64_t pool_cached = st->reserved_bytes[pool].current - st->allocated_bytes[pool].current;
    if (n > 0 && (size_t)n < sizeof a->oom_report && pool_cached >= 0 && (uint64_t)pool_cached >= rsize && largest < rsize)
        n += snprintf(a->oom_report + n, sizeof a->oom_report - (size_t)n,
                      a->pages_model
                          ? " The pool's %s of cached memory is fragmented: it lies in pieces smaller than the request, "
                            "in chunks shared with live blocks, and a chunk moves only whole (chunk_size_mb sets their size)."
                          : " The pool's %s of cached memory is fragmented: it lies in segments with live blocks, where "
                            "nothing this large fits (expandable_segments:True lets free pages move).",
                      vram_format_size((uint64_t)pool_cached, s1, sizeof s1));
    /* the three biggest tags by allocated bytes */
    int order[VRAM_TAG_MAX];
    uint32_t nt = st->num_tags;
    for (uint32_t i = 0; i < nt; i++) order[i] = (int)i;
    for (uint32_t i = 0; i < nt; i++)
        for (uint32_t j = i + 1; j < nt; j++)
            if (st->tags[order[j]].allocated_bytes.current > st->tags[order[i]].allocated_bytes.current) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    for (uint32_t i = 0; i < nt && i < 3 && n > 0 && (size_t)n < sizeof a->oom_report; i++) {
        int64_t bytes = st->tags[order[i]].allocated_bytes.current;
        if (bytes <= 0) break;
        n += snprintf(a->oom_report + n, sizeof a->oom_report - (size_t)n, "%s %s %s", i ? "," : " Biggest tags:",
                      a->tag_names[order[i]], vram_format_size((uint64_t)bytes, s1, sizeof s1));
    }
}

/* An out-of-memory answer (the lock held): counted, in the history, the report written and set as
 * the error, `why` saying what failed. */
void vi_oom_fail(vram_allocator *a, size_t size, uint64_t rsize, vram_stream stream, vram_tag tag, const char *why) {
    a->stats.num_ooms++;
    size_t dfree = 0, dtotal = 0;
    if (a->dev->ops->mem_info) a->dev->ops->mem_info(a->dev, &dfree, &dtotal);
    vi_history_add(a, VRAM_EVENT_OOM, dfree, rsize, stream, tag);
    oom_report(a, size, rsize, why);
    vram_error(VRAM_ERR_OUT_OF_MEMORY, "%s", a->oom_report);
}

/* Puts history ring `ring` of `entries` events in place (lock held), dropping the events
 * recorded so far; returns the old ring, for the caller to free unlocked. */
vram_event *vi_history_install(vram_allocator *a, vram_event *ring, uint32_t entries) {
    vram_event *old = a->history.ring;
    a->history.ring = ring;
    a->cfg.history_entries = entries;
    a->history.next = 0;
    return old;
}

vram_status vram_allocator_set_history(vram_allocator *a, uint32_t entries) {
    if (!a) return vram_error(VRAM_ERR_INVALID_ARG, "set_history: null allocator");
    if (entries > VRAM_HISTORY_MAX)
        return vram_error(VRAM_ERR_INVALID_ARG, "set_history: %u entries, more than the %u allowed", entries,
                          VRAM_HISTORY_MAX);
    vram_event *ring = entries ? calloc(entries, sizeof *ring) : NULL;
    if (entries && !ring) return vram_error(VRAM_ERR_HOST_MEMORY, "set_history: host out of memory for %u events", entries);
    vi_allocator_lock(a);
    vram_event *old = vi_history_install(a, ring, entries);
    vi_allocator_unlock(a);
    free(old);
    return VRAM_OK;
}

uint64_t vram_allocator_history_count(vram_allocator *a) {
    if (!a) return 0;
    vi_allocator_lock(a);
    uint64_t n = a->cfg.history_entries ? a->history.next : 0;
    vi_allocator_unlock(a);
    return n;
}

const char *vram_allocator_oom_report(vram_allocator *a) { return a->oom_report; }

uint64_t vram_allocator_largest_free(vram_allocator *a) {
    if (!a) return 0;
    vi_allocator_lock(a);
    uint64_t largest = largest_cached(a, -1);
    vi_allocator_unlock(a);
    return largest;
}
