/* viz_trace.c — a memtrace replayed through vram's allocator into a viz_model (viz_model.h).
 *
 * Each event is replayed as `vram replay` does (a 0-byte request takes no memory); an
 * allocation's block size is the allocator's own (vram_allocator_block_info), which is what its
 * allocated counter moves by. Reserved memory and the segments (or pages) come from the
 * allocator's event history: the ring is read with a snapshot whenever half of it has filled,
 * and each segment event is charged to the trace event during which the history count moved by
 * more than that event's own alloc/free records (a `mark`). Reserved memory is read from the
 * statistics only at those events. At the end the arrays are checked against the counters.
 */
#include <stdlib.h>
#include <string.h>

#include "viz_model.h"
#include "vram/replay.h"
#include "vram/snapshot.h"

#define VIZ_HISTORY_RING (1u << 20)

typedef struct mark {
    int32_t ev;
    uint64_t lo, hi; /* history events lo+1..hi were recorded during event ev */
} mark;

typedef struct replay_state {
    vram_allocator *a;
    viz_model *m;
    mark *marks;
    size_t n_marks, cap_marks, next_mark;
    uint64_t drained; /* history events up to this count are charged */
} replay_state;

/* Charges the history events recorded since the last drain to their trace events. */
static vram_status drain(replay_state *s) {
    uint64_t hc = vram_allocator_history_count(s->a);
    if (hc == s->drained) return VRAM_OK;
    vram_snapshot *snap = NULL;
    vram_status st = vram_allocator_snapshot(s->a, &snap);
    if (st != VRAM_OK) return st;
    uint64_t first = hc - snap->num_events + 1; /* the count of snap->events[0] */
    if (first > s->drained + 1) {
        vram_snapshot_free(snap);
        return vram_error(VRAM_ERR_INTERNAL, "viz: the allocator's history lost events");
    }
    for (uint64_t g = s->drained + 1; g <= hc && st == VRAM_OK; g++) {
        const vram_event *e = &snap->events[g - first];
        double sign = e->action == VRAM_EVENT_SEGMENT_ALLOC || e->action == VRAM_EVENT_SEGMENT_MAP ? 1
                      : e->action == VRAM_EVENT_SEGMENT_FREE || e->action == VRAM_EVENT_SEGMENT_UNMAP ? -1 : 0;
        if (sign == 0) continue;
        while (s->next_mark < s->n_marks && s->marks[s->next_mark].hi < g) s->next_mark++;
        if (s->next_mark >= s->n_marks || s->marks[s->next_mark].lo >= g) {
            st = vram_error(VRAM_ERR_INTERNAL, "viz: a segment event of the history belongs to no trace event");
            break;
        }
        st = viz_model_segment(s->m, s->marks[s->next_mark].ev, (double)e->addr, sign * (double)e->size);
    }
    vram_snapshot_free(snap);
    s->drained = hc;
    return st;
}

static vram_status add_mark(replay_state *s, int32_t ev, uint64_t lo, uint64_t hi) {
    if (s->n_marks == s->cap_marks) {
        size_t cap = s->cap_marks ? s->cap_marks * 2 : 256;
        mark *p = realloc(s->marks, cap * sizeof *p);
        if (!p) return vram_error(VRAM_ERR_OUT_OF_MEMORY, "viz: host out of memory");
        s->marks = p;
        s->cap_marks = cap;
    }
    s->marks[s->n_marks++] = (mark){ev, lo, hi};
    return VRAM_OK;
}

/* Replays event i; *expected: the history records the event makes by itself. */
static vram_status replay_one(replay_state *s, const vram_trace *t, const vram_trace_event *e, size_t i, void **ptrs,
                              int *expected) {
    viz_model *m = s->m;
    if (e->op == VRAM_TRACE_ALLOC) {
        size_t blk = 0;
        void *p = NULL;
        if (e->size) {
            vram_status st = vram_allocator_malloc(s->a, (size_t)e->size, e->stream, VRAM_TAG_OTHER, &p);
            if (st == VRAM_ERR_OUT_OF_MEMORY)
                return vram_error(st, "%s line %llu: out of memory replaying it (raise --capacity): %s", vram_trace_name(t),
                                  (unsigned long long)vram_trace_event_line(t, i), vram_allocator_oom_report(s->a));
            if (st != VRAM_OK) return st;
            if ((st = vram_allocator_block_info(s->a, p, &blk, NULL, NULL)) != VRAM_OK) return st;
        }
        ptrs[e->index] = p;
        uint32_t idx;
        vram_status st = viz_model_alloc(m, (double)e->size, (double)blk, (double)(uintptr_t)p, (int32_t)i, e->stream, 0, -1, &idx);
        if (st != VRAM_OK) return st;
        if (idx != e->index) return vram_error(VRAM_ERR_INTERNAL, "viz: allocation %u numbered %u", e->index, idx);
        *expected = e->size ? 1 : 0;
        return viz_model_event(m, idx, 0, -1);
    }
    void *p = ptrs[e->index];
    *expected = p ? 2 : 0;
    if (p) {
        vram_status st = vram_allocator_free(s->a, p);
        if (st != VRAM_OK) return st;
    }
    m->f_ev[e->index] = (int32_t)i;
    return viz_model_event(m, e->index, 1, -1);
}

static vram_status replay_all(replay_state *s, const vram_trace *t) {
    size_t n;
    const vram_trace_event *ev = vram_trace_events(t, &n);
    void **ptrs = calloc(vram_trace_num_allocs(t) + 1, sizeof *ptrs);
    if (!ptrs) return vram_error(VRAM_ERR_OUT_OF_MEMORY, "viz: host out of memory");
    vram_status st = VRAM_OK;
    int64_t reserved = 0;
    uint64_t hc = vram_allocator_history_count(s->a);
    for (size_t i = 0; i < n && st == VRAM_OK; i++) {
        int expected = 0;
        if ((st = replay_one(s, t, &ev[i], i, ptrs, &expected)) != VRAM_OK) break;
        uint64_t now = vram_allocator_history_count(s->a);
        if (now - hc != (uint64_t)expected) {
            vram_stats stats;
            vram_allocator_get_stats(s->a, &stats);
            if (stats.reserved_bytes[0].current != reserved) {
                reserved = stats.reserved_bytes[0].current;
                st = viz_model_reserved(s->m, (int32_t)i, (double)reserved);
            }
            if (st == VRAM_OK) st = add_mark(s, (int32_t)i, hc, now);
        }
        hc = now;
        if (st == VRAM_OK && hc - s->drained > VIZ_HISTORY_RING / 2) st = drain(s);
    }
    free(ptrs);
    return st == VRAM_OK ? drain(s) : st;
}

/* The steps: where each program ("# workload:") and each synchronised step ("# sync:") begins. */
static vram_status add_steps(const vram_trace *t, viz_model *m) {
    for (size_t h = 0; h < vram_trace_header_count(t); h++) {
        const char *key, *value;
        vram_trace_header_at(t, h, &key, &value);
        size_t at = vram_trace_header_event(t, h);
        if ((strcmp(key, "workload") && strcmp(key, "sync")) || at >= m->n_events) continue;
        char label[256];
        snprintf(label, sizeof label, "%s: %s", key, value);
        vram_status st = viz_model_step(m, (int32_t)at, label);
        if (st != VRAM_OK) return st;
    }
    return VRAM_OK;
}

vram_status viz_model_from_trace(const char *path, const viz_trace_options *o, viz_model *m) {
    vram_trace *t = NULL;
    vram_status st = vram_trace_load(path, &t);
    if (st != VRAM_OK) return st;
    if (vram_trace_num_events(t) == 0) {
        vram_trace_free(t);
        return vram_error(VRAM_ERR_PARSE, "%s: the trace has no events: nothing to draw", path);
    }
    if (vram_trace_num_events(t) >= (1u << 31)) {
        vram_trace_free(t);
        return vram_error(VRAM_ERR_INVALID_ARG, "%s: more than 2^31 events", path);
    }
    vram_replay_options ro = {o->device, o->capacity ? o->capacity : (80ull << 30), o->conf};
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    if ((st = vram_replay_open(&ro, 0, &dev, &a)) == VRAM_OK) st = vram_allocator_set_history(a, VIZ_HISTORY_RING);
    replay_state s = {a, m, NULL, 0, 0, 0, 0};
    m->kind = "memtrace";
    m->exact_history = 1;
    uint8_t other;
    if (st == VRAM_OK) st = viz_model_tag(m, vram_allocator_tag_name(a, VRAM_TAG_OTHER), &other);
    if (st == VRAM_OK) st = replay_all(&s, t);
    if (st == VRAM_OK) st = add_steps(t, m);
    if (st == VRAM_OK) {
        vram_stats stats;
        vram_allocator_get_stats(a, &stats);
        m->final_allocated = (double)stats.allocated_bytes[0].current;
        m->final_reserved = (double)stats.reserved_bytes[0].current;
        m->peak_allocated = (double)stats.allocated_bytes[0].peak;
        m->peak_reserved = (double)stats.reserved_bytes[0].peak;
        char conf[VRAM_ALLOC_CONF_FORMAT_MAX], note[VRAM_ALLOC_CONF_FORMAT_MAX + 128];
        vram_alloc_config_format(vram_allocator_config(a), conf, sizeof conf);
        snprintf(note, sizeof note, "replayed through vram's allocator on %s (%.0f GiB), VRAM_ALLOC_CONF=%s",
                 o->device ? o->device : "sim", (double)ro.capacity / (1ull << 30), conf);
        if (!(m->note = strdup(note))) st = vram_error(VRAM_ERR_OUT_OF_MEMORY, "viz: host out of memory");
    }
    if (st == VRAM_OK) st = viz_model_check(m);
    free(s.marks);
    if (a) vram_allocator_destroy(a);
    if (dev) vram_device_close(dev);
    vram_trace_free(t);
    return st;
}
