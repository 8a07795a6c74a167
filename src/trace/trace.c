/* trace.c — reading memtrace v1 files into a flat, validated array of events.
 *
 * Loading is two steps. Reading puts the whole text in one buffer (plain files directly;
 * gzip through zlib, which also reads plain text transparently, or through the built-in
 * decoder of gunzip.c in a build without zlib; "-" is standard input).
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
#include "../core/file_open.h"
#include "vram/trace.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef VRAM_HAVE_ZLIB
#include <zlib.h>
#else
#include "gunzip.h"
#endif

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

static inline int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

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
    while (s < end && is_blank(*s)) s++;
    if (s == end) return perr(ps, "'%s' record is missing its %s field", record, what);
    const char *tok = s;
    uint64_t v = 0;
    while (s < end && (unsigned)(*s - '0') < 10) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (limit - d) / 10) {
            while (s < end && !is_blank(*s)) s++;
            char q[48];
            return perr(ps, "%s '%s' is too large (limit %llu)", what, quote(tok, s, q, sizeof q),
                        (unsigned long long)(limit - 1));
        }
        v = v * 10 + d;
        s++;
    }
    if (s == tok || (s < end && !is_blank(*s))) {
        while (s < end && !is_blank(*s)) s++;
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
    while (s < end && is_blank(*s)) s++;
    const char *tok = s;
    uint64_t v = 0;
    while (s < end && (unsigned)(*s - '0') < 10) {
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s == tok || s - tok > 18 || (s < end && !is_blank(*s)) || v >= limit)
        return parse_field_slow(ps, p, end, limit, what, record, out);
    *p = s;
    *out = v;
    return VRAM_OK;
}

static vram_status expect_end(parser *ps, const char *p, const char *end, const char *record) {
    while (p < end && is_blank(*p)) p++;
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
    while (p < end && is_blank(*p)) p++;
    const char *key = p;
    while (p < end && *p != ':' && !is_blank(*p)) p++;
    if (p == key || p == end || *p != ':') return VRAM_OK;
    size_t klen = (size_t)(p - key);
    p++;
    while (p < end && is_blank(*p)) p++;
    const char *val = p;
    const char *vend = end;
    while (vend > val && is_blank(vend[-1])) vend--;
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
        while (s < eol && is_blank(*s)) s++;
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
        while (e > s && is_blank(e[-1])) e--;
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
        } else if (s + 1 < e && (s[0] == 'a' || s[0] == 'f') && is_blank(s[1])) {
            st = s[0] == 'a' ? parse_alloc(&ps, s + 1, e) : parse_free(&ps, s + 1, e);
            if (st != VRAM_OK) break;
        } else if (s[0] == '#') {
            if ((st = parse_comment(&ps, s, e)) != VRAM_OK) break;
        } else if ((s[0] == 'a' || s[0] == 'f') && s + 1 == e) {
            st = perr(&ps, "'%c' record has no fields (expected %s)", s[0], s[0] == 'a' ? "a ID SIZE STREAM" : "f ID");
            break;
        } else {
            const char *w = s;
            while (w < e && !is_blank(*w)) w++;
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

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

static int buf_reserve(text_buf *b, size_t extra) {
    if (b->cap - b->len >= extra) return 0;
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d) return -1;
    b->data = d;
    b->cap = cap;
    return 0;
}

/* Whether text that starts so can be a trace: 1 yes, 0 cannot tell yet, -1 no (a first line
 * other than '# memtrace v1', or a megabyte of blanks). The readers ask after every read and,
 * on -1, stop and keep only up to the end of that first line (keep_first_line), whose header
 * error the parser then reports: input that is no trace (/dev/zero, a binary) is not read whole. */
static size_t first_non_blank(const char *d, size_t n) {
    size_t i = 0;
    while (i < n && (is_blank(d[i]) || d[i] == '\n')) i++;
    return i;
}

static int trace_start(const char *d, size_t n) {
    static const char magic[] = "# memtrace v1";
    size_t i = first_non_blank(d, n);
    if (i == n) return n > (1u << 20) ? -1 : 0;
    size_t m = n - i < sizeof magic - 1 ? n - i : sizeof magic - 1;
    if (memcmp(d + i, magic, m) != 0) return -1;
    return m == sizeof magic - 1 ? 1 : 0;
}

/* Cuts b after its first non-blank line, ending it with a newline if the read stopped inside it. */
static void keep_first_line(text_buf *b) {
    size_t i = first_non_blank(b->data, b->len);
    const char *nl = i < b->len ? memchr(b->data + i, '\n', b->len - i) : NULL;
    if (nl) b->len = (size_t)(nl - b->data) + 1;
    else if (i < b->len && buf_reserve(b, 1) == 0) b->data[b->len++] = '\n';
}

/* Whether the last line of text[0..len), unterminated, has grown past VRAM_TRACE_MAX_LINE bytes,
 * looking at the bytes from `from` on; *line_start follows the last newline. The readers stop
 * there (the parser then names the line), so input that is, or inflates to, one endless line is
 * not held whole. */
static int line_too_long(const char *text, size_t len, size_t from, size_t *line_start) {
    const char *q = text + from, *end = text + len, *nl;
    while (q < end && (nl = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        *line_start = (size_t)(nl + 1 - text);
        q = nl + 1;
    }
    return len - *line_start > VRAM_TRACE_MAX_LINE;
}

/* The most text a trace may hold, inflated: VRAM_TRACE_MAX_BYTES (a size such as 4GiB), else
 * VRAM_TRACE_DEFAULT_MAX_BYTES. A few MB of gzip can inflate to GiBs (of comment lines, say):
 * reading stops at the limit with an error rather than after a minute and as much memory. */
static vram_status trace_max_bytes(uint64_t *max) {
    const char *e = getenv("VRAM_TRACE_MAX_BYTES");
    *max = VRAM_TRACE_DEFAULT_MAX_BYTES;
    if (!e || !*e) return VRAM_OK;
    vram_status st = vram_parse_size(e, max);
    if (st == VRAM_OK && *max == 0) st = vram_error(VRAM_ERR_PARSE, "must be above 0");
    return st == VRAM_OK ? VRAM_OK : vram_error(st, "VRAM_TRACE_MAX_BYTES='%s': %s", e, vram_last_error());
}

static vram_status too_much_text(const char *name, uint64_t max) {
    return vram_error(VRAM_ERR_PARSE, "%s: more than %llu bytes of trace text (the limit VRAM_TRACE_MAX_BYTES sets; "
                      "a larger trace needs it raised, and gzip data that inflates without end is refused so)",
                      name, (unsigned long long)max);
}

#ifdef VRAM_HAVE_ZLIB
/* Reads data that starts with the gzip magic from fd (closed here) into b, inflated with zlib:
 * one member or several; after the last, only zero padding may follow. Anything else there is an
 * error (gzread would ignore it, so a second member whose header was damaged would silently end
 * the trace), as in the built-in decoder (gunzip.c). `pre`: the first npre bytes, already read. */
static vram_status read_gz(int fd, const char *name, text_buf *b, const unsigned char *pre, size_t npre, uint64_t max) {
    enum { IN = 1 << 18 };
    unsigned char *in = malloc(IN);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (!in || inflateInit2(&z, 15 + 16) != Z_OK) {
        free(in);
        close(fd);
        return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", name);
    }
    vram_status st = VRAM_OK;
    int started = 0, ended = 0, eof = 0; /* ended: the member before the input left has ended */
    size_t line_start = 0;
    memcpy(in, pre, npre); /* the bytes the caller read to see the magic */
    z.next_in = in;
    z.avail_in = (uInt)npre;
    for (;;) {
        if (z.avail_in == 0 && !eof) {
            ssize_t n = read(fd, in, IN);
            if (n < 0) {
                if (errno == EINTR) continue;
                st = vram_error(VRAM_ERR_IO, "%s: read error: %s", name, strerror(errno));
                break;
            }
            eof = n == 0;
            z.next_in = in;
            z.avail_in = (uInt)n;
        }
        if (ended) { /* between members: another one, zero padding, or the end */
            if (z.avail_in == 0) {
                if (eof) break;
                continue;
            }
            if (z.next_in[0] == 0) {
                z.next_in++;
                z.avail_in--;
                continue;
            }
            if (z.next_in[0] != 0x1f || (z.avail_in > 1 && z.next_in[1] != 0x8b)) {
                st = vram_error(VRAM_ERR_PARSE, "%s: data after the gzip data that starts no gzip member", name);
                break;
            }
            inflateReset(&z);
            ended = 0;
        }
        if (z.avail_in == 0 && eof) {
            st = vram_error(VRAM_ERR_PARSE, "%s: truncated gzip data", name);
            break;
        }
        if (buf_reserve(b, 1 << 20) != 0) {
            st = vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", name);
            break;
        }
        size_t room = b->cap - b->len;
        z.next_out = (Bytef *)b->data + b->len;
        z.avail_out = (uInt)(room > (1u << 30) ? 1u << 30 : room);
        uInt before = z.avail_out;
        int r = inflate(&z, Z_NO_FLUSH);
        size_t from = b->len;
        b->len += before - z.avail_out;
        if (b->len > max) {
            st = too_much_text(name, max);
            break;
        }
        if (line_too_long(b->data, b->len, from, &line_start)) break; /* the parser names the line */
        if (r == Z_STREAM_END) {
            ended = 1;
        } else if (r == Z_DATA_ERROR || r == Z_NEED_DICT) {
            st = vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (%s)", name, z.msg ? z.msg : "bad data");
            break;
        } else if (r == Z_MEM_ERROR) {
            st = vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", name);
            break;
        } else if (r != Z_OK && !(r == Z_BUF_ERROR && z.avail_in == 0)) {
            st = vram_error(VRAM_ERR_PARSE, "%s: corrupt gzip data (zlib error %d)", name, r);
            break;
        }
        if (!started && (started = trace_start(b->data, b->len)) < 0) {
            keep_first_line(b); /* the parser names the bad first line */
            break;
        }
    }
    inflateEnd(&z);
    free(in);
    close(fd);
    return st;
}
#endif

/* check_start: stop at once when the text cannot be a trace (not for gzip data read whole). */
static vram_status read_plain(int fd, const char *name, text_buf *b, int check_start, uint64_t max) {
    int started = 0;
    size_t line_start = 0;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
        if (buf_reserve(b, (size_t)sb.st_size + 1) != 0) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", name);
    }
    for (;;) {
        if (buf_reserve(b, 1 << 16) != 0) return vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", name);
        ssize_t n = read(fd, b->data + b->len, b->cap - b->len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return vram_error(VRAM_ERR_IO, "%s: read error: %s", name, strerror(errno));
        }
        if (n == 0) break;
        size_t from = b->len;
        b->len += (size_t)n;
        if (b->len > max) return too_much_text(name, max);
        if (check_start && !started && (started = trace_start(b->data, b->len)) < 0) {
            keep_first_line(b);
            break; /* the parser names the bad first line */
        }
        if (check_start && line_too_long(b->data, b->len, from, &line_start)) break; /* the parser names the line */
    }
    return VRAM_OK;
}

#ifndef VRAM_HAVE_ZLIB
/* The built-in decoder's `enough` (gunzip.h): stops it at a line too long for a trace, as
 * read_gz stops zlib's inflate. ctx: {where the last check ended, the current line's start}. */
static int gunzip_line_too_long(const uint8_t *out, size_t len, void *ctx) {
    size_t *at = ctx; /* the length checked so far, the last line's start, the limit */
    int stop = len > at[2] || line_too_long((const char *)out, len, at[0], &at[1]);
    at[0] = len;
    return stop;
}

/* Replaces b's text by its inflated form when it is gzip data (the built-in decoder). */
static vram_status gunzip_if_gzip(const char *name, text_buf *b, uint64_t max) {
    if (b->len < 2 || (unsigned char)b->data[0] != 0x1f || (unsigned char)b->data[1] != 0x8b) return VRAM_OK;
    uint8_t *plain;
    size_t plain_len, at[3] = {0, 0, max > SIZE_MAX ? SIZE_MAX : (size_t)max};
    vram_status st = vram_gunzip_until((const uint8_t *)b->data, b->len, name, gunzip_line_too_long, at, &plain,
                                       &plain_len);
    free(b->data);
    b->data = st == VRAM_OK ? (char *)plain : NULL;
    b->len = st == VRAM_OK ? plain_len : 0;
    b->cap = b->len;
    return st == VRAM_OK && b->len > max ? too_much_text(name, max) : st;
}
#endif

vram_status vram_trace_load(const char *path, vram_trace **out) {
    if (!path || !out) return vram_error(VRAM_ERR_INVALID_ARG, "trace: null argument");
    *out = NULL;
    double t0 = now_seconds();
    uint64_t max;
    vram_status lim = trace_max_bytes(&max);
    if (lim != VRAM_OK) return lim;
    int is_stdin = strcmp(path, "-") == 0;
    const char *why = NULL; /* a FIFO nobody writes to, a socket, a directory: said, never waited on */
    int fd = is_stdin ? dup(STDIN_FILENO) : vram_file_open_read(path, 1, &why);
    if (fd < 0 && why) return vram_error(VRAM_ERR_IO, "%s: %s", path, why);
    if (fd < 0) {
        if (errno == ENOENT) return vram_error(VRAM_ERR_NOT_FOUND, "%s: no such file", path);
        return vram_error(VRAM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        return vram_error(VRAM_ERR_IO, "%s: is a directory", path);
    }
    const char *name = is_stdin ? "<stdin>" : path;
    text_buf b = {0};
    vram_status st;
#ifdef VRAM_HAVE_ZLIB
    /* gzip data (by its magic) through zlib, anything else read as it is */
    unsigned char magic[2] = {0, 0};
    size_t nm = 0;
    while (nm < 2) { /* (a pipe may give them one at a time) */
        ssize_t k = read(fd, magic + nm, 2 - nm);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        nm += (size_t)k;
    }
    if (nm == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        st = read_gz(fd, name, &b, magic, nm, max); /* takes fd */
    } else if (buf_reserve(&b, nm) != 0) {
        close(fd);
        st = vram_error(VRAM_ERR_HOST_MEMORY, "%s: host out of memory", name);
    } else {
        if (nm) memcpy(b.data, magic, nm); /* (an empty file reserves nothing) */
        b.len = nm;
        st = read_plain(fd, name, &b, 1, max);
        close(fd);
    }
#else
    /* No zlib in this build: read everything, and inflate gzip data with the built-in
     * decoder (gunzip.c). */
    st = read_plain(fd, name, &b, 0, max);
    close(fd);
    if (st == VRAM_OK) st = gunzip_if_gzip(name, &b, max);
#endif
    if (st != VRAM_OK) {
        free(b.data);
        return st;
    }
    double read_s = now_seconds() - t0;
    vram_trace *t;
    st = vram_trace_parse(b.data, b.len, name, &t);
    free(b.data);
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
