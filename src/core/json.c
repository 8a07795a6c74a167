/* json.c — a C string written as a JSON string (RFC 8259), for every JSON that vram writes with
 * stdio (snapshots, replay and benchmark results).
 *
 * Quotes, backslashes and control characters are escaped; bytes of 0x80 and above are written as
 * they are where they form valid UTF-8 (so names in any language read back as written), and as
 * U+FFFD where they do not, so that the output is valid JSON whatever the input held.
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

void vram_json_write_string(FILE *f, const char *s, size_t max) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strnlen(s, max);
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == '"') fputs("\\\"", f);
        else if (c == '\\') fputs("\\\\", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else if (c < 0x80) fputc(c, f);
        else {
            size_t len = utf8_length(p + i, n - i);
            if (len) {
                fwrite(p + i, 1, len, f);
                i += len - 1;
            } else {
                fputs("\\ufffd", f);
            }
        }
    }
    fputc('"', f);
}
