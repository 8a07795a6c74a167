/* trace.c — reading memtrace v1 files into a flat, validated array of events.
 *
 * Loading is two steps. Reading (trace_read.c) puts the whole text in one buffer.
 * Parsing walks the buffer once, a line at a time (memchr finds the line end, fields are
 * scanned by hand, never through sscanf/strtoull, which would dominate the time), and checks
 * every record as it goes:
 *
 *   - ids map to dense indices through a direct array for ids below a bound proportional to
 *     the line count (real traces number their allocations 0, 1, 2, ..., so this is a
 *     sequential, cache-friendly walk) and an open-addressing hash table (linear probing,
 *     Fibonacci hashing) for any other id; both remember freed ids, so "free of unknown id",
 *     "free of an already freed id" and "id allocated twice" are each one lookup;
 *   - numbers are unsigned decimals that must fit (sizes below 2^63, stream below 65536);
 *   - a record has exactly its fields; anything that is not a record, a '#' line or a blank
 *     line is an error, and so is a last line with no newline (a truncated file).
 *
 * The first problem ends the load with VRAM_ERR_PARSE and "NAME line N: what was wrong".
 * The events come out with dense allocation indices, so a replay keeps its pointers in a
 * plain array; the live-byte peak is computed on the way, as a check against the header.
 */
#include "trace_read.h"
#include "vram/trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct trace_header_entry {
    char *key;
    char *value;
    size_t event; /* the events before its line (a "# workload: NAME" line marks where one starts) */
} trace_header_entry;

struct vram_trace {
    vram_trace_event *events;
    uint32_t *lines; /* source line of each event */
    size_t num_events, cap_events;
    uint64_t *ids; /* original id of each allocation index */
    size_t num_allocs, cap_allocs, num_frees;
    uint64_t peak_live_bytes, peak_live_allocs;
    size_t peak_live_event;
    uint32_t max_stream;
    uint64_t num_lines;
    char *name;
    trace_header_entry *header;
    size_t num_header, cap_header;
    double read_seconds, parse_seconds;
};

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- id table: id -> dense index; the per-index `freed` flags live in the parser ---------- */

#define ID_EMPTY UINT32_MAX

typedef struct id_table {
    uint64_t *keys;
    uint32_t *vals;
    size_t mask; /* capacity - 1 (capacity is a power of two) */
    size_t count;
    unsigned shift; /* 64 - log2(capacity) */
} id_table;

static int id_table_init(id_table *t, size_t capacity) {
    size_t cap = 1024;
    unsigned bits = 10;
    while (cap < capacity) {
        cap <<= 1;
        bits++;
    }
    t->keys = malloc(cap * sizeof *t->keys);
    t->vals = malloc(cap * sizeof *t->vals);
    if (!t->keys || !t->vals) {
        free(t->keys);
        free(t->vals);
        return -1;
    }
    memset(t->vals, 0xff, cap * sizeof *t->vals);
    t->mask = cap - 1;
    t->count = 0;
    t->shift = 64 - bits;
    return 0;
}

static inline size_t id_hash(const id_table *t, uint64_t id) {
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> t->shift);
}

/* Returns the slot holding `id`, or the empty slot where it would go. */
static inline size_t id_table_find(const id_table *t, uint64_t id) {
    size_t i = id_hash(t, id);
    while (t->vals[i] != ID_EMPTY && t->keys[i] != id) i = (i + 1) & t->mask;
    return i;
}

static int id_table_grow(id_table *t) {
    id_table bigger;
    if (id_table_init(&bigger, (t->mask + 1) * 2) != 0) return -1;
    for (size_t i = 0; i <= t->mask; i++) {
        if (t->vals[i] == ID_EMPTY) continue;
        size_t j = id_table_find(&bigger, t->keys[i]);
        bigger.keys[j] = t->keys[i];
        bigger.vals[j] = t->vals[i];
    }
    bigger.count = t->count;
    free(t->keys);
    free(t->vals);
    *t = bigger;
    return 0;
}

static void id_table_free(id_table *t) {
    free(t->keys);
    free(t->vals);
}

/* ---- the parser ----------------------------------------------------------------------------- */

/* What the parser remembers of each allocation index (freed with the parser). */
typedef struct alloc_info {
    uint64_t size;
    uint32_t line;
    uint16_t stream;
    uint8_t freed;
} alloc_info;

typedef struct parser {
    vram_trace *t;
    uint32_t *direct;  /* ids below direct_cap: index + 1, 0 = never allocated */
    uint64_t direct_cap;
    id_table ids;      /* every other id */
    alloc_info *info; /* per allocation index */
    uint64_t live_bytes, live_allocs;
    uint64_t line;    /* current line number, 1-based */
} parser;

static inline uint32_t id_lookup(const parser *ps, uint64_t id) {
    if (id < ps->direct_cap) return ps->direct[id] - 1; /* 0 - 1 == ID_EMPTY */
    return ps->ids.vals[id_table_find(&ps->ids, id)];
}

static inline int id_insert(parser *ps, uint64_t id, uint32_t index) {
    if (id < ps->direct_cap) {
        ps->direct[id] = index + 1;
        return 0;
    }
    size_t slot = id_table_find(&ps->ids, id);
    ps->ids.keys[slot] = id;
    ps->ids.vals[slot] = index;
    if (++ps->ids.count * 2 > ps->ids.mask + 1) return id_table_grow(&ps->ids);
    return 0;
}


/* Shows a field or line in an error message: at most 40 bytes, non-printables as '?'. */
static const char *quote(const char *p, const char *end, char *buf, size_t cap) {
    size_t n = (size_t)(end - p);
    size_t limit = cap - 4;
    size_t k = 0;
    for (; k < n && k < limit; k++) {
        unsigned char c = (unsigned char)p[k];
        buf[k] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (n > limit) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

/* Whether a line holds bytes no text has: NUL and the control characters other than tab. */
static int looks_binary(const char *p, const char *end) {
    for (; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c < 0x20 && c != '\t') || c == 0x7f) return 1;
    }
    return 0;
}

static vram_status perr(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static vram_status perr(parser *ps, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vram_error(VRAM_ERR_PARSE, "%s line %llu: %s", ps->t->name, (unsigned long long)ps->line, msg);
}

/* Reads the next field of a record as an unsigned decimal below `limit`. `*p` moves past it.
 * Fails naming `what` when the field is missing, not a number, negative or too large. This is
 * the careful version, used when the fast scan below meets anything unusual. */
__attribute__((noinline)) static vram_status parse_field_slow(parser *ps, const char **p, const char *end, uint64_t limit,
                                      const char *what, const char *record, uint64_t *out) {
    const char *s = *p;
    while (s < end && vram_trace_is_blank(*s)) s++;
    if (s == end) return perr(ps, "'%s' record is missing its %s field", record, what);
    const char *tok = s;
    uint64_t v = 0;
    while (s < end && (unsigned)(*s - '0') < 10) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (limit - d) / 10) {
            while (s < end && !vram_trace_is_blank(*s)) s++;
            char q[48];
            return perr(ps, "%s '%s' is too large (limit %llu)", what, quote(tok, s, q, sizeof q),
                        (unsigned long long)(limit - 1));
        }
        v = v * 10 + d;
        s++;
    }
    if (s == tok || (s < end && !vram_trace_is_blank(*s))) {
        while (s < end && !vram_trace_is_blank(*s)) s++;
        char q[48];
        quote(tok, s, q, sizeof q);
        if (*tok == '-') return perr(ps, "%s '%s' is negative", what, q);
        return perr(ps, "%s '%s' is not a decimal number", what, q);
    }
    if (v >= limit) {
        char q[48];
        return perr(ps, "%s '%s' is too large (limit %llu)", what, quote(tok, s, q, sizeof q),
                    (unsigned long long)(limit - 1));
    }
    *p = s;
    *out = v;
    return VRAM_OK;
}

/* The common case, inlined: up to 18 digits (so no overflow check per digit) followed by a
 * blank or the end of the line. Anything else goes to parse_field_slow, which either accepts
 * it (a long number that still fits) or says precisely what is wrong. */
static inline vram_status parse_field(parser *ps, const char **p, const char *end, uint64_t limit,
                                      const char *what, const char *record, uint64_t *out) {
    const char *s = *p;
    while (s < end && vram_trace_is_blank(*s)) s++;
    const char *tok = s;
    uint64_t v = 0;
    while (s < end && (unsigned)(*s - '0') < 10) {
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s == tok || s - tok > 18 || (s < end && !vram_trace_is_blank(*s)) || v >= limit)
        return parse_field_slow(ps, p, end, limit, what, record, out);
    *p = s;
    *out = v;
    return VRAM_OK;
}

static vram_status expect_end(parser *ps, const char *p, const char *end, const char *record) {
    while (p < end && vram_trace_is_blank(*p)) p++;
    if (p != end) {
        char q[48];
        return perr(ps, "extra field '%s' after a complete '%s' record", quote(p, end, q, sizeof q), record);
    }
    return VRAM_OK;
}

static int grow_events(vram_trace *t) {
    size_t cap = t->cap_events ? t->cap_events * 2 : 4096;
    vram_trace_event *e = realloc(t->events, cap * sizeof *e);
    if (!e) return -1;
    t->events = e;
    uint32_t *l = realloc(t->lines, cap * sizeof *l);
    if (!l) return -1;
    t->lines = l;
    t->cap_events = cap;
    return 0;
}

static int grow_allocs(parser *ps) {
    vram_trace *t = ps->t;
    size_t cap = t->cap_allocs ? t->cap_allocs * 2 : 4096;
    uint64_t *ids = realloc(t->ids, cap * sizeof *ids);
    if (!ids) return -1;
    t->ids = ids;
    alloc_info *info = realloc(ps->info, cap * sizeof *info);
    if (!info) return -1;
    ps->info = info;
    t->cap_allocs = cap;
    return 0;
}

static vram_status header_add(vram_trace *t, const char *key, size_t klen, const char *val, size_t vlen) {
    if (t->num_header == t->cap_header) {
        size_t cap = t->cap_header ? t->cap_header * 2 : 8;
        trace_header_entry *h = realloc(t->header, cap * sizeof *h);
        if (!h) return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
        t->header = h;
        t->cap_header = cap;
    }
    char *k = strndup(key, klen);
    char *v = strndup(val, vlen);
    if (!k || !v) {
        free(k);
        free(v);
        return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
    }
    t->header[t->num_header].key = k;
    t->header[t->num_header].value = v;
    t->header[t->num_header].event = t->num_events;
    t->num_header++;
    return VRAM_OK;
}

/* A '#' line: "# key: value" is kept in the header; any other comment is ignored. */
static vram_status parse_comment(parser *ps, const char *p, const char *end) {
    p++; /* '#' */
    while (p < end && vram_trace_is_blank(*p)) p++;
    const char *key = p;
    while (p < end && *p != ':' && !vram_trace_is_blank(*p)) p++;
    if (p == key || p == end || *p != ':') return VRAM_OK;
    size_t klen = (size_t)(p - key);
    p++;
    while (p < end && vram_trace_is_blank(*p)) p++;
    const char *val = p;
    const char *vend = end;
    while (vend > val && vram_trace_is_blank(vend[-1])) vend--;
    if (memchr(key, '\0', klen) || memchr(val, '\0', (size_t)(vend - val)))
        return perr(ps, "header line contains a NUL byte");
    return header_add(ps->t, key, klen, val, (size_t)(vend - val));
}

static vram_status parse_alloc(parser *ps, const char *p, const char *end) {
    vram_trace *t = ps->t;
    uint64_t id = 0, size = 0, stream = 0;
    vram_status st;
    if ((st = parse_field(ps, &p, end, UINT64_MAX, "id", "a", &id)) != VRAM_OK) return st;
    if ((st = parse_field(ps, &p, end, (uint64_t)INT64_MAX + 1, "size", "a", &size)) != VRAM_OK) return st; /* below 2^63 */
    if ((st = parse_field(ps, &p, end, 65536, "stream", "a", &stream)) != VRAM_OK) return st;
    if ((st = expect_end(ps, p, end, "a")) != VRAM_OK) return st;

    uint32_t prev_index = id_lookup(ps, id);
    if (prev_index != ID_EMPTY) {
        const alloc_info *prev = &ps->info[prev_index];
        return perr(ps, "id %llu allocated twice (first on line %llu, %s)", (unsigned long long)id,
                    (unsigned long long)prev->line, prev->freed ? "since freed; ids are never reused" : "still live");
    }
    if (t->num_allocs >= UINT32_MAX - 1) return perr(ps, "too many allocations (limit %u)", UINT32_MAX - 1);
    if (t->num_allocs == t->cap_allocs && grow_allocs(ps) != 0)
        return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
    if (ps->live_bytes > (uint64_t)INT64_MAX - size)
        return perr(ps, "live bytes exceed 2^63 (a size is implausibly large)");

    uint32_t index = (uint32_t)t->num_allocs++;
    t->ids[index] = id;
    ps->info[index] = (alloc_info){.size = size, .line = (uint32_t)ps->line, .stream = (uint16_t)stream};
    if (id_insert(ps, id, index) != 0) return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");

    if (t->num_events == t->cap_events && grow_events(t) != 0)
        return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
    vram_trace_event *e = &t->events[t->num_events];
    e->size = size;
    e->index = index;
    e->stream = (uint16_t)stream;
    e->op = VRAM_TRACE_ALLOC;
    e->reserved_ = 0;
    t->lines[t->num_events] = (uint32_t)ps->line;
    if (stream > t->max_stream) t->max_stream = (uint32_t)stream;

    ps->live_bytes += size;
    ps->live_allocs++;
    if (ps->live_bytes > t->peak_live_bytes || t->num_allocs == 1) {
        t->peak_live_bytes = ps->live_bytes;
        t->peak_live_event = t->num_events;
    }
    if (ps->live_allocs > t->peak_live_allocs) t->peak_live_allocs = ps->live_allocs;
    t->num_events++;
    return VRAM_OK;
}

static vram_status parse_free(parser *ps, const char *p, const char *end) {
    vram_trace *t = ps->t;
    uint64_t id = 0;
    vram_status st;
    if ((st = parse_field(ps, &p, end, UINT64_MAX, "id", "f", &id)) != VRAM_OK) return st;
    if ((st = expect_end(ps, p, end, "f")) != VRAM_OK) return st;

    uint32_t index = id_lookup(ps, id);
    if (index == ID_EMPTY) return perr(ps, "free of unknown id %llu (never allocated)", (unsigned long long)id);
    alloc_info *info = &ps->info[index];
    if (info->freed)
        return perr(ps, "free of id %llu, which is already freed (allocated on line %llu)", (unsigned long long)id,
                    (unsigned long long)info->line);
    info->freed = 1;

    if (t->num_events == t->cap_events && grow_events(t) != 0)
        return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
    /* The allocation's size and stream are carried onto the free, so a replay or a planner
     * never has to look back. */
    vram_trace_event *e = &t->events[t->num_events];
    e->size = info->size;
    e->index = index;
    e->stream = info->stream;
    e->op = VRAM_TRACE_FREE;
    e->reserved_ = 0;
    t->lines[t->num_events] = (uint32_t)ps->line;
    t->num_events++;
    t->num_frees++;
    ps->live_allocs--;
    ps->live_bytes -= info->size;
    return VRAM_OK;
}

vram_status vram_trace_parse(const char *text, size_t len, const char *name, vram_trace **out) {
    if (!out || (!text && len)) return vram_error(VRAM_ERR_INVALID_ARG, "trace: null argument");
    *out = NULL;
    double t0 = now_seconds();
    vram_trace *t = calloc(1, sizeof *t);
    if (!t) return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
    t->name = strdup(name ? name : "trace");
    parser ps = {.t = t};
    /* Size the arrays once: the line count bounds the events, and real traces allocate in
     * about half of them (the allocation arrays and the id table still grow if needed).
     * Counting newlines with memchr costs a small fraction of the parse and saves the
     * copies and page faults of growing. */
    size_t lines = 1;
    for (const char *q = text, *qend = text + len; q < qend; lines++) {
        q = memchr(q, '\n', (size_t)(qend - q));
        if (!q) break;
        q++;
    }
    size_t allocs_guess = lines / 2 + 16;
    /* calloc of this size maps zero pages lazily: only the part the ids touch costs. */
    ps.direct_cap = (uint64_t)lines * 2 + 1024;
    ps.direct = calloc((size_t)ps.direct_cap, sizeof *ps.direct);
    if (!t->name || !ps.direct || id_table_init(&ps.ids, 1024) != 0) {
        free(ps.direct);
        vram_trace_free(t);
        free(ps.info);
        return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
    }
    t->events = malloc(lines * sizeof *t->events);
    t->lines = malloc(lines * sizeof *t->lines);
    t->ids = malloc(allocs_guess * sizeof *t->ids);
    ps.info = malloc(allocs_guess * sizeof *ps.info);
    if (!t->events || !t->lines || !t->ids || !ps.info) {
        free(ps.direct);
        id_table_free(&ps.ids);
        free(ps.info);
        vram_trace_free(t);
        return vram_error(VRAM_ERR_HOST_MEMORY, "trace: host out of memory");
    }
    t->cap_events = lines;
    t->cap_allocs = allocs_guess;
    vram_status st = VRAM_OK;

    const char *p = text, *end = text + len;
    int seen_magic = 0;
    while (p < end) {
        if (++ps.line > UINT32_MAX) {
            st = perr(&ps, "too many lines (limit %u)", UINT32_MAX);
            break;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        if ((size_t)(eol - p) > VRAM_TRACE_MAX_LINE) {
            st = perr(&ps, "a line of more than %u bytes (records and header lines are short: this is no trace, "
                           "or a damaged one)", VRAM_TRACE_MAX_LINE);
            break;
        }
        const char *s = p;
        while (s < eol && vram_trace_is_blank(*s)) s++;
        if (s == eol) { /* blank line */
            p = nl ? nl + 1 : end;
            continue;
        }
        if (!nl) {
            char q[48];
            st = perr(&ps, "truncated line '%s' (the file ends without a newline)", quote(s, eol, q, sizeof q));
            break;
        }
        const char *e = eol;
        while (e > s && vram_trace_is_blank(e[-1])) e--;
        if (!seen_magic) {
            static const char magic[] = "# memtrace v1";
            if ((size_t)(e - s) != sizeof magic - 1 || memcmp(s, magic, sizeof magic - 1) != 0) {
                char q[48];
                if (looks_binary(s, e)) /* (a binary file's bytes, even as '?', are no help to read) */
                    st = perr(&ps, "bad header (binary data, not text): the first line must be '# memtrace v1' "
                                   "(a trace is text, plain or gzip-compressed)");
                else
                    st = perr(&ps, "bad header '%s': the first line must be '# memtrace v1'", quote(s, e, q, sizeof q));
                break;
            }
            seen_magic = 1;
        } else if (s + 1 < e && (s[0] == 'a' || s[0] == 'f') && vram_trace_is_blank(s[1])) {
            st = s[0] == 'a' ? parse_alloc(&ps, s + 1, e) : parse_free(&ps, s + 1, e);
            if (st != VRAM_OK) break;
        } else if (s[0] == '#') {
            if ((st = parse_comment(&ps, s, e)) != VRAM_OK) break;
        } else if ((s[0] == 'a' || s[0] == 'f') && s + 1 == e) {
            st = perr(&ps, "'%c' record has no fields (expected %s)", s[0], s[0] == 'a' ? "a ID SIZE STREAM" : "f ID");
            break;
        } else {
            const char *w = s;
            while (w < e && !vram_trace_is_blank(*w)) w++;
            char q[48];
            st = perr(&ps, "unknown record '%s' (expected 'a ID SIZE STREAM', 'f ID', '#' or a blank line)",
                      quote(s, w, q, sizeof q));
            break;
        }
        p = nl + 1;
    }
    if (st == VRAM_OK && !seen_magic)
        st = vram_error(VRAM_ERR_PARSE, "%s line %llu: bad header: the trace is empty (expected '# memtrace v1')",
                        t->name, (unsigned long long)(ps.line ? ps.line : 1));
    t->num_lines = ps.line;
    id_table_free(&ps.ids);
    free(ps.direct);
    free(ps.info);
    if (st != VRAM_OK) {
        vram_trace_free(t);
        return st;
    }
    t->parse_seconds = now_seconds() - t0;
    *out = t;
    return VRAM_OK;
}

vram_status vram_trace_load(const char *path, vram_trace **out) {
    if (!path || !out) return vram_error(VRAM_ERR_INVALID_ARG, "trace: null argument");
    *out = NULL;
    double t0 = now_seconds();
    char *text = NULL;
    size_t len = 0;
    const char *name = path;
    vram_status st = vram_trace_read_text(path, &text, &len, &name);
    if (st != VRAM_OK) return st;
    double read_s = now_seconds() - t0;
    vram_trace *t;
    st = vram_trace_parse(text, len, name, &t);
    free(text);
    if (st != VRAM_OK) return st;
    t->read_seconds = read_s;
    *out = t;
    return VRAM_OK;
}

void vram_trace_free(vram_trace *t) {
    if (!t) return;
    for (size_t i = 0; i < t->num_header; i++) {
        free(t->header[i].key);
        free(t->header[i].value);
    }
    free(t->header);
    free(t->events);
    free(t->lines);
    free(t->ids);
    free(t->name);
    free(t);
}

/* ---- accessors ------------------------------------------------------------------------------ */

const vram_trace_event *vram_trace_events(const vram_trace *t, size_t *count) {
    if (count) *count = t->num_events;
    return t->events;
}
size_t vram_trace_num_events(const vram_trace *t) { return t->num_events; }
size_t vram_trace_num_allocs(const vram_trace *t) { return t->num_allocs; }
size_t vram_trace_num_frees(const vram_trace *t) { return t->num_frees; }
uint64_t vram_trace_event_line(const vram_trace *t, size_t i) { return i < t->num_events ? t->lines[i] : 0; }
uint64_t vram_trace_alloc_id(const vram_trace *t, uint32_t index) { return index < t->num_allocs ? t->ids[index] : 0; }
uint64_t vram_trace_peak_live_bytes(const vram_trace *t) { return t->peak_live_bytes; }
uint64_t vram_trace_peak_live_allocs(const vram_trace *t) { return t->peak_live_allocs; }
size_t vram_trace_peak_live_event(const vram_trace *t) { return t->peak_live_event; }
uint32_t vram_trace_max_stream(const vram_trace *t) { return t->max_stream; }
const char *vram_trace_name(const vram_trace *t) { return t->name; }
size_t vram_trace_header_count(const vram_trace *t) { return t->num_header; }
double vram_trace_read_seconds(const vram_trace *t) { return t->read_seconds; }
double vram_trace_parse_seconds(const vram_trace *t) { return t->parse_seconds; }
uint64_t vram_trace_num_lines(const vram_trace *t) { return t->num_lines; }

void vram_trace_header_at(const vram_trace *t, size_t i, const char **key, const char **value) {
    if (i >= t->num_header) {
        if (key) *key = NULL;
        if (value) *value = NULL;
        return;
    }
    if (key) *key = t->header[i].key;
    if (value) *value = t->header[i].value;
}

size_t vram_trace_header_event(const vram_trace *t, size_t i) { return i < t->num_header ? t->header[i].event : 0; }

size_t vram_trace_workloads(const vram_trace *t, vram_trace_workload *out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < t->num_header; i++) {
        if (strcmp(t->header[i].key, "workload") != 0) continue;
        if (n && n - 1 < max) out[n - 1].end = t->header[i].event;
        if (n < max) out[n] = (vram_trace_workload){t->header[i].value, t->header[i].event, t->num_events};
        n++;
    }
    return n;
}

const char *vram_trace_header(const vram_trace *t, const char *key) {
    for (size_t i = 0; i < t->num_header; i++)
        if (strcmp(t->header[i].key, key) == 0) return t->header[i].value;
    return NULL;
}

vram_status vram_trace_header_u64(const vram_trace *t, const char *key, uint64_t *out) {
    const char *v = vram_trace_header(t, key);
    if (!v) return vram_error(VRAM_ERR_NOT_FOUND, "%s: header has no '%s'", t->name, key);
    uint64_t x = 0;
    const char *p = v;
    if (!*p) return vram_error(VRAM_ERR_PARSE, "%s: header '%s' is empty", t->name, key);
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || x > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return vram_error(VRAM_ERR_PARSE, "%s: header '%s: %s' is not an unsigned integer", t->name, key, v);
        x = x * 10 + (uint64_t)(*p - '0');
    }
    *out = x;
    return VRAM_OK;
}
