/* text.c — text from outside (trace names, process command lines, config strings) made safe to
 * write: as a JSON string (RFC 8259), for every JSON that vram writes, and as printable text, for
 * terminals and line formats.
 *
 * Both keep what is valid UTF-8 (names in any language read back as written) and replace what is
 * not. JSON escapes quotes, backslashes and control characters and writes U+FFFD for a byte
 * that is not UTF-8: vram_json_escape hands the pieces to a sink (smi's output buffer),
 * vram_json_write_string to a stdio stream (snapshots, replay and benchmark results).
 * vram_text_printable turns control characters and bytes that are not UTF-8 into '?' in place,
 * as ps shows a command line, so that no terminal escape and no broken sequence gets through.
 */
#include "vram/vram.h"

#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at p[0..n), or 0. */
static size_t utf8_length(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t k = 1; k < len; k++)
        if ((p[k] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))) return 0; /* overlong, surrogate */
    if (len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))) return 0; /* overlong, > U+10FFFF */
    return len;
}

void vram_json_escape(const char *s, size_t max, void (*put)(void *sink, const char *bytes, size_t n), void *sink) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strnlen(s, max);
    put(sink, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        size_t plain = i; /* a run of characters written as they are, in one piece */
        while (plain < n && p[plain] >= 0x20 && p[plain] < 0x7f && p[plain] != '"' && p[plain] != '\\') plain++;
        if (plain > i) {
            put(sink, (const char *)p + i, plain - i);
            i = plain - 1;
            continue;
        }
        unsigned char c = p[i];
        char esc[8];
        if (c == '"') put(sink, "\\\"", 2);
        else if (c == '\\') put(sink, "\\\\", 2);
        else if (c == '\n') put(sink, "\\n", 2);
        else if (c == '\r') put(sink, "\\r", 2);
        else if (c == '\t') put(sink, "\\t", 2);
        else if (c < 0x20 || c == 0x7f) put(sink, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", c));
        else {
            size_t len = utf8_length(p + i, n - i);
            if (len) {
                put(sink, (const char *)p + i, len);
                i += len - 1;
            } else {
                put(sink, "\\ufffd", 6);
            }
        }
    }
    put(sink, "\"", 1);
}

static void put_file(void *f, const char *bytes, size_t n) { fwrite(bytes, 1, n, f); }

void vram_json_write_string(FILE *f, const char *s, size_t max) { vram_json_escape(s, max, put_file, f); }

void vram_text_printable(char *s) {
    unsigned char *p = (unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f) p[i] = '?';
        else if (p[i] >= 0x80) {
            size_t len = utf8_length(p + i, n - i);
            if (len) i += len - 1;
            else p[i] = '?';
        }
    }
}
