/* status.c — status names, the thread-local last-error detail, and size parsing/formatting.
 *
 * The detail buffer is per thread (C11 _Thread_local), so concurrent callers of the allocator
 * each see their own message. vram_error() formats into it (through a copy, so the previous
 * message may be one of its arguments) and hands the status back, which keeps error paths to one
 * line at the call site.
 */
#include "vram/vram.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[4096]; /* holds a whole out-of-memory report (allocator_internal.h: 2048) */

const char *vram_status_str(vram_status status) {
    switch (status) {
    case VRAM_OK: return "ok";
    case VRAM_ERR_INVALID_ARG: return "invalid argument";
    case VRAM_ERR_OUT_OF_MEMORY: return "out of memory";
    case VRAM_ERR_NOT_FOUND: return "not found";
    case VRAM_ERR_NO_DEVICE: return "no device";
    case VRAM_ERR_DRIVER: return "driver error";
    case VRAM_ERR_PARSE: return "parse error";
    case VRAM_ERR_IO: return "i/o error";
    case VRAM_ERR_UNSUPPORTED: return "unsupported";
    case VRAM_ERR_STATE: return "invalid state";
    case VRAM_ERR_SHAPE: return "shape mismatch";
    case VRAM_ERR_INTERNAL: return "internal error";
    case VRAM_ERR_HOST_MEMORY: return "host out of memory";
    }
    return "unknown status";
}

const char *vram_last_error(void) { return last_error; }

void vram_error_clear(void) { last_error[0] = '\0'; }

/* Formats through a copy: callers often wrap the message before it, as in
 * vram_error(st, "host device: %s", vram_last_error()), whose argument is last_error itself. */
vram_status vram_error(vram_status status, const char *fmt, ...) {
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    msg[len] = '\0';
    memcpy(last_error, msg, len + 1);
    return status;
}

/* A size: a number (integers exactly, decimals through a double) and an optional unit. */
vram_status vram_parse_size(const char *text, uint64_t *out) {
    if (!text || !out) return vram_error(VRAM_ERR_INVALID_ARG, "size: null argument");
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return vram_error(VRAM_ERR_PARSE, "bad size '%s': expected a number such as 512, 64KiB or 80GiB", text);
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) /* strtod would read hexadecimal */
        return vram_error(VRAM_ERR_PARSE, "bad size '%s': write it in decimal (e.g. 256, 1.5GiB)", text);
    errno = 0;
    char *end, *int_end;
    double value = strtod(p, &end);
    if (end == p || !(value >= 0))
        return vram_error(VRAM_ERR_PARSE, "bad size '%s': expected a number such as 512, 64KiB or 80GiB", text);
    if (errno == ERANGE || isinf(value)) return vram_error(VRAM_ERR_PARSE, "bad size '%s': too large", text);
    errno = 0;
    unsigned long long whole = strtoull(p, &int_end, 10);
    int exact = int_end == end && errno != ERANGE; /* digits only: no fraction or exponent */
    while (isspace((unsigned char)*end)) end++;
    static const struct { const char *suffix; uint64_t mult; } units[] = {
        {"", 1}, {"B", 1},
        {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"KB", 1000ull},
        {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"MB", 1000000ull},
        {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"GB", 1000000000ull},
        {"T", 1ull << 40}, {"TiB", 1ull << 40}, {"TB", 1000000000000ull},
    };
    size_t ulen = strlen(end); /* blanks after the unit are ignored, as blanks before the number */
    while (ulen && isspace((unsigned char)end[ulen - 1])) ulen--;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].suffix) == ulen && strncmp(end, units[i].suffix, ulen) == 0) {
            if (exact) {
                if (whole > UINT64_MAX / units[i].mult) return vram_error(VRAM_ERR_PARSE, "bad size '%s': too large", text);
                *out = whole * units[i].mult;
                return VRAM_OK;
            }
            double bytes = value * (double)units[i].mult;
            if (bytes >= 18446744073709551615.0)
                return vram_error(VRAM_ERR_PARSE, "bad size '%s': too large", text);
            *out = (uint64_t)(bytes + 0.5);
            return VRAM_OK;
        }
    }
    return vram_error(VRAM_ERR_PARSE, "bad size '%s': unknown unit '%s' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", text, end);
}

/* Whole bytes below 1 KiB ("1 byte", "0 bytes"), else two decimals in the largest unit that
 * keeps the figure at 1 or more (1 MiB is "1.00 MiB", not "1024.00 KiB"). */
char *vram_format_size(uint64_t bytes, char *buf, size_t cap) {
    if (bytes < 1024)
        snprintf(buf, cap, "%llu byte%s", (unsigned long long)bytes, bytes == 1 ? "" : "s");
    else if (bytes < 1048576ull)
        snprintf(buf, cap, "%.2f KiB", (double)bytes / 1024.0);
    else if (bytes < 1073741824ull)
        snprintf(buf, cap, "%.2f MiB", (double)bytes / 1048576.0);
    else if (bytes < (1ull << 40))
        snprintf(buf, cap, "%.2f GiB", (double)bytes / 1073741824.0);
    else
        snprintf(buf, cap, "%.2f TiB", (double)bytes / 1099511627776.0);
    return buf;
}
