/* viz_snapshot.c — a snapshot JSON (vram's, or PyTorch's _snapshot() layout as
 * `python -m vram_torch viz` writes it from a pickle) turned into a viz_model (viz_model.h).
 *
 * The segments give the state at the snapshot's moment exactly: reserved memory is the sum of
 * their sizes, allocated memory the sum of their allocated_size, the live blocks those
 * `active_allocated`. The history (device_traces) is walked forward: an `alloc` opens an
 * allocation at its address, a `free_requested` (or PyTorch's older `free`) closes it, a free
 * of an address the history never allocated is an allocation from before the history began;
 * segment events are charged to the next alloc or free (the one that caused them). Blocks
 * still open at the end take their exact sizes from the segments; those freed within the
 * history only have the size their event carries (requested bytes), rounded up to 512, so the
 * allocated figures before the snapshot's moment are exact only where that is the block size
 * (exact_history = 0: the page says so). Everything is anchored at the end, where it is exact.
 */
#include <stdlib.h>
#include <string.h>

#include "viz_json.h"
#include "viz_model.h"

/* Open addressing from a key (an address, or a string's hash) to an index; 0 marks empty. */
typedef struct index_map {
    uint64_t *keys;
    int64_t *vals;
    size_t cap, n;
} index_map;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

static int map_grow(index_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *keys = calloc(cap, sizeof *keys);
    int64_t *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return 0;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = mix(m->keys[i]) & (cap - 1);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 1;
}

/* The slot of key (key + 1 is stored, so address 0 works). */
static size_t map_slot(const index_map *m, uint64_t key) {
    size_t j = mix(key + 1) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key + 1) j = (j + 1) & (m->cap - 1);
    return j;
}

static int64_t map_get(const index_map *m, uint64_t key) {
    if (!m->cap) return -1;
    size_t j = map_slot(m, key);
    return m->keys[j] ? m->vals[j] : -1;
}

static int map_put(index_map *m, uint64_t key, int64_t val) {
    if ((m->n + 1) * 2 > m->cap && !map_grow(m)) return 0;
    size_t j = map_slot(m, key);
    if (!m->keys[j]) m->n++;
    m->keys[j] = key + 1;
    m->vals[j] = val;
    return 1;
}

static void map_del(index_map *m, uint64_t key) { /* marks the value, keeping probe chains intact */
    if (!m->cap) return;
    size_t j = map_slot(m, key);
    if (m->keys[j]) m->vals[j] = -1;
}

static void map_free(index_map *m) {
    free(m->keys);
    free(m->vals);
}

typedef struct builder {
    const viz_json_doc *d;
    viz_model *m;
    index_map open;   /* address -> allocation open there */
    index_map stacks; /* string hash -> stack index (collisions checked by comparing) */
    char *text;       /* scratch for one stack's text */
    size_t cap_text;
    double pending_seg; /* reserved bytes of segment events not yet charged */
} builder;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The stack index of a "frames" array (-1 when absent or empty), its text interned. */
static vram_status stack_of(builder *b, const viz_json *frames, int32_t *out) {
    *out = -1;
    if (!frames || frames->type != VIZ_JSON_ARR || !frames->count) return VRAM_OK;
    size_t n = 0;
    for (long c = frames->first; c >= 0; c = b->d->nodes[c].next) {
        const viz_json *f = &b->d->nodes[c];
        const char *name = viz_json_str(b->d, f, "name", "?"), *file = viz_json_str(b->d, f, "filename", "?");
        size_t need = n + strlen(name) + strlen(file) + 48;
        if (need > b->cap_text) {
            char *t = realloc(b->text, need * 2);
            if (!t) return vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory");
            b->text = t;
            b->cap_text = need * 2;
        }
        n += (size_t)snprintf(b->text + n, b->cap_text - n, "%s%s (%s:%.0f)", n ? "\n" : "", name, file,
                              viz_json_num(b->d, f, "line", 0));
    }
    uint64_t h = hash_str(b->text);
    for (;; h++) { /* a collision moves on to the next key */
        int64_t i = map_get(&b->stacks, h);
        if (i < 0) break;
        if (!strcmp(b->m->stacks[i], b->text)) {
            *out = (int32_t)i;
            return VRAM_OK;
        }
    }
    vram_status st = viz_model_stack(b->m, b->text, out);
    if (st == VRAM_OK && !map_put(&b->stacks, h, *out)) st = vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory");
    return st;
}

/* A JSON number as an address or size: 0 when it is none (negative, too large, not a number). */
static uint64_t as_u64(double v) { return v >= 0 && v < 1.8e19 ? (uint64_t)v : 0; }

static uint16_t stream_of(double s) { return s >= 0 && s < 65535 ? (uint16_t)s : 65535; }

/* Segment events waiting for the alloc or free that caused them are charged to event `ev`. */
static vram_status charge_segments(builder *b, int32_t ev) {
    if (b->pending_seg == 0) return VRAM_OK;
    double now = (b->m->n_res ? b->m->res_val[b->m->n_res - 1] : 0) + b->pending_seg;
    b->pending_seg = 0;
    return viz_model_reserved(b->m, ev, now); /* reserved0 is added once all is known */
}

static vram_status history_event(builder *b, const viz_json *e, int32_t *seg_first) {
    viz_model *m = b->m;
    const char *action = viz_json_str(b->d, e, "action", "");
    double addr = viz_json_num(b->d, e, "addr", 0), size = viz_json_num(b->d, e, "size", 0), t = viz_json_num(b->d, e, "time_us", 0);
    int is_alloc = !strcmp(action, "alloc"), is_free = !strcmp(action, "free_requested") || !strcmp(action, "free");
    double seg = !strcmp(action, "segment_alloc") || !strcmp(action, "segment_map") ? size
               : !strcmp(action, "segment_free") || !strcmp(action, "segment_unmap") ? -size : 0;
    if (seg != 0) {
        b->pending_seg += seg;
        if (*seg_first < 0) *seg_first = (int32_t)m->n_seg;
        return viz_model_segment(m, (int32_t)m->n_events, addr, seg); /* the next event's */
    }
    if (!is_alloc && !is_free) return VRAM_OK;
    int32_t ev = (int32_t)m->n_events;
    uint32_t idx;
    vram_status st;
    int64_t open = map_get(&b->open, as_u64(addr));
    if (is_alloc || open < 0) { /* an allocation: made here, or (a free) made before the history */
        int32_t stack;
        uint8_t tag;
        if ((st = stack_of(b, viz_json_get(b->d, e, "frames"), &stack)) != VRAM_OK) return st;
        if ((st = viz_model_tag(m, viz_json_str(b->d, e, "tag", "other"), &tag)) != VRAM_OK) return st;
        double blk = size > 0 ? (double)((as_u64(size) + 511) / 512 * 512) : 512;
        if ((st = viz_model_alloc(m, size, blk, addr, is_alloc ? ev : -1, stream_of(viz_json_num(b->d, e, "stream", 0)),
                                  tag, stack, &idx)) != VRAM_OK)
            return st;
        if (!is_alloc) m->alloc0 += blk;
        else if (!map_put(&b->open, as_u64(addr), idx)) return vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory");
    } else idx = (uint32_t)open;
    if (is_free) {
        map_del(&b->open, as_u64(addr));
        m->f_ev[idx] = ev;
    }
    if ((st = viz_model_event(m, idx, is_free, t)) != VRAM_OK) return st;
    return charge_segments(b, ev);
}

/* The blocks live at the snapshot: open history allocations take their exact sizes; the others
 * were allocated before the history began. */
static vram_status final_blocks(builder *b, const viz_json *segments) {
    viz_model *m = b->m;
    for (long s = segments->first; s >= 0; s = b->d->nodes[s].next) {
        const viz_json *seg = &b->d->nodes[s], *blocks = viz_json_get(b->d, seg, "blocks");
        m->final_reserved += viz_json_num(b->d, seg, "total_size", 0);
        m->final_allocated += viz_json_num(b->d, seg, "allocated_size", 0);
        vram_status st = viz_model_segment(m, -1, viz_json_num(b->d, seg, "address", 0), viz_json_num(b->d, seg, "total_size", 0));
        for (long k = blocks && blocks->type == VIZ_JSON_ARR ? blocks->first : -1; k >= 0 && st == VRAM_OK; k = b->d->nodes[k].next) {
            const viz_json *blk = &b->d->nodes[k];
            if (strcmp(viz_json_str(b->d, blk, "state", ""), "active_allocated")) continue;
            double addr = viz_json_num(b->d, blk, "address", 0), size = viz_json_num(b->d, blk, "size", 0);
            double req = viz_json_num(b->d, blk, "requested_size", size);
            int64_t open = map_get(&b->open, as_u64(addr));
            if (open >= 0) {
                m->blk[open] = size;
                m->req[open] = req;
                map_del(&b->open, as_u64(addr));
                continue;
            }
            int32_t stack;
            uint8_t tag;
            uint32_t idx;
            if ((st = stack_of(b, viz_json_get(b->d, blk, "frames"), &stack)) != VRAM_OK) break;
            if ((st = viz_model_tag(m, viz_json_str(b->d, blk, "tag", "other"), &tag)) != VRAM_OK) break;
            st = viz_model_alloc(m, req, size, addr, -1, stream_of(viz_json_num(b->d, seg, "stream", 0)), tag, stack, &idx);
            m->alloc0 += size;
        }
        if (st != VRAM_OK) return st;
    }
    for (size_t j = 0; j < b->open.cap; j++)
        if (b->open.keys[j] && b->open.vals[j] >= 0)
            return vram_error(VRAM_ERR_PARSE, "%s: the history allocates at %#llx and never frees it, but the segments hold no "
                              "live block there", m->name, (unsigned long long)(b->open.keys[j] - 1));
    return VRAM_OK;
}

/* The device whose history is drawn: the first segment's (0 without segments). */
static const viz_json *device_history(const viz_json_doc *d, const viz_json *root, const viz_json *segments) {
    const viz_json *traces = viz_json_get(d, root, "device_traces");
    if (!traces || traces->type != VIZ_JSON_ARR) return NULL;
    double dev = segments->count ? viz_json_num(d, viz_json_node(d, segments->first), "device", 0) : 0;
    long c = traces->first;
    for (double i = 0; c >= 0 && i < dev; i++) c = d->nodes[c].next;
    const viz_json *h = viz_json_node(d, c);
    return h && h->type == VIZ_JSON_ARR ? h : NULL;
}

static vram_status build(builder *b, const viz_json *root) {
    viz_model *m = b->m;
    const viz_json *segments = viz_json_get(b->d, root, "segments");
    if (!segments || segments->type != VIZ_JSON_ARR)
        return vram_error(VRAM_ERR_PARSE, "%s: JSON, but not a memory snapshot (no \"segments\" list)", m->name);
    const viz_json *hist = device_history(b->d, root, segments);
    int32_t seg_first = -1; /* the first history segment event */
    vram_status st = VRAM_OK;
    for (long c = hist ? hist->first : -1; c >= 0 && st == VRAM_OK; c = b->d->nodes[c].next)
        st = history_event(b, &b->d->nodes[c], &seg_first);
    if (st == VRAM_OK && m->n_events == 0 && seg_first >= 0) m->n_seg = (size_t)seg_first; /* nothing to charge them to */
    if (st == VRAM_OK && m->n_events && b->pending_seg != 0) { /* after the last alloc or free: charged to it */
        for (size_t k = 0; k < m->n_seg; k++)
            if (m->seg_ev[k] == (int32_t)m->n_events) m->seg_ev[k] = (int32_t)m->n_events - 1;
        st = charge_segments(b, (int32_t)m->n_events - 1);
    }
    size_t n_hist_seg = seg_first < 0 || m->n_events == 0 ? 0 : m->n_seg - (size_t)seg_first;
    if (st == VRAM_OK) st = final_blocks(b, segments);
    /* The segments before the history: those at the end, less what the history mapped. */
    double history_delta = 0;
    for (size_t k = 0; k < n_hist_seg && st == VRAM_OK; k++) {
        size_t j = (size_t)seg_first + k;
        history_delta += m->seg_size[j];
        st = viz_model_segment(m, -1, m->seg_addr[j], -m->seg_size[j]);
    }
    m->reserved0 = m->final_reserved - history_delta;
    for (size_t k = 0; k < m->n_res; k++) m->res_val[k] += m->reserved0;
    m->peak_allocated = m->peak_reserved = 0; /* exact only at the end: not checked */
    return st;
}

vram_status viz_model_from_snapshot(const char *path, const char *text, size_t len, viz_model *m) {
    viz_json_doc d;
    vram_status st = viz_json_parse(text, len, path, &d);
    if (st != VRAM_OK) return st;
    builder b = {.d = &d, .m = m};
    m->kind = "snapshot";
    m->exact_history = 0;
    const viz_json *root = viz_json_node(&d, 0);
    if (root->type != VIZ_JSON_OBJ) st = vram_error(VRAM_ERR_PARSE, "%s: JSON, but not a memory snapshot (not an object)", path);
    else st = build(&b, root);
    const char *conf = viz_json_str(&d, viz_json_get(&d, root, "allocator_settings"), "VRAM_ALLOC_CONF", NULL);
    char note[1024];
    snprintf(note, sizeof note, "snapshot%s%s; %zu history events drawn (allocated memory before the snapshot's moment "
             "from their sizes rounded to 512 bytes; exact at its end)", conf ? ", VRAM_ALLOC_CONF=" : "", conf ? conf : "",
             m->n_events);
    if (st == VRAM_OK && !(m->note = strdup(note))) st = vram_error(VRAM_ERR_HOST_MEMORY, "host out of memory");
    if (st == VRAM_OK) st = viz_model_check(m);
    map_free(&b.open);
    map_free(&b.stacks);
    free(b.text);
    viz_json_free(&d);
    return st;
}
