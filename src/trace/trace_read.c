/* trace_read.c — reading a trace's text into memory: plain files directly, gzip through zlib
 * (or the built-in decoder of gunzip.c in a build without zlib), "-" as standard input; a FIFO
 * nobody writes is refused, and VRAM_TRACE_MAX_BYTES bounds what inflated input may hold. */
#include "../core/file_open.h"
#include "trace_read.h"
#include "vram/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef VRAM_HAVE_ZLIB
#include <zlib.h>
#else
#include "gunzip.h"
#endif

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
    while (i < n && (vram_trace_is_blank(d[i]) || d[i] == '\n')) i++;
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

/* Reads the whole trace at `path` ("-": standard input) into one buffer, inflating gzip
 * data; *name is what messages call it. The caller frees *text. */
vram_status vram_trace_read_text(const char *path, char **text, size_t *len, const char **name_out) {
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
    *name_out = name;
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
    *text = b.data;
    *len = b.len;
    return VRAM_OK;
}
