/* bpe_pretok.c — GPT-2's pre-tokenizer (bpe.h) without a regex engine, UTF-8 decoding, and the
 * byte-to-unicode map.
 *
 * The pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ is
 * tried alternative by alternative at each position, as a backtracking engine does: a contraction
 * (lowercase only); an optional space (U+0020 only) and a run of letters, or of numbers, or of
 * "other" characters (neither white space, letter nor number); else a run of white space, less
 * its last character when a non-space follows (that one goes with the next piece: "a  b" is "a",
 * " ", " b"), or the single white-space character where nothing else matched. Every code point is
 * a letter, a number, white space or other, so every position starts a piece and the pieces
 * cover the text. Classes come from bpe_unicode.c (generated from the regex module).
 */
#include <stdlib.h>

#include "bpe_internal.h"

int vram_bpe_utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || (size_t)len > n) return 0;
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* below: an overlong form */
    if (v < least[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

/* The bytes GPT-2 spells as themselves: '!'..'~', 0xa1..0xac, 0xae..0xff; the other 68 take
 * U+0100 onwards in byte order. */
static int printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff); }

uint32_t vram_bpe_byte_to_cp(uint8_t b) {
    if (printable(b)) return b;
    uint32_t k = 0;
    for (int x = 0; x < b; x++) k += !printable(x);
    return 256 + k;
}

int vram_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return printable((int)cp) ? (int)cp : -1;
    for (int b = 0, k = 0; b < 256; b++)
        if (!printable(b) && 256 + k++ == (int)cp) return b;
    return -1;
}

enum { CL_LETTER, CL_NUMBER, CL_SPACE, CL_OTHER };

static int in_ranges(const vram_bpe_range *r, int count, uint32_t cp) {
    int lo = 0, hi = count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static int classify(uint32_t cp) {
    if (cp < 128) { /* the common case, without a search */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CL_LETTER;
        if (cp >= '0' && cp <= '9') return CL_NUMBER;
        return cp == ' ' || (cp >= 9 && cp <= 13) ? CL_SPACE : CL_OTHER;
    }
    if (in_ranges(vram_bpe_letters, vram_bpe_letters_count, cp)) return CL_LETTER;
    if (in_ranges(vram_bpe_numbers, vram_bpe_numbers_count, cp)) return CL_NUMBER;
    return in_ranges(vram_bpe_spaces, vram_bpe_spaces_count, cp) ? CL_SPACE : CL_OTHER;
}

/* The length (in code points) of the piece starting at cp[i] of n, classes cl. */
static int64_t piece_at(const uint32_t *cp, const uint8_t *cl, int64_t i, int64_t n) {
    if (cp[i] == '\'' && i + 1 < n) { /* 's 't 're 've 'm 'll 'd */
        uint32_t a = cp[i + 1], b = i + 2 < n ? cp[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    int64_t j = i + (cp[i] == ' ' && i + 1 < n); /* " ?" then a run of one class */
    for (int c = CL_LETTER; c <= CL_OTHER; c++) {
        if (c == CL_SPACE) continue;
        if (cl[j] == c) {
            int64_t k = j + 1;
            while (k < n && cl[k] == c) k++;
            return k - i;
        }
    }
    /* only white space is left at i (a space before a space or the end matched nothing above) */
    int64_t k = i + 1;
    while (k < n && cl[k] == CL_SPACE) k++;
    if (k < n && k - i >= 2) return k - i - 1; /* \s+(?!\S): the last one goes with what follows */
    return k - i;                              /* \s+(?!\S) at the end, or \s+ */
}

vram_status vram_bpe_pretokenize(const char *text, size_t len, size_t **ends, int64_t *n) {
    const uint8_t *s = (const uint8_t *)text;
    uint32_t *cp = malloc(sizeof *cp * (len + 1));
    uint8_t *cl = malloc(len + 1);
    size_t *off = malloc(sizeof *off * (len + 1)); /* byte offset of each code point, and the end */
    size_t *out = malloc(sizeof *out * (len + 1));
    if (!cp || !cl || !off || !out) {
        free(cp), free(cl), free(off), free(out);
        return vram_error(VRAM_ERR_HOST_MEMORY, "tokenizer: out of host memory for %zu bytes of text", len);
    }
    int64_t m = 0;
    for (size_t at = 0; at < len; m++) {
        int k = vram_bpe_utf8_next(s + at, len - at, &cp[m]);
        if (!k) {
            free(cp), free(cl), free(off), free(out);
            return vram_error(VRAM_ERR_INVALID_ARG, "tokenizer: the text is not valid UTF-8 at byte %zu (0x%02x)", at, s[at]);
        }
        cl[m] = (uint8_t)classify(cp[m]);
        off[m] = at;
        at += (size_t)k;
    }
    off[m] = len;
    int64_t count = 0;
    for (int64_t i = 0; i < m;) {
        i += piece_at(cp, cl, i, m);
        out[count++] = off[i];
    }
    free(cp), free(cl), free(off);
    *ends = out;
    *n = count;
    return VRAM_OK;
}

long vram_bpe_spell(const uint8_t *s, size_t n, uint8_t *dst) {
    long k = 0;
    for (size_t at = 0; at < n;) {
        uint32_t cp = 0;
        int len = vram_bpe_utf8_next(s + at, n - at, &cp), b = len ? vram_bpe_cp_to_byte(cp) : -1;
        if (b < 0) return -1;
        dst[k++] = (uint8_t)b;
        at += (size_t)len;
    }
    return k;
}
