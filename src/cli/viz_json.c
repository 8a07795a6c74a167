/* viz_json.c — the JSON reader of viz_json.h: recursive descent over the text, at most 64
 * levels deep, nodes appended to one growing array (so indices, not pointers, link them: the
 * array moves as it grows). Strings go, unescaped and NUL-terminated, into one growing buffer
 * whose offsets are turned into pointers once parsing is done.
 */
#include "viz_json.h"

#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *s, *end, *name;
    viz_json_doc *d;
    const char *base; /* start of the text, for offsets in messages */
} parser;

#define MAX_DEPTH 64

static vram_status fail(parser *p, const char *what) {
    return vram_error(VRAM_ERR_PARSE, "%s: not valid JSON at byte %zu: %s", p->name, (size_t)(p->s - p->base), what);
}

static void skip_ws(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static long new_node(parser *p, viz_json_type t) {
    viz_json_doc *d = p->d;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4096;
        viz_json *nodes = realloc(d->nodes, cap * sizeof *nodes);
        if (!nodes) return -1;
        d->nodes = nodes;
        d->cap = cap;
    }
    d->nodes[d->n] = (viz_json){t, NULL, NULL, 0, -1, -1, 0};
    return (long)d->n++;
}

static int put_char(viz_json_doc *d, char c) {
    if (d->ns == d->caps) {
        size_t cap = d->caps ? d->caps * 2 : 4096;
        char *s = realloc(d->strings, cap);
        if (!s) return 0;
        d->strings = s;
        d->caps = cap;
    }
    d->strings[d->ns++] = c;
    return 1;
}

static int put_utf8(viz_json_doc *d, unsigned long cp) {
    if (cp < 0x80) return put_char(d, (char)cp);
    if (cp < 0x800) return put_char(d, (char)(0xc0 | cp >> 6)) && put_char(d, (char)(0x80 | (cp & 63)));
    if (cp < 0x10000)
        return put_char(d, (char)(0xe0 | cp >> 12)) && put_char(d, (char)(0x80 | (cp >> 6 & 63))) &&
               put_char(d, (char)(0x80 | (cp & 63)));
    return put_char(d, (char)(0xf0 | cp >> 18)) && put_char(d, (char)(0x80 | (cp >> 12 & 63))) &&
           put_char(d, (char)(0x80 | (cp >> 6 & 63))) && put_char(d, (char)(0x80 | (cp & 63)));
}

static int hex4(const char *s, unsigned long *out) {
    unsigned long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int h = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
        if (h < 0) return 0;
        v = v << 4 | (unsigned long)h;
    }
    *out = v;
    return 1;
}

/* Parses a string at p->s (the opening quote); *offset: where it lies in d->strings. */
static vram_status parse_string(parser *p, size_t *offset) {
    *offset = p->d->ns;
    p->s++;
    while (p->s < p->end && *p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) return fail(p, "control character in a string");
        if (c != '\\') {
            if (!put_char(p->d, (char)c)) return vram_error(VRAM_ERR_OUT_OF_MEMORY, "host out of memory");
            p->s++;
            continue;
        }
        if (p->end - p->s < 2) return fail(p, "unfinished escape");
        char e = p->s[1];
        const char *plain = strchr("\"\\/bfnrt", e);
        unsigned long cp = 0;
        if (e && plain) {
            static const char out[] = "\"\\/\b\f\n\r\t";
            cp = (unsigned char)out[plain - "\"\\/bfnrt"];
            p->s += 2;
        } else if (e == 'u' && p->end - p->s >= 6 && hex4(p->s + 2, &cp)) {
            p->s += 6;
            unsigned long lo;
            if (cp >= 0xd800 && cp < 0xdc00 && p->end - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u' &&
                hex4(p->s + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p->s += 6;
            } else if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd; /* a lone surrogate */
        } else return fail(p, "bad escape");
        if (!put_utf8(p->d, cp)) return vram_error(VRAM_ERR_OUT_OF_MEMORY, "host out of memory");
    }
    if (p->s >= p->end) return fail(p, "unterminated string (the file is cut short?)");
    p->s++;
    if (!put_char(p->d, '\0')) return vram_error(VRAM_ERR_OUT_OF_MEMORY, "host out of memory");
    return VRAM_OK;
}

static vram_status parse_value(parser *p, int depth, long *out);

/* An array or object at p->s; node `self` collects the children. */
static vram_status parse_container(parser *p, int depth, long self) {
    char close = *p->s == '[' ? ']' : '}';
    int obj = close == '}';
    p->s++;
    skip_ws(p);
    long last = -1;
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return VRAM_OK;
    }
    for (;;) {
        size_t key = (size_t)-1;
        skip_ws(p);
        if (obj) {
            if (p->s >= p->end || *p->s != '"') return fail(p, "expected a member name");
            vram_status st = parse_string(p, &key);
            if (st != VRAM_OK) return st;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':') return fail(p, "expected ':'");
            p->s++;
        }
        long child;
        vram_status st = parse_value(p, depth + 1, &child);
        if (st != VRAM_OK) return st;
        p->d->nodes[child].key = (const char *)key; /* an offset until the end (viz_json_parse) */
        if (last < 0) p->d->nodes[self].first = child;
        else p->d->nodes[last].next = child;
        last = child;
        p->d->nodes[self].count++;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            return VRAM_OK;
        }
        return fail(p, p->s >= p->end ? "the text ends inside an array or object (cut short?)" : "expected ',' or a closing bracket");
    }
}

static vram_status parse_value(parser *p, int depth, long *out) {
    if (depth > MAX_DEPTH) return fail(p, "nested too deeply");
    skip_ws(p);
    if (p->s >= p->end) return fail(p, "expected a value, the text ends (cut short?)");
    char c = *p->s;
    viz_json_type t = c == '{' ? VIZ_JSON_OBJ : c == '[' ? VIZ_JSON_ARR : c == '"' ? VIZ_JSON_STR
                    : c == 't' || c == 'f' ? VIZ_JSON_BOOL : c == 'n' ? VIZ_JSON_NULL : VIZ_JSON_NUM;
    long self = new_node(p, t);
    if (self < 0) return vram_error(VRAM_ERR_OUT_OF_MEMORY, "host out of memory");
    *out = self;
    if (t == VIZ_JSON_OBJ || t == VIZ_JSON_ARR) return parse_container(p, depth, self);
    if (t == VIZ_JSON_STR) {
        size_t off;
        vram_status st = parse_string(p, &off);
        p->d->nodes[self].str = (const char *)off;
        return st;
    }
    static const char *words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t n = strlen(words[w]);
        if ((size_t)(p->end - p->s) >= n && !memcmp(p->s, words[w], n)) {
            p->d->nodes[self].num = w == 0;
            p->s += n;
            return VRAM_OK;
        }
    }
    if (t != VIZ_JSON_NUM) return fail(p, "unknown word");
    char buf[64];
    size_t n = 0;
    while (p->s + n < p->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", p->s[n])) n++;
    memcpy(buf, p->s, n);
    buf[n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (n == 0 || end != buf + n) return fail(p, "expected a value");
    p->d->nodes[self].num = v;
    p->s += n;
    return VRAM_OK;
}

vram_status viz_json_parse(const char *text, size_t len, const char *name, viz_json_doc *doc) {
    memset(doc, 0, sizeof *doc);
    parser p = {text, text + len, name ? name : "JSON", doc, text};
    long root;
    vram_status st = parse_value(&p, 0, &root);
    skip_ws(&p);
    if (st == VRAM_OK && p.s != p.end) st = fail(&p, "text after the end of the value");
    if (st != VRAM_OK) {
        viz_json_free(doc);
        return st;
    }
    for (size_t i = 0; i < doc->n; i++) { /* offsets into the string buffer, now that it has stopped moving */
        viz_json *n = &doc->nodes[i];
        if (n->key != (const char *)(size_t)-1 && (i != 0)) n->key = doc->strings + (size_t)n->key;
        else n->key = NULL;
        if (n->type == VIZ_JSON_STR) n->str = doc->strings + (size_t)n->str;
    }
    return VRAM_OK;
}

void viz_json_free(viz_json_doc *doc) {
    free(doc->nodes);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

const viz_json *viz_json_get(const viz_json_doc *d, const viz_json *o, const char *key) {
    if (!o || o->type != VIZ_JSON_OBJ) return NULL;
    for (long c = o->first; c >= 0; c = d->nodes[c].next)
        if (d->nodes[c].key && !strcmp(d->nodes[c].key, key)) return &d->nodes[c];
    return NULL;
}

double viz_json_num(const viz_json_doc *d, const viz_json *o, const char *key, double def) {
    const viz_json *v = viz_json_get(d, o, key);
    return v && v->type == VIZ_JSON_NUM ? v->num : def;
}

const char *viz_json_str(const viz_json_doc *d, const viz_json *o, const char *key, const char *def) {
    const viz_json *v = viz_json_get(d, o, key);
    return v && v->type == VIZ_JSON_STR ? v->str : def;
}
