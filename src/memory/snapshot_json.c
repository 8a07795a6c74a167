/* snapshot_json.c — a vram_snapshot written as JSON in torch.cuda.memory._snapshot()'s shape.
 *
 * The object has PyTorch's keys, so tools written for PyTorch snapshots (memory_viz, scripts
 * that walk "segments" and "device_traces") read it:
 *
 *   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
 *                  "requested_size", "stream", "segment_type": "small"|"large",
 *                  "segment_pool_id": [0, 0], "is_expandable", "frames": [],
 *                  "blocks": [{"address", "size", "requested_size", "state", "frames": [],
 *                              "tag", "graph_pool" (only where not 0)}]}],
 *    "device_traces": [[{"action", "addr" (or "device_free" for oom), "size", "stream",
 *                        "time_us", "frames": [], "tag", "context" (only where not 0)}]],
 *    "allocator_settings": {"VRAM_ALLOC_CONF": "..."},
 *    "tag_names": [...]}
 *
 * "tag" and "tag_names" are vram's additions (what each block is for), and so is "graph_pool": the
 * private pool of a CUDA graph that holds the block (its id; vram_torch numbers PyTorch's pool ids
 * in order of first use), written only on such blocks. PyTorch's segments belong to one pool
 * each; vram's pools share segments, so "segment_pool_id" stays [0, 0]. Segments are written
 * sorted by address, as PyTorch does. vram knows no stack frames, so "frames" is always []; an
 * event's "context" is the number its thread had set (vram_set_context), which vram_torch turns
 * into the event's Python frames.
 * Strings are written by vram_json_write_string (src/core/text.c); numbers are integers.
 */
#include "vram/snapshot.h"

#include <stdlib.h>
#include <string.h>

const char *vram_event_action_name(vram_event_action action) {
    switch (action) {
    case VRAM_EVENT_ALLOC: return "alloc";
    case VRAM_EVENT_FREE_REQUESTED: return "free_requested";
    case VRAM_EVENT_FREE_COMPLETED: return "free_completed";
    case VRAM_EVENT_SEGMENT_ALLOC: return "segment_alloc";
    case VRAM_EVENT_SEGMENT_FREE: return "segment_free";
    case VRAM_EVENT_SEGMENT_MAP: return "segment_map";
    case VRAM_EVENT_SEGMENT_UNMAP: return "segment_unmap";
    case VRAM_EVENT_OOM: return "oom";
    case VRAM_EVENT_EMPTY_CACHE: return "empty_cache";
    }
    return "unknown";
}

const char *vram_block_state_name(vram_block_state state) {
    switch (state) {
    case VRAM_BLOCK_ACTIVE_ALLOCATED: return "active_allocated";
    case VRAM_BLOCK_ACTIVE_PENDING_FREE: return "active_pending_free";
    case VRAM_BLOCK_INACTIVE: return "inactive";
    }
    return "unknown";
}

static const char *tag_name(const vram_snapshot *s, vram_tag tag, char *buf, size_t cap) {
    if (tag < VRAM_TAG_MAX && s->tag_names[tag][0]) return s->tag_names[tag];
    snprintf(buf, cap, "tag %u", tag);
    return buf;
}

static int cmp_segment_addr(const void *a, const void *b) {
    const vram_snapshot_segment *x = *(const vram_snapshot_segment *const *)a;
    const vram_snapshot_segment *y = *(const vram_snapshot_segment *const *)b;
    return x->address < y->address ? -1 : x->address > y->address;
}

vram_status vram_snapshot_write_json(const vram_snapshot *s, FILE *out) {
    if (!s || !out) return vram_error(VRAM_ERR_INVALID_ARG, "snapshot: null argument");
    const vram_snapshot_segment **order = NULL;
    if (s->num_segments) {
        order = malloc(s->num_segments * sizeof *order);
        if (!order) return vram_error(VRAM_ERR_HOST_MEMORY, "snapshot: host out of memory");
        for (size_t i = 0; i < s->num_segments; i++) order[i] = &s->segments[i];
        qsort(order, s->num_segments, sizeof *order, cmp_segment_addr);
    }
    char tb[32];
    fputs("{\"segments\": [", out);
    for (size_t i = 0; i < s->num_segments; i++) {
        const vram_snapshot_segment *g = order[i];
        if (g->first_block > s->num_blocks || g->num_blocks > s->num_blocks - g->first_block) {
            free(order);
            return vram_error(VRAM_ERR_INVALID_ARG, "snapshot: segment %zu refers to blocks %zu..%zu of %zu", i,
                              g->first_block, g->first_block + g->num_blocks, s->num_blocks);
        }
        fprintf(out,
                "%s\n  {\"device\": %d, \"address\": %llu, \"total_size\": %llu, \"allocated_size\": %llu, "
                "\"active_size\": %llu, \"requested_size\": %llu, \"stream\": %llu, \"segment_type\": \"%s\", "
                "\"segment_pool_id\": [0, 0], \"is_expandable\": %s, \"frames\": [], \"blocks\": [",
                i ? "," : "", s->device_index, (unsigned long long)g->address, (unsigned long long)g->total_size,
                (unsigned long long)g->allocated_size, (unsigned long long)g->active_size,
                (unsigned long long)g->requested_size, (unsigned long long)g->stream,
                g->pool == VRAM_POOL_SMALL ? "small" : "large", g->is_expandable ? "true" : "false");
        for (size_t b = 0; b < g->num_blocks; b++) {
            const vram_snapshot_block *k = &s->blocks[g->first_block + b];
            fprintf(out, "%s\n    {\"address\": %llu, \"size\": %llu, \"requested_size\": %llu, \"state\": \"%s\", "
                         "\"frames\": [], \"tag\": ",
                    b ? "," : "", (unsigned long long)k->address, (unsigned long long)k->size,
                    (unsigned long long)k->requested_size, vram_block_state_name(k->state));
            vram_json_write_string(out, tag_name(s, k->tag, tb, sizeof tb), 32);
            if (k->graph_pool) fprintf(out, ", \"graph_pool\": %llu", (unsigned long long)k->graph_pool);
            fputc('}', out);
        }
        fputs("]}", out);
    }
    free(order);
    fputs("],\n \"device_traces\": [[", out);
    for (size_t i = 0; i < s->num_events; i++) {
        const vram_event *e = &s->events[i];
        fprintf(out, "%s\n  {\"action\": \"%s\", \"%s\": %llu, \"size\": %llu, \"stream\": %llu, \"time_us\": %lld, "
                     "\"frames\": [], \"tag\": ",
                i ? "," : "", vram_event_action_name(e->action), e->action == VRAM_EVENT_OOM ? "device_free" : "addr",
                (unsigned long long)e->addr, (unsigned long long)e->size, (unsigned long long)e->stream,
                (long long)e->time_us);
        vram_json_write_string(out, tag_name(s, e->tag, tb, sizeof tb), 32);
        if (e->context) fprintf(out, ", \"context\": %u", (unsigned)e->context);
        fputc('}', out);
    }
    fputs("]],\n \"allocator_settings\": {\"VRAM_ALLOC_CONF\": ", out);
    vram_json_write_string(out, s->settings, sizeof s->settings);
    fputs("},\n \"tag_names\": [", out);
    /* Built-in tags always; user tags while their names are set. */
    int first = 1;
    for (int t = 0; t < VRAM_TAG_MAX; t++) {
        if (t >= VRAM_TAG_BUILTIN_COUNT && !s->tag_names[t][0]) break;
        if (!first) fputs(", ", out);
        first = 0;
        vram_json_write_string(out, tag_name(s, (vram_tag)t, tb, sizeof tb), 32);
    }
    fputs("]}\n", out);
    if (ferror(out)) return vram_error(VRAM_ERR_IO, "snapshot: write failed");
    return VRAM_OK;
}
