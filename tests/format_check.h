/* format_check.h — strict readers for the text formats tools print, so tests can check output
 * field by field instead of grepping: JSON (RFC 8259, into a small tree), CSV lines in
 * nvidia-smi's ", "-separated shape (RFC 4180 quoting), and the Prometheus text exposition
 * format 0.0.4 (HELP/TYPE rules, metric and label names, escapes, values, one family per block,
 * no duplicate series).
 *
 * Each parser returns 0 on success or -1 with a message in `err` naming the line/offset.
 * Everything lives in static functions: include it in one test program.
 */
#ifndef VRAM_TESTS_FORMAT_CHECK_H
#define VRAM_TESTS_FORMAT_CHECK_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON -------------------------------------------------------------------------------- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
    int type;
    int boolean;
    double num;
    char raw[32];      /* the number's text, for exact integer comparison */
    char *str;         /* J_STR, decoded */
    size_t n;          /* J_ARR/J_OBJ: count */
    struct jv *items;  /* J_ARR/J_OBJ values */
    char **keys;       /* J_OBJ keys */
} jv;

typedef struct jparser {
    const char *p, *start;
    char *err;
    size_t err_cap;
    int depth;
} jparser;

static int jfail(jparser *ps, const char *what) {
    snprintf(ps->err, ps->err_cap, "JSON offset %ld: %s", (long)(ps->p - ps->start), what);
    return -1;
}

static void jws(jparser *ps) {
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

static void jfree(jv *v) {
    if (!v) return;
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

static int jstring(jparser *ps, char **out) {
    if (*ps->p != '"') return jfail(ps, "expected a string");
    ps->p++;
    size_t cap = 16, len = 0;
    char *s = malloc(cap);
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (!c) { free(s); return jfail(ps, "unterminated string"); }
        if (c < 0x20) { free(s); return jfail(ps, "raw control character in string"); }
        char tmp[4];
        size_t tn = 1;
        tmp[0] = (char)c;
        if (c == '\\') {
            ps->p++;
            switch (*ps->p) {
            case '"': tmp[0] = '"'; break;
            case '\\': tmp[0] = '\\'; break;
            case '/': tmp[0] = '/'; break;
            case 'b': tmp[0] = '\b'; break;
            case 'f': tmp[0] = '\f'; break;
            case 'n': tmp[0] = '\n'; break;
            case 'r': tmp[0] = '\r'; break;
            case 't': tmp[0] = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 1; i <= 4; i++) {
                    if (!isxdigit((unsigned char)ps->p[i])) { free(s); return jfail(ps, "bad \\u escape"); }
                    char h[2] = {ps->p[i], 0};
                    cp = cp * 16 + (unsigned)strtoul(h, NULL, 16);
                }
                ps->p += 4;
                if (cp < 0x80) tmp[0] = (char)cp;
                else if (cp < 0x800) { tmp[0] = (char)(0xC0 | (cp >> 6)); tmp[1] = (char)(0x80 | (cp & 63)); tn = 2; }
                else { tmp[0] = (char)(0xE0 | (cp >> 12)); tmp[1] = (char)(0x80 | ((cp >> 6) & 63)); tmp[2] = (char)(0x80 | (cp & 63)); tn = 3; }
                break;
            }
            default: free(s); return jfail(ps, "bad escape");
            }
        }
        ps->p++;
        if (len + tn + 1 > cap) { cap = (len + tn + 1) * 2; s = realloc(s, cap); }
        memcpy(s + len, tmp, tn);
        len += tn;
    }
    ps->p++;
    s[len] = '\0';
    *out = s;
    return 0;
}

static int jvalue(jparser *ps, jv *v);

static int jnumber(jparser *ps, jv *v) {
    const char *b = ps->p;
    if (*ps->p == '-') ps->p++;
    if (*ps->p == '0') ps->p++;
    else if (isdigit((unsigned char)*ps->p)) while (isdigit((unsigned char)*ps->p)) ps->p++;
    else return jfail(ps, "bad number");
    if (*ps->p == '.') {
        ps->p++;
        if (!isdigit((unsigned char)*ps->p)) return jfail(ps, "bad fraction");
        while (isdigit((unsigned char)*ps->p)) ps->p++;
    }
    if (*ps->p == 'e' || *ps->p == 'E') {
        ps->p++;
        if (*ps->p == '+' || *ps->p == '-') ps->p++;
        if (!isdigit((unsigned char)*ps->p)) return jfail(ps, "bad exponent");
        while (isdigit((unsigned char)*ps->p)) ps->p++;
    }
    v->type = J_NUM;
    size_t n = (size_t)(ps->p - b);
    if (n >= sizeof v->raw) n = sizeof v->raw - 1;
    memcpy(v->raw, b, n);
    v->raw[n] = '\0';
    v->num = strtod(v->raw, NULL);
    return 0;
}

static int jvalue(jparser *ps, jv *v) {
    memset(v, 0, sizeof *v);
    if (++ps->depth > 64) return jfail(ps, "nested too deep");
    jws(ps);
    int rc = 0;
    if (*ps->p == '{' || *ps->p == '[') {
        int obj = *ps->p == '{';
        char close = obj ? '}' : ']';
        v->type = obj ? J_OBJ : J_ARR;
        ps->p++;
        jws(ps);
        size_t cap = 0;
        if (*ps->p == close) {
            ps->p++;
        } else {
            for (;;) {
                if (v->n == cap) {
                    cap = cap ? cap * 2 : 4;
                    v->items = realloc(v->items, cap * sizeof *v->items);
                    if (obj) v->keys = realloc(v->keys, cap * sizeof *v->keys);
                }
                jws(ps);
                if (obj) {
                    memset(&v->items[v->n], 0, sizeof(jv));
                    v->keys[v->n] = NULL;
                    if (jstring(ps, &v->keys[v->n]) != 0) { v->n++; return -1; }
                    jws(ps);
                    if (*ps->p != ':') { v->n++; return jfail(ps, "expected ':'"); }
                    ps->p++;
                }
                rc = jvalue(ps, &v->items[v->n]);
                v->n++;
                if (rc) return rc;
                jws(ps);
                if (*ps->p == ',') { ps->p++; continue; }
                if (*ps->p == close) { ps->p++; break; }
                return jfail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
    } else if (*ps->p == '"') {
        v->type = J_STR;
        rc = jstring(ps, &v->str);
    } else if (!strncmp(ps->p, "null", 4)) {
        v->type = J_NULL;
        ps->p += 4;
    } else if (!strncmp(ps->p, "true", 4)) {
        v->type = J_BOOL;
        v->boolean = 1;
        ps->p += 4;
    } else if (!strncmp(ps->p, "false", 5)) {
        v->type = J_BOOL;
        ps->p += 5;
    } else {
        rc = jnumber(ps, v);
    }
    ps->depth--;
    return rc;
}

/* Parses one complete JSON text (only whitespace may follow). */
static int json_parse(const char *text, jv *out, char *err, size_t err_cap) {
    jparser ps = {text, text, err, err_cap, 0};
    if (jvalue(&ps, out) != 0) { jfree(out); return -1; }
    jws(&ps);
    if (*ps.p) { jfree(out); return jfail(&ps, "trailing text after the JSON value"); }
    return 0;
}

static const jv *jget(const jv *v, const char *key) {
    if (!v || v->type != J_OBJ) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key)) return &v->items[i];
    return NULL;
}

static const jv *jat(const jv *v, size_t i) {
    if (!v || v->type != J_ARR || i >= v->n) return NULL;
    return &v->items[i];
}

/* 1 if v is a number whose text is exactly the unsigned integer `want`. */
static int jis_u64(const jv *v, unsigned long long want) {
    if (!v || v->type != J_NUM) return 0;
    char w[32];
    snprintf(w, sizeof w, "%llu", want);
    return !strcmp(v->raw, w);
}

static int jis_null(const jv *v) { return v && v->type == J_NULL; }

static int jis_str(const jv *v, const char *want) { return v && v->type == J_STR && !strcmp(v->str, want); }

/* ---- CSV (nvidia-smi shape) -------------------------------------------------------------- */

#define CSV_MAX_FIELDS 32
typedef struct csv_row {
    size_t n;
    char f[CSV_MAX_FIELDS][512];
} csv_row;

/* Splits one line (no '\n') on commas; a field may start with one space (nvidia-smi's ", ")
 * and may be "quoted" with "" for a quote. */
static int csv_parse_line(const char *line, csv_row *row, char *err, size_t err_cap) {
    row->n = 0;
    const char *p = line;
    for (;;) {
        if (row->n == CSV_MAX_FIELDS) { snprintf(err, err_cap, "CSV: too many fields"); return -1; }
        char *o = row->f[row->n];
        size_t len = 0;
        if (row->n > 0 && *p == ' ') p++;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) { snprintf(err, err_cap, "CSV: unterminated quote in '%s'", line); return -1; }
                if (*p == '"') {
                    if (p[1] == '"') { p += 2; if (len < 511) o[len++] = '"'; continue; }
                    p++;
                    break;
                }
                if (len < 511) o[len++] = *p;
                p++;
            }
            if (*p && *p != ',') { snprintf(err, err_cap, "CSV: text after a closing quote in '%s'", line); return -1; }
        } else {
            while (*p && *p != ',') {
                if (*p == '"') { snprintf(err, err_cap, "CSV: stray quote in '%s'", line); return -1; }
                if (len < 511) o[len++] = *p;
                p++;
            }
        }
        o[len] = '\0';
        row->n++;
        if (!*p) return 0;
        p++; /* the comma */
    }
}

/* ---- Prometheus text exposition format --------------------------------------------------- */

#define PROM_MAX_LABELS 12
typedef struct prom_sample {
    char name[128];
    size_t nlabels;
    char label[PROM_MAX_LABELS][2][256];
    double value;
} prom_sample;

typedef struct prom_doc {
    prom_sample *s;
    size_t n;
} prom_doc;

static int prom_name_ok(const char *s, size_t n, int metric) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = isalpha((unsigned char)c) || c == '_' || (metric && c == ':') || (i > 0 && isdigit((unsigned char)c));
        if (!ok) return 0;
    }
    return 1;
}

static int prom_value_ok(const char *t, double *v) {
    if (!strcmp(t, "+Inf")) { *v = INFINITY; return 1; }
    if (!strcmp(t, "-Inf")) { *v = -INFINITY; return 1; }
    if (!strcmp(t, "NaN")) { *v = NAN; return 1; }
    char *end;
    *v = strtod(t, &end);
    return end != t && *end == '\0';
}

static void prom_free(prom_doc *d) {
    free(d->s);
    d->s = NULL;
    d->n = 0;
}

static int prom_parse(const char *text, prom_doc *doc, char *err, size_t err_cap) {
    memset(doc, 0, sizeof *doc);
    size_t cap = 0;
    char typed[256][128], helped[256][128], done[256][128];
    size_t ntyped = 0, nhelped = 0, ndone = 0;
    char current[128] = "";
    size_t lineno = 0;
    const char *p = text;
    if (*text && text[strlen(text) - 1] != '\n') { snprintf(err, err_cap, "prometheus: last line has no newline"); return -1; }
    while (*p) {
        lineno++;
        const char *nl = strchr(p, '\n');
        size_t len = (size_t)(nl - p);
        char line[2048];
        if (len >= sizeof line) { snprintf(err, err_cap, "prometheus line %zu: too long", lineno); goto fail; }
        memcpy(line, p, len);
        line[len] = '\0';
        p = nl + 1;
        if (!len) continue;
        if (line[0] == '#') {
            char kw[8], name[128];
            int off = 0;
            if (sscanf(line, "# %7s %127s %n", kw, name, &off) < 2) continue; /* a plain comment */
            if (strcmp(kw, "HELP") && strcmp(kw, "TYPE")) continue;
            if (!prom_name_ok(name, strlen(name), 1)) { snprintf(err, err_cap, "prometheus line %zu: bad metric name '%s'", lineno, name); goto fail; }
            char (*list)[128] = kw[0] == 'H' ? helped : typed;
            size_t *nl2 = kw[0] == 'H' ? &nhelped : &ntyped;
            for (size_t i = 0; i < *nl2; i++)
                if (!strcmp(list[i], name)) { snprintf(err, err_cap, "prometheus line %zu: second %s for %s", lineno, kw, name); goto fail; }
            for (size_t i = 0; i < ndone; i++)
                if (!strcmp(done[i], name)) { snprintf(err, err_cap, "prometheus line %zu: %s for %s after its samples", lineno, kw, name); goto fail; }
            if (kw[0] == 'T') {
                const char *t = line + off;
                if (strcmp(t, "counter") && strcmp(t, "gauge") && strcmp(t, "histogram") && strcmp(t, "summary") && strcmp(t, "untyped")) {
                    snprintf(err, err_cap, "prometheus line %zu: bad type '%s'", lineno, t);
                    goto fail;
                }
            }
            if (*nl2 < 256) snprintf(list[(*nl2)++], 128, "%s", name);
            continue;
        }
        if (doc->n == cap) {
            cap = cap ? cap * 2 : 64;
            doc->s = realloc(doc->s, cap * sizeof *doc->s);
        }
        prom_sample *s = &doc->s[doc->n];
        memset(s, 0, sizeof *s);
        const char *q = line;
        size_t nn = strcspn(q, "{ ");
        if (!prom_name_ok(q, nn, 1) || nn >= sizeof s->name) { snprintf(err, err_cap, "prometheus line %zu: bad metric name in '%.200s'", lineno, line); goto fail; }
        memcpy(s->name, q, nn);
        q += nn;
        if (*q == '{') {
            q++;
            while (*q != '}') {
                if (s->nlabels == PROM_MAX_LABELS) { snprintf(err, err_cap, "prometheus line %zu: too many labels", lineno); goto fail; }
                size_t ln = strcspn(q, "=");
                if (!prom_name_ok(q, ln, 0) || ln >= 256 || q[ln] != '=' || q[ln + 1] != '"') { snprintf(err, err_cap, "prometheus line %zu: bad label in '%.200s'", lineno, line); goto fail; }
                memcpy(s->label[s->nlabels][0], q, ln);
                for (size_t i = 0; i < s->nlabels; i++)
                    if (!strcmp(s->label[i][0], s->label[s->nlabels][0])) { snprintf(err, err_cap, "prometheus line %zu: label %s twice", lineno, s->label[i][0]); goto fail; }
                q += ln + 2;
                char *o = s->label[s->nlabels][1];
                size_t vl = 0;
                while (*q != '"') {
                    if (!*q) { snprintf(err, err_cap, "prometheus line %zu: unterminated label value", lineno); goto fail; }
                    char c = *q++;
                    if (c == '\\') {
                        c = *q++;
                        if (c == 'n') c = '\n';
                        else if (c != '\\' && c != '"') { snprintf(err, err_cap, "prometheus line %zu: bad escape in label value", lineno); goto fail; }
                    }
                    if (vl < 255) o[vl++] = c;
                }
                q++;
                s->nlabels++;
                if (*q == ',') q++;
                else if (*q != '}') { snprintf(err, err_cap, "prometheus line %zu: expected ',' or '}' in '%.200s'", lineno, line); goto fail; }
            }
            q++;
        }
        if (*q != ' ') { snprintf(err, err_cap, "prometheus line %zu: expected a space before the value", lineno); goto fail; }
        q++;
        char val[64] = "", ts[64] = "";
        int k = sscanf(q, "%63s %63s", val, ts);
        if (k < 1 || !prom_value_ok(val, &s->value)) { snprintf(err, err_cap, "prometheus line %zu: bad value '%s'", lineno, q); goto fail; }
        if (k == 2 && strspn(ts, "-0123456789") != strlen(ts)) { snprintf(err, err_cap, "prometheus line %zu: bad timestamp '%s'", lineno, ts); goto fail; }
        /* TYPE must come before the samples, and a family's samples must be together. */
        int has_type = 0;
        for (size_t i = 0; i < ntyped; i++) has_type |= !strcmp(typed[i], s->name);
        if (!has_type) { snprintf(err, err_cap, "prometheus line %zu: sample of %s without a TYPE line before it", lineno, s->name); goto fail; }
        if (strcmp(current, s->name)) {
            for (size_t i = 0; i < ndone; i++)
                if (!strcmp(done[i], s->name)) { snprintf(err, err_cap, "prometheus line %zu: %s samples are split in two blocks", lineno, s->name); goto fail; }
            if (ndone < 256) snprintf(done[ndone++], 128, "%s", s->name);
            snprintf(current, sizeof current, "%s", s->name);
        }
        for (size_t i = 0; i < doc->n; i++) { /* same name and label set twice */
            prom_sample *o = &doc->s[i];
            if (strcmp(o->name, s->name) || o->nlabels != s->nlabels) continue;
            int same = 1;
            for (size_t a = 0; a < s->nlabels && same; a++) {
                int found = 0;
                for (size_t b = 0; b < o->nlabels; b++)
                    found |= !strcmp(o->label[b][0], s->label[a][0]) && !strcmp(o->label[b][1], s->label[a][1]);
                same = found;
            }
            if (same) { snprintf(err, err_cap, "prometheus line %zu: duplicate series of %s", lineno, s->name); goto fail; }
        }
        doc->n++;
    }
    return 0;
fail:
    prom_free(doc);
    return -1;
}

static const char *prom_label(const prom_sample *s, const char *name) {
    for (size_t i = 0; i < s->nlabels; i++)
        if (!strcmp(s->label[i][0], name)) return s->label[i][1];
    return NULL;
}

/* The sample of `name` whose label `lname` is `lvalue` (NULL lname: the first of that name). */
static const prom_sample *prom_find(const prom_doc *d, const char *name, const char *lname, const char *lvalue) {
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->s[i].name, name)) continue;
        if (!lname) return &d->s[i];
        const char *v = prom_label(&d->s[i], lname);
        if (v && !strcmp(v, lvalue)) return &d->s[i];
    }
    return NULL;
}

#endif
