/* json_check.h — a strict JSON validator for tests (RFC 8259: objects, arrays, strings with
 * escapes, numbers, true/false/null; no trailing commas, no comments). It checks syntax only;
 * tests look for values with strstr. Recursive descent with a depth limit.
 */
#ifndef VRAM_TESTS_JSON_CHECK_H
#define VRAM_TESTS_JSON_CHECK_H

#include <string.h>

typedef struct json_cursor {
    const char *p, *end;
    int depth;
} json_cursor;

static void json_ws(json_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int json_value(json_cursor *c);

static int json_string_ok(json_cursor *c) {
    if (c->p >= c->end || *c->p != '"') return 0;
    c->p++;
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p;
        if (ch < 0x20) return 0;
        if (ch == '\\') {
            c->p++;
            if (c->p >= c->end) return 0;
            char e = *c->p;
            if (e == 'u') {
                for (int i = 1; i <= 4; i++) {
                    if (c->p + i >= c->end) return 0;
                    char h = c->p[i];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return 0;
                }
                c->p += 4;
            } else if (!strchr("\"\\/bfnrt", e)) {
                return 0;
            }
        }
        c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    return 1;
}

static int json_number_ok(json_cursor *c) {
    const char *s = c->p;
    if (c->p < c->end && *c->p == '-') c->p++;
    if (c->p >= c->end) return 0;
    if (*c->p == '0') c->p++;
    else if (*c->p >= '1' && *c->p <= '9') while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    else return 0;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    return c->p > s;
}

static int json_word(json_cursor *c, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return 0;
    c->p += n;
    return 1;
}

static int json_value(json_cursor *c) {
    if (++c->depth > 64) return 0;
    json_ws(c);
    if (c->p >= c->end) return 0;
    int ok;
    if (*c->p == '{') {
        c->p++;
        json_ws(c);
        ok = 1;
        if (c->p < c->end && *c->p == '}') c->p++;
        else {
            for (;;) {
                json_ws(c);
                if (!json_string_ok(c)) { ok = 0; break; }
                json_ws(c);
                if (c->p >= c->end || *c->p != ':') { ok = 0; break; }
                c->p++;
                if (!json_value(c)) { ok = 0; break; }
                json_ws(c);
                if (c->p < c->end && *c->p == ',') { c->p++; continue; }
                if (c->p < c->end && *c->p == '}') { c->p++; break; }
                ok = 0;
                break;
            }
        }
    } else if (*c->p == '[') {
        c->p++;
        json_ws(c);
        ok = 1;
        if (c->p < c->end && *c->p == ']') c->p++;
        else {
            for (;;) {
                if (!json_value(c)) { ok = 0; break; }
                json_ws(c);
                if (c->p < c->end && *c->p == ',') { c->p++; continue; }
                if (c->p < c->end && *c->p == ']') { c->p++; break; }
                ok = 0;
                break;
            }
        }
    } else if (*c->p == '"') {
        ok = json_string_ok(c);
    } else if (*c->p == 't') {
        ok = json_word(c, "true");
    } else if (*c->p == 'f') {
        ok = json_word(c, "false");
    } else if (*c->p == 'n') {
        ok = json_word(c, "null");
    } else {
        ok = json_number_ok(c);
    }
    c->depth--;
    return ok;
}

/* 1 when text[0..len) is exactly one JSON value (surrounding whitespace allowed). */
static inline int json_valid(const char *text, size_t len) {
    json_cursor c = {text, text + len, 0};
    if (!json_value(&c)) return 0;
    json_ws(&c);
    return c.p == c.end;
}

#endif
