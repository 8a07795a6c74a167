/* bpe_vocab.c — reading GPT-2's vocab.json for the tokenizer (bpe_internal.h): a JSON object of
 * token -> id, tokens spelled in GPT-2's byte alphabet, written either with \uXXXX escapes
 * (OpenAI's encoder.json) or as raw UTF-8 (Hugging Face's vocab.json).
 *
 * A small parser for exactly that shape: '{', then "string": integer pairs separated by commas,
 * then '}' and nothing but white space. Each key is decoded (escapes, surrogate pairs, raw UTF-8)
 * straight into the bytes it spells, appended to the tokenizer's pool, so the pool never exceeds
 * the file's size. Every error names the file and the byte offset: a bad character or escape, a
 * character outside the byte alphabet, an id that is negative or too large, a token or an id
 * given twice, a missing single-byte token (every byte must encode).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bpe_internal.h"

vram_status vram_bpe_read_file(const char *path, const char *what, char **out, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return vram_error(VRAM_ERR_NOT_FOUND, "tokenizer: cannot open the %s '%s': %s", what, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > VRAM_BPE_MAX_FILE) {
        fclose(fp);
        return vram_error(VRAM_ERR_PARSE, "tokenizer: the %s '%s' is not a regular file of at most %d MiB", what, path,
                          VRAM_BPE_MAX_FILE >> 20);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, fp) : 0;
    fclose(fp);
    if (!buf) return vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory reading '%s'", path);
    if (got != (size_t)st.st_size) {
        free(buf);
        return vram_error(VRAM_ERR_IO, "tokenizer: reading the %s '%s' failed", what, path);
    }
    buf[got] = 0;
    *out = buf;
    *len = got;
    return VRAM_OK;
}

typedef struct jp {
    const char *s, *path;
    size_t at, len;
} jp;

static void skip_ws(jp *j) {
    while (j->at < j->len && (j->s[j->at] == ' ' || j->s[j->at] == '\t' || j->s[j->at] == '\n' || j->s[j->at] == '\r'))
        j->at++;
}

static vram_status bad(const jp *j, const char *what) {
    return vram_error(VRAM_ERR_PARSE, "tokenizer: vocabulary '%s' byte %zu: %s", j->path, j->at, what);
}

static int hex4(const jp *j, size_t at, uint32_t *v) {
    *v = 0;
    for (size_t i = at; i < at + 4; i++) {
        if (i >= j->len) return 0;
        char c = j->s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v << 4 | (uint32_t)d;
    }
    return 1;
}

/* One code point of a JSON string at j->at (after the opening quote): an escape or raw UTF-8.
 * Returns 1 and advances, or 0 after an error. */
static int string_cp(jp *j, uint32_t *cp, vram_status *s) {
    const uint8_t *u = (const uint8_t *)j->s;
    if (u[j->at] < 0x20) return *s = bad(j, "a control character inside a string"), 0;
    if (u[j->at] != '\\') {
        int k = vram_bpe_utf8_next(u + j->at, j->len - j->at, cp);
        if (!k) return *s = bad(j, "not valid UTF-8"), 0;
        j->at += (size_t)k;
        return 1;
    }
    if (j->at + 1 >= j->len) return *s = bad(j, "the file ends inside an escape"), 0;
    char e = j->s[j->at + 1];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *f = e ? strchr(from, e) : NULL;
    if (f) {
        *cp = (uint8_t)to[f - from];
        j->at += 2;
        return 1;
    }
    uint32_t hi = 0, lo = 0;
    if (e != 'u' || !hex4(j, j->at + 2, &hi)) return *s = bad(j, "a bad escape"), 0;
    j->at += 6;
    if (hi >= 0xdc00 && hi <= 0xdfff) return *s = bad(j, "a lone low surrogate"), 0;
    if (hi >= 0xd800 && hi <= 0xdbff) { /* a surrogate pair */
        if (j->at + 1 >= j->len || j->s[j->at] != '\\' || j->s[j->at + 1] != 'u' || !hex4(j, j->at + 2, &lo) ||
            lo < 0xdc00 || lo > 0xdfff)
            return *s = bad(j, "a high surrogate without its low half"), 0;
        j->at += 6;
        hi = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    }
    *cp = hi;
    return 1;
}

/* A key at j->at (its opening quote) into the pool as the bytes it spells. */
static vram_status parse_key(jp *j, vram_bpe *t, size_t *off, uint32_t *n) {
    if (j->at >= j->len || j->s[j->at] != '"') return bad(j, "expected a token in double quotes");
    j->at++;
    *off = t->pool_len;
    vram_status s = VRAM_OK;
    while (j->at < j->len && j->s[j->at] != '"') {
        uint32_t cp = 0;
        size_t at = j->at;
        if (!string_cp(j, &cp, &s)) return s;
        int b = vram_bpe_cp_to_byte(cp);
        if (b < 0) {
            j->at = at;
            return bad(j, "a character outside GPT-2's byte alphabet (is this a GPT-2 vocab.json?)");
        }
        t->pool[t->pool_len++] = (uint8_t)b;
    }
    if (j->at >= j->len) return bad(j, "the file ends inside a string");
    j->at++;
    *n = (uint32_t)(t->pool_len - *off);
    return VRAM_OK;
}

static vram_status parse_id(jp *j, int32_t *id) {
    size_t start = j->at;
    long long v = 0;
    while (j->at < j->len && j->s[j->at] >= '0' && j->s[j->at] <= '9' && v < VRAM_BPE_MAX_ID)
        v = v * 10 + (j->s[j->at++] - '0');
    if (j->at == start) return bad(j, "expected a token id (a non-negative integer)");
    if (v >= VRAM_BPE_MAX_ID) return bad(j, "a token id beyond 16777215");
    *id = (int32_t)v;
    return VRAM_OK;
}

/* The entries (offset, length, id) of the object; *count of them. */
static vram_status parse_object(jp *j, vram_bpe *t, size_t *offs, uint32_t *lens, int32_t *ids, size_t *count) {
    skip_ws(j);
    if (j->at >= j->len || j->s[j->at] != '{') return bad(j, "expected '{' (a JSON object of token: id)");
    j->at++;
    skip_ws(j);
    size_t n = 0;
    vram_status s = VRAM_OK;
    if (j->at < j->len && j->s[j->at] == '}') j->at++;
    else
        for (;;) {
            skip_ws(j);
            if ((s = parse_key(j, t, &offs[n], &lens[n])) != VRAM_OK) return s;
            skip_ws(j);
            if (j->at >= j->len || j->s[j->at] != ':') return bad(j, "expected ':' after a token");
            j->at++;
            skip_ws(j);
            if ((s = parse_id(j, &ids[n])) != VRAM_OK) return s;
            n++;
            skip_ws(j);
            if (j->at < j->len && j->s[j->at] == ',') {
                j->at++;
                continue;
            }
            if (j->at < j->len && j->s[j->at] == '}') {
                j->at++;
                break;
            }
            return bad(j, "expected ',' or '}'");
        }
    skip_ws(j);
    if (j->at != j->len) return bad(j, "text after the object");
    if (!n) return bad(j, "the vocabulary is empty");
    *count = n;
    return VRAM_OK;
}

/* The id table and the bytes -> id hash from the parsed entries; duplicates are errors. */
static vram_status index_tokens(vram_bpe *t, const char *path, const size_t *offs, const uint32_t *lens, const int32_t *ids,
                                size_t n) {
    int32_t top = 0;
    for (size_t i = 0; i < n; i++) top = ids[i] > top ? ids[i] : top;
    t->vocab = top + 1;
    for (t->str_cap = 16; t->str_cap < 2 * n; t->str_cap *= 2) {}
    t->tok_off = malloc(sizeof *t->tok_off * (size_t)t->vocab);
    t->tok_len = calloc((size_t)t->vocab, sizeof *t->tok_len);
    t->str_slot = malloc(sizeof *t->str_slot * t->str_cap);
    if (!t->tok_off || !t->tok_len || !t->str_slot) return vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory");
    for (int32_t i = 0; i < t->vocab; i++) t->tok_off[i] = SIZE_MAX;
    memset(t->str_slot, 0xff, sizeof *t->str_slot * t->str_cap);
    for (size_t i = 0; i < n; i++) {
        if (t->tok_off[ids[i]] != SIZE_MAX)
            return vram_error(VRAM_ERR_PARSE, "tokenizer: vocabulary '%s': id %d is given to two tokens", path, ids[i]);
        if (vram_bpe_find(t, t->pool + offs[i], lens[i]) >= 0)
            return vram_error(VRAM_ERR_PARSE, "tokenizer: vocabulary '%s': a token is given twice (ids %d and %d)", path,
                              vram_bpe_find(t, t->pool + offs[i], lens[i]), ids[i]);
        t->tok_off[ids[i]] = offs[i];
        t->tok_len[ids[i]] = lens[i];
        size_t k = vram_bpe_hash(t->pool + offs[i], lens[i]) & (t->str_cap - 1);
        while (t->str_slot[k] >= 0) k = (k + 1) & (t->str_cap - 1);
        t->str_slot[k] = ids[i];
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if ((t->byte_id[b] = vram_bpe_find(t, &c, 1)) < 0)
            return vram_error(VRAM_ERR_PARSE, "tokenizer: vocabulary '%s' has no token for the byte 0x%02x (GPT-2's "
                              "vocabularies have all 256)", path, b);
    }
    return VRAM_OK;
}

vram_status vram_bpe_load_vocab(vram_bpe *t, const char *path) {
    char *buf = NULL;
    size_t len = 0;
    vram_status s = vram_bpe_read_file(path, "vocabulary", &buf, &len);
    if (s != VRAM_OK) return s;
    size_t cap = len / 5 + 2; /* an entry takes at least 5 bytes: "x":0, */
    size_t *offs = malloc(sizeof *offs * cap), n = 0;
    uint32_t *lens = malloc(sizeof *lens * cap);
    int32_t *ids = malloc(sizeof *ids * cap);
    t->pool = malloc(len + 1);
    if (!offs || !lens || !ids || !t->pool) s = vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory for '%s'", path);
    jp j = {buf, path, 0, len};
    if (s == VRAM_OK) s = parse_object(&j, t, offs, lens, ids, &n);
    if (s == VRAM_OK) s = index_tokens(t, path, offs, lens, ids, n);
    free(offs), free(lens), free(ids), free(buf);
    return s;
}
