/* bpe.c — GPT-2's byte-level BPE tokenizer (bpe.h): the vocabulary and merges read from their
 * files, encoding by merge rank, decoding.
 *
 * Every token is kept as the bytes it stands for (the files' characters mapped back through
 * GPT-2's byte-to-unicode map, bpe_pretok.c), in one pool: tok_off/tok_len by id. Two open-
 * addressing hash tables: token bytes -> id (to read merges.txt), and the pair of ids (a, b) ->
 * (rank, id of a+b) for each merge line, rank being the line's order (a later duplicate wins, as
 * in OpenAI's dict). Encoding a piece starts from one symbol per byte (the single-byte tokens) and,
 * as OpenAI's bpe() does, repeatedly finds the adjacent pair of lowest rank and merges every
 * occurrence of it left to right, until no adjacent pair is a merge. Merging ids rather than
 * strings gives the same result because a merge's result must itself be a token (checked on load).
 */
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

uint64_t vram_bpe_hash(const uint8_t *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

int32_t vram_bpe_find(const vram_bpe *t, const uint8_t *s, size_t n) {
    for (size_t i = vram_bpe_hash(s, n) & (t->str_cap - 1);; i = (i + 1) & (t->str_cap - 1)) {
        int32_t id = t->str_slot[i];
        if (id < 0) return -1;
        if (t->tok_len[id] == n && !memcmp(t->pool + t->tok_off[id], s, n)) return id;
    }
}

static const vram_bpe_pair *pair_find(const vram_bpe *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (size_t i = mix(key) & (t->pair_cap - 1);; i = (i + 1) & (t->pair_cap - 1)) {
        if (t->pairs[i].key == key) return &t->pairs[i];
        if (!t->pairs[i].key) return NULL;
    }
}

static vram_status load_merges(vram_bpe *t, const char *path) {
    char *buf = NULL;
    size_t len = 0;
    vram_status s = vram_bpe_read_file(path, "merges file", &buf, &len);
    if (s != VRAM_OK) return s;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    for (t->pair_cap = 16; t->pair_cap < 2 * lines; t->pair_cap *= 2) {}
    t->pairs = calloc(t->pair_cap, sizeof *t->pairs);
    uint8_t *tmp = malloc(len + 1);
    if (!t->pairs || !tmp) s = vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory for '%s'", path);
    size_t line = 0;
    int32_t rank = 0;
    for (char *p = buf; s == VRAM_OK && p < buf + len;) {
        char *end = memchr(p, '\n', (size_t)(buf + len - p));
        if (!end) end = buf + len;
        line++;
        size_t n = (size_t)(end - p);
        if (n && p[n - 1] == '\r') n--;
        char *sp = memchr(p, ' ', n);
        if (n == 0 || (line == 1 && !strncmp(p, "#version", 8))) { /* the header, blank lines */
        } else if (!sp || sp == p || sp + 1 == p + n || memchr(sp + 1, ' ', (size_t)(p + n - sp - 1))) {
            s = vram_error(VRAM_ERR_PARSE, "tokenizer: merges file '%s' line %zu: not two tokens separated by one space",
                           path, line);
        } else {
            /* both halves' bytes side by side in tmp: their join follows for free */
            long la = vram_bpe_spell((const uint8_t *)p, (size_t)(sp - p), tmp);
            long lb = la < 0 ? -1 : vram_bpe_spell((const uint8_t *)sp + 1, (size_t)(p + n - sp - 1), tmp + la);
            int32_t a = la < 0 ? -1 : vram_bpe_find(t, tmp, (size_t)la), b = lb < 0 ? -1 : vram_bpe_find(t, tmp + la, (size_t)lb);
            int32_t ab = a < 0 || b < 0 ? -1 : vram_bpe_find(t, tmp, (size_t)(la + lb));
            if (la < 0 || lb < 0)
                s = vram_error(VRAM_ERR_PARSE, "tokenizer: merges file '%s' line %zu: a character outside GPT-2's byte "
                               "alphabet (or bad UTF-8)", path, line);
            else if (ab < 0)
                s = vram_error(VRAM_ERR_PARSE, "tokenizer: merges file '%s' line %zu: '%.*s' merges tokens the vocabulary "
                               "lacks (it needs both halves and their join)", path, line, (int)n, p);
            else {
                uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
                size_t i = mix(key) & (t->pair_cap - 1);
                while (t->pairs[i].key && t->pairs[i].key != key) i = (i + 1) & (t->pair_cap - 1);
                t->n_pairs += !t->pairs[i].key;
                t->pairs[i] = (vram_bpe_pair){key, rank++, ab};
            }
        }
        p = end + 1;
    }
    free(tmp);
    free(buf);
    return s;
}

vram_status vram_bpe_load(const char *vocab_json, const char *merges_txt, vram_bpe **out) {
    if (!vocab_json || !merges_txt || !out) return vram_error(VRAM_ERR_INVALID_ARG, "tokenizer: null argument");
    vram_bpe *t = calloc(1, sizeof *t);
    if (!t) return vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory");
    vram_status s = vram_bpe_load_vocab(t, vocab_json);
    if (s == VRAM_OK) s = load_merges(t, merges_txt);
    if (s != VRAM_OK) {
        vram_bpe_free(t);
        return s;
    }
    *out = t;
    return VRAM_OK;
}

void vram_bpe_free(vram_bpe *t) {
    if (!t) return;
    free(t->pool);
    free(t->tok_off);
    free(t->tok_len);
    free(t->str_slot);
    free(t->pairs);
    free(t);
}

int32_t vram_bpe_vocab_size(const vram_bpe *t) { return t->vocab; }

/* The ids of one piece's bytes, appended to ids; sym: scratch of n. Returns the count. */
static int64_t encode_piece(const vram_bpe *t, const uint8_t *s, size_t n, int32_t *sym, int32_t *ids) {
    int64_t m = (int64_t)n;
    for (size_t i = 0; i < n; i++) sym[i] = t->byte_id[s[i]];
    for (;;) {
        int32_t best = INT32_MAX, first = -1, second = -1, merged = -1;
        for (int64_t i = 0; i + 1 < m; i++) {
            const vram_bpe_pair *p = pair_find(t, sym[i], sym[i + 1]);
            if (p && p->rank < best) best = p->rank, first = sym[i], second = sym[i + 1], merged = p->merged;
        }
        if (first < 0) break;
        int64_t w = 0;
        for (int64_t i = 0; i < m; i++) {
            if (i + 1 < m && sym[i] == first && sym[i + 1] == second) {
                sym[w++] = merged;
                i++;
            } else {
                sym[w++] = sym[i];
            }
        }
        m = w;
    }
    memcpy(ids, sym, sizeof *ids * (size_t)m);
    return m;
}

vram_status vram_bpe_encode(const vram_bpe *t, const char *text, size_t len, int32_t **ids, int64_t *n) {
    if (!t || (!text && len) || !ids || !n) return vram_error(VRAM_ERR_INVALID_ARG, "tokenizer: null argument");
    size_t *ends = NULL;
    int64_t pieces = 0;
    vram_status s = vram_bpe_pretokenize(text ? text : "", len, &ends, &pieces);
    if (s != VRAM_OK) return s;
    int32_t *out = malloc(sizeof *out * (len + 1)), *sym = malloc(sizeof *sym * (len + 1));
    if (!out || !sym) {
        free(out), free(sym), free(ends);
        return vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory for %zu bytes of text", len);
    }
    int64_t count = 0;
    for (int64_t p = 0, start = 0; p < pieces; start = (int64_t)ends[p++])
        count += encode_piece(t, (const uint8_t *)text + start, ends[p] - (size_t)start, sym, out + count);
    free(sym);
    free(ends);
    *ids = out;
    *n = count;
    return VRAM_OK;
}

vram_status vram_bpe_decode(const vram_bpe *t, const int32_t *ids, int64_t n, char **text, size_t *len) {
    if (!t || (!ids && n) || n < 0 || !text || !len) return vram_error(VRAM_ERR_INVALID_ARG, "tokenizer: null argument");
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab || t->tok_off[ids[i]] == SIZE_MAX)
            return vram_error(VRAM_ERR_INVALID_ARG, "tokenizer: token id %d (position %lld) is not in the vocabulary of %d",
                              ids[i], (long long)i, t->vocab);
        total += t->tok_len[ids[i]];
    }
    char *out = malloc(total + 1);
    if (!out) return vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory");
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        memcpy(out + at, t->pool + t->tok_off[ids[i]], t->tok_len[ids[i]]);
        at += t->tok_len[ids[i]];
    }
    out[at] = 0;
    *text = out;
    *len = at;
    return VRAM_OK;
}
